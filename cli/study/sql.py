"""SQL over a sweep folder: DuckDB reads the hive-partitioned Parquet directly.

The folder is one table, ``results``: DuckDB's ``read_parquet`` with
``hive_partitioning`` (the ``architecture`` column comes from the folder names)
and ``union_by_name`` (a column that only some architectures or batches have,
such as ``p_k`` or a metric that failed in one batch, is null elsewhere), so
every architecture's columns are merged, as in
:func:`cli.study.store.read_results`.  Nothing is copied or loaded first::

    fabric results results/default --sql "SELECT label, avg(faults_waste_ratio_mean) FROM results GROUP BY 1"
"""

from __future__ import annotations

import warnings
from pathlib import Path

from fabric.errors import FabricError

TABLE = "results"
"""The name a query uses for the sweep's rows."""


def _glob(out: Path) -> str:
    """DuckDB's pattern for the batches of ``out``; the folder's own name is literal, even with ``[``, ``*`` or ``?``
    in it (unescaped, ``o[1]`` matched nothing and ``o*x`` matched the batches of other folders too)."""
    from cli.study.store import PARTITION

    return f"{_escaped(str(Path(out).resolve()))}/{PARTITION}=*/batch-*.parquet"


def _escaped(path: str) -> str:
    """``path`` with DuckDB's glob characters made literal (``[`` -> ``[[]``)."""
    return "".join(f"[{c}]" if c in "[*?" else c for c in path)


def _name_bad_batch(out: Path) -> None:
    """Raise the FabricError of the first batch of ``out`` that cannot be read (none: return)."""
    from cli.study.store import batch_files, read_batch_columns

    for f in batch_files(out):
        read_batch_columns(f, ["point_id"])


def sql_query(out: Path, sql: str):
    """Run ``sql`` over the rows of sweep folder ``out`` (a table named ``results``).

    Parameters
    ----------
    out : Path
        A `fabric sweep` output folder.
    sql : str
        One DuckDB SQL statement, e.g.
        ``SELECT architecture, avg(faults_waste_ratio_mean) FROM results GROUP BY 1``.

    Returns
    -------
    pandas.DataFrame
        The statement's result, columns as the statement names them.

    Raises
    ------
    FabricError
        ``DIR`` holds no batch files; ``--sql`` is empty, is not valid SQL,
        is not exactly one SELECT (no COPY, ATTACH, CREATE, SET: the query
        runs sandboxed, reading the sweep folder only), names an unknown
        column (the message lists DuckDB's closest ones) or returns no result
        set.
    """
    import duckdb

    from cli.study.store import batch_files

    if not sql or not sql.strip():
        raise FabricError("--sql", "empty; give a statement over the table results, e.g. "
                                   "\"SELECT architecture, count(*) FROM results GROUP BY 1\"")
    if not batch_files(out):
        raise FabricError("DIR", f"no sweep results in {out} (expected architecture=*/batch-*.parquet)")
    con = duckdb.connect(":memory:")
    try:
        path = _glob(out).replace("'", "''")
        try:  # DuckDB reads every batch's footer here
            con.execute(f"CREATE VIEW {TABLE} AS SELECT * FROM read_parquet('{path}', hive_partitioning = true, "
                        f"union_by_name = true)")
        except duckdb.Error as exc:  # a truncated or foreign batch: the folder's fault, named as read_results does
            _name_bad_batch(out)
            raise FabricError("DIR", f"the batches of {out} cannot be read as one table "
                                     f"({str(exc).strip().splitlines()[0]})") from None
        # a query reads the sweep folder and nothing else: no COPY TO, ATTACH, read_csv of other files, no
        # settings changed back (DuckDB's sandbox: external access off, the folder allowed, configuration locked)
        folder = str(Path(out).resolve())
        # the view's pattern names the folder escaped (o[[]1]): DuckDB checks that spelling against the list
        allowed = ", ".join("'" + d.replace("'", "''") + "'" for d in dict.fromkeys([folder, _escaped(folder)]))
        con.execute(f"SET allowed_directories = [{allowed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        try:
            statements = con.extract_statements(sql)
            if len(statements) != 1:
                raise FabricError("--sql", f"{len(statements)} statements; give one SELECT (or DESCRIBE) over the "
                                           f"table {TABLE}")
            if statements[0].type != duckdb.StatementType.SELECT:
                kind = str(statements[0].type).rsplit(".", 1)[-1]
                raise FabricError("--sql", f"{kind} statement refused; only a SELECT (or DESCRIBE) over the table "
                                           f"{TABLE} is run")
            cur = con.execute(sql)
            if cur.description is None:
                raise FabricError("--sql", f"{sql!r} returns no rows; give a SELECT over the table {TABLE}")
            with warnings.catch_warnings():
                # DuckDB converts a TIMESTAMP WITH TIME ZONE column (evaluated_at) with DataFrame.drop(inplace=True),
                # which pandas 3.1 deprecates: `SELECT *` raised it under -W error (the test suite)
                warnings.filterwarnings("ignore", message="The inplace keyword", category=DeprecationWarning)
                return cur.df()
        except duckdb.Error as exc:
            # DuckDB's first line says what is wrong; the second, for an unknown column, the closest names
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            why = "; ".join(lines[:2]) if lines else type(exc).__name__
            raise FabricError("--sql", f"{why} (the table is {TABLE}; `fabric results DIR --rows "
                                       f"--columns ...` or DESCRIBE {TABLE} lists the columns)") from None
    finally:
        con.close()
