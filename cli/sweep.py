"""`fabric sweep` (run a YAML design study) and `fabric results` (read what a sweep wrote).

``fabric sweep SPEC.yaml --out DIR`` validates the whole spec, then evaluates
every design point on a local process pool (``--workers``, default: all cores)
or on a Dask cluster (``--scheduler tcp://host:port``), writing one Parquet file
per batch under ``DIR/architecture=<name>/``.  ``--resume`` runs only the
points whose ids are not in DIR yet; ``--overwrite`` starts again.  Progress
goes to stderr; a summary and the comparison table (or, with ``--json``, one
JSON object) to stdout.

A point whose topology or metric fails is written too, with ``status =
"failed"`` and the reason in ``error``; the sweep goes on, exits 0 and warns
on stderr.  ``--resume`` counts such a point as done (``--overwrite`` retries
everything).  Bad input (spec, flags, output folder) exits 2 before anything
is written.  Ctrl-C (exit 130) and SIGTERM (a scheduler's time limit, ``kill``; exit 143) stop it the same
way: the pool is stopped (running batches are killed; --resume redoes them), the finished batches stay whole
on disk, and one line says to ``--resume``.

``fabric results DIR`` prints the comparison table of a sweep folder, or its
rows (``--rows``), as a table, CSV or JSON.  ``--sql`` runs a DuckDB statement
over the folder as one table ``results`` (:mod:`cli.study.sql`);  ``--query``
is a pandas ``DataFrame.query`` expression over the row columns:
``--query "architecture == 'khop-ring' and fault_ratio >= 0.03"``.

The Python API is :func:`cli.study.runner.run_study` (the command is a thin shell over it).  A
script that calls it with more than one worker needs the usual
``if __name__ == "__main__":`` guard: worker processes re-import the main module.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Optional

import typer

from cli.common import JSON_OPT, console, emit_json
from cli.study.progress import say
from fabric.errors import FabricError

# The study engine (cli.study.runner, .report, .spec, .store) is imported inside the commands: it pulls in every
# metric's module (the RL comparison, the allocation solvers, pandas), 0.2 s that `fabric --help` and the other
# commands must not pay (issue 18, start-up).

EXIT_SIGTERM = 128 + signal.SIGTERM  # the shell's code for a command ended by SIGTERM


class Terminated(Exception):
    """SIGTERM reached the sweep: it stops as Ctrl-C does (module docstring)."""


def _raise_terminated(signum, frame):
    raise Terminated()


ROWS_SHOWN = 200
"""`fabric results --rows` prints at most this many rows as a table."""
WIDE_COLUMNS = 300
"""`fabric results --wide` prints on a console at least this wide (the full titles need ~250)."""


def sweep_command(
    spec: Path = typer.Argument(..., metavar="SPEC", show_default=False,
                               help="study spec (YAML), e.g. studies/default.yaml; the format is in the README's "
                                    "'Design sweeps'"),
    out_text: Optional[str] = typer.Option(None, "--out", metavar="DIR", show_default=False,
                                           help="output folder (default: the spec's out:)"),
    workers: Optional[int] = typer.Option(None, "--workers", help="local worker processes (default: CPU cores)"),
    scheduler: Optional[str] = typer.Option(None, "--scheduler", help="Dask scheduler, e.g. tcp://10.0.0.5:8786"),
    resume: bool = typer.Option(False, "--resume", help="run only the points missing from the output folder"),
    overwrite: bool = typer.Option(False, "--overwrite", help="delete a previous sweep's results in the folder first"),
    as_json: bool = JSON_OPT,
) -> None:
    """Run a design study: every point of SPEC, in parallel, into Parquet; then the comparison table."""
    from concurrent.futures.process import BrokenProcessPool  # 20 ms of start-up: imported where caught

    from cli.study.report import comparison, comparison_table
    from cli.study.runner import run_study, study_rows
    from cli.study.spec import load_study

    study = load_study(spec)
    # read as text: an empty --out would otherwise become Path(".") and sweep into the working folder
    if out_text is not None and not out_text.strip():
        raise FabricError("--out", "empty; give the output folder, e.g. --out results/study")
    out = Path(out_text) if out_text is not None else None
    if out is None:
        if study.out is None:
            raise FabricError("--out", "missing; give --out DIR or out: in the spec")
        out = Path(study.out)
    # without a handler SIGTERM ended the driver at once (exit -15, no word said) and left the workers to notice
    main = threading.current_thread() is threading.main_thread()  # Python sets handlers from there only
    previous = signal.signal(signal.SIGTERM, _raise_terminated) if main else None
    try:
        summary = run_study(study, out, workers, scheduler, resume, overwrite)
    except (KeyboardInterrupt, Terminated) as exc:
        # finished batches are on disk, each file whole: nothing is lost that --resume cannot redo
        what = "terminated (SIGTERM)" if isinstance(exc, Terminated) else "interrupted"
        say(f"{what}; finished batches are in {out}: rerun with --resume to complete the study")
        raise typer.Exit(EXIT_SIGTERM if isinstance(exc, Terminated) else 130) from None
    except (OSError, BrokenProcessPool) as exc:  # disk full, a worker killed by the OOM killer, ...
        say(f"error: the sweep stopped: {type(exc).__name__}: {exc}; finished batches are in {out}: "
            f"rerun with --resume")
        raise typer.Exit(1) from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, previous)
    rows, cols = comparison(study_rows(study, out))
    all_failed = summary["failed"] > 0 and summary["done"] == 0
    for e in summary["errors"]:  # never silent: one line per distinct error, most frequent first
        say(f"{'error' if all_failed else 'warning'}: {e['points']} point(s) failed: {e['error']}")
    if summary["distinct_errors"] > len(summary["errors"]):
        say(f"... and {summary['distinct_errors'] - len(summary['errors'])} more distinct errors "
            f"(see the status and error columns of the rows)")
    if as_json:
        emit_json({**summary, "comparison": rows})
    if all_failed:
        say(f"error: every point of the study failed ({summary['failed']}); the rows in {out} say why")
        raise typer.Exit(1)
    if as_json:
        return
    from rich.table import Table

    con = console()
    t = Table(title=f"sweep {study.name}", title_justify="left", show_header=False)
    t.add_column("")
    t.add_column("", justify="right")
    for k in ("points", "done", "skipped", "failed", "batches"):
        t.add_row(k, f"{summary[k]:,}")
    t.add_row("ran on", summary["where"])
    t.add_row("output", summary["out"])
    t.add_row("elapsed", f"{summary['elapsed_s']:.1f} s")
    con.print(t)
    con.print(comparison_table(rows, cols, f"{study.name}: comparison (means over seeds)"))


def _table_console(wide: bool):
    """stdout's console; for ``--wide`` one wide enough that no header is cut, even on a narrow terminal."""
    con = console()
    if wide:
        from rich.console import Console

        con = Console(width=max(con.width, WIDE_COLUMNS))
    return con


def _print_frame(df, directory: Path, as_csv: bool, as_json: bool, title: str, extra: dict | None = None,
                 narrow: str = "pick some with --columns") -> None:
    """Rows of ``df`` as CSV, one JSON object, or a table (first ROWS_SHOWN); plain lines when too wide, with
    ``narrow`` saying how to pick fewer columns."""
    if as_csv:
        typer.echo(df.to_csv(index=False), nl=False)
    elif as_json:
        sys.stdout.write(frame_json(df, {"dir": str(directory), **(extra or {}), "count": len(df)}))
    else:
        from cli.common import err_console, fits_width, print_plain_rows
        from cli.study.report import row_cells, rows_table

        shown = "" if len(df) <= ROWS_SHOWN else f" (first {ROWS_SHOWN:,}; use --csv or --json for all)"
        con, cells = console(), row_cells(df, ROWS_SHOWN)
        if fits_width(df.columns, cells, con.width):
            con.print(rows_table(df, f"{title}: {len(df):,} rows{shown}", ROWS_SHOWN))
            return
        # a rich table folds every cell of ~130 columns to nothing (a page of borders); plain lines stay readable
        err_console().print(f"{len(df.columns)} columns do not fit {con.width} characters: printed as plain text, "
                            f"one line a row; {narrow}", highlight=False, soft_wrap=True)
        print_plain_rows(con, f"{title}: {len(df):,} rows{shown}", df.columns, cells)


def _blob_text(value: bytes) -> str:
    """Bytes as DuckDB prints a BLOB: printable ASCII as is, any other byte as ``\\xHH``."""
    return "".join(chr(b) if 32 <= b < 127 and b != 92 else f"\\x{b:02X}" for b in bytes(value))


def frame_json(df, head: dict) -> str:
    """One JSON object: ``head``'s keys, then ``rows``, the records of ``df`` (NaN and infinities null).

    The rows are pandas' own JSON text, spliced in rather than parsed back into Python objects and dumped again:
    that round trip took 800 bytes per cell (5 M rows of one column: 4 GB).  A value JSON has no type for (an SQL
    UUID, DECIMAL, TIME) is written as its text, and bytes (BLOB, BIT) as DuckDB prints them: pandas' encoder
    failed on both (a traceback) or wrote ``{}``.
    """
    import json

    from cli.common import _jsonable

    df = df.copy(deep=False)
    for col in df.columns[df.dtypes == object]:
        if df[col].map(lambda v: isinstance(v, (bytes, bytearray, memoryview))).any():
            df[col] = df[col].map(lambda v: _blob_text(v) if isinstance(v, (bytes, bytearray, memoryview)) else v)
    exact = _exact_floats(df)
    # to_json: NaN and infinities as null, timestamps as ISO text
    rows = df.to_json(orient="records", date_format="iso", double_precision=15, default_handler=str)
    if exact:
        rows = rows.replace(f'"{_FLOAT_OPEN_JSON}', "").replace(f'{_FLOAT_CLOSE_JSON}"', "")
    return json.dumps(_jsonable(head), indent=2)[:-2] + ',\n  "rows": ' + rows + "\n}\n"


# A float64 cell is written as the shortest text that reads back as the same double (Python's repr, as every
# other command's --json): pandas' encoder stops at 15 significant digits, so `results --json` printed
# 0.029917436528296 where `faults --json` and the Parquet hold 0.029917436528296273.  The cells go through
# to_json as marked strings, and the marks and quotes are cut from its text (two C-speed replaces: no
# parse-and-dump round trip of every cell).
_FLOAT_OPEN, _FLOAT_CLOSE = "\x01", "\x02"
_FLOAT_OPEN_JSON, _FLOAT_CLOSE_JSON = "\\u0001", "\\u0002"  # how to_json escapes them


def _exact_floats(df) -> bool:
    """Replace (in place) every float64 column of ``df`` by its cells' repr between the marks; False if none.

    Non-finite cells become None (JSON null, as before).  Skipped (15 digits kept) when a text cell already
    holds a mark, so that cutting the marks cannot touch the text of another cell.
    """
    import numpy as np
    import pandas as pd

    floats = [i for i, t in enumerate(df.dtypes) if t == np.float64]  # by position: SQL may repeat a name
    if not floats:
        return False
    for i, t in enumerate(df.dtypes):
        if (t == object or pd.api.types.is_string_dtype(t)) and df.iloc[:, i].map(lambda v: isinstance(v, str) and (_FLOAT_OPEN in v or
                                                                           _FLOAT_CLOSE in v)).any():
            return False
    for i in floats:
        values = df.iloc[:, i].to_numpy()
        finite = np.isfinite(values)
        df.isetitem(i, [f"{_FLOAT_OPEN}{v!r}{_FLOAT_CLOSE}" if ok else None
                        for v, ok in zip(values.tolist(), finite.tolist())])
    return True


def _warn_folder(directory: Path, ids) -> None:
    """Warn on stderr of a sweep folder's damaged manifest or spec copy and of missing or repeated points."""
    from cli.study.store import damaged_metadata, point_warnings

    for problem in damaged_metadata(directory):
        say(f"warning: {problem}; the rows are read without it")
    for problem in point_warnings(directory, ids):
        say(f"warning: {problem}")


def results_command(
    directory: Path = typer.Argument(..., metavar="DIR", show_default=False, help="a `fabric sweep` output folder"),
    sql: Optional[str] = typer.Option(None, "--sql", metavar="SELECT", help=(
        "DuckDB SQL over the folder as the table `results` (every architecture's columns), e.g. "
        "\"SELECT label, avg(faults_waste_ratio_mean) FROM results GROUP BY 1\"")),
    query: Optional[str] = typer.Option(None, "--query", metavar="EXPR", help=(
        "pandas DataFrame.query filter over the row columns, e.g. \"fault_ratio == 0.03 and tp == 32\"")),
    rows: bool = typer.Option(False, "--rows", help="list the rows instead of the per-architecture comparison"),
    columns: Optional[str] = typer.Option(None, "--columns", metavar="A,B,..",
                                          help="comma-separated columns for --rows"),
    wide: bool = typer.Option(False, "--wide", help="every comparison column with its full title (needs ~250 columns)"),
    as_csv: bool = typer.Option(False, "--csv", help="print CSV on stdout"),
    as_json: bool = JSON_OPT,
) -> None:
    """Print a sweep's results: the comparison table, its rows (--rows), or an SQL query (--sql).

    --sql is one DuckDB statement over the table ``results``; --query a pandas ``DataFrame.query``
    expression, e.g. ``architecture == 'khop-ring' and fault_ratio >= 0.03``.
    """
    from cli.study.report import comparison, comparison_table
    from cli.study.store import read_results

    if as_csv and as_json:
        raise FabricError("--csv", "give --csv or --json, not both")
    if columns is not None and not rows:
        raise FabricError("--columns", "picks the columns of --rows; add --rows (or pick columns in --sql)")
    if wide and (as_csv or as_json):
        raise FabricError("--wide", "widens the printed table; it does not combine with --csv or --json")
    if wide and rows:  # --rows prints the row columns as they are: it printed the same with --wide, in silence
        raise FabricError("--wide", "gives the comparison table its full titles; it does not combine with --rows")
    if query is not None and not query.strip():  # before reading the folder, as the other flags
        raise FabricError("--query", "empty; give a condition on the row columns, e.g. \"fault_ratio == 0.03\"")
    if not directory.is_dir():
        raise FabricError("DIR", f"{directory} is a file, not a sweep folder" if directory.exists()
                          else f"no such folder: {directory}")
    if sql is not None:
        for flag, given in (("--query", query), ("--rows", rows), ("--columns", columns), ("--wide", wide)):
            if given:
                raise FabricError(flag, "does not combine with --sql (filter and pick columns in the SQL)")
        from cli.study.sql import sql_query
        from cli.study.store import batch_files, point_ids

        if batch_files(directory):  # the folder's warnings, as without --sql (it printed none: a copied batch
            _warn_folder(directory, point_ids(directory))  # counted twice in every aggregate in silence)
        _print_frame(sql_query(directory, sql), directory, as_csv, as_json, f"{directory}: SQL", {"sql": sql},
                     narrow="name fewer in the SELECT")
        return
    df = read_results(directory)
    _warn_folder(directory, df["point_id"])
    if query:
        try:
            df = df.query(query)
            if not hasattr(df, "columns"):  # '3-1' evaluates to a value, not a row filter
                raise ValueError("the expression is not a condition on the rows")
        except Exception as exc:  # pandas raises many types for a bad expression; all are bad input
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FabricError("--query", f"{query!r} is not a pandas query over the columns ({msg}); "
                                         f"e.g. \"fault_ratio == 0.03 and tp == 32\"") from None
    if rows:
        if columns is not None:
            wanted = [c.strip() for c in columns.split(",")]
            if not all(wanted):
                raise FabricError("--columns", f"{columns!r} has an empty name; give names separated by commas, "
                                               "e.g. architecture,fault_ratio")
            twice = sorted({c for c in wanted if wanted.count(c) > 1})
            if twice:
                raise FabricError("--columns", f"{twice[0]!r} is named twice; name each column once")
            missing = [c for c in wanted if c not in df.columns]
            if missing:
                raise FabricError("--columns", f"no column {missing[0]!r}; columns: {', '.join(df.columns)}")
            df = df[wanted]
        _print_frame(df, directory, as_csv, as_json, str(directory))
        return
    comp, cols = comparison(df)
    if as_csv:
        import pandas as pd

        typer.echo(pd.DataFrame(comp).to_csv(index=False), nl=False)
    elif as_json:
        emit_json({"dir": str(directory), "count": len(df), "comparison": comp})
    else:
        table = comparison_table(comp, cols, f"{directory}: {len(df):,} rows (means over seeds)", wide=wide)
        _table_console(wide).print(table)


def register(app: typer.Typer) -> None:
    app.command("sweep")(sweep_command)
    app.command("results")(results_command)
