"""Rings that span three ToR blocks, as extra boundary states of the line DP (a valid bound for short blocks).

When blocks are shorter than ``(m - 1) k`` positions (TP 64 on 16-node
ToRs with k = 2, TP 32 with k = 3) a ring may cover a whole block ``t``:
``x`` slots in block ``t - 1``, ``y`` in ``t`` and ``z = m - x - y`` in
``t + 1``.  The block ILP leaves such rings out (its optimum is then only a
feasible placement); this module puts them into the line DP of
:mod:`solvers.orchestrator.line_bound`, so that its optimum is a lower
bound over **every** placement.

Why the block view extends exactly
----------------------------------
* Non-crossing rings: the ring covering block ``t`` is the only ring that
  crosses either boundary of ``t`` and no other ring has a node in ``t``.
  As for two-block straddles, the *tight* ring (the ``x`` last healthy
  nodes of ``t - 1``, the ``z`` first of ``t + 1``) has the same ToR
  signature and leaves both neighbours the most room; between them it
  takes any ``y`` healthy nodes of ``t`` from ``ymin`` (the fewest hops of
  at most ``k`` across the block) to all of them.
* To block ``t - 1`` the ring is a straddle of split ``x`` on its right, to
  block ``t + 1`` a straddle of split ``x + y`` on its left: every price of
  the block model that one ToR computes (a straddle item's slots in that
  ToR, the alone groups A1L / A1R / A2 of :mod:`~solvers.orchestrator.
  model_blocks`) counts, per slot, only whether the straddle lies in that
  ToR, so it is the same with the ring's third ToR.  Block ``t`` adds
  ``y`` slots to the ring's item, holds no pure ring, and passes the
  boundary state (its kind and ring count) from left to right unchanged.
* A group holding such a ring alone with pure rings of both ends, or with
  more straddles, sees two or more ToRs at every slot, so it costs the sum
  of its items' weights, as in the block model; the alone groups cheaper
  than that are A1L, A1R and A2 (checked against brute force in the tests).

States: boundary ``b`` carries, besides the block model's splits ``x``,
the keys ``m + x`` (a ring starting in block ``b`` with ``x`` slots and
covering block ``b + 1``), ``2 m + s`` (a ring covering block ``b`` and
ending in ``b + 1``, ``s`` slots left of ``b``) and ``3 m + s`` (a ring
covering both ``b`` and ``b + 1``).  A ring over four or more blocks is a
chain of pass-throughs; for its inner blocks the node counts are relaxed
(:func:`three_block_rings`), so the bound stays valid, if less tight.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from solvers.orchestrator.model_blocks import Option, tor_options
from solvers.orchestrator.rings import Blocks, _runs, spannable_blocks

KINDS = ("L", "R", "A", "B")


def _fewest_nodes(a: int, c: int, B: np.ndarray, k: int) -> int | None:
    """Fewest nodes of ``B`` (sorted positions) on a path from ``a`` to ``c`` with hops <= ``k`` (None: none)."""
    if c - a <= k:
        return 0
    cur, used, i = a, 0, 0
    while c - cur > k:
        j = i
        while j < B.size and B[j] - cur <= k:
            j += 1
        if j == i:
            return None
        cur, used, i = int(B[j - 1]), used + 1, j
    return used


def three_block_rings(blocks: Blocks, healthy: np.ndarray, tor: np.ndarray) -> list[list[tuple[int, int]]] | None:
    """Per block ``t``: the ``(a, b)`` boundary keys of every ring that covers it (module docstring).

    ``a`` is the key on its left boundary (``m + x``: the ring enters from
    block ``t - 1`` with ``x`` slots there; ``3 m + s``: it covers block
    ``t - 1`` too, ``s`` slots left of the boundary) and ``b`` the key on
    its right (``2 m + s``: it ends in block ``t + 1``; ``3 m + s``: it
    covers ``t + 1`` too).  Rings that end next to ``t`` are tight and
    listed exactly; for rings covering two or more blocks, a covered block
    may take any count of nodes from the fewest that cross it from its
    nearest possible neighbours (a relaxation: the real neighbours are no
    nearer) up to all of them, which keeps the bound valid.

    On a closed line (three ToRs or more) the blocks run from position
    ``blocks.rot`` round the circle: the block before block 0 is block
    ``T - 1`` one lap earlier, the one after ``T - 1`` is block 0 one lap later.
    Returns None when a ring could hop over a whole block (or a closed line of two ToRs).
    """
    m, k, T, n, rot = blocks.m, blocks.k, blocks.T, blocks.n, blocks.rot
    if blocks.closed and T < 3:
        return None
    order = (np.arange(n) + rot) % n  # positions in block order (rot = 0 on an open line)
    runs = _runs(np.asarray(tor)[order])
    if len(runs) != T:
        return None
    cover = set(spannable_blocks(np.asarray(healthy, bool)[order], runs, m, k, blocks.closed))
    out: list[list[tuple[int, int]]] = [[] for _ in range(T)]
    for t in sorted(cover):
        # unwrapped positions: the neighbour across the seam of a closed line is a lap before / after
        A = blocks.healthy[(t - 1) % T] - (n if t == 0 else 0)
        B = blocks.healthy[t]
        Cc = blocks.healthy[(t + 1) % T] + (n if t == T - 1 else 0)
        first, last = rot + runs[t][1], rot + runs[t][1] + runs[t][2] - 1
        # (entering key, slots left of the block, position of the node before it) for each way in
        ins = []
        for x in range(1, m - 1):
            if A.size < x or np.any(np.diff(A[A.size - x:]) > k):
                break
            ins.append((m + x, x, int(A[-1])))
        if (t - 1) % T in cover:
            ins += [(3 * m + x, x, first - 1) for x in range(2, m - 1)]  # nearest possible node before
        for key, x, before in ins:
            # the ring ends in block t + 1 (its z first healthy nodes) or covers it too (nearest possible node after)
            need_end = _fewest_nodes(before, int(Cc[0]), B, k) if Cc.size else None
            need_on = _fewest_nodes(before, last + 1, B, k) if (t + 1) % T in cover else None
            if need_end == 0 or need_on == 0:
                return None  # a ring could hop over a whole block: not a block view at all
            for y in range(1, min(B.size, m - x - 1) + 1):
                z = m - x - y
                if need_end is not None and y >= need_end and Cc.size >= z and not np.any(np.diff(Cc[:z]) > k):
                    out[t].append((key, 2 * m + x + y))
                if need_on is not None and y >= need_on and z >= 2:
                    out[t].append((key, 3 * m + x + y))
    return out


def _cap(blocks: Blocks, t: int, bl: int, br: int) -> int | None:
    """Pure rings of block ``t`` with the effective splits ``bl`` / ``br`` (0: none; None: they overlap)."""
    m, k = blocks.m, blocks.k
    H = blocks.healthy[t]
    head = m - bl if bl else 0
    if head + br > H.size:
        return None
    region = H[head:H.size - br]
    if region.size == 0:
        return 0
    cuts = np.concatenate([[0], np.flatnonzero(np.diff(region) > k) + 1, [region.size]])
    return int(sum((e - s) // m for s, e in zip(cuts[:-1], cuts[1:])))


def _end_left(key: int, m: int) -> bool:
    """A left-boundary key the block sees as a plain straddle (a split, or a ring ending in it)."""
    return key < m or 2 * m <= key < 3 * m


def _end_right(key: int, m: int) -> bool:
    """A right-boundary key the block sees as a plain straddle (a split, or a ring starting in it)."""
    return key < 2 * m


def covers_block(option: Option, m: int) -> bool:
    """The option passes a ring over its whole block (the ring spans three ToRs or more): a pass-through."""
    return option.part == "joint" and option.xl is not None and not _end_left(option.xl, m)


def bounding_view(blocks: Blocks, healthy: np.ndarray, tor: np.ndarray):
    """(view, options function) over which the line DP bounds every placement: exact blocks as they are, short
    ones through :func:`three_block_view`; None where short blocks have no such view."""
    return (blocks, tor_options) if blocks.exact else three_block_view(blocks, healthy, tor)


def three_block_view(blocks: Blocks, healthy: np.ndarray, tor: np.ndarray):
    """The blocks with the extra keys of the module docstring, and the option function for the line DP.

    Returns
    -------
    (Blocks, callable) or None
        The augmented view (its ``straddle`` / ``cap`` keyed by the extended keys) and
        ``options(view, t, D) -> list of Option``; None where :func:`three_block_rings` is None.
    """
    spans = three_block_rings(blocks, healthy, tor)
    if spans is None:
        return None
    m, T = blocks.m, blocks.T
    straddle = [dict(blocks.straddle[b]) for b in range(blocks.n_boundaries)]
    for t in range(T):
        for a, b in spans[t]:
            straddle[blocks.left[t]][a] = ()
            straddle[blocks.right[t]][b] = ()
    cap = []
    for t in range(T):
        lb, rb = blocks.left[t], blocks.right[t]
        lk = [0] + ([key for key in straddle[lb] if _end_left(key, m)] if lb is not None else [])
        rk = [0] + ([key for key in straddle[rb] if _end_right(key, m)] if rb is not None else [])
        table = {}
        by_split: dict = {}  # keys of one split share their capacity (up to four keys per split on each side)
        for kl in lk:
            for kr in rk:
                split = (kl % m, kr % m)
                if split not in by_split:
                    by_split[split] = _cap(blocks, t, *split)
                f = by_split[split]
                if f is not None:
                    table[(kl, kr)] = f
        for a, b in spans[t]:
            table[(a, b)] = 0  # the block is covered: no pure ring
        cap.append(table)
    view = replace(blocks, straddle=tuple(straddle), cap=tuple(cap))
    return view, options


def _relabel(state, key):
    return state if state is None or state == ("N",) else (state[0], key) + tuple(state[2:])


def options(view: Blocks, t: int, D: int) -> list[Option]:
    """ToR ``t``'s options in the augmented view: the block model's (keys relabelled) and the pass-throughs."""
    m = view.m
    lb, rb = view.left[t], view.right[t]
    lk = [key for key in view.straddle[lb] if _end_left(key, m)] if lb is not None else []
    rk = [key for key in view.straddle[rb] if _end_right(key, m)] if rb is not None else []
    by_l: dict[int, list[int]] = {}
    for key in lk:
        by_l.setdefault(key % m, []).append(key)
    by_r: dict[int, list[int]] = {}
    for key in rk:
        by_r.setdefault(key % m, []).append(key)
    straddle = list(view.straddle)
    if lb is not None:
        straddle[lb] = dict.fromkeys(by_l, ())
    if rb is not None:
        straddle[rb] = dict.fromkeys(by_r, ())
    cap = list(view.cap)
    cap[t] = {(a % m, b % m): f for (a, b), f in view.cap[t].items() if _end_left(a, m) and _end_right(b, m)}
    plain = replace(view, straddle=tuple(straddle), cap=tuple(cap))
    out = []
    for o in tor_options(plain, t, D):
        for kl in (by_l[o.xl] if o.xl else [o.xl]):
            for kr in (by_r[o.xr] if o.xr else [o.xr]):
                # positional, not dataclasses.replace: this runs ~10^5 times per ToR signature on big lines
                out.append(Option(o.part, _relabel(o.sin, kl), _relabel(o.sout, kr), kl, kr, o.att_in, o.att_out,
                                  o.chain, o.cons, o.cost, o.alone, o.emit))
    for (a, b) in view.cap[t]:
        if not _end_left(a, m):  # a ring covers block t: pass the state through, adding its y slots of t
            y = b % m - a % m
            for kind in KINDS:
                out.append(Option("joint", (kind, a), (kind, b), a, b, 0, 0, False, 0, 0, 0, 0))
            for sg in range(1, D + 1):
                out.append(Option("joint", ("G", a, sg), ("G", b, sg), a, b, 0, 0, True, 0, y, 0, 0))
    return out
