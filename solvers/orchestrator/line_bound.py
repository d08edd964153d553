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

Open lines only (a closed line would need every state at the wrap boundary
tried); :func:`line_bound` returns None for anything else.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from solvers.orchestrator.model_blocks import Option, tor_options
from solvers.orchestrator.rings import Blocks
from solvers.orchestrator.run import BudgetSpent

NONE = ("N",)
NEG = float("-inf")


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
    """

    bound: float
    choice: list[tuple[int, ...]]
    options: list[list[Option]]
    slack: int
    items: list[int]


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


def line_bound(blocks: Blocks, D: int, C: int, budget=None, item_cost=None, prepared=None) -> LineBound | None:
    """The lower bound of the module docstring for ``C`` groups of ``D`` rings (None: closed line, or no path).

    Parameters
    ----------
    blocks : Blocks
    D, C : int
        DP group size (rings) and group count (``C >= 1``).
    budget : Budget, optional
        Checked at every ToR (raises :class:`solvers.orchestrator.run.BudgetSpent`).
    """
    if blocks.closed and blocks.T > 1:
        return None
    m, T = blocks.m, blocks.T
    opts, combos, suf = prepared if prepared is not None else prepare(blocks, D, budget)
    ic = [0.0] * D if item_cost is None else list(item_cost)
    fmax = max([c[5] for by_in in combos for cs in by_in.values() for c in cs] + [0])
    piece, split = _piece_costs(m, D, ic, fmax)
    start = suf[0].get(NONE)
    need = D * C
    if start is None or start < need:
        return None
    slack = start - need
    # forward: (state, d) -> (cost, back pointer); d = rings the rest may leave unused
    layer = {(NONE, slack): (0, None)}
    back = []
    for t in range(T):
        if budget is not None:
            budget.check()
        here, nxt = suf[t], suf[t + 1]
        new: dict = {}
        for (s, d), (cost, _) in layer.items():
            for idx, _, so, c, rings, f, emit in combos[t].get(s, ()):
                if so not in nxt:
                    continue
                loss0 = here[s] - (rings + f + nxt[so])  # >= 0: suf is a maximum
                if loss0 > d:
                    continue
                c0 = cost + c + ic[emit]
                for delta in range(min(f, d - loss0) + 1):  # leave delta of the free pure rings unused
                    total = c0 + piece[f - delta]
                    key = (so, d - loss0 - delta)
                    old = new.get(key)
                    if old is None or total < old[0]:
                        new[key] = (total, (s, d, idx, emit, f - delta))
        back.append(new)
        layer = new
    end = layer.get((NONE, 0))
    if end is None:
        return None
    choice: list[tuple[int, ...]] = [()] * T
    items = [0] * D
    key = (NONE, 0)
    for t in range(T - 1, -1, -1):
        _, (s, d, idx, emit, u) = back[t][key]
        choice[t] = idx
        items[emit] += 1
        for v in split[u]:
            items[v] += 1
        key = (s, d)
    items[0] = 0
    return LineBound(end[0], choice, opts, slack, items)


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


def prepare(blocks: Blocks, D: int, budget=None):
    """Options, choices grouped by left state, and the backward maxima ``suf`` (reused across multipliers)."""
    T = blocks.T
    opts = [tor_options(blocks, t, D) for t in range(T)]
    combos = []
    for t in range(T):
        if budget is not None:
            budget.check()
        by_in = defaultdict(list)
        for c in _combos(blocks, t, opts[t], D):
            by_in[c[1]].append(c)
        combos.append(by_in)
    suf: list[dict] = [dict() for _ in range(T + 1)]
    suf[T] = {NONE: 0}
    for t in range(T - 1, -1, -1):
        nxt = suf[t + 1]
        for s, cs in combos[t].items():
            best = NEG
            for _, _, so, _, rings, f, _ in cs:
                if so in nxt:
                    best = max(best, rings + f + nxt[so])
            if best > NEG:
                suf[t][s] = best
    return opts, combos, suf


def restricted_options(lb: LineBound) -> list[list[Option]]:
    """Each ToR's options cut down to the bound's path (for a block ILP that only packs the pool)."""
    return [[lb.options[t][i] for i in idx] for t, idx in enumerate(lb.choice)]


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
    """

    bound: int
    paths: list[LineBound]
    iterations: int
    converged: bool


def _min_fill(pi, parts) -> float:
    """The cheapest way to fill one mixed group at item prices ``pi``: min over partitions of sum pi_v a_v."""
    return min(sum(pi[v] * a[v] for v in range(1, len(a)) if a[v]) for a in parts)


def packed_bound(blocks: Blocks, D: int, C: int, *, upper: float | None = None, budget=None,
                 max_iter: int = 200) -> PackedBound | None:
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

    Returns
    -------
    PackedBound or None
        None when :func:`line_bound` has no path (closed line, or fewer than ``D C`` rings).
    """
    import numpy as np
    from scipy.optimize import linprog

    prep = prepare(blocks, D, budget) if not (blocks.closed and blocks.T > 1) else None
    if prep is None:
        return None
    parts = partitions(D)
    first = line_bound(blocks, D, C, budget, prepared=prep)
    if first is None:
        return None
    paths = [first]
    costs = [first.bound]
    best = first.bound
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
        P, Q = len(paths), len(parts)
        nv = D - 1
        # columns: paths | partitions | artificial +e_v | artificial -e_v
        c = np.concatenate([costs, np.zeros(Q), np.full(2 * nv, big)])
        A = np.zeros((1 + nv, P + Q + 2 * nv))
        A[0, :P] = 1.0
        for j, p in enumerate(paths):
            A[1:, j] = p.items[1:]
        for j, a in enumerate(parts):
            A[1:, P + j] = [-x for x in a[1:]]
        A[1:, P + Q:P + Q + nv] = np.eye(nv)
        A[1:, P + Q + nv:] = -np.eye(nv)
        b = np.zeros(1 + nv)
        b[0] = 1.0
        lp = linprog(c, A_eq=A, b_eq=b, bounds=(0, None), method="highs")
        if lp.status != 0:
            break
        weights = list(lp.x[:P])
        pi = [0.0] + list(lp.eqlin.marginals[1:])
        fill = _min_fill(pi, parts)
        ic = [0.0] + [-pi[v] + fill * v / D for v in range(1, D)]
        try:
            lb = line_bound(blocks, D, C, budget, item_cost=ic, prepared=prep)
        except BudgetSpent:
            break
        best = max(best, lb.bound)
        if upper is not None and np.ceil(best - 1e-6) >= upper:
            break
        orig = lb.bound - sum(ic[v] * lb.items[v] for v in range(1, D))
        reduced = orig - float(lp.eqlin.marginals[0]) - sum(pi[v] * lb.items[v] for v in range(1, D))
        if reduced >= -1e-7 or any(p.items == lb.items and p.choice == lb.choice for p in paths):
            converged = True
            break
        paths.append(LineBound(orig, lb.choice, lb.options, lb.slack, lb.items))
        costs.append(orig)
        weights.append(0.0)
    order = sorted(range(len(paths)), key=lambda j: -weights[j] if j < len(weights) else 0.0)
    return PackedBound(int(np.ceil(best - 1e-6)), [paths[j] for j in order], it, converged)
