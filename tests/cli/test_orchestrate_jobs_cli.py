"""`fabric orchestrate --job ...`: several jobs of one TP size through the real entry point."""

import json

import numpy as np
import pytest

# 256 nodes, 16 per ToR (contiguous wiring), 4 GPUs per node: GPU g sits under ToR g // 64
KHOP = ["khop-ring", "--gpus", "1024", "-p", "k=2", "-p", "gpus_per_node=4", "-p", "nodes_per_tor=16"]
GPUS_PER_TOR = 64
FAULTS = ["--node-fault-ratio", "0.05", "--seed", "1"]


def _cross_bytes_by_hand(placement: dict, job: dict, index: int) -> float:
    """A job's cross-ToR bytes recounted from the placement alone (the ring all-reduce of traffic.py's docstring).

    Independent of the accounting code: per DP group and TP rank, the ``T`` distinct ToRs of its ``D`` GPUs
    put ``T`` hops on ToR uplinks when ``T > 1``, each ``2 (D - 1) / D`` of the buffer.
    """
    gpus = placement["tp_group_gpus"]
    total = 0.0
    for inst in placement["instances"]:
        if inst["job"] != index:
            continue
        for group in inst["dp_groups"]:
            tors = np.array([gpus[r] for r in group]) // GPUS_PER_TOR  # (D, TP)
            D = tors.shape[0]
            for rank in tors.T:
                t = len(set(rank.tolist()))
                total += (t if t > 1 else 0) * 2.0 * (D - 1) / D * job["dp_bytes_per_gpu"]
    return total


def test_several_jobs_each_reported_and_recounted_by_hand(run_cli):
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "16", *FAULTS, "--job", "name=pretrain,dp=8,count=2",
                           "--job", "dp=4", "--placement", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["status"] == "optimal" and d["model"] == "blocks-jobs"
    assert d["tp"] == 16 and d["dp"] is None and d["count"] is None  # no one job's layout at the top
    a, b = d["jobs"]
    assert (a["name"], a["dp"], a["count"], a["instances"]) == ("pretrain", 8, 2, 2)
    assert (b["name"], b["dp"]) == ("job1", 4) and b["instances"] == b["count"] > 0
    # the second job takes every ring the first leaves (as many as fit): 61 rings on these faults, 16 taken
    assert a["tp_groups"] == 16 and b["tp_groups"] == 4 * b["instances"] <= 61 - 16
    for key in ("instances", "tp_groups", "dp_groups", "used_gpus"):
        assert d[key] == a[key] + b[key]
    assert d["cross_tor_bytes"] == pytest.approx(a["cross_tor_bytes"] + b["cross_tor_bytes"], rel=1e-12)
    assert d["dcn_bytes"] == pytest.approx(a["dcn_bytes"] + b["dcn_bytes"], rel=1e-12)
    assert {(inst["job"], inst["job_name"]) for inst in d["placement"]["instances"]} == {(0, "pretrain"), (1, "job1")}
    for i, job in enumerate(d["jobs"]):
        assert job["cross_tor_bytes"] == pytest.approx(_cross_bytes_by_hand(d["placement"], job, i), rel=1e-12)
        assert job["cross_tor_traffic_ratio"] == pytest.approx(job["cross_tor_bytes"] / job["dcn_bytes"])


def test_one_job_flag_gives_the_same_numbers_as_dp(run_cli):
    base = ("orchestrate", *KHOP, "--tp", "16", *FAULTS, "--json")
    rc, out, err = run_cli(*base, "--dp", "4", "--dp-bytes", "10GB")
    assert rc == 0, err
    flags = json.loads(out)
    rc, out, err = run_cli(*base, "--job", "dp=4,dp-bytes=10GB")
    assert rc == 0, err
    spec = json.loads(out)
    for key in ("status", "dp", "count", "instances", "cross_tor_bytes", "dp_bytes_per_gpu", "objective", "gap"):
        assert spec[key] == flags[key], key
    assert "jobs" not in flags and "jobs" not in spec  # one job's object stays flat


def test_text_output_has_a_row_per_job(run_cli):
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "16", *FAULTS, "--job", "name=a,dp=8,count=2",
                           "--job", "name=b,dp=4")
    assert rc == 0, err
    assert "TP 16, 2 jobs (ilp)" in out
    rows = [line for line in out.splitlines() if line.startswith("│ a ") or line.startswith("│ b ")]
    assert len(rows) == 2 and "│  8 │" in rows[0] and "│  4 │" in rows[1]


@pytest.mark.parametrize("solver", ["greedy", "fault-unaware"])
def test_baselines_take_several_jobs(run_cli, solver):
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "16", *FAULTS, "--job", "dp=8,count=2", "--job", "dp=4",
                           "--solver", solver, "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["solver"] == solver and [j["dp"] for j in d["jobs"]] == [8, 4]
    assert sum(j["cross_tor_bytes"] for j in d["jobs"]) == pytest.approx(d["cross_tor_bytes"], rel=1e-12)


@pytest.mark.parametrize("extra, field, words", [
    (["--job", "dp=8", "--dp", "4"], "--dp", "each --job carries its own dp"),
    (["--job", "dp=8", "--count", "2"], "--count", "each --job carries its own count"),
    (["--job", "dp=8,foo=1"], "--job", "'foo' is not a job key"),
    (["--job", "count=2"], "--job", "dp=... is required"),
    (["--job", "dp=8,dp=4"], "--job", "'dp' is given twice"),
    (["--job", "dp=8,count=x"], "--job", "count: 'x' must be a whole number"),
    (["--job", "dp=0"], "--job", "dp: '0' must be a whole number >= 1 or 'max'"),
    (["--job", "dp=8,pp=0"], "--job", "pp: 0 must be >= 1"),
    (["--job", "dp=max,count=2"], "--job", "with dp=max there is exactly one instance"),
    (["--job", "name=a,dp=2", "--job", "name=a,dp=4"], "--job", "name 'a' is taken"),
    (["--job", "dp=4,,count=1"], "--job", "'' is not key=value"),
    (["--job", "dp=4,name=a/b"], "--job", "name: 'a/b' must be"),
    (["--job", "dp=4,dp-bytes=huge"], "--job", "dp-bytes: cannot read 'huge'"),
    (["--job", "dp=4,dp-bytes=2EiB"], "--job", "at most"),
    (["--job", "dp=1,dp-bytes=1GB"], "--job", "with dp 1 there is none"),
    (["--job", "dp=4,pp-bytes=1GB"], "--job", "with pp 1 there are none"),
    ([], "--dp", "or one --job per job"),
    (["--job", "dp=max", "--job", "dp=max"], "--job", "at most one job may take dp=max"),
    (["--job", "dp=3", "--job", "dp=max,name=z"], "--job", "every other job needs a count ('job0' has none)"),
    (["--job", "dp=max,pp=2", "--job", "dp=4,count=15"], "--job", "not one DP replica fits: 1 left of 61 TP groups"),
    (["--job", "dp=64"], "--job", "does not fit"),
    (["--job", "dp=4"] * 65, "--job", "65 jobs given; at most 64"),
])
def test_bad_job_is_one_line_exit_2(run_cli, extra, field, words):
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "16", *FAULTS, *extra, "--json")
    assert rc == 2 and out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {field}: ") and words in lines[0], err


def test_several_jobs_only_on_a_khop_line(run_cli):
    args = ("orchestrate", "dgx", "--gpus", "256", "--tp", "8", "--node-fault-ratio", "0.05")
    rc, out, err = run_cli(*args, "--job", "dp=4", "--job", "dp=2", "--json")
    assert rc == 2 and out == "" and "error: --job: several jobs are placed on a k-hop line only" in err
    rc, out, err = run_cli(*args, "--job", "dp=4,name=x", "--json")  # one job is any architecture's
    assert rc == 0, err
    assert json.loads(out)["dp"] == 4


def test_summary_takes_jobs_or_one_layout_not_both():
    from fabric.errors import FabricError
    from solvers.orchestrator import Job, orchestrate_summary
    from topologies import build

    fab = build("khop-ring", 256, {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 16})
    with pytest.raises(FabricError, match="^jobs: "):
        orchestrate_summary(fab, tp=8, dp=2, jobs=[Job(tp=8, dp=2)])
    with pytest.raises(FabricError, match="^tp: "):
        orchestrate_summary(fab)
    d = orchestrate_summary(fab, jobs=[Job(tp=8, dp=2, count=3, name="x"), Job(tp=8, dp=4, name="y")],
                            solver="greedy")
    # 64 fault-free nodes make 32 rings of 2: x takes 3 x 2, y as many groups of 4 as the 26 left hold
    assert [(j["name"], j["count"], j["instances"]) for j in d["jobs"]] == [("x", 3, 3), ("y", 6, 6)]


def test_dp_max_takes_every_ring_the_fixed_counts_leave(run_cli):
    """61 rings on these faults: 5 instances of DP 4 take 20, the dp=max job the other 41 (before, it took all 61
    first and the request was infeasible)."""
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", "16", *FAULTS, "--job", "name=big,dp=max",
                           "--job", "dp=4,count=5", "--json")
    assert rc == 0, err
    d = json.loads(out)
    big, small = d["jobs"]
    assert (big["dp"], big["instances"], small["instances"]) == (41, 1, 5) and d["tp_groups"] == 61
