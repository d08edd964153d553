"""Sweep metrics `orchestrator`, `mfu` and `rl`: a study row equals the single command's `--json`."""

import json

import pytest
import yaml

from cli.study.metrics import _scalar_tree
from cli.study.store import read_results
from cli.study.spec import load_study


def _flat(prefix: str, data: dict, out: dict) -> dict:
    for k, v in data.items():
        if isinstance(v, dict):
            _flat(f"{prefix}_{k}", v, out)
        else:
            out[f"{prefix}_{k}"] = v
    return out


def _run(tmp_path, run_cli, doc: dict):
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    rc, out, err = run_cli("sweep", spec, "--out", tmp_path / "out", "--workers", "1", "--json")
    assert rc == 0, err
    assert json.loads(out)["failed"] == 0, out
    return load_study(spec), read_results(tmp_path / "out")


def _row(df, point, keys):
    row = df[df["point_id"] == point.point_id].iloc[0]
    return {k: (row[k].item() if hasattr(row[k], "item") else row[k]) for k in keys}


def test_orchestrator_row_equals_fabric_orchestrate_json(tmp_path, run_cli):
    study, df = _run(tmp_path, run_cli, {
        "gpus": 256, "architectures": [{"name": "khop-ring", "params": {"k": 2}}],
        "workloads": [{"name": "tp8", "tp": 8}], "faults": {"ratios": [0.0, 0.05]}, "seeds": [1],
        "metrics": [{"orchestrator": {"dp": "4", "time_limit": 20}}]})
    assert len(study.points) == 2
    for p in study.points:
        rc, out, err = run_cli("orchestrate", "khop-ring", "--gpus", 256, "-p", "k=2", "--tp", 8, "--dp", 4,
                               "--node-fault-ratio", p.fault.ratio, "--seed", 1, "--time-limit", 20, "--json")
        assert rc == 0, err
        data = json.loads(out)
        expected = _flat("orchestrator", _scalar_tree(data, drop=("architecture", "tp")), {})
        assert "orchestrator_cross_tor_traffic_ratio" in expected
        assert not any(k.endswith("_seconds") for k in expected)
        assert _row(df, p, expected) == expected, p.fault


def test_mfu_row_equals_fabric_mfu_json(tmp_path, run_cli):
    study, df = _run(tmp_path, run_cli, {
        "gpus": 64, "architectures": [{"name": "dgx"}], "faults": {"ratios": [0.0, 0.03]},
        "metrics": [{"mfu": {"model": "llama3-8b", "search": False, "tp": 8, "pp": 1}}]})
    rc, out, err = run_cli("mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--tp", 8, "--pp", 1, "--json")
    assert rc == 0, err
    data = json.loads(out)
    expected = _flat("mfu", _scalar_tree(data, drop=("architecture", "params", "gpus", "model_spec", "gemm_model")),
                     {"mfu_seq_len": data["model_spec"]["seq_len"]})
    for p in study.points:  # computed once for the Fabric, the same in every fault row
        assert _row(df, p, expected) == expected


def test_rl_row_equals_fabric_rl_json(tmp_path, run_cli):
    study, df = _run(tmp_path, run_cli, {
        "gpus": 64, "architectures": [{"name": "dgx", "params": {"gpu": "h800"}}],
        "metrics": [{"rl": {"model": "llama3-8b", "samples": 256}}]})
    rc, out, err = run_cli("rl", "--gpus", 64, "--model", "llama3-8b", "--fabric", "static", "--comm", "analytic",
                           "-p", "samples=256", "--json")
    assert rc == 0, err
    data = json.loads(out)["static"]
    expected = _flat("rl", _scalar_tree(data, drop=("architecture", "params", "gpus")), {})
    assert "rl_samples_per_s_per_musd" in expected and "rl_phases_generation" in expected
    assert _row(df, study.points[0], expected) == expected


def test_orchestrator_rejects_non_node_faults(tmp_path, run_cli):
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({
        "gpus": 64, "architectures": [{"name": "khop-ring"}], "workloads": [{"name": "tp8", "tp": 8}],
        "faults": {"ratios": [0.05], "component": "gpu"}, "metrics": [{"orchestrator": {"solver": "greedy"}}]}))
    rc, out, err = run_cli("sweep", spec, "--out", tmp_path / "out", "--workers", "1", "--json")
    # refused when the spec is read (every point used to run and fail: a row with status failed, exit 1)
    assert rc == 2 and "faults.component" in err and "node faults only" in err, err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("gpus, tp, words", [
    (64, 5, "must divide 4 or be a multiple of 4 for khop-ring"),  # above the node, not whole nodes
    (4096, 6, "must divide 4 or be a multiple of 4 for khop-ring"),  # above PROBE_GPUS: checked on a probe
    (64, 128, "exceeds the 64 GPUs"),
])
def test_faults_metric_refuses_a_tp_the_hbd_refuses_before_work(tmp_path, run_cli, gpus, tp, words):
    """The faults metric's TP check is the allocation's own (that of `fabric faults`), run when the spec is
    read: exit 2, one line naming the workload's tp, no output folder (was: khop rows with waste 0.25)."""
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({
        "gpus": gpus, "architectures": [{"name": "dgx"}, {"name": "khop-ring"}],
        "workloads": [{"name": "a", "tp": tp}], "faults": {"ratios": [0.05]}, "metrics": [{"faults": {"samples": 5}}]}))
    rc, out, err = run_cli("sweep", spec, "--out", tmp_path / "out", "--workers", "1", "--json")
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {spec}:workloads[0].tp: ") and words in err
    assert not (tmp_path / "out").exists()


def test_faults_metric_tp_dividing_the_node_wastes_nothing(tmp_path, run_cli):
    """TP 2 divides the k-hop ring's 4-GPU node: allowed, and (closed form) every healthy GPU is usable."""
    study, df = _run(tmp_path, run_cli, {
        "gpus": 64, "architectures": [{"name": "khop-ring"}], "workloads": [{"name": "a", "tp": 2}],
        "faults": {"ratios": [0.05]}, "metrics": [{"faults": {"samples": 20, "blast": False}}]})
    assert df["faults_waste_ratio_max"].tolist() == [0.0]


def test_faults_options_from_a_workload_draw_the_faults_they_set(tmp_path, run_cli):
    """A workload's `samples: 1500, mode: exact` set the faults metric's options but not the shared fault draw (drawn
    with the defaults, 1,000 bernoulli samples): every point failed with an IndexError.  Exact: the same options
    given as the metric's own must give the same faults columns, bit for bit."""
    base = {"gpus": 64, "architectures": [{"name": "khop-ring"}], "faults": {"ratios": [0.05]}, "seeds": [3]}
    opts = {"samples": 1500, "mode": "exact"}
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    _, by_metric = _run(tmp_path / "a", run_cli, {**base, "workloads": [{"name": "w", "tp": 8}],
                                                 "metrics": [{"faults": opts}]})
    _, by_workload = _run(tmp_path / "b", run_cli, {**base, "workloads": [{"name": "w", "tp": 8, "params": opts}],
                                                   "metrics": ["faults"]})
    cols = [c for c in by_metric.columns if c.startswith("faults_")]
    assert cols and by_metric[cols].equals(by_workload[cols])


def test_a_workloads_samples_pass_the_samples_limit_when_read(tmp_path, run_cli):
    """The limit guarded the metric's own `samples` only: 1e11 from a workload ran for a minute, then failed."""
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({"gpus": 64, "architectures": [{"name": "dgx"}], "faults": {"ratios": [0.1]},
                                    "workloads": [{"name": "w", "tp": 8, "params": {"samples": 10**11}}],
                                    "metrics": ["faults"]}))
    rc, _, err = run_cli("sweep", spec, "--out", tmp_path / "out")
    assert rc == 2 and "workloads[0].params.samples: needs about 100,000,000,000 samples" in err
    assert not (tmp_path / "out").exists()
