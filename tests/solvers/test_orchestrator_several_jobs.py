"""Several jobs in one request (:mod:`solvers.orchestrator.several_jobs`) against brute force.

Brute force (:func:`solvers.orchestrator.brute.brute_force_jobs`) enumerates every non-crossing ring set and every
way to deal its rings into the jobs' instances, costs from the definitions of
:mod:`solvers.orchestrator.traffic`: it shares nothing with the reductions.  Checked: the stated bound never
exceeds the brute-force optimum (valid), the placement never beats it (feasible), and ``optimal`` means equal.
Why the reductions hold is in the module docstring: a job with no instance moves nothing; jobs of one DP size
merged at the least bytes per crossing cost no more than the request, equal when the bytes are equal.
"""

import random

import numpy as np
import pytest

from solvers.orchestrator import Job
from solvers.orchestrator.api import orchestrate_line
from solvers.orchestrator.brute import brute_force_jobs, line_from_arrays
from solvers.pulp_adapter import SolveOptions

OPTS = SolveOptions(time_limit=30)


def random_line(rng, n, npt, k, closed):
    healthy = np.ones(n, bool)
    healthy[rng.sample(range(n), rng.randint(0, 3))] = False
    tor = (np.arange(n) + rng.randint(0, npt - 1)) // npt
    if closed:
        tor %= n // npt
    return line_from_arrays(healthy, tor, k, 1, closed)


def check(line, jobs):
    res = orchestrate_line(line, jobs, options=OPTS)
    if res.status == "infeasible":
        return None
    best = brute_force_jobs(line, res.jobs)
    d = res.summary()
    res.placement.check(line.space)
    assert [sum(1 for i in res.placement.instances if i.job == j) for j in range(len(jobs))] == \
        [j.count for j in res.jobs]
    assert res.traffic.cross_bytes >= best - 1e-9
    assert d["bound"] <= best + 1e-9 and 0.0 <= d["gap"] <= 1.0
    if d["status"] == "optimal":
        assert res.traffic.cross_bytes == pytest.approx(best, abs=1e-9)
    return res


REQUESTS = [
    # equal DP sizes, equal bytes: exact (merged)
    [Job(tp=2, dp=2, count=2, dp_bytes=1.0, name="a"), Job(tp=2, dp=2, dp_bytes=1.0, name="b")],
    # equal DP sizes, different bytes per crossing: bound at the least, groups dealt cheapest to the heaviest
    [Job(tp=2, dp=3, count=1, dp_bytes=3.0, name="a"), Job(tp=2, dp=3, dp_bytes=1.0, name="b")],
    # the knapsack leaves the second job no instance: the first alone
    [Job(tp=2, dp=2, dp_bytes=1.0, name="a"), Job(tp=2, dp=4, dp_bytes=1.0, name="b")],
]


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize("r", range(len(REQUESTS)))
def test_several_jobs_against_brute_force(r, closed):
    rng = random.Random(10 * r + closed)
    proved = 0
    for _ in range(4):
        n, npt, k = rng.choice([(16, 4, 2), (18, 6, 2), (15, 5, 2), (16, 4, 3)])
        res = check(random_line(rng, n, npt, k, closed), REQUESTS[r])
        if res is not None:
            proved += res.status == "optimal"
            assert any("several jobs" in s for s in res.notes)
    if r != 1:
        assert proved >= 3  # exact reductions: proved optimal (by the block path or the explicit model)


def test_jobs_of_different_dp_sizes_still_go_to_the_explicit_model():
    line = line_from_arrays(np.ones(16, bool), np.arange(16) // 4, 2, 1, False)
    res = check(line, [Job(tp=2, dp=2, count=1, dp_bytes=1.0), Job(tp=2, dp=3, dp_bytes=1.0)])
    assert res.model == "explicit" and res.status == "optimal"
