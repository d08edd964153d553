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
whatever the grouping, and every placement's rings (a non-overlapping set
of the explicit model's candidates, ``C D`` of them in groups) satisfy the
small ILP below at no more than its cost: its optimum, and the dual bound
HiGHS proves for it within the time given, are **valid lower bounds**.  The
slots are coupled only through the ring choice (a slot may group its rings
differently from the next), which on wirings where a ring's ToRs follow its
start (interleaved: ToR = position mod T) loses little.

The MIP may prove nothing in its time on long lines, so a closed form of
the same inequalities comes first (:func:`tor_count_bound`): summed over the
slots, ToR ``t``'s mono groups ``W_t = sum_s w[s, t]`` are at most
``floor(u_t / D)``, ``u_t`` its nodes in group rings (``<=`` its healthy
nodes, ``sum_t u_t = m C D``), and ``sum_s ceil(l[s, t] / (D-1)) >=
ceil((u_t - D W_t) / (D-1))``; so every placement costs at least
``max(2 (m C - sum_t W_t), sum_t ceil((u_t - D W_t) / (D-1)))`` for some
such ``u``, minimised exactly by a knapsack over the ToRs.  Tests check
both against brute force.
"""

from __future__ import annotations

import time
from collections import defaultdict

import numpy as np
import pulp

from solvers.orchestrator.rings import Candidate
from solvers.orchestrator.run import HANDOVER_SHARE, MIN_SOLVE_S, Budget, BudgetSpent
from solvers.pulp_adapter import SolveOptions, solve


def build_slot_bound(cands: list[Candidate], conflicts: list[list[int]], D: int, C: int,
                     budget=None) -> pulp.LpProblem:
    """The relaxation ILP (module docstring) over the explicit model's candidates, in slot crossings.

    ``budget`` (a :class:`solvers.orchestrator.run.Budget`) is checked at every slot.
    """
    prob = pulp.LpProblem("slot_bound", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x_{r}", cat=pulp.LpBinary) for r in range(len(cands))]
    for k, group in enumerate(conflicts):
        if len(group) > 1:
            prob += pulp.lpSum(x[r] for r in group) <= 1, f"span_{k}"
    prob += pulp.lpSum(x) == D * C, "members"
    m = len(cands[0].sig)
    cost = []
    for s in range(m):
        if budget is not None:
            budget.check()
        members = defaultdict(list)
        for r, c in enumerate(cands):
            members[c.sig[s]].append(x[r])
        mono, split = [], []
        for t, xs in sorted(members.items()):
            w = pulp.LpVariable(f"w_{s}_{t}", lowBound=0, upBound=C, cat=pulp.LpInteger)
            prob += D * w <= pulp.lpSum(xs), f"mono_{s}_{t}"
            mono.append(w)
            if D > 1:
                c_ = pulp.LpVariable(f"c_{s}_{t}", lowBound=0, cat=pulp.LpInteger)
                prob += (D - 1) * c_ >= pulp.lpSum(xs) - D * w, f"left_{s}_{t}"
                split.append(c_)
        z = pulp.LpVariable(f"z_{s}", lowBound=0)
        prob += z >= 2 * (C - pulp.lpSum(mono)), f"mixed_{s}"
        prob += z >= pulp.lpSum(split), f"split_{s}"
        cost.append(z)
    prob += pulp.lpSum(cost), "slot_crossings"
    return prob


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


def slot_bound(cands: list[Candidate], conflicts: list[list[int]], D: int, C: int,
               time_limit: float | None, healthy_per_tor=None) -> float:
    """A proven lower bound on the slot crossings of any placement of ``C`` groups of ``D`` candidate rings.

    The relaxation's optimum when HiGHS proves it within ``time_limit`` (s, the build and hand-over
    included), else its proven dual bound (rounded up: the relaxation's objective is integral); never below
    :func:`tor_count_bound` of ``healthy_per_tor`` (healthy nodes under each ToR) when given; that closed
    form alone when the time runs out first; 0 when nothing is proven.
    """
    if D <= 1 or C <= 0 or not cands:
        return 0.0
    floor = 0.0 if healthy_per_tor is None else tor_count_bound(healthy_per_tor, len(cands[0].sig), D, C)
    t0 = time.perf_counter()
    budget = Budget(t0, time_limit)
    try:
        prob = build_slot_bound(cands, conflicts, D, C, budget)
    except BudgetSpent:
        return floor
    left = budget.remaining()
    if left is not None:
        left -= HANDOVER_SHARE * (time.perf_counter() - t0)
        if left < MIN_SOLVE_S:
            return floor
    rep = solve(prob, SolveOptions(time_limit=left, objective_step=1.0, known_bound=0.0))
    if rep.status == "infeasible":  # no C D non-overlapping candidates: nothing to bound (stage 1 says there are)
        return floor
    b = rep.bound if rep.bound is not None else 0.0
    return float(max(0.0, b, floor))
