"""`fabric report`, `fabric results --sql`, progress lines and the compact comparison table."""

from __future__ import annotations

import io
import itertools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cli.study.progress import LineProgress, make_progress
from cli.study.store import read_results
from fabric.viewer.report import pareto_front
from tests.cli.study_fixture import COST_ONLY, run_small_study


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return run_small_study(tmp_path_factory.mktemp("full"))


# ------------------------------------------------------------------------------------------------ Pareto front
@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=12), st.booleans())
def test_pareto_front_is_the_definition(points, higher):
    """Checked against the definition, pair by pair: a front point is dominated by no point,
    and every point off the front is dominated by a point on it (domination is transitive)."""
    on = pareto_front(points, higher)
    s = 1 if higher else -1

    def dominates(a, b):
        return a[0] <= b[0] and s * a[1] >= s * b[1] and (a[0] < b[0] or s * a[1] > s * b[1])

    for i, p in enumerate(points):
        if on[i]:
            assert not any(dominates(q, p) for q in points)
        else:
            assert any(dominates(q, p) for q, o in zip(points, on) if o)


# ------------------------------------------------------------------------------------------------ report
def test_report_has_every_plot_of_a_full_study(study, run_cli, tmp_path):
    out = tmp_path / "r.html"
    rc, stdout, err = run_cli("report", study, "--out", out, "--json")
    data = json.loads(stdout)
    assert rc == 0 and data["out"] == str(out) and data["designs"] == 3
    # waste, MFU and cross-ToR are in the study; goodput is not, and says so
    assert [p.split(" ")[0] for p in data["plots"]] == ["GPU", "MFU", "cross-ToR"]
    assert any("goodput" in n for n in data["notes"])
    text = out.read_text()
    assert "cdn.bokeh.org" not in text and "Bokeh" in text  # BokehJS inlined: opens offline
    for words in ("Pareto front", "waste ratio against node fault ratio", "by scope", "by component", "Tornado"):
        assert words in text, words
    assert "ocs_transceiver" in text or "OCS" in text  # the k-hop ring's assumed price is on the tornado


def test_report_default_path_and_overwrite_removes_it(study, run_cli, tmp_path):
    rc, stdout, _ = run_cli("report", study)
    assert rc == 0 and stdout.strip() == f"report: {study / '_report.html'}"
    assert (study / "_report.html").is_file()
    # the report is the sweep's own file: readers skip it and --overwrite may delete it
    assert len(read_results(study)) == 9


def test_report_of_a_study_without_faults_or_mfu(tmp_path, run_cli, capsys):
    out = run_small_study(tmp_path, COST_ONLY)
    capsys.readouterr()  # the sweep's own output
    rc, stdout, err = run_cli("report", out, "--json")
    data = json.loads(stdout)
    assert rc == 0 and data["plots"] == []
    notes = " ".join(data["notes"])
    for missing in ("waste", "MFU", "goodput", "cross-ToR", "Waste against fault ratio"):
        assert missing in notes, missing


def test_report_of_a_study_whose_every_point_failed(tmp_path, run_cli, capsys):
    """Every point fails (a DP size that cannot fit): the page is still written, every plot replaced by a note."""
    doc = {"name": "all-failed", "gpus": 256, "architectures": [{"name": "dgx"}], "workloads": [{"name": "w", "tp": 8}],
           "metrics": ["cost", {"orchestrator": {"dp": "1000", "solver": "greedy"}}]}
    out = run_small_study(tmp_path, doc, expect_rc=1)  # a study whose every point failed exits 1
    capsys.readouterr()
    rc, stdout, _ = run_cli("report", out, "--json")
    data = json.loads(stdout)
    assert rc == 0 and data["plots"] == [] and (out / "_report.html").is_file()
    assert any("every point failed" in n for n in data["notes"])


@pytest.mark.parametrize("args, words", [
    (["{missing}"], "error: DIR: no such folder"),
    (["{empty}"], "error: DIR: no sweep results"),
    (["{study}", "--out", "{missing}/r.html"], "error: --out: directory"),
])
def test_report_bad_input(study, run_cli, tmp_path, args, words):
    (tmp_path / "empty").mkdir()
    names = {"missing": tmp_path / "nope", "empty": tmp_path / "empty", "study": study}
    rc, stdout, err = run_cli("report", *[a.format(**names) for a in args])
    assert rc == 2 and err.startswith(words) and stdout == "" and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "empty" / "_report.html").exists()


# ------------------------------------------------------------------------------------------------ SQL
def test_sql_matches_pandas(study, run_cli):
    """The README's query, checked against the same mean computed with pandas on read_results."""
    sql = "SELECT architecture, avg(faults_waste_ratio_mean) AS waste FROM results GROUP BY 1 ORDER BY 1"
    rc, stdout, _ = run_cli("results", study, "--sql", sql, "--json")
    got = {r["architecture"]: r["waste"] for r in json.loads(stdout)["rows"]}
    want = read_results(study).groupby("architecture")["faults_waste_ratio_mean"].mean().to_dict()
    assert rc == 0 and got.keys() == want.keys()
    assert all(abs(got[k] - want[k]) < 1e-12 for k in want)


def test_sql_merges_every_architectures_columns(study, run_cli):
    # p_k exists only in the k-hop ring's files; union_by_name makes it null elsewhere
    rc, stdout, _ = run_cli("results", study, "--sql",
                            "SELECT architecture, count(p_k) AS with_k, count(*) AS n FROM results "
                            "GROUP BY 1 ORDER BY 1",
                            "--csv")
    assert rc == 0 and stdout.splitlines() == ["architecture,with_k,n", "dgx,0,3", "khop-ring,3,3", "nvl-72,0,3"]


@pytest.mark.parametrize("sql, extra, words", [
    ("SELECT waste FROM results", [], "error: --sql: Binder Error"),
    ("SELEKT 1", [], "error: --sql: Parser Error"),
    ("  ", [], "error: --sql: empty"),
    ("SELECT 1", ["--rows"], "error: --rows: does not combine with --sql"),
    (";", [], "error: --sql: 0 statements"),
    ("SELECT 1; SELECT 2", [], "error: --sql: 2 statements"),
    ("COPY results TO 'leak.csv'", [], "error: --sql: COPY statement refused"),
    ("ATTACH 'leak.db'", [], "error: --sql: ATTACH statement refused"),
    ("CREATE TABLE leak AS SELECT 1", [], "error: --sql: CREATE statement refused"),
    ("SET enable_external_access = true", [], "error: --sql: SET statement refused"),
    ("SELECT * FROM read_csv('/etc/hostname')", [], "error: --sql: Permission Error"),
    ("SELECT 1 FROM read_parquet('leak/*.parquet')", [], "error: --sql: Permission Error"),
])
def test_sql_bad_input(study, run_cli, sql, extra, words, tmp_path, monkeypatch):
    """Anything but one SELECT over the sweep folder is refused, and nothing is written (DuckDB sandboxed)."""
    monkeypatch.chdir(tmp_path)
    rc, stdout, err = run_cli("results", study, "--sql", sql, *extra)
    assert rc == 2 and err.startswith(words) and stdout == "" and len(err.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_sql_describe_lists_the_columns(study, run_cli):
    rc, stdout, err = run_cli("results", study, "--sql", "DESCRIBE results", "--json")
    assert rc == 0, err
    names = {r["column_name"] for r in json.loads(stdout)["rows"]}
    assert {"architecture", "point_id", "fault_ratio"} <= names


# ------------------------------------------------------------------------------------------------ tables
def test_compact_comparison_fits_120_columns(study):
    from rich.console import Console

    from cli.study.report import comparison, comparison_table

    rows, cols = comparison(read_results(study))
    con = Console(width=120, record=True, file=io.StringIO())
    con.print(comparison_table(rows, cols, "t"))
    text = con.export_text()
    lines = text.splitlines()
    assert "…" not in text and max(map(len, lines)) <= 120
    # one line per design (no wrapped names) and a legend line per short header
    assert sum(1 for ln in lines if ln.lstrip().startswith(("dgx-h100", "nvl-72", "khop-ring k=2"))) == 3
    assert "waste3  GPU waste ratio at 3 %" in text


def test_wide_table_has_full_titles(study, run_cli):
    rc, stdout, _ = run_cli("results", study, "--wide")
    assert rc == 0 and "cross-ToR @3%" in stdout and "points" in stdout and "…" not in stdout


def test_wide_does_not_combine_with_rows(study, run_cli):
    """--rows prints the row columns as they are; with --wide it printed the same, the flag ignored in silence."""
    rc, stdout, err = run_cli("results", study, "--rows", "--wide")
    assert rc == 2 and stdout == "" and err.startswith("error: --wide") and "--rows" in err
    assert len(err.strip().splitlines()) == 1


# ------------------------------------------------------------------------------------------------ progress
def test_progress_lines_when_not_a_terminal():
    """Off a terminal: one line per batch with done, failed, rate and an ETA from the rate so far."""
    clock = itertools.count(0.0, 10.0)  # each call: 10 s later
    stream = io.StringIO()
    p = LineProgress("demo", 100, stream, clock=lambda: next(clock))
    p.advance(20, 1)  # 20 points in 10 s: 2 points/s, 80 left: 40 s
    p.advance(30)
    first, second = stream.getvalue().splitlines()
    assert first == "demo: 20/100 points (20 %), 1 failed, 2 points/s, elapsed 10 s, ETA 40 s"
    assert second == "demo: 50/100 points (50 %), 1 failed, 2.5 points/s, elapsed 20 s, ETA 20 s"
    assert isinstance(make_progress("x", 1, io.StringIO()), LineProgress)


def test_sweep_prints_progress_lines_to_a_log(tmp_path, run_cli):
    from tests.cli.study_fixture import write_spec_only

    spec = write_spec_only(tmp_path, COST_ONLY)
    rc, stdout, err = run_cli("sweep", spec, "--out", tmp_path / "o", "--workers", "1")
    lines = [ln for ln in err.splitlines() if ln.startswith("cost-only: ")]
    assert rc == 0 and lines and lines[-1].startswith("cost-only: 2/2 points (100 %), 0 failed, ")
    assert "ETA 0 s" in lines[-1]


@pytest.mark.parametrize("columns, words", [("tp,tp", "named twice"), ("tp,,seed", "empty name"), (",", "empty name"),
                                            ("", "empty name")])
def test_rows_columns_are_named_once_each(study, run_cli, columns, words):
    """A repeated or empty column name is one line naming --columns, not a pandas traceback or a silent drop."""
    rc, stdout, err = run_cli("results", study, "--rows", "--columns", columns, "--json")
    assert rc == 2 and stdout == "" and err.startswith("error: --columns") and words in err
    assert len(err.strip().splitlines()) == 1


def test_rows_too_wide_for_the_console_print_as_plain_lines(study, run_cli):
    """`results --rows` of every column (over a hundred) off a terminal (160 characters) folded each cell of its
    rich table to nothing: a page of box borders, no values.  Now it prints one plain line a row (the values
    readable, `cut` and `less -S` work) and says so on stderr; few columns still get the table."""
    rc, stdout, err = run_cli("results", study, "--rows")
    assert rc == 0, err
    lines = stdout.splitlines()
    header = [c.strip() for c in lines[1].split("│")]
    assert header[:3] == ["point_id", "point_index", "study"] and len(header) > 50
    assert "columns do not fit 160 characters: printed as plain text" in err and "--columns" in err
    rows = lines[3:]
    assert len(rows) == int(lines[0].split(": ")[1].split()[0]) and all(r.count("│") == len(header) - 1 for r in rows)
    rc, stdout, err = run_cli("results", study, "--rows", "--columns", "label,tp,seed")
    assert rc == 0 and err == "" and "┏" in stdout and "label" in stdout
    rc, stdout, err = run_cli("results", study, "--sql", "SELECT * FROM results")  # --columns does not apply here
    assert rc == 0 and "printed as plain text, one line a row; name fewer in the SELECT" in err and "┏" not in stdout


# ------------------------------------------------------------------------------------------------ damaged folders
def _copy(study, tmp_path):
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(study, copy)
    return copy


def test_sql_names_a_truncated_batch(study, run_cli, tmp_path):
    """DuckDB read the batch footers in its CREATE VIEW, outside the error handling: a traceback, exit 1."""
    from cli.study.store import batch_files

    copy = _copy(study, tmp_path)
    victim = batch_files(copy)[0]
    victim.write_bytes(victim.read_bytes()[:100])
    rc, stdout, err = run_cli("results", copy, "--sql", "SELECT count(*) FROM results")
    assert rc == 2 and stdout == "" and len(err.strip().splitlines()) == 1
    assert err.startswith("error: DIR: batch") and victim.name in err and "--resume" in err


def test_a_batch_of_other_column_types_is_named(study, run_cli, tmp_path):
    """A foreign batch whose `gpus` is text: pyarrow's merge raised ArrowTypeError through results and report."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = _copy(study, tmp_path)
    odd = copy / "architecture=dgx" / "batch-999999.parquet"
    pq.write_table(pa.table({"point_id": ["x"], "gpus": ["many"]}), odd)
    for args in (("results", copy), ("report", copy, "--out", tmp_path / "r.html")):
        rc, stdout, err = run_cli(*args)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and str(odd) in err and "gpus" in err, err
    assert not (tmp_path / "r.html").exists()


def test_a_damaged_manifest_is_named_by_resume_and_report(study, run_cli, tmp_path):
    """A manifest that is JSON but not a mapping: `.get` raised AttributeError in `sweep --resume` and `report`."""
    from tests.cli.study_fixture import SMALL_FULL, write_spec_only

    copy = _copy(study, tmp_path)
    (copy / "_sweep.json").write_text("[1, 2]")
    spec = write_spec_only(tmp_path, SMALL_FULL)
    rc, _, err = run_cli("sweep", spec, "--out", copy, "--resume")
    assert rc == 2 and err.startswith("error: --resume:") and "not a mapping" in err and err.count("\n") == 1
    rc, stdout, err = run_cli("report", copy, "--json", "--out", tmp_path / "r.html")
    assert rc == 0 and json.loads(stdout)["designs"] == 3 and "not a mapping" in err


def test_missing_and_repeated_points_are_named(study, run_cli, tmp_path):
    """A removed batch (or a killed sweep) and a batch copied twice were read in silence: the comparison's means
    then cover fewer points, or count some twice."""
    import shutil

    import pyarrow.parquet as pq

    from cli.study.store import batch_files

    total = len(read_results(study))
    copy = _copy(study, tmp_path)
    gone = batch_files(copy)[0]
    removed = pq.read_metadata(gone).num_rows
    gone.unlink()
    rc, stdout, err = run_cli("results", copy, "--json")
    assert rc == 0 and json.loads(stdout)["count"] == total - removed
    assert f"holds {total - removed:,} of the {total:,} points" in err and "--resume" in err
    twice = batch_files(copy)[0]
    shutil.copy(twice, twice.with_name("batch-999999.parquet"))
    # --sql too: it printed no warning, and every aggregate counted the copied points twice
    for args in (("results", copy), ("report", copy, "--out", tmp_path / "r.html"),
                 ("results", copy, "--sql", "SELECT count(*) AS n FROM results", "--json")):
        rc, stdout, err = run_cli(*args)
        assert rc == 0 and "row(s) of points already in it" in err, err
    assert json.loads(stdout)["rows"] == [{"n": total - removed + pq.read_metadata(twice).num_rows}]
    for args in (("results", study), ("results", study, "--sql", "SELECT count(*) FROM results")):
        rc, _, err = run_cli(*args)
        assert rc == 0 and "warning" not in err  # a whole folder: nothing to say


def test_sql_json_of_every_duckdb_type_is_one_json_object(study, run_cli):
    """UUID and BIT values made pandas' JSON encoder raise (a traceback); a BLOB came out as {}. Values JSON has no
    type for are written as text, bytes as DuckDB prints them."""
    sql = ("SELECT '00000000-0000-0000-0000-00000000002a'::UUID AS u, '\\xAA\\x41'::BLOB AS b, 1.5 AS x, "
           "'nan'::DOUBLE AS n, [1, 2] AS l, TIME '12:00' AS t")
    rc, stdout, err = run_cli("results", study, "--sql", sql, "--json")
    assert rc == 0, err
    data = json.loads(stdout)
    assert data["count"] == 1 and data["rows"] == [{"u": "00000000-0000-0000-0000-00000000002a", "b": "\\xAAA",
                                                    "x": 1.5, "n": None, "l": [1, 2], "t": "12:00:00"}]
    rc, stdout, err = run_cli("results", study, "--sql", "SELECT '101'::BIT AS b", "--json")
    assert rc == 0 and len(json.loads(stdout)["rows"]) == 1, err


@pytest.mark.parametrize("name", ["run[1]", "run*", "run?"])
def test_sql_reads_a_folder_whose_name_has_glob_characters(study, run_cli, tmp_path, name):
    """DuckDB read DIR as a glob pattern: `run[1]` matched no file, `run*` the batches of every folder beside it
    (here a second copy, so each point twice)."""
    import shutil

    shutil.copytree(study, tmp_path / name)
    shutil.copytree(study, tmp_path / "run1x")  # what the unescaped pattern would match too
    rc, stdout, err = run_cli("results", tmp_path / name, "--sql", "SELECT count(*) AS n FROM results", "--csv")
    assert rc == 0 and stdout.splitlines() == ["n", str(len(read_results(study)))], err
