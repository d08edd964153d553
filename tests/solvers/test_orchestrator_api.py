"""Stage 1 (most GPUs), bad input, baselines, ToR wiring, other architectures, the summary dict."""

import numpy as np
import pytest

from fabric.errors import FabricError
from solvers.orchestrator import Job, orchestrate, orchestrate_summary, resolve_jobs
from solvers.orchestrator.brute import brute_force_fixed
from solvers.orchestrator.domains import domain_space, tp_groups


@pytest.fixture(scope="module")
def khop():
    from topologies import build

    return build("khop-ring", 64 * 4, {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 16})


# ------------------------------------------------------------------------------------------ stage 1
def test_resolve_jobs():
    j = resolve_jobs([Job(tp=8, dp=None)], 10, 80)[0]
    assert (j.dp, j.count) == (10, 1)
    j = resolve_jobs([Job(tp=8, dp=3)], 10, 80)[0]
    assert (j.dp, j.count) == (3, 3)
    assert resolve_jobs([Job(tp=8, dp=3, count=4)], 10, 80) is None  # 12 rings asked, 10 formed
    with pytest.raises(FabricError, match="dp"):
        resolve_jobs([Job(tp=8, dp=11)], 10, 80)
    # two jobs: the most rings used (3 x 3 + 1 x 1 = 10, not 3 x 3 alone), ties to the earlier job
    a, b = resolve_jobs([Job(tp=8, dp=3), Job(tp=8, dp=1)], 10, 80)
    assert (a.count, b.count) == (3, 1)
    a, b = resolve_jobs([Job(tp=8, dp=4), Job(tp=8, dp=3)], 10, 80)
    assert 4 * a.count + 3 * b.count == 10
    # dp=max takes what the fixed counts leave (PP 2: whole pipelines of it)
    a, b, c = resolve_jobs([Job(tp=8, dp=None, pp=2), Job(tp=8, dp=3, count=1), Job(tp=8, dp=1, count=1)], 10, 80)
    assert (a.dp, a.count, b.count, c.count) == (3, 1, 1, 1)  # 3 x 2 + 3 + 1 = 10
    # beside a job of no count, which would also take as many as fit: refused (the dp=max job took every ring and
    # the other was dropped, though the help says the jobs without a count share what is left)
    for other in (Job(tp=8, dp=3, name="a"), Job(tp=8, dp=1, pp=2, name="a")):
        with pytest.raises(FabricError, match="^dp: a dp=max job takes every ring .* needs a count \\('a' has none\\)"):
            resolve_jobs([Job(tp=8, dp=None), other], 10, 80)
    assert resolve_jobs([Job(tp=8, dp=None), Job(tp=8, dp=3, count=4)], 10, 80) is None  # infeasible, not bad input
    with pytest.raises(FabricError, match="^dp: at most one job may take dp=max"):
        resolve_jobs([Job(tp=8, dp=None), Job(tp=8, dp=None)], 10, 80)


def test_bad_input(khop):
    with pytest.raises(FabricError, match="tp"):
        orchestrate(khop, [Job(tp=6, dp=2)])  # not a multiple of 4 GPUs per node
    with pytest.raises(FabricError, match="faulty_nodes"):
        orchestrate(khop, [Job(tp=8, dp=2)], [64])
    with pytest.raises(FabricError, match="tor_map"):
        orchestrate(khop, [Job(tp=8, dp=2)], tor_map=[0, 1])
    with pytest.raises(FabricError, match="solver"):
        orchestrate(khop, [Job(tp=8, dp=2)], solver="magic")
    with pytest.raises(FabricError, match="dp"):
        Job(tp=8, dp=0)
    with pytest.raises(FabricError, match="jobs"):
        orchestrate(khop, [Job(tp=8, dp=2), Job(tp=16, dp=2)])


def test_infeasible_count_is_a_status_not_an_error(khop):
    # 64 nodes form 16 TP groups of 4 with no fault, 15 with node 1 down: 4 instances of DP 4 fit only the former
    res = orchestrate(khop, [Job(tp=16, dp=4, count=4)], [1])
    assert res.status == "infeasible" and res.placement is None and res.notes


def test_count_beyond_the_fault_free_fabric_is_an_error(khop):
    """No fault draw could serve 5 x 4 TP groups of 16 GPUs on 256 GPUs: bad input, not an answer."""
    for solver in ("ilp", "greedy", "fault-unaware"):
        with pytest.raises(FabricError) as exc:
            orchestrate(khop, [Job(tp=16, dp=4, count=5)], [1], solver=solver)
        assert exc.value.field == "count" and "need 20 TP groups" in exc.value.message and "at most 16" in \
            exc.value.message


# ------------------------------------------------------------------------------------------ baselines
def test_baselines(khop):
    faults = [2, 20, 21, 40, 55]
    ilp = orchestrate(khop, [Job(tp=8, dp=4)], faults)
    greedy = orchestrate(khop, [Job(tp=8, dp=4)], faults, solver="greedy")
    unaware = orchestrate(khop, [Job(tp=8, dp=4)], faults, solver="fault-unaware")
    assert ilp.used_gpus == greedy.used_gpus >= unaware.used_gpus
    assert greedy.traffic.cross_bytes >= ilp.traffic.cross_bytes
    for res in (ilp, greedy, unaware):
        res.placement.check(res.space)  # no faulty node in any ring, no node twice
    assert unaware.used_gpus < 256 - 5 * 4  # whole instances touching a fault are lost


def test_tor_map(khop):
    contiguous = list(np.arange(64) // 16)
    a = orchestrate(khop, [Job(tp=8, dp=4)], [3, 30])
    b = orchestrate(khop, [Job(tp=8, dp=4)], [3, 30], tor_map=contiguous)
    assert a.traffic.cross_bytes == b.traffic.cross_bytes and b.model == "blocks"
    # interleaved: position p under ToR p mod 4; the explicit model places rings so DP peers share ToRs
    c = orchestrate(khop, [Job(tp=8, dp=4)], [3, 30], tor_map=list(np.arange(64) % 4))
    assert c.model == "explicit" and c.status in ("optimal", "feasible")
    assert c.used_gpus == a.used_gpus  # ring counts do not depend on the wiring
    assert c.space.tor.tolist() == [p % 4 for p in range(64)]


def test_summary_is_deterministic_and_flat(khop):
    a = orchestrate_summary(khop, tp=8, dp=4, node_fault_ratio=0.05, seed=3)
    b = orchestrate_summary(khop, tp=8, dp=4, node_fault_ratio=0.05, seed=3)
    for key in ("tp_groups", "dp_groups", "gpu_utilization", "cross_tor_traffic_ratio", "status", "objective",
                "bound", "gap", "solve_seconds", "tors_per_dp_group_mean", "tors_per_dp_group_max"):
        assert key in a
    drop = {"solve_seconds", "build_seconds", "total_seconds"}
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}
    scalars = (str, int, float, bool, type(None))
    assert all(isinstance(v, scalars) or (isinstance(v, dict) and all(isinstance(x, scalars) for x in v.values()))
               for v in a.values())


def test_trace_fault_source(khop):
    d = orchestrate_summary(khop, tp=8, dp=4, trace="stepfun", seed=1)
    assert d["fault_source"].startswith("trace stepfun") and d["faulty_nodes"] > 0
    assert d["status"] == "optimal"
    with pytest.raises(FabricError, match="^trace: give one of"):  # the second source given, not one not given
        orchestrate_summary(khop, tp=8, dp=4, trace="stepfun", node_fault_ratio=0.1)


# ------------------------------------------------------------------------------------------ other architectures
@pytest.mark.parametrize("arch,gpus,tp,dp,faults", [
    ("dgx", 128, 8, 2, [1, 5]),
    ("nvl-36", 144, 8, 3, [0, 13]),
    ("nvl-72", 144, 16, 2, [3]),
    ("tpuv4", 256, 16, 2, [7]),
])
def test_other_architectures_equal_brute_force(arch, gpus, tp, dp, faults):
    from topologies import build

    fab = build(arch, gpus)
    ilp = orchestrate(fab, [Job(tp=tp, dp=dp, dp_bytes=1.0)], faults)
    greedy = orchestrate(fab, [Job(tp=tp, dp=dp, dp_bytes=1.0)], faults, solver="greedy")
    unaware = orchestrate(fab, [Job(tp=tp, dp=dp, dp_bytes=1.0)], faults, solver="fault-unaware")
    assert ilp.status == "optimal" and ilp.unit == "gpu"
    space, nodes, avail = domain_space(fab, faults)
    rings = tp_groups(fab, tp, avail, nodes)
    sigs = [tuple(int(space.tor[u]) for u in r) for r in rings]
    best = brute_force_fixed(sigs, ilp.jobs[0])
    assert ilp.traffic.cross_bytes == pytest.approx(best)
    assert greedy.traffic.cross_bytes >= ilp.traffic.cross_bytes
    assert ilp.used_gpus == greedy.used_gpus >= unaware.used_gpus
    ilp.placement.check(ilp.space)


def test_other_architecture_rejects_a_tor_map():
    from topologies import build

    with pytest.raises(FabricError, match="tor_map"):
        orchestrate(build("dgx", 64), [Job(tp=8, dp=2)], tor_map=[0] * 8)


def test_two_jobs_of_one_tp_size():
    """Several jobs of different DP sizes on ToR blocks go to the several-job block model, which agrees with the
    explicit model (exact, independent formulation); fixed counts first, then the most rings for the others."""
    from topologies import build

    fab = build("khop-ring", 32 * 4, {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 8})
    jobs = [Job(tp=8, dp=3, count=2), Job(tp=8, dp=2)]
    ilp = orchestrate(fab, jobs, [5, 17])
    greedy = orchestrate(fab, jobs, [5, 17], solver="greedy")
    assert ilp.model == "blocks-jobs" and ilp.status == "optimal"
    explicit = orchestrate(fab, jobs, [5, 17], model="explicit")
    assert explicit.model == "explicit" and explicit.status == "optimal"
    assert ilp.traffic.cross_bytes == pytest.approx(explicit.traffic.cross_bytes)
    assert [(j.dp, j.count) for j in ilp.jobs] == [(3, 2), (2, 4)]  # 15 rings: 6 + 8 used
    assert sorted(i.job for i in ilp.placement.instances) == [0, 0, 1, 1, 1, 1]
    assert greedy.traffic.cross_bytes >= ilp.traffic.cross_bytes
    ilp.placement.check(ilp.space)
