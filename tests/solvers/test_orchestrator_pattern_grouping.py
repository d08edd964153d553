"""The pattern ILP that groups a fixed cut's rings (solvers/orchestrator/pattern_grouping.py).

Checked against brute force: on seeded small sets of ring signatures (2-4 slots, 2-4 rings per group, a few
ToRs, so that signatures repeat and share ToRs in every way), the cost of the grouping returned equals the
least cost over every partition of the rings into groups (enumerated exhaustively), because the model prices
every grouping exactly (a group is one sharing-connected pattern or several blocks that share nothing) and
never prices a solution below its true cost.  Also: the groups are a partition of the rings, and the call is
deterministic.
"""

import itertools
import random

import pytest

from solvers.orchestrator.pattern_grouping import pattern_grouping
from solvers.orchestrator.regroup import group_cost


def brute_force(sigs, D):
    """Least total cost over every partition of the rings into groups of ``D`` (the first ring's group first)."""
    best = None

    def rec(left, acc):
        nonlocal best
        if best is not None and acc >= best:
            return
        if not left:
            best = acc
            return
        first, rest = left[0], left[1:]
        for others in itertools.combinations(rest, D - 1):
            group = (first, *others)
            rec([i for i in rest if i not in others], acc + group_cost([sigs[i] for i in group]))

    rec(list(range(len(sigs))), 0)
    return best


@pytest.mark.parametrize("seed", range(40))
def test_equals_brute_force_on_small_cuts(seed):
    rng = random.Random(seed)
    m, D, T = rng.choice([(2, 2, 3), (3, 2, 3), (2, 3, 3), (3, 3, 4), (2, 4, 3), (4, 4, 4), (3, 4, 2)])
    groups = rng.randint(2, 3 if D >= 3 else 4)
    sigs = [tuple(rng.randrange(T) for _ in range(m)) for _ in range(groups * D)]
    out = pattern_grouping(sigs, D)
    assert sorted(i for g in out for i in g) == list(range(len(sigs)))
    assert all(len(g) == D for g in out)
    cost = sum(group_cost([sigs[i] for i in g]) for g in out)
    assert cost == brute_force(sigs, D)
    assert pattern_grouping(sigs, D) == out


def test_identical_signatures_cost_nothing_and_bad_sizes_are_declined():
    sigs = [(0, 1, 2)] * 4 + [(3, 3, 3)] * 4
    out = pattern_grouping(sigs, 4)
    assert sum(group_cost([sigs[i] for i in g]) for g in out) == 0
    assert pattern_grouping(sigs[:7], 4) is None  # not whole groups
    assert pattern_grouping(sigs, 1) is None


@pytest.mark.parametrize("seed", range(6))
def test_multiplicities_are_the_compositions_within_the_counts(seed):
    """_multiplicities lists exactly the tuples a brute force over every product of 1..cap finds with sum <= most."""
    from solvers.orchestrator.pattern_grouping import _multiplicities

    rng = random.Random(seed)
    caps = [rng.randint(1, 4) for _ in range(rng.randint(1, 4))]
    most = rng.randint(len(caps), 10)
    brute = sorted(k for k in itertools.product(*(range(1, c + 1) for c in caps)) if sum(k) <= most)
    assert sorted(_multiplicities(caps, most)) == brute


def test_no_time_left_declines_at_once():
    """The listing of patterns honours the time limit too (it took minutes at D = 16 before it did): with none
    left the grouping is declined and the caller keeps its own, whatever the cut."""
    rng = random.Random(3)
    sigs = [tuple(rng.randrange(40) for _ in range(4)) for _ in range(64)]
    assert pattern_grouping(sigs, 16, time_limit=0.0) is None
    assert pattern_grouping(sigs[:8], 4) is not None
