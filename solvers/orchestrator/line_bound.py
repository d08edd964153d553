"""A lower bound on the block ILP's optimum by dynamic programming along the line, with the choices that attain it.

The block ILP (:mod:`~solvers.orchestrator.model_blocks`) couples its ToRs
in two ways: the boundary states (local: ToR ``t``'s right state is ToR
``t + 1``'s left state) and the mixed-group pool (global: the items every
ToR emits must be packed into groups of exactly ``D`` rings, and the groups
must number ``C``).  Relax the pool to its ring total only: the pure
groups, the groups an option completes alone and the pooled items must add
up to ``D x C`` rings; whether the pooled items can be cut into groups of
exactly ``D`` is dropped.  Every placement of the block ILP satisfies the
relaxation at the same cost (so its optimum is a **valid lower bound** on
the ILP's, hence, where the block view is exact, on the true optimum), and
what is left is a shortest path along the line:

* state at a boundary: the block model's boundary state plus ``d``, the
  rings the rest of the line may still leave unused.  ``suf[t][s]``, the
  most rings ToRs ``t..T-1`` can put in groups when ToR ``t`` finds state
  ``s`` on its left, is a backward pass; ``d = (rings so far) +
  suf[t][s] - D C`` never grows and must end at 0, so it ranges over
  ``0 .. suf[0] - D C`` (the stage-1 slack: fewer than ``D`` rings on most
  lines).
* ToR ``t`` takes one option per side (or one joint option), as in the ILP,
  and puts ``u`` of the ``f`` pure rings its capacity still allows into
  pure groups and at most one piece: ``u = D p + v`` costs ``m`` slot
  crossings when ``v > 0`` (one piece of ``v`` rings in a mixed group) and
  0 otherwise.  Several pieces of one ToR would only cost more.

The path of least cost is the bound; its option choices, handed to the
block ILP as the only options (:func:`restricted_options`), give a small
ILP that only has to pack the pool: when its optimum equals the bound, it
is optimal for the whole problem (proved by the bound, not by the solver's
search).  Tests check the bound against brute force and the block ILP.

Closed lines (more ToRs than ``D``, as the block model) add the state at
the wrap boundary (block ``T - 1`` to block 0) as a fixed end: for each
state ``w`` it can hold, the path starts at block 0 in ``w`` and must end
after block ``T - 1`` in ``w`` (the backward maxima ``suf`` are taken
towards that end).  Every placement of the block ILP is such a closed path
for the ``w`` it holds there, so the least of the per-``w`` optima is the
bound.  (A straddle item that would run all the way around the circle
needs ``T <= D`` rings; the block model refuses those lines.)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.orchestrator.model_blocks import Option, tor_options
from solvers.orchestrator.rings import Blocks
from solvers.orchestrator.run import BudgetSpent

NONE = ("N",)


@dataclass(frozen=True)
class LineBound:
    """The relaxation's optimum.

    Attributes
    ----------
    bound : int
        Slot crossings (the block ILP's objective units): no placement with ``C`` groups costs less.
    choice : list of tuple of int
        Per ToR, the indices (into ``tor_options``) of the options on the cheapest path.
    options : list of list of Option
        ``tor_options(blocks, t, D)`` for every ToR (what ``choice`` indexes).
    slack : int
        Rings the line may leave unused (``d`` at the start).
    items : list of int
        Pooled items of each size (index 1..D-1) on the path.
    wrap : int
        The state id the path starts and ends in (the wrap boundary's on a closed line; 0 on an open one).
    """

    bound: float
    choice: list[tuple[int, ...]]
    options: list[list[Option]]
    slack: int
    items: list[int]
    wrap: int = 0


def _contrib(op: Option, D: int) -> int:
    """Rings an option puts in groups that it closes (alone groups, emitted items)."""
    return D * op.alone + op.emit


def _combos(blocks: Blocks, t: int, opts: list[Option], D: int):
    """Every choice of ToR ``t``: (option indices, left state, right state, cost, rings closed, free capacity)."""
    cap = blocks.cap[t]
    ins = [(i, o) for i, o in enumerate(opts) if o.part == "in"]
    outs = [(i, o) for i, o in enumerate(opts) if o.part == "out"]
    for i, a in ins:
        for j, b in outs:
            f = cap.get((a.xl or 0, b.xr or 0))
            if f is None or a.cons + b.cons > f:
                continue
            yield ((i, j), a.sin, b.sout, a.cost + b.cost, _contrib(a, D) + _contrib(b, D), f - a.cons - b.cons,
                   a.emit + b.emit)
    for i, o in enumerate(opts):
        if o.part == "joint":
            yield (i,), o.sin, o.sout, o.cost, _contrib(o, D), cap[(o.xl, o.xr)] - o.cons, o.emit


def _piece_costs(m: int, D: int, ic, fmax: int) -> tuple[list[float], list[tuple[int, ...]]]:
    """Cheapest use of ``u`` pure rings of one ToR (``u = 0..fmax``): whole groups (free) and pieces.

    A piece of ``v < D`` rings costs ``m`` slot crossings plus its price ``ic[v]`` (0 without
    multipliers, when one piece is always best; with prices several pieces may be cheaper).
    Returns the costs and the piece sizes of each optimum (an unbounded knapsack).
    """
    cost = [0.0] + [float("inf")] * fmax
    how: list[tuple[int, ...]] = [()] + [()] * fmax
    for u in range(1, fmax + 1):
        if u >= D and cost[u - D] < cost[u]:
            cost[u], how[u] = cost[u - D], how[u - D]
        for v in range(1, min(u, D - 1) + 1):
            c = cost[u - v] + m + ic[v]
            if c < cost[u] - 1e-12:
                cost[u], how[u] = c, how[u - v] + (v,)
    return cost, how


def _signature(blocks: Blocks, t: int):
    """What :func:`tor_options` and :func:`_combos` read of ToR ``t`` (ToRs with equal signatures share them)."""
    lb, rb = blocks.left[t], blocks.right[t]
    side = lambda b: None if b is None else tuple(sorted(blocks.straddle[b]))  # noqa: E731
    return side(lb), side(rb), lb != rb, tuple(sorted(blocks.cap[t].items()))


@dataclass
class _Choices:
    """Every choice of one ToR signature as arrays (one entry per in/out pair or joint option).

    ``si``/``so``: global ids of the left / right state; ``cost``: slot
    crossings; ``emit``: size of the item it closes (0: none); ``free``:
    pure rings its capacity still allows; ``rings``: rings it puts in groups
    (closed groups, emitted items and ``free``); ``idx``: option indices, one row
    each (in, out) or (joint, -1).
    """

    si: np.ndarray
    so: np.ndarray
    cost: np.ndarray
    emit: np.ndarray
    free: np.ndarray
    rings: np.ndarray
    idx: np.ndarray


@dataclass
class Prepared:
    """What :func:`line_bound` reuses across item prices: options, choices per ToR, states, suffix maxima."""

    opts: list
    choices: list          # per ToR: a _Choices (shared by ToRs of one signature)
    states: list           # global id -> state tuple
    suf: np.ndarray        # (T + 1, n_states): most rings ToRs t.. put in groups from state s (-1: unreachable)
    fmax: int
    ends: list             # (state id at the wrap boundary, its suf): [(0, suf)] on an open line


def _choice_arrays(blocks: Blocks, t: int, opts: list[Option], D, gid) -> _Choices:
    """The rows of :func:`_combos` that fit their ToR (free capacity >= 0), in its order, as arrays.

    ``D``: rings per DP group, one number or one per option (several jobs: each option's own job's,
    :mod:`~solvers.orchestrator.jobs_line_bound`).  Vectorised over the in x out pairs (:func:`_combos` is the
    reference the tests compare it with);
    ``gid(state)`` numbers the boundary states, called on the rows' left states, then their right states,
    each in row order (as a row-by-row build would).
    """
    cap = blocks.cap[t]
    n = len(opts)
    cols = np.array([(o.cons, o.cost, o.emit, o.alone) for o in opts], dtype=np.int64).reshape(n, 4)
    cons, cost, emit = cols[:, 0], cols[:, 1].astype(float), cols[:, 2]
    contrib = D * cols[:, 3] + emit
    ins = np.array([i for i, o in enumerate(opts) if o.part == "in"], dtype=np.int64)
    outs = np.array([i for i, o in enumerate(opts) if o.part == "out"], dtype=np.int64)
    joint = np.array([i for i, o in enumerate(opts) if o.part == "joint"], dtype=np.int64)
    # pure capacity of every (in, out) pair: a dense table over the distinct splits (-1: no such pair)
    xl = [opts[i].xl or 0 for i in ins]
    xr = [opts[j].xr or 0 for j in outs]
    ul, li = np.unique(np.asarray(xl, dtype=np.int64), return_inverse=True)
    ur, ri = np.unique(np.asarray(xr, dtype=np.int64), return_inverse=True)
    table = np.array([[cap.get((int(a), int(b)), -1) for b in ur] for a in ul], dtype=np.int64).reshape(ul.size,
                                                                                                     ur.size)
    ii, jj = np.repeat(np.arange(ins.size), outs.size), np.tile(np.arange(outs.size), ins.size)
    f = table[li.reshape(-1)[ii], ri.reshape(-1)[jj]] if ii.size else np.zeros(0, dtype=np.int64)
    a, b = ins[ii], outs[jj]
    ok = (f >= 0) & (cons[a] + cons[b] <= f)
    a, b, f = a[ok], b[ok], f[ok]
    fj = np.array([cap[(opts[i].xl, opts[i].xr)] for i in joint], dtype=np.int64) - cons[joint]
    jok = joint[fj >= 0]
    first = np.concatenate([a, jok])            # the option whose left state the row takes
    last = np.concatenate([b, jok])             # ... and whose right state
    free = np.concatenate([f - cons[a] - cons[b], fj[fj >= 0]])
    second = np.concatenate([b, np.full(jok.size, -1, dtype=np.int64)])
    rcost = np.concatenate([cost[a] + cost[b], cost[jok]])
    remit = np.concatenate([emit[a] + emit[b], emit[jok]])
    rings = np.concatenate([contrib[a] + contrib[b], contrib[jok]]) + free

    def ids(which, attr):
        uniq, at = np.unique(which, return_index=True)
        order = uniq[np.argsort(at)]  # first appearance in row order
        g = np.full(n, -1, dtype=np.int64)
        g[order] = [gid(getattr(opts[i], attr)) for i in order.tolist()]
        return g[which]

    si, so = ids(first, "sin"), ids(last, "sout")
    return _Choices(si, so, rcost, remit, free, rings, np.stack([first, second], axis=1))


def prepare(blocks: Blocks, D: int, budget=None, options_of=tor_options) -> Prepared:
    """Options and choices of every ToR (computed once per ToR signature), and the backward maxima ``suf``.

    ``options_of(blocks, t, D)`` lists a ToR's options (default: the block model's; the view of
    :mod:`solvers.orchestrator.three_blocks` passes its own).
    """
    T = blocks.T
    ids: dict = {NONE: 0}
    gid = lambda s: ids.setdefault(s, len(ids))  # noqa: E731
    cache: dict = {}
    opts, choices = [], []
    for t in range(T):
        if budget is not None:
            budget.check()
        key = _signature(blocks, t)
        if key not in cache:
            o = options_of(blocks, t, D)
            cache[key] = (o, _choice_arrays(blocks, t, o, D, gid))
        o, ch = cache[key]
        opts.append(o)
        choices.append(ch)
    S = len(ids)
    if blocks.closed and T > 1:
        # the wrap boundary's states: what block 0 can find on its left and block T - 1 leave on its right
        wraps = sorted(set(choices[0].si.tolist()) & set(choices[T - 1].so.tolist()))
    else:
        wraps = [0]
    ends = []
    for w in wraps:
        suf = _suffix(choices, T, S, w)
        if suf[0, w] >= 0:
            ends.append((w, suf))
    states = [None] * S
    for s, i in ids.items():
        states[i] = s
    fmax = max([int(ch.free.max()) for ch in choices if ch.free.size] + [0])
    suf0 = ends[0][1] if ends else _suffix(choices, T, S, 0)
    return Prepared(opts, choices, states, suf0, fmax, ends)


def _suffix(choices: list, T: int, S: int, end: int) -> np.ndarray:
    """``suf[t, s]``: most rings ToRs ``t..T-1`` put in groups from state ``s``, ending in state ``end`` (-1: none)."""
    suf = np.full((T + 1, S), -1, dtype=np.int64)
    suf[T, end] = 0
    for t in range(T - 1, -1, -1):
        ch = choices[t]
        nxt = suf[t + 1][ch.so]
        ok = nxt >= 0
        np.maximum.at(suf[t], ch.si[ok], ch.rings[ok] + nxt[ok])
    return suf


def line_bound(blocks: Blocks, D: int, C: int, budget=None, item_cost=None, prepared=None,
               wraps=None) -> LineBound | None:
    """The lower bound of the module docstring for ``C`` groups of ``D`` rings (None: no path).

    The forward pass holds, at each boundary, the least cost of every
    (state, ``d``) as a dense array and takes each ToR in two vectorised
    steps: every choice maps (state, ``d``) to (right state, free pure
    rings ``f``, ``d0``) at its cost (a scatter-min), then the ``f`` free
    rings are split into whole groups, one piece and ``delta`` unused rings
    (``d = d0 - delta``) at :func:`_piece_costs`.

    Parameters
    ----------
    blocks : Blocks
    D, C : int
        DP group size (rings) and group count (``C >= 1``).
    budget : Budget, optional
        Checked at every ToR (raises :class:`solvers.orchestrator.run.BudgetSpent`).
    item_cost : sequence of float, optional
        Price of a pooled item of each size (index 0 unused; default 0).
    prepared : Prepared, optional
        :func:`prepare` of the same blocks and ``D``.
    wraps : collection of int, optional
        Try only these wrap states (a closed line's pricing heuristic, :func:`packed_bound`): the least path
        among them is a path, but **not** a lower bound unless every wrap state is tried (the default).
    """
    m = blocks.m
    if blocks.closed and 1 < blocks.T <= D:
        return None  # a straddle item could close around the circle: not a path (module docstring)
    P = prepared if prepared is not None else prepare(blocks, D, budget)
    ic = np.zeros(D) if item_cost is None else np.asarray(item_cost, dtype=float)
    piece, split = _piece_costs(m, D, list(ic), P.fmax)
    piece = np.asarray(piece)
    best = None
    for w, suf in P.ends:  # one end on an open line; every wrap state on a closed one
        if wraps is not None and w not in wraps:
            continue
        run = _forward(P, suf, w, D * C, ic, piece, budget)
        if run is not None and (best is None or run[1][w, 0] < best[0]):
            best = (run[1][w, 0], run, w, suf)
    if best is None:
        return None
    _, (layers, last, slack), w, suf = best
    return _trace_back(P, suf, w, layers, last, ic, piece, split, slack, D)


def _forward(P: Prepared, suf: np.ndarray, w: int, need: int, ic, piece, budget):
    """The forward pass from state ``w`` back to ``w`` (:func:`line_bound`).

    Returns (layers, last layer, slack), or None.  Each ToR's middle step (before its free rings are split) is not
    kept: the trace back recomputes it for the one state it follows (16,384 nodes, a job of 100 DP 4 groups, slack
    ~3,500 rings: the middle steps of every ToR held 4.4 GB).
    """
    start = int(suf[0, w])
    if start < need:
        return None
    slack = start - need
    W, F, S = slack + 1, P.fmax + 1, len(P.states)
    inf = np.inf
    layer = np.full((S, W), inf)
    layer[w, slack] = 0.0
    layers = []
    for t in range(len(P.choices)):
        if budget is not None:
            budget.check()
        mid = _middle(P.choices[t], layer, suf[t], suf[t + 1], ic, S, F, W)
        new = np.full((S, W), inf)
        for f in range(F):
            for delta in range(min(f, slack) + 1):  # leave delta of the f free pure rings unused
                np.minimum(new[:, :W - delta], mid[:, f, delta:] + piece[f - delta], out=new[:, :W - delta])
        layers.append(layer)
        layer = new
    if not np.isfinite(layer[w, 0]):
        return None
    return layers, layer, slack


def _middle(ch, layer, here, nxt, ic, S: int, F: int, W: int) -> np.ndarray:
    """``mid[so, f, d0]``: least cost after a ToR's choices ``ch`` from ``layer`` (item costs ``ic``; ``here``,
    ``nxt``: the suffix maxima at its two boundaries), before its ``f`` free pure rings are split."""
    ok = (here[ch.si] >= 0) & (nxt[ch.so] >= 0)
    loss0 = here[ch.si] - ch.rings - nxt[ch.so]  # >= 0 where ok: suf is a maximum
    d0 = np.arange(W)[None, :] - loss0[:, None]
    cand = layer[ch.si] + (ch.cost + ic[ch.emit])[:, None]
    keep = ok[:, None] & (d0 >= 0) & (d0 < W) & (cand < np.inf)
    mid = np.full(S * F * W, np.inf)
    flat = ((ch.so[:, None] * F + ch.free[:, None]) * W + d0)[keep]
    np.minimum.at(mid, flat, cand[keep])
    return mid.reshape(S, F, W)


def _middle_into(ch, s: int, layer, here, nxt, ic, F: int, W: int) -> np.ndarray:
    """The forward pass's middle step of one ToR (:func:`_middle`) for the choices into state ``s`` only, with the
    same arithmetic (so the same floats: the trace back compares them for equality); other states are inf."""
    into = np.flatnonzero(ch.so == s)
    sub = _Choices(ch.si[into], ch.so[into], ch.cost[into], ch.emit[into], ch.free[into], ch.rings[into],
                   ch.idx[into])
    return _middle(sub, layer, here, nxt, ic, s + 1, F, W)


def _trace_back(P: Prepared, suf, w: int, layers, last, ic, piece, split, slack: int, D: int) -> LineBound:
    """The choices of a least-cost path ending in ``w`` (recomputing each step's minimum as the forward pass did)."""
    T = len(layers)
    choice: list[tuple[int, ...]] = [()] * T
    items = [0] * D
    s, d = w, 0
    target = last[w, 0]
    F = P.fmax + 1
    W = slack + 1
    for t in range(T - 1, -1, -1):
        layer, ch = layers[t], P.choices[t]
        here, nxt = suf[t], suf[t + 1]
        mid = _middle_into(ch, s, layer, here, nxt, ic, F, W)
        found = None
        for f in range(F):
            for delta in range(min(f, slack - d) + 1):
                if mid[s, f, d + delta] + piece[f - delta] == target:
                    found = (f, delta)
                    break
            if found:
                break
        f, delta = found
        d0 = d + delta
        sel = np.flatnonzero((ch.so == s) & (ch.free == f) & (here[ch.si] >= 0) & (nxt[ch.so] >= 0))
        loss0 = here[ch.si[sel]] - ch.rings[sel] - nxt[s]
        dprev = d0 + loss0
        inside = dprev <= slack
        sel, dprev = sel[inside], dprev[inside]
        val = layer[ch.si[sel], dprev] + (ch.cost[sel] + ic[ch.emit[sel]])
        j = int(np.flatnonzero(val == mid[s, f, d0])[0])
        r = sel[j]
        choice[t] = tuple(int(i) for i in ch.idx[r] if i >= 0)
        items[int(ch.emit[r])] += 1
        for v in split[f - delta]:
            items[v] += 1
        s, d, target = int(ch.si[r]), int(dprev[j]), layer[ch.si[r], dprev[j]]
    items[0] = 0
    return LineBound(float(last[w, 0]), choice, P.opts, slack, items, w)


def restricted_options(lb: LineBound) -> list[list[Option]]:
    """Each ToR's options cut down to the bound's path (for a block ILP that only packs the pool)."""
    return [[lb.options[t][i] for i in idx] for t, idx in enumerate(lb.choice)]


# Above this many partitions of D the master LP is not built (packed_bound returns its zero-price line bound): it
# lists them all, before any budget check, and they grow as exp(sqrt(D)): D = 64 has 1.7 M (17 s and 1.1 GB before
# a 2 s limit was looked at), D = 96 1.2e8.  p(35) = 14,883 is below it; p(40) = 37,338 is above.
MAX_PARTITIONS = 20_000


def partition_count(D: int) -> int:
    """How many partitions :func:`partitions` lists (multisets of sizes 1..D-1 summing to D), without listing them."""
    ways = [1] + [0] * D
    for v in range(1, D):
        for total in range(v, D + 1):
            ways[total] += ways[total - v]
    return ways[D]


def partitions(D: int) -> list[list[int]]:
    """Every way to fill one mixed group: multisets of item sizes in 1..D-1 summing to D, as counts per size."""
    out = []

    def rec(rest, most, counts):
        if rest == 0:
            out.append(list(counts))
            return
        for v in range(min(rest, most), 0, -1):
            counts[v] += 1
            rec(rest - v, v, counts)
            counts[v] -= 1

    rec(D, D - 1, [0] * D)
    return out


@dataclass(frozen=True)
class PackedBound:
    """The Lagrangian bound of :func:`packed_bound` and the paths its column generation priced.

    Attributes
    ----------
    bound : int
        Slot crossings no placement with ``C`` groups goes below (rounded up: the objective is integral).
    paths : list of LineBound
        Line paths priced, the master LP's heaviest first (restricted block ILPs try them).
    iterations : int
    converged : bool
        The master LP reached its optimum (no path prices out): ``bound`` is the full Lagrangian dual.
    prices : tuple of float
        The item prices (index 0 unused) of the best path bound: any relaxation that keeps the placement's
        items may use them (:mod:`solvers.orchestrator.pp_bound`).
    """

    bound: int
    paths: list[LineBound]
    iterations: int
    converged: bool
    prices: tuple = ()


# A closed line with more wrap states than this prices the wraps its master LP uses first (packed_bound)
PARTIAL_PRICING_MIN_WRAPS = 4


def _column(lb: LineBound, ic, pi, mu0: float, paths: list[LineBound], D: int) -> tuple[float, bool]:
    """(the path's cost without the item prices ``ic``, whether it is a new column of negative reduced cost)."""
    orig = lb.bound - sum(ic[v] * lb.items[v] for v in range(1, D))
    red = orig - mu0 - sum(pi[v] * lb.items[v] for v in range(1, D))
    return orig, red < -1e-7 and not any(p.items == lb.items and p.choice == lb.choice for p in paths)


def _price(blocks: Blocks, D: int, C: int, budget, ic, prep: Prepared, paths: list[LineBound], weights: list[float],
           reduced_cost) -> tuple[LineBound, bool]:
    """The pricing step of :func:`packed_bound`: (a path at item costs ``ic``, whether every wrap state was tried).

    A closed line prices one pass per wrap state: first only the wraps of the paths the master LP uses; a path
    of negative reduced cost among them is a column all the same.  Its cost is not a bound (not every wrap was
    tried): the bound moves only on full rounds, which also prove convergence.
    """
    if len(prep.ends) > PARTIAL_PRICING_MIN_WRAPS:
        used = {p.wrap for p, wt in zip(paths, weights) if wt > 1e-9} or {paths[-1].wrap}
        part = line_bound(blocks, D, C, budget, item_cost=ic, prepared=prep, wraps=used)
        if part is not None and reduced_cost(part)[1]:
            return part, False
    return line_bound(blocks, D, C, budget, item_cost=ic, prepared=prep), True


def _min_fill(pi, parts) -> float:
    """The cheapest way to fill one mixed group at item prices ``pi``: min over partitions of sum pi_v a_v."""
    return min(sum(pi[v] * a[v] for v in range(1, len(a)) if a[v]) for a in parts)


def item_prices(pi, parts, D: int) -> list[float]:
    """The price of a pooled item of each size (index 0 unused) from the master LP's duals ``pi`` of one job's
    size rows: ``-pi_v`` plus the ``v / D`` share of the cheapest fill of a mixed group, which every pooled ring
    earns (:func:`packed_bound`); all 0 at ``D = 1`` (no pool)."""
    fill = _min_fill(pi, parts) if parts else 0.0
    return [0.0] + [-pi[v] + fill * v / D for v in range(1, D)]


@dataclass
class MasterLP:
    """The master LP's answer: each path's weight, per job the duals of its size rows (index 0 unused: 0), the
    duals of the extra rows and of the convexity row, and how much of the artificial columns it used."""

    weights: list
    pi: list
    extra: np.ndarray
    convexity: float
    artificial: float = 0.0  # the artificial columns' total use: 0 at a true optimum of the master


def master_lp(costs, items, dps, parts, big: float, extra=None, rhs=()) -> MasterLP | None:
    """The column-generation master LP of the line bounds, one job (:func:`packed_bound`) or several
    (:func:`~solvers.orchestrator.jobs_line_bound.joint_line_bound`).

    Least cost over convex weights of the paths found so far and, per job, any nonnegative use of its
    partitions of ``D_j``, such that the pooled items of each job and size equal the parts of that size, and
    each extra row's path values equal its right-hand side; an artificial column +e and -e per row but the
    convexity one, at ``big`` a unit, keeps it feasible with few paths.  Columns: paths | each job's
    partitions | +e | -e; rows: convexity, (job, size) in order, the extra rows.

    Parameters
    ----------
    costs : sequence of float
        Each path's cost without prices (objective units).
    items : sequence
        Per path, per job, its pooled items of each size (index 0 unused).
    dps : sequence of int
        Rings per DP group of each job.
    parts : sequence
        Per job, :func:`partitions` of its ``D``.
    big : float
        Cost of an artificial unit (above what one item or ring can be worth).
    extra : sequence, optional
        Per path, its values on the extra rows.
    rhs : sequence of float
        The extra rows' right-hand sides.

    Returns
    -------
    MasterLP or None
        None when the LP solver does not report an optimum.
    """
    from scipy.optimize import linprog

    sizes = [(j, v) for j, D in enumerate(dps) for v in range(1, D)]
    P, Q, K = len(costs), sum(len(p) for p in parts), len(sizes) + len(rhs)
    A = np.zeros((1 + K, P + Q + 2 * K))
    A[0, :P] = 1.0
    for c, its in enumerate(items):
        A[1:1 + len(sizes), c] = [its[j][v] for j, v in sizes]
        if len(rhs):
            A[1 + len(sizes):, c] = extra[c]
    c, first = P, 1  # first: the row of the job's size 1
    for j, ps in enumerate(parts):
        for a in ps:
            A[first:first + dps[j] - 1, c] = [-a[v] for v in range(1, dps[j])]
            c += 1
        first += dps[j] - 1
    A[1:, P + Q:P + Q + K] = np.eye(K)
    A[1:, P + Q + K:] = -np.eye(K)
    cost = np.concatenate([np.asarray(costs, dtype=float), np.zeros(Q), np.full(2 * K, big)])
    b = np.zeros(1 + K)
    b[0] = 1.0
    b[1 + len(sizes):] = rhs
    lp = linprog(cost, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
    if lp.status != 0:
        return None
    duals = lp.eqlin.marginals
    pi, first = [], 1
    for D in dps:
        pi.append([0.0] + [float(x) for x in duals[first:first + D - 1]])
        first += D - 1
    return MasterLP(list(lp.x[:P]), pi, np.asarray(duals[1 + len(sizes):], dtype=float), float(duals[0]),
                    float(lp.x[P + Q:].sum()))


def packed_bound(blocks: Blocks, D: int, C: int, *, upper: float | None = None, budget=None,
                 max_iter: int = 200, options_of=tor_options, prepared: Prepared | None = None,
                 first_budget=None) -> PackedBound | None:
    """A lower bound that prices the packing of the pool into groups of exactly ``D`` (Lagrangian, exact LP dual).

    The relaxation of :func:`line_bound` drops one family of block-ILP rows:
    pooled items of each size ``v`` = arcs of size ``v`` in the groups'
    packing.  Put them back with multipliers ``pi_v`` instead (Lagrangian
    relaxation): an item of size ``v`` then costs ``-pi_v`` more, and every
    mixed group (there are ``pool / D`` of them) earns the cheapest fill
    ``min over partitions a of D of sum pi_v a_v``, i.e. each pooled ring
    ``1 / D`` of it.  For **every** ``pi`` the shortest path at those prices
    is a lower bound (weak duality: every placement of the block ILP is a
    path and a packing whose penalty terms cancel).  The best ``pi`` comes
    from column generation: a master LP over convex combinations of the
    paths found so far and all partitions of ``D``; its duals are the next
    prices, the line DP the pricing step.

    Parameters
    ----------
    upper : float, optional
        Cost of a known placement: stop as soon as the bound reaches it.
    max_iter : int
        Pricing rounds at most.
    options_of : callable
        As in :func:`prepare`.
    prepared : Prepared, optional
        :func:`prepare` of the same blocks, ``D`` and ``options_of``.
    first_budget : Budget, optional
        For :func:`prepare` and the first line DP instead of ``budget`` (default ``budget``): without
        them there is no bound at all, so they may be given longer than the pricing rounds.

    Returns
    -------
    PackedBound or None
        None when :func:`line_bound` has no path (fewer than ``D C`` rings).
    """
    first_budget = budget if first_budget is None else first_budget
    if blocks.closed and 1 < blocks.T <= D:
        return None
    prep = prepared if prepared is not None else prepare(blocks, D, first_budget, options_of)
    first = line_bound(blocks, D, C, first_budget, prepared=prep)
    if first is None:
        return None
    if partition_count(D) > MAX_PARTITIONS:  # no master LP over them all: the zero-price bound (still valid)
        return PackedBound(int(np.ceil(first.bound - 1e-6)), [first], 0, False, (0.0,) * D)
    parts = partitions(D)
    paths = [first]
    costs = [first.bound]
    best = first.bound
    best_ic = (0.0,) * D
    big = 4.0 * blocks.m * D  # cost of an artificial unit of a size (keeps the master feasible)
    converged = False
    it = 0
    weights = [1.0]
    while it < max_iter:
        if budget is not None:
            left = budget.remaining()
            if left is not None and left <= 0:
                break  # out of time: every bound found so far is valid
        it += 1
        lp = master_lp(costs, [(p.items,) for p in paths], [D], [parts], big)
        if lp is None:
            break
        weights = lp.weights
        pi = lp.pi[0]
        ic = item_prices(pi, parts, D)
        def reduced_cost(lb):
            return _column(lb, ic, pi, lp.convexity, paths, D)

        try:
            lb, full = _price(blocks, D, C, budget, ic, prep, paths, weights, reduced_cost)
        except BudgetSpent:
            break
        orig, new = reduced_cost(lb)
        if full:
            if lb.bound > best:
                best, best_ic = lb.bound, tuple(ic)
            if upper is not None and np.ceil(best - 1e-6) >= upper:
                break
            if not new:
                converged = True
                break
        paths.append(LineBound(orig, lb.choice, lb.options, lb.slack, lb.items, lb.wrap))
        costs.append(orig)
        weights.append(0.0)
    order = sorted(range(len(paths)), key=lambda j: -weights[j] if j < len(weights) else 0.0)
    return PackedBound(int(np.ceil(best - 1e-6)), [paths[j] for j in order], it, converged, best_ic)
