"""Sweep results on disk: hive-partitioned Parquet, one file per batch, written atomically.

Layout of an output folder::

    OUT/_sweep.json                              manifest: study, fingerprint, tool and schema version
    OUT/_study.yaml                              the spec that produced the rows
    OUT/_report.html                             the study report (`fabric report OUT`), if written
    OUT/architecture=dgx/batch-000017.parquet    one file per batch

The ``architecture`` column lives in the folder name (hive partitioning), so
``pandas.read_parquet(OUT)``, ``pyarrow.dataset`` and DuckDB read the folder
as one table.  Names that start with ``_`` or ``.`` are skipped by those
readers, which is why the manifest and the temporary files use them.

A batch file appears complete or not at all: it is written under a temporary
name in the same folder, fsynced, then renamed with :func:`os.replace`.  Only
the driver writes (workers return rows), so a killed sweep leaves at worst a
temporary file, which the next run removes.

One writer per folder: a sweep holds an exclusive ``flock`` on ``OUT/.lock``
from its checks to its last batch, and a second sweep into the same folder is
refused (exit 2) rather than racing it for batch numbers.  The kernel drops
the lock when the holder dies, so ``--resume`` after a kill is not blocked.

Every batch file carries a key in its Parquet metadata (``fabric.sweep``), and
``--overwrite`` deletes only those files, the manifest and the spec copy: a
user's own files in the folder survive.  A batch that cannot be read (a
truncated copy, a disk error) is named by :func:`read_results`; ``--resume``
moves it aside as ``.batch-N.parquet.corrupt`` and recomputes its points.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

from fabric.errors import FabricError

SCHEMA_VERSION = 1
"""Version of the row layout; bump when columns change meaning (readers refuse newer rows)."""
MANIFEST = "_sweep.json"
SPEC_COPY = "_study.yaml"
REPORT = "_report.html"
"""`fabric report DIR` writes here by default; ``--overwrite`` deletes it with the rows it showed."""
PARTITION = "architecture"
_BATCH_RE = re.compile(r"^batch-(\d+)\.parquet$")
LOCK = ".lock"
#: Parquet key-value metadata that marks a file as written by ``fabric sweep``.
STAMP_KEY = b"fabric.sweep"


def _fsync_dir(path: Path) -> None:
    """Make a rename in ``path`` durable (POSIX; a no-op where directories cannot be opened)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: Path, write) -> None:
    """Write ``path`` via ``write(file)`` on a temporary name in the same folder, fsync, rename.

    The temporary name starts with ``.`` so readers ignore it; on any error it is removed.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def partition_dir(out: Path, architecture: str) -> Path:
    return out / f"{PARTITION}={architecture}"


def batch_files(out: Path) -> list[Path]:
    """Complete batch files of a sweep folder, sorted by path."""
    return sorted(p for p in out.glob(f"{PARTITION}=*/batch-*.parquet") if _BATCH_RE.match(p.name))


def _fixed_types() -> dict[str, Any]:
    import pyarrow as pa

    return {"point_id": pa.string(), "point_index": pa.int64(), "study": pa.string(), "label": pa.string(),
            "gpus": pa.int64(), "workload": pa.string(), "tp": pa.int64(), "fault_model": pa.string(),
            "fault_ratio": pa.float64(), "fault_component": pa.string(), "fault_trace": pa.string(),
            "seed": pa.int64(), "status": pa.string(),
            "error": pa.string(), "tool_version": pa.string(), "schema_version": pa.int64()}


def rows_to_table(rows: list[dict[str, Any]]):
    """An Arrow table of ``rows`` without the partition column (it is the folder name).

    Columns are the union over rows in first-seen order (a failed row lacks
    the metric columns; a row without a value gets null).  The input and
    status columns have fixed types; any other column that is null in every
    row is left out, because a null-typed column in the first file of a folder
    makes ``pyarrow.dataset`` fail on the typed column of the next file.
    """
    import pyarrow as pa

    names: dict[str, None] = {}
    for r in rows:
        names.update(dict.fromkeys(r))
    names.pop(PARTITION, None)
    fixed = _fixed_types()
    cols = {}
    for n in names:
        arr = pa.array([r.get(n) for r in rows], type=fixed.get(n))
        if arr.type != pa.null():
            cols[n] = arr
    return pa.table(cols)


def write_batch(out: Path, architecture: str, number: int, rows: list[dict[str, Any]]) -> Path:
    """Write one batch's rows to ``OUT/architecture=<arch>/batch-<number>.parquet`` atomically."""
    import pyarrow.parquet as pq

    table = rows_to_table(rows)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), STAMP_KEY: b"1"})
    folder = partition_dir(out, architecture)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"batch-{number:06d}.parquet"
    atomic_write(path, lambda fh: pq.write_table(table, fh))
    return path


def read_results(out: Path):
    """All rows of a sweep folder as a pandas DataFrame (``architecture`` column restored).

    Use this rather than ``pandas.read_parquet(out)``: pyarrow takes the
    columns of the first file it finds, so the ``p_`` parameters and metric
    columns that only other architectures or batches have would be dropped;
    here the schemas of all files are unified.

    Raises
    ------
    FabricError
        If ``out`` holds no batch files, or rows of a newer schema version.
    """
    import pyarrow as pa

    files = batch_files(out)
    if not files:
        raise FabricError("DIR", f"no sweep results in {out} (expected {PARTITION}=*/batch-*.parquet)")
    tables = []
    for f in files:
        t = _read_batch(f)
        arch = f.parent.name.split("=", 1)[1]
        where = t.schema.get_field_index("label")  # inputs first: ..., study, architecture, label, ...
        t = t.add_column(max(where, 0), PARTITION, pa.array([arch] * t.num_rows, pa.string()))
        tables.append(t)
    # "permissive": a column missing from one batch (a failed metric) is null there
    try:
        df = pa.concat_tables(tables, promote_options="permissive").to_pandas()
    except (pa.ArrowTypeError, pa.ArrowInvalid) as exc:  # a column typed differently in two batches
        raise FabricError("DIR", f"the batches of {out} disagree on a column's type ({_first_line(exc)}): "
                                 f"{_odd_batch(files, tables)} is not of this sweep; move it out") from None
    if "schema_version" in df and df["schema_version"].max() > SCHEMA_VERSION:
        raise FabricError("DIR", f"{out} holds rows of schema version {int(df['schema_version'].max())}, newer "
                                 f"than this tool's {SCHEMA_VERSION}: upgrade hbd-fabric to read them")
    return df


def _odd_batch(files: list[Path], tables: list) -> str:
    """The batch file to move out: the first whose type for some column is not the one most batches have.

    Against the majority, not the first file: the first file may be the odd one (it was then the second, a good
    batch, that was named).  With no majority (two batches, two types) the first that differs from the first.
    """
    import pyarrow as pa

    null = _null()

    def kind(t):  # string and large_string merge: not a disagreement
        return pa.string() if pa.types.is_large_string(t) else t

    kinds: dict[str, Counter] = defaultdict(Counter)
    for t in tables:
        for f in t.schema:
            if f.type != null:
                kinds[f.name][kind(f.type)] += 1
    top = {name: counts.most_common(2) for name, counts in kinds.items()}
    for path, t in zip(files, tables):
        for f in t.schema:
            ranked = top.get(f.name, [])
            if len(ranked) == 2 and ranked[0][1] > ranked[1][1] and f.type != null and kind(f.type) != ranked[0][0]:
                return f"{path} (its column {f.name!r} is {f.type}, {ranked[0][1]} other batches' {ranked[0][0]})"
    first = {f.name: f.type for f in tables[0].schema}
    for path, t in zip(files[1:], tables[1:]):
        if any(f.name in first and not first[f.name].equals(f.type) and f.type != null for f in t.schema):
            return str(path)
    return str(files[0])


def _null():
    import pyarrow as pa

    return pa.null()


def point_ids(out: Path):
    """The ``point_id`` column of every batch of ``out``, as a pandas Series (one entry per row)."""
    import pandas as pd

    return pd.Series([i for f in batch_files(out) for i in _read_batch(f, columns=["point_id"]).column(
        "point_id").to_pylist()], dtype=object)


def point_warnings(out: Path, point_ids) -> list[str]:
    """What the rows of ``out`` lack or repeat: points counted twice, fewer points than the sweep's manifest.

    A batch copied in twice would count its points twice in every mean; a sweep killed and not resumed (or a
    batch deleted) would be read as if complete.  Neither is an error (each row is whole), but neither may pass
    in silence.
    """
    problems = []
    distinct = point_ids.nunique()
    if distinct < len(point_ids):
        problems.append(f"{out} holds {len(point_ids) - distinct:,} row(s) of points already in it (a batch copied "
                        f"twice?); they count twice in the comparison")
    expected = read_manifest(out).get("points")  # none, or a damaged one: damaged_metadata says so
    if isinstance(expected, int) and distinct < expected:
        problems.append(f"{out} holds {distinct:,} of the {expected:,} points of its sweep (killed, or a batch "
                        f"removed); `fabric sweep SPEC --out {out} --resume` completes it")
    return problems


def damaged_metadata(out: Path) -> list[str]:
    """What is wrong with the sweep's own files in ``out`` (the manifest, the spec copy), one line each.

    The rows stand without them (each batch file is whole), so readers warn rather than refuse; but a file that
    is there and cannot be read means the folder was damaged, and must not pass in silence.
    """
    problems = []
    for name in (MANIFEST, SPEC_COPY):
        path = out / name
        if not path.is_file():
            continue
        try:
            doc = _load_metadata(path)
        except FabricError as exc:
            problems.append(f"{path} cannot be read ({exc.message})")
            continue
        if not isinstance(doc, dict):
            problems.append(f"{path} is not a mapping")
    return problems


def _load_metadata(path: Path) -> Any:
    """The parsed manifest or spec copy at ``path``, through the input-file reader of every other file.

    ``json.loads`` and ``yaml.safe_load`` of a damaged file nested a hundred thousand brackets deep raised
    RecursionError, so `fabric results` failed with "out of stack ... try a smaller --gpus" instead of warning.
    """
    from fabric.files import load_json, load_yaml

    return (load_json if path.name == MANIFEST else load_yaml)(path, "DIR")


def read_manifest(out: Path) -> dict[str, Any]:
    """The sweep manifest of folder ``out``, or an empty mapping when it is missing or damaged (the rows stand
    without it; :func:`damaged_metadata` names what is wrong)."""
    try:
        doc = _load_metadata(out / MANIFEST)
    except FabricError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _read_batch(path: Path, columns: list[str] | None = None):
    """One batch file as an Arrow table; a file that cannot be read is named in a FabricError."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        t = pq.read_table(path, columns=columns)
        if "point_id" not in t.column_names:
            raise pa.ArrowInvalid("no point_id column")
        return t
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise FabricError("DIR", f"batch {path} is corrupt or truncated ({_first_line(exc)}); "
                                 f"`fabric sweep SPEC --out DIR --resume` recomputes its points") from None


def read_batch_columns(path: Path, columns: list[str]):
    """Columns ``columns`` of one batch file (an Arrow table); a FabricError names a file that cannot give them."""
    return _read_batch(path, columns=columns)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def present_point_ids(out: Path, warn=None) -> tuple[set[str], int]:
    """Point ids already written, and the next free batch number.

    A batch that cannot be read is moved aside (``.batch-N.parquet.corrupt``,
    which readers skip) and reported through ``warn(message)``; its points
    then count as missing, so ``--resume`` recomputes them.
    """
    ids: set[str] = set()
    next_no = 0
    for f in batch_files(out):
        next_no = max(next_no, int(_BATCH_RE.match(f.name).group(1)) + 1)
        try:
            ids.update(_read_batch(f, columns=["point_id"]).column("point_id").to_pylist())
        except FabricError as exc:
            aside = f.with_name(f".{f.name}.corrupt")
            os.replace(f, aside)
            if warn is not None:
                warn(f"warning: {exc.message.split(';')[0]}; moved aside as {aside.name}, its points are recomputed")
    for f in out.glob(f"{PARTITION}=*/.batch-*.parquet.corrupt"):  # keep numbering past files moved aside
        m = _BATCH_RE.match(f.name[1:-len(".corrupt")])
        if m:
            next_no = max(next_no, int(m.group(1)) + 1)
    return ids, next_no


# ---------------------------------------------------------------------------------------------- one writer
class FolderLock:
    """An exclusive, non-blocking ``flock`` on ``OUT/.lock`` for the life of a sweep.

    Raises
    ------
    FabricError
        ``--out`` when another sweep holds the folder, or when the folder or
        its lock file cannot be created.
    """

    def __init__(self, out: Path):
        self.out = out
        self._fd: int | None = None
        self.created = False

    def __enter__(self) -> "FolderLock":
        import fcntl

        try:
            self.created = not self.out.exists()
            self.out.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.out / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise FabricError("--out", f"cannot create {self.out}: {exc.strerror or exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.read(fd, 64).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise FabricError("--out", f"{self.out} is being written by another sweep (pid {holder}); wait for it "
                                       f"to finish, then --resume, or pick another --out") from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing drops the flock; the file stays (removing it would race a waiter)
            self._fd = None

    def discard_if_unused(self) -> None:
        """Remove a folder this lock created when nothing else was written in it."""
        if self.created and {e.name for e in self.out.iterdir()} <= {LOCK}:
            shutil.rmtree(self.out, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- folder checks
def _is_ours(entry: Path) -> bool:
    return (entry.name in (MANIFEST, SPEC_COPY, REPORT, LOCK) or entry.name.startswith(f"{PARTITION}=")
            or (entry.name.startswith(".") and entry.name.endswith(".tmp")))


def _stamped(path: Path) -> bool:
    """Whether a batch file carries the sweep's metadata key (a user's own file does not)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return STAMP_KEY in (pq.read_schema(path).metadata or {})
    except (pa.ArrowException, OSError, ValueError):
        return False


def _remove_sweep_files(out: Path) -> None:
    """``--overwrite``: delete what sweeps wrote (stamped batches, manifest, spec copy, the report of those rows,
    temporaries), nothing else."""
    for name in (MANIFEST, SPEC_COPY, REPORT):  # a report left behind showed the deleted rows as the new study's
        (out / name).unlink(missing_ok=True)
    for folder in out.glob(f"{PARTITION}=*"):
        if not folder.is_dir():
            continue
        for f in folder.iterdir():
            corrupt = f.name.startswith(".batch-") and f.name.endswith(".parquet.corrupt")
            tmp = f.name.startswith(".") and f.name.endswith(".tmp")
            if (f.is_file() and _BATCH_RE.match(f.name) and _stamped(f)) or corrupt or tmp:
                f.unlink(missing_ok=True)
        try:
            folder.rmdir()  # only when nothing of the user's is left in it
        except OSError:
            pass


def check_out_dir(out: Path, resume: bool, overwrite: bool, fingerprint: str) -> None:
    """Refuse an output folder that cannot or must not be written, before anything is written.

    Raises
    ------
    FabricError
        ``--out`` names a file, lies under a file, is not writable; holds
        results and neither ``--resume`` nor ``--overwrite`` was given; holds
        other files (``--overwrite`` deletes only a sweep's own files); or
        ``--resume`` meets results of other metrics or another catalog.
    """
    if resume and overwrite:
        raise FabricError("--resume", "give either --resume or --overwrite, not both")
    if "\x00" in str(out):  # no file system takes it (os.mkdir raised ValueError: a traceback)
        raise FabricError("--out", f"{str(out)[:60]!r} holds a NUL byte; give a folder name without it")
    try:
        out.exists()
    except OSError as exc:  # a name the file system refuses (too long, ...)
        raise FabricError("--out", f"cannot use {str(out)[:60]!r} ({exc.strerror or exc})") from None
    if out.exists() and not out.is_dir():
        raise FabricError("--out", f"{out} is a file, not a folder")
    probe = out
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe != out and not probe.is_dir():
        raise FabricError("--out", f"cannot create {out}: {probe} is a file")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise FabricError("--out", f"cannot write to {probe} (permission denied)")
    if not out.exists():
        return
    entries = sorted(e for e in out.iterdir() if e.name != LOCK)
    if not entries:
        return
    foreign = [e.name for e in entries if not _is_ours(e)]
    manifest = out / MANIFEST
    if overwrite:
        if foreign:
            raise FabricError("--overwrite", f"{out} holds files that are not sweep results ({foreign[0]}, ...); "
                                             f"--overwrite deletes only a sweep's own files: pick another --out")
        return
    if not resume:
        raise FabricError("--out", f"{out} is not empty; add --resume to run only the missing points, "
                                   f"or --overwrite to start again")
    if foreign or not manifest.is_file():
        raise FabricError("--resume", f"{out} does not hold sweep results (no {MANIFEST}); pick another --out")
    try:
        old = _load_metadata(manifest)
    except FabricError as exc:
        raise FabricError("--resume", f"cannot read {manifest}: {exc.message}") from None
    if not isinstance(old, dict):
        raise FabricError("--resume", f"{manifest} is damaged (not a mapping); use --overwrite or another --out")
    if old.get("fingerprint") != fingerprint:
        raise FabricError("--resume", f"{out} holds rows of other metrics, metric options or catalog "
                                      f"(fingerprint {old.get('fingerprint')} != {fingerprint}); "
                                      f"use --overwrite or another --out")


def prepare_out_dir(out: Path, overwrite: bool, manifest: dict[str, Any], spec_text: str) -> None:
    """Create the folder, clear it for ``--overwrite``, drop stale temporary files, write the manifest.

    Call only after :func:`check_out_dir` passed.
    """
    out.mkdir(parents=True, exist_ok=True)
    if overwrite:
        _remove_sweep_files(out)
    for tmp in out.glob(f"{PARTITION}=*/.*.tmp"):  # left by a killed run: never renamed, so never counted
        tmp.unlink(missing_ok=True)
    doc = {**manifest, "written_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
    atomic_write(out / MANIFEST, lambda fh: fh.write((json.dumps(doc, indent=2) + "\n").encode()))
    atomic_write(out / SPEC_COPY, lambda fh: fh.write(spec_text.encode()))

