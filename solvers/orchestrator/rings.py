"""Which rings a k-hop line can form: candidate rings (explicit model) and ToR blocks (block model).

Ring rule (as :mod:`solvers.allocation.khop`): a TP ring of ``m = TP / g``
nodes is ``m`` healthy nodes in hop order, each hop at most ``k`` positions
forward (it skips at most ``k - 1`` nodes); on a closed line hops may wrap.
The *span* of a ring is the stretch of positions from its first to its last
node.  The orchestrator's rings are **non-crossing**: spans are disjoint
(a ring never interleaves with another).  That never lowers the maximum
ring count (the greedy cut of :mod:`solvers.allocation.segments` is
non-crossing and optimal) and it keeps the placement model exact and small;
interleaved rings, which the optics also allow, are not considered.

Two views are built here:

* :func:`candidate_rings`: every ring, reduced by dominance: among rings
  with the same first node and the same ToR *signature* (ToR of each slot)
  only the shortest span is kept (same cost, and its span lies inside the
  others', so it never conflicts more).
* :func:`block_structure`: when every ToR's nodes are one contiguous stretch
  of the line ("ToR blocks", e.g. ``tor_wiring=contiguous``) and every block
  is at least ``(m - 1) k`` positions long, a ring lies in one block (*pure*)
  or straddles one block boundary (*straddle*, ``b`` slots in the left
  block and ``m - b`` in the right one).  With non-crossing rings at most
  one ring straddles each boundary, and it may as well use the ``b`` last
  healthy nodes left of the boundary and the ``m - b`` first right of it
  (the *tight* straddle: same signature, and it leaves each block the most
  room).  Each block then holds at most ``cap[t][(bl, br)]`` pure rings,
  given the splits ``bl`` / ``br`` of its left / right straddles (0: none).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.errors import FabricError
from solvers.allocation.segments import count_line_blocks, line_blocks
from solvers.orchestrator.space import Line

MAX_CANDIDATES = 400_000


class TooManyCandidates(FabricError):
    """More candidate rings than the explicit model can hold (the orchestration then keeps the greedy)."""


@dataclass(frozen=True)
class Candidate:
    """A possible ring.

    Attributes
    ----------
    slots : tuple of int
        Positions in hop (= rank) order.
    start, length : int
        Its span: ``length`` positions from ``start`` (modulo the line length when closed).
    sig : tuple of int
        Dense ToR of each slot.
    """

    slots: tuple[int, ...]
    start: int
    length: int
    sig: tuple[int, ...]


def candidate_rings(line: Line, m: int, limit: int = MAX_CANDIDATES, budget=None) -> list[Candidate]:
    """All non-dominated rings of ``m`` nodes (module docstring).

    ``budget`` (a :class:`solvers.orchestrator.run.Budget`) is checked at every start position.

    Raises
    ------
    TooManyCandidates
        More than ``limit`` candidates (the explicit model would not fit).
    """
    n, k, closed = line.n, line.k, line.closed
    ok = line.space.healthy
    tor = line.space.tor
    best: dict[tuple[int, tuple[int, ...]], Candidate] = {}
    visited = 0
    for start in np.flatnonzero(ok).tolist():
        if budget is not None:
            budget.check()
        stack = [(start, (start,))]
        while stack:
            last, path = stack.pop()
            if len(path) == m:
                length = path[-1] - start + 1
                slots = tuple(p % n for p in path)
                sig = tuple(int(tor[p]) for p in slots)
                key = (start, sig)
                cur = best.get(key)
                if cur is None or length < cur.length:
                    best[key] = Candidate(slots, start, length, sig)
                visited += 1
                if visited > limit:
                    raise TooManyCandidates("tp", f"more than {limit} candidate rings: this line is too large for "
                                              "the explicit model; use --solver greedy or ToR blocks")
                continue
            for nxt in range(last + 1, last + k + 1):
                if closed:
                    if nxt - start >= n:
                        break
                elif nxt >= n:
                    break
                if ok[nxt % n]:
                    stack.append((nxt, path + (nxt,)))
    return sorted(best.values(), key=lambda c: (c.start, c.length, c.sig))


def span(c: Candidate, n: int) -> range | list[int]:
    """Positions covered by a candidate's span."""
    if c.start + c.length <= n:
        return range(c.start, c.start + c.length)
    return [(c.start + i) % n for i in range(c.length)]


def max_rings(line: Line, m: int) -> list[tuple[int, ...]]:
    """A maximum set of rings: the greedy cut of :func:`solvers.allocation.segments.line_blocks`."""
    blk = line_blocks(line.space.healthy, line.k, m, line.closed)
    return [tuple(int(x) for x in row) for row in blk]


# ------------------------------------------------------------------------------------------ ToR blocks
@dataclass(frozen=True)
class Blocks:
    """The ToR-block view of a line (module docstring).

    Attributes
    ----------
    m : int
    T : int
        Blocks (= ToRs) in line order; block ``t`` is dense ToR ``tor[t]``.
    closed : bool
    rot : int
        Block 0 starts at position ``rot``.
    healthy : tuple of ndarray
        Healthy positions of each block, in line order (unwrapped: ``rot``-relative + ``rot``).
    left, right : tuple of (int or None)
        Boundary left / right of each block (boundary ``b`` joins blocks ``b`` and ``b + 1 mod T``).
    straddle : tuple of dict
        Per boundary: split ``b`` -> the tight straddling ring (positions in rank order).
    cap : tuple of dict
        Per block: (left split, right split) -> most pure rings; absent pairs are incompatible.
    exact : bool
        No ring of the line can span three blocks, so the view holds every ring.  When False
        (``allow_short``), rings that would span three blocks are left out: a model of this view
        is exact for placements without such rings only.
    """

    m: int
    T: int
    closed: bool
    rot: int
    tor: tuple[int, ...]
    healthy: tuple[np.ndarray, ...]
    left: tuple[int | None, ...]
    right: tuple[int | None, ...]
    straddle: tuple[dict[int, tuple[int, ...]], ...]
    cap: tuple[dict[tuple[int, int], int], ...]
    n: int
    k: int
    exact: bool = True
    spanned: tuple[tuple[int, int], ...] = ()

    @property
    def n_boundaries(self) -> int:
        return len(self.straddle)

    def pure_rings(self, t: int, bl: int, br: int) -> list[tuple[int, ...]]:
        """The pure rings of block ``t`` between its straddles (split 0: none), greedy in line order."""
        H = self.healthy[t]
        if self.T == 1:
            mask = np.zeros(self.n, dtype=bool)
            mask[H % self.n] = True
            return [tuple(int(x) for x in row) for row in line_blocks(mask, self.k, self.m, self.closed)]
        head = self.m - bl if bl else 0
        tail = br if br else 0
        region = H[head:H.size - tail]
        if region.size < self.m:
            return []
        lo = int(region[0])
        avail = np.zeros(int(region[-1]) - lo + 1, dtype=bool)
        avail[region - lo] = True
        return [tuple(int((x + lo) % self.n) for x in row) for row in line_blocks(avail, self.k, self.m, False)]


def _runs(tor: np.ndarray) -> list[tuple[int, int, int]]:
    """(tor, start, length) of maximal runs of equal ToR along the positions."""
    change = np.flatnonzero(np.diff(tor)) + 1
    starts = np.concatenate([[0], change])
    ends = np.concatenate([change, [tor.size]])
    return [(int(tor[s]), int(s), int(e - s)) for s, e in zip(starts, ends)]


def spans_three_blocks(healthy: np.ndarray, runs: list[tuple[int, int, int]], m: int, k: int, closed: bool) -> bool:
    """Whether some ring of ``m`` healthy nodes (hops of at most ``k`` positions) can cover a whole block."""
    return bool(spannable_blocks(healthy, runs, m, k, closed))


def spannable_blocks(healthy: np.ndarray, runs: list[tuple[int, int, int]], m: int, k: int,
                     closed: bool) -> list[int]:
    """The blocks (indices into ``runs``) that some ring of ``m`` healthy nodes can cover whole.

    A ring that spans three blocks covers the middle one: its nodes go from
    a healthy node before the block to one after it, hop by hop.  The fewest
    nodes such a chain needs is a shortest path over the block's healthy
    nodes (``need``); a ring can do it only when ``need <= m``.  Faults make
    this stricter than the fault-free rule ``length >= (m - 1) k``.

    Parameters
    ----------
    healthy : ndarray of bool
        Health of each position in line order (rotated so that no run wraps).
    runs : list of (tor, start, length)
        The blocks, in that order.
    """
    n = healthy.size
    T = len(runs)
    out = []
    for t, (_, s, L) in enumerate(runs):
        if not closed and (t == 0 or t == T - 1):
            continue  # an end block has no block beyond it on one side
        if L > (m - 1) * k:
            continue  # even a fault-free chain needs more than m nodes
        lo, hi = s - k, s + L + k  # the chain's first node lies in [s - k, s), its last in [s + L, s + L + k)
        if not closed and (lo < 0 or hi > n):
            lo, hi = max(lo, 0), min(hi, n)
        pos = np.arange(lo, hi)
        ok = healthy[pos % n]
        need = np.full(pos.size, np.inf)
        for i, p in enumerate(pos):
            if not ok[i]:
                continue
            if p < s:
                need[i] = 1
            else:
                prev = need[max(0, i - k):i]
                if prev.size and np.isfinite(prev.min()):
                    need[i] = prev.min() + 1
            if p >= s + L and need[i] <= m:
                out.append(t)
                break
    return out


def three_block_rings_excluded(line: Line, m: int, spanned: tuple[tuple[int, int], ...], need: int) -> bool:
    """Whether no placement of ``need`` rings can hold a ring that covers a whole block (a counting proof).

    A ring covering block ``t`` has a node before the block and one after
    it, so its span covers the block and at least the nearest healthy node
    on each side.  Every other ring lies outside that span: they are rings
    of the line with those positions down, at most ``count_t`` of them (the
    maximum ring count,
    :func:`solvers.allocation.segments.count_line_blocks`).  If
    ``count_t + 1 < need`` for every coverable block, every placement with
    ``need`` rings keeps its rings within two blocks, and the block view is
    exact for it.

    Parameters
    ----------
    spanned : tuple of (start, length)
        Coverable blocks: first position (unwrapped) and length.
    need : int
        Rings the placement uses (instances x DP x PP, stage 1).
    """
    if not spanned:
        return True
    n = line.n
    ok = line.space.healthy
    bad = np.flatnonzero(~ok)
    rows, pos = [], []
    for i, (s, L) in enumerate(spanned):
        lo, hi = s - 1, s + L  # the nearest healthy node before the block and after it (the chain has one each)
        while not ok[lo % n] and s - lo < n:
            lo -= 1
        while not ok[hi % n] and hi - s < 2 * n:
            hi += 1
        down = np.union1d(bad, np.arange(lo, hi + 1) % n)
        rows.append(np.full(down.size, i, dtype=np.int64))
        pos.append(down)
    counts = count_line_blocks(np.concatenate(rows), np.concatenate(pos), len(spanned), n, line.k, m, line.closed)
    return bool(np.all(counts + 1 < need))


def block_structure(line: Line, m: int, allow_short: bool = False) -> Blocks | None:
    """The ToR-block view, or None when the line's ToRs are not blocks that no ring can span (see below).

    A line is a sequence of blocks when every ToR owns one stretch of
    positions.  The view is exact when no ring can span three blocks
    (:func:`spans_three_blocks`; on a fault-free line: blocks of at least
    ``(m - 1) k`` positions).  ``allow_short`` returns the view anyway, with
    ``exact=False``: it then holds only the rings within two blocks.
    """
    n, k, closed = line.n, line.k, line.closed
    tor = line.space.tor
    rot = 0
    if closed:
        # rotate so that position rot starts a ToR run: then no run wraps around the circle
        change = np.flatnonzero(tor != np.roll(tor, 1))
        rot = int(change[0]) if change.size else 0
    pos_all = np.arange(rot, rot + n)  # unwrapped positions, line order
    runs = _runs(tor[pos_all % n])
    tors = [r[0] for r in runs]
    if len(set(tors)) != len(tors):
        return None  # a ToR owns two stretches: not blocks
    T = len(runs)
    spanned = () if T == 1 else tuple(
        (rot + runs[t][1], runs[t][2]) for t in spannable_blocks(line.space.healthy[pos_all % n], runs, m, k, closed))
    exact = not spanned
    if not exact and not allow_short:
        return None  # a ring could span three ToRs
    healthy = []
    for _, s, L in runs:
        pos = pos_all[s:s + L]
        healthy.append(pos[line.space.healthy[pos % n]])
    if T == 1:
        cap = {(0, 0): len(line_blocks(line.space.healthy, k, m, closed))}
        return Blocks(m, 1, closed, rot, tuple(tors), tuple(healthy), (None,), (None,), (), (cap,), n, k)
    nb = T if closed else T - 1
    left = tuple((t - 1) % T if (closed or t > 0) else None for t in range(T))
    right = tuple(t if (closed or t < T - 1) else None for t in range(T))
    straddle = []
    for b in range(nb):
        A = healthy[b]
        B = healthy[(b + 1) % T] + (n if b == T - 1 else 0)  # the wrap boundary: unwrap the right block
        opts = {}
        for s in range(1, m):
            if A.size < s or B.size < m - s:
                continue
            ring = np.concatenate([A[A.size - s:], B[:m - s]])
            if np.all(np.diff(ring) <= k):
                opts[s] = tuple(int(x % n) for x in ring)
        straddle.append(opts)
    cap = []
    for t in range(T):
        H = healthy[t]
        L_opts = [0] + (sorted(straddle[left[t]]) if left[t] is not None else [])
        R_opts = [0] + (sorted(straddle[right[t]]) if right[t] is not None else [])
        table = {}
        for bl in L_opts:
            for br in R_opts:
                head = m - bl if bl else 0
                if head + br > H.size:
                    continue
                region = H[head:H.size - br]
                if region.size == 0:
                    table[(bl, br)] = 0
                    continue
                gaps = np.diff(region)
                seg_starts = np.concatenate([[0], np.flatnonzero(gaps > k) + 1, [region.size]])
                table[(bl, br)] = int(sum((e - s) // m for s, e in zip(seg_starts[:-1], seg_starts[1:])))
        cap.append(table)
    return Blocks(m, T, closed, rot, tuple(tors), tuple(healthy), left, right, tuple(straddle), tuple(cap), n, k,
                  exact, spanned)
