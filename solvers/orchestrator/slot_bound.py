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
