"""The slot-by-slot bound for any ToR wiring (solvers/orchestrator/slot_bound.py).

Valid: it never exceeds the optimum found by brute force
(:mod:`solvers.orchestrator.brute`, which shares nothing with it but the ring
rule: every ring set, every grouping) on small lines with interleaved
wiring (ToR = position mod T), random ToR maps and contiguous wiring, open
and closed.  Not vacuous: on some of them it is positive, and where the best
placement groups rings of one signature only it reaches 0 exactly as brute
force does.
"""

import random

import numpy as np
import pytest

from solvers.orchestrator import Job
from solvers.orchestrator.api import orchestrate_line
from solvers.orchestrator.brute import brute_force, line_from_arrays
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.slot_bound import tor_count_bound
from solvers.pulp_adapter import SolveOptions
from tests.solvers.test_orchestrator_line_bound import resolved  # one job resolved as the API does


def bound_of(line, job):
    return tor_count_bound(per_tor(line), job.tp // line.space.g, job.dp, job.count)


def per_tor(line):
    return np.bincount(line.space.tor[line.space.healthy], minlength=line.space.n_tors)


def small_line(rng, n, T, k, m, D, wiring):
    """(line, resolved job or None): ToR = position mod T or a random map, up to 2 random faults, 1 GPU a slot."""
    tor = np.arange(n) % T if wiring == "interleaved" else np.array([rng.randrange(T) for _ in range(n)])
    healthy = np.ones(n, bool)
    healthy[rng.sample(range(n), rng.randint(0, 2))] = False
    line = line_from_arrays(healthy, tor, k)
    job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
    return line, (job if job is not None and job.count >= 1 else None)


CASES = [(13, 3, 2, 2, 2, "interleaved"), (14, 4, 2, 2, 2, "interleaved"), (14, 3, 2, 3, 2, "interleaved"),
         (12, 3, 3, 2, 2, "map"), (12, 4, 2, 2, 2, "map"), (14, 4, 2, 2, 3, "map")]


def interleaved_160(seed: int, faults: int):
    """A 160-node interleaved line (16 ToRs, k = 2, 4 GPUs a node) with ``faults`` seeded node faults."""
    rng = random.Random(seed)
    healthy = np.ones(160, bool)
    healthy[rng.sample(range(160), faults)] = False
    return line_from_arrays(healthy, np.arange(160) % 16, 2, g=4)


def test_explicit_orchestration_states_the_bound_and_never_crosses_it():
    """On a 160-node interleaved line (above EXPLICIT_MAX_SLOTS) the explicit model runs told the bound."""
    line = interleaved_160(seed=5, faults=5)
    job = Job(tp=8, dp=4)
    res = orchestrate_line(line, [job], options=SolveOptions(time_limit=6))
    rep = res.report
    assert rep is not None and rep.bound is not None and 0 < rep.bound <= rep.objective + 1e-6
    assert any("slot by slot" in note for note in res.notes)
    fj = resolved(line, job)
    unit, _, _ = unit_costs([fj], 4)
    # validity at a size brute force cannot reach: the placement found costs at least the bound
    assert res.traffic.cross_bytes / unit >= bound_of(line, fj) - 1e-6


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize("n,T,k,m,D,wiring", CASES + [(16, 4, 2, 2, 4, "contiguous"), (15, 3, 2, 3, 2, "contiguous")])
def test_tor_count_bound_never_exceeds_brute_force(n, T, k, m, D, wiring, closed):
    """The closed form from healthy nodes per ToR alone, on interleaved, random and contiguous wiring, open lines
    and closed ones (the argument never looks at the ring shapes)."""
    positive = 0
    for line, job, best, unit in _brute_forced_lines(random.Random(7 * n + T + D), n, T, k, m, D, wiring, closed):
        lb = tor_count_bound(per_tor(line), m, D, job.count)
        assert lb * unit <= best + 1e-9
        assert lb == int(lb)
        if best == 0:
            assert lb == 0
        positive += lb > 0
    assert positive >= 1


def _brute_forced_lines(rng, n, T, k, m, D, wiring, closed, count=8):
    """(line, resolved job, brute-force optimum, bytes per slot crossing) for ``count`` seeded lines of up to 3
    faults (those with no complete group are skipped)."""
    for _ in range(count):
        if wiring == "interleaved":
            tor = np.arange(n) % T
        elif wiring == "contiguous":
            tor = np.arange(n) * T // n
        else:
            tor = np.array([rng.randrange(T) for _ in range(n)])
        healthy = np.ones(n, bool)
        healthy[rng.sample(range(n), rng.randint(0, 3))] = False
        line = line_from_arrays(healthy, tor, k, closed=closed)
        job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
        if job is None or job.count < 1:
            continue
        unit, _, _ = unit_costs([job], 1)
        yield line, job, brute_force(line, job), unit


def test_tor_count_bound_closed_form_on_a_hand_case():
    """Worked by hand from the module docstring's inequalities."""
    # two ToRs of 5 nodes, m = 2, D = 4, C = 1 (8 nodes): u = (4, 4), W = (1, 1) = m C, no leftover: 0
    assert tor_count_bound([5, 5], 2, 4, 1) == 0
    # one ToR of 3 and one of 3, m = 2, D = 3, C = 1: u = (3, 3), W = (1, 1) = m C: 0
    assert tor_count_bound([3, 3], 2, 3, 1) == 0
    # ToRs of 2 and 2 and 2, m = 2, D = 3, C = 1: W_t = 0 everywhere, 2 (m C - 0) = 4; split sum_t ceil(2/2) = 3
    assert tor_count_bound([2, 2, 2], 2, 3, 1) == 4


def test_an_explicit_model_too_large_to_build_is_skipped_and_the_bound_still_stated(monkeypatch):
    """Above EXPLICIT_MAX_COLUMNS (lowered here to fit a 160-node line) the explicit model is not built: the
    searched warm start is the answer, with the same slot bound and a note saying why no model ran (a line whose
    warm start does not meet the bound: every healthy node is used, no spare to move)."""
    import solvers.orchestrator.model as model
    from solvers.orchestrator.model import build_chosen, explicit_model_fits
    from solvers.orchestrator.rings import TooManyCandidates
    from solvers.orchestrator.run import UNLIMITED

    line = interleaved_160(seed=0, faults=8)
    job = Job(tp=8, dp=4)
    fj = resolved(line, job)
    built = build_chosen(line, [fj], "explicit", None)
    # the estimate (candidates + instances x signatures) is the bulk of the model, never more than it
    assert model._explicit_columns(model.candidate_rings(line, 2), [fj]) <= built.stats()["variables"]
    assert explicit_model_fits(line, [fj])
    monkeypatch.setattr(model, "EXPLICIT_MAX_COLUMNS", 10)
    assert not explicit_model_fits(line, [fj])
    with pytest.raises(TooManyCandidates, match="columns"):
        build_chosen(line, [fj], "explicit", None, UNLIMITED)
    res = orchestrate_line(line, [job], options=SolveOptions(time_limit=6))
    assert res.model == "-" and res.termination == "other_limit" and res.status == "feasible"
    assert any("too large to build" in note for note in res.notes)
    unit, _, _ = unit_costs([fj], 4)
    assert res.report.bound == pytest.approx(bound_of(line, fj))
    res.placement.check(line.space)
    assert res.traffic.cross_bytes / unit >= bound_of(line, fj) - 1e-6


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize("n,T,k,m,D", [(16, 4, 2, 4, 2), (16, 4, 2, 3, 3), (15, 5, 2, 3, 2), (18, 6, 2, 3, 3),
                                       (16, 4, 3, 4, 2), (14, 7, 2, 2, 3), (16, 2, 2, 4, 2)])
def test_ring_capacity_bound_never_exceeds_brute_force(n, T, k, m, D, closed):
    """Contiguous ToRs about as long as a ring (where the bound is positive), open and closed, k = 2 and 3, up
    to 3 faults: brute force (every ring set, every grouping) never costs less; where every ToR holds at most
    one ring's node per slot, every placement costs m C D and the bound is that exactly."""
    from solvers.orchestrator.slot_bound import ring_capacity_bound

    positive = exact = 0
    rng = random.Random(11 * n + 3 * T + m + D + k)
    for line, job, best, unit in _brute_forced_lines(rng, n, T, k, m, D, "contiguous", closed):
        lb = ring_capacity_bound(line.space.tor, line.space.healthy, m, D, job.count)
        assert lb * unit <= best + 1e-9
        positive += lb > 0
        exact += lb > 0 and abs(lb * unit - best) <= 1e-9
    assert positive >= 1 or T == 2  # two ToRs of 8 nodes hold two rings of 4 per slot: a group may be mono
    if n // T <= m:
        assert exact == positive  # c_t = 1 everywhere: the bound is every placement's cost


def test_ring_capacity_bound_on_hand_cases():
    from solvers.orchestrator.slot_bound import ring_capacity_bound

    # 4 ToRs of 4 healthy nodes, m = 4: one ring's node per ToR per slot (c = 1); C = 1 group of D = 2
    # -> per slot both rings in different ToRs: 2 crossings x 4 slots = 8
    assert ring_capacity_bound(np.arange(16) // 4, np.ones(16, bool), 4, 2, 1) == 8
    # the same with 8-node ToRs (c = floor(7/4) + 1 = 2 >= D): a group can sit in one ToR: no bound
    assert ring_capacity_bound(np.arange(16) // 8, np.ones(16, bool), 4, 2, 1) == 0
    # 4 ToRs of 8 nodes, m = 4 (c = 2), D = 4, C = 2: each group spans >= ceil(4/2) = 2 ToRs; k* = 4 ToRs
    # -> per slot max(2 x 2, 4) = 4, x 4 slots = 16
    assert ring_capacity_bound(np.arange(32) // 8, np.ones(32, bool), 4, 4, 2) == 16
    # interleaved wiring: every run is one node, c_t = healthy nodes of t >= D: no bound
    assert ring_capacity_bound(np.arange(16) % 4, np.ones(16, bool), 2, 2, 2) == 0


def test_tor_count_bound_is_zero_at_once_when_every_tor_can_give_whole_groups():
    """The shortcut (sum of D floor(h_t / D) >= m C D: the knapsack's minimum is 0) agrees with the knapsack
    itself, which it skips: 300 random small cases, the knapsack run on each."""
    from solvers.orchestrator.slot_bound import _knapsack

    rng = random.Random(3)
    shortcut = 0
    for _ in range(300):
        T, m, D = rng.randint(1, 6), rng.randint(1, 3), rng.randint(2, 5)
        h = np.array([rng.randint(0, 9) for _ in range(T)])
        C = rng.randint(1, max(1, int(h.sum()) // (m * D)))
        if h.sum() < m * C * D:
            continue
        assert tor_count_bound(h, m, D, C) == _knapsack(h, m, D, C), (h.tolist(), m, D, C)
        shortcut += int((D * (h // D)).sum()) >= m * C * D
    assert shortcut >= 50


def test_small_lines_state_the_slot_bound_and_settle_when_every_placement_costs_the_same():
    """api._ilp: on lines small enough for the explicit model alone, one PP = 1 job gets the slot bound as its
    floor.  With ToRs shorter than a ring (2-node ToRs, rings of 4: every ToR holds at most one ring per slot) every
    placement costs m C D, the ring-capacity bound says so, and the answer is optimal without HiGHS having to
    close the gap; against brute force (the bound never above it, equal where optimal)."""
    rng = random.Random(5)
    settled = 0
    for _ in range(6):
        n = 16
        healthy = np.ones(n, bool)
        healthy[rng.sample(range(n), rng.randint(0, 2))] = False
        line = line_from_arrays(healthy, np.arange(n) // 2, 2, 1, False)
        job = resolved(line, Job(tp=4, dp=2, dp_bytes=1.0))
        if job is None or not job.count:
            continue
        res = orchestrate_line(line, [job], options=SolveOptions(time_limit=30))
        d = res.summary()
        best = brute_force(line, job)
        assert d["bound"] <= best + 1e-9 and res.traffic.cross_bytes >= best - 1e-9
        assert any("slot_bound.py" in n for n in res.notes)
        settled += d["status"] == "optimal" and res.traffic.cross_bytes == pytest.approx(best)
    assert settled >= 3
