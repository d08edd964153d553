"""Several jobs in one request, reduced to one job where that is exact (or a valid bound).

All jobs share one TP size (:func:`solvers.orchestrator.stage1.check_jobs`),
so they compete for the same rings.  Two reductions:

* **Jobs with no instance.** Stage 1 may give a job 0 instances (the
  knapsack of :func:`~solvers.orchestrator.stage1.resolve_jobs` fills the
  rings with the earlier job when both fit the same rings).  Such a job moves
  no byte; the request is the others'.
* **Equal DP sizes, PP = 1.** Instances of every job are then DP groups of
  the same ``D`` rings; job ``j``'s group of ``c`` slot crossings costs
  ``w_j c`` bytes (``w_j`` its bytes per crossing).  Merged into one job of
  ``sum C_j`` groups with ``w = min_j w_j``, every placement of the request
  is a placement of the merged job costing no more; so the merged job's
  proven bound is a **valid bound** of the request, and equal to its optimum
  when every ``w_j`` is equal (the merged optimum, its groups dealt out in
  any way, costs the same).  With unequal ``w_j`` the merged placement's
  groups are dealt cheapest-first to the jobs of the largest ``w_j`` (the
  best assignment of those groups, by exchange) and the gap is stated
  against the bound.

Jobs of different DP sizes, and those of one DP size but unequal buffers (where the merged bound is loose: two
jobs of DP 4, one of PP 2 placed through its DP groups at half the other's bytes per group, gave a 21 % gap),
go to the several-job block model where there are ToR blocks (``api._jobs_blocks``); the merge is kept for
unequal buffers off blocks.  PP > 1 goes through each job's DP groups first (``api._several_pipelined``).
"""

from __future__ import annotations

from dataclasses import replace

from solvers.orchestrator.jobs import Job
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.traffic import placement_traffic


def live(jobs: list[Job]) -> list[int]:
    """Indices of the jobs with at least one instance."""
    return [i for i, j in enumerate(jobs) if j.count > 0]


def mergeable(jobs: list[Job], exact: bool = False) -> bool:
    """Whether the jobs are two or more of one DP size, all PP = 1 (the second reduction).

    With ``exact``, also of one DP buffer (so of one cost per crossing): the merge is then exact, not a bound.
    """
    if not (len(jobs) > 1 and all(j.pp == 1 for j in jobs) and len({j.dp for j in jobs}) == 1):
        return False
    return not exact or len({j.bytes_dp for j in jobs}) == 1


def merged_job(jobs: list[Job], g: int) -> Job:
    """One job of every instance, at the least bytes per slot crossing of them (module docstring)."""
    _, dpc, _ = unit_costs(jobs, g)
    cheapest = jobs[min(range(len(jobs)), key=lambda i: dpc[i])]
    out = replace(cheapest, name="+".join(j.name for j in jobs))
    return out.with_layout(cheapest.dp, sum(j.count for j in jobs))


def deal(placement: Placement, space, jobs: list[Job], merged: Job) -> Placement:
    """The merged placement's groups dealt to ``jobs``: the fewest crossings to the most bytes per crossing."""
    g = space.g
    _, dpc, _ = unit_costs(jobs, g)
    cost = [placement_traffic(Placement(placement.rings, (inst,)), space, [merged]).cross_bytes
            for inst in placement.instances]
    groups = sorted(range(len(cost)), key=lambda i: cost[i])
    order = sorted(range(len(jobs)), key=lambda j: -dpc[j])
    out = []
    it = iter(groups)
    for j in order:
        for _ in range(jobs[j].count):
            out.append(PlacedInstance(j, placement.instances[next(it)].stages))
    return Placement(placement.rings, tuple(out), placement.spare)


def relabel(placement: Placement, index: list[int]) -> Placement:
    """A placement of a sub-request with its job numbers mapped back (``index[i]``: the request's job)."""
    inst = tuple(PlacedInstance(index[p.job], p.stages) for p in placement.instances)
    return Placement(placement.rings, inst, placement.spare)
