"""The swap search that improves the explicit orchestration's warm start (solvers/orchestrator/regroup.py).

What is checked, and against what:

* ``group_cost`` is the objective the traffic accounting prices: on random
  groups it times the unit cost equals :func:`placement_traffic`'s cross bytes
  exactly (an identity: both sum ``phi`` over slots, written independently).
* The search keeps a placement valid (same rings, same instance count) and
  never makes it dearer; brute force (:mod:`solvers.orchestrator.brute`, every
  ring set and grouping) is never beaten, since the result is a placement.
* On groups {A, A, B, B} x 2 the one improving exchange reaches 0 (a closed
  form: two groups of identical rings).
"""

import random
import time

import numpy as np
import pytest

from solvers.orchestrator import Job
from solvers.orchestrator.brute import brute_force, line_from_arrays
from solvers.orchestrator.greedy import tor_aware_placement
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.regroup import group_cost, regroup
from solvers.orchestrator.run import Budget
from solvers.orchestrator.traffic import placement_traffic
from tests.solvers.test_orchestrator_slot_bound import small_line  # a small interleaved or random-map line


def cost_units(placement, line, job):
    unit, _, _ = unit_costs([job], line.space.g)
    return placement_traffic(placement, line.space, [job]).cross_bytes / unit


def test_group_cost_is_the_accounted_dp_cost():
    rng = random.Random(3)
    n, T, m, D = 40, 7, 3, 4
    line = line_from_arrays(np.ones(n, bool), [rng.randrange(T) for _ in range(n)], 2, g=2)
    rings = tuple(tuple(range(i, i + m)) for i in range(0, n - m + 1, m))
    job = Job(tp=2 * m, dp=D, count=3, dp_bytes=1.0)
    for _ in range(20):
        order = rng.sample(range(len(rings)), 3 * D)
        insts = tuple(PlacedInstance(0, (tuple(order[i * D:(i + 1) * D]),)) for i in range(3))
        pl = Placement(rings, insts)
        sigs = [[tuple(int(line.space.tor[u]) for u in rings[r]) for r in inst.stages[0]] for inst in insts]
        assert sum(group_cost(s) for s in sigs) == pytest.approx(cost_units(pl, line, job), abs=1e-9)


def test_one_exchange_makes_two_mixed_groups_pure():
    # slots 0..7 are ToR 0, 8..15 ToR 1: rings of two nodes, A = ToR 0 (rings 0-3), B = ToR 1 (rings 4-7)
    line = line_from_arrays(np.ones(16, bool), [0] * 8 + [1] * 8, 1)
    rings = tuple((2 * i, 2 * i + 1) for i in range(8))
    start = Placement(rings, (PlacedInstance(0, ((0, 1, 4, 5),)), PlacedInstance(0, ((2, 3, 6, 7),))))
    job = Job(tp=2, dp=4, count=2, dp_bytes=1.0)
    assert cost_units(start, line, job) == 8  # each group: 2 ToRs at each of its 2 slots
    out = regroup(start, line.space)
    assert cost_units(out, line, job) == 0
    assert sorted(out.used_rings) == list(range(8))
    # a spent budget stops the search before its first exchange: the start comes back as it was
    assert regroup(start, line.space, budget=Budget(time.perf_counter(), 0.0)) == start


@pytest.mark.parametrize("wiring", ["interleaved", "map"])
def test_never_dearer_never_below_brute_force_and_deterministic(wiring):
    rng = random.Random(11 if wiring == "map" else 7)
    improved = checked = 0
    for _ in range(12):
        n, T, k, m, D = rng.choice([(14, 4, 2, 2, 2), (15, 3, 2, 2, 3), (13, 5, 3, 2, 2), (16, 4, 2, 2, 4)])
        line, job = small_line(rng, n, T, k, m, D, wiring)
        if job is None:
            continue
        start = tor_aware_placement(line, [job])
        out = regroup(start, line.space)
        out.check(line.space)
        assert out.rings == start.rings and len(out.instances) == len(start.instances)
        assert sorted(out.used_rings + list(out.spare)) == sorted(start.used_rings + list(start.spare))
        before, after = cost_units(start, line, job), cost_units(out, line, job)
        unit, _, _ = unit_costs([job], 1)
        assert after <= before
        assert after * unit >= brute_force(line, job) - 1e-9
        assert regroup(start, line.space) == out  # same input, same output
        improved += after < before
        checked += 1
    assert checked >= 6
