"""Bad and unusual inputs found by the third edge probe (branch probe3).

Each case: exit status 2, one ``error:`` line naming the flag or file field and what is allowed, no traceback,
nothing written -- or, for a valid input, the command works.  The docstring of each test says what the tool
did before.
"""

from __future__ import annotations

import json

import pytest

from tests.cli.test_edges import one_error

HUGE = "1" + "0" * 30


# ------------------------------------------------------------------------------------------------ --dp bound
def test_orchestrate_dp_past_the_gpus_limit_names_the_limit(run_cli):
    """`orchestrate --dp 10**30` (a str flag, unseen by the gpus rule of --tp/--pp/--count) reached the job
    check and was refused as '10**30 must be a whole number >= 1 or max', which it is."""
    rc, _, err = run_cli("orchestrate", "--gpus", "64", "--tp", "8", "--dp", HUGE, "--node-fault-ratio", "0.1",
                         "--json")
    line = one_error(rc, err, "--dp", "limit")
    assert "whole number" not in line


def test_sweep_orchestrator_dp_past_the_gpus_limit_is_refused_when_the_spec_is_read(run_cli, tmp_path):
    """A spec's `orchestrator: {dp: 10**30}` passed the spec check; every point then failed (exit 1)."""
    spec = tmp_path / "s.yaml"
    spec.write_text("gpus: 64\narchitectures: [{name: khop-ring}]\nworkloads: [{name: w, tp: 8}]\n"
                    f"faults: {{ratios: [0.1]}}\nmetrics: [{{orchestrator: {{dp: {HUGE}}}}}]\n")
    rc, _, err = run_cli("sweep", spec, "--out", tmp_path / "out")
    one_error(rc, err, "s.yaml:metrics[0].orchestrator.dp", "limit")
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------- too few GPUs for the fixed architectures
@pytest.mark.parametrize("args", [
    ("compare", "--gpus", "1"),
    ("compare", "--gpus", "12"),
    ("faults-table", "--gpus", "8", "--tp", "8", "--samples", "1"),
    ("orchestrate-table", "--gpus", "8", "--tp", "8", "--dp", "1", "--samples", "1", "--trace", ""),
])
def test_too_few_gpus_for_the_reference_architectures_gives_no_range_of_k_as_gpus(run_cli, args):
    """`compare --gpus 1` said 'error: --gpus: k=2 reaches past the only node; allowed: 1', and --gpus 12
    'allowed: 1..2': the k-hop ring's range of k, read as the range of --gpus (1 was just refused)."""
    rc, _, err = run_cli(*args, "--json")
    line = one_error(rc, err, "--gpus", "give a larger --gpus")
    assert "allowed" not in line


# ------------------------------------------------------------------------------- integer lists: too many digits
@pytest.mark.parametrize("args,flag", [
    (("simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MiB", "--ranks",
      "0-" + "9" * 20), "--ranks"),
    (("orchestrate", "--gpus", "64", "--tp", "8", "--dp", "2", "--tor-map", "9" * 23 + ",0" * 15), "--tor-map"),
    (("orchestrate", "--gpus", "64", "--tp", "8", "--dp", "2", "--faulty-nodes", "1" * 22), "--faulty-nodes"),
])
def test_a_whole_number_of_too_many_digits_is_called_too_large(run_cli, args, flag):
    """A 20-digit rank was refused as 'cannot read ...; give GPU indices like 0,1,2', a 23-digit ToR id as 'is not
    a ToR id (whole numbers >= 0)': both false of a whole number >= 0 (the lists read at most 18 digits)."""
    rc, _, err = run_cli(*args, "--json")
    line = one_error(rc, err, flag, "too large", "18 digits")
    assert "cannot read" not in line and "is not a" not in line


# ----------------------------------------------------------------------------------- a catalog's $0 HBD parts
FREE_NVL_HBD = ("components:\n"
                "  nvlink_switch_tray: {price_usd: {value: \"$0\", source: \"assumed: already owned\"}}\n"
                "  nvl_copper_spine: {price_usd: {value: \"$0\", source: \"assumed: already owned\"}}\n")


def test_compare_with_a_free_nvl72_hbd_has_no_ratio_to_it(run_cli, tmp_path):
    """`compare --catalog` pricing NVL-72's switch trays and copper spine at $0 ended in a ZeroDivisionError
    traceback (exit 1); the ratio to NVL-72 is now null (the table shows '-') and the rest is printed."""
    cat = tmp_path / "cat.yaml"
    cat.write_text(FREE_NVL_HBD)
    rc, out, err = run_cli("compare", "--gpus", "576", "--catalog", cat, "--json")
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    assert all(r["hbd_capex_vs_nvl72"] is None for r in rows)
    assert any(r["hbd_capex_per_gpu_usd"] > 0 for r in rows)
    rc, out, err = run_cli("compare", "--gpus", "576", "--catalog", cat)
    assert rc == 0 and "Traceback" not in err, err


def test_cost_versus_a_free_hbd_is_refused_naming_versus(run_cli, tmp_path):
    """`cost khop-ring --versus nvl-72` with NVL-72's HBD parts at $0 divided by it: a traceback, exit 1."""
    cat = tmp_path / "cat.yaml"
    cat.write_text(FREE_NVL_HBD)
    rc, _, err = run_cli("cost", "khop-ring", "--gpus", "576", "--catalog", cat, "--versus", "nvl-72", "--json")
    one_error(rc, err, "--versus", "$0")


def _free_catalog(tmp_path):
    """Every part of the shipped catalog at $0 and 0 W (a valid catalog: prices and powers are >= 0)."""
    import re
    from pathlib import Path

    import fabric

    text = (Path(fabric.__file__).parent / "data" / "catalog.yaml").read_text()
    text = re.sub(r'price_usd: \{value: "[^"]*"', 'price_usd: {value: "$0"', text)
    text = re.sub(r"power_w: \{value: [0-9.]+W", "power_w: {value: 0W", text)
    path = tmp_path / "free.yaml"
    path.write_text(text)
    return path


def test_goodput_of_a_free_cluster_has_no_per_dollar_or_per_mw_figures(run_cli, tmp_path):
    """goodput with every part at $0 and 0 W divided tokens/s by the capex: ZeroDivisionError traceback, exit 1."""
    cat = _free_catalog(tmp_path)
    args = ("goodput", "dgx", "--gpus", "64", "--model", "llama3-8b", "--comm", "analytic", "--catalog", cat)
    rc, out, err = run_cli(*args, "--json", "--no-series")
    assert rc == 0, err
    data = json.loads(out)
    assert data["tokens_per_s_per_musd"] is None and data["tokens_per_s_per_mw"] is None
    assert data["model_pflops_per_musd"] is None and data["effective_tokens_per_s"] > 0
    rc, out, err = run_cli(*args)
    assert rc == 0 and "Traceback" not in err, err


@pytest.mark.parametrize("extra", [(), ("--table",)])
def test_rl_of_a_free_cluster_is_refused_naming_the_catalog(run_cli, tmp_path, extra):
    """rl (samples/s per $M is what it compares) with a $0 cluster: ZeroDivisionError traceback, exit 1."""
    cat = _free_catalog(tmp_path)
    rc, _, err = run_cli("rl", "--model", "llama3-8b", "--comm", "analytic", "--catalog", cat, *extra, "--json")
    one_error(rc, err, "--catalog", "$0")


# -------------------------------------------------------------------------------- one design or workload twice
@pytest.mark.parametrize("doc,field,words", [
    ({"gpus": [63, 64], "architectures": [{"name": "dgx"}], "metrics": ["cost"]},
     "study.yaml:gpus", "63 and 64 GPUs both build dgx at 64"),
    ({"architectures": [{"name": "dgx", "gpus": 63}, {"name": "dgx", "label": "b", "gpus": 64}], "metrics": ["cost"]},
     "study.yaml:architectures[1]", "repeats a design of architectures[0]"),
    ({"gpus": 64, "architectures": [{"name": "dgx"}], "workloads": [{"name": "a", "tp": 8}, {"name": "b", "tp": 8}],
      "metrics": ["faults"]}, "study.yaml:workloads[1]", "repeats workload a"),
])
def test_a_spec_that_runs_one_design_twice_is_refused(doc, field, words):
    """gpus [63, 64] built dgx at 64 GPUs twice (two rows 'dgx 64', alike to the dollar), and so did one design at
    63 and 64 in two entries; workloads a and b of the same tp and params ran every point twice.  The spec
    already refused the same design under two labels."""
    from cli.study.spec import parse_study
    from fabric.errors import FabricError

    with pytest.raises(FabricError) as exc:
        parse_study(doc)
    assert exc.value.field == field and words in exc.value.message, str(exc.value)


def test_gpu_counts_that_build_different_sizes_are_kept():
    """The check compares built sizes: 64 and 72 GPUs are two DGX designs (8 and 9 nodes)."""
    from cli.study.spec import parse_study

    study = parse_study({"gpus": [64, 72], "architectures": [{"name": "dgx"}], "metrics": ["cost"]})
    assert sorted(p.gpus for p in study.points) == [64, 72]


def test_report_of_a_free_study_does_not_blame_the_rebuild(run_cli, tmp_path):
    """A study whose catalog prices every part at $0: the report said 'Cost by component: the designs could not be
    rebuilt from the study spec' -- they were rebuilt; every part just costs nothing."""
    cat = _free_catalog(tmp_path)
    spec = tmp_path / "s.yaml"
    spec.write_text(f"gpus: 64\ncatalog: {cat}\narchitectures: [{{name: dgx}}]\nmetrics: [cost]\n")
    rc, _, err = run_cli("sweep", spec, "--out", tmp_path / "out", "--workers", "1", "--json")
    assert rc == 0, err
    rc, _, err = run_cli("report", tmp_path / "out", "--out", tmp_path / "r.html")
    assert rc == 0, err
    note = next(ln for ln in err.splitlines() if "Cost by component" in ln)
    assert "no design has a priced part" in note
