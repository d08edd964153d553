"""One DP group (``--dp max``, or one instance): an exact dynamic programme along the ToR blocks.

A DP group of ``D`` rings costs ``sum over slots j of phi(T_j)``, ``T_j``
the distinct ToRs holding slot ``j`` of one of its rings
(:mod:`solvers.orchestrator.traffic`; ``phi(1) = 0``, ``phi(T) = T``
otherwise).  When **every** slot sees two or more ToRs this is
``sum_j T_j = sum over ToRs t of held(t)``, the slots ToR ``t`` holds: a
sum over ToRs, blind to which rings hold a slot.  On exact ToR blocks
(no ring spans three blocks, :func:`solvers.orchestrator.rings.block_structure`)
a ToR holding a pure ring holds all ``m`` slots; one holding only the
straddles at its boundaries holds ``[xl, m)`` of the left one (split
``xl``: its first ``xl`` slots lie in the left block) and ``[0, xr)`` of the
right one.  So the least cost is a shortest path along the line: the state
at a boundary is the split of its straddle (0: none) and the rings taken so
far; block ``t`` takes ``0 .. cap[t][xl, xr]`` pure rings
(:class:`~solvers.orchestrator.rings.Blocks`).  On a closed line the
split at the wrap boundary is fixed in turn to each value (the path starts
and ends in it).

When two or more ToRs always share a slot
-----------------------------------------
If slot ``j`` of the group lay in one ToR ``t`` only, every ring would
have its ``j``-th node under ``t``: a pure ring of ``t`` or one of the at
most two straddles at ``t``'s boundaries, so ``D <= cap[t][0, 0] + 2``.
Hence for ``D > max_t cap[t][0, 0] + 2`` every placement's cost is the sum
above, and the path's optimum is **the optimum** (:func:`exact_for`);
smaller groups go to the single-group ILP.

Short blocks (a ring may cover a whole block: k = 3 with TP 32, TP 64 on
16-node ToRs): the same path over the augmented view of
:mod:`solvers.orchestrator.three_blocks` (a ring covering block ``t`` is
the only ring with a node in ``t``, which holds its ``y`` slots there) is
a **lower bound** (that view holds every ring, and relaxes those over four
or more blocks), and the path over the rings within two blocks a
placement; equal costs prove it optimal.  The count ``D <= cap + 2`` above
holds there too: a ring covering ``t`` is alone in ``t``, and a ring over
three blocks ending in ``t`` crosses one of ``t``'s boundaries.  Brute force agrees on small
lines (``tests/solvers/test_orchestrator_single_group.py``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from solvers.orchestrator.jobs import Job
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.rings import Blocks
from solvers.orchestrator.run import BudgetSpent
from solvers.orchestrator.space import Line
from solvers.orchestrator.three_blocks import three_block_view
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveReport, relative_gap


@dataclass(frozen=True)
class SingleGroup:
    """The optimum of the path.

    Attributes
    ----------
    cost : int
        Slot crossings of the group.
    straddles : dict
        Boundary -> split of the straddle the group uses there.
    pure : list of int
        Pure rings the group takes in each block.
    """

    cost: int
    straddles: dict[int, int]
    pure: list[int]


def large_group(blocks: Blocks, D: int) -> bool:
    """Whether every placement's cost is the sum over ToRs of the slots they hold (module docstring)."""
    return blocks.T > 1 and D > max(c.get((0, 0), 0) for c in blocks.cap) + 2


def exact_for(blocks: Blocks, D: int) -> bool:
    """Whether the path's optimum is the optimum: exact blocks (no ring spans three) and a large group."""
    return blocks.exact and large_group(blocks, D)


def held(m: int, xl: int, xr: int, pure: int) -> int:
    """Slots a block holds: all ``m`` with a pure ring, else the union of its straddles' slots (split 0: none)."""
    if pure:
        return m
    left = set(range(xl, m)) if xl else set()
    right = set(range(xr)) if xr else set()
    return len(left | right)


def _keys(blocks: Blocks, b) -> list[int]:
    """States at boundary ``b``: 0 (no ring crosses it) and its straddle keys (None: a line end)."""
    return [0] if b is None else [0] + sorted(blocks.straddle[b])


def _held(m: int, kl: int, kr: int, pure: int) -> int:
    """Slots a block holds given its boundary keys; keys >= ``m`` are the rings over three blocks of
    :mod:`solvers.orchestrator.three_blocks` (a covered block holds the ``y`` slots of the ring covering it)."""
    if kl >= m and not (2 * m <= kl < 3 * m):  # a ring covers this block: slots [x, x + y) of it
        return kr % m - kl % m
    return held(m, kl % m, kr % m, pure)


def single_group(blocks: Blocks, D: int, budget=None) -> SingleGroup | None:
    """The least ``sum_t held(t)`` over sets of ``D`` non-crossing rings (None: fewer than ``D`` rings fit).

    ``blocks`` may be the augmented view of :func:`solvers.orchestrator.three_blocks.three_block_view`
    (its keys >= ``m`` are rings over three blocks; the path is then a lower bound only, as that view
    relaxes rings over four or more).  ``budget`` (a :class:`solvers.orchestrator.run.Budget`) is checked
    at every block.
    """
    wraps = _keys(blocks, blocks.left[0]) if blocks.closed and blocks.T > 1 else [0]
    best = None
    for w in wraps:
        run = _path(blocks, D, w, budget)
        if run is not None and (best is None or run.cost < best.cost):
            best = run
    return best


def _path(blocks: Blocks, D: int, w: int, budget) -> SingleGroup | None:
    """The shortest path with key ``w`` at block 0's left boundary (and, closed, at block ``T - 1``'s right)."""
    T, m = blocks.T, blocks.m
    inf = np.inf
    L = _keys(blocks, blocks.left[0])
    layer = np.full((len(L), D + 1), inf)
    layer[L.index(w), 0] = 0.0
    how = []
    for t in range(T):
        if budget is not None:
            budget.check()
        L = _keys(blocks, blocks.left[t])
        R = [w] if blocks.closed and t == T - 1 else _keys(blocks, blocks.right[t])  # closed: back to w
        li, ri = {x: i for i, x in enumerate(L)}, {x: j for j, x in enumerate(R)}
        new = np.full((len(R), D + 1), inf)
        arg = np.full((len(R), D + 1, 2), -1, dtype=np.int64)  # (left key index, pure rings) of the minimum
        for (kl, kr), cap in blocks.cap[t].items():
            if kl not in li or kr not in ri:
                continue
            i, j = li[kl], ri[kr]
            row = layer[i]
            adds = 1 if 0 < kr < 2 * m else 0  # a ring is counted at the first boundary it crosses
            for r in range(cap + 1):
                step = r + adds
                if step > D:
                    break
                c = row[:D + 1 - step] + _held(m, kl, kr, r)
                better = c < new[j, step:]
                if better.any():
                    new[j, step:][better] = c[better]
                    arg[j, step:][better] = (i, r)
        how.append((R, arg))
        layer = new
    if not np.isfinite(layer[0, D]):  # one end state: none (open) or the wrap key
        return None
    cost = int(round(layer[0, D]))
    straddles, pure = {}, [0] * T
    j, c = 0, D
    for t in range(T - 1, -1, -1):
        R, arg = how[t]
        i, r = arg[j, c]
        kr = R[j]
        if kr and blocks.right[t] is not None:
            straddles[blocks.right[t]] = kr
        pure[t] = int(r)
        c -= int(r) + (1 if 0 < kr < 2 * blocks.m else 0)
        j = int(i)
    return SingleGroup(cost, straddles, pure)


def placement_of(blocks: Blocks, sg: SingleGroup) -> Placement:
    """The group as a placement: its straddles, then each block's first pure rings between them."""
    rings = [blocks.straddle[b][x] for b, x in sorted(sg.straddles.items())]
    for t in range(blocks.T):
        if sg.pure[t]:
            xl = sg.straddles.get(blocks.left[t], 0) if blocks.left[t] is not None else 0
            xr = sg.straddles.get(blocks.right[t], 0) if blocks.right[t] is not None else 0
            pure = blocks.pure_rings(t, xl, xr)
            if len(pure) < sg.pure[t]:
                raise RuntimeError(f"block {t} holds {len(pure)} pure rings, the path takes {sg.pure[t]}")
            rings += pure[:sg.pure[t]]
    members = tuple(range(len(rings)))
    return Placement(tuple(rings), (PlacedInstance(0, (members,)),))


def run_single_group(line: Line, jobs: list[Job], blocks: Blocks, budget,
                     warm: Placement) -> OrchestrationResult | None:
    """The orchestration of one DP group by the path of :func:`single_group` (None: the budget ran out).

    On short blocks the placement is the path over rings within two blocks and the bound the path over
    the view that holds rings over three (:mod:`solvers.orchestrator.three_blocks`).
    """
    t1 = time.perf_counter()
    view = None
    if not blocks.exact:  # short blocks: the bound over the view with rings over three blocks (single_group.py)
        three = three_block_view(blocks, line.space.healthy, line.space.tor)
        if three is None:
            return None
        view = three[0]
    try:
        sg = single_group(blocks, jobs[0].dp, budget)
        low = sg if view is None or sg is None else single_group(view, jobs[0].dp, budget)
    except BudgetSpent:
        return None
    if sg is None or low is None:
        return None
    placement = placement_of(blocks, sg)
    placement.check(line.space)
    traffic = placement_traffic(placement, line.space, jobs)
    unit, _, _ = unit_costs(jobs, line.space.g)
    cost = traffic.cross_bytes / unit if unit else 0.0
    if abs(cost - sg.cost) > 1e-6 * max(1.0, cost):  # the accounting must agree with the path, or nothing is proved
        raise RuntimeError(f"single-group path costs {sg.cost} slot crossings, its placement {cost}")
    t = time.perf_counter() - t1
    status = "optimal" if sg.cost <= low.cost else "feasible"
    rep = SolveReport(status, "-", True, float(sg.cost), float(low.cost), relative_gap(sg.cost, low.cost), t,
                      "dynamic programme", termination="optimal" if status == "optimal" else "other_limit")
    unimproved = traffic.cross_bytes >= placement_traffic(warm, line.space, jobs).cross_bytes * (1 - 1e-12)
    res = OrchestrationResult(status, "ilp", "blocks-single" if view is None else "blocks-single-restricted",
                              line.space, jobs, placement, traffic, rep, unit, termination=rep.termination,
                              warm_start_unimproved=bool(unimproved))
    res.notes.append("one DP group: " + ("optimal by the exact path along the ToR blocks" if view is None else
                                         f"the path over rings within two blocks, bounded by the path over the "
                                         f"view with rings over three ({low.cost} slot crossings)")
                     + " (solvers/orchestrator/single_group.py)")
    res.seconds.update(build=0.0, bound=t, total=time.perf_counter() - budget.t0)
    return res
