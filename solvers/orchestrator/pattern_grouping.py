"""The DP groups of one fixed cut, by an ILP over signature patterns (any ToR wiring, one job, PP = 1).

Rings with the same ToR *signature* (the ToR of each rank slot) are
interchangeable, so a grouping of a cut is a count per *pattern*: a
multiset of ``D`` signatures, priced as :func:`~solvers.orchestrator.regroup.group_cost`
prices a group (``phi`` summed over the slots: the distinct ToRs at the
slot, 0 when one).  Listing every multiset is out of reach (88 signatures
at 1,024 interleaved nodes, TP 16 x DP 4), so two kinds of columns are
offered:

* **explicit patterns**: every multiset whose distinct signatures are
  connected by *sharing* (two signatures share when they have the same ToR
  at some slot), a single signature included; priced exactly;
* **generic groups**: ``D`` rings made of *blocks* by a partition of
  ``D`` into ``t >= 2`` parts, each block a sharing-connected multiset of
  that many rings, priced by its *open cost* (the distinct ToRs summed over
  the slots, a lone ToR counted 1).  At each slot the group's distinct ToRs
  are at most the sum of its blocks', so a generic group never costs more
  than its price, and exactly that when its blocks share nothing.

Every grouping is expressible (a group is the union of its sharing
components: one component is an explicit pattern, several a generic group
priced at its cost), and every solution is a grouping whose true cost is
at most the model's, so the model's optimum, when the ILP proves it, is the
best grouping of the cut.  The groups returned are priced by their
signatures.  It proves nothing about other cuts; it is the last step of the
warm-start search of :mod:`solvers.orchestrator.retile`, where on the
benchmark's interleaved line it groups the searched cut for 134 slot
crossings (602 multisets, 0.11 s) where the exchange search of
:mod:`solvers.orchestrator.regroup` stops at 148.
"""

from __future__ import annotations

import math
import time
from collections import Counter, defaultdict

import pulp

from solvers.orchestrator.line_bound import partitions
from solvers.orchestrator.regroup import group_cost
from solvers.pulp_adapter import SolveOptions, solve

MAX_PATTERNS = 50_000  # explicit patterns; above it the caller keeps its own grouping (measured: 602 on the benchmark)
TIME_LIMIT = 5.0  # seconds for the patterns and the ILP (measured: 0.13 s on the benchmark's cut)


def pattern_grouping(sigs: list[tuple[int, ...]], D: int, time_limit: float = TIME_LIMIT) -> list[list[int]] | None:
    """Rings ``0 .. len(sigs) - 1`` in groups of ``D`` (module docstring).

    Parameters
    ----------
    sigs : list of tuple of int
        Each ring's ToR signature; ``len(sigs)`` a multiple of ``D``.
    D : int
        Rings per DP group (>= 2).
    time_limit : float
        Seconds for listing the patterns and solving the ILP.

    Returns
    -------
    list of list of int or None
        Ring indices per group; None when the patterns exceed :data:`MAX_PATTERNS`, the time runs out or no
        solution is found.
    """
    if D < 2 or not sigs or len(sigs) % D:
        return None
    t0 = time.perf_counter()
    count = Counter(sigs)
    multisets = _connected_multisets(sorted(count), count, D, t0 + time_limit)
    if multisets is None:
        return None
    patterns = [p for p in multisets if len(p) == D]
    blocks = [p for p in multisets if len(p) < D]
    prob = pulp.LpProblem("pattern_grouping", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x{i}", 0, None, cat="Integer") for i in range(len(patterns))]
    y = [pulp.LpVariable(f"y{i}", 0, None, cat="Integer") for i in range(len(blocks))]
    shapes = partitions(D)  # generic group shapes: block counts per size 1 .. D-1
    shape = [pulp.LpVariable(f"g{i}", 0, None, cat="Integer") for i in range(len(shapes))]
    prob += (pulp.lpSum(group_cost(list(p)) * v for p, v in zip(patterns, x))
             + pulp.lpSum(_open_cost(b) * v for b, v in zip(blocks, y)))
    uses = defaultdict(list)
    for p, v in zip(patterns + blocks, x + y):
        for t, k in Counter(p).items():
            uses[t].append(k * v)
    for t in sorted(count):
        prob += pulp.lpSum(uses[t]) == count[t]
    for j in range(1, D):  # blocks of j rings chosen = parts of size j the generic groups hold
        prob += (pulp.lpSum(v for b, v in zip(blocks, y) if len(b) == j)
                 == pulp.lpSum(sh[j] * v for sh, v in zip(shapes, shape)))
    left = time_limit - (time.perf_counter() - t0)
    if left <= 0:
        return None
    rep = solve(prob, SolveOptions(time_limit=left, objective_step=1.0))
    if not rep.has_solution:
        return None
    return _groups(sigs, patterns, x, blocks, y, shapes, shape)


def _open_cost(block: tuple) -> int:
    """Distinct ToRs summed over the slots, a lone ToR counted 1 (a block's share of a generic group)."""
    return sum(len(set(column)) for column in zip(*block))


def _connected_multisets(types, count, D: int, deadline: float = math.inf) -> list[tuple] | None:
    """Every multiset of at most ``D`` signatures (within their counts) whose distinct ones are connected by
    sharing; None above :data:`MAX_PATTERNS` or past ``deadline`` (``time.perf_counter`` seconds)."""
    by_slot = defaultdict(set)
    for t in types:
        for s, tor in enumerate(t):
            by_slot[s, tor].add(t)
    near = {t: sorted(set().union(*(by_slot[s, tor] for s, tor in enumerate(t))) - {t}) for t in types}
    order = {t: i for i, t in enumerate(types)}
    sets = set()
    # connected sets of at most D signatures, each grown from its least member (every connected set has a
    # spanning tree, so growing by neighbours of the set reaches it)
    frontier = [frozenset([t]) for t in types]
    while frontier:
        sets.update(frontier)
        grown = set()
        for s in frontier:
            if len(s) == D:
                continue
            low = min(order[t] for t in s)
            for t in s:
                for u in near[t]:
                    if u not in s and order[u] > low:
                        grown.add(s | {u})
                if len(sets) + len(grown) > MAX_PATTERNS:
                    return None
            if time.perf_counter() > deadline:
                return None
        frontier = [s for s in grown if s not in sets]
    patterns = []
    for s in sets:
        members = sorted(s)
        for mult in _multiplicities([count[t] for t in members], D):
            patterns.append(tuple(t for t, k in zip(members, mult) for _ in range(k)))
            if len(patterns) > MAX_PATTERNS or time.perf_counter() > deadline:
                return None
    return sorted(patterns)


def _multiplicities(caps: list[int], most: int, first: int = 0):
    """Every tuple ``k`` with ``1 <= k[i] <= caps[i]`` and ``sum(k) <= most``, for ``caps[first:]``.

    Only tuples that fit are generated (work in proportion to the output): writing sizes up to ``D`` as
    compositions and filtering by the counts took minutes at D = 16, where most signatures occur once or twice.
    """
    if first == len(caps):
        yield ()
        return
    later = len(caps) - first - 1  # each later member takes at least one
    for k in range(1, min(caps[first], most - later) + 1):
        for rest in _multiplicities(caps, most - k, first + 1):
            yield (k, *rest)


def _groups(sigs, patterns, x, blocks, y, shapes, shape) -> list[list[int]]:
    """Ring indices per group from the ILP's counts (a generic group's blocks drawn unlike each other first)."""
    rings = defaultdict(list)
    for i, s in enumerate(sigs):
        rings[s].append(i)
    groups = [[rings[t].pop() for t in p] for p, v in zip(patterns, x) for _ in range(round(v.value() or 0))]
    pool = defaultdict(list)  # block size -> blocks, one entry per block chosen
    for b, v in zip(blocks, y):
        pool[len(b)].extend([b] * round(v.value() or 0))
    for sh, v in zip(shapes, shape):
        for _ in range(round(v.value() or 0)):
            group, seen = [], set()
            for j in (size for size in range(len(sh) - 1, 0, -1) for _ in range(sh[size])):
                pick = next((b for b in pool[j] if not seen & set(b)), pool[j][0])
                pool[j].remove(pick)
                seen.update(pick)
                group.extend(rings[t].pop() for t in pick)
            groups.append(group)
    return groups
