"""Helpers shared by every command group: options, building a Fabric, output."""

from __future__ import annotations

import json
import math
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from fabric.checks import shown
from fabric.errors import FabricError

if TYPE_CHECKING:  # the fabric layers import numpy and yaml: imported where a command runs (issue 18, start-up)
    from fabric.catalog import Catalog
    from fabric.model import Fabric

GPUS_OPT = typer.Option(None, "--gpus", help="GPU count (rounded up to whole units of the architecture)")
PARAM_OPT = typer.Option([], "-p", "--param", help="architecture parameter name=value (repeatable); see `fabric list`")
CATALOG_OPT = typer.Option(None, "--catalog", help="YAML catalog merged over the shipped one")
TOPOLOGY_OPT = typer.Option(None, "--topology", help="a networkx node-link JSON file instead of ARCH")
JSON_OPT = typer.Option(False, "--json", help="print one JSON object on stdout")


def build_fabric(arch: Optional[str], gpus: Optional[int], params: list[str], catalog: Catalog,
                 topology: Optional[Path] = None) -> Fabric:
    """Build the Fabric a command names: ``ARCH`` with ``-p`` parameters, or ``--topology FILE``."""
    from topologies import build
    from topologies.custom import load_topology
    from topologies.params import parse_assignments

    if topology is not None:
        if arch is not None:
            raise FabricError("--topology", "give either ARCH or --topology, not both")
        # the file fixes the GPUs and the wiring: silently ignoring these would report another fabric than asked
        if gpus is not None:
            raise FabricError("--gpus", "not used with --topology (the file sets the GPUs); leave it out")
        if params:
            raise FabricError("-p", "not used with --topology (the file is the fabric); leave it out")
        return load_topology(topology, catalog)
    if arch is None:
        raise FabricError("ARCH", "missing; give an architecture (see `fabric list`) or --topology FILE")
    # the build refuses an oversized request from its closed-form size before allocating (topologies.size)
    return build(arch, gpus, parse_assignments(params), catalog)


#: GPUs of the small fabric a study builds to check a large design's TP rules (cli.study.metrics).
PROBE_GPUS = 1024


def check_fabric_estimate(arch: str, gpus: Optional[int], params: dict, catalog: Catalog, field: str) -> None:
    """Refuse, without building, a fabric whose GPU count makes it pass the limits, naming ``field``.

    The closed-form size of :func:`topologies.check_build`.  Only a size that ``gpus`` drives is refused
    here; any other problem of the parameters (or a size they drive) is left to the point's own build,
    which says why.
    """
    from topologies import check_build

    try:
        check_build(arch, gpus, params, catalog)
    except FabricError as exc:
        if exc.field == "gpus":
            raise FabricError(field, exc.message) from None


def parse_int_list(text: str, field: str, bad: str, *, ranges: bool = False, empty: str | None = None,
                   whitespace: bool = False, unique: bool = False) -> list[int]:
    """Integers >= 0 from a flag: ``3,7,12`` (with ``ranges`` also ``0-7``; with ``whitespace`` also spaces and lines).

    Strict: an empty item (``1,,2``, a trailing ``,``), a negative number, a
    range whose end is below its start or longer than the ``gpus`` limit, and
    (with ``unique``) a repeated value are errors naming ``field``.

    Parameters
    ----------
    text : str
    field : str
        The flag, named in errors.
    bad : str
        Error message for an unreadable item, a format string with ``{part}``.
    ranges : bool
        Read ``a-b`` as ``a, a+1, ..., b``.
    empty : str, optional
        Error message when no integer is given; None allows an empty list.
    whitespace : bool
        Spaces and newlines separate items too (runs of them count as one).
    unique : bool
        Refuse repeated values.
    """
    from fabric.limits import check

    text = str(text)
    if whitespace:
        text = re.sub(r"[\s,]+", ",", text.strip())
    if not text.strip():
        if empty is not None:
            raise FabricError(field, empty)
        return []
    out: list[int] = []
    parts = text.split(",")
    # every such list indexes GPUs or nodes: one item per GPU at most, counted before the per-item loop (a
    # 20,000,000-item --tor-map file was parsed item by item for minutes before its length was refused)
    check("gpus", len(parts), field, f"{len(parts):,} items")
    for part in parts:
        part = part.strip()
        if not part:
            raise FabricError(field, f"empty item in {text!r}; give comma-separated values without blanks")
        lo, sep, hi = part.partition("-") if ranges else (part, "", "")
        if not (_DIGITS.match(lo) and (not sep or _DIGITS.match(hi))):
            if all(x.isascii() and x.isdigit() for x in ((lo, hi) if sep else (lo,))):  # whole numbers, too long:
                # the format's 'cannot read' / 'is not a ToR id (whole numbers >= 0)' was false of them
                raise FabricError(field, f"{shown(part)} is too large: at most {_MAX_DIGITS} digits a value")
            raise FabricError(field, bad.format(part=part))
        if sep:
            a, b = int(lo), int(hi)
            if b < a:
                raise FabricError(field, f"range {part!r} ends before it starts")
            check("gpus", len(out) + b - a + 1, field, f"range {part}")
            out.extend(range(a, b + 1))
        else:
            out.append(int(part))
    if unique and len(set(out)) != len(out):
        seen: set[int] = set()
        dup = next(v for v in out if v in seen or seen.add(v))
        raise FabricError(field, f"{dup} is given twice; give each value once")
    return out


#: ASCII digits only: ``\d`` also matches other scripts' digits ('١' was read as GPU 1, while --gpus refuses it)
_MAX_DIGITS = 18
_DIGITS = re.compile(rf"^[0-9]{{1,{_MAX_DIGITS}}}$")


def check_writable_file(path: Path, field: str, inputs: dict[str, Any] | None = None) -> None:
    """Refuse, before any work, an output file that cannot be written: a folder, a missing or read-only folder,
    a device or pipe, or the file of one of ``inputs`` (``{"--model": path}``; see fabric.files.check_output)."""
    import os

    from fabric.files import check_output

    path = Path(path)
    if path.is_dir():
        raise FabricError(field, f"{str(path)!r} is a folder; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():  # a file where the folder should be was called missing
        raise FabricError(field, f"{str(parent)!r} is a file, not a folder" if parent.exists()
                          else f"folder {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise FabricError(field, f"cannot write {str(path)!r} (permission denied)")
    check_output(path, field, inputs)


def given(name: str) -> bool:
    """True when the running command's parameter ``name`` (its Python name) was typed on the command line.

    A flag with a default (``--chunks 8``, ``--root 0``) cannot tell "given" from "left out" by its value; a
    flag given where it does nothing must be refused, not ignored, and this tells the two apart.
    """
    try:  # typer >= 0.2x vendors click as typer._click
        from typer._click.globals import get_current_context
        from typer._click.core import ParameterSource
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click import get_current_context
        from click.core import ParameterSource

    ctx = get_current_context(silent=True)
    return ctx is not None and ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE


def parse_dp(text: str) -> int | None:
    """``--dp``: a whole number >= 1, or ``max``."""
    t = str(text).strip().lower()
    if t == "max":
        return None
    # ASCII digits only, as --gpus and the integer lists: int() read '\u0662' (Arabic-Indic two) as 2 and 1_0 as 10
    if not (t.isascii() and t.isdigit()):
        raise FabricError("--dp", f"{text!r} must be a whole number >= 1 or 'max'")
    v = int(t)
    if v < 1:
        raise FabricError("--dp", f"{text!r} must be a whole number >= 1 or 'max'")
    # bounded as --tp, --pp and --count are (a str flag, so cli.validate's gpus rule never saw it): 10**30 got
    # to the solver's job check and was refused as 'must be a whole number >= 1', which it is
    from fabric import limits

    limits.check("gpus", v, "--dp", "a DP group holds at least one GPU")
    return v


def parse_versus(text: str) -> tuple[str, dict[str, str]]:
    """``--versus nvl:size=72,gpu=gb200`` -> (``nvl``, {size: 72, ...}).

    A colon promises parameters: ``nvl:`` (nothing after it) and empty items
    (``nvl:size=72,,gpu=x``) are refused rather than read as "no parameters".
    """
    from topologies.params import parse_assignments

    name, colon, rest = text.partition(":")
    if not colon:
        return name.strip(), {}
    items = [p.strip() for p in rest.split(",")]
    if not rest.strip() or not all(items):
        raise FabricError("--versus", f"{text!r}: empty parameter list or item after ':'; "
                                      "give ARCH or ARCH:name=value,... (comma-separated, no blanks)")
    return name.strip(), parse_assignments(items)


def build_versus(text: str, gpus: int, catalog: Catalog) -> tuple[Fabric, dict[str, str]]:
    """The second fabric of ``--versus ARCH:p=v,...`` at ``gpus``, and its parameters; errors name ``--versus``."""
    from topologies import build

    try:
        name, params = parse_versus(text)
        if not name:
            raise FabricError("ARCH", "missing: give ARCH or ARCH:name=value,... (see `fabric list`)")
        return build(name, gpus, params, catalog), params
    except FabricError as exc:  # params[k] of the second architecture is "--versus k"; its ARCH is --versus itself
        key = exc.field[len("params["):-1] if exc.field.startswith("params[") and exc.field.endswith("]") else None
        field = f"--versus {key}" if key else "--versus"
        raise FabricError(field, exc.message) from None


def _jsonable(obj: Any) -> Any:
    """``obj`` with numpy scalars and arrays as Python numbers and lists, non-finite floats as None."""
    import numpy as np  # once a call, not once an item: the walk below recurses into every value

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): walk(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [walk(x) for x in v]
        if isinstance(v, np.integer):
            return int(v)
        if isinstance(v, np.floating):
            v = float(v)
        if isinstance(v, float) and not math.isfinite(v):
            return None
        if isinstance(v, np.ndarray):
            return walk(v.tolist())
        return v

    return walk(obj)


def emit_json(obj: Any) -> None:
    """Print one JSON object on stdout."""
    sys.stdout.write(json.dumps(_jsonable(obj), indent=2, sort_keys=False) + "\n")


def console():
    """A rich console for tables on stdout; wide when not a terminal so tables stay readable in logs."""
    import sys

    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=160)


#: Rows above which :func:`print_rows` writes aligned plain text instead of a rich table: rich measures every
#: cell (about 1.4 ms a row), so the 131,072 links of ``simulate dgx --gpus 16384 --links`` took 3 minutes to
#: print (7 s with ``--json``), and a flows file's 4 M flows would have taken hours.
RICH_MAX_ROWS = 1000


def print_rows(con, title: str, columns: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    """A table of right-aligned text cells on ``con``: a rich table up to :data:`RICH_MAX_ROWS` rows, past that
    the same columns as plain text (title, header, rule, one line a row), in time linear in the rows."""
    if len(rows) <= RICH_MAX_ROWS:
        from rich.table import Table

        t = Table(title=title, title_justify="left")
        for col in columns:
            t.add_column(col, justify="right")
        for row in rows:
            t.add_row(*row)
        con.print(t)
        return
    print_plain_rows(con, title, columns, rows)


def print_plain_rows(con, title: str, columns, rows) -> None:
    """The columns as plain text on ``con``'s file: title, header, rule, one line a row, never wrapped."""
    columns = [str(c) for c in columns]
    widths = [max([len(col)] + [len(row[i]) for row in rows]) for i, col in enumerate(columns)]
    lines = [title, " │ ".join(c.rjust(w) for c, w in zip(columns, widths)), "─┼─".join("─" * w for w in widths)]
    lines.extend(" │ ".join(v.rjust(w) for v, w in zip(row, widths)) for row in rows)
    con.file.write("\n".join(lines) + "\n")
    con.file.flush()


def fits_width(columns, rows, width: int) -> bool:
    """Whether a rich table of these text cells fits ``width`` characters without folding a cell to nothing: each
    column at its widest cell or header, plus the 3 characters of its border and padding."""
    need = sum(max([len(str(col))] + [len(row[i]) for row in rows]) + 3 for i, col in enumerate(columns)) + 1
    return need <= width


def err_console():
    from rich.console import Console

    return Console(stderr=True)
