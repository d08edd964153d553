"""PP > 1 on ToR blocks: a bound that counts the PP bytes no placement avoids, and the DP groups chained into pipelines.

A placement of one job of ``C`` instances, PP stages and DP size ``D``
holds ``C x PP`` DP groups of ``D`` rings; its cross-ToR bytes are those
of its DP groups (each stage's group all-reduces the stage's ``dp_bytes``,
priced exactly like a PP = 1 group) plus its PP send/recv bytes (>= 0).

* Bound: the larger of two valid lower bounds.  The least cost of the
  *surrogate* job (PP = 1, ``C x PP`` instances, the same bytes per DP
  group), from the bound-driven block orchestration
  (:mod:`solvers.orchestrator.bounded`), counts no PP byte.  The line DP of
  :mod:`solvers.orchestrator.pp_bound` adds to each ToR the PP links that
  its groups' slots under it force across ToRs (a ToR whose pure groups
  cannot all pipeline among themselves, or whose groups' slot counts
  differ), at the item prices of the surrogate's Lagrangian bound.
* Placement: the surrogate's groups, chained into instances by
  :mod:`solvers.orchestrator.stage_chains` (PP = 2: the minimum-weight
  perfect matching of the groups, replicas matched by assignment; PP > 2:
  a local search).

The result states the gap between the two (``optimal`` only when the
placement meets the bound).
"""

from __future__ import annotations

import time
from dataclasses import replace

from solvers.orchestrator.greedy import greedy_placement
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.three_blocks import bounding_view
from solvers.orchestrator.line_bound import packed_bound, prepare
from solvers.orchestrator.pp_bound import pp_line_bound
from solvers.orchestrator.rings import block_structure
from solvers.orchestrator.run import Budget, BudgetSpent
from solvers.orchestrator.space import Line
from solvers.orchestrator.stage_chains import chain_groups
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveReport, relative_gap

TOL = 1e-9


def surrogate(job: Job) -> Job:
    """The PP = 1 job with one instance per DP group of ``job`` and the same bytes per group."""
    out = replace(job, pp=1, dp_bytes=job.bytes_dp, pp_bytes=job.bytes_pp, count=None)
    return out.with_layout(job.dp, job.count * job.pp)


def chain_stages(flat: Placement, pp: int, tor=None, job: int = 0) -> Placement:
    """The DP groups of job ``job`` in ``flat`` chained into instances of ``pp`` stages (of that job).

    With ``tor`` (dense ToR of each slot), :func:`solvers.orchestrator.stage_chains.chain_groups` chooses the
    groups of each instance and the replica matching at the fewest PP bytes across ToRs; else the groups are
    taken in line order, ``pp`` consecutive ones per instance.  Other jobs' instances are left out.
    """
    first = lambda ring: min(flat.rings[ring])  # noqa: E731
    groups = sorted((tuple(sorted(inst.stages[0], key=first)) for inst in flat.instances if inst.job == job),
                    key=lambda grp: first(grp[0]))
    if tor is not None:
        chains = chain_groups(groups, pp, flat.rings, tor)
    else:
        chains = [tuple(groups[i:i + pp]) for i in range(0, len(groups) - pp + 1, pp)]
    instances = tuple(PlacedInstance(job, tuple(stages)) for stages in chains)
    return Placement(flat.rings, instances, flat.spare)


def leftover_bound(line: Line, job: Job, budget: Budget) -> float | None:
    """:func:`solvers.orchestrator.pp_bound.pp_line_bound` of ``job`` on ``line`` (bytes), None where it has none.

    None also when the budget runs out (the surrogate's bound then stands alone).
    """
    g, D = line.space.g, job.dp
    unit = g * 2.0 * (D - 1) / D * job.bytes_dp
    blocks = block_structure(line, job.tp // g, allow_short=True)
    if blocks is None or D < 2 or line.closed:  # pp_line_bound's DP runs from one end of an open line
        return None
    bounding = bounding_view(blocks, line.space.healthy, line.space.tor)
    if bounding is None:
        return None
    view, options_of = bounding
    C = job.count * job.pp
    try:
        prep = prepare(view, D, budget, options_of)
        prices = packed_bound(view, D, C, budget=budget, options_of=options_of, prepared=prep)
        if prices is None:
            return None
        rows: dict = {}
        return max(pp_line_bound(view, D, C, job.pp, unit, g * job.bytes_pp, budget, options_of, prices.prices,
                                 scheme, prep, rows) for scheme in ("pure", "spread", "ends"))  # three valid bounds
    except BudgetSpent:
        return None


def run_pipelined(line: Line, job: Job, run_flat, t0: float, time_limit: float | None = None
                  ) -> OrchestrationResult | None:
    """Bound and place ``job`` (PP > 1) through its surrogate; ``run_flat(jobs, greedy)`` orchestrates PP = 1.

    ``time_limit`` (seconds from ``t0``) also bounds the PP-aware bound of :func:`leftover_bound`.

    Returns None when the surrogate run has no placement (the caller then uses the explicit model).
    """
    flat_job = surrogate(job)
    flat = run_flat([flat_job], greedy_placement(line, [flat_job]))
    if flat.placement is None:
        return None
    placement = chain_stages(flat.placement, job.pp, line.space.tor)
    t1 = time.perf_counter()
    pp_bound = leftover_bound(line, job, Budget(t0, time_limit))
    t_pp = time.perf_counter() - t1
    note = (f"PP {job.pp}: bound = the larger of the line-DP bound of its {job.count * job.pp} DP groups alone "
            f"(PP bytes >= 0) and the line DP that also charges each ToR the PP bytes of a leftover pure group "
            f"({'none' if pp_bound is None else f'{pp_bound:.6g} B'}; solvers/orchestrator/pp_bound.py); "
            "placement = those groups chained into pipelines ({pp_cross:.4g} PP bytes cross ToRs; "
            "solvers/orchestrator/stage_chains.py)")
    res = _chained_result(line, [job], flat, placement, pp_bound, note, t0)
    res.seconds["pp_bound"] = t_pp
    return res


def run_pipelined_jobs(line: Line, jobs: list[Job], run_flat, t0: float) -> OrchestrationResult | None:
    """Several jobs, some with PP > 1: each through its surrogate, all on one PP = 1 run, then chained per job.

    ``run_flat(jobs)`` orchestrates jobs of PP = 1.  The bound is that run's (a valid lower bound: every
    placement of the request is one of the surrogates' with the same DP groups, plus PP bytes >= 0); the
    one-job PP-aware line DP (:func:`leftover_bound`) is not carried over to several jobs.

    Returns None when the run has no placement (the caller then uses the explicit model).
    """
    flat_jobs = [surrogate(j) if j.pp > 1 else j for j in jobs]
    flat = run_flat(flat_jobs)
    if flat.placement is None:
        return None
    kept = [inst for inst in flat.placement.instances if jobs[inst.job].pp == 1]
    chained = [inst for i, j in enumerate(jobs) if j.pp > 1
               for inst in chain_stages(flat.placement, j.pp, line.space.tor, job=i).instances]
    placement = Placement(flat.placement.rings, tuple(sorted(kept + chained, key=lambda inst: inst.job)),
                          flat.placement.spare)
    staged = ", ".join(f"{j.name} PP {j.pp} ({j.count * j.pp} DP groups)" for j in jobs if j.pp > 1)
    note = (f"several jobs with PP > 1 ({staged}): bound = the several-job bound of their DP groups alone "
            "(PP bytes >= 0); placement = each job's groups chained into pipelines ({pp_cross:.4g} PP bytes cross "
            "ToRs; solvers/orchestrator/stage_chains.py)")
    return _chained_result(line, jobs, flat, placement, None, note, t0)


def _chained_result(line: Line, jobs: list[Job], flat: OrchestrationResult, placement: Placement,
                    pp_bound: float | None, note: str, t0: float) -> OrchestrationResult:
    """The result of ``placement`` (``flat``'s DP groups chained) against ``flat``'s bound and ``pp_bound`` (bytes).

    ``note`` is a format string with ``{pp_cross}``, the PP bytes the chaining puts across ToRs.
    """
    placement.check(line.space)
    traffic = placement_traffic(placement, line.space, jobs)
    rep0 = flat.report
    known = rep0 is not None and rep0.has_solution and rep0.bound is not None
    bound = rep0.bound * flat.unit_bytes if known else 0.0  # the surrogate's bound in DP bytes (PP bytes >= 0)
    if pp_bound is not None:
        bound = max(bound, pp_bound)  # both are valid lower bounds
    cost = traffic.cross_bytes
    bound = min(bound, cost)  # a lower bound above the cost of a placement can only be rounding
    optimal = cost <= bound + TOL * max(1.0, cost)
    gap = 0.0 if optimal else relative_gap(cost, bound)
    status = "optimal" if optimal else "feasible"
    # the surrogate's termination describes the PP = 1 run, not this placement: optimal only when the chained
    # placement meets the bound; a time limit the surrogate hit stays one; otherwise the chaining (which does
    # not search further) is what stopped
    if optimal:
        termination = "optimal"
    elif flat.termination == "time_limit":
        termination = "time_limit"
    else:
        termination = "other_limit"
    rep = SolveReport(status, rep0.solver if rep0 else "-", True, cost, bound, gap, rep0.seconds if rep0 else 0.0,
                      rep0.raw_status if rep0 else "-", termination=termination)
    model = "pp" if flat.model == "-" else flat.model + "-pp"  # "-": the surrogate needed no model (its warm start)
    res = OrchestrationResult(status, "ilp", model, line.space, list(jobs), placement, traffic, rep, 1.0,
                              flat.model_stats, termination=rep.termination)
    # the surrogate's "optimality proved" is the PP = 1 run's: it proves this placement only when it meets the
    # bound (as api._several drops the merged job's)
    # and its other notes are about those DP groups alone ("the warm start meets the slot bound" beside a gap of
    # 0.9 % read as a contradiction): said so
    kept = [n for n in flat.notes if optimal or not n.startswith("optimality proved")]
    res.notes = [f"DP groups placed as a PP = 1 job: {'; '.join(kept)}"] * bool(kept) + [
        note.format(pp_cross=traffic.pp_cross_bytes)]
    res.seconds.update(flat.seconds)
    res.seconds["total"] = time.perf_counter() - t0
    return res
