"""Chaining given DP groups into pipelines at the fewest PP bytes across ToRs.

A PP > 1 placement built from the DP groups of its PP = 1 surrogate
(:mod:`solvers.orchestrator.pipelined`) still chooses which ``PP`` groups
form one instance, in which stage order, and which replica of one stage
feeds which replica of the next.  Its DP bytes do not depend on that
choice; its PP bytes do (:mod:`solvers.orchestrator.traffic`: a TP rank
whose two stage GPUs sit under different ToRs sends all of ``pp_bytes``
across).

* Between two groups, the replica matching of least cost is an assignment
  problem on the mismatched slots of each pair of rings
  (:func:`link_cost`).
* PP = 2: the instances are a perfect matching of the groups, and the one of
  least total link cost is a minimum-weight perfect matching (blossom
  algorithm, ``networkx``), exact over the candidate pairs: every group
  with the ``WINDOW`` groups after it in line order, which always holds the
  line-order pairing, so a perfect matching exists.  Above ``CHUNK``
  groups (4,096 nodes and more) it is matched chunk by chunk along the
  line, exact within each.
* PP > 2: the cheapest of three starts: pure groups (all slots under one
  ToR) chained ``PP`` at a time inside their ToR (links of cost 0) and
  the rest, in line order, ``PP`` consecutive ones per instance; the
  line-order chaining; and, when ``PP`` is a power of 2, groups matched
  into pairs, pairs into fours, ... (each level a minimum-weight perfect
  matching over line-order neighbours, paths joined end to end the
  cheapest way).  Then groups are swapped between chains near each other
  in line order while that lowers the PP links, each chain in its best
  stage order (a local search: no optimality is claimed for it).  The
  matching start took 1,024 nodes TP 8 x DP 2 x PP 4 from 1.37 % to
  1.06 % above its bound, TP 8 x DP 4 x PP 4 from 0.53 % to 0.34 %,
  TP 8 x DP 2 x PP 8 from 8.6 % to 4.1 %; 4,096 nodes TP 8 x DP 2 x PP 4
  from 1.43 % to 0.96 % (3.4 -> 8.0 s), 16,384 nodes from 1.29 % to
  0.90 % (18 -> 27 s).

Within an instance the replica matching is chosen stage boundary by stage
boundary (optimal for PP = 2, where there is one boundary).
"""

from __future__ import annotations

from itertools import permutations

import numpy as np

WINDOW = 12  # candidate partners per group in line order (the matchings of PP = 2 and PP a power of 2)
CHUNK = 256  # groups (or paths) per matching, even: 1,024 nodes never have more than 256 groups (TP 8 x DP 2)


def _ring_tors(rings, tor) -> list[np.ndarray]:
    return [np.asarray([tor[u] for u in ring]) for ring in rings]


def _assign(a, b, rt) -> tuple[int, tuple[int, ...]]:
    """Least mismatched slots between groups ``a`` and ``b``, and ``b`` reordered to attain it."""
    from scipy.optimize import linear_sum_assignment

    A = np.stack([rt[r] for r in a])
    B = np.stack([rt[r] for r in b])
    cost = (A[:, None, :] != B[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(cost)
    return int(cost[rows, cols].sum()), tuple(b[c] for _, c in sorted(zip(rows, cols)))


def link_cost(a, b, rings, tor) -> int:
    """Slots (TP slot positions) at which the best replica matching of groups ``a`` -> ``b`` crosses ToRs."""
    return _assign(a, b, _ring_tors(rings, tor))[0]


def _matched(n: int, weight, window: int) -> list[tuple[int, int]] | None:
    """A minimum-weight perfect matching of items ``0 .. n - 1`` (``n`` even, in line order) over the pairs
    ``i < j < i + 1 + window``, ``weight(i, j)`` each, chunk by chunk of :data:`CHUNK` items along the line (the
    blossom algorithm is cubic: 16,384 nodes, 7,800 groups of TP 8 x DP 2 in one PP = 2 matching, took 110 s of
    a 58 s limit); exact over those pairs when ``n <= CHUNK``.  Pairs ``(i, j)``, ``i < j``, in order of ``i``;
    None when a chunk has no perfect matching among its pairs."""
    import networkx as nx

    out = []
    for lo in range(0, n, CHUNK):  # CHUNK and n are even: each chunk can be matched
        hi = min(n, lo + CHUNK)
        G = nx.Graph()
        G.add_nodes_from(range(lo, hi))
        for i in range(lo, hi):
            for j in range(i + 1, min(hi, i + 1 + window)):
                G.add_edge(i, j, weight=weight(i, j))
        match = nx.min_weight_matching(G)
        if 2 * len(match) != hi - lo:
            return None
        out += sorted((min(e), max(e)) for e in match)
    return out


def _pairs(groups, rt, window: int) -> list[tuple[tuple[int, ...], ...]]:
    """PP = 2: the minimum-weight perfect matching over line-order neighbours (module docstring)."""
    pairs = _matched(len(groups), lambda i, j: _assign(groups[i], groups[j], rt)[0], window)
    if pairs is None:  # cannot happen (line-order pairs are candidates); keep the line order
        return [(groups[i], groups[i + 1]) for i in range(0, len(groups) - 1, 2)]
    return [(groups[i], groups[j]) for i, j in pairs]


def _chunks(groups, rt, tor, rings, pp: int) -> list[tuple[tuple[int, ...], ...]]:
    """PP > 2: pure groups chained inside their ToR, the rest in line order (module docstring)."""
    by_tor: dict[int, list] = {}
    rest = []
    for grp in groups:
        tors = {int(t) for r in grp for t in rt[r]}
        (by_tor.setdefault(tors.pop(), []) if len(tors) == 1 else rest).append(grp)
    out = []
    for t in sorted(by_tor):
        lst = by_tor[t]
        full = len(lst) - len(lst) % pp
        out += [tuple(lst[i:i + pp]) for i in range(0, full, pp)]
        rest += lst[full:]
    first = lambda grp: min(min(rings[r]) for r in grp)  # noqa: E731
    rest.sort(key=first)
    out += [tuple(rest[i:i + pp]) for i in range(0, len(rest) - pp + 1, pp)]
    return out


MAX_ORDER_PP = 5  # PP up to which a chain's stage order is chosen among all orders (PP! / 2 of them)
PASSES = 4  # local-search sweeps over neighbouring chains (PP > 2)
NEIGHBOURS = 3  # chains after each one (in line order) it trades groups with


class _Costs:
    """Link costs between groups (cached) and a chain's cost in its best stage order."""

    def __init__(self, groups, rt, pp: int):
        self.groups, self.rt, self.pp = groups, rt, pp
        self.cache: dict = {}
        ends = [o for o in permutations(range(pp)) if o[0] < o[-1]] if pp <= MAX_ORDER_PP else [tuple(range(pp))]
        self.orders = ends

    def link(self, i: int, j: int) -> int:
        key = (i, j) if i < j else (j, i)
        if key not in self.cache:
            self.cache[key] = _assign(self.groups[key[0]], self.groups[key[1]], self.rt)[0]
        return self.cache[key]

    def chain(self, members) -> tuple[int, tuple[int, ...]]:
        """(least cost, members in that stage order)."""
        best = None
        for o in self.orders:
            seq = [members[k] for k in o]
            c = sum(self.link(a, b) for a, b in zip(seq, seq[1:]))
            if best is None or c < best[0]:
                best = (c, tuple(seq))
        return best


def _improve(chains: list[list[int]], costs: _Costs) -> list[tuple[int, ...]]:
    """Chains (group indices) after swapping groups between neighbouring chains while the PP links drop."""
    cur = [costs.chain(ch) for ch in chains]
    for _ in range(PASSES):
        better = False
        for i in range(len(cur)):
            for j in range(i + 1, min(len(cur), i + 1 + NEIGHBOURS)):
                for a in range(costs.pp):
                    for b in range(costs.pp):
                        ci, cj = list(cur[i][1]), list(cur[j][1])
                        ci[a], cj[b] = cj[b], ci[a]
                        ni, nj = costs.chain(ci), costs.chain(cj)
                        if ni[0] + nj[0] < cur[i][0] + cur[j][0]:
                            cur[i], cur[j] = ni, nj
                            better = True
        if not better:
            break
    return [seq for _, seq in cur]


def _joined(paths: list[list[int]], costs: _Costs, window: int) -> list[list[int]] | None:
    """Paths (group indices in stage order) joined two by two at the fewest PP links: the matching of
    :func:`_matched` over the paths, each pair joined end to end the cheapest way.  None when it finds none."""

    def join(a: list[int], b: list[int]) -> tuple[int, list[int]]:
        return min(((costs.link(x[-1], y[0]), x + y) for x in (a, a[::-1]) for y in (b, b[::-1])),
                   key=lambda cj: cj[0])

    joins: dict[tuple[int, int], tuple[int, list[int]]] = {}  # each candidate pair's join, priced once

    def weight(i: int, j: int) -> int:
        joins[i, j] = join(paths[i], paths[j])
        return joins[i, j][0]

    pairs = _matched(len(paths), weight, window)
    return None if pairs is None else [joins[i, j][1] for i, j in pairs]


def _doubled(n_groups: int, pp: int, costs: _Costs, window: int) -> list[list[int]] | None:
    """PP a power of 2: chains built by matching groups into pairs, pairs into fours, ... (:func:`_joined`);
    the groups are in line order, so neighbouring paths stay neighbours.  None when ``pp`` is not a power of 2."""
    if pp & (pp - 1):
        return None
    paths: list[list[int]] | None = [[i] for i in range(n_groups)]
    while paths is not None and len(paths[0]) < pp:
        paths = _joined(paths, costs, window)
    return paths


def chain_groups(groups: list[tuple[int, ...]], pp: int, rings, tor, window: int = WINDOW
                 ) -> list[tuple[tuple[int, ...], ...]]:
    """Instances (``pp`` groups each, replicas matched) made of ``groups`` (module docstring).

    Parameters
    ----------
    groups : list of tuple of int
        DP groups (ring indices), in line order of their first slot; ``len(groups) % pp == 0``.
    pp : int
    rings : sequence of tuple of int
        Slots of each ring.
    tor : ndarray of int
        Dense ToR of each slot.
    window : int
        Candidate partners per group (per path at the upper levels) of the matchings: PP = 2, and PP a power of 2.

    Returns
    -------
    list of tuple of tuple of int
        Per instance, its stages (replica ``r`` of stage ``p`` feeds replica ``r`` of stage ``p + 1``).
    """
    rt = _ring_tors(rings, tor)
    if pp == 2:
        chunks = _pairs(groups, rt, window)
    else:
        index = {grp: i for i, grp in enumerate(groups)}
        costs = _Costs(groups, rt, pp)
        first = lambda ch: min(min(rings[r]) for g in ch for r in g)  # noqa: E731
        starts = [[[index[g] for g in ch] for ch in sorted(_chunks(groups, rt, tor, rings, pp), key=first)],
                  [list(range(i, i + pp)) for i in range(0, len(groups) - pp + 1, pp)]]  # and line order
        doubled = _doubled(len(groups), pp, costs, window)
        if doubled is not None:
            starts.append(doubled)
        start = min(starts, key=lambda chs: sum(costs.chain(ch)[0] for ch in chs))
        chunks = [tuple(groups[i] for i in seq) for seq in _improve(start, costs)]
    out = []
    for chunk in chunks:
        stages = list(chunk)
        for p in range(1, pp):
            stages[p] = _assign(stages[p - 1], stages[p], rt)[1]
        out.append(tuple(stages))
    return out
