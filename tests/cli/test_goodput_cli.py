"""`fabric goodput`: one JSON object, the same numbers as the importable function, one-line errors."""

import json

import pytest

from workloads.goodput.summary import goodput_summary
from topologies import build

ARGS = ("goodput", "nvl-72", "--gpus", 144, "--model", "llama3-8b", "--tp", 8, "--pp", 1, "--dp", 16,
        "--global-batch", 64, "--no-search", "--comm", "analytic")


def test_json_and_same_numbers_as_the_function(run_cli):
    rc, out, err = run_cli(*ARGS, "--seed", 2, "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert 0 < d["goodput_ratio"] < 1 and d["effective_tokens_per_s"] < d["healthy_tokens_per_s"]
    assert d["span_days"] == pytest.approx(348.0, abs=1.0)
    assert len(d["series"]["day"]) == len(d["series"]["tokens_per_s"]) > 300
    assert set(d["gpu_hours_lost"]) == {"faults", "waste", "restart", "recomputation", "replacement", "checkpoint",
                                        "slower_placement"}
    direct = goodput_summary(build("nvl-72", 144, {}), "llama3-8b", seed=2, search=False, comm="analytic",
                             tp=8, pp=1, dp=16, global_batch=64)
    assert d["goodput_ratio"] == direct["goodput_ratio"]
    assert d["tokens_per_s_per_musd"] == direct["tokens_per_s_per_musd"]
    # the healthy job is exactly `fabric mfu`'s, and the effective throughput is it times the goodput ratio
    rc, out, err = run_cli("mfu", "nvl-72", "--gpus", 144, "--model", "llama3-8b", "--tp", 8, "--pp", 1, "--dp", 16,
                           "--global-batch", 64, "--comm", "analytic", "--json")
    m = json.loads(out)
    assert d["healthy_tokens_per_s"] == m["tokens_per_s"] and d["config"] == m["config"]
    assert d["effective_tokens_per_s"] == pytest.approx(d["goodput_ratio"] * m["tokens_per_s"], rel=1e-12)


def test_costs_move_goodput_the_right_way(run_cli):
    rc, out, _ = run_cli(*ARGS, "--json", "--no-series", "--recovery", "restart=1min")
    fast = json.loads(out)
    rc, out, _ = run_cli(*ARGS, "--json", "--no-series", "--recovery", "restart=1h")
    slow = json.loads(out)
    assert "series" not in fast and slow["goodput_ratio"] < fast["goodput_ratio"]
    assert slow["recovery"]["sources"]["restart_s"] == "given by the user"


def test_human_output(run_cli):
    rc, out, err = run_cli(*ARGS, "--policy", "elastic")
    assert rc == 0, err
    assert "goodput ratio" in out and "recomputation" in out and "rebalances" in out


@pytest.mark.parametrize("extra,flag", [
    (("--policy", "greedy"), "--policy"),
    (("--recovery", "warmup=3s"), "--recovery"),
    (("--recovery", "restart=-3s"), "--recovery restart"),
    (("--recovery", "checkpoint_interval=0"), "--recovery checkpoint_interval"),  # was exit 0: free checkpoints
    (("--trace", "/nonexistent.json"), "--trace"),
    (("--trace-mapping", "zigzag"), "--trace-mapping"),
    (("--seed", -1), "--seed"),
    (("--placement-timing", "fast"), "--placement-timing"),
])
def test_bad_input_one_line_exit_2(run_cli, extra, flag):
    rc, out, err = run_cli(*ARGS, *extra, "--json")
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and flag in err and len(err.strip().splitlines()) == 1


def test_study_row_equals_fabric_goodput_json(tmp_path, run_cli):
    """The sweep metric reuses the mfu metric's healthy job and gives the command's numbers; i.i.d. rows stay empty."""
    import yaml

    from cli.study.spec import load_study
    from cli.study.store import read_results
    from workloads.goodput import SCALAR_KEYS

    opts = {"model": "llama3-8b", "search": False, "tp": 8, "pp": 1, "comm": "analytic"}
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({
        "gpus": 64, "architectures": [{"name": "dgx"}], "faults": {"ratios": [0.0], "traces": ["stepfun"]},
        "seeds": [4], "metrics": [{"mfu": opts}, {"goodput": opts}]}, sort_keys=False))
    rc, out, err = run_cli("sweep", spec, "--out", tmp_path / "out", "--workers", "1", "--json")
    assert rc == 0 and json.loads(out)["failed"] == 0, (out, err)
    df = read_results(tmp_path / "out")
    rc, out, err = run_cli("goodput", "dgx", "--gpus", 64, "--model", "llama3-8b", "--tp", 8, "--pp", 1,
                           "--no-search", "--comm", "analytic", "--seed", 4, "--json")
    assert rc == 0, err
    data = json.loads(out)
    for p in load_study(spec).points:
        row = df[df["point_id"] == p.point_id].iloc[0]
        got = {k: row[f"goodput_{k}"] for k in SCALAR_KEYS}
        if p.fault.kind == "trace":
            assert got == pytest.approx({k: data[k] for k in SCALAR_KEYS}, rel=1e-15)
        else:
            assert all(v is None or v != v for v in got.values())  # None (or NaN in a float column)


def test_hbd_size_study_validates_and_its_metric_equals_fabric_mfu(tmp_path, run_cli):
    """studies/hbd-size.yaml expands to 30 points; its mfu_workload row equals `fabric mfu --tp 16` on DGX."""
    from pathlib import Path

    import yaml

    from cli.study.spec import load_study
    from cli.study.store import read_results

    study = load_study(Path(__file__).resolve().parents[2] / "studies" / "hbd-size.yaml")
    assert len(study.points) == 30 and {m.name for m in study.metrics} == {"cost", "mfu_workload"}
    spec = tmp_path / "s.yaml"
    spec.write_text(yaml.safe_dump({
        "gpus": 64, "architectures": [{"name": "dgx"}],
        "workloads": [{"name": "w", "tp": [8, 16], "params": {"model": "llama3-8b", "pp": 1}}],
        "metrics": [{"mfu_workload": {"comm": "analytic"}}]}, sort_keys=False))
    rc, out, err = run_cli("sweep", spec, "--out", tmp_path / "out", "--workers", "1", "--json")
    assert rc == 0 and json.loads(out)["failed"] == 0, (out, err)
    df = read_results(tmp_path / "out")
    rc, out, err = run_cli("mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--tp", 16, "--pp", 1, "--comm",
                           "analytic", "--json")
    d = json.loads(out)
    row = df[df["tp"] == 16].iloc[0]
    assert row["mfu_workload_mfu"] == d["mfu"] and bool(row["mfu_workload_tp_beyond_hbd"])
    assert not bool(df[df["tp"] == 8].iloc[0]["mfu_workload_tp_beyond_hbd"])


def test_a_searched_tp_below_a_khop_node_is_replayed_inside_nodes(run_cli):
    """llama3-8b on 256 k-hop GPUs searches TP 1: the replay forms TP groups inside healthy nodes (the k-hop
    policy, a node's full mesh), so the searched TP is kept; a fault drains its whole node either way, so the
    goodput ratio equals the one of TP 4 (whole nodes) on the same trace (exact: same drained nodes, same
    full-cluster job)."""
    rc, out, err = run_cli("goodput", "khop-ring", "--gpus", 256, "--model", "llama3-8b", "--comm", "analytic",
                           "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["config"].startswith("tp1 ") and 0 < d["goodput_ratio"] <= 1
    rc, out, err = run_cli("goodput", "khop-ring", "--gpus", 256, "--model", "llama3-8b", "--comm", "analytic",
                           "--tp", 4, "--json")
    assert rc == 0, err
    assert json.loads(out)["goodput_ratio"] == d["goodput_ratio"]


def test_no_series_without_json_is_refused(run_cli):
    """--no-series trims the JSON; on the printed summary it did nothing, silently."""
    rc, out, err = run_cli(*ARGS, "--no-series")
    assert rc == 2 and out == "" and "--no-series" in err and len(err.strip().splitlines()) == 1


def test_a_fixed_job_without_spares_says_why_its_goodput_is_low(run_cli):
    """A fixed job on every GPU runs only while the whole cluster is healthy: the ratio shows it, the note says
    why and what to try; a job that leaves spares gets no such note."""
    base = ("goodput", "dgx", "--gpus", 64, "--model", "llama3-8b", "--comm", "analytic", "--tp", 8, "--pp", 1,
            "--cp", 1, "--no-series", "--json")
    rc, out, err = run_cli(*base, "--dp", 8)
    assert rc == 0, err
    full = json.loads(out)
    assert any("leaving no spare" in n for n in full["notes"])
    rc, out, err = run_cli(*base, "--dp", 4)
    assert rc == 0, err
    spare = json.loads(out)
    assert not any("leaving no spare" in n for n in spare["notes"])
    assert spare["goodput_ratio"] >= full["goodput_ratio"]
