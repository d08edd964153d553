"""A lower bound for any ToR wiring (interleaved, ``--tor-map``): the DP cost slot by slot, each slot on its own.

One job, PP = 1, ``C`` groups of ``D`` rings of ``m`` slots.  A placement
costs, per DP group and per rank slot ``s``, ``phi`` = the number of ToRs
its ``D`` rings' slot-``s`` nodes sit in (0 when one).  Fix a slot ``s``
and let ``n[s, t]`` be the group members whose slot ``s`` is in ToR ``t``:

* ``w[s, t]``, the groups whose slot ``s`` is all in ToR ``t``, is at most
  ``n[s, t] / D``; the other ``M_s = C - sum_t w[s, t]`` groups each cost
  ``phi >= 2`` at slot ``s``;
* the ``l[s, t] = n[s, t] - D w[s, t]`` members of ToR ``t`` left in those
  groups sit at most ``D - 1`` per group (a group with ``D`` of them would
  be in one ToR), so ToR ``t`` counts in ``ceil(l / (D - 1))`` of their
  ``phi`` at least.

Hence slot ``s`` costs at least ``max(2 M_s, sum_t ceil(l[s, t] / (D-1)))``
whatever the grouping.  Summed over the slots (:func:`tor_count_bound`),
ToR ``t``'s mono groups ``W_t = sum_s w[s, t]`` are at most
``floor(u_t / D)``, ``u_t`` its nodes in group rings (``<=`` its healthy
nodes, ``sum_t u_t = m C D``), and ``sum_s ceil(l[s, t] / (D-1)) >=
ceil((u_t - D W_t) / (D-1))``; so every placement costs at least
``max(2 (m C - sum_t W_t), sum_t ceil((u_t - D W_t) / (D-1)))`` for some
such ``u``, minimised exactly by a knapsack over the ToRs: a **valid lower
bound** from each ToR's healthy node count alone (tests: never above brute
force on interleaved, random-map and contiguous lines, open and closed).

The same inequalities slot by slot over the candidate rings make a small
MIP whose optimum is sometimes higher on lines of a dozen nodes; it was
dropped: on the 160- to 1,024-node interleaved lines where this bound is
used it never proved more than the closed form, and HiGHS overran its time
limit up to threefold in the root cut loop (49.7 s for 17 s at 1,024 nodes).
"""

from __future__ import annotations

import numpy as np


def tor_count_bound(healthy_per_tor, m: int, D: int, C: int) -> float:
    """The closed-form bound of the module docstring (slot crossings) from each ToR's healthy node count.

    Parameters
    ----------
    healthy_per_tor : sequence of int
        Healthy nodes (slots) under each ToR.
    m, D, C : int
        Slots per ring, rings per DP group, groups.
    """
    if D <= 1 or C <= 0:
        return 0.0
    need = m * C * D
    h = np.minimum(np.asarray(healthy_per_tor, dtype=np.int64), need)
    if h.sum() < need:
        return 0.0  # not enough nodes: no placement (stage 1 rules it out), nothing to bound
    if int((D * (h // D)).sum()) >= need:
        # every ToR can give whole multiples of D: u_t = D k_t summing to need makes W = m C and no leftover,
        # so the knapsack's minimum is 0.  Said at once: the knapsack is O(ToRs x spare x groups), ~10 s on
        # 4,096 nodes for a job that fills a fifth of the line (several jobs, each bounded alone)
        return 0.0
    return _knapsack(h, m, D, C)


def _knapsack(h: np.ndarray, m: int, D: int, C: int) -> float:
    """The minimum of the module docstring over the nodes ``u_t <= h_t`` each ToR gives (``sum h >= m C D``)."""
    need = m * C * D
    big = np.iinfo(np.int64).max // 4
    wmax = need // D
    slack = int(h.sum()) - need  # nodes left out of group rings, over all ToRs
    # split[d, W]: least sum of ceil(leftover / (D - 1)) over the ToRs so far, d nodes left out, W mono groups
    split = np.full((slack + 1, wmax + 1), big, dtype=np.int64)
    split[0, 0] = 0
    for cap in h.tolist():
        nxt = np.full_like(split, big)
        for d in range(min(cap, slack) + 1):
            w, left = divmod(cap - d, D)  # the most mono groups is best for both terms
            if w > wmax:
                continue
            add = -(-left // (D - 1))
            nxt[d:, w:] = np.minimum(nxt[d:, w:], split[:slack + 1 - d, :wmax + 1 - w] + add)
        split = nxt
    row = split[slack]
    ok = row < big
    W = np.arange(wmax + 1)
    cost = np.maximum(2 * np.maximum(m * C - W, 0), row)
    return float(cost[ok].min()) if ok.any() else 0.0


def ring_capacity_bound(tor, healthy, m: int, D: int, C: int) -> float:
    """A lower bound (slot crossings) from how many rings can meet one ToR at one rank slot.

    Rings are non-crossing (spans disjoint) and hop forward, so between the
    slot-``s`` nodes of two rings inside one contiguous run of a ToR's
    positions lie the first ring's ``m - 1 - s`` later nodes and the second
    ring's ``s`` earlier ones: ``j`` rings with their slot-``s`` node in a run
    of ``h`` healthy nodes need ``(j - 1) m + 1`` of them, so at most
    ``c = floor((h - 1) / m) + 1`` do, and ToR ``t`` holds at most ``c_t``
    (summed over its runs; a run cut at the end of a closed line only counts
    more) slot-``s`` nodes of all groups together.  When every ``c_t < D`` no
    DP group has one ToR at any slot, so each of the ``C`` groups spans at
    least ``max(2, ceil(D / max c))`` ToRs, and together they use at least
    ``k*`` ToRs, the fewest whose ``c_t`` sum to ``C D``; each ToR used counts
    in some group's crossings.  Hence every placement costs at least
    ``m max(C max(2, ceil(D / max c)), k*)``; 0 when some ``c_t >= D``.

    On contiguous wiring with rings as long as a ToR (TP 64 on 16-node ToRs:
    every ``c_t = 1``) this is ``m C D``, the cost of every placement: each
    is optimal.  Valid for any wiring, open or closed (tests: never above
    brute force); on interleaved wiring every run is one node and it is 0.

    Parameters
    ----------
    tor : sequence of int
        ToR of each line position.
    healthy : sequence of bool
        Each position's node is healthy.
    m, D, C : int
        Slots per ring, rings per DP group, groups.
    """
    if D <= 1 or C <= 0 or m <= 0:
        return 0.0
    tor = np.asarray(tor, dtype=np.int64)
    healthy = np.asarray(healthy, dtype=bool)
    if tor.size == 0:
        return 0.0
    starts = np.flatnonzero(np.r_[True, tor[1:] != tor[:-1]])  # runs of one ToR in line order
    h = np.add.reduceat(healthy.astype(np.int64), starts)
    cap_run = np.where(h > 0, (h - 1) // m + 1, 0)
    cap = np.bincount(tor[starts], weights=cap_run).astype(np.int64)
    need = C * D
    if cap.max(initial=0) >= D or cap.sum() < need:
        return 0.0  # a ToR could hold a whole group at a slot (or no placement: stage 1 rules it out)
    ordered = np.sort(cap)[::-1]
    k_star = int(np.searchsorted(np.cumsum(ordered), need) + 1)
    per_group = max(2, -(-D // int(ordered[0])))
    return float(m * max(C * per_group, k_star))
