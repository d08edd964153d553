"""One DP group (``--dp max`` or one instance) by the exact path of :mod:`solvers.orchestrator.single_group`.

Checked against brute force (:mod:`solvers.orchestrator.brute`, every non-crossing ring set of ``D`` rings,
costs from the definitions of :mod:`solvers.orchestrator.traffic`), which shares nothing with the path but the
ring rule: on open and closed lines, rotated against their ToRs, with random faults, the path's optimum equals
brute force whenever :func:`exact_for` holds (then every slot of every placement sees two or more ToRs, so the
cost is the sum over ToRs of the slots they hold: the module docstring's argument), its placement costs exactly
that, and the orchestration reports it optimal.
"""

import random

import numpy as np
import pytest

from solvers.orchestrator import Job
from solvers.orchestrator.api import orchestrate_line, resolve_jobs
from solvers.orchestrator.brute import brute_force, line_from_arrays
from solvers.orchestrator.rings import block_structure, max_rings
from solvers.orchestrator.run import Budget, BudgetSpent
from solvers.orchestrator.single_group import exact_for, held, large_group, placement_of, single_group
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveOptions

SHAPES = [(16, 4, 2, 2), (18, 3, 2, 2), (20, 4, 2, 2), (18, 6, 3, 2), (15, 3, 2, 2), (24, 6, 2, 3), (16, 2, 2, 2)]


def random_line(rng, n, npt, k, closed):
    healthy = np.ones(n, bool)
    healthy[rng.sample(range(n), rng.randint(0, 3))] = False
    tor = (np.arange(n) + rng.randint(0, npt - 1)) // npt  # rotated: partial end blocks (open)
    if closed:
        tor %= n // npt  # ... or a block over the seam (closed)
    return line_from_arrays(healthy, tor, k, 1, closed)


def test_held_is_the_union_of_the_straddles_slots():
    # left straddle of split xl holds [xl, m) of the block, right one of split xr holds [0, xr)
    assert held(4, 0, 0, 0) == 0 and held(4, 1, 0, 0) == 3 and held(4, 0, 3, 0) == 3
    assert held(4, 3, 1, 0) == 2 and held(4, 1, 3, 0) == 4 and held(4, 2, 2, 0) == 4 and held(4, 3, 1, 2) == 4


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("closed", [False, True])
def test_single_group_path_equals_brute_force(shape, closed):
    n, npt, k, m = shape
    rng = random.Random(hash((shape, closed)) % 2**32)
    checked = 0
    for _ in range(4):
        line = random_line(rng, n, npt, k, closed)
        R = len(max_rings(line, m))
        blocks = block_structure(line, m)
        if blocks is None or R < 2:
            continue
        for D in sorted({R, max(R - 1, 2)}):
            job = resolve_jobs([Job(tp=m, dp=D, count=1, dp_bytes=1.0)], R, int(line.space.healthy.sum()))[0]
            best = brute_force(line, job)
            unit = 2.0 * (D - 1) / D
            sg = single_group(blocks, D)
            placement = placement_of(blocks, sg)
            placement.check(line.space)
            cost = placement_traffic(placement, line.space, [job]).cross_bytes
            assert cost >= best - 1e-9  # any placement is feasible
            if not exact_for(blocks, D):
                continue
            assert sg.cost * unit == pytest.approx(best, abs=1e-9)
            assert cost == pytest.approx(best, abs=1e-9)
            res = orchestrate_line(line, [Job(tp=m, dp=D, count=1, dp_bytes=1.0)], options=SolveOptions(time_limit=30))
            assert res.status == "optimal" and res.traffic.cross_bytes == pytest.approx(best, abs=1e-9)
            assert res.report.bound * res.unit_bytes == pytest.approx(best, abs=1e-9)
            checked += 1
    assert checked >= 2


def test_small_groups_are_left_to_the_ilp():
    # D <= cap + 2: the group could sit in one ToR at some slot (phi = 0 there), the sum over ToRs would overcount
    line = line_from_arrays(np.ones(24, bool), np.arange(24) // 8, 2, 1, False)
    blocks = block_structure(line, 2)
    assert not exact_for(blocks, 3) and exact_for(blocks, 7)
    res = orchestrate_line(line, [Job(tp=2, dp=3, count=1, dp_bytes=1.0)], options=SolveOptions(time_limit=30))
    assert res.status == "optimal" and res.traffic.cross_bytes == 0.0


def test_the_path_checks_its_budget():
    line = line_from_arrays(np.ones(64, bool), np.arange(64) // 8, 2, 1, False)
    blocks = block_structure(line, 2)
    with pytest.raises(BudgetSpent):
        single_group(blocks, 20, Budget(0.0, 1e-9))


@pytest.mark.parametrize("shape", [(15, 3, 2, 3), (16, 4, 2, 4), (18, 3, 2, 3), (16, 4, 3, 3), (20, 4, 3, 4)])
def test_short_blocks_bound_by_the_view_and_place_within_two_blocks(shape):
    """Short blocks (a ring may cover a whole block): the path over the view of three_blocks.py never exceeds
    brute force (which holds the rings over three blocks), the path over two-block rings is a placement, and
    whenever they meet the orchestration's ``optimal`` equals brute force."""
    from solvers.orchestrator.three_blocks import three_block_view

    n, npt, k, m = shape
    rng = random.Random(n * 31 + npt * 7 + k * 3 + m)
    checked = met = 0
    for _ in range(6):
        line = random_line(rng, n, npt, k, False)
        R = len(max_rings(line, m))
        blocks = block_structure(line, m, allow_short=True)
        if blocks is None or blocks.exact or R < 2:
            continue
        three = three_block_view(blocks, line.space.healthy, line.space.tor)
        for D in sorted({R, max(R - 1, 2)}):
            if three is None or not large_group(blocks, D):
                continue
            job = resolve_jobs([Job(tp=m, dp=D, count=1, dp_bytes=1.0)], R, int(line.space.healthy.sum()))[0]
            best = brute_force(line, job) / (2.0 * (D - 1) / D)
            low, sg = single_group(three[0], D), single_group(blocks, D)
            assert low.cost <= best + 1e-9
            placement = placement_of(blocks, sg)
            placement.check(line.space)
            assert placement_traffic(placement, line.space, [job]).cross_bytes / (2.0 * (D - 1) / D) >= best - 1e-9
            res = orchestrate_line(line, [Job(tp=m, dp=D, count=1, dp_bytes=1.0)], options=SolveOptions(time_limit=30))
            assert res.report.bound * res.unit_bytes <= best * (2.0 * (D - 1) / D) + 1e-9
            if res.status == "optimal":
                met += 1
                assert res.traffic.cross_bytes == pytest.approx(best * (2.0 * (D - 1) / D), abs=1e-9)
            checked += 1
    assert checked >= 2
