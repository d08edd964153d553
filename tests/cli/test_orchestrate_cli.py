"""`fabric orchestrate` and `fabric orchestrate-table` through the real entry point."""

import json

import pytest

KHOP = ["khop-ring", "--gpus", "256", "-p", "k=2", "-p", "gpus_per_node=4", "-p", "nodes_per_tor=16"]
KEYS = {"tp_groups", "dp_groups", "gpu_utilization", "cross_tor_traffic_ratio", "status", "objective", "bound",
        "gap", "solve_seconds", "tors_per_dp_group_mean", "tors_per_dp_group_max"}


def test_json_has_the_promised_keys(run_cli):
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "16", "--dp", "4", "--faulty-nodes", "3,20", "--json")
    assert rc == 0, err
    d = json.loads(out)  # stdout is exactly one JSON object: no solver log in it
    assert KEYS <= set(d)
    assert d["status"] == "optimal" and d["model"] == "blocks" and d["solver"] == "ilp"
    assert d["tp_groups"] == 4 * d["dp_groups"] and d["faulty_nodes"] == 2
    assert "placement" not in d


def test_placement_lists_node_ids_per_group(run_cli):
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "8", "--dp", "2", "--faulty-nodes", "5", "--placement",
                           "--json")
    assert rc == 0, err
    pl = json.loads(out)["placement"]
    assert pl["unit"] == "node"
    nodes = [n for ring in pl["tp_groups"] for n in ring]
    assert 5 not in nodes and len(nodes) == len(set(nodes))
    assert all(len(ring) == 2 for ring in pl["tp_groups"])
    assert all(len(inst["dp_groups"]) == 1 and len(inst["dp_groups"][0]) == 2 for inst in pl["instances"])


def test_same_numbers_as_the_summary_function(run_cli):
    """The sweep registers orchestrate_summary as a metric: the CLI must print the same numbers."""
    from topologies import build
    from solvers.orchestrator import orchestrate_summary

    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "8", "--dp", "max", "--node-fault-ratio", "0.05",
                           "--seed", "7", "--solver", "greedy", "--json")
    assert rc == 0, err
    cli = json.loads(out)
    fab = build("khop-ring", 256, {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 16})
    api = orchestrate_summary(fab, tp=8, dp=None, node_fault_ratio=0.05, seed=7, solver="greedy")
    for key in ("dp", "tp_groups", "gpu_utilization", "cross_tor_traffic_ratio", "cross_tor_bytes", "faulty_nodes"):
        assert cli[key] == api[key]


@pytest.mark.parametrize("solver", ["greedy", "fault-unaware"])
def test_baselines(run_cli, solver):
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "8", "--dp", "4", "--node-fault-ratio", "0.05",
                           "--solver", solver, "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["solver"] == solver and d["status"] == "feasible" and d["bound"] is None


def test_other_architecture_and_trace(run_cli):
    rc, out, err = run_cli("orchestrate", "dgx", "--gpus", "256", "--tp", "8", "--dp", "2", "--trace", "stepfun",
                           "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["architecture"] == "dgx" and d["fault_source"].startswith("trace stepfun")


def test_tor_map_list(run_cli):
    tor = ",".join(str(p % 4) for p in range(64))
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "8", "--dp", "2", "--faulty-nodes", "9", "--tor-map", tor,
                           "--time-limit", "20", "--json")
    assert rc == 0, err
    assert json.loads(out)["model"] == "explicit"


def test_table_output(run_cli):
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "8", "--dp", "2")
    assert rc == 0, err
    assert "cross_tor_traffic_ratio" in out


def test_infeasible_request_exits_1_with_the_status(run_cli):
    # 16 TP groups of 4 nodes with no fault; the faulty node leaves 15 for the 4 x 4 asked
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "16", "--dp", "4", "--count", "4", "--faulty-nodes", "1",
                           "--json")
    assert rc == 1
    d = json.loads(out)
    assert d["status"] == "infeasible" and d["tp_groups"] == 0


@pytest.mark.parametrize("arch, args, flag", [
    (KHOP, ["--tp", "16", "--dp", "4", "--count", "100"], "--count"),
    (KHOP, ["--tp", "16", "--job", "dp=4,count=10", "--job", "dp=2,count=20"], "--job"),
    (["dgx", "--gpus", "64"], ["--tp", "8", "--dp", "2", "--count", "5"], "--count"),
])
def test_counts_beyond_the_fault_free_fabric_are_bad_input(run_cli, arch, args, flag):
    """Counts that no fault draw could serve (more TP groups than the fabric forms with no fault) exited 1 as
    'infeasible', naming no flag; infeasible stays the answer for counts that only the faults make too large."""
    rc, out, err = run_cli("orchestrate", *arch, *args, "--node-fault-ratio", "0.1", "--json")
    assert rc == 2 and out == "" and err.count("\n") == 1, err
    assert err.startswith(f"error: {flag}: the fixed instance counts need ") and "even with no faulty node" in err


@pytest.mark.parametrize("args,field", [
    (["--tp", "6", "--dp", "2"], "--tp"),                           # not a multiple of gpus_per_node
    (["--tp", "16", "--dp", "100", "--faulty-nodes", "1"], "--dp"),  # DP x TP larger than the healthy GPUs
    (["--tp", "8", "--dp", "2", "--faulty-nodes", "64"], "--faulty-nodes"),  # out of range
    (["--tp", "8", "--dp", "2", "--faulty-nodes", "a,b"], "--faulty-nodes"),
    (["--tp", "8", "--dp", "two"], "--dp"),
    (["--tp", "8", "--dp", "2", "--solver", "magic"], "--solver"),
    # settled without a MIP (the line DP proves the warm start optimal): the name is still checked
    (["--tp", "8", "--dp", "2", "--mip-solver", "gurobi"], "--mip-solver"),
    (["--tp", "8", "--dp", "2", "--node-fault-ratio", "1.5"], "--node-fault-ratio"),
    (["--tp", "8", "--dp", "2", "--node-fault-ratio", "0.1", "--faulty-nodes", "1"], "--faulty-nodes"),
    (["--tp", "8", "--dp", "2", "--time-limit", "0"], "--time-limit"),
    (["--tp", "8", "--dp", "2", "--tor-map", "0,1"], "--tor-map"),
    (["--tp", "8", "--dp", "2", "--dp-bytes", "12 parsecs"], "--dp-bytes"),
    (["--tp", "8", "--dp", "2", "--trace", "nope.json"], "--trace"),
    (["--tp", "8", "--dp", "2", "--trace-time", "5"], "--trace-time"),  # without --trace it was ignored
    (["--tp", "8", "--dp", "2", "--solver", "greedy", "--time-limit", "5"], "--time-limit"),  # ignored too
    (["--tp", "8", "--dp", "2", "--solver", "greedy", "--gap", "0.1"], "--gap"),
    (["--tp", "8", "--dp", "2", "--pp-bytes", "1GB"], "--pp-bytes"),  # PP 1 sends no PP bytes
])
def test_bad_input_is_one_line_and_exit_2(run_cli, args, field):
    rc, out, err = run_cli("orchestrate", *KHOP, *args, "--json")
    assert rc == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and field in err


def test_orchestrate_table_command(run_cli):
    rc, out, err = run_cli("orchestrate-table", "--gpus", "128", "--max-ratio", "0.04", "--step", "0.04",
                           "--samples", "1", "--trace", "", "--json")
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    archs = {r["architecture"] for r in rows}
    assert {"khop-ring k=2", "khop-ring k=3", "dgx-h100", "nvl-72", "tpuv4"} <= archs
    assert {r["solver"] for r in rows} == {"ilp", "greedy", "fault-unaware"}
    ilp = {(r["architecture"], r["node_fault_ratio"]): r for r in rows if r["solver"] == "ilp"}
    for r in rows:
        if r["solver"] == "greedy" and r["cross_tor_traffic_ratio"] is not None:
            assert r["cross_tor_traffic_ratio"] >= ilp[(r["architecture"], r["node_fault_ratio"])][
                "cross_tor_traffic_ratio"] - 1e-12


def test_orchestrate_table_cell_where_no_job_fits(run_cli):
    """TPUv4 at 64 GPUs is one cube: at 10 % node faults (seed 0) hosts of it are down and no TP group is left.
    One orchestration refuses that request (exit 2, naming --dp); the table records the cell as 'no job fits'
    and goes on (it stopped the whole table before)."""
    rc, out, err = run_cli("orchestrate", "tpuv4", "--gpus", "64", "--tp", "8", "--dp", "4", "--node-fault-ratio",
                           "0.1", "--json")
    assert rc == 2 and out == "" and err.startswith("error: --dp:") and "0 TP groups" in err
    args = ("orchestrate-table", "--gpus", "64", "--max-ratio", "0.1", "--step", "0.1", "--samples", "1", "--trace", "")
    rc, out, err = run_cli(*args, "--json")
    assert rc == 0, err
    cell = {(r["architecture"], r["solver"]): r for r in json.loads(out)["rows"] if r["node_fault_ratio"] == 0.1}
    for solver in ("ilp", "greedy"):
        r = cell[("tpuv4", solver)]
        assert r["infeasible"] == r["samples"] == 1 and r["gpu_utilization"] == 0
        assert r["cross_tor_traffic_ratio"] is None
    assert cell[("dgx-h100", "ilp")]["infeasible"] == 0 and cell[("dgx-h100", "ilp")]["gpu_utilization"] > 0
    rc, out, err = run_cli(*args)
    assert rc == 0 and "| tpuv4 | ilp | 0.000 (1.00) | no job fits |" in out


@pytest.mark.parametrize("extra", [[], ["--pp", "2", "--pp-bytes", "0"]])
def test_zero_bytes_is_optimal_at_zero_not_a_crash(run_cli, extra):
    """--dp-bytes 0 (and no PP bytes): no placement moves a byte across ToRs, so the most instances at 0 bytes is
    optimal by definition (it divided by the zero unit before)."""
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "8", "--dp", "2", "--dp-bytes", "0", *extra, "--json")
    assert rc == 0, err
    d = json.loads(out)
    greedy = json.loads(run_cli("orchestrate", *KHOP, "--tp", "8", "--dp", "2", *extra, "--solver", "greedy",
                                "--json")[1])
    assert d["status"] == "optimal" and d["cross_tor_bytes"] == 0 and d["gap"] == 0
    assert d["instances"] == greedy["instances"] > 0


def test_table_trace_points_without_a_trace_is_refused(run_cli):
    """--trace '' draws no trace point; --trace-points was ignored."""
    rc, out, err = run_cli("orchestrate-table", "--gpus", "128", "--trace", "", "--trace-points", "5", "--json")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "--trace-points" in err


def _two_server_trace(tmp_path):
    ev = [("a", 0.5, "fault_start"), ("b", 1.0, "fault_start"), ("a", 1.5, "fault_end"), ("b", 2.0, "fault_end")]
    path = tmp_path / "t.json"
    path.write_text(json.dumps([{"node_id": n, "event_time": t, "event_type": k,
                                 "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "x"}}
                                for n, t, k in ev]))
    return path


def test_trace_servers_counts_the_servers_that_never_failed(run_cli, tmp_path):
    """A file lists only the servers that failed: without --trace-servers (which orchestrate lacked) its 2
    servers replay on all 8 nodes, all down at day 1.2.  With 400 servers, the 8 nodes replay 8 distinct servers
    (tile), of which at most the 2 that failed are down: node fault ratio <= 2 / 8 (exact, by the tile rule)."""
    path = _two_server_trace(tmp_path)
    base = ["orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "1", "--solver", "greedy", "--trace", path,
            "--trace-time", "1.2", "--json"]
    rc, _, err = run_cli(*base)
    assert rc == 2 and "the 0 healthy GPUs" in err
    rc, out, err = run_cli(*base, "--trace-servers", "400")
    assert rc == 0, err
    assert json.loads(out)["node_fault_ratio"] <= 2 / 8


def test_trace_servers_without_a_trace_or_below_its_servers(run_cli, tmp_path):
    base = ["orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "1", "--solver", "greedy"]
    rc, _, err = run_cli(*base, "--trace", _two_server_trace(tmp_path), "--trace-servers", "1")
    assert rc == 2 and err.startswith("error: --trace-servers: 1 must be a whole number >= the 2 servers"), err
    rc, _, err = run_cli(*base, "--trace-servers", "4")
    assert rc == 2 and err.startswith("error: --trace-servers: counts the servers of a trace file"), err


def test_orchestrate_table_takes_trace_servers_too(run_cli, tmp_path):
    """The same count for the table's trace rows; with --trace '' there is no file for it to count."""
    rc, _, err = run_cli("orchestrate-table", "--trace", "", "--trace-servers", "4")
    assert rc == 2 and err.startswith("error: --trace-servers: counts the servers of a trace file"), err
    rc, out, err = run_cli("orchestrate-table", "--gpus", "64", "--tp", "8", "--dp", "1", "--samples", "1",
                           "--max-ratio", "0.01", "--step", "0.01", "--trace", _two_server_trace(tmp_path),
                           "--trace-servers", "400", "--trace-points", "2", "--time-limit", "5", "--json")
    assert rc == 0, err
    assert {r["source"] for r in json.loads(out)["rows"]} == {"iid", "trace"}
