"""A lower bound for several jobs that no exact joint model holds: each job on the line alone.

In any placement of the request, job ``j``'s ``C_j`` instances are a
placement of job ``j`` alone on the same faulty line (the same rings; the
other jobs only take nodes away).  So their cross-ToR bytes are at least job
``j``'s own lower bound, and the request costs at least the **sum** of the
jobs' own bounds: each the line-DP bound (:func:`~solvers.orchestrator.
line_bound.packed_bound`, on short blocks over the three-block view of
:mod:`~solvers.orchestrator.three_blocks`, which holds every ring) of its
``C_j x PP_j`` DP groups of ``D_j`` rings (PP bytes are >= 0), or, where the
line DP has no path or no time, the slot bound of
:mod:`~solvers.orchestrator.slot_bound` (any wiring).  Weighted by each job's
DP bytes per slot crossing, in the objective units of
:func:`~solvers.orchestrator.model_explicit.unit_costs`.

It is weak where the jobs would all take the same best ToRs alone, and
tight where one job fills most of the line.  Used where the several-job
block model does not apply (short blocks, several jobs with PP > 1 or off ToR
blocks) and the explicit model is too large to bound anything: there the
bound was the trivial 0.
"""

from __future__ import annotations

from dataclasses import replace

from solvers.orchestrator.explicit_bounded import slot_bound
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.line_bound import packed_bound
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.rings import block_structure
from solvers.orchestrator.run import BudgetSpent
from solvers.orchestrator.space import Line
from solvers.orchestrator.three_blocks import bounding_view


def job_alone_bound(line: Line, job: Job, budget=None) -> float:
    """Slot crossings no placement of ``job``'s DP groups (``C x PP`` of ``D`` rings) goes below, alone on ``line``.

    The line-DP bound where the line has ToR blocks (and time), else the slot bound; the larger when both.
    """
    groups = replace(job, pp=1).with_layout(job.dp, job.count * job.pp)
    lb = slot_bound(line.space, groups)
    m = job.tp // line.space.g
    blocks = block_structure(line, m, allow_short=True)
    if blocks is None:
        return lb
    bounding = bounding_view(blocks, line.space.healthy, line.space.tor)
    if bounding is None:
        return lb
    view, options_of = bounding
    try:
        pb = packed_bound(view, groups.dp, groups.count, budget=budget, options_of=options_of)
    except BudgetSpent:
        return lb
    return lb if pb is None else max(lb, float(pb.bound))


def separate_jobs_bound(line: Line, jobs: list[Job], budget=None) -> float:
    """The module docstring's bound of several jobs, in the objective units of ``unit_costs(jobs, g)``.

    Parameters
    ----------
    line : Line
    jobs : list of Job
        ``dp`` and ``count`` resolved (one TP size).
    budget : solvers.orchestrator.run.Budget, optional
        Shared by the jobs' line DPs; a job whose DP has no time left counts its slot bound.
    """
    _, dp_cost, _ = unit_costs(jobs, line.space.g)
    return sum(w * job_alone_bound(line, job, budget) for job, w in zip(jobs, dp_cost)
               if job.count > 0 and job.dp > 1 and w > 0)
