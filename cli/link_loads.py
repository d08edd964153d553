"""Reading ``fabric view --link-loads``: the load of every physical link from a JSON or NPZ file.

``fabric simulate --links --json`` output (its ``links`` records, matched to
the fabric's links by their ends), or a JSON object / NPZ archive of
``utilisation`` and ``bytes`` arrays with one value per physical link.  Kept
apart from :mod:`cli.view` so that the CLI's start-up does not import numpy
(issue 18); the view imports it when ``--link-loads`` is given.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np

from fabric.errors import FabricError

#: Largest load value read (utilisation or bytes): the page stores them as float32 (max 3.4e38).
MAX_LOAD = 1e30


def _from_records(records: list, n_links: int, where: str = "--link-loads",
                  ends=None) -> tuple[np.ndarray, np.ndarray]:
    """Per-link arrays from ``fabric simulate --links --json`` records.

    The records list every link that carried bytes; the others were idle (0).
    A circuit's load goes to both of its OCS-port fibres.  ``ends(j)`` (the two
    device names of physical link ``j``), when given, is checked against each
    record's ``src`` and ``dst``: a file simulated on another fabric has link ids
    in range that name other devices.
    """
    util = np.zeros(n_links)
    nbytes = np.zeros(n_links)
    for i, rec in enumerate(records):
        f = f"{where}:links[{i}]"
        if not isinstance(rec, dict):
            raise FabricError(f, "must be a link record of `fabric simulate --links --json`")
        ids = [rec["link"]] if rec.get("link") is not None else rec.get("circuit_links")
        if not isinstance(ids, list) or not ids:
            raise FabricError(f"{f}.link", "missing; give the physical link id ('link' or 'circuit_links') "
                                           "as `fabric simulate --links --json` writes it")
        values = {k: rec.get(k) for k in ("utilisation", "bytes_fwd", "bytes_rev")}
        for k, v in values.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= MAX_LOAD:
                raise FabricError(f"{f}.{k}", f"{v!r} must be a number in [0, {MAX_LOAD:g}]")
        for j in ids:
            if isinstance(j, bool) or not isinstance(j, int) or not 0 <= j < n_links:
                raise FabricError(f"{f}.link", f"link id {j!r} is not a physical link of this fabric "
                                               f"(0..{n_links - 1}); was it simulated on another one?")
        if ends is not None and rec.get("link") is not None and "src" in rec and "dst" in rec:
            here = ends(rec["link"])
            if {str(rec["src"]), str(rec["dst"])} != set(here):
                raise FabricError(f"{f}.link", f"link {rec['link']} joins {here[0]} and {here[1]} in this fabric, "
                                               f"not {rec['src']} and {rec['dst']}: was it simulated on another one?")
        for j in ids:  # under the check above, a circuit's record (link null) and one without src/dst were dropped
            util[j] = max(util[j], float(values["utilisation"]))
            nbytes[j] = max(nbytes[j], float(values["bytes_fwd"]) + float(values["bytes_rev"]))
    return util, nbytes


def _read_npz(path: Path, field: str, n_links: int) -> dict[str, np.ndarray]:
    """The ``utilisation`` and ``bytes`` arrays of an NPZ file (float, as given), checked for kind and size."""
    import zipfile

    from fabric.files import input_file

    input_file(path, field)
    if not zipfile.is_zipfile(path):  # numpy would call it pickled data
        raise FabricError(field, f"{path.name} is not an NPZ file (numpy.savez writes one)")
    try:
        with np.load(path, allow_pickle=False) as data:
            keys = [k for k in data.files if k in ("utilisation", "bytes")]
            for k in keys:
                _check_npy_size(data.zip, k, n_links, f"{field} {path.name}:{k}")
            cols = {k: data[k] for k in keys}
            for k, v in cols.items():  # complex, bool, text or object arrays are not loads
                if v.dtype.kind not in "iuf":
                    raise FabricError(f"{field} {path.name}:{k}", f"has dtype {v.dtype}; give real numbers")
            return {k: np.asarray(v, dtype=float) for k, v in cols.items()}
    except FabricError:
        raise
    except (OSError, ValueError, TypeError, KeyError, AttributeError, EOFError, zipfile.BadZipFile) as exc:
        raise FabricError(field, f"cannot read {path.name}: {exc}") from None


def _check_npy_size(archive, key: str, n_links: int, field: str) -> None:
    """Refuse array ``key`` of an open NPZ ``archive`` whose header declares more values than the fabric has links.

    Read from the header before numpy allocates the array: a 100-byte file declaring 10**11 values ended in
    "out of memory (MemoryError); try a smaller --gpus".  A member that is no .npy array is refused too (numpy
    returned its bytes, then "'bytes' object has no attribute 'dtype'").
    """
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    name = f"{key}.npy" if f"{key}.npy" in archive.namelist() else key  # numpy lists members without ".npy"
    with archive.open(name) as fh:
        version = np.lib.format.read_magic(fh)  # ValueError for a member that is not .npy
        if version not in readers:  # a newer header (3.0: unicode field names): numpy's own reader decides
            return
        shape = readers[version](fh)[0]
    count = math.prod(shape)
    if count > n_links:
        raise FabricError(field, f"declares {count:,} values (shape {shape}); the fabric has {n_links} physical "
                                 "links")


def read_link_loads(path: Path, n_links: int, ends=None) -> tuple[Optional[np.ndarray], Optional[np.ndarray]]:
    """Utilisation and bytes per physical link from a file.

    Accepted: the JSON of ``fabric simulate ... --links --json`` (its
    ``links`` records), or a JSON object / NPZ file with ``utilisation``
    and/or ``bytes`` arrays of one value per physical link id.
    """
    from fabric.files import load_json

    field = "--link-loads"
    path = Path(path)
    if path.suffix == ".npz":
        cols = _read_npz(path, field, n_links)
    else:
        doc = load_json(path, field)
        if not isinstance(doc, dict):
            raise FabricError(field, f"{path.name} must be a JSON object")
        if "links" in doc and "nodes" in doc:
            raise FabricError(field, f"{path.name} is a topology file, not link loads; give the output of "
                                     "`fabric simulate --links --json`")
        if "links" in doc and ("utilisation" in doc or "bytes" in doc):  # the arrays were dropped without a word
            raise FabricError(field, f"{path.name} has both 'links' records and 'utilisation'/'bytes' arrays; give "
                                     "one of the two")
        if isinstance(doc.get("links"), list):
            return _from_records(doc["links"], n_links, path.name, ends)
        cols = {}
        for k in ("utilisation", "bytes"):
            if k in doc:
                if not isinstance(doc[k], list):  # null read as one NaN: "has 1 values"
                    raise FabricError(f"{path.name}:{k}", "must be a list of numbers, one per physical link")
                if any(isinstance(x, bool) for x in doc[k]):
                    raise FabricError(f"{path.name}:{k}", "must be a list of numbers (true/false are not loads)")
                big = next((i for i, x in enumerate(doc[k]) if isinstance(x, int) and abs(x) > MAX_LOAD), None)
                if big is not None:  # an integer past a float's range was an OverflowError traceback
                    raise FabricError(f"{field} {path.name}:{k}[{big}]", f"must be a number in [0, {MAX_LOAD:g}]")
                try:
                    cols[k] = np.asarray(doc[k], dtype=float)
                except (ValueError, TypeError, OverflowError):
                    raise FabricError(f"{path.name}:{k}", "must be a list of numbers, one per physical link") \
                        from None
    if not cols:
        raise FabricError(field, "needs the 'links' of `fabric simulate --links --json`, or 'utilisation' "
                                 "and/or 'bytes' arrays (one value per physical link)")
    for k, v in cols.items():
        if v.ndim != 1:  # [[0.5], ...] has as many rows as links, and was refused as "96 values; the fabric has 96"
            raise FabricError(f"{field} {path.name}:{k}", f"must be a flat list of numbers (one per physical link), "
                                                          f"not an array of shape {v.shape}")
        if v.shape != (n_links,):
            raise FabricError(field, f"{k!r} has {v.size} values; the fabric has {n_links} physical links")
        bad = np.flatnonzero(~((v >= 0) & (v <= MAX_LOAD)))  # NaN fails both comparisons: refused too
        if bad.size:  # one check for JSON and NPZ alike
            raise FabricError(f"{field} {path.name}:{k}[{bad[0]}]",
                              f"{v[bad[0]]:g} must be a number in [0, {MAX_LOAD:g}]")
    return cols.get("utilisation"), cols.get("bytes")
