"""Several jobs of different DP sizes on ToR blocks: a restricted ILP for a good start, then the full one.

The several-job block ILP (:mod:`~solvers.orchestrator.model_jobs`) has a
tight LP, but on 1,024 nodes HiGHS may spend the whole limit before it
improves on the greedy warm start.  So, as :mod:`~solvers.orchestrator.bounded`
does for one job, a small ILP restricted to a few options per ToR runs
first: those of the warm start (so that it is feasible) and those the LP
relaxation of the full model uses (its support, where the optimum usually
lies; on short blocks its whole optimal face).  Its solution is a
placement; the full ILP then starts from the
better of it and the warm start, told the LP's optimum as a bound (a valid
lower bound: the relaxation of an exact model), and its own bound gives the
status and gap.  Above :data:`JOBS_FULL_MAX_OPTIONS` option columns nothing is built: the warm
start is returned with the trivial bound (time and memory, measured at 8,192 and 16,384 nodes).

**Short blocks** (a ring may span three ToRs: TP 32 at k = 3, TP 64 at
k = 2 on 16-node ToRs).  The block model then leaves such rings out: every
solution is still a placement, but its optimum, LP and bound are those of a
restriction.  The proof comes instead from the same model on the three-block
view of :mod:`~solvers.orchestrator.three_blocks` (each ring over a whole
block a pass-through state, so that the view holds every placement, as it
does for one job's line DP): its LP optimum is a **valid lower bound**, and
the placement found is stated against it (model ``blocks-jobs-restricted``).
Measured at 1,024 nodes, k = 3, TP 32, jobs DP 4 x 5 and DP 2 filling the
rest: view LP 281.5 units against the best placement's 294.5 (the sum of each
job's own bound, used before, stated a 65 % gap).  Stronger, when time
allows: split the placements by whether a ring spans three ToRs.  Those that
have one cost at least the view's LP with such a ring forced (there 322.6:
they are dear), the others at least the restricted model's LP, then its
ILP's bound (its model holds exactly them), so the lower of the two bounds
every placement (there 281.5 -> 291.6 at the ILP's root, within 1 %).  The
restricted model's LP (smaller than the view's) gives the options for the
small ILP.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pulp

from solvers.orchestrator.bounded import _close_enough, _proved
from solvers.orchestrator.encode import encode_blocks
from solvers.orchestrator.explicit_bounded import with_bound
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.model_jobs import build_jobs_model, extract_jobs, job_options, used_options
from solvers.orchestrator.placement import Placement
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.rings import Blocks
from solvers.orchestrator.run import HANDOVER_SHARE, Budget, BudgetSpent, run_ilp, warm_start_result
from solvers.orchestrator.solve import solve_model
from solvers.orchestrator.space import SlotSpace
from solvers.orchestrator.three_blocks import covers_block
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveOptions

LP_SHARE = 0.4  # of the time left after the full build: the LP relaxation
ALONE_NOTE = ("lower bound {:g} units: each job's own line-DP (or slot) bound on the line alone, summed "
              "(solvers/orchestrator/jobs_bound.py)")
LP_PROOF = "the LP relaxation of the several-job block model (solvers/orchestrator/jobs_run.py)"
JOINT_NOTE = ("lower bound {:g} units: the several-job line DP along the ToR blocks (on short blocks their "
              "three-block view), its pools priced (solvers/orchestrator/jobs_line_bound.py)")
TOO_LARGE_NOTE = ("the several-job block ILP (more than {} option columns) is too large to search within the time "
                  "and memory limits")
VIEW_NOTE = ("lower bound {:g} units: the LP relaxation of the several-job block model on the three-block view, "
             "which holds rings spanning three ToRs (solvers/orchestrator/jobs_run.py)")
VIEW_SHARE = 0.5  # short blocks without the split bound, of the time left: the view's LP (the proof, the support)
# Short blocks: the split bound (the restricted model's LP, then the view's LP with a ring over three ToRs forced,
# this share of the time left) is tried only when SPANNING_COST times the restricted model's build time fits in that
# share; else the view's plain LP is the bound.  Measured at 1,024 nodes, k = 3, TP 32: DP 4 x 5 + DP 2, build 1.7 s,
# LP 2.6 s, the view 3.4 s to build + 5.5 s for the LP with the row; DP 8 x 3 + DP 4, build 4.7 s, LP 6.0 s, the view
# 8.2 + 22.8 s (too dear at 58 s: its plain LP, 8.2 + 12.3 s, is the bound there)
SPANNING_SHARE = 0.4
SPANNING_COST = 7.0
# SPLIT_START: the split bound needs the block ILP's own bound.  Started from a good placement, HiGHS restarts at once
# on the columns its reduced costs fix and begins its cut rounds anew each time; from the greedy it finishes them
# first.  1,024 nodes, k = 3, TP 32, DP 4 x 5 + DP 2, 58 s: seed 0 from the small ILP's 294.5 (the optimum), bound
# 284.3 after 38 s (3.5 %), without restarts 291.6 (0.98 %), from the greedy 291.7 (0.96 %); seed 1 from 302, with
# restarts 2.6 %, without 284.5 (5.2 %), from the greedy 296.9 (1.7 %, the small ILP's 302 kept).
RESTRICTED_SHARE = 0.3  # of the time left then: the restricted ILP
NONE_SPAN_NOTE = ("lower bound {:g} units: no placement has a ring spanning three ToRs (the LP of the three-block view "
                  "with one forced is infeasible), and the others cost at least {:g} (the block model's LP or ILP "
                  "bound: it holds every placement whose rings lie within two ToRs) (solvers/orchestrator/jobs_run.py)")
SPLIT_NOTE = ("lower bound {:g} units: placements with a ring spanning three ToRs cost at least {:g} (the LP of the "
              "three-block view with such a ring forced), the others at least {:g} (the block model's LP or ILP bound: "
              "it holds every placement whose rings lie within two ToRs) (solvers/orchestrator/jobs_run.py)")
# Above this many option columns the full several-job ILP is not built (as bounded.FULL_SEARCH_MAX_OPTIONS for
# one job).  Measured (5 % exact faults, k = 2, TP 16, jobs DP 8 x C/8, DP 4 x C/4 and DP 8 filling the rest, 60 s
# limit): 4,096 nodes, 187k columns, ended in time at 1.33 GiB and improved on the warm start; 8,192 nodes, 377k
# columns, ended after 88 s and 208 s at 2.15 GiB (HiGHS, given 11 s, ran 160 s on the full model); 16,384 nodes,
# 749k columns, spent the limit building it and reached 2.08 GiB to return the warm start with bound 0.
JOBS_FULL_MAX_OPTIONS = 200_000


def _relaxed(model, options: SolveOptions, budget: Budget):
    """The solve report of ``model``'s LP relaxation.

    The model is relaxed in place (its integer variables made continuous for this solve, then restored):
    building a copy would cost as much as the LP.
    """
    ints = [v for v in model.problem.variables() if v.cat == pulp.LpInteger]
    left = budget.remaining()
    try:
        for v in ints:
            v.cat = pulp.LpContinuous
        return solve_model(model, replace(options, gap_rel=0.0, known_bound=None,
                                          time_limit=None if left is None else max(left, 0.01)))
    finally:
        for v in ints:
            v.cat = pulp.LpInteger


def _lp_support(full, options: SolveOptions, budget: Budget, face: bool = False):
    """(LP optimum or None, per ToR its tagged options of positive LP value) of ``full``'s relaxation.

    With ``face``, the options on the LP's optimal face: those of positive value and those of zero reduced
    cost (the ones some other optimal LP solution may use), where the restricted ILP over them (and the warm
    start's) finds more.  Measured at 1,024 nodes, k = 3, TP 32 (short blocks): jobs DP 4 x 5 + DP 2, the
    positive ones alone led that ILP to 309.5 units, with the face it reached the optimum 294.5 in 3.6 s (5.9k
    of 32k options); DP 8 x 3 + DP 4, 562.2 in 15 s (9.4k of 80k), where the full ILP had ended at 576 in the
    whole limit.  On exact blocks the support alone does better (k = 3, TP 16 x (DP 8 x 10 + DP 4), seed 1:
    optimal in 18 s; with the face 1.5 % at 58 s): there it is not asked for.
    """
    rep = _relaxed(full, options, budget)
    lp = _lp_optimum(rep)
    if lp is None:
        return None, None
    opts = full.meta["options"]
    tol = rep.objective - lp

    def on_face(v) -> bool:
        return (v.varValue or 0.0) > 1e-6 or (face and v.dj is not None and v.dj <= tol)

    sup = [{opts[t][i] for i in range(len(opts[t])) if on_face(full.var["opt"][(t, i)])} for t in range(len(opts))]
    return lp, sup


def _lp_optimum(rep) -> float | None:
    """An LP solve's optimum less the LP solver's tolerance (a safe lower bound), or None when not optimal."""
    if rep.status != "optimal" or rep.objective is None:
        return None
    return rep.objective - 1e-6 * max(1.0, abs(rep.objective))


def count_options(blocks: Blocks, dps: list[int], budget: Budget) -> int:
    """The full model's option columns, counted ToR by ToR up to just above :data:`JOBS_FULL_MAX_OPTIONS`.

    Listing the options costs a fraction of building them into PuLP (3 s against 13-18 s at 377k), and the
    count stops once over the limit.  Raises :class:`BudgetSpent` when the budget runs out.
    """
    n = 0
    for t in range(blocks.T):
        budget.check()
        n += len(job_options(blocks, t, dps)[0])
        if n > JOBS_FULL_MAX_OPTIONS:
            break
    return n


def _view_model(bounding, dps: list[int], counts: list[int], weights: list[float], unit: float, budget: Budget):
    """The several-job model on the three-block view ``bounding`` = (view, options function); None when the
    budget runs out while it is built."""
    view, options_of = bounding
    try:
        return build_jobs_model(view, dps, counts, weights, unit, budget, options_of=options_of)
    except BudgetSpent:
        return None


def _spanning_lp(model, m: int, options: SolveOptions, budget: Budget) -> float | None:
    """A lower bound (objective units) over the placements with a ring spanning three ToRs; None: not found.

    Such a placement is a solution of the view's model (it holds every placement) that uses a pass-through
    option (:func:`~solvers.orchestrator.three_blocks.covers_block`) at some ToR, so the LP optimum of the
    model with at least one of them forced bounds it; ``inf`` when the LP is infeasible (no such placement
    fits).  Those rings cross two ToR boundaries and cost much: on the benchmark's short blocks this LP is
    9.5 % above the best placement (322.6 against 294.5 units), so that the restricted ILP, which holds every
    other placement, proves the rest.  The row is removed again after the solve.
    """
    opts = model.meta["options"]
    forced = [model.var["opt"][(t, i)] for t in range(len(opts)) for i, o in enumerate(opts[t]) if covers_block(o, m)]
    if not forced:
        return float("inf")
    row = "a_ring_spans_three_tors"
    model.problem += pulp.lpSum(forced) >= 1, row
    try:
        rep = _relaxed(model, options, budget)
    finally:
        del model.problem.constraints[row]
    return float("inf") if rep.status == "infeasible" else _lp_optimum(rep)


def run_jobs_blocks(space: SlotSpace, jobs: list[Job], greedy: Placement, options: SolveOptions, budget: Budget,
                    blocks: Blocks, unit: float, weights: list[float], bounding=None,
                    floor: float = 0.0, floor_note: str | None = None,
                    path_options: list[set] | None = None, converged: bool = False,
                    n_options: int | None = None) -> OrchestrationResult:
    """The steps of the module docstring (``weights``: objective units per slot crossing of each job).

    ``bounding``: on short blocks, the three-block view and its options function
    (:func:`~solvers.orchestrator.three_blocks.bounding_view`); the bound then comes from it, or from ``floor``
    (objective units, a lower bound proven otherwise, explained by ``floor_note``; default: the jobs' own
    bounds) where that is higher.  ``path_options``: per ToR, the options of the several-job line DP's paths
    (:mod:`~solvers.orchestrator.jobs_line_bound`); when the full block ILP is too large to build, the ILP over
    them is solved instead.  ``converged``: its pricing converged, so ``floor`` is at least the view's LP, which
    is then not solved, and those options are the restricted ILP's.  ``n_options``: the full model's option
    columns if counted already (:func:`count_options`).
    """
    dual_support = path_options if converged else None
    floor_note = ALONE_NOTE.format(floor) if floor_note is None else floor_note
    dps, counts = [j.dp for j in jobs], [j.count for j in jobs]
    kind = "blocks-jobs" if bounding is None else "blocks-jobs-restricted"
    warm = placement_traffic(greedy, space, jobs).cross_bytes / unit

    def warm_start(why: str, t_build: float, **kw) -> OrchestrationResult:
        # the warm start as the answer, with ``floor`` (0 when none was proven before) as its proven bound
        res = warm_start_result(space, jobs, greedy, kind, why, budget.t0, t_build, **kw)
        return res if floor <= 0 else with_bound(res, floor, unit, "proven bound", floor_note)

    if floor > 0 and _close_enough(warm, floor, options.gap_rel):
        return warm_start("no solver needed, the warm start meets the proven bound (or the requested gap)", 0.0,
                          termination="optimal" if warm <= floor + 1e-6 else "gap_limit")
    t1 = time.perf_counter()
    try:
        n_options = count_options(blocks, dps, budget) if n_options is None else n_options
    except BudgetSpent:
        return warm_start("time limit reached during the model build", time.perf_counter() - t1)
    if n_options > JOBS_FULL_MAX_OPTIONS:
        why = TOO_LARGE_NOTE.format(JOBS_FULL_MAX_OPTIONS)
        res = path_options and _on_path_options(space, jobs, greedy, options, budget, blocks, unit, weights,
                                                path_options, warm, (floor, floor_note, kind), why)
        return res or warm_start(why, time.perf_counter() - t1, termination="other_limit")
    try:
        full = build_jobs_model(blocks, dps, counts, weights, unit, budget)
    except BudgetSpent:
        return warm_start("time limit reached during the model build", time.perf_counter() - t1)
    t_build = time.perf_counter() - t1
    keep = used_options(full, encode_blocks(full, greedy))
    if bounding is None:
        lp_bound, sup, proof, spanning = _exact_block_bound(full, options, budget, floor, floor_note, dual_support)
    else:  # the restricted model's LP bounds a restriction only: the proof is the view's
        lp_bound, sup, proof, spanning = _short_block_bound(full, bounding, dps, counts, weights, unit, options,
                                                            budget, t_build, floor, floor_note, dual_support)
    if sup is not None:
        keep = [a | b for a, b in zip(keep, sup)]
    best = greedy
    small = _small_ilp(space, jobs, greedy, options, budget.share(RESTRICTED_SHARE), blocks, unit, weights, keep, warm)
    if small is not None:
        best = small.placement
        res = _proved_small(small, lp_bound, unit, kind, proof, options.gap_rel, bounding is not None)
        if res is not None:
            res.seconds.update(build=t_build, total=time.perf_counter() - budget.t0)
            return res
    # the full model is built already: keep back its hand-over time as run_ilp would (run.HANDOVER_SHARE)
    final = budget if budget.limit is None else Budget(budget.t0, budget.limit - HANDOVER_SHARE * t_build)
    if lp_bound is not None:  # the LP relaxation of the exact model bounds it from below
        options = replace(options, known_bound=max(lp_bound, options.known_bound or 0.0))
    # the split bound needs the block ILP's own bound: started from the greedy, not the small ILP's placement
    # (SPLIT_START), the cheaper of the two placements kept
    res = run_ilp(space, jobs, greedy if spanning is not None else best, options, final, lambda b: full,
                  encode_blocks, extract_jobs)
    if spanning is not None:
        res = _cheaper_of(res, best, space, jobs, unit)
    if bounding is None and lp_bound and _below(res, lp_bound):
        # HiGHS stopped before an incumbent or a bound of its own (4,096 nodes, TP 16 x (DP 8 x 20 + DP 4 x 200) at
        # 30 s: the warm start came back with the trivial bound 0, the line DP's 550 units lost): the bound
        # proven before the solve still holds
        res = with_bound(res, lp_bound, unit, "proven bound", proof)
    if bounding is not None:
        two = res.restriction_bound  # over the placements with every ring within two ToRs (the restricted ILP's)
        if spanning is not None and two is not None and min(spanning, two) > lp_bound:
            lp_bound = min(spanning, two)
            proof = _split_note(lp_bound, spanning, two)
        res = _restricted_proof(res, lp_bound, unit, proof)
    res.warm_start_unimproved = bool(res.traffic is not None and res.traffic.cross_bytes
                                     >= warm * unit * (1 - 1e-12))
    res.seconds["build"] = res.seconds.get("build", 0.0) + t_build
    return res


def _below(res: OrchestrationResult, bound: float) -> bool:
    """Whether ``res`` states less than ``bound`` (objective units) as its proven bound, or none."""
    rep = res.report
    return rep is None or not rep.has_solution or rep.bound is None or rep.bound < bound - 1e-9 * max(1.0, bound)


def _on_path_options(space: SlotSpace, jobs: list[Job], greedy: Placement, options: SolveOptions, budget: Budget,
                     blocks: Blocks, unit: float, weights: list[float], support: list[set], warm: float, proof,
                     why: str) -> OrchestrationResult | None:
    """The full block ILP too large to build: the ILP over the options of the line DP's paths (``support``, per
    ToR; where its pricing converged, at 1,024 nodes, it held the optimum, solved in 0.02-0.06 s), a restriction
    whose placements are placements, proved against ``proof`` = (floor, its note, model kind); None when it finds
    nothing cheaper than the warm start (cost ``warm``)."""
    floor, note, kind = proof
    small = _small_ilp(space, jobs, greedy, options, budget, blocks, unit, weights, support, warm)
    if small is None:
        return None
    small.notes.insert(0, f"{why}: the ILP over the options of the line DP's paths instead (a restriction)")
    return (_proved_small(small, floor, unit, kind, note, options.gap_rel, True)
            or _restricted_proof(small, floor, unit, note))


def _small_ilp(space: SlotSpace, jobs: list[Job], greedy: Placement, options: SolveOptions, budget: Budget,
               blocks: Blocks, unit: float, weights: list[float], keep: list[set],
               warm: float) -> OrchestrationResult | None:
    """The block ILP restricted to the options ``keep`` (per ToR), from the warm start; None when it finds nothing
    cheaper than the warm start (cost ``warm``, objective units)."""
    small = run_ilp(space, jobs, greedy, replace(options, gap_rel=max(options.gap_rel, 1e-4)), budget,
                    lambda b: build_jobs_model(blocks, [j.dp for j in jobs], [j.count for j in jobs], weights, unit,
                                               b, keep=keep),
                    encode_blocks, extract_jobs)
    if small.placement is None or small.traffic is None or small.traffic.cross_bytes >= warm * unit:
        return None
    return small


def _proved_small(small: OrchestrationResult, bound: float | None, unit: float, kind: str, proof: str,
                  gap_rel: float, restriction_notes: bool) -> OrchestrationResult | None:
    """The restricted ILP's answer ``small`` proved against ``bound`` (explained by ``proof``) when within
    ``gap_rel`` of it, as model ``kind``; its own bound, a restriction's, dropped (and said so in its notes with
    ``restriction_notes``); None when not that close."""
    cost = small.traffic.cross_bytes / unit
    if bound is None or not _close_enough(cost, bound, gap_rel):
        return None
    small.model = kind
    small.termination = "optimal" if cost <= bound + 1e-6 else "gap_limit"
    if small.report is not None:  # the restricted model's own bound does not bound the request
        small.report = replace(small.report, bound=None)
    if restriction_notes:
        small.notes = _not_the_requests(small.notes)
    return _proved(small, bound, unit, f"optimality proved: {proof}")


def _cheaper_of(res: OrchestrationResult, placement: Placement, space: SlotSpace, jobs: list[Job],
                unit: float) -> OrchestrationResult:
    """``res`` with ``placement`` as its answer when that costs less than its own (the ILP ran from another
    start); its bound is untouched."""
    traffic = placement_traffic(placement, space, jobs)
    if res.traffic is not None and traffic.cross_bytes >= res.traffic.cross_bytes:
        return res
    res.placement, res.traffic = placement, traffic
    if res.report is not None:
        res.report = replace(res.report, objective=traffic.cross_bytes / unit, has_solution=True)
    res.notes.append("the small ILP's placement is kept: cheaper than the block ILP's, which started from the "
                     "greedy so that its bound grows (solvers/orchestrator/jobs_run.py)")
    return res


def _split_note(bound: float, spanning: float, two: float) -> str:
    """The note of the split bound ``bound`` = min(``spanning``, ``two``)."""
    if spanning == float("inf"):
        return NONE_SPAN_NOTE.format(bound, two)
    return SPLIT_NOTE.format(bound, spanning, two)


def _exact_block_bound(full, options: SolveOptions, budget: Budget, floor: float, floor_note: str,
                       dual_support: list[set] | None):
    """(lower bound, support for the restricted ILP, the bound's note, None) on exact blocks: the LP relaxation of
    the block model ``full`` and its support, or ``floor`` where higher; with ``dual_support`` (the converged
    several-job DP, at least that LP) ``floor`` and those options, the LP not solved."""
    if dual_support is not None:
        return floor, dual_support, floor_note, None
    lp_bound, sup = _lp_support(full, options, budget.share(LP_SHARE))
    if floor > (lp_bound or 0.0):  # a several-job DP out of time before it converged may still be higher
        return floor, sup, floor_note, None
    return lp_bound, sup, LP_PROOF, None


def _short_block_bound(full, bounding, dps, counts, weights, unit, options: SolveOptions, budget: Budget,
                       t_build: float, floor: float, floor_note: str, dual_support: list[set] | None = None):
    """(lower bound over every placement, support for the restricted ILP, the bound's note, the spanning LP or
    None) on short blocks: the split bound when it looks affordable (:data:`SPANNING_COST`), else the view's plain
    LP; ``floor`` (explained by ``floor_note``) where higher.  ``full`` is the restricted model, built in
    ``t_build`` s.  With ``dual_support`` the view's LP could not beat ``floor``: it is not solved, and the
    support is the several-job DP's paths' options (measured at 1,024 nodes, k = 3, TP 32, DP 8 x 3 + DP 4: the
    small ILP over them and the warm start's solves in 0.04 s at the optimum 562.2, where the restricted model's
    LP face took 6 s for its LP and 5.5 s for the ILP)."""
    if dual_support is not None:
        return floor, dual_support, floor_note, None
    spanning = sup = two_lp = view = None
    left = budget.remaining()
    if left is None or SPANNING_COST * t_build <= SPANNING_SHARE * left:
        # split by a ring over three ToRs: the restricted model's LP bounds the placements without one (and gives
        # the support), the view's LP with one forced those with one
        two_lp, sup = _lp_support(full, options, budget.share(LP_SHARE), face=True)
        if two_lp is not None:
            share = budget.share(SPANNING_SHARE)
            view = _view_model(bounding, dps, counts, weights, unit, share)
            spanning = None if view is None else _spanning_lp(view, bounding[0].m, options, share)
    if spanning is not None:
        view_lp = min(spanning, two_lp)
    else:  # the view's plain LP: the proof (and the support), on the view built above if it was
        share = budget.share(VIEW_SHARE)
        view = view or _view_model(bounding, dps, counts, weights, unit, share)
        view_lp, view_sup = (None, None) if view is None else _lp_support(view, options, share, face=True)
        sup = sup or view_sup
    if view_lp is None or view_lp < floor:
        proof = floor_note
    else:
        proof = VIEW_NOTE.format(view_lp) if spanning is None else _split_note(view_lp, spanning, two_lp)
    return max(view_lp or 0.0, floor), sup, proof, spanning


def _restricted_proof(res: OrchestrationResult, bound: float, unit: float, note: str) -> OrchestrationResult:
    """The restricted model's run with its own bound (a restriction's) replaced by ``bound`` (explained by
    ``note``)."""
    res.model = "blocks-jobs-restricted"
    if res.traffic is None:
        return res
    if res.report is not None and res.report.has_solution:
        res.report = replace(res.report, bound=None, gap=None, status="feasible")
    res.status = "feasible"
    res.notes = _not_the_requests([n for n in res.notes if not n.startswith("optimality proved")])
    if res.termination == "optimal":
        res.termination = "other_limit"  # the restriction was solved, not the request
    return with_bound(res, bound, unit, "proven bound", note)


def _not_the_requests(notes: list[str]) -> list[str]:
    """The restricted model's notes, its own bound said to be a restriction's (the proof follows in a later note)."""
    return [n.replace("only the trivial bound 0 is proven", "its bound is not the request's (below)") for n in notes]
