"""Speed of the HBD-DCN orchestrator (issue 18; run with ``pytest -m bench -s``; prints its figures).

Instances: a k-hop line (k = 2 or 3, 4 GPUs per node, 16 nodes = 64 GPUs per
ToR, contiguous wiring unless said), exactly 5 % of the nodes faulty (a
uniform random subset, seeded), one job of TP x DP with as many instances as
fit.  Each case runs in a fresh interpreter so that its peak memory (RSS,
solver included; the larger of it and of a solver child's) is its own, and its CPU time
counts a solver child's too; the time is the whole orchestration inside it
(reading the line, model build, warm start, solve, extraction, accounting),
not the fabric build or the fault draw.

Times are asserted on the child's CPU time (the machine is shared; its wall-clock
limit is set higher so that other load does not cut the search short).
Targets: 1,024 nodes proved optimal in < 10 s; 4,096 nodes within 1 % gap in
< 60 s; 16,384 nodes a solution with a stated gap in < 5 min; every case
< 2 GB; interleaved wiring and PP 2 on 1,024 nodes within 1 % gap in < 60 s.
The full grid is 2 x 16 shapes x 3 sizes (hours on a shared 2-core machine):
``-k`` selects a subset, e.g. ``-k "1024 and k2"``.  Each case also prints
the greedy's cross-ToR bytes beside the ILP's, and the overrun of the time
limit (the solve must stop within its limit plus a small overhead).
"""

import json
import subprocess
import sys

import pytest

SHAPES = [(tp, dp) for tp in (8, 16, 32, 64) for dp in (2, 4, 8, 16)]

CHILD = r"""
import json, resource, sys, time
from topologies import build
from solvers.orchestrator import Job, orchestrate
from solvers.orchestrator.faultsets import fault_nodes
from solvers.pulp_adapter import SolveOptions

a = json.loads(sys.argv[1])
params = {"k": a["k"], "gpus_per_node": a["gpus_per_node"], "nodes_per_tor": a["nodes_per_tor"],
          "tor_wiring": a["wiring"], "closed": a.get("closed", False)}
fab = build("khop-ring", a["nodes"] * a["gpus_per_node"], params)
nodes, _ = fault_nodes(fab, node_fault_ratio=a["fault_ratio"], seed=a["seed"], mode="exact")
jobs = [Job(tp=a["tp"], dp=a["dp"], pp=a["pp"])]
if a.get("jobs"):  # several jobs: [dp, count or None(, pp)] each, one TP
    jobs = [Job(tp=a["tp"], dp=dp, count=c, pp=pp[0] if pp else 1, name=f"job{i}")
            for i, (dp, c, *pp) in enumerate(a["jobs"])]
def cpu_seconds():  # this process and its solver children (HiGHS may run in one: solvers.highs_process)
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime
t0 = time.perf_counter()
c0 = cpu_seconds()
res = orchestrate(fab, jobs, nodes, options=SolveOptions(time_limit=a["limit"], gap_rel=a["gap"]))
wall = time.perf_counter() - t0
cpu = cpu_seconds() - c0
greedy = orchestrate(fab, jobs, nodes, solver="greedy").summary()
d = res.summary()
peak = max(resource.getrusage(who).ru_maxrss for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
d.update(wall=wall, cpu=cpu, greedy_cross_tor_bytes=greedy["cross_tor_bytes"], peak_rss_gib=peak / 2**20)
d.pop("model_size", None)
print(json.dumps(d))
"""


def _run(nodes, k, tp, dp, *, limit, gap=0.0, pp=1, wiring="contiguous", seed=0, closed=False, jobs=None,
         fault_ratio=0.05, nodes_per_tor=16, gpus_per_node=4):
    args = dict(nodes=nodes, k=k, tp=tp, dp=dp, pp=pp, wiring=wiring, seed=seed, limit=limit, gap=gap,
                closed=closed, jobs=jobs, fault_ratio=fault_ratio, nodes_per_tor=nodes_per_tor,
                gpus_per_node=gpus_per_node)
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True,
                         timeout=limit + 600)
    if out.returncode:
        raise AssertionError(out.stderr[-2000:])
    d = json.loads(out.stdout.strip().splitlines()[-1])
    gap_s = "-" if d["gap"] is None else f"{d['gap']:.4f}"
    shape = f"TP {tp} x DP {dp} x PP {pp}" if not jobs else f"TP {tp}, jobs (DP, count) {jobs}"
    faults = ("" if (fault_ratio, nodes_per_tor, gpus_per_node) == (0.05, 16, 4)
              else f" ({fault_ratio:.0%} faults, {nodes_per_tor}-node ToRs, {gpus_per_node} GPUs per node)")
    print(f"\n{nodes} nodes k={k} {shape} {wiring}{' closed' if closed else ''} seed {seed}{faults}: {d['status']} "
          f"({d['model']}, "
          f"{d['termination']}), gap {gap_s}, cross-ToR {d['cross_tor_bytes']:.4g} B (greedy "
          f"{d['greedy_cross_tor_bytes']:.4g}), ratio {d['cross_tor_traffic_ratio']:.4f}, "
          f"build {d['build_seconds']:.2f} s, solve {d['solve_seconds']:.2f} s, total {d['wall']:.2f} s "
          f"(CPU {d['cpu']:.2f} s) "
          f"(limit {limit} s, overrun {max(0.0, d['wall'] - limit):.2f} s), peak {d['peak_rss_gib']:.2f} GiB, "
          f"instances {d['instances']}, warm start unimproved {d['warm_start_unimproved']}")
    return d


def _grid(nodes, gpus_per_node=4):
    return [pytest.param(k, tp, dp, id=f"{nodes}-k{k}-tp{tp}-dp{dp}") for k in (2, 3) for tp, dp in SHAPES
            if tp * dp <= nodes * gpus_per_node]


@pytest.mark.bench
@pytest.mark.parametrize("k, tp, dp", _grid(1024))
def test_1024_nodes_proven_optimal_in_10_s(k, tp, dp):
    # the machine is shared: the wall-clock limit leaves room for other load, the target is on CPU time
    d = _run(1024, k, tp, dp, limit=30)
    assert d["status"] == "optimal" and d["gap"] == 0.0
    assert d["cpu"] < 10 and d["peak_rss_gib"] < 2


# Beyond the one fault ratio and ToR size (cases it never names, so that nothing here is tuned to the 5 % /
# 16-node instance): 2 % and 10 % node faults, and ToRs of 8 nodes, the whole 1,024-node grid proved optimal in
# < 10 s each.  Measured (seed 0): every case optimal, at most 4.2 s CPU (10 %, TP 32 x DP 16, k = 2), <= 0.15 GiB.
@pytest.mark.bench
@pytest.mark.parametrize("fault_ratio, nodes_per_tor", [(0.02, 16), (0.10, 16), (0.05, 8)],
                         ids=["2pct", "10pct", "8-node-tors"])
@pytest.mark.parametrize("k, tp, dp", _grid(1024))
def test_1024_nodes_other_fault_ratios_and_tor_sizes_proven_optimal(k, tp, dp, fault_ratio, nodes_per_tor):
    d = _run(1024, k, tp, dp, limit=30, fault_ratio=fault_ratio, nodes_per_tor=nodes_per_tor)
    assert d["status"] == "optimal" and d["gap"] == 0.0
    assert d["cpu"] < 10 and d["peak_rss_gib"] < 2


# Nodes of 2 and 8 GPUs (the are 4), ToRs kept at 64 GPUs (32 and 8 nodes; 16 nodes of 8 GPUs exceed a
# ToR's 64 downlinks): rings of 4-32 and 1-8 nodes.  Measured (seed 0, wall seconds): all 64 optimal; 2 GPUs
# per node 0.14-8.1 s (k = 3 TP 32 x DP 16: 16-node rings, three instances), 8 GPUs per node 0.07-2.0 s; <= 0.26 GiB.
@pytest.mark.bench
@pytest.mark.parametrize("gpus_per_node, nodes_per_tor", [(2, 32), (8, 8)], ids=["2-gpu-nodes", "8-gpu-nodes"])
@pytest.mark.parametrize("k, tp, dp", _grid(1024, gpus_per_node=2))
def test_1024_nodes_of_other_gpu_counts_proven_optimal(k, tp, dp, gpus_per_node, nodes_per_tor):
    d = _run(1024, k, tp, dp, limit=30, nodes_per_tor=nodes_per_tor, gpus_per_node=gpus_per_node)
    assert d["status"] == "optimal" and d["gap"] == 0.0
    assert d["cpu"] < 10 and d["peak_rss_gib"] < 2


@pytest.mark.bench
@pytest.mark.parametrize("k, tp, dp", _grid(4096))
def test_4096_nodes_within_1_percent_in_60_s(k, tp, dp):
    d = _run(4096, k, tp, dp, limit=58, gap=0.01)
    assert d["gap"] is not None and d["gap"] <= 0.01
    assert d["cpu"] < 60 and d["peak_rss_gib"] < 2


@pytest.mark.bench
@pytest.mark.parametrize("k, tp, dp", _grid(16384))
def test_16384_nodes_a_solution_with_a_stated_gap_in_5_min(k, tp, dp):
    d = _run(16384, k, tp, dp, limit=280, gap=0.01)
    assert d["instances"] > 0
    assert d["gap"] is not None and 0 <= d["gap"] <= 1
    assert d["cpu"] < 300 and d["peak_rss_gib"] < 2


@pytest.mark.bench
@pytest.mark.parametrize("k, tp, dp, pp, wiring", [
    pytest.param(2, 16, 4, 1, "interleaved", id="interleaved-k2-tp16-dp4"),
    pytest.param(2, 16, 4, 2, "contiguous", id="pp2-k2-tp16-dp4"),
    pytest.param(2, 32, 2, 2, "contiguous", id="pp2-k2-tp32-dp2"),
] + [pytest.param(k, tp, dp, 2, "contiguous", id=f"pp2-k{k}-tp{tp}-dp{dp}") for k in (2, 3) for tp, dp in SHAPES
     if (k, tp, dp) not in ((2, 16, 4), (2, 32, 2))])
def test_explicit_cases_1024_nodes_within_1_percent_in_60_s(k, tp, dp, pp, wiring):
    d = _run(1024, k, tp, dp, pp=pp, wiring=wiring, limit=58, gap=0.01)
    assert d["gap"] is not None and d["gap"] <= 0.01
    assert d["wall"] < 60 and d["peak_rss_gib"] < 2


# Issue 18, beyond one job on an open line: closed lines (line DP with a wrap state), one DP group (--dp max:
# the exact path of single_group.py) and several jobs (merged, or the several-job block model).
@pytest.mark.bench
@pytest.mark.parametrize("k, tp, dp", [
    pytest.param(2, 16, 4, id="closed-k2-tp16-dp4"),
    pytest.param(2, 32, 8, id="closed-k2-tp32-dp8"),
    pytest.param(3, 32, 4, id="closed-k3-tp32-dp4"),
    pytest.param(2, 64, 4, id="closed-k2-tp64-dp4"),
])
def test_closed_line_1024_nodes_proven_optimal(k, tp, dp):
    d = _run(1024, k, tp, dp, limit=58, closed=True)
    assert d["status"] == "optimal" and d["gap"] == 0.0
    assert d["wall"] < 60 and d["peak_rss_gib"] < 2


@pytest.mark.bench
@pytest.mark.parametrize("nodes, k, tp", [
    pytest.param(1024, 2, 16, id="dpmax-1024-k2-tp16"),
    pytest.param(1024, 2, 32, id="dpmax-1024-k2-tp32"),
    pytest.param(1024, 3, 32, id="dpmax-1024-k3-tp32"),
    pytest.param(1024, 2, 64, id="dpmax-1024-k2-tp64"),
    pytest.param(4096, 2, 32, id="dpmax-4096-k2-tp32"),
])
def test_one_dp_group_proven_optimal(nodes, k, tp):
    d = _run(nodes, k, tp, None, limit=58)
    assert d["status"] == "optimal" and d["gap"] == 0.0
    assert d["wall"] < 60 and d["peak_rss_gib"] < 2


@pytest.mark.bench
@pytest.mark.parametrize("k, tp, jobs", [
    pytest.param(2, 16, [(8, 5), (8, None)], id="jobs-k2-tp16-dp8x5-dp8"),
    pytest.param(2, 16, [(8, 10), (4, None)], id="jobs-k2-tp16-dp8x10-dp4"),
    pytest.param(3, 16, [(8, 10), (4, None)], id="jobs-k3-tp16-dp8x10-dp4"),
    pytest.param(2, 32, [(4, 5), (2, None)], id="jobs-k2-tp32-dp4x5-dp2"),
    # short blocks (a TP 32 ring at k = 3 may span three 16-node ToRs): the three-block view bounds it
    pytest.param(3, 32, [(4, 5), (2, None)], id="jobs-k3-tp32-dp4x5-dp2"),
    pytest.param(3, 32, [(8, 3), (4, None)], id="jobs-k3-tp32-dp8x3-dp4"),
    # three jobs: the first job's rings counted along the line, the middle one's priced (jobs_line_bound.py)
    pytest.param(2, 16, [(8, 5), (4, 10), (2, None)], id="jobs-k2-tp16-dp8x5-dp4x10-dp2"),
    pytest.param(3, 16, [(8, 5), (4, 10), (2, None)], id="jobs-k3-tp16-dp8x5-dp4x10-dp2"),
    pytest.param(2, 16, [(8, 3), (4, 5), (16, None)], id="jobs-k2-tp16-dp8x3-dp4x5-dp16"),
    pytest.param(2, 32, [(4, 5), (2, 5), (8, None)], id="jobs-k2-tp32-dp4x5-dp2x5-dp8"),
    pytest.param(3, 32, [(4, 3), (2, 5), (8, None)], id="jobs-k3-tp32-dp4x3-dp2x5-dp8"),
])
def test_several_jobs_1024_nodes_within_1_percent_in_60_s(k, tp, jobs):
    d = _run(1024, k, tp, None, limit=58, gap=0.01, jobs=jobs)
    assert d["gap"] is not None and d["gap"] <= 0.01
    assert d["wall"] < 60 and d["peak_rss_gib"] < 2


# Several jobs with PP > 1 (beyond the targets): each job's DP groups placed as jobs of PP 1, then chained
# per job (api._several_pipelined).  Before, the explicit model: TP 16 x (DP 4 x PP 2 x 10 + DP 8) 39.4 % after
# 58 s, TP 32 x (DP 4 x PP 2 x 5 + DP 2 x PP 2) k = 3 the greedy (56 %).  Jobs as (DP, count, PP).
@pytest.mark.bench
@pytest.mark.parametrize("k, tp, jobs", [
    pytest.param(2, 16, [(4, 10, 2), (8, None)], id="jobs-pp-k2-tp16-dp4pp2x10-dp8"),
    pytest.param(3, 16, [(4, 10, 2), (8, None)], id="jobs-pp-k3-tp16-dp4pp2x10-dp8"),
    pytest.param(3, 32, [(4, 5, 2), (2, None, 2)], id="jobs-pp-k3-tp32-dp4pp2x5-dp2pp2"),
    # one DP size, unequal buffers (PP 2 halves the DP bytes per GPU): the several-job block model, not the merge
    pytest.param(2, 16, [(4, 10, 2), (4, None)], id="jobs-pp-k2-tp16-dp4pp2x10-dp4"),
    # with the first job at PP 4 instead the gap is 1.8 %: the PP bytes its chaining puts across ToRs (1.45e11 B),
    # which the several-job bound (DP groups alone) does not count
    pytest.param(2, 16, [(8, 3, 2), (4, 10, 2), (2, None)], id="jobs-pp-k2-tp16-dp8pp2x3-dp4pp2x10-dp2"),
])
def test_several_jobs_with_pp_1024_nodes_within_1_percent_in_60_s(k, tp, jobs):
    d = _run(1024, k, tp, None, limit=58, gap=0.01, jobs=jobs)
    assert d["gap"] is not None and d["gap"] <= 0.01
    assert d["wall"] < 60 and d["peak_rss_gib"] < 2


# Several jobs at 4,096 nodes (beyond the targets), figures in the README ("Two jobs or more").  Two jobs:
# the line DP with the first job's count converges there too; before it, TP 16 x (DP 8 x 20 + DP 4) ended at 5.3 %
# after 58 s, TP 32 x (DP 4 x 20 + DP 2) at 7.1 % (k = 2) and 78.9 % (k = 3, short blocks).  Three jobs: the middle
# job's ring total priced; before, 17.3 %, 16.6 % and 20 % after 58 s.  The three-job TP 32 cases are too large for
# the full block ILP (above 200,000 option columns): the ILP over the line DP's paths' options places them; at k = 3
# the table with the first job's count is too large, so its total is priced too.
@pytest.mark.bench
@pytest.mark.parametrize("k, tp, jobs", [
    pytest.param(2, 16, [(8, 20), (4, None)], id="4096-k2-tp16-dp8x20-dp4"),
    pytest.param(2, 32, [(4, 20), (2, None)], id="4096-k2-tp32-dp4x20-dp2"),
    pytest.param(3, 32, [(4, 20), (2, None)], id="4096-k3-tp32-dp4x20-dp2"),
    pytest.param(2, 16, [(8, 20), (4, 40), (2, None)], id="4096-k2-tp16-dp8x20-dp4x40-dp2"),
    pytest.param(2, 32, [(4, 20), (2, 20), (8, None)], id="4096-k2-tp32-dp4x20-dp2x20-dp8"),
    pytest.param(3, 32, [(4, 20), (2, 20), (8, None)], id="4096-k3-tp32-dp4x20-dp2x20-dp8"),
    # fixed counts leaving 8 rings spare: the ring total priced (jobs_line_bound.FREE_TOTAL_SPARE); 4.9 % before
    pytest.param(2, 16, [(8, 20), (4, 200)], id="4096-k2-tp16-dp8x20-dp4x200"),
])
def test_several_jobs_4096_nodes_within_1_percent_in_60_s(k, tp, jobs):
    d = _run(4096, k, tp, None, limit=58, gap=0.01, jobs=jobs)
    assert d["gap"] is not None and d["gap"] <= 0.01
    assert d["wall"] < 60 and d["peak_rss_gib"] < 2


# Issue 18, "--time-limit is honoured": interleaved wiring at any DP size (D = 16 once spent minutes listing the
# pattern ILP's columns: 280 s at a 58 s limit) and with PP 4 (HiGHS's root cut rounds on the 22k-column explicit
# model ran 1.5-4.8 s past the limit in process; it now runs in a child stopped at the limit); the answer comes
# within the limit plus about 1 s.
@pytest.mark.bench
@pytest.mark.parametrize("k, tp, dp, pp", [(2, 32, 16, 1), (2, 8, 16, 1), (3, 64, 2, 1), (2, 16, 8, 1),
                                           (2, 8, 16, 4), (2, 16, 4, 2)])
def test_interleaved_answers_within_its_time_limit(k, tp, dp, pp):
    d = _run(1024, k, tp, dp, pp=pp, limit=20, wiring="interleaved")
    assert d["instances"] > 0 and d["gap"] is not None
    assert d["wall"] < 20 + 2 and d["peak_rss_gib"] < 2


# Issue 18, "--time-limit is honoured" with PP at 16,384 nodes: the chaining's perfect matching ran on every DP
# group at once (the blossom algorithm is cubic): TP 8 x DP 2 x PP 2 took 128 s at a 58 s limit (7,800 groups),
# PP 4 133 s; now matched 256 groups at a time along the line (solvers/orchestrator/stage_chains.py).
@pytest.mark.bench
@pytest.mark.parametrize("pp", [2, 4])
def test_pp_on_16384_nodes_answers_within_its_time_limit(pp):
    d = _run(16384, 2, 8, 2, pp=pp, limit=58, gap=0.01)
    assert d["instances"] > 0 and d["gap"] is not None
    assert d["wall"] < 58 + 2 and d["peak_rss_gib"] < 2
