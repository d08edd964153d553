"""The line-DP lower bound (:mod:`solvers.orchestrator.line_bound`) is valid, and proofs made with it are right.

Valid: the bound never exceeds the optimum found by brute force
(:mod:`solvers.orchestrator.brute`, which shares nothing with it but the ring
rule) on small lines, nor the full block ILP solved to proven optimality on
256-node lines.  Right: whenever the orchestration says a placement is
optimal because of the bound, that placement costs what brute force (small
lines) or the full block ILP (medium lines) says is the optimum.
"""

import itertools
import random

import numpy as np
import pytest

from fabric.errors import FabricError
from solvers.orchestrator import Job
from solvers.orchestrator.api import orchestrate_line, resolve_jobs
from solvers.orchestrator.brute import brute_force, line_from_arrays
from solvers.orchestrator.line_bound import _combos, _piece_costs, line_bound, packed_bound, partitions
from solvers.orchestrator.model_blocks import tor_options
from solvers.orchestrator.model_blocks import build_blocks_model
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.rings import block_structure, max_rings
from solvers.orchestrator.solve import solve_model
from solvers.pulp_adapter import SolveOptions


def make_line(n, npt, k, faults, g=1):
    tor = np.arange(n) // npt
    healthy = np.ones(n, bool)
    healthy[list(faults)] = False
    return line_from_arrays(healthy, tor, k, g, False)


def resolved(line, job):
    m = job.tp // line.space.g
    try:
        return resolve_jobs([job], len(max_rings(line, m)), int(line.space.healthy.sum()) * line.space.g)[0]
    except FabricError:
        return None


def test_partitions_of_d_number_p_d_minus_one():
    # the partition numbers p(D) (OEIS A000041); parts < D leaves out the single part D
    p = [1, 1, 2, 3, 5, 7, 11, 15, 22, 30, 42, 56]
    for D in range(2, 12):
        parts = partitions(D)
        assert len(parts) == p[D] - 1
        assert all(sum(v * a[v] for v in range(D)) == D and a[0] == 0 for a in parts)
        assert len({tuple(a) for a in parts}) == len(parts)


def test_piece_costs_are_the_cheapest_split_of_a_toRs_pure_rings():
    rng = random.Random(3)
    for D in (2, 3, 4, 5):
        ic = [0.0] + [rng.uniform(-3, 3) for _ in range(D - 1)]
        m = 2
        cost, how = _piece_costs(m, D, ic, 9)
        for u in range(10):
            # enumerate: whole groups (free) plus any multiset of pieces of sizes 1..D-1
            best = min(sum(m + ic[v] for v in combo)
                       for r in range(u + 1) for combo in itertools.combinations_with_replacement(range(1, D), r)
                       if (u - sum(combo)) >= 0 and (u - sum(combo)) % D == 0)
            assert cost[u] == pytest.approx(best)
            assert sum(how[u]) <= u and (u - sum(how[u])) % D == 0


def reference_line_bound(blocks, D, C, ic):
    """The same shortest path written plainly: a dict of (state, d) per boundary, every in/out pair of every ToR."""
    T = blocks.T
    combos = [list(_combos(blocks, t, tor_options(blocks, t, D), D)) for t in range(T)]
    suf = [dict() for _ in range(T + 1)]
    suf[T] = {("N",): 0}
    for t in range(T - 1, -1, -1):
        for _, s, so, _, rings, f, _ in combos[t]:
            if so in suf[t + 1] and f >= 0:
                suf[t][s] = max(suf[t].get(s, -1), rings + f + suf[t + 1][so])
    fmax = max([c[5] for cs in combos for c in cs] + [0])
    piece, _ = _piece_costs(blocks.m, D, ic, fmax)
    if suf[0].get(("N",), -1) < D * C:
        return None
    layer = {(("N",), suf[0][("N",)] - D * C): 0.0}
    for t in range(T):
        new = {}
        for (s, d), cost in layer.items():
            for _, si, so, c, rings, f, emit in combos[t]:
                if si != s or so not in suf[t + 1] or f < 0:
                    continue
                d0 = d - (suf[t][s] - rings - f - suf[t + 1][so])
                for delta in range(max(-1, min(f, d0)) + 1):
                    key = (so, d0 - delta)
                    new[key] = min(new.get(key, np.inf), cost + c + ic[emit] + piece[f - delta])
        layer = new
    return layer.get((("N",), 0))


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_line_dp_equals_the_plain_one(seed):
    """The vectorised forward pass and its trace-back give the plain DP's optimum, and the path they trace
    costs exactly that (item prices random, so ties are rare and every piece size is exercised)."""
    rng = random.Random(seed)
    n, npt, k, m, D = rng.choice([(40, 8, 2, 2, 3), (48, 8, 2, 3, 4), (60, 10, 3, 2, 5), (64, 16, 2, 4, 3)])
    faults = rng.sample(range(n), rng.randint(0, 6))
    line = make_line(n, npt, k, faults)
    blocks = block_structure(line, m)
    job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
    if blocks is None or job is None:
        pytest.skip("no block view for this draw")
    for _ in range(3):
        ic = [0.0] + [rng.uniform(-2 * m, 2 * m) for _ in range(D - 1)]
        ref = reference_line_bound(blocks, D, job.count, ic)
        got = line_bound(blocks, D, job.count, item_cost=ic)
        assert (ref is None) == (got is None)
        if got is None:
            continue
        assert got.bound == pytest.approx(ref, abs=1e-9)
        # the traced path: its options' costs, its items at their prices and its pieces add up to the bound
        opt_cost = sum(got.options[t][i].cost for t, idx in enumerate(got.choice) for i in idx)
        pieces = sum(got.items[1:]) - sum(1 for t, idx in enumerate(got.choice) for i in idx
                                         if got.options[t][i].emit)
        priced = sum(ic[v] * got.items[v] for v in range(1, D))
        assert opt_cost + m * pieces + priced == pytest.approx(got.bound, abs=1e-9)


CASES = [(16, 4, 2, 2, 3), (16, 4, 2, 2, 4), (18, 6, 2, 2, 3), (20, 5, 2, 2, 4), (18, 6, 3, 2, 3), (18, 6, 2, 3, 2)]


@pytest.mark.parametrize("n,npt,k,m,D", CASES)
def test_bound_never_exceeds_brute_force_and_proofs_agree_with_it(n, npt, k, m, D):
    rng = random.Random(n * 1000 + npt * 10 + D)
    for _ in range(5):
        faults = sorted(rng.sample(range(n), rng.randint(0, 3)))
        line = make_line(n, npt, k, faults)
        job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
        blocks = block_structure(line, m)
        if job is None or blocks is None or job.count < 2:
            continue
        best = brute_force(line, job)
        unit, _, _ = unit_costs([job], 1)
        lb0 = line_bound(blocks, D, job.count)
        pb = packed_bound(blocks, D, job.count)
        assert lb0.bound * unit <= best + 1e-9
        assert lb0.bound <= pb.bound and pb.bound * unit <= best + 1e-9
        res = orchestrate_line(line, [Job(tp=m, dp=D, dp_bytes=1.0)], options=SolveOptions(time_limit=30))
        assert res.status == "optimal" and res.traffic.cross_bytes == pytest.approx(best, abs=1e-9)


@pytest.mark.parametrize("m,D,seed", [(2, 3, 0), (2, 4, 1), (2, 6, 2), (3, 4, 3), (4, 3, 4)])
def test_bound_never_exceeds_the_block_ilp_on_256_nodes(m, D, seed):
    """The full block ILP (exact on these blocks, checked against brute force elsewhere) is solved to
    proven optimality; the bound lies below it, and the bound-driven orchestration reaches it."""
    rng = np.random.default_rng(seed)
    n = 256
    faults = rng.choice(n, size=13, replace=False).tolist()
    line = make_line(n, 16, 2, faults)
    job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
    blocks = block_structure(line, m)
    assert blocks is not None and blocks.exact
    full = build_blocks_model(blocks, D, job.count, 1.0)
    rep = solve_model(full, SolveOptions(time_limit=120))
    assert rep.status == "optimal"
    pb = packed_bound(blocks, D, job.count)
    assert pb.bound <= rep.objective + 1e-6
    res = orchestrate_line(line, [Job(tp=m, dp=D, dp_bytes=1.0)], options=SolveOptions(time_limit=120))
    unit, _, _ = unit_costs([job], 1)
    assert res.status == "optimal"
    assert res.traffic.cross_bytes == pytest.approx(rep.objective * unit, rel=1e-9)
    assert any("line-DP lower bound" in s for s in res.notes)  # proved by the bound, not by the full ILP


def line_with_proven_block_optimum():
    """A 256-node line (16 per ToR, 13 random faults), TP 3 x DP 5: (line, resolved job, the full block ILP's
    report, solved to proven optimality)."""
    rng = np.random.default_rng(7)
    line = make_line(256, 16, 2, rng.choice(256, size=13, replace=False).tolist())
    job = resolved(line, Job(tp=3, dp=5, dp_bytes=1.0))
    rep = solve_model(build_blocks_model(block_structure(line, 3), 5, job.count, 1.0), SolveOptions(time_limit=120))
    assert rep.status == "optimal"
    return line, job, rep


def test_a_requested_gap_stops_at_a_placement_within_it_of_the_bound():
    """With ``gap_rel`` the bound-driven run may stop early; the gap it states is against the line-DP bound,
    which never exceeds the optimum of the full block ILP (solved to proven optimality here)."""
    line, job, rep = line_with_proven_block_optimum()
    unit, _, _ = unit_costs([job], 1)
    for gap in (0.0, 0.05, 0.5):
        res = orchestrate_line(line, [Job(tp=3, dp=5, dp_bytes=1.0)], options=SolveOptions(time_limit=60,
                                                                                           gap_rel=gap))
        assert res.report.bound <= rep.objective + 1e-6
        assert res.traffic.cross_bytes / unit >= rep.objective - 1e-6
        assert res.report.gap <= gap + 1e-9
        if res.status == "optimal":
            assert res.traffic.cross_bytes / unit == pytest.approx(rep.objective)


CLOSED_CASES = [(16, 4, 2, 2, 3), (18, 6, 2, 2, 2), (20, 5, 2, 2, 3), (18, 6, 3, 2, 2), (18, 3, 2, 2, 4),
                (24, 6, 2, 3, 2), (15, 3, 2, 2, 3)]


@pytest.mark.parametrize("n,npt,k,m,D", CLOSED_CASES)
def test_closed_line_bound_never_exceeds_brute_force_and_proofs_agree_with_it(n, npt, k, m, D):
    """Closed lines with more ToRs than D: the DP tries every state at the wrap boundary (block T-1 to block 0)
    and closes the path on it.  Valid because every placement of the block ILP (exact here, more ToRs than D) is
    one such closed path; brute force enumerates ring sets that wrap (``brute.ring_sets``) independently.
    The ToRs are rotated against position 0 so that the wrap boundary is not always the circle's seam."""
    rng = random.Random(n * 7 + npt * 3 + D)
    checked = 0
    for _ in range(8):
        faults = rng.sample(range(n), rng.randint(0, 3))
        healthy = np.ones(n, bool)
        healthy[faults] = False
        tor = (np.arange(n) + rng.randint(0, npt - 1)) // npt % (n // npt)
        line = line_from_arrays(healthy, tor, k, 1, True)
        job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
        blocks = block_structure(line, m)
        if job is None or blocks is None or blocks.T <= D:
            continue
        best = brute_force(line, job)
        unit, _, _ = unit_costs([job], 1)
        pb = packed_bound(blocks, D, job.count)
        assert pb is not None and pb.bound * unit <= best + 1e-9
        res = orchestrate_line(line, [Job(tp=m, dp=D, dp_bytes=1.0)], options=SolveOptions(time_limit=30))
        assert res.status == "optimal" and res.traffic.cross_bytes == pytest.approx(best, abs=1e-9)
        checked += 1
    assert checked >= 3


def test_closed_line_with_no_more_tors_than_d_gets_no_line_bound():
    # a straddle item may run around the whole circle there: not a path of the DP, so no bound is claimed
    line = line_from_arrays(np.ones(16, bool), np.arange(16) // 8, 2, 1, True)
    blocks = block_structure(line, 2)
    assert blocks is not None and blocks.T == 2
    assert line_bound(blocks, 3, 2) is None and packed_bound(blocks, 3, 2) is None


def test_a_restricted_ilp_optimum_above_the_bound_is_reported_feasible():
    """bounded._proved: a restricted ILP's own "optimal" (optimal for its smaller problem) must not survive when
    its placement does not reach the line-DP bound: the status is "feasible" with the gap against the bound."""
    from solvers.orchestrator.bounded import _proved
    from solvers.orchestrator.result import OrchestrationResult
    from solvers.orchestrator.traffic import TrafficReport
    from solvers.pulp_adapter import SolveReport

    line = make_line(16, 4, 2, [])
    rep = SolveReport("optimal", "highs", True, 10.0, None, 0.0, 0.1, "Optimal", termination="gap_limit")
    res = OrchestrationResult("optimal", "ilp", "blocks", line.space, [], None,
                              TrafficReport(20.0, 0.0, 10.0, 0.0, ()), rep, 1.0, termination="gap_limit")
    out = _proved(res, 9, 1.0, "proved")
    assert out.status == "feasible" and out.report.status == "feasible"
    assert out.report.bound == 9 and out.report.gap == pytest.approx(0.1) and "proved" not in out.notes
    res.report = rep
    out = _proved(res, 10, 1.0, "proved")
    assert out.status == "optimal" and out.report.gap == 0.0 and "proved" in out.notes


@pytest.mark.parametrize("seed", range(8))
def test_choice_arrays_are_the_combos_that_fit(seed):
    """The vectorised choices of a ToR are exactly :func:`_combos`' rows with free capacity >= 0, in order
    (the plain generator is the reference), on the block view and on the three-block view of short blocks."""
    from solvers.orchestrator.line_bound import _choice_arrays
    from solvers.orchestrator.three_blocks import three_block_view
    rng = random.Random(seed)
    n, npt, k, m, D = rng.choice([(40, 8, 2, 2, 3), (48, 8, 2, 3, 4), (60, 10, 3, 2, 5), (16, 2, 3, 4, 3),
                                  (18, 3, 3, 5, 2), (20, 4, 3, 4, 3)])
    line = make_line(n, npt, k, rng.sample(range(n), rng.randint(0, 4)))
    blocks = block_structure(line, m, allow_short=True)
    if blocks is None:
        pytest.skip("no block view for this draw")
    views = [(blocks, tor_options)]
    if not blocks.exact:
        three = three_block_view(blocks, line.space.healthy, line.space.tor)
        if three is None:
            pytest.skip("no three-block view for this draw")
        views = [three]
    for view, options_of in views:
        for t in range(view.T):
            opts = options_of(view, t, D)
            rows = [r for r in _combos(view, t, opts, D) if r[5] >= 0]
            ids: dict = {}
            ch = _choice_arrays(view, t, opts, D, lambda s: ids.setdefault(s, len(ids)))
            states = {i: s for s, i in ids.items()}
            assert [tuple(int(i) for i in r if i >= 0) for r in ch.idx] == [r[0] for r in rows]
            assert [states[i] for i in ch.si] == [r[1] for r in rows]
            assert [states[i] for i in ch.so] == [r[2] for r in rows]
            assert list(ch.cost) == [r[3] for r in rows] and list(ch.emit) == [r[6] for r in rows]
            assert list(ch.free) == [r[5] for r in rows] and list(ch.rings) == [r[4] + r[5] for r in rows]


def test_a_restricted_ilps_own_optimum_is_not_stated_as_the_problems(monkeypatch):
    """The restricted ILP's bound holds for its options only.  With the line-DP bound weakened by one unit
    (still a valid bound), the restricted ILP's placement reaches the full block ILP's optimum (proven
    here) but not the weakened bound: it must come back ``feasible`` with the gap to that bound, never
    ``optimal`` on the restricted model's own proof."""
    import dataclasses

    import solvers.orchestrator.bounded as bounded
    line, job, rep = line_with_proven_block_optimum()
    real = bounded.packed_bound

    def weakened(*a, **kw):
        pb = real(*a, **kw)
        return dataclasses.replace(pb, bound=pb.bound - 1)

    monkeypatch.setattr(bounded, "packed_bound", weakened)
    unit, _, _ = unit_costs([job], 1)
    res = orchestrate_line(line, [Job(tp=3, dp=5, dp_bytes=1.0)], options=SolveOptions(time_limit=60,
                                                                                       gap_rel=0.2))
    cost = res.traffic.cross_bytes / unit
    assert res.report.bound <= rep.objective - 1 + 1e-6
    if cost > res.report.bound + 1e-6:
        assert res.status == "feasible" and res.report.status == "feasible"
        assert res.report.gap == pytest.approx((cost - res.report.bound) / cost)


@pytest.mark.parametrize("seed", range(4))
def test_tor_options_skip_early_exactly_the_options_that_do_not_fit(seed):
    """``tor_options`` no longer generates options taking more pure rings than the ToR holds: its list is
    the one generated without that limit (a ToR given room for any count) filtered afterwards, in order."""
    import dataclasses
    rng = random.Random(seed)
    n, npt, k, m, D = rng.choice([(64, 16, 2, 2, 8), (64, 16, 3, 4, 6), (48, 8, 2, 3, 5), (60, 10, 3, 2, 7)])
    line = make_line(n, npt, k, rng.sample(range(n), rng.randint(0, 5)))
    blocks = block_structure(line, m, allow_short=True)
    if blocks is None:
        pytest.skip("no block view for this draw")
    roomy = dataclasses.replace(blocks, cap=tuple({**c, (0, 0): 10 ** 6} for c in blocks.cap))
    for t in range(blocks.T):
        fmax = blocks.cap[t].get((0, 0), 0)
        assert tor_options(blocks, t, D) == [o for o in tor_options(roomy, t, D) if o.cons <= fmax]


@pytest.mark.parametrize("m,D,seed", [(2, 3, 0), (3, 5, 7), (2, 6, 2)])
@pytest.mark.parametrize("weaken", [0, 1])
def test_above_the_size_limit_the_full_ilp_is_skipped_and_the_answer_stays_truthful(monkeypatch, m, D, seed,
                                                                                     weaken):
    """With FULL_SEARCH_MAX_OPTIONS at 0 every model counts as too large: the answer is the restricted ILP's
    placement or the warm start, its bound the line-DP bound (never above the full block ILP's proven
    optimum), ``optimal`` only when its cost reaches that bound, and its gap the true one to it.  With the
    bound weakened by one unit (still valid) no placement reaches it: the skipped-search path is taken."""
    import dataclasses

    import solvers.orchestrator.bounded as bounded
    real = bounded.packed_bound
    monkeypatch.setattr(bounded, "packed_bound",
                        lambda *a, **kw: dataclasses.replace(real(*a, **kw), bound=real(*a, **kw).bound - weaken))
    rng = np.random.default_rng(seed)
    line = make_line(256, 16, 2, rng.choice(256, size=13, replace=False).tolist())
    job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
    blocks = block_structure(line, m)
    rep = solve_model(build_blocks_model(blocks, D, job.count, 1.0), SolveOptions(time_limit=120))
    assert rep.status == "optimal"
    monkeypatch.setattr(bounded, "FULL_SEARCH_MAX_OPTIONS", 0)
    unit, _, _ = unit_costs([job], 1)
    res = orchestrate_line(line, [Job(tp=m, dp=D, dp_bytes=1.0)], options=SolveOptions(time_limit=60))
    cost = res.traffic.cross_bytes / unit
    bound = res.report.bound
    assert bound <= rep.objective + 1e-6 and cost >= rep.objective - 1e-6
    assert (res.status == "optimal") == (cost <= bound + 1e-6)
    assert res.report.gap == pytest.approx(0.0 if cost <= bound + 1e-6 else (cost - bound) / cost)
    if weaken:
        assert res.status == "feasible" and res.report.status == "feasible"
    if res.status != "optimal":
        assert any("too large to search" in n for n in res.notes)
        assert res.termination in ("time_limit", "other_limit")



@pytest.mark.parametrize("closed", [False, True])
def test_without_the_line_bound_in_time_the_slot_bound_is_stated(monkeypatch, closed):
    """bounded.run_bounded when the line DP's first pass spends its share (seen on closed lines of short blocks,
    1,024 nodes k = 3 TP 64 x DP 8: 321 wrap states, 41 s): the slot bound of slot_bound.py is stated, not the
    trivial 0.  Checked against brute force (which shares nothing with either bound but the ring rule): the
    stated bound is > 0 here, never above the optimum, and the placement is a real one (never below it)."""
    import solvers.orchestrator.bounded as bounded
    from solvers.orchestrator.explicit_bounded import slot_bound
    from solvers.orchestrator.run import BudgetSpent

    def overrun(*a, **kw):
        raise BudgetSpent

    monkeypatch.setattr(bounded, "packed_bound", overrun)
    healthy = np.ones(15, bool)
    healthy[[4, 10]] = False
    line = line_from_arrays(healthy, np.arange(15) // 3, 2, 1, closed)  # 5 ToRs of 3 nodes, 2 faults
    job = Job(tp=2, dp=3, dp_bytes=1.0)
    fj = resolved(line, job)
    unit, _, _ = unit_costs([fj], 1)
    best = brute_force(line, fj)
    lb = slot_bound(line.space, fj)
    assert lb > 0 and lb * unit <= best + 1e-9
    res = orchestrate_line(line, [job], options=SolveOptions(time_limit=30), model="blocks")
    assert res.model.startswith("blocks") and res.report.bound >= min(lb * unit, res.report.objective) - 1e-9
    assert res.report.bound <= best + 1e-9 <= res.traffic.cross_bytes + 1e-9
    assert any("slot by slot" in note for note in res.notes)


@pytest.mark.parametrize("seed", range(4))
def test_closed_line_partial_pricing_reaches_the_same_bound(monkeypatch, seed):
    """packed_bound on a closed line prices the wrap states its master LP uses first and runs a full round (one
    pass per wrap state) only when they give no column.  The bound is taken on full rounds only and convergence
    is proved by one, so at convergence it is the same Lagrangian dual as pricing every wrap every round: checked
    against that, on lines where the partial rounds are used (counted)."""
    import solvers.orchestrator.line_bound as lbm
    rng = random.Random(seed)
    n, npt, k, m, D = [(192, 12, 2, 2, 12), (256, 16, 2, 4, 8), (160, 16, 3, 4, 6), (256, 16, 2, 4, 8)][seed]
    healthy = np.ones(n, bool)
    healthy[rng.sample(range(n), rng.randint(5, 14))] = False
    line = line_from_arrays(healthy, np.arange(n) // npt, k, 1, True)
    job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
    blocks = block_structure(line, m)
    assert blocks is not None and job is not None
    prep = lbm.prepare(blocks, D)
    assert len(prep.ends) > lbm.PARTIAL_PRICING_MIN_WRAPS
    real, partial = lbm.line_bound, []

    def counting(*a, **kw):
        partial.append(kw.get("wraps") is not None)
        return real(*a, **kw)

    monkeypatch.setattr(lbm, "line_bound", counting)
    fast = packed_bound(blocks, D, job.count, prepared=prep)
    assert sum(partial) >= 1 and partial.count(False) < len(partial)
    monkeypatch.setattr(lbm, "PARTIAL_PRICING_MIN_WRAPS", 10 ** 9)
    every = packed_bound(blocks, D, job.count, prepared=prep)
    assert fast.converged and every.converged
    assert fast.bound == every.bound


def test_partition_count_is_the_number_partitions_lists():
    """partition_count by the coin-change recurrence; partitions by enumeration: the same numbers (p(D) - 1)."""
    from solvers.orchestrator.line_bound import partition_count
    assert [partition_count(d) for d in range(2, 21)] == [len(partitions(d)) for d in range(2, 21)]
    assert partition_count(35) == 14_882 and partition_count(64) == 1_741_629  # p(35) - 1, p(64) - 1 (OEIS A000041)


def test_a_large_dp_size_never_lists_its_partitions(monkeypatch):
    """DP 64 (1.7 M partitions, which took 17 s and 1.1 GB before a 2 s limit was looked at): the master LP is
    not built, the bound is the zero-price line bound (valid: every price vector gives one, zero included)."""
    import solvers.orchestrator.line_bound as lbm

    def never(D):
        raise AssertionError(f"partitions({D}) listed")

    monkeypatch.setattr(lbm, "partitions", never)
    line = make_line(96, 16, 1, [5, 40, 41, 77])
    blocks = block_structure(line, 1)
    pb = lbm.packed_bound(blocks, 64, 1)
    assert pb is not None and pb.iterations == 0 and not pb.converged
    assert pb.bound == int(np.ceil(line_bound(blocks, 64, 1).bound - 1e-6))
    res = orchestrate_line(line, [Job(tp=1, dp=64, dp_bytes=1.0)], options=SolveOptions(time_limit=30))
    assert res.status in ("optimal", "feasible") and res.report.bound <= res.report.objective + 1e-9
