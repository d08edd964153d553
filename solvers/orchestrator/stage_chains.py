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
  line-order pairing, so a perfect matching exists.
* PP > 2: pure groups (all slots under one ToR) are chained ``PP`` at a
  time inside their ToR (links of cost 0); the rest, in line order,
  ``PP`` consecutive ones per instance (a heuristic: no optimality is
  claimed for it).

Within an instance the replica matching is chosen stage boundary by stage
boundary (optimal for PP = 2, where there is one boundary).
"""

from __future__ import annotations

import numpy as np

WINDOW = 12  # candidate partners per group in line order (PP = 2 matching)


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


def _pairs(groups, rt, window: int) -> list[tuple[tuple[int, ...], ...]]:
    """PP = 2: the minimum-weight perfect matching over line-order neighbours (module docstring)."""
    import networkx as nx

    n = len(groups)
    G = nx.Graph()
    G.add_nodes_from(range(n))
    for i in range(n):
        for j in range(i + 1, min(n, i + 1 + window)):
            G.add_edge(i, j, weight=_assign(groups[i], groups[j], rt)[0])
    match = nx.min_weight_matching(G)
    if 2 * len(match) != n:  # cannot happen (line-order pairs are candidates); keep the line order
        return [(groups[i], groups[i + 1]) for i in range(0, n - 1, 2)]
    pairs = sorted((min(i, j), max(i, j)) for i, j in match)
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
        PP = 2 only: candidate partners per group.

    Returns
    -------
    list of tuple of tuple of int
        Per instance, its stages (replica ``r`` of stage ``p`` feeds replica ``r`` of stage ``p + 1``).
    """
    rt = _ring_tors(rings, tor)
    chunks = _pairs(groups, rt, window) if pp == 2 else _chunks(groups, rt, tor, rings, pp)
    out = []
    for chunk in chunks:
        stages = list(chunk)
        for p in range(1, pp):
            stages[p] = _assign(stages[p - 1], stages[p], rt)[1]
        out.append(tuple(stages))
    return out
