"""The search over where the spare nodes go (solvers/orchestrator/retile.py).

What is checked, and against what:

* The numpy score of a cut is the cost of its signature grouping as the
  traffic accounting prices it (an identity: ``group_by_signature`` then
  ``placement_traffic``, written independently of the vectorised score).
* On seeded small lines (interleaved and random ToR maps, open, with faults)
  the placement found is valid (healthy nodes, every hop at most ``k``,
  ``count`` groups of ``D`` rings), is never below brute force (every ring set
  and grouping, :mod:`solvers.orchestrator.brute`) since it is a placement,
  is the same on a second run (fixed seed and move count), and reaches brute
  force on most of them: it is a heuristic, and where it misses, its score
  (the signature grouping) ranks the optimal cut below others.
* Two adjacent faults on a ``k = 2`` line split it into stretches that must
  each hold whole rings; a single node moved never changes that, the ring
  move does: on a constructed line the optimum (0, four identical rings) needs
  it.
* A spent budget returns the start's cut, regrouped, at once.
"""

import random
import time

import numpy as np
import pytest

from solvers.orchestrator import Job
from solvers.orchestrator.brute import brute_force, line_from_arrays
from solvers.orchestrator.greedy import group_by_signature, tor_aware_placement
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.retile import _Cuts, retile
from solvers.orchestrator.run import Budget
from solvers.orchestrator.traffic import placement_traffic
from tests.solvers.test_orchestrator_line_bound import resolved  # one job resolved as the API does
from tests.solvers.test_orchestrator_slot_bound import small_line


def cost_units(placement, line, job):
    unit, _, _ = unit_costs([job], line.space.g)
    return placement_traffic(placement, line.space, [job]).cross_bytes / unit


def assert_valid(placement, line, job):
    placement.check(line.space)
    m = job.tp // line.space.g
    assert len(placement.instances) == job.count
    for inst in placement.instances:
        assert len(inst.stages) == 1 and len(inst.stages[0]) == job.dp
        for r in inst.stages[0]:
            ring = placement.rings[r]
            assert len(ring) == m and all(0 < b - a <= line.k for a, b in zip(ring, ring[1:]))


def test_score_is_the_accounted_cost_of_the_signature_grouping():
    rng = random.Random(2)
    for _ in range(30):
        n, T, m, D = rng.choice([(40, 5, 2, 3), (48, 6, 3, 2), (60, 4, 2, 4)])
        healthy = np.ones(n, bool)
        healthy[rng.sample(range(n), 3)] = False
        line = line_from_arrays(healthy, [rng.randrange(T) for _ in range(n)], 2)
        pos = np.flatnonzero(healthy)
        C = rng.randint(1, len(pos) // (m * D))
        cut = pos[:m * D * C].reshape(-1, m)
        if (np.diff(cut, axis=1) > 2).any():
            continue
        job = Job(tp=m, dp=D, count=C, dp_bytes=1.0)
        placed = group_by_signature([tuple(int(u) for u in r) for r in cut], line.space.tor, job)
        assert _Cuts(line, m, D, C).cost(cut) == pytest.approx(cost_units(placed, line, job), abs=1e-9)


def test_valid_never_below_brute_force_deterministic_and_mostly_optimal():
    rng = random.Random(2)
    checked = optimal = 0
    for _ in range(40):
        n, T, k, m, D = rng.choice([(14, 4, 2, 2, 2), (15, 3, 2, 2, 3), (13, 5, 3, 2, 2), (16, 4, 2, 2, 4),
                                    (18, 4, 2, 2, 2), (17, 4, 2, 3, 2)])
        line, job = small_line(rng, n, T, k, m, D, rng.choice(["interleaved", "map"]))
        if job is None:
            continue
        start = tor_aware_placement(line, [job])
        out = retile(line, job, start, moves=3000)
        if out is None:  # no spare node to move
            continue
        assert_valid(out, line, job)
        unit, _, _ = unit_costs([job], 1)
        best = brute_force(line, job) / unit
        cost = cost_units(out, line, job)
        assert cost >= best - 1e-9
        assert retile(line, job, start, moves=3000) == out
        checked += 1
        optimal += cost <= best + 1e-9
    # measured: 33 of 33 lines; the margin is for the heuristic, not for flakiness (it is seeded)
    assert checked >= 25 and optimal >= checked - 3


def test_ring_move_crosses_a_double_fault():
    # ToR per position; positions 6 and 7 faulty: rings (k = 2) cannot hop them, so the stretches 0-5 and
    # 8-15 each hold whole rings.  The greedy cut takes two rings left of the faults; the optimum takes
    # (1, 2), (4, 5), (10, 11), (13, 14), all with signature (1, 2): one group, no cross-ToR byte.
    healthy = np.ones(16, bool)
    healthy[[6, 7]] = False
    line = line_from_arrays(healthy, [2, 1, 2, 2, 1, 2, 2, 0, 1, 0, 1, 2, 1, 1, 2, 1], 2)
    job = resolved(line, Job(tp=2, dp=4, dp_bytes=1.0))
    start = tor_aware_placement(line, [job])
    assert cost_units(start, line, job) > 0
    out = retile(line, job, start, moves=3000)
    assert_valid(out, line, job)
    assert cost_units(out, line, job) == 0 == brute_force(line, job)


def test_spent_budget_returns_the_start_cut():
    rng = random.Random(4)
    line, job = small_line(rng, 18, 4, 2, 2, 2, "interleaved")
    start = tor_aware_placement(line, [job])
    out = retile(line, job, start, budget=Budget(time.perf_counter(), 0.0))
    assert sorted(map(tuple, (out.rings[r] for r in out.used_rings))) == sorted(
        map(tuple, (start.rings[r] for r in start.used_rings)))


def test_a_dearer_solver_incumbent_never_replaces_the_warm_start(monkeypatch):
    """A retiled warm start may use rings the explicit model's candidates express differently; if the solver
    then runs without it and stops (time limit) at something dearer, the warm start stays the answer."""
    from types import SimpleNamespace

    from solvers.orchestrator import run as run_mod
    from solvers.pulp_adapter import SolveOptions, SolveReport

    rng = random.Random(9)
    line, job = small_line(rng, 18, 4, 2, 2, 2, "interleaved")
    warm = retile(line, job, tor_aware_placement(line, [job]), moves=3000)
    dear = tor_aware_placement(line, [job])  # 6 slot crossings on this line, the retiled cut 2
    unit, _, _ = unit_costs([job], 1)
    assert cost_units(dear, line, job) > cost_units(warm, line, job)
    built = SimpleNamespace(kind="explicit", data=SimpleNamespace(), unit_bytes=unit, stats=lambda: {})
    report = SolveReport("feasible", "highs", True, cost_units(dear, line, job), 0.0, 1.0, 0.1, "Time limit reached",
                         termination="time_limit")
    monkeypatch.setattr(run_mod, "solve_model", lambda b, opts, start: report)
    res = run_mod.run_ilp(line.space, [job], warm, SolveOptions(time_limit=5), Budget(time.perf_counter(), 5),
                          lambda b: built, lambda b, p: {}, lambda b: dear)
    assert res.placement == warm
    assert res.report.objective == pytest.approx(cost_units(warm, line, job))
    assert res.report.gap == pytest.approx(1.0) and res.status == "feasible"  # bound 0
    assert any("dearer than the warm start" in n for n in res.notes)


def test_orchestration_keeps_the_retiled_cut_and_says_so():
    """160 nodes, interleaved (above EXPLICIT_MAX_SLOTS, so the slot bound and the warm-start searches run):
    the regrouped greedy cut costs 35 slot crossings, the retiled one 4 = the slot bound, proved optimal."""
    from solvers.orchestrator import orchestrate
    from solvers.orchestrator.faultsets import fault_nodes
    from solvers.pulp_adapter import SolveOptions
    from topologies import build

    fab = build("khop-ring", 160 * 4, {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 16, "tor_wiring": "interleaved"})
    nodes, _ = fault_nodes(fab, node_fault_ratio=0.05, seed=0, mode="exact")
    # the search stops at its move count (6 s here, idle); a limit of 30 s let a loaded machine cut it short
    # and fail the test, so the limit is only a backstop: the answer does not depend on it
    res = orchestrate(fab, [Job(tp=16, dp=4)], nodes, options=SolveOptions(time_limit=600))
    assert any("retile.py" in n and "35 -> 4" in n for n in res.notes)
    assert res.status == "optimal" and res.report.gap == 0.0
    unit, _, _ = unit_costs(res.jobs, 4)
    assert res.traffic.cross_bytes / unit == pytest.approx(4)


def test_restarts_never_dearer_than_one_run():
    # every run's kept cuts are grouped, the first run's among them (same seed, same start): with no budget the
    # answer of three runs costs at most that of one, on every line (seeded small lines, checked against brute
    # force as above)
    rng = random.Random(5)
    checked = cheaper = 0
    for _ in range(30):
        n, T, k, m, D = rng.choice([(14, 4, 2, 2, 2), (16, 4, 2, 2, 4), (18, 4, 2, 2, 2), (17, 4, 2, 3, 2)])
        line, job = small_line(rng, n, T, k, m, D, rng.choice(["interleaved", "map"]))
        if job is None:
            continue
        start = tor_aware_placement(line, [job])
        one = retile(line, job, start, moves=300, restarts=1)
        if one is None:
            continue
        three = retile(line, job, start, moves=300, restarts=3)
        assert_valid(three, line, job)
        assert brute_force(line, job) / unit_costs([job], 1)[0] - 1e-9 <= cost_units(three, line, job)
        assert cost_units(three, line, job) <= cost_units(one, line, job) + 1e-9
        checked += 1
        cheaper += cost_units(three, line, job) < cost_units(one, line, job) - 1e-9
    # measured: 22 lines, 3 of them cheaper with the restarts (300 moves a run leaves seed 0 short there)
    assert checked >= 15 and cheaper >= 1
