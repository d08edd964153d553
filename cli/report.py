"""`fabric report DIR`: a standalone HTML page of plots and the comparison table of a study's results.

The data comes from :func:`cli.study.report_data.report_data`, the page from
:func:`fabric.viewer.report.write_report` (BokehJS inlined: it opens offline).
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.common import JSON_OPT, emit_json
from cli.study.store import REPORT as REPORT_NAME
from fabric.errors import FabricError



def report_command(
    directory: Path = typer.Argument(..., metavar="DIR", show_default=False, help="a `fabric sweep` output folder"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="FILE.html",
                                       help=f"where to write the page (default: DIR/{REPORT_NAME})"),
    as_json: bool = JSON_OPT,
) -> None:
    """Write a study's HTML report: Pareto fronts of cost against quality, waste curves, cost breakdown, tornado."""
    from cli.study.report_data import report_data
    from fabric.viewer.page import check_writable
    from fabric.viewer.report import write_report

    target = out if out is not None else directory / REPORT_NAME
    if directory.is_dir():
        _check_not_in_study(out, directory)
        check_writable(target)  # before the slow part
    data = report_data(directory)
    from cli.study.store import damaged_metadata, point_ids, point_warnings

    for problem in damaged_metadata(directory):
        typer.echo(f"warning: {problem}; the report is drawn from the rows alone", err=True)
    for problem in point_warnings(directory, point_ids(directory)):
        typer.echo(f"warning: {problem}", err=True)
    path, notes = write_report(data, target)
    plots = [a.title for a in data.axes if not any(a.title in n for n in notes)]
    if as_json:
        emit_json({"dir": str(directory), "out": str(path), "designs": len(data.designs),
                   "plots": plots, "notes": notes})
        return
    typer.echo(f"report: {path}")
    for note in notes:
        typer.echo(f"  not shown: {note}", err=True)


def _check_not_in_study(out: Optional[Path], directory: Path) -> None:
    """Refuse an ``--out`` inside the study folder that is not a page: it could replace a batch, the manifest or the
    spec copy the report reads (`--out DIR/_manifest.json` did)."""
    import os

    if out is None:
        return
    inside = Path(os.path.realpath(out)).is_relative_to(os.path.realpath(directory))
    if inside and out.suffix.lower() not in (".html", ".htm"):
        raise FabricError("--out", f"{str(out)!r} is inside DIR, the study the report reads; give a .html file "
                                   f"(the default is DIR/{REPORT_NAME})")


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
