"""The block ILP driven by the line-DP lower bound: prove optimality by the bound, search only where it is needed.

For one job on exact ToR blocks of a line, open or closed (``blocks`` model; a
closed line's bound tries every state at its wrap boundary, :mod:`~solvers.orchestrator.line_bound`):

1. :func:`~solvers.orchestrator.line_bound.packed_bound` prices the pool
   packing by column generation over line paths: a valid lower bound
   ``LB`` (slot crossings), and the paths it priced.
2. A small block ILP with each ToR's options cut down to those of the
   priced paths (the master LP's paths of positive weight) only packs the
   pool; any solution of it is a placement.  When its cost equals ``LB`` it
   is **optimal for the whole problem**: the proof is the bound, not the
   restricted search.  (The warm start is checked first the same way.)
   One within the requested ``gap_rel`` of ``LB`` is returned at once as
   ``feasible`` with that gap (``termination`` ``gap_limit``).  The
   restricted ILP's own bound is never stated: it holds for its options
   only.  It gets :data:`RESTRICTED_SHARE` of the time left, or all of it
   when the full ILP would have more than :data:`FULL_SEARCH_MAX_OPTIONS`
   option columns (too many to search): step 3 is then skipped and the
   better of its placement and the warm start is returned, ``feasible``
   with the gap to ``LB``.
3. Otherwise the full block ILP runs with what the budget leaves,
   warm-started from the better of that placement and the warm start, and
   told ``LB`` (``SolveOptions.known_bound``): its reported bound is never
   below ``LB``, so the gap stated is the true one.

On short blocks (``Blocks.exact`` False: a ring could span three ToRs)
the bound comes from the view of :mod:`solvers.orchestrator.three_blocks`,
which holds those rings too, so it bounds every placement; the ILPs stay on
the rings within two blocks (their solutions are placements, their own
bounds are not used), and a placement of theirs that reaches the bound is
optimal all the same.

The slot bound of :mod:`solvers.orchestrator.slot_bound` (milliseconds) is checked first: a warm start
that meets it is returned at once (rings as long as a ToR, e.g. TP 64 on 16-node ToRs: every placement
costs the same, which the line DP of a closed line took 152 s not to prove).  Where no line-DP bound is
had (no three-block view, or its first pass spends its share of the time: a closed line of short blocks,
every wrap state tried), the slot bound is stated instead of the trivial 0.

Anything else (``blocks-single``: :mod:`~solvers.orchestrator.single_group`;
lines where a ring could hop over a whole block, the explicit model) goes
straight to :func:`solvers.orchestrator.run.run_ilp`.
"""

from __future__ import annotations

import time
from dataclasses import replace

from solvers.orchestrator.encode import encode_blocks
from solvers.orchestrator.explicit_bounded import slot_bound, with_slot_bound
from solvers.orchestrator.extract import extract_blocks
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.line_bound import PackedBound, packed_bound
from solvers.orchestrator.model_blocks import Option, build_blocks_model
from solvers.orchestrator.placement import Placement
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.rings import Blocks
from solvers.orchestrator.run import Budget, BudgetSpent, run_ilp, warm_start_result
from solvers.orchestrator.space import SlotSpace
from solvers.orchestrator.three_blocks import bounding_view
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveOptions, SolveReport, relative_gap

BOUND_SHARE = 0.6  # of the time limit: the bound's column generation (any bound it has by then is valid)
FIRST_BOUND_SHARE = 0.9  # of the time limit: the first line DP (no bound at all without it; the search can wait)
# Of the time left after the bound: the restricted ILP.  It stops by itself once it reaches the bound or the
# requested gap, or proves its own optimum (it solves in ms when it packs), so a large share costs the full ILP
# time only where the restricted ILP is still improving: 4,096 nodes k = 2 TP 8 x DP 16 (seed 1, a loaded
# machine) ended at 14.5 % with 0.25 and with 0.6 of the time (the full ILP did not improve on the warm start;
# given 20 s of wall, 7 s of CPU, the restricted ILP reached the bound: optimal).
RESTRICTED_SHARE = 0.8
# Above this many options (binary columns of the full block ILP, ~330k at 16,384 nodes k = 3 TP 16 x DP 8) the
# full ILP does not get past its root LP within a benchmark's limit (measured: it returned its warm start at a
# 13 % gap and 3.2 GB), while the restricted ILP over the priced paths' options (~25k columns there) reaches
# 0.1 % in ~30 s of CPU; given the time, HiGHS on that full model used 3.4 GB (the target is < 2 GB).  Above it
# the full ILP is not built: the restricted ILP gets all the time left, and its placement (or the warm start)
# is returned with the line-DP bound and the gap to it.
FULL_SEARCH_MAX_OPTIONS = 150_000
TOL = 1e-6


def _union_options(pb: PackedBound, m: int) -> list[list[Option]] | None:
    """Each ToR's options used by any priced path the block ILP can express (None: no such path).

    Paths through a ring spanning three blocks (a boundary key >= ``m``, :mod:`~solvers.orchestrator.
    three_blocks`) are left out: the block ILP has no such ring.
    """
    T = len(pb.paths[0].options)
    keep = [set() for _ in range(T)]
    plain = lambda o: (o.xl or 0) < m and (o.xr or 0) < m  # noqa: E731
    used = 0
    for p in pb.paths:
        if all(plain(p.options[t][i]) for t, idx in enumerate(p.choice) for i in idx):
            used += 1
            for t, idx in enumerate(p.choice):
                keep[t].update(idx)
    if not used:
        return None
    return [[pb.paths[0].options[t][i] for i in sorted(keep[t])] for t in range(T)]


def _close_enough(cost: float, bound: float, gap_rel: float) -> bool:
    """Whether a placement of ``cost`` is done: it reaches the bound, or is within the requested relative gap."""
    if cost <= bound + TOL:
        return True
    gap = relative_gap(cost, bound)
    return gap_rel > 0 and gap is not None and gap <= gap_rel


def _proved(res: OrchestrationResult, bound: int, unit: float, why: str) -> OrchestrationResult:
    """``res`` with ``bound`` (slot crossings) as its proven bound; optimal when its cost reaches it."""
    cost = res.traffic.cross_bytes / unit if unit else 0.0
    rep = res.report
    if rep is None or not rep.has_solution:
        rep = SolveReport("feasible", "-", True, cost, None, None, 0.0, res.termination or "-",
                          termination=res.termination or "other_limit")
    b = max(float(bound), rep.bound if rep.bound is not None else 0.0)
    b = min(b, rep.objective)
    optimal = rep.objective - b <= TOL * max(1.0, abs(rep.objective))
    # not reaching the bound is "feasible" whatever a restricted ILP said of its own (smaller) problem
    rep = replace(rep, bound=b, gap=relative_gap(rep.objective, b), status="optimal" if optimal else "feasible")
    res.report = rep
    res.unit_bytes = unit
    res.notes = [n.replace("with the trivial bound 0", f"with the line-DP bound {bound}")
                 .replace("only the trivial bound 0 is proven", f"the line-DP bound {bound} (which holds rings "
                          "spanning three blocks) is proven") for n in res.notes]
    res.status = rep.status
    if optimal:
        res.notes.append(why)
    return res


def _finish(res: OrchestrationResult, pb: PackedBound, unit: float, note: str, t_bound: float,
            t0: float) -> OrchestrationResult:
    """``res`` with the line-DP bound as its proven bound (:func:`_proved`) and its times."""
    res = _proved(res, pb.bound, unit, note)
    res.seconds.update(bound=t_bound, total=time.perf_counter() - t0)
    return res


def run_bounded(space: SlotSpace, jobs: list[Job], greedy: Placement, options: SolveOptions, budget: Budget,
                blocks: Blocks, unit_bytes: float, build_full) -> OrchestrationResult:
    """The three steps of the module docstring (``build_full(budget)`` builds the full block ILP)."""
    job = jobs[0]
    D, C = job.dp, job.count
    warm = placement_traffic(greedy, space, jobs).cross_bytes / unit_bytes
    def full(start, opts):
        return run_ilp(space, jobs, start, opts, budget, build_full, encode_blocks, extract_blocks)

    lb0 = slot_bound(space, job)  # milliseconds; where rings are as long as a ToR it is every placement's cost

    def without_line_bound():
        # no line-DP bound (no view of the longer rings, or its first pass overran its share): the slot bound
        # (any ring shape, open or closed) is still proven, so the gap stated is never the trivial 1
        res = full(greedy, replace(options, known_bound=max(lb0, options.known_bound or 0.0)))
        return with_slot_bound(res, lb0, unit_bytes)

    if _close_enough(warm, lb0, options.gap_rel):
        res = warm_start_result(space, jobs, greedy, "blocks" if blocks.exact else "blocks-restricted",
                                "no solver needed, the warm start meets the slot bound (or the requested gap)",
                                budget.t0, 0.0, termination="optimal" if warm <= lb0 + TOL else "gap_limit")
        return with_slot_bound(res, lb0, unit_bytes)
    bounding = bounding_view(blocks, space.healthy, space.tor)
    if bounding is None:
        return without_line_bound()
    view, options_of = bounding
    t1 = time.perf_counter()
    try:
        pb = packed_bound(view, D, C, upper=warm, options_of=options_of, budget=budget.share(BOUND_SHARE),
                          first_budget=budget.share(FIRST_BOUND_SHARE))
    except BudgetSpent:
        pb = None
    t_bound = time.perf_counter() - t1
    if pb is None:
        return without_line_bound()
    note = (f"optimality proved by the line-DP lower bound ({pb.bound} slot crossings, {pb.iterations} pricing "
            "rounds; solvers/orchestrator/line_bound.py)")
    if _close_enough(warm, pb.bound, options.gap_rel):  # the warm start is within the gap asked for
        res = warm_start_result(space, jobs, greedy, "blocks" if blocks.exact else "blocks-restricted",
                                "no solver needed, the warm start meets the bound (or the requested gap)",
                                budget.t0, 0.0,
                                termination="optimal" if warm <= pb.bound + TOL else "gap_limit")
        return _finish(res, pb, unit_bytes, note, t_bound, budget.t0)
    best = greedy
    n_options = sum(len(o) for o in pb.paths[0].options)  # every ToR's options: the full ILP's option columns
    large = n_options > FULL_SEARCH_MAX_OPTIONS
    sub = budget.share(1.0 if large else RESTRICTED_SHARE)
    opts = _union_options(pb, blocks.m)
    res = None if opts is None else run_ilp(
        space, jobs, greedy, options, sub, lambda b: build_blocks_model(blocks, D, C, unit_bytes, b, options=opts),
        encode_blocks, extract_blocks)
    stopped = res.termination if res is not None else "other_limit"
    if (res is not None and res.placement is not None and res.traffic is not None and res.report is not None
            and res.report.has_solution):
        res.model = "blocks" if blocks.exact else "blocks-restricted"
        res.termination = "optimal"
        # the restricted model's own bound (and "optimal") holds for its options only, not for the whole
        # problem: drop them; _proved re-derives both from the line-DP bound
        res.report = replace(res.report, bound=None, gap=None, status="feasible")
        res.status = "feasible"
        cost = res.traffic.cross_bytes / unit_bytes
        if _close_enough(cost, pb.bound, options.gap_rel):
            res.termination = "optimal" if cost <= pb.bound + TOL else "gap_limit"
            return _finish(res, pb, unit_bytes, note, t_bound, budget.t0)
        if cost < warm:
            best = res.placement
            if large:
                res.termination = "time_limit" if stopped == "time_limit" else "other_limit"
                res.notes.append(f"the full block ILP ({n_options} option columns) is too large to search: the "
                                 "restricted ILP's placement is returned with the line-DP bound")
                return _finish(res, pb, unit_bytes, note, t_bound, budget.t0)
    if large:
        res = warm_start_result(space, jobs, greedy, "blocks" if blocks.exact else "blocks-restricted",
                                f"the full block ILP ({n_options} option columns) is too large to search and the "
                                "restricted ILP did not improve on the warm start", budget.t0, 0.0,
                                termination="time_limit" if stopped == "time_limit" else "other_limit")
        return _finish(res, pb, unit_bytes, note, t_bound, budget.t0)
    res = full(best, replace(options, known_bound=float(pb.bound)))
    return _finish(res, pb, unit_bytes, note, t_bound, budget.t0)
