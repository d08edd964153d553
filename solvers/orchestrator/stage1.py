"""Stage 1 of the orchestration: the most GPUs in complete instances (instance counts per job).

Shared by the k-hop pipeline (:mod:`solvers.orchestrator.api`) and the other
architectures (:mod:`solvers.orchestrator.domains`); it depends on neither.
"""

from __future__ import annotations

from fabric.errors import FabricError
from solvers.orchestrator.jobs import Job


def check_jobs(jobs: list[Job], g: int, gpus: int) -> None:
    """Raise :class:`FabricError` unless every job's TP is a whole number of ``g``-GPU slots, fits, and all TPs agree."""
    if not jobs:
        raise FabricError("jobs", "give at least one job")
    for j in jobs:
        if j.tp % g:
            raise FabricError("tp", f"{j.tp} must be a multiple of gpus_per_node={g}: a ring takes whole nodes")
        if j.tp > gpus:
            raise FabricError("tp", f"{j.tp} exceeds the {gpus} GPUs of the fabric")
    if len({j.tp for j in jobs}) > 1:
        raise FabricError("jobs", "all jobs must have the same TP size (mixed ring sizes are not supported)")


def _fixed(jobs: list[Job]) -> list[Job]:
    """The jobs of a fixed DP size and instance count."""
    return [j for j in jobs if j.count is not None and j.dp is not None]


def fixed_rings(jobs: list[Job]) -> int:
    """TP groups (rings) the jobs' fixed instance counts take: DP x PP x count of each."""
    return sum(j.dp * j.pp * j.count for j in _fixed(jobs))


def check_fixed_counts(jobs: list[Job], fault_free_rings: int) -> None:
    """Raise :class:`FabricError` (field ``count``) when the jobs' fixed instance counts need more TP groups
    than the fabric forms with no fault at all: bad input whatever the faults (exit 2 at the command line),
    where counts that only the faults make too large are an ``infeasible`` answer."""
    fixed = _fixed(jobs)
    need = fixed_rings(jobs)
    if need > fault_free_rings:
        terms = " + ".join(f"{j.dp} x {j.pp} x {j.count}" for j in fixed)
        raise FabricError("count", f"the fixed instance counts need {need} TP groups of {jobs[0].tp} GPUs (DP x PP "
                                   f"x count: {terms}); the fabric forms at most {fault_free_rings} even with no "
                                   "faulty node")


def resolve_jobs(jobs: list[Job], rings: int, healthy_gpus: int) -> list[Job] | None:
    """Stage 1: the most GPUs in complete instances, given ``rings`` rings of one size.

    Fixed counts are served first (None when they do not fit: infeasible);
    the one job of ``dp=None`` (at most one; every other job then has a
    count) then takes every ring left (``left // pp`` replicas); else the
    jobs with ``count=None`` share the rest so that the most rings are used
    (an unbounded knapsack over instance sizes; ties go to earlier jobs).

    Raises
    ------
    FabricError
        Two jobs of ``dp=None``, one beside a job of ``count=None``, or a single job of which not even one
        instance fits.
    """
    out = list(jobs)
    if sum(j.dp is None for j in jobs) > 1:  # each would take every ring: they could never both be placed
        raise FabricError("dp", "at most one job may take dp=max (every ring the others leave); give the others a "
                                "DP size")
    loose = [j for j in jobs if j.dp is not None and j.count is None]
    if loose and any(j.dp is None for j in jobs):
        # both would take as many rings as fit: the dp=max job took them all and the other was dropped in silence
        # (help: "the jobs without a count share what is left"); the request must say how many the other gets
        raise FabricError("dp", f"a dp=max job takes every ring the fixed counts leave, so every other job needs a "
                                f"count ({loose[0].name!r} has none)")
    fixed = fixed_rings(out)
    if fixed > rings:
        return None
    for i, j in enumerate(out):
        if j.dp is None:
            D = max(rings - fixed, 0) // j.pp
            if D < 1:
                left = f"{rings - fixed} left of {rings}" if fixed else f"{rings}"
                raise FabricError("dp", f"not one DP replica fits: {left} TP groups of {j.tp} GPUs on "
                                          f"{healthy_gpus} healthy GPUs, PP {j.pp} needs {j.pp}")
            out[i] = j.with_layout(D, 1)
    need = fixed_rings(out)  # every DP size is resolved by now
    if need > rings:
        return None
    free = rings - need
    flex = [i for i, j in enumerate(out) if j.count is None]
    counts = _knapsack([out[i].dp * out[i].pp for i in flex], free)
    for i, c in zip(flex, counts):
        out[i] = out[i].with_layout(out[i].dp, c)
    if len(out) == 1 and out[0].count == 0:
        j = out[0]
        raise NoInstanceFits("dp", f"DP x TP x PP = {j.dp} x {j.tp} x {j.pp} = {j.dp * j.tp * j.pp} GPUs does not "
                                  f"fit: the {healthy_gpus} healthy GPUs form {rings} TP groups of {j.tp}")
    return out


class NoInstanceFits(FabricError):
    """Not one instance of the job fits on the healthy GPUs (a request of as many as fit, and none does).

    A :class:`FabricError` (exit 2, naming ``--dp``) for one orchestration; a table over fault ratios
    records it as a cell where no job fits (:func:`solvers.orchestrator.table.cross_tor_table`).
    """


def _knapsack(sizes: list[int], cap: int) -> list[int]:
    """Counts maximising sum(count * size) <= cap; among optima the lexicographically largest counts."""
    if not sizes:
        return []
    best = [0] * (cap + 1)  # best[c]: most rings usable with capacity c
    for c in range(1, cap + 1):
        best[c] = max([best[c - s] + s for s in sizes if s <= c] + [0])
    counts, c = [0] * len(sizes), cap
    target = best[cap]
    while target > 0:
        for i, s in enumerate(sizes):
            if s <= c and best[c - s] + s == target and best[c - s] == target - s:
                counts[i] += 1
                c -= s
                target -= s
                break
        else:  # pragma: no cover - best[] guarantees a predecessor
            break
    return counts
