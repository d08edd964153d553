"""`fabric faults` and `fabric faults-table`: JSON shape, curves, trace replay, one-line errors."""

import json

import pytest

from cli.faults import format_blast_table, format_waste_table, parse_ratios
from solvers.allocation import faults_summary, waste_table
from topologies import build


def test_json_keys(run_cli):
    rc, out, err = run_cli("faults", "nvl-72", "--gpus", 576, "--tp", 32, "--node-fault-ratio", 0.03,
                           "--samples", 200, "--seed", 3, "--json")
    assert rc == 0, err
    d = json.loads(out)
    for key in ("mean", "p50", "p99"):
        assert 0 <= d["waste_ratio"][key] <= 1
    assert d["healthy_gpus"]["mean"] > d["usable_gpus"]["mean"] > 0
    assert d["blast_radius"]["switch"]["mean"] == 0 and "8/9" in d["blast_radius"]["switch"]["note"]
    for comp in ("gpu", "node", "rack", "tor", "link"):
        assert set(d["blast_radius"][comp]) >= {"min", "mean", "max"}
    assert d["fault_model"]["samples"] == 200 and "curve" not in d


def test_same_numbers_as_the_importable_function(run_cli):
    """The sweep engine calls faults_summary: it must give what the CLI prints."""
    rc, out, _ = run_cli("faults", "khop-ring", "--gpus", 512, "-p", "k=2", "--tp", 16, "--node-fault-ratio",
                         0.05, "--samples", 100, "--seed", 7, "--json")
    d = json.loads(out)
    direct = faults_summary(build("khop-ring", 512, {"k": "2"}), 16, node_fault_ratio=0.05, samples=100, seed=7)
    assert d["waste_ratio"] == pytest.approx(direct["waste_ratio"])
    assert d["blast_radius"] == json.loads(json.dumps(direct["blast_radius"]))


def test_curve(run_cli):
    rc, out, err = run_cli("faults", "tpuv4", "--gpus", 1024, "--tp", 64, "--node-fault-ratio", "0:0.1:0.05",
                           "--samples", 100, "--no-blast", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert [r["node_fault_ratio"] for r in d["curve"]] == [0.0, 0.05, 0.1]
    assert d["curve"][0]["waste_ratio"]["mean"] == 0
    assert d["curve"][2]["waste_ratio"]["mean"] > d["curve"][1]["waste_ratio"]["mean"] > 0
    assert d["waste_ratio"] == d["curve"][2]["waste_ratio"]  # the top level is the highest ratio
    assert "blast_radius" not in d
    assert parse_ratios("0:0.1:0.01")[-1] == 0.1 and len(parse_ratios("0:0.1:0.01")) == 11


def test_trace(run_cli):
    rc, out, err = run_cli("faults", "khop-ring", "--gpus", 1600, "--tp", 32, "--trace", "stepfun", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["fault_model"]["kind"] == "trace" and d["fault_model"]["mapping"] == "tile"
    assert d["trace"]["never_failed"] == 169
    assert 0 <= d["waste_ratio"]["p50"] <= d["waste_ratio"]["p99"] < 0.1
    rc, out, err = run_cli("faults", "dgx", "--gpus", 64, "--tp", 8, "--trace", "stepfun")  # rich text output
    assert rc == 0 and "time-weighted" in out


def test_component_faults_and_text_output(run_cli):
    rc, out, err = run_cli("faults", "dgx", "--gpus", 128, "--tp", 8, "--node-fault-ratio", 0.01, "--fault",
                           "tor=0.05", "--fault", "gpu=0.01", "--samples", 50, "--mode", "exact")
    assert rc == 0, err
    assert "GPU waste" in out and "blast radius" in out


@pytest.mark.parametrize("args, field", [
    (["--tp", 32, "--node-fault-ratio", 1.5], "--node-fault-ratio"),
    (["--tp", 32, "--node-fault-ratio", -0.1], "--node-fault-ratio"),
    (["--tp", 32, "--node-fault-ratio", "0:0.1"], "--node-fault-ratio"),
    (["--tp", 32, "--node-fault-ratio", "0.2:0.1:0.01"], "--node-fault-ratio"),
    (["--tp", 30, "--node-fault-ratio", 0.1], "--tp"),  # k-hop: multiple of 4
    (["--tp", 4096, "--node-fault-ratio", 0.1], "--tp"),  # larger than the line
    (["--tp", 32], "--node-fault-ratio"),
    (["--tp", 32, "--node-fault-ratio", 0.1, "--trace", "stepfun"], "--trace"),
    (["--tp", 32, "--node-fault-ratio", 0.1, "--samples", 0], "--samples"),
    (["--tp", 32, "--node-fault-ratio", 0.1, "--fault", "psu=0.1"], "--fault"),
    (["--tp", 32, "--trace", "nope.json"], "--trace"),
    (["--tp", 32, "--node-fault-ratio", 0.1, "--mode", "poisson"], "--mode"),
    (["--tp", 5, "--node-fault-ratio", 0.1], "--tp"),  # above the 4-GPU node but not whole nodes
    (["--tp", 6, "--node-fault-ratio", 0.1], "--tp"),
    (["--tp", 32, "--trace", "stepfun", "--mode", "exact"], "--mode"),  # --mode samples i.i.d. faults only
    (["--tp", 32, "--trace", "stepfun", "--mode", "bernoulli"], "--mode"),  # given explicitly: still refused
])
def test_bad_input_one_line_exit_2(run_cli, args, field):
    rc, out, err = run_cli("faults", "khop-ring", "--gpus", 512, *args)
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1 and field in err


def test_tp_dividing_the_node_is_allowed_and_wastes_nothing(run_cli):
    """TP 1 and 2 divide the k-hop ring's 4-GPU node: groups stay in the node, so every GPU of a healthy node
    is usable (closed form: waste exactly 0 in every sample)."""
    for tp in (1, 2):
        rc, out, err = run_cli("faults", "khop-ring", "--gpus", 64, "--tp", tp, "--node-fault-ratio", 0.05,
                               "--samples", 50, "--json", "--no-blast")
        assert rc == 0, err
        assert json.loads(out)["waste_ratio"]["max"] == 0.0


def test_tp_below_the_node_not_dividing_it_idles_its_remainder(run_cli):
    """TP 3 on a 4-GPU k-hop node: one group per healthy node on its full mesh, one GPU idle (as TP 3 on a DGX
    idles 2 of 8).  Closed form: waste exactly 1/4 of the healthy GPUs, whatever the faults."""
    rc, out, err = run_cli("faults", "khop-ring", "--gpus", 64, "--tp", 3, "--node-fault-ratio", 0.05,
                           "--samples", 50, "--json", "--no-blast")
    assert rc == 0, err
    w = json.loads(out)["waste_ratio"]
    assert w["min"] == pytest.approx(0.25) and w["max"] == pytest.approx(0.25)


def test_samples_past_the_memory_limit_are_refused_before_sampling(run_cli):
    """samples x (nodes + fault draws) x 8 B over the memory limit: one line naming --samples, the limit and
    how to raise it; nothing on stdout.  Here 100,000 samples x (128 nodes + 42 draws) x 8 B = 0.13 GB > 0.1 GB."""
    args = ("faults", "khop-ring", "--gpus", 512, "--tp", 32, "--node-fault-ratio", 0.05, "--no-blast", "--json")
    rc, out, err = run_cli("--limit", "memory=100MB", *args, "--samples", 100_000)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert err.startswith("error: --samples: needs about") and "--limit memory=N" in err
    rc, out, err = run_cli("--limit", "memory=100MB", *args, "--samples", 1000)  # 1.4 MB: runs
    assert rc == 0, err


def test_blast_radius_never_negative(run_cli):
    """DGX at TP 3: a node is the 8-GPU domain and holds 2 groups (6 usable GPUs), so one node failure makes
    exactly 6 usable GPUs unusable, of its own 8; it strands no healthy GPU: 0, not 6 - 8 = -2."""
    rc, out, err = run_cli("faults", "dgx", "--gpus", 64, "--tp", 3, "--node-fault-ratio", 0.0, "--samples", 2,
                           "--json")
    assert rc == 0, err
    node = json.loads(out)["blast_radius"]["node"]
    assert node["min"] == node["max"] == 6 and node["own"] == 8 and node["stranded"] == 0
    # the README table: NVL-72 at TP 32 idles 8 of 72 GPUs per domain, so a failed tray or GPU often lands
    # on idle GPUs (mean blast radius below its own GPUs); every stranded figure is still >= 0
    rc, out, err = run_cli("faults-table", "--gpus", 1152, "--samples", 2, "--tp", 32, "--json")
    assert rc == 0, err
    rows = json.loads(out)["blast_radius"]
    assert any(r["mean"] < r["own"] for r in rows)
    assert all(r[k] >= 0 for r in rows for k in ("min", "mean", "max", "own", "stranded"))


@pytest.mark.parametrize("tp, capped", [(4, ""), (16, " (dgx-h100 at 8: the largest its HBD forms)")])
def test_faults_table_says_which_rows_have_their_tp_capped(run_cli, tp, capped):
    """The blast radius header said "TP 4 (DGX: 8)" while the DGX rows were at TP 4: now it names the rows whose
    TP was capped at their HBD's largest, and only those."""
    rc, out, err = run_cli("faults-table", "--gpus", 256, "--samples", 1, "--tp", tp)
    assert rc == 0, err
    assert f"Blast radius (GPUs made unusable by one failure), TP {tp}{capped}\n" in out
    assert f"| dgx-h100 | {min(tp, 8)} | node |" in out


@pytest.mark.parametrize("tp", [5, 6, 4096, 0])
def test_faults_table_bad_tp_one_line_exit_2(run_cli, tp):
    """A TP the k-hop ring refuses (5, 6: above its 4-GPU node but not whole nodes), or larger than the cluster."""
    rc, out, err = run_cli("faults-table", "--gpus", 256, "--samples", 2, "--tp", tp)
    assert rc == 2 and out == ""
    assert err.startswith("error: --tp: ") and err.count("\n") == 1


def test_bad_trace_event_names_its_index(run_cli, tmp_path):
    events = [{"node_id": "a", "event_time": 1.0, "event_type": "fault_start",
               "fault_type": {"Level": "L", "Class": "C", "Desc": "D"}},
              {"node_id": "a", "event_time": 2.0, "event_type": "oops",
               "fault_type": {"Level": "L", "Class": "C", "Desc": "D"}}]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(events))
    rc, out, err = run_cli("faults", "nvl-72", "--gpus", 72, "--tp", 8, "--trace", path)
    assert rc == 2 and err.startswith("error: trace.json:events[1].event_type:") and err.count("\n") == 1
    events[1]["event_type"] = "fault_end"
    path.write_text(json.dumps(events))
    rc, out, err = run_cli("faults", "nvl-72", "--gpus", 72, "--tp", 8, "--trace", path, "--json")
    assert rc == 0 and json.loads(out)["trace"]["n_servers"] == 1


def test_tables_format():
    rows = waste_table([("nvl-72", build("nvl", 288, {"size": 72}), (32,))], ratios=(0.0, 0.05), samples=20)
    text = format_waste_table(rows)
    assert "| nvl-72 | 32 | 11.11 |" in text and "trace" in text.splitlines()[0]
    row = {"label": "x", "tp": 8, "component": "node", "min": 0, "mean": 1.0, "max": 2, "own": 1.0,
           "stranded": 0.0, "note": "n", "bandwidth_left": 0.5}
    assert "bandwidth left 0.500" in format_blast_table([row])
