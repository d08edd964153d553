"""PP > 1 on ToR blocks (:mod:`solvers.orchestrator.pipelined`): the bound is valid and the gap stated is true.

Against brute force (:mod:`solvers.orchestrator.brute`: every ring set,
every grouping into stages and pipelines, costs from the traffic
definitions): the stated bound never exceeds the optimum, the placement
costs what the traffic accounting says and never less than the optimum,
and ``optimal`` is claimed only at the optimum.  The bound's premise (a
stage's DP group costs what a PP = 1 group of the same rings costs) is
checked on the chained placement itself.
"""

import pytest

from solvers.orchestrator import Job
from solvers.orchestrator.api import orchestrate_line, resolve_jobs
from solvers.orchestrator.brute import brute_force, line_from_arrays
from solvers.orchestrator.pipelined import chain_stages, surrogate
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.rings import max_rings
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveOptions

import numpy as np


def make_line(n, npt, k, faults):
    tor = np.arange(n) // npt
    healthy = np.ones(n, bool)
    healthy[list(faults)] = False
    return line_from_arrays(healthy, tor, k, 1, False)


CASES = [(16, 4, 2, 2, 2, 2, [5], 0.3), (18, 6, 2, 2, 2, 2, [3], 0.3), (16, 4, 2, 2, 2, 2, [], 0.3),
         (20, 5, 2, 2, 2, 2, [7, 13], 0.3), (18, 6, 2, 2, 2, 2, [3], 0.001), (24, 6, 2, 2, 2, 3, [4], 0.01),
         (16, 8, 2, 2, 2, 2, [], 0.5)]


@pytest.mark.parametrize("n,npt,k,m,D,P,faults,ppb", CASES)
def test_pipelined_bound_and_gap_against_brute_force(n, npt, k, m, D, P, faults, ppb):
    line = make_line(n, npt, k, faults)
    job = Job(tp=m, dp=D, pp=P, dp_bytes=1.0, pp_bytes=ppb)
    resolved = resolve_jobs([job], len(max_rings(line, m)), int(line.space.healthy.sum()))[0]
    best = brute_force(line, resolved)
    # model="blocks": on lines this small "auto" takes the (exact) explicit model
    res = orchestrate_line(line, [job], options=SolveOptions(time_limit=30), model="blocks")
    s = res.summary()
    assert res.model.endswith("-pp")
    res.placement.check(line.space)
    assert s["objective"] == pytest.approx(res.traffic.cross_bytes)
    assert s["bound"] <= best + 1e-9
    assert res.traffic.cross_bytes >= best - 1e-9
    if res.status == "optimal":
        assert res.traffic.cross_bytes == pytest.approx(best)
    # the termination is this placement's, not the PP = 1 surrogate's: "optimal" exactly when the status is
    assert (s["termination"] == "optimal") == (res.status == "optimal")
    assert s["gap"] == pytest.approx(0.0 if s["objective"] == s["bound"] else
                                     (s["objective"] - s["bound"]) / s["objective"])


def test_a_stage_group_costs_what_the_same_group_costs_at_pp_1():
    line = make_line(24, 6, 2, [4, 17])
    job = resolve_jobs([Job(tp=2, dp=2, pp=2, dp_bytes=1.0, pp_bytes=0.2)], len(max_rings(line, 2)), 22)[0]
    flat_job = surrogate(job)
    assert flat_job.pp == 1 and flat_job.count == job.count * 2 and flat_job.bytes_dp == job.bytes_dp
    rings = tuple(max_rings(line, 2))
    flat = Placement(rings, tuple(PlacedInstance(0, ((2 * i, 2 * i + 1),)) for i in range(flat_job.count)))
    chained = chain_stages(flat, 2)
    assert len(chained.instances) == job.count and all(len(i.stages) == 2 for i in chained.instances)
    a = placement_traffic(flat, line.space, [flat_job])
    b = placement_traffic(chained, line.space, [job])
    assert b.dp_cross_bytes == pytest.approx(a.dp_cross_bytes) and b.dp_bytes == pytest.approx(a.dp_bytes)
