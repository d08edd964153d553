"""Brute force for tiny lines: every non-crossing ring set and every grouping (the tests' ground truth).

It shares nothing with the ILPs but the ring rule: rings are enumerated
without dominance, ring sets without aggregation, groupings exhaustively
(memoised on the multiset of ToR signatures, which is all a cost depends
on), and costs follow the definitions of :mod:`solvers.orchestrator.traffic`.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import combinations, permutations

import numpy as np

from solvers.orchestrator.jobs import Job
from solvers.orchestrator.space import Line


def all_rings(line: Line, m: int) -> list[tuple[tuple[int, ...], int, int]]:
    """Every ring as (slots in hop order, span start, span length)."""
    n, k, closed, ok = line.n, line.k, line.closed, line.space.healthy
    out = []

    def grow(path):
        if len(path) == m:
            out.append((tuple(p % n for p in path), path[0], path[-1] - path[0] + 1))
            return
        for nxt in range(path[-1] + 1, path[-1] + k + 1):
            if (closed and nxt - path[0] >= n) or (not closed and nxt >= n):
                break
            if ok[nxt % n]:
                grow(path + [nxt])

    for s in range(n):
        if ok[s]:
            grow([s])
    return out


def ring_sets(line: Line, m: int, size: int):
    """Yield every set of ``size`` rings with pairwise disjoint spans (lists of slot tuples)."""
    n = line.n
    rings = all_rings(line, m)
    linear = [r for r in rings if r[1] + r[2] <= n]
    by_start: dict[int, list] = {}
    for r in linear:
        by_start.setdefault(r[1], []).append(r)

    def rec(pos, stop, chosen):
        if len(chosen) == size:
            yield list(chosen)
            return
        if pos >= stop:
            return
        yield from rec(pos + 1, stop, chosen)
        for r in by_start.get(pos, ()):
            if r[1] + r[2] <= stop:
                chosen.append(r[0])
                yield from rec(r[1] + r[2], stop, chosen)
                chosen.pop()

    if not line.closed:
        yield from rec(0, n, [])
        return
    # circle: either no ring covers position 0 ... (then it is the line 1..n-1 with 0 free, or rings from 0)
    yield from rec(0, n, [])
    # ... or exactly one ring's span wraps past position n-1 -> 0
    for r in rings:
        if r[1] + r[2] > n:
            end = (r[1] + r[2]) % n  # first free position after the wrap
            yield from rec(end, r[1], [r[0]])


def _dp_cost(sigs, job: Job, g: int) -> float:
    D = len(sigs)
    if D < 2:
        return 0.0
    per = g * 2.0 * (D - 1) / D * job.bytes_dp
    total = 0
    for s in range(len(sigs[0])):
        t = len({sg[s] for sg in sigs})
        total += t if t > 1 else 0
    return total * per


def _pp_cost(a, b, job: Job, g: int) -> float:
    return sum(x != y for x, y in zip(a, b)) * g * job.bytes_pp


def instance_cost(sigs: tuple, job: Job, g: int) -> float:
    """Cheapest arrangement of ``D * P`` rings (signatures) into P stages of D replicas."""
    D, P = job.dp, job.pp
    if P == 1:
        return _dp_cost(list(sigs), job, g)
    best = float("inf")
    seen = set()
    for perm in permutations(sigs):
        grid = tuple(tuple(perm[p * D:(p + 1) * D]) for p in range(P))
        key = tuple(tuple(sorted(zip(*grid))))  # pipelines as a multiset
        if key in seen:
            continue
        seen.add(key)
        c = sum(_dp_cost(list(st), job, g) for st in grid)
        c += sum(_pp_cost(grid[p][r], grid[p + 1][r], job, g) for p in range(P - 1) for r in range(D))
        best = min(best, c)
    return best


def best_grouping(sigs: list[tuple], job: Job, g: int) -> float:
    """Least cost of splitting the ring signatures into ``count`` instances (all rings used)."""
    size = job.dp * job.pp

    @lru_cache(maxsize=None)
    def rec(rest: tuple) -> float:
        if not rest:
            return 0.0
        best = float("inf")
        for members, remain in _instances_with_first(rest, size):
            best = min(best, instance_cost(members, job, g) + rec(remain))
        return best

    return rec(tuple(sorted(sigs)))


def brute_force(line: Line, job: Job) -> float:
    """Least cross-ToR bytes over every placement of ``job.count`` instances (``dp`` resolved), or inf if none."""
    g = line.space.g
    m = job.tp // g
    tor = line.space.tor
    need = job.dp * job.pp * job.count
    memo: dict[tuple, float] = {}
    best = float("inf")
    for rs in ring_sets(line, m, need):
        key = tuple(sorted(tuple(int(tor[u]) for u in r) for r in rs))
        if key not in memo:
            memo[key] = best_grouping(list(key), job, g)
        best = min(best, memo[key])
    return best


def brute_force_jobs(line: Line, jobs: list[Job], keep=None) -> float:
    """Least cross-ToR bytes over every placement of several jobs (``dp`` and ``count`` resolved), or inf.

    Every ring set of ``sum D_j P_j C_j`` rings, and every way to deal its rings into the jobs' instances;
    with ``keep`` (a predicate on a ring set, a list of slot tuples), only the ring sets it accepts.
    """
    g = line.space.g
    m = jobs[0].tp // g
    tor = line.space.tor
    need = sum(j.dp * j.pp * j.count for j in jobs)

    @lru_cache(maxsize=None)
    def rec(rest: tuple, counts: tuple) -> float:
        if not rest:
            return 0.0 if not any(counts) else float("inf")
        best = float("inf")
        for j, job in enumerate(jobs):
            if not counts[j]:
                continue
            left = counts[:j] + (counts[j] - 1,) + counts[j + 1:]
            for members, remain in _instances_with_first(rest, job.dp * job.pp):
                best = min(best, instance_cost(members, job, g) + rec(remain, left))
        return best

    counts = tuple(j.count for j in jobs)
    best = float("inf")
    seen = set()
    for rs in ring_sets(line, m, need):
        if keep is not None and not keep(rs):
            continue
        key = tuple(sorted(tuple(int(tor[u]) for u in r) for r in rs))
        if key not in seen:
            seen.add(key)
            best = min(best, rec(key, counts))
    return best


def _instances_with_first(rest: tuple, size: int):
    """Each distinct instance of ``size`` signatures that holds ``rest[0]``, and the signatures it leaves.

    Instances are multisets: mates equal as tuples are tried once (``rest`` sorted keeps them so).
    """
    first, others = rest[0], rest[1:]
    tried = set()
    for idx in combinations(range(len(others)), size - 1):
        mates = tuple(others[i] for i in idx)
        if mates in tried:
            continue
        tried.add(mates)
        yield (first,) + mates, tuple(x for i, x in enumerate(others) if i not in idx)


def line_from_arrays(healthy, tor, k: int, g: int = 1, closed: bool = False) -> Line:
    """A synthetic :class:`Line` for tests (slot ``i`` holds GPUs ``i*g .. i*g+g-1``)."""
    from solvers.orchestrator.space import SlotSpace

    healthy = np.asarray(healthy, dtype=bool)
    n = healthy.size
    tor_ids, dense = np.unique(np.asarray(tor, dtype=np.int64), return_inverse=True)
    gpus = np.arange(n * g, dtype=np.int64).reshape(n, g)
    space = SlotSpace(gpus, dense.astype(np.int64), tor_ids, np.arange(n, dtype=np.int64), healthy)
    return Line(space, int(k), bool(closed))


def brute_force_fixed(sigs: list[tuple[int, ...]], job: Job, g: int = 1) -> float:
    """Least cross-ToR bytes choosing ``job.count`` instances among fixed TP groups (their ToR signatures)."""
    need = job.dp * job.pp * job.count
    best = float("inf")
    seen = set()
    for idx in combinations(range(len(sigs)), need):
        key = tuple(sorted(sigs[i] for i in idx))
        if key in seen:
            continue
        seen.add(key)
        best = min(best, best_grouping(list(key), job, g))
    return best
