"""PP > 1 on ToR blocks: the line-DP bound of the DP groups alone, and their placement chained into pipelines.

A placement of one job of ``C`` instances, PP stages and DP size ``D``
holds ``C x PP`` DP groups of ``D`` rings; its cross-ToR bytes are those
of its DP groups (each stage's group all-reduces the stage's ``dp_bytes``,
priced exactly like a PP = 1 group) plus its PP send/recv bytes (>= 0).
So the least cost of the *surrogate* job (PP = 1, ``C x PP`` instances,
the same bytes per DP group) is a **valid lower bound**, and the
bound-driven block orchestration (:mod:`solvers.orchestrator.bounded`)
gives both that bound and a surrogate placement.  The surrogate's groups,
taken in line order, ``PP`` consecutive ones per instance, with the
replicas of consecutive stages matched to share the most ToRs, are a
placement of the real job; its PP bytes are what separates it from the bound, and the
result states that gap (``optimal`` only when it moves no PP byte across
ToRs and the surrogate is optimal).
"""

from __future__ import annotations

import time
from dataclasses import replace

from solvers.orchestrator.greedy import greedy_placement
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.space import Line
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveReport, relative_gap

TOL = 1e-9


def surrogate(job: Job) -> Job:
    """The PP = 1 job with one instance per DP group of ``job`` and the same bytes per group."""
    out = replace(job, pp=1, dp_bytes=job.bytes_dp, pp_bytes=job.bytes_pp, count=None)
    return out.with_layout(job.dp, job.count * job.pp)


def chain_stages(flat: Placement, pp: int, tor=None) -> Placement:
    """``flat``'s DP groups in line order, ``pp`` consecutive ones per instance (see the module docstring).

    With ``tor`` (dense ToR of each slot), replica ``r`` of each stage is matched to the replica of
    the stage before it that shares the most ToRs slot by slot (an assignment problem per stage
    boundary: the fewest PP bytes across ToRs for that choice of groups); else by line order.
    """
    first = lambda ring: min(flat.rings[ring])  # noqa: E731
    groups = sorted((tuple(sorted(inst.stages[0], key=first)) for inst in flat.instances),
                    key=lambda grp: first(grp[0]))
    instances = []
    for i in range(0, len(groups) - pp + 1, pp):
        stages = list(groups[i:i + pp])
        if tor is not None:
            for p in range(1, pp):
                stages[p] = _matched(stages[p - 1], stages[p], flat.rings, tor)
        instances.append(PlacedInstance(0, tuple(stages)))
    return Placement(flat.rings, tuple(instances), flat.spare)


def _matched(prev: tuple[int, ...], cur: tuple[int, ...], rings, tor) -> tuple[int, ...]:
    """``cur`` reordered so that replica ``r`` crosses ToRs at the fewest slots against ``prev[r]``."""
    import numpy as np
    from scipy.optimize import linear_sum_assignment

    a = np.array([[tor[u] for u in rings[r]] for r in prev])
    b = np.array([[tor[u] for u in rings[r]] for r in cur])
    cost = (a[:, None, :] != b[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    return tuple(cur[c] for _, c in sorted(zip(rows, cols)))


def run_pipelined(line: Line, job: Job, run_flat, t0: float) -> OrchestrationResult | None:
    """Bound and place ``job`` (PP > 1) through its surrogate; ``run_flat(jobs, greedy)`` orchestrates PP = 1.

    Returns None when the surrogate run has no placement (the caller then uses the explicit model).
    """
    flat_job = surrogate(job)
    flat = run_flat([flat_job], greedy_placement(line, [flat_job]))
    if flat.placement is None:
        return None
    placement = chain_stages(flat.placement, job.pp, line.space.tor)
    placement.check(line.space)
    traffic = placement_traffic(placement, line.space, [job])
    rep0 = flat.report
    known = rep0 is not None and rep0.has_solution and rep0.bound is not None
    bound = rep0.bound * flat.unit_bytes if known else 0.0  # the surrogate's bound in DP bytes (PP bytes >= 0)
    cost = traffic.cross_bytes
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
    res = OrchestrationResult(status, "ilp", flat.model + "-pp", line.space, [job], placement, traffic, rep, 1.0,
                              flat.model_stats, termination=rep.termination)
    res.notes = list(flat.notes) + [
        f"PP {job.pp}: bound = the line-DP bound of its {job.count * job.pp} DP groups alone (PP bytes >= 0); "
        f"placement = those groups chained into pipelines in line order ({traffic.pp_cross_bytes:.4g} PP bytes "
        "cross ToRs); solvers/orchestrator/pipelined.py"]
    res.seconds.update(flat.seconds)
    res.seconds["total"] = time.perf_counter() - t0
    return res
