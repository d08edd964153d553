"""A lower bound for PP > 1 on ToR blocks that counts the PP bytes the ToRs' groups cannot avoid.

Setting: one job of ``C`` instances, ``PP`` stages, DP size ``D``, rings
of ``m`` slots (nodes) of ``g`` GPUs, on the ToR blocks of an open line.
A placement's cost is its DP cross bytes (``unit`` bytes per slot crossing,
exactly as the PP = 1 block model prices its ``C x PP`` DP groups) plus
``link = g x pp_bytes`` per *PP link* that crosses ToRs (a link: slot
``s`` of replica ``r`` of stage ``p`` and slot ``s`` of replica ``r`` of
stage ``p + 1``; :mod:`solvers.orchestrator.traffic`).  The ``D m`` links
of one chain edge (stage ``p`` to ``p + 1`` of an instance) join two groups.

Three ways to charge the crossing links to ToRs
-----------------------------------------------
Each charges every crossing link at most once in total, so **the crossing
PP links are at least the sum of the charges** (``ends``: less a constant);
each ToR's charge below depends only on what the line DP decides for that ToR.

``pure``
    A group is *pure in ToR t* when its ``D`` rings lie inside ``t``.  A
    crossing link is charged ``1/2`` to each end's ToR when both ends are in
    groups pure in their ToRs, ``1`` to the ToR of the end in a pure group
    when only one is, nothing otherwise.  If ``PP`` does not divide the
    ``p_t`` pure groups of ``t``, some instance holds a pure group ``G`` of
    ``t`` and a group that is not, so a chain edge joins ``G`` to a group
    ``G'`` not pure in ``t``; its links cross at every slot of ``G'`` outside
    ``t``: all ``D m`` (charged ``1/2`` each) when ``G'`` is pure elsewhere,
    else at least ``D m - w_t`` (charged ``1``), ``w_t`` being the job's
    slots under ``t`` outside its pure groups.  Charge:
    ``[p_t mod PP != 0] min(D m / 2, max(0, D m - w_t))``.
``spread``
    Let ``n_G(t)`` be the slots of group ``G`` under ToR ``t``.  A chain
    edge ``G - G'`` keeps at most ``min(n_G(t), n_G'(t))`` links inside each
    ToR ``t``, so at least ``sum_t |n_G(t) - n_G'(t)| / 2`` of its links
    cross: charge ``|n_G(t) - n_G'(t)| / 2`` to each ``t``.  Along a chain
    of ``PP`` groups these add up to at least ``max - min`` of their
    ``n(t)``; over all chains, at least ``L`` = the least such sum over
    partitions of the groups' ``n(t)`` into chains (:func:`chain_spread`).
    The DP knows some values: ``D m`` for each pure group, the slots under
    ``t`` of the groups its options place there (:func:`group_values`),
    ``v m`` for each piece of ``v`` of its pure rings in a mixed group.  The
    other groups' values add up to at most ``w_rest`` (the job's slots under
    ``t`` less the known ones); zeroing them lowers ``L`` by at most that.
    Charge: ``max(0, L(known) - w_rest) / 2``.
``ends``
    The same edge charges, bounded per chain through its ends instead: along a
    chain ``x_1 .. x_PP`` (its groups' slots under ``t``) the steps add up to
    at least ``2 max - x_1 - x_PP``.  Summed over ToRs, the ends' terms are
    exactly ``D m`` per end group (its slots, wherever they are), ``2 C / PP``
    end groups in all, so the crossing links are at least
    ``sum_t M_t - (C / PP) D m`` with ``M_t`` the least sum of chain maxima
    under ``t`` (:func:`top_sum`; unknown groups only raise it, so it needs
    none of them).  A ToR's charge is ``M_t``, the constant comes off the
    path's cost at the end.

The job's slots under ``t`` are at most ``h_t - m delta`` (``h_t``
healthy slots; ``delta`` pure rings the DP leaves unused).

The line DP
-----------
The charges are added, at ``link`` bytes each, to the per-ToR costs of
the PP = 1 line DP (:func:`solvers.orchestrator.line_bound.line_bound`),
which stays a shortest path.  So that a placement maps onto a path that
keeps its ``p_t`` and pieces, a ToR may put its pure rings into any number
of pieces (each priced ``m`` slot crossings plus its item price), not only
the one piece the PP = 1 bound settles for.  Every placement then maps to a
path whose cost is at most its own, so **the least path cost is a valid
lower bound** on the PP > 1 optimum, for any item prices (the pool's
Lagrangian terms cancel or are <= 0 on a placement's packing, as in
:func:`solvers.orchestrator.line_bound.packed_bound`).  Tests
(``tests/solvers/test_orchestrator_pipelined.py``): each scheme at zero
and at the surrogate's prices never exceed the brute-force optimum.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from solvers.orchestrator.line_bound import prepare
from solvers.orchestrator.model_blocks import tor_options
from solvers.orchestrator.rings import Blocks


def leftover_charge(p: int, w_max: int, D: int, m: int, pp: int) -> float:
    """Scheme ``pure``: ``pen_t`` of the module docstring for ``p`` pure groups and ``w_max >= w_t``."""
    if p % pp == 0:
        return 0.0
    return float(min(D * m / 2.0, max(0, D * m - w_max)))


def chain_spread(values, pp: int) -> int:
    """``L``: least sum over chains of (max - min) when ``values`` and any number of zeros form chains of ``pp``.

    Sorted from the largest, consecutive runs of ``pp`` (the last one padded with zeros) are optimal.
    """
    v = sorted(values, reverse=True)
    v += [0] * (-len(v) % pp)
    return int(sum(v[i] - v[i + pp - 1] for i in range(0, len(v), pp)))


def group_values(o, D: int, m: int) -> tuple[int, ...] | None:
    """Slots under ToR ``t`` of each group that option ``o`` of ``t`` places there (None: not known).

    A group's rings under ``t`` are one item (:mod:`solvers.orchestrator.model_blocks`), so the option
    handling a straddle of ``t`` knows them all: ``L``/``B`` (left straddle, its group's other rings left of
    ``t``): ``m - x``; ``R``: with ``D - 1`` pure rings of ``t``: ``D m - x``; ``G``: the straddle item with
    ``a`` attached rings of ``t`` (``m - x + a m``; leaving right: ``x + a m``; through ``t``: both parts);
    ``A``/``B`` around ``t``: both parts and ``D - 2`` pure rings.  The three-block view's keys (``>= m``)
    are not read: None, which only weakens the bound.
    """
    xl, xr = o.xl or 0, o.xr or 0
    if xl >= m or xr >= m:
        return None
    tin = o.sin[0] if o.sin else None
    tout = o.sout[0] if o.sout else None
    if o.part == "in":
        return {"N": (), "L": (m - xl,), "B": (m - xl,), "R": (D * m - xl,),
                "G": (m - xl + o.att_in * m,)}.get(tin)
    if o.part == "out":
        return {"N": (), "R": (xr,), "A": (xr,), "L": ((D - 1) * m + xr,), "G": (xr + o.att_out * m,)}.get(tout)
    if tin == "G" and tout == "G":
        return (m - xl + o.att_in * m + xr,)
    if tin == "A" and tout == "B":
        return ((D - 1) * m - xl + xr,)
    return None


def piece_costs(F: int, D: int, m: int, ic) -> np.ndarray:
    """Least slot crossings of ``r = 0..F-1`` pure rings of one ToR in pieces (each 1..D-1 rings, ``m + ic[v]``)."""
    knap = np.full(F, np.inf)
    knap[0] = 0.0
    for r in range(1, F):
        knap[r] = min(knap[r - v] + m + ic[v] for v in range(1, min(r, D - 1) + 1))
    return knap


MAX_SPLITS = 2000  # piece splits enumerated per ring count (beyond it the pieces count as unknown groups)


@lru_cache(maxsize=None)
def piece_splits(r: int, most: int) -> tuple[tuple[int, ...], ...]:
    """Every multiset of piece sizes (each 1..``most``) adding up to ``r``, largest first."""
    if r == 0:
        return ((),)
    out = []
    for v in range(min(r, most), 0, -1):
        out += [(v,) + rest for rest in piece_splits(r - v, v)]
        if len(out) > MAX_SPLITS:
            break
    return tuple(out)


def top_sum(values, pp: int) -> int:
    """Scheme ``ends``: least sum of chain maxima when ``values`` (and zeros) form chains of ``pp``.

    Sorted from the largest, consecutive runs of ``pp`` are optimal: every ``pp``-th value, from the first.
    """
    return int(sum(sorted(values, reverse=True)[::pp]))


def _pieces_charge(r: int, base: tuple[int, ...], rest: int, D: int, m: int, pp: int, unit: float, link: float,
                   ic, knap: np.ndarray, scheme: str) -> float:
    """Least ``unit x pieces' slot crossings + link x charge`` over the splits of ``r`` pure rings into pieces.

    ``base``: the slots under the ToR of the groups known besides the pieces (pure groups first); each
    piece is one more group with ``v m`` slots.  ``rest``: the most slots of groups not known (0 when
    every group is; scheme ``spread``).  Beyond :data:`MAX_SPLITS` splits the pieces join the unknown groups
    (priced by ``knap``).
    """
    def charge(values, unseen):
        if scheme == "ends":  # unknown groups only raise the chain maxima: leaving them out is safe
            return float(top_sum(values, pp))
        return max(0.0, (chain_spread(values, pp) - max(unseen, 0)) / 2.0)

    splits = piece_splits(r, D - 1)
    if len(splits) > MAX_SPLITS:
        return unit * knap[r] + link * charge(base, rest + r * m)
    return min(unit * sum(m + ic[v] for v in sp) + link * charge(base + tuple(v * m for v in sp), rest)
               for sp in splits)


def _tor_table(h: int, known: tuple[int, ...], unknown: bool, F: int, slack: int, D: int, m: int, pp: int,
               unit: float, link: float, ic, knap: np.ndarray, scheme: str) -> np.ndarray:
    """Least cost (bytes) of ``u = f - delta`` pure rings of one ToR, ``delta`` of ``f`` left unused.

    ``table[f, delta]`` = min over ``p`` whole groups and the pieces of the other ``u - D p`` rings of
    their slot crossings (``unit`` bytes each) plus ``link`` x the ToR's charge; inf where ``delta > f``.
    ``known``: the slots under the ToR of the groups its options place there (:func:`group_values`);
    ``unknown``: some are not known (their slots are then bounded through ``h - m delta``).
    """
    table = np.full((F, slack + 1), np.inf)
    kn = known
    for f in range(F):
        for delta in range(min(f, slack) + 1):
            u = f - delta
            best = np.inf
            for p in range(u // D + 1):
                outside = h - m * delta - D * m * p  # the job's slots under the ToR outside its pure groups, at most
                if scheme == "pure":
                    w = outside if unknown else min(outside, sum(kn) + m * (u - D * p))
                    c = unit * knap[u - D * p] + link * leftover_charge(p, w, D, m, pp)
                else:
                    rest = outside - sum(kn) - m * (u - D * p) if unknown else 0
                    c = _pieces_charge(u - D * p, (D * m,) * p + kn, rest, D, m, pp, unit, link, ic, knap, scheme)
                best = min(best, c)
            table[f, delta] = best
    return table


def _row_values(P, t: int, D: int, m: int, cache: dict):
    """The distinct (known group values, some unknown) of ToR ``t``'s choice rows, and each row's index into them.

    ToRs of one signature share their choices (:func:`solvers.orchestrator.line_bound.prepare`), so the
    result is cached per choices object.
    """
    ch = P.choices[t]
    if id(ch) not in cache:
        ids: dict = {}
        sig = np.empty(len(ch.idx), dtype=np.int64)
        for r, idx in enumerate(ch.idx):
            vals = [group_values(P.opts[t][i], D, m) for i in idx]
            key = (tuple(sorted(v for x in vals if x is not None for v in x)), any(x is None for x in vals))
            sig[r] = ids.setdefault(key, len(ids))
        cache[id(ch)] = (ch, list(ids), sig)  # ch kept alive: its id stays unique while cached
    return cache[id(ch)][1], cache[id(ch)][2]


def pp_line_bound(blocks: Blocks, D: int, C: int, pp: int, unit: float, link: float, budget=None,
                  options_of=tor_options, item_cost=None, scheme: str = "pure", prepared=None,
                  row_cache: dict | None = None) -> float | None:
    """The lower bound of the module docstring, in bytes per step.

    Parameters
    ----------
    blocks : Blocks
        Open line (or a single block); a view holding every ring (exact blocks, or the three-block view).
    D : int
        DP size (>= 2).
    C : int
        DP groups (instances x PP).
    pp : int
        Pipeline stages (>= 2).
    unit, link : float
        Bytes of one slot crossing (``g x 2 (D - 1) / D x dp_bytes``) and of one crossing PP link
        (``g x pp_bytes``).
    budget : Budget, optional
        Checked at every ToR.
    options_of : callable
        As in :func:`solvers.orchestrator.line_bound.prepare`.
    item_cost : sequence of float, optional
        Lagrangian prices of the pool's items (index = size; default 0), e.g.
        :attr:`solvers.orchestrator.line_bound.PackedBound.prices`: any prices give a valid bound
        (:func:`solvers.orchestrator.line_bound.packed_bound`, weak duality).
    scheme : {'pure', 'spread', 'ends'}
        How PP links are charged to ToRs (module docstring); each gives a valid bound.
    prepared : Prepared, optional
        :func:`solvers.orchestrator.line_bound.prepare` of the same blocks, ``D`` and ``options_of``.
    row_cache : dict, optional
        Shared by calls on the same ``prepared`` (the choice rows' group values).

    Returns
    -------
    float or None
        Bytes; None on a closed line of several blocks or when the line cannot hold ``C`` groups.
    """
    if blocks.closed and blocks.T > 1:
        return None
    m, T = blocks.m, blocks.T
    P = prepared if prepared is not None else prepare(blocks, D, budget, options_of)
    row_cache = {} if row_cache is None else row_cache
    start = int(P.suf[0, 0])
    if start < D * C:
        return None
    slack = start - D * C
    W, F, S = slack + 1, P.fmax + 1, len(P.states)
    layer = np.full((S, W), np.inf)
    layer[0, slack] = 0.0
    dd = np.arange(W)
    ic = np.zeros(D) if item_cost is None else np.asarray(item_cost, dtype=float)
    knap = piece_costs(F, D, m, ic)
    tables: dict = {}  # (healthy slots, known values, unknown) -> _tor_table (ToRs alike share it)
    for t in range(T):
        if budget is not None:
            budget.check()
        ch = P.choices[t]
        here, nxt = P.suf[t], P.suf[t + 1]
        sigs, sig = _row_values(P, t, D, m, row_cache)
        NS = len(sigs)
        ok = (here[ch.si] >= 0) & (nxt[ch.so] >= 0)
        loss0 = here[ch.si] - ch.rings - nxt[ch.so]
        d0 = dd[None, :] - loss0[:, None]
        cand = layer[ch.si] + unit * (ch.cost + ic[ch.emit])[:, None]
        keep = ok[:, None] & (d0 >= 0) & (d0 < W) & (cand < np.inf)
        mid = np.full(S * NS * F * W, np.inf)
        np.minimum.at(mid, (((ch.so * NS + sig)[:, None] * F + ch.free[:, None]) * W + d0)[keep], cand[keep])
        mid = mid.reshape(S, NS, F, W)
        new = np.full((S, W), np.inf)
        for j, (kn, unknown) in enumerate(sigs):
            key = (int(blocks.healthy[t].size), kn, unknown)
            if key not in tables:
                tables[key] = _tor_table(*key, F, slack, D, m, pp, unit, link, ic, knap, scheme)
            table = tables[key]
            for f in range(F):
                for delta in range(min(f, slack) + 1):
                    np.minimum(new[:, :W - delta], mid[:, j, f, delta:] + table[f, delta], out=new[:, :W - delta])
        layer = new
    if not np.isfinite(layer[0, 0]):
        return None
    if scheme == "ends":  # the chain ends' slots, summed over the ToRs: (C / PP) instances x 2 ends x D m / 2
        return float(layer[0, 0]) - link * (C // pp) * D * m
    return float(layer[0, 0])
