"""Baselines: the obvious greedy, and a fault-unaware plan.

greedy
    Cut rings left to right over the healthy nodes (the maximum ring count,
    :func:`solvers.allocation.segments.line_blocks`), then fill instances
    with consecutive rings in line order: instance ``i`` takes the next
    ``dp * pp`` rings, stage ``p`` of it the ``p``-th run of ``dp`` of them.
    It uses as many GPUs as the ILP (the same maximum ring count) but does
    not look at ToRs.
fault-unaware
    Plan the same greedy on the fault-free line, then drop every ring that
    contains a faulty node and every instance that lost a ring: what a
    scheduler gets if it keeps its fault-free plan.
"""

from __future__ import annotations

import numpy as np

from solvers.orchestrator.jobs import Job
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.rings import max_rings
from solvers.orchestrator.space import Line


def fill_instances(rings: list[tuple[int, ...]], jobs: list[Job]) -> Placement:
    """Instances from consecutive rings, jobs in order (each job's ``dp`` and ``count`` resolved)."""
    instances = []
    i = 0
    for j, job in enumerate(jobs):
        D, P = job.dp, job.pp
        for _ in range(job.count):
            if i + D * P > len(rings):
                break
            stages = tuple(tuple(range(i + p * D, i + (p + 1) * D)) for p in range(P))
            instances.append(PlacedInstance(j, stages))
            i += D * P
    return Placement(tuple(rings), tuple(instances), tuple(range(i, len(rings))))


def greedy_placement(line: Line, jobs: list[Job]) -> Placement:
    """Rings cut left to right, instances filled in line order (module docstring)."""
    m = jobs[0].tp // line.space.g
    return fill_instances(max_rings(line, m), jobs)


def tor_aware_placement(line: Line, jobs: list[Job]) -> Placement:
    """The greedy's rings, grouped by ToR signature: whole DP groups of identical rings first, then the rest.

    A warm start for the ILP (not a baseline).  A ring's *signature* is the
    ToR of each of its slots; a DP group (one stage of an instance) whose
    rings all share one signature moves no cross-ToR DP bytes (every TP
    rank's DP peers sit under one ToR), and consecutive such groups make the
    stages of an instance (with PP 1, whole instances).  On contiguous wiring those are the rings of
    one ToR; on interleaved wiring, rings whose starts differ by a multiple
    of the ToR count.  The leftover rings follow sorted by signature (on
    contiguous wiring: line order), so that neighbours share ToRs.  Same
    rings and instance count as :func:`greedy_placement`; one job only
    (several jobs: the greedy).
    """
    rings = max_rings(line, jobs[0].tp // line.space.g)
    if len(jobs) != 1:
        return fill_instances(rings, jobs)
    return group_by_signature(rings, line.space.tor, jobs[0])


def group_by_signature(rings: list[tuple[int, ...]], tor, job: Job) -> Placement:
    """``rings`` as instances of one job: whole DP groups of identical ToR signatures first, then the rest.

    The rule of :func:`tor_aware_placement` (its docstring), for any rings.

    Parameters
    ----------
    rings : list of tuple of int
        Slot ids of each ring, in rank order.
    tor : ndarray of int
        Dense ToR of each slot.
    job : Job
        ``dp``, ``pp`` and ``count`` resolved.
    """
    size = job.dp  # whole DP groups (stages) of identical rings; with PP 1 whole instances
    sigs = [tuple(int(tor[u]) for u in r) for r in rings]
    by_sig: dict[tuple[int, ...], list[int]] = {}
    for i, sg in enumerate(sigs):
        by_sig.setdefault(sg, []).append(i)
    whole = [i for idx in by_sig.values() for i in idx[:len(idx) - len(idx) % size]]
    taken = set(whole)
    rest = sorted((i for i in range(len(rings)) if i not in taken), key=lambda i: (sigs[i], i))
    return fill_instances([rings[i] for i in whole + rest], [job])


def fault_unaware_placement(line: Line, jobs: list[Job], plan_jobs: list[Job] | None = None) -> Placement:
    """The greedy plan of the fault-free line, minus every ring and instance a fault touches.

    Parameters
    ----------
    line : Line
        With its faults.
    jobs : list of Job
        For the accounting (bytes); ``plan_jobs`` (default ``jobs``) give the
        DP size and instance count planned on the fault-free line.
    """
    from dataclasses import replace

    plan_jobs = plan_jobs or jobs
    m = jobs[0].tp // line.space.g
    clean = replace(line, space=replace(line.space, healthy=np.ones(line.n, dtype=bool)))
    plan = fill_instances(max_rings(clean, m), plan_jobs)
    ok = line.space.healthy
    alive = [all(ok[u] for u in ring) for ring in plan.rings]
    keep = [inst for inst in plan.instances if all(alive[r] for r in inst.rings)]
    # renumber: keep only the rings that survive
    new_index = {}
    rings = []
    for r, ring in enumerate(plan.rings):
        if alive[r]:
            new_index[r] = len(rings)
            rings.append(ring)
    instances = tuple(PlacedInstance(inst.job, tuple(tuple(new_index[r] for r in st) for st in inst.stages))
                      for inst in keep)
    used = {r for inst in instances for r in inst.rings}
    return Placement(tuple(rings), instances, tuple(r for r in range(len(rings)) if r not in used))
