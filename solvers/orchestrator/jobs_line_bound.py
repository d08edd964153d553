"""A lower bound for jobs of different DP sizes on ToR blocks: the line DP with a count of the first job's rings.

:mod:`~solvers.orchestrator.line_bound` relaxes one job's block ILP to a
shortest path along the line: the mixed-group pool is kept to its ring
total only.  With several jobs (:mod:`~solvers.orchestrator.model_jobs`:
states and items tagged by job, one capacity row per ToR, one pool per
job) the same relaxation keeps each job's pool to its own ring total
``N_j = D_j C_j``.  The path then needs one more number at each boundary,
``r``, the first job's rings put in groups so far (``0 .. N_0``), beside
the boundary state and ``d``, the rings the rest of the line may still
leave unused (as in the one-job DP, whose ``d`` covers the ring total of
all jobs).  The path must end with ``r = N_0`` and ``d = 0``, so the other
jobs have ``sum_{j>0} N_j`` between them: with two jobs, the second has
``N_1`` exactly.  With three or more, the middle jobs' totals are priced
instead of counted (one multiplier ``mu_j`` per ring of job ``j``, the
constant ``- mu_j N_j`` added: a Lagrangian relaxation, valid for any
``mu``, since every placement has ``N_j`` exactly); a count per job would
multiply the table by each ``N_j + 1``.  Where even the first job's count
makes the table too large (:data:`MAX_CELLS`), its total is priced the same
way and the table is the one-job DP's.

At each ToR a choice (one option per side, or a joint option) closes the
rings of its options' jobs (alone groups, emitted items; a "no straddle"
option closes none) and leaves ``f`` pure rings its capacity allows; they
are split into ``u_0`` for the first job, the rest for the other jobs
(dealt among them at their prices, a min-plus convolution) and ``delta``
unused, each job's ``u_j`` into whole groups (free) and pieces (``m`` slot
crossings each, weighted; without prices one piece is always cheapest).
Costs are the block model's, weighted per job (objective units).

Every placement of the several-job block ILP is such a path at the same
cost, so the least cost is a **valid lower bound** on its optimum; on the
three-block view of short blocks (:mod:`~solvers.orchestrator.three_blocks`,
whose options hold every ring) on every placement.  Each job's pool is then
priced back as :func:`~solvers.orchestrator.line_bound.packed_bound` prices
one job's, and the middle jobs' ring totals with it, by one master LP
(:func:`joint_line_bound`).  Tests: never above brute force over every ring
set and dealing, two and three jobs, above the sum of the jobs' own bounds
(which lets the jobs share their best ToRs) on some lines, raised by the
pricing on some.  Measured at 1,024 nodes (README, "Two jobs or more"): the six
several-job benchmarks proved optimal, e.g. k = 3, TP 32, DP 8 x 3 + DP 4:
555.7 units unpriced, 562.2 priced, the optimum.

The path holds the ring total (``need``) through a *slack* dimension: the rings it may still leave out of groups.
Where fixed counts leave :data:`FREE_TOTAL_SPARE` rings or more spare, the total is **priced** instead, like a
middle job's (every job after the first gets a ring row in the master LP, and any number of rings may be left
out): the same Lagrangian argument, and a table without that dimension.  The pricing is smoothed
(:data:`SMOOTHING`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from solvers.orchestrator.line_bound import (MAX_PARTITIONS, _choice_arrays, _piece_costs, _suffix, item_prices,
                                             master_lp, partition_count, partitions)
from solvers.orchestrator.model_blocks import tor_options
from solvers.orchestrator.model_jobs import NONE, job_options
from solvers.orchestrator.rings import Blocks
from solvers.orchestrator.run import BudgetSpent

# The forward pass keeps (states x (slack + 1) x (N_0 + 1)) costs at every boundary for the trace back; above this
# many over all boundaries (8 bytes each: 200 MB) it is not run
MAX_CELLS = 25_000_000
# Rows of all ToRs at most (each ~100 bytes with its key; 6.1M at 4,096 nodes, k = 3, TP 32, three jobs: 1.2 GiB at
# the peak); a line that would list more (16,384 nodes) is not run
MAX_ROWS = 7_000_000
# Pricing starts only when the budget left holds this many more paths at the first path's time: measured at 1,024
# nodes, the two-job benchmarks converged in 4-22 rounds (0.2-0.5 s a path); at 4,096 nodes, TP 16 x (DP 8 x 20 +
# DP 4), in 15 rounds of 0.8 s.  A floor that does not converge leaves the block ILP less time for nothing (that
# case at 1.7 s a path, before the paths were planned once: 5.3 % -> 47 %); 20 rounds skipped it on a loaded machine
PRICING_ROUNDS = 12
# The master LP's artificial columns cost at most BIG_ITEMS m max(D) (weighted) a unit: above what one item or ring
# can be worth; they start at m (one piece) and grow BIG_GROWTH-fold when the master still uses them
BIG_ITEMS = 4.0
BIG_GROWTH = 4.0
# Wentges smoothing: each round prices at SMOOTHING x the best bound's duals + (1 - SMOOTHING) x the master's
# (any duals give a valid bound, so the smoothed ones do too); a round whose path does not price out at the
# master's duals prices again at them alone.  Without it the bound zigzagged (4,096 nodes, TP 16 x (DP 8 x 20 +
# DP 4 x 200), spare rings: 550, -533, 286, 132, 336, ... over 17 rounds of 6.4 s each).
SMOOTHING = 0.5
# Spare rings (those a path of the most rings leaves out of groups) from which the ring total is priced instead
# of held: the held total is a dimension of the table, spare + 1 wide (4,096 nodes, TP 16 x (DP 8 x 20 + DP 4 x
# 200), 8 spare: 6.5 s a path against 0.5 s with none); priced, the last job's ring total is one more row of the
# master LP (a Lagrangian relaxation of "exactly the rings asked", valid at any price): that request 4.9 % after
# 58 s -> optimal in 26-32 s.  At 8, not lower: a job of as many as fit leaves at most D - 1 spare, and those
# requests were measured good with the total held
FREE_TOTAL_SPARE = 8


@dataclass
class _Rows:
    """The choices of one ToR (one in/out pair or joint option each), as arrays.

    ``si``/``so``: left / right state ids; ``free``: pure rings its capacity still allows; ``rings``: rings its
    options close in groups (alone groups, emitted items); ``rings0``: those of the first job; ``base``: the
    options' weighted cost; ``item``: per row the two options' items as ``job * width + size`` (size 0: none);
    ``opt``: the two options' indices (-1: a joint option's second); ``by_job``: the closed rings per job (rows x
    jobs; priced per job when there are more than two).
    """

    si: np.ndarray
    so: np.ndarray
    free: np.ndarray
    rings: np.ndarray
    rings0: np.ndarray
    base: np.ndarray
    item: np.ndarray
    opt: np.ndarray
    by_job: np.ndarray


def _rows(blocks: Blocks, t: int, opts, jobs_of, dps, weights, width: int, gid) -> _Rows:
    """ToR ``t``'s in x out pairs whose splits fit its capacity, then its joint options (the one-job DP's
    :func:`~solvers.orchestrator.line_bound._choice_arrays`, each option closing its own job's rings), as
    :class:`_Rows`; rows equal in everything but cost reduced to the cheapest."""
    n = len(opts)
    job = np.asarray(jobs_of, dtype=np.int64).reshape(n)
    cols = np.array([(o.cost, o.emit, o.alone) for o in opts], dtype=np.int64).reshape(n, 3)
    D = np.asarray(dps, dtype=np.int64)[job]
    ch = _choice_arrays(blocks, t, opts, D, gid)
    a, b = ch.idx[:, 0], ch.idx[:, 1]  # b = -1 on a joint row: the zero appended below

    def per_option(x):
        return np.append(x, 0)

    cost = per_option(cols[:, 0] * np.asarray(weights, dtype=float)[job])
    closed = per_option(D * cols[:, 2] + cols[:, 1])
    code = per_option(np.where(cols[:, 1] > 0, job * width + cols[:, 1], 0))
    # each job's closed rings but the last's (the rest of them): the first's counted on the path, the middle
    # jobs' priced apart (three jobs or more)
    of_job = [np.where(per_option(job) == j, closed, 0) for j in range(len(dps) - 1)]
    key = np.stack([ch.si, ch.so, ch.free, closed[a] + closed[b], of_job[0][a] + of_job[0][b], code[a], code[b]]
                   + [x[a] + x[b] for x in of_job[1:]])
    base = cost[a] + cost[b]
    pick = _cheapest(key, base)
    key = key[:, pick]
    by_job = np.vstack([key[4], key[7:], key[3] - key[4] - key[7:].sum(axis=0)]).T  # the last job's: the rest
    return _Rows(key[0], key[1], key[2], key[3], key[4], base[pick], key[5:7].T, ch.idx[pick], by_job)


def _cheapest(key: np.ndarray, cost: np.ndarray) -> np.ndarray:
    """Indices of one least-``cost`` column of each distinct column of ``key`` (one lexicographic sort)."""
    order = np.lexsort((cost,) + tuple(key[::-1]))
    return order[_run_starts(key[:, order])]  # sorted by key, then cost: the first of a key is cheapest


def _run_starts(ks: np.ndarray) -> np.ndarray:
    """Mask of the columns of the column-sorted ``ks`` that differ from the one before (each run's first)."""
    first = np.ones(ks.shape[1], dtype=bool)
    first[1:] = np.any(ks[:, 1:] != ks[:, :-1], axis=0)
    return first


@dataclass
class _Prepared:
    """What every pricing round reuses: the rows, their keys and moves, the states and the suffix maxima."""

    rows: list            # per ToR: _Rows
    opts: list            # per ToR: its tagged options (job_options), what _Rows.opt indexes
    S: int                # boundary states
    fmax: int
    ends: list            # (wrap state, suf) with a path of enough rings
    need: int             # rings in groups, all jobs
    N0: int               # rings in groups of the first job, counted along the path (0: not counted, priced)
    N: tuple              # rings in groups of each job
    keys: list = field(default_factory=list)    # per ToR: _Keys
    free: bool = False    # the ring total is priced, not held: no spare-ring dimension (every job after the first priced)
    plans: dict = field(default_factory=dict)   # (wrap state, ToR) -> its _plan


@dataclass
class _Keys:
    """A ToR's rows grouped by what the DP reads of them (si, so, free, rings, rings0): ``order`` sorts the rows by
    it, ``start`` begins each group there, ``uk`` (5 x groups) the distinct keys.  The prices change only which row
    of a group is cheapest, so this is computed once."""

    order: np.ndarray
    start: np.ndarray
    uk: np.ndarray


def _keys(r: _Rows, counted: bool = True) -> _Keys:
    key = np.stack([r.si, r.so, r.free, r.rings, r.rings0 if counted else np.zeros_like(r.rings0)])
    order = np.lexsort(tuple(key[::-1]))
    ks = key[:, order]
    start = np.flatnonzero(_run_starts(ks))
    return _Keys(order, start, ks[:, start])


def _prepare(blocks: Blocks, dps, counts, weights, budget, options_of, counted: bool = True) -> _Prepared | None:
    """Every ToR's rows (:func:`_rows`) and keys, and per wrap state with a path of enough rings the suffix maxima
    ``suf[t, s]`` (most rings ToRs ``t..`` put in groups from state ``s``); None when the DP table is too large.

    ``counted``: the first job's rings are counted along the line; where the table with the count (each cell
    ``N_0 + 1`` times) would be too large, or when False, the first job's total is priced like a middle job's
    (``N0 = 0`` on the path: a weaker bound, the table of the one-job DP)."""
    T = blocks.T
    ids: dict = {NONE: 0}
    gid = lambda s: ids.setdefault(s, len(ids))  # noqa: E731
    width = max(dps)
    N0, need = dps[0] * counts[0] if counted else 0, sum(D * C for D, C in zip(dps, counts))
    rows, tagged, listed = [], [], 0
    for t in range(T):
        if budget is not None:
            budget.check()
        if (T + 1) * len(ids) * (N0 + 1) > MAX_CELLS:
            if N0 == 0:
                # too large already with no slack: said before the rest is listed (16,384 nodes, DP 4 x 100 +
                # DP 8 x 50: listing every ToR's rows and options first reached 6.6 GB)
                return None
            N0 = 0  # without the count
        opts, of = job_options(blocks, t, dps, options_of=options_of)
        rows.append(_rows(blocks, t, opts, of, dps, weights, width, gid))
        tagged.append(opts)
        listed += rows[-1].si.size
        if listed > MAX_ROWS or (t >= 8 and listed * T > MAX_ROWS * (t + 1) * 1.5):  # so far, or on this pace
            return None
    S = len(ids)
    wraps = sorted(set(rows[0].si.tolist()) & set(rows[T - 1].so.tolist())) if blocks.closed and T > 1 else [0]
    sufs = [(w, _suffix([_SufView(r) for r in rows], T, S, w)) for w in wraps]
    sufs = [(w, suf) for w, suf in sufs if suf[0, w] >= need]
    spare = max([int(suf[0, w]) - need for w, suf in sufs] + [0])
    held = (T + 1) * S * (spare + 1)
    if held * (N0 + 1) > MAX_CELLS:
        N0 = 0  # (4,096 nodes, k = 3, TP 32, three jobs: 339 states x slack 7 x 41 counts x 257 boundaries)
    # the total priced where it replaces the held total beside the first job's count, or where even the held
    # total alone is too large; not in place of the count dropped (that case, priced with the count kept, took
    # 55.6 s against 20.2 s: a table 41 counts wide instead of 8 spare)
    free = spare >= FREE_TOTAL_SPARE and (N0 > 0 or held > MAX_CELLS)
    if (T + 1) * S * (1 if free else spare + 1) > MAX_CELLS:
        return None
    fmax = max([int(r.free.max()) for r in rows if r.free.size] + [0])
    return _Prepared(rows, tagged, S, fmax, sufs, need, N0, tuple(D * C for D, C in zip(dps, counts)),
                     [_keys(r, N0 > 0) for r in rows], free=free)


class _SufView:
    """What :func:`~solvers.orchestrator.line_bound._suffix` reads of a ToR's rows."""

    def __init__(self, r: _Rows):
        self.si, self.so, self.rings = r.si, r.so, r.rings + r.free


@dataclass(frozen=True)
class JointBound:
    """The several-job bound (objective units) and whether its pricing converged: then it is the Lagrangian dual,
    at least the LP relaxation of the same block model (its ToR choices are solved as integers)."""

    bound: float
    converged: bool
    # per ToR, the tagged options of the paths the last master LP uses (for model_jobs' keep=)
    options: tuple = field(default=(), repr=False)


@dataclass(frozen=True)
class _Path:
    cost: float           # at the prices it was found with
    items: tuple          # per job, the pooled items of each size (index 0 unused)
    wrap: int
    choice: tuple = ()    # per ToR, the indices of its options on the path
    rings: tuple = ()     # per job, its rings in groups


def joint_line_bound(blocks: Blocks, dps: list[int], counts: list[int], weights: list[float], *, budget=None,
                     options_of=tor_options, upper: float | None = None,
                     max_iter: int = 60) -> JointBound | None:
    """The module docstring's bound (objective units: ``weights`` per slot crossing of each job), its pools
    priced as :func:`~solvers.orchestrator.line_bound.packed_bound` prices one job's (Lagrangian: the pooled
    items of each job and size put back with multipliers from a master LP over the paths found and each job's
    partitions of ``D_j``, with three jobs or more the middle jobs' ring totals too; for **any** prices the
    shortest path is a valid bound, weak duality).  None: no path, fewer than two jobs, too large to run, or out
    of time before the first path.

    Parameters
    ----------
    blocks : Blocks
        The ToR blocks (or the three-block view, with its ``options_of``).
    dps, counts : list of int
        Rings per DP group and groups of each job (the first's rings are counted along the path).
    weights : list of float
        Objective units per slot crossing of each job.
    budget : Budget, optional
        Checked at every ToR; once it is spent the best bound found so far is returned (None if none).
    options_of : callable
        One job's options of a ToR, as in :func:`~solvers.orchestrator.model_jobs.job_options`.
    upper : float, optional
        Cost of a known placement: pricing stops once the bound reaches it.
    max_iter : int
        Pricing rounds at most.
    """
    if (len(dps) < 2 or min(counts) < 1 or min(dps) < 1 or (blocks.closed and 1 < blocks.T <= max(dps))
            or max(partition_count(D) for D in dps) > MAX_PARTITIONS):
        return None  # a straddle item could close around a short circle (line_bound.py); a master LP too large
    try:
        prep = _prepare(blocks, dps, counts, weights, budget, options_of)
        if prep is None or not prep.ends:
            return None
        prices = [np.zeros(D) for D in dps]
        t = time.perf_counter()
        first = _shortest(prep, dps, weights, blocks.m, prices, budget)
        t_path = time.perf_counter() - t
    except BudgetSpent:
        return None
    if first is None:
        return None
    left = None if budget is None else budget.remaining()
    if left is not None and left < PRICING_ROUNDS * t_path:  # no time to converge: the zero-price bound, valid
        return JointBound(first.cost, False, tuple({prep.opts[t][i] for i in idx}
                                                   for t, idx in enumerate(first.choice)))
    return _column_generation(prep, dps, weights, blocks.m, first, budget, upper, max_iter)


def _column_generation(prep: _Prepared, dps, weights, m: int, first: _Path, budget, upper,
                       max_iter: int) -> JointBound:
    """The best Lagrangian bound over the pricing rounds (:func:`joint_line_bound`), from the zero-price path."""
    parts = [partitions(D) for D in dps]
    sizes = [(j, v) for j, D in enumerate(dps) for v in range(1, D)]
    middle = _middle_jobs(dps, prep.N0 > 0, prep.free)
    paths, best, converged = [first], first.cost, not sizes and not middle
    used = [1.0]
    # an artificial unit of a row (keeps the master feasible) bounds the prices: small first, so that the first
    # rounds do not price at +-big (1,024 nodes, three jobs: six rounds at bounds near -1e5), grown while the
    # master uses it where no path prices out (not its optimum yet)
    big, big_max = m * max(max(weights), 1.0), BIG_ITEMS * m * max(dps) * max(max(weights), 1.0)
    center = ([np.zeros(D) for D in dps], np.zeros(len(dps)))  # the duals of the best bound (zero: the first path)
    lp, rounds = None, 0
    while rounds < max_iter:
        if (not sizes and not middle) or (upper is not None and best >= upper - 1e-9):
            break
        if lp is None:
            # the middle jobs' ring totals are extra rows (three jobs or more: the first's are counted on the path,
            # the last's follow)
            lp = master_lp([p.cost for p in paths], [p.items for p in paths], dps, parts, big,
                           [[p.rings[j] for j in middle] for p in paths], [prep.N[j] for j in middle])
            if lp is None:
                break
            used, alpha = lp.weights, SMOOTHING
            lp_nu = np.zeros(len(dps))
            lp_nu[middle] = lp.extra
        rounds += 1
        pi = [alpha * c + (1 - alpha) * np.asarray(x) for c, x in zip(center[0], lp.pi)]
        nu = alpha * center[1] + (1 - alpha) * lp_nu
        prices = [np.array(item_prices(list(pi[j]), parts[j], D)) for j, D in enumerate(dps)]
        try:
            path = _shortest(prep, dps, weights, m, prices, budget, mu=-nu)
        except BudgetSpent:
            break
        if path is None:
            break
        if path.cost > best:
            best, center = path.cost, (pi, nu)
        orig = (path.cost - sum(prices[j][v] * path.items[j][v] for j, v in sizes)
                + float(nu @ (np.asarray(path.rings) - np.asarray(prep.N))))
        reduced = (orig - lp.convexity - sum(lp.pi[j][v] * path.items[j][v] for j, v in sizes)
                   - float(lp_nu @ np.asarray(path.rings)))
        seen = any(p.items == path.items and p.rings == path.rings and p.wrap == path.wrap
                   and abs(p.cost - orig) < 1e-9 for p in paths)
        if reduced > -1e-7 or seen:
            if alpha > 0:  # a mis-price of the smoothed duals: price at the master's own
                alpha = 0.0
                continue
            if lp.artificial > 1e-9 and big < big_max:
                big, lp = min(big * BIG_GROWTH, big_max), None  # the prices were held in: free them, price again
                continue
            # no path prices out: the master LP's optimum is the Lagrangian dual (else a path found before, a tie
            # at the tolerance: no progress)
            converged = reduced > -1e-7 and lp.artificial <= 1e-9
            break
        paths.append(_Path(orig, path.items, path.wrap, path.choice, path.rings))
        used, lp = used + [0.0], None
    keep = [set() for _ in prep.opts]
    for p, wt in zip(paths, used):
        if wt > 1e-9 or p is paths[-1]:
            for t, idx in enumerate(p.choice):
                keep[t].update(prep.opts[t][i] for i in idx)
    return JointBound(best, converged, tuple(keep))


def _middle_jobs(dps, counted: bool = True, free: bool = False) -> list[int]:
    """The jobs whose ring totals the path does not hold (neither counted, the first unless not ``counted``, nor
    implied, the last unless the ring total is ``free``): the master LP prices them."""
    return list(range(1 if counted else 0, len(dps) - (0 if free else 1)))


def _shortest(prep: _Prepared, dps, weights, m: int, prices, budget, mu=None) -> _Path | None:
    """The least-cost path at item ``prices`` and ring prices ``mu`` (per job, the first's 0) over every wrap state,
    with the items and rings it pools (None: no path).  Its cost, ``- sum_j mu_j N_j`` included, is the bound."""
    J, width = len(dps), max(dps)
    mu = np.zeros(J) if mu is None else np.asarray(mu, dtype=float)
    table = np.zeros(J * width)
    for j in range(J):
        table[j * width:j * width + dps[j]] = prices[j]
    pieces = [_piece_costs(weights[j] * m, dps[j], list(prices[j]), prep.fmax) for j in range(J)]
    first = 1 if prep.N0 > 0 else 0  # the first job's rings are dealt with the others' when not counted
    rest = _rest_pieces([p[0] for p in pieces[first:]], mu[first:])
    priced = []  # per ToR: (each row's cost, each key's least cost) at these prices
    for r, k in zip(prep.rows, prep.keys):
        cost = r.base + table[r.item[:, 0]] + table[r.item[:, 1]] + r.by_job @ mu
        priced.append((cost, np.minimum.reduceat(cost[k.order], k.start) if k.start.size else cost[:0]))
    split = [np.asarray(pieces[0][0]), rest[0]]
    best = None
    for w, suf in prep.ends:
        run = _forward(priced, suf, w, prep, split, budget)
        if run is not None and (best is None or run[0] < best[0]):
            best = (run[0], run[1], w, suf)
    if best is None:
        return None
    cost, layers, w, suf = best
    items, choice, rings = _trace_back(priced, prep, suf, w, layers, split, pieces, (first, rest[1]), dps, width)
    return _Path(cost - float(mu @ np.asarray(prep.N, dtype=float)), items, w, choice, rings)


def _rest_pieces(costs, mu) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """The cheapest deal of ``u`` pure rings among the jobs after the first (their piece ``costs`` per ``u``, each
    ring of job ``j`` priced ``mu[j]``): a min-plus convolution; per ``u`` its cost and each job's share."""
    F = len(costs[0])
    u = np.arange(F)
    best = np.asarray(costs[0], dtype=float) + mu[0] * u
    how: list[tuple[int, ...]] = [(x,) for x in range(F)]
    for c, price in zip(costs[1:], mu[1:]):
        add = np.asarray(c, dtype=float) + price * u
        new, new_how = np.full(F, np.inf), list(how)
        for a in range(F):  # a rings to the jobs so far, the rest to this one
            total = best[a] + add[:F - a]
            better = total < new[a:] - 1e-12
            new[a:] = np.where(better, total, new[a:])
            for x in np.flatnonzero(better).tolist():
                new_how[a + x] = how[a] + (x,)
        best, how = new, new_how
    return best, how


def _forward(priced, suf, w: int, prep: _Prepared, piece, budget):
    """(least cost, every boundary's layer) from state ``w`` with ``d = slack``, ``r = 0`` back to ``w`` with
    ``d = 0``, ``r = N_0``; None without such a path."""
    S, N0, F = prep.S, prep.N0, prep.fmax + 1
    slack, W = _slack(prep, suf, w)
    R = N0 + 1
    layer = np.full((S, W, R), np.inf)
    layer[w, W - 1, 0] = 0.0
    layers = [layer]
    for t, (_, cost) in enumerate(priced):
        if budget is not None:
            budget.check()
        if (w, t) not in prep.plans:
            prep.plans[w, t] = _plan(prep.keys[t].uk, suf[t], suf[t + 1], F, W, R, prep.free)
        mid = _through(prep.plans[w, t], prep.keys[t].uk[0], cost, layer, S, F, W, R)
        new = np.full((S, W, R), np.inf)
        for f, delta, shift, u0, add in _splits(F, slack, N0, piece, prep.free):
            np.minimum(new[:, :W - shift, u0:], mid[:, f, shift:, :R - u0] + add, out=new[:, :W - shift, u0:])
        layer = new
        layers.append(layer)
    out = layer[w, 0, N0]
    return (float(out), layers) if np.isfinite(out) else None


def _slack(prep: _Prepared, suf, w: int) -> tuple[int, int]:
    """(the rings a path from wrap ``w`` may leave out of groups, the width of the spare-ring dimension): with a
    priced total any number (at most the free rings of a ToR at a time) and no dimension."""
    slack = int(suf[0, w]) - prep.need
    return (prep.fmax, 1) if prep.free else (slack, slack + 1)


def _splits(F: int, slack: int, N0: int, piece, free: bool = False):
    """(f, delta, shift, u0, cost): ``f`` free pure rings, ``delta`` of them unused (``shift``: what that takes off
    the spare-ring index; 0 with a priced total, where unused rings are not counted down), ``u0`` to the first
    job's pure groups and pieces, the rest to the second's."""
    for f in range(F):
        for delta in range(min(f, slack) + 1):
            for u0 in range(min(f - delta, N0) + 1):
                yield f, delta, 0 if free else delta, u0, piece[0][u0] + piece[1][f - delta - u0]


def _valid(key, here, nxt, slack: int | None, N0: int):
    """(which keys a path may take here, the rings each leaves out of groups); ``slack`` None: any number (a priced
    total), and the loss is then 0 (not counted)."""
    si, so, free, rings, rings0 = key[:5]
    ok = (here[si] >= 0) & (nxt[so] >= 0)
    loss = here[si] - rings - free - nxt[so]  # >= 0 where ok: suf is a maximum
    if slack is None:
        return ok & (rings0 <= N0), np.zeros_like(loss)
    return ok & (loss <= slack) & (rings0 <= N0), loss


def _plan(key, here, nxt, F: int, W: int, R: int, free: bool = False) -> list:
    """How a ToR's keys move (d, r) (price-independent): per (loss, job-0 rings) the keys sorted by target
    (right state, free rings), where each target's run starts, and the targets."""
    so, rings0 = key[1], key[4]
    ok, loss = _valid(key, here, nxt, None if free else W - 1, R - 1)
    target = so * F + key[2]
    plan = []
    for lo, r0 in sorted(set(zip(loss[ok].tolist(), rings0[ok].tolist()))):
        g = np.flatnonzero(ok & (loss == lo) & (rings0 == r0))
        g = g[np.argsort(target[g], kind="stable")]
        tg = target[g]
        starts = np.flatnonzero(np.r_[True, tg[1:] != tg[:-1]])
        plan.append((lo, r0, g, starts, tg[starts]))
    return plan


def _through(plan, si, cost, layer, S: int, F: int, W: int, R: int) -> np.ndarray:
    """``mid[so, f, d0, r']``: least cost after the ToR's options (keys ``si``... at ``cost``), before its free
    rings are split; ``d0 = d - loss``, ``r' = r + r0``."""
    mid = np.full((S * F, W, R), np.inf)
    for lo, r0, g, starts, tg in plan:
        red = np.minimum.reduceat(layer[si[g], lo:, :R - r0] + cost[g][:, None, None], starts, axis=0)
        mid[tg, :W - lo, r0:] = np.minimum(mid[tg, :W - lo, r0:], red)
    return mid.reshape(S, F, W, R)


def _trace_back(priced, prep: _Prepared, suf, w: int, layers, piece, pieces, rest, dps, width: int) -> tuple:
    """(the pooled items per job and size, per ToR the option indices, the rings per job) of a least-cost path
    ending in ``w`` with ``d = 0``, ``r = N_0``; ``piece`` the first job's and the rest's split costs, ``pieces``
    each job's (costs, piece sizes), ``rest`` (the rest's first job, their deals: :func:`_rest_pieces`)."""
    items = [[0] * D for D in dps]
    rings = [0] * len(pieces)
    choice: list = [()] * len(priced)
    s, d, r = w, 0, prep.N0
    S, F = prep.S, prep.fmax + 1
    slack, W = _slack(prep, suf, w)
    R = prep.N0 + 1
    for t in range(len(priced) - 1, -1, -1):
        row_cost, key_cost = priced[t]
        ks = prep.keys[t]
        into = np.flatnonzero(ks.uk[1] == s)  # only the keys into state s: the step's minimum for them alone
        key, cost = ks.uk[:, into], key_cost[into]
        prev, target = layers[t], layers[t + 1][s, d, r]
        mid = _through(_plan(key, suf[t], suf[t + 1], F, W, R, prep.free), key[0], cost, prev, S, F, W, R)
        f, delta, shift, u0 = next((f, delta, shift, u0)
                                   for f, delta, shift, u0, add in _splits(F, slack, prep.N0, piece, prep.free)
                                   if d + shift < W and r - u0 >= 0 and f - delta - u0 >= 0
                                   and np.isclose(mid[s, f, d + shift, r - u0] + add, target, rtol=0, atol=1e-7))
        for j, u in [(0, u0)] + list(enumerate(rest[1][f - delta - u0], start=rest[0])):
            rings[j] += u
            for v in pieces[j][1][u]:
                items[j][v] += 1
        d0, r1 = d + shift, r - u0
        ok, loss = _valid(key, suf[t], suf[t + 1], None if prep.free else slack, prep.N0)
        si, so, fr, _, rings0 = key[:5]
        cand = np.flatnonzero(ok & (so == s) & (fr == f) & (d0 + loss < W) & (r1 - rings0 >= 0))
        vals = prev[si[cand], d0 + loss[cand], r1 - rings0[cand]] + cost[cand]
        i = cand[int(np.flatnonzero(np.isclose(vals, mid[s, f, d0, r1], rtol=0, atol=1e-7))[0])]
        lo_, hi_ = ks.start[into[i]], (ks.start[into[i] + 1] if into[i] + 1 < ks.start.size else ks.order.size)
        group = ks.order[lo_:hi_]
        row = group[int(np.argmin(row_cost[group]))]  # the key's cheapest row: its options and items
        choice[t] = tuple(int(x) for x in prep.rows[t].opt[row] if x >= 0)
        for code in prep.rows[t].item[row]:
            if code:
                items[code // width][code % width] += 1
        for j, x in enumerate(prep.rows[t].by_job[row].tolist()):
            rings[j] += x
        s, d, r = int(si[i]), int(d0 + loss[i]), int(r1 - rings0[i])
    return tuple(tuple(x) for x in items), tuple(choice), tuple(rings)
