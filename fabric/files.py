"""Reading a user's input file: one place for the errors every file format shares.

A missing path, a directory, an unreadable or non-UTF-8 file, a file over the
size limit, malformed JSON/YAML and nesting too deep for the parser all become
one :class:`~fabric.errors.FabricError` naming the flag and the file, so that
each format's own validation (``file.json:links[3].capacity``) starts from a
parsed document.  A UTF-8 byte-order mark at the start of a file is dropped, in every format.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from fabric.errors import FabricError

#: Largest input file read (bytes): far above any real topology, trace or spec, far below the RAM.
MAX_FILE_BYTES = 1 << 30
#: Deepest nesting accepted; no format of the tool nests more than a few levels.
MAX_DEPTH = 64
#: Memory of a parsed document per character of its text (B), checked against the ``memory`` limit before parsing.
#: Measured with tracemalloc: JSON takes 2-3 B for the shipped trace and link loads, ~16 B for a topology's node
#: list or a flows file, 24 B for a list of empty objects; PyYAML's pure-Python loader keeps a node per value:
#: 20-40 B for the shipped catalog, studies and models, ~120 B for a block list of numbers, ~340 B for a flow list
#: of small numbers or empty mappings (a 20 MB `seeds: [0,0,...]` peaked at 6.7 GB after 8 minutes).  YAML takes
#: that worst case: real inputs (tens of KB) are far below the default limit, and a hostile one no longer parses
#: into tens of GiB (a 1 GiB file, the size limit, was read into ~24 GiB as JSON and ~340 GiB as YAML).
PARSED_BYTES_PER_CHAR = {"JSON": 16, "YAML": 340}


def input_file(path: str | Path, field: str) -> Path:
    """``path`` if it is an existing regular file, else a FabricError naming ``field``.

    Refused: a missing path, a folder, a device, pipe or socket (``/dev/zero`` would be read without end, a FIFO
    would block), and a name the OS refuses (too long, a loop of links), which ``Path.is_file`` raises.
    """
    p = Path(path)
    try:
        is_dir, is_file, exists = p.is_dir(), p.is_file(), p.exists()
    except OSError as exc:  # e.g. a name too long for the file system
        raise FabricError(field, f"cannot use {str(p)[:60]!r} ({exc.strerror or exc})") from None
    if is_dir:
        raise FabricError(field, f"{str(p)!r} is a folder; give a file")
    if not exists:
        raise FabricError(field, f"no such file: {p}")
    if not is_file:  # it was "no such file: /dev/null"
        raise FabricError(field, f"{str(p)!r} is not a regular file (a device, pipe or socket); give a file")
    return p


def read_text(path: str | Path, field: str) -> str:
    """The text of ``path``, or a FabricError naming ``field`` (missing, a folder, unreadable, binary)."""
    p = input_file(path, field)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise FabricError(field, f"{p.name} is over {MAX_FILE_BYTES >> 20} MiB")
        # utf-8-sig: a leading byte-order mark (Notepad, PowerShell 5's `Out-File -Encoding utf8`) is dropped, as
        # YAML drops it; JSON refused it ("Unexpected UTF-8 BOM") while the same file in YAML was read
        return p.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise FabricError(field, f"{p.name} is not UTF-8 text") from None
    except OSError as exc:
        raise FabricError(field, f"cannot read {p.name} ({exc.strerror or exc})") from None


def _depth_ok(text: str) -> bool:
    """Cheap bound on bracket nesting, so that a hostile file cannot exhaust the parser's stack."""
    depth = 0
    for ch in text:
        if ch in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                return False
        elif ch in "]}":
            depth -= 1
    return True


def check_nesting(text: str, name: str, field: str) -> None:
    """Refuse text of file ``name`` whose brackets nest deeper than MAX_DEPTH (before a parser recurses into it)."""
    if not _depth_ok(text):
        raise FabricError(field, f"{name} nests deeper than {MAX_DEPTH} levels")


def check_parse_memory(text: str, name: str, field: str, kind: str) -> None:
    """Refuse ``kind`` (JSON or YAML) text of file ``name`` whose parsed document would pass the ``memory`` limit.

    Estimated before parsing at :data:`PARSED_BYTES_PER_CHAR`; the error names ``field`` and how it was estimated.
    """
    from fabric.limits import check

    per = PARSED_BYTES_PER_CHAR[kind]
    check("memory", len(text) * per, field, f"{name} is {len(text):,} characters; parsed {kind} takes ~{per} B each")


def parse_json(text: str, name: str, field: str, *, constants: bool = False) -> Any:
    """Parse JSON text of file ``name`` (a key given twice in one object refused); errors name ``field`` and the file.

    ``constants`` lets NaN and Infinity through for a format whose own check names the entry that holds them.
    """
    check_nesting(text, name, field)
    check_parse_memory(text, name, field, "JSON")
    try:
        return json.loads(text, parse_constant=None if constants else _no_constant, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        raise FabricError(field, f"{name}: key {exc.key} is given twice in one object; a later one would silently "
                                 "replace the earlier") from None
    except json.JSONDecodeError as exc:
        raise FabricError(field, f"{name} is not valid JSON ({exc})") from None
    except (RecursionError, ValueError) as exc:
        raise FabricError(field, f"{name} is not valid JSON ({exc})") from None


class _DuplicateKey(Exception):
    def __init__(self, key: str):
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list) -> dict:
    """A JSON object's dict, refusing a key given twice (``json`` keeps the last in silence, as PyYAML does)."""
    out = {}
    for key, value in pairs:
        if key in out:
            shown = repr(key)
            raise _DuplicateKey(shown if len(shown) <= SHOWN_KEY_CHARS else shown[:SHOWN_KEY_CHARS] + "...")
        out[key] = value
    return out


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


#: Values aliases may add to a YAML document beyond one per character of its text (what a document without
#: aliases can hold at most): ample for `<<: *defaults` merges, far below an alias bomb's 9**9.
MAX_ALIAS_VALUES = 10_000_000


def parse_yaml(text: str, name: str, field: str) -> Any:
    """Parse YAML text of file ``name`` (safe loader, a key given twice refused); errors name ``field`` and the file."""
    import yaml

    check_nesting(text, name, field)
    check_parse_memory(text, name, field, "YAML")
    try:
        return yaml.load(text, Loader=yaml_loader())  # noqa: S506 (a SafeLoader)
    except yaml.YAMLError as exc:
        if hasattr(exc, "expanded"):
            raise FabricError(field, f"{name}: its aliases expand it to over {exc.expanded:,} values (line "
                                     f"{exc.problem_mark.line + 1}); write the values out") from None
        if hasattr(exc, "duplicate_key"):
            raise FabricError(field, f"{name}: key {exc.duplicate_key} is given twice (line "
                                     f"{exc.problem_mark.line + 1}); a later one would silently replace the "
                                     "earlier") from None
        raise FabricError(field, f"{name} is not valid YAML ({str(exc).splitlines()[0]})") from None
    except (RecursionError, ValueError) as exc:
        raise FabricError(field, f"{name} is not valid YAML ({exc})") from None


_LOADER = None
# Exponent forms YAML 1.1 leaves as strings (unsigned exponent, or no dot): 5e10, 1.5e9, -2E5, .5e3, 1_000e3.
# Every form with a dot and a signed exponent is already a float by YAML 1.1 and matches here as well.
YAML12_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$")
# Integers as YAML 1.2 reads them: decimal digits (a leading zero is still decimal), 0o octal, 0x hex.  YAML 1.1
# read `gpus: 0100` as octal 64, `010000` as 4096 and `1:00` as sexagesimal 60, in silence; those are 1.1 only.
YAML12_INT = re.compile(r"^(?:[-+]?[0-9][0-9_]*|0o[0-7_]+|0x[0-9a-fA-F_]+)$")
SHOWN_KEY_CHARS = 60  # a key in a message is cut here: a YAML alias bomb as a key must not be printed in full


def _construct_yaml12_int(loader, node) -> int:
    """An integer scalar as YAML 1.2 reads it (an explicit ``!!int`` that is not one is the file's error)."""
    import yaml

    text = loader.construct_scalar(node).replace("_", "")
    try:
        if text.startswith("0o"):
            return int(text[2:], 8)
        if text.startswith("0x"):
            return int(text[2:], 16)
        return int(text, 10)
    except ValueError:
        raise yaml.constructor.ConstructorError(None, None, f"{text[:40]!r} is not an integer", node.start_mark) \
            from None


def yaml_loader():
    """PyYAML's safe loader refusing a key given twice in one mapping and reading YAML 1.2 floats, for every input.

    PyYAML keeps the last of two equal keys in silence (a second ``gpu_h100:`` entry of a catalog dropped the
    first; a second ``metrics:`` line of a study dropped the first).  The error is a
    ``yaml.constructor.ConstructorError`` "found the key K twice" at the second key's mark, with the shown key
    as ``duplicate_key``.  Keys merged in with ``<<`` may still be overridden, as YAML says.  Built on first
    use: ``import yaml`` costs start-up.

    PyYAML resolves scalars by YAML 1.1, whose floats need a dot and a signed exponent: ``5e10``,
    ``1.5e9`` and ``128256e0`` were read as strings and then refused as "not a number".  YAML 1.2's core
    schema (and JSON) reads them as floats; :data:`YAML12_FLOAT` adds those forms.
    """
    global _LOADER
    if _LOADER is None:
        import yaml

        class UniqueKeyLoader(yaml.SafeLoader):
            def construct_mapping(self, node, deep=False):
                if isinstance(node, yaml.MappingNode):
                    seen: set = set()
                    for key_node, _ in node.value:
                        if key_node.tag == "tag:yaml.org,2002:merge":
                            continue
                        key = self.construct_object(key_node, deep=deep)
                        try:
                            again = key in seen
                            seen.add(key)
                        except TypeError:  # an unhashable key: the base class says so
                            break
                        if again:
                            shown = repr(key)
                            shown = shown if len(shown) <= SHOWN_KEY_CHARS else shown[:SHOWN_KEY_CHARS] + "..."
                            err = yaml.constructor.ConstructorError(None, None, f"found the key {shown} twice",
                                                                    key_node.start_mark)
                            err.duplicate_key = shown
                            raise err
                return super().construct_mapping(node, deep=deep)

            # Expanded size of every collection, counted as it is composed: PyYAML shares an aliased node rather
            # than copying it, so nine anchors of nine aliases each load in microseconds as 9**9 = 387 M values,
            # and the first check that walked or printed one (a description's repr in an error message) ran for a
            # minute and wrote a line of gigabytes.  A node still being composed (a recursive alias) counts 1.
            def compose_sequence_node(self, anchor):
                return self._sized(super().compose_sequence_node(anchor), node_values=lambda n: n.value)

            def compose_mapping_node(self, anchor):
                return self._sized(super().compose_mapping_node(anchor),
                                   node_values=lambda n: [x for pair in n.value for x in pair])

            def _sized(self, node, node_values):
                node.expanded = 1 + sum(getattr(c, "expanded", 1) for c in node_values(node))
                limit = len(getattr(self, "buffer", "")) + MAX_ALIAS_VALUES
                if node.expanded > limit:
                    err = yaml.composer.ComposerError(None, None, f"its aliases expand it to over {limit:,} values",
                                                      node.start_mark)
                    err.expanded = limit
                    raise err
                return node

        UniqueKeyLoader.add_implicit_resolver("tag:yaml.org,2002:float", YAML12_FLOAT, list("-+.0123456789"))
        # YAML 1.2 integers: the 1.1 resolver (octal by a leading 0, sexagesimal, binary) is replaced
        int_tag = "tag:yaml.org,2002:int"
        UniqueKeyLoader.yaml_implicit_resolvers = {
            first: [(tag, rx) for tag, rx in rules if tag != int_tag]
            for first, rules in UniqueKeyLoader.yaml_implicit_resolvers.items()}
        UniqueKeyLoader.add_implicit_resolver(int_tag, YAML12_INT, list("-+0123456789"))
        UniqueKeyLoader.add_constructor(int_tag, _construct_yaml12_int)
        _LOADER = UniqueKeyLoader
    return _LOADER


def load_json(path: str | Path, field: str) -> Any:
    """Read and parse a JSON file."""
    return parse_json(read_text(path, field), Path(path).name, field)


def load_yaml(path: str | Path, field: str) -> Any:
    """Read and parse a YAML file."""
    return parse_yaml(read_text(path, field), Path(path).name, field)


# ------------------------------------------------------------------------------------------------ outputs
def check_output(path: str | Path, field: str, inputs: dict[str, Any] | None = None) -> Path:
    """The file an output flag names, refused before any work when writing it would harm something.

    Refused: an existing path that is not a regular file (``/dev/null``, a FIFO: replacing it in one
    ``os.replace``, as outputs are written, swapped a device node for a page), a link that leads nowhere or in a
    loop, and the file of one of ``inputs`` (``{"--topology": path, ...}``: ``view --out topo.json`` replaced
    the topology it drew with the page).  The folder checks (missing, read-only, a folder given) are the
    caller's, with its wording.

    Returns
    -------
    Path
        Where to write: a link to a regular file is followed, so the link stays and its file is replaced.
    """
    import os
    import stat

    p = Path(path)
    try:
        st = os.stat(p) if os.path.lexists(p) else None
    except OSError as exc:  # a loop of links, a dangling link, a name too long
        raise FabricError(field, f"cannot use {str(p)[:60]!r} ({exc.strerror or exc})") from None
    if st is not None and not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        raise FabricError(field, f"{str(p)!r} is not a regular file (a device, pipe or socket); give a file name")
    for flag, given in (inputs or {}).items():
        if given is None:
            continue
        try:
            same = st is not None and os.path.samefile(p, given)
        except OSError:  # the input does not exist: its own flag says so
            same = False
        if same:
            raise FabricError(field, f"{str(p)!r} is the file of {flag}; writing it would replace that input")
    return Path(os.path.realpath(p)) if p.is_symlink() else p


def write_text_atomic(path: str | Path, text: str, field: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file and one ``os.replace``: never half-written.

    An interruption or a full disk leaves the previous file (or none), not a truncated one.
    """
    import os
    import tempfile

    target = Path(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    except OSError as exc:  # a read-only or special folder that the access check let through
        raise FabricError(field, f"cannot write in {str(target.parent)!r}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private (0600); outputs are meant to be shared
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise FabricError(field, f"cannot write {str(target)!r}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
