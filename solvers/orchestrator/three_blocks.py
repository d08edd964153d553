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
the keys ``m + x`` (a ring covering block ``b + 1``, ``x`` slots left of
``b``) and ``2 m + s`` (a ring covering block ``b``, ``s`` slots left of
``b``).  Rings spanning four blocks are not modelled:
:func:`three_block_view` returns None when one could exist.
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


def _covers_two_blocks(healthy: np.ndarray, runs, m: int, k: int) -> bool:
    """Whether a ring of ``m`` healthy nodes could cover two consecutive blocks whole (four ToRs)."""
    pairs = [(runs[t][0], runs[t][1], runs[t][2] + runs[t + 1][2]) for t in range(len(runs) - 1)]
    return bool(spannable_blocks(healthy, pairs, m, k, False)) if len(pairs) > 2 else False


def three_block_rings(blocks: Blocks, healthy: np.ndarray, tor: np.ndarray) -> list[list[tuple[int, int]]] | None:
    """Per block ``t``: the ``(x, s)`` of every tight ring covering it (``x`` slots left, ``s = x + y``).

    Returns None for a closed line, or when a ring could span four blocks.
    """
    if blocks.closed:
        return None
    m, k, T = blocks.m, blocks.k, blocks.T
    runs = _runs(np.asarray(tor))
    if len(runs) != T or _covers_two_blocks(np.asarray(healthy, bool), runs, m, k):
        return None
    out: list[list[tuple[int, int]]] = [[] for _ in range(T)]
    for t in range(1, T - 1):
        A, B, Cc = blocks.healthy[t - 1], blocks.healthy[t], blocks.healthy[t + 1]
        if A.size == 0 or Cc.size == 0:
            continue
        need = _fewest_nodes(int(A[-1]), int(Cc[0]), B, k)
        if need is None:
            continue
        if need == 0:
            return None  # a ring could hop over a whole block: not a block view at all
        for x in range(1, m - 1):
            if A.size < x or np.any(np.diff(A[A.size - x:]) > k):
                break
            for y in range(need, min(B.size, m - x - 1) + 1):
                z = m - x - y
                if Cc.size >= z and not np.any(np.diff(Cc[:z]) > k):
                    out[t].append((x, x + y))
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
    nb = blocks.n_boundaries
    straddle = [dict(blocks.straddle[b]) for b in range(nb)]
    for t in range(1, T - 1):
        for x, s in spans[t]:
            straddle[t - 1][m + x] = ()
            straddle[t][2 * m + s] = ()
    eff = lambda key: key % m if key else 0  # noqa: E731  (keys m + x and 2m + s -> x and s)
    cap = []
    for t in range(T):
        lb, rb = blocks.left[t], blocks.right[t]
        # as an end block: left keys are splits and rings covering block t - 1; right keys splits and t + 1
        lk = [0] + ([key for key in straddle[lb] if key < m or key >= 2 * m] if lb is not None else [])
        rk = [0] + ([key for key in straddle[rb] if key < 2 * m] if rb is not None else [])
        table = {}
        for kl in lk:
            for kr in rk:
                f = _cap(blocks, t, eff(kl), eff(kr))
                if f is not None:
                    table[(kl, kr)] = f
        for x, s in spans[t]:
            table[(m + x, 2 * m + s)] = 0
        cap.append(table)
    view = replace(blocks, straddle=tuple(straddle), cap=tuple(cap))
    return view, options


def _relabel(state, key):
    return state if state is None or state == ("N",) else (state[0], key) + tuple(state[2:])


def options(view: Blocks, t: int, D: int) -> list[Option]:
    """ToR ``t``'s options in the augmented view: the block model's (keys relabelled) and the pass-throughs."""
    m = view.m
    lb, rb = view.left[t], view.right[t]
    eff = lambda key: key % m if key else 0  # noqa: E731
    lk = [key for key in view.straddle[lb] if key < m or key >= 2 * m] if lb is not None else []
    rk = [key for key in view.straddle[rb] if key < 2 * m] if rb is not None else []
    by_l: dict[int, list[int]] = {}
    for key in lk:
        by_l.setdefault(eff(key), []).append(key)
    by_r: dict[int, list[int]] = {}
    for key in rk:
        by_r.setdefault(eff(key), []).append(key)
    straddle = list(view.straddle)
    if lb is not None:
        straddle[lb] = dict.fromkeys(by_l, ())
    if rb is not None:
        straddle[rb] = dict.fromkeys(by_r, ())
    cap = list(view.cap)
    cap[t] = {(eff(a), eff(b)): f for (a, b), f in view.cap[t].items() if a < m or a >= 2 * m}
    plain = replace(view, straddle=tuple(straddle), cap=tuple(cap))
    out = []
    for o in tor_options(plain, t, D):
        for kl in (by_l[o.xl] if o.xl else [o.xl]):
            for kr in (by_r[o.xr] if o.xr else [o.xr]):
                out.append(replace(o, xl=kl, xr=kr, sin=_relabel(o.sin, kl), sout=_relabel(o.sout, kr)))
    for (a, b) in view.cap[t]:
        if m <= a < 2 * m and b >= 2 * m:  # a ring covers block t: pass the state through
            y = eff(b) - eff(a)
            for kind in KINDS:
                out.append(Option("joint", (kind, a), (kind, b), a, b, 0, 0, False, 0, 0, 0, 0))
            for sg in range(1, D + 1):
                out.append(Option("joint", ("G", a, sg), ("G", b, sg), a, b, 0, 0, True, 0, y, 0, 0))
    return out
