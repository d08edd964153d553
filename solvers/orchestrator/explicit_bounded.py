"""The explicit model told the slot-by-slot lower bound (any ToR wiring, one job, PP = 1).

Above :data:`~solvers.orchestrator.model.EXPLICIT_MAX_SLOTS` the explicit
model's own LP bound stays near 0 (issue 18).  Here the closed-form bound
of :mod:`solvers.orchestrator.slot_bound` is computed first (milliseconds);
the warm start is returned at once when it meets that bound
(``optimal``) or the requested relative gap (``feasible``, ``gap_limit``),
else the explicit model runs with what is left, told the bound
(``SolveOptions.known_bound``), so that the gap it states is never weaker.
The warm start is first improved by ring swaps between DP groups
(:mod:`solvers.orchestrator.regroup`), then, if the bound is not met, by
cutting the rings anew with the spare nodes elsewhere
(:mod:`solvers.orchestrator.retile`), grouped by exchanges and by the
pattern ILP of :mod:`solvers.orchestrator.pattern_grouping`; the cheaper
of the two is kept.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from solvers.orchestrator.jobs import Job
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.placement import Placement
from solvers.orchestrator.regroup import regroup
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.retile import retile
from solvers.orchestrator.run import Budget, run_ilp, warm_start_result
from solvers.orchestrator.slot_bound import ring_capacity_bound, tor_count_bound
from solvers.orchestrator.space import Line, SlotSpace
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveOptions, SolveReport, relative_gap

REGROUP_SHARE = 0.5  # of the time left: the exchange search (the explicit model rarely improves on it)
# Of the time left: the search over spare nodes (restarts while a whole run fits: solvers/orchestrator/retile.py),
# the explicit model the rest.  It was 0.5; at 58 s the explicit model never improved on the searched cut in six
# interleaved cases (256 nodes TP 8 x DP 4, 512 nodes TP 16 x DP 4 and TP 8 x DP 2, 1,024 nodes TP 8 x DP 4,
# TP 8 x DP 8, TP 32 x DP 4): the same cost, at the slot bound's gap, each after the whole limit
RETILE_SHARE = 0.85
RETILE_ALONE_SHARE = 0.9  # the same when the explicit model is too large to build: the search is all there is
TOL = 1e-6


def slot_bound(space: SlotSpace, job: Job) -> float:
    """The slot bound (slot crossings) of one job on a line, for any wiring, open or closed.

    The higher of :func:`~solvers.orchestrator.slot_bound.tor_count_bound` (each ToR's healthy node count)
    and :func:`~solvers.orchestrator.slot_bound.ring_capacity_bound` (how many rings can meet a ToR at one
    slot; ``space``'s slots in line order); milliseconds, valid for any placement of the job's rings, so it
    also floors the bound where a stronger one (the line DP) is not had in time.
    """
    m = job.tp // space.g
    per_tor = np.bincount(space.tor[space.healthy], minlength=space.n_tors)
    return max(tor_count_bound(per_tor, m, job.dp, job.count),
               ring_capacity_bound(space.tor, space.healthy, m, job.dp, job.count))


def with_slot_bound(res: OrchestrationResult, bound: float, unit: float) -> OrchestrationResult:
    """``res`` with ``bound`` (slot crossings) as a proven bound; ``optimal`` when its cost reaches it."""
    return with_bound(res, bound, unit, "slot bound", f"lower bound {bound:g} slot crossings from each ToR's "
                      "healthy nodes and ring capacity, slot by slot (solvers/orchestrator/slot_bound.py)")


def with_bound(res: OrchestrationResult, bound: float, unit: float, label: str, note: str) -> OrchestrationResult:
    """``res`` with ``bound`` (objective units: bytes / ``unit``) as a proven bound, named ``label`` in its notes
    and explained by ``note`` (added when the bound is positive); ``optimal`` when its cost reaches it."""
    if res.traffic is None or not unit:
        return res
    cost = res.traffic.cross_bytes / unit
    rep = res.report
    if rep is None or not rep.has_solution:
        rep = SolveReport("feasible", "-", True, cost, None, None, 0.0, res.termination or "-",
                          termination=res.termination or "other_limit")
    b = min(max(bound, rep.bound if rep.bound is not None else 0.0), rep.objective)
    optimal = rep.objective - b <= TOL * max(1.0, abs(rep.objective))
    res.report = replace(rep, bound=b, gap=relative_gap(rep.objective, b),
                         status="optimal" if optimal else rep.status)
    res.unit_bytes = unit
    if bound > 0:  # a bound of 0 is the trivial one, whatever proved it
        res.notes = [n.replace("with the trivial bound 0", f"with the {label} {bound:g}") for n in res.notes]
    if optimal:  # the termination is this placement's: proved by the bound, whatever stopped the search
        res.status, res.termination = "optimal", "optimal"
        res.report = replace(res.report, termination="optimal")
    if bound > 0:
        res.notes.append(note)
    return res


def run_explicit_bounded(line: Line, jobs: list[Job], greedy: Placement, options: SolveOptions, budget: Budget,
                         build, encode, extract, fits=lambda: True) -> OrchestrationResult:
    """The explicit orchestration of one PP = 1 job with the slot bound first (module docstring).

    ``fits()`` says whether the explicit model is small enough to build
    (:func:`solvers.orchestrator.model.explicit_model_fits`); when not, the
    search over spare nodes has nearly all the time and the model is skipped.
    """
    job = jobs[0]
    unit, _, _ = unit_costs(jobs, line.space.g)
    t1 = time.perf_counter()
    lb = slot_bound(line.space, job)
    t_bound = time.perf_counter() - t1
    # same rings, never dearer: a better incumbent for any wiring, within a share of the time left
    greedy = regroup(greedy, line.space, budget=budget.share(REGROUP_SHARE))
    warm = placement_traffic(greedy, line.space, jobs).cross_bytes / unit
    retiled = None
    solvable = warm <= lb + TOL or fits()
    if warm > lb + TOL:  # then other spare nodes, rings cut anew (solvers/orchestrator/retile.py)
        cut = retile(line, job, greedy, budget=budget.share(RETILE_SHARE if solvable else RETILE_ALONE_SHARE))
        if cut is not None:
            cost = placement_traffic(cut, line.space, jobs).cross_bytes / unit
            if cost < warm:
                retiled = (warm, cost)
                greedy, warm = cut, cost
    gap = relative_gap(warm, lb)
    if warm <= lb + TOL or (options.gap_rel > 0 and gap is not None and gap <= options.gap_rel):
        res = warm_start_result(line.space, jobs, greedy, "explicit",
                                "no solver needed, the warm start meets the slot bound (or the requested gap)",
                                budget.t0, 0.0, termination="optimal" if warm <= lb + TOL else "gap_limit")
    elif not solvable:
        res = warm_start_result(line.space, jobs, greedy, "-", "no exact model fits this request (the explicit "
                                "model would be too large to build in the time)", budget.t0, 0.0,
                                termination="other_limit")
    else:
        opts = replace(options, known_bound=max(lb, options.known_bound or 0.0))
        res = run_ilp(line.space, jobs, greedy, opts, budget, build, encode, extract)
    res = with_slot_bound(res, lb, unit)
    if retiled is not None:
        res.notes.append(f"warm start: spare nodes moved and rings cut anew by a seeded search, {retiled[0]:g} -> "
                         f"{retiled[1]:g} slot crossings (solvers/orchestrator/retile.py)")
    res.seconds.update(bound=t_bound, total=time.perf_counter() - budget.t0)
    return res
