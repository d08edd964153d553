"""Blocks of ``m`` consecutive available units on lines that tolerate short gaps.

This is the combinatorial core of the k-hop ring (units = nodes, gaps of up
to ``k - 1`` unavailable nodes are skipped) and of the torus policy (units =
torus lines or planes, ``k = 1``: no skipping).

The rule
--------
Units ``0..L-1`` sit on a line (``closed``: a circle).  A block (a ring, a TP
group) is ``m`` available units ``u_1 < ... < u_m`` (in cyclic order when
closed) where every hop ``u_j -> u_{j+1}`` spans at most ``k`` positions and
crosses no *boundary* (a boundary ``c`` sits between units ``c - 1`` and
``c``: a hop that cannot be lit, see ``effects``).

**Claim.** The maximum number of disjoint blocks is
``sum over segments of floor(H_s / m)``, where the segments are what is left
after cutting the line at every run of ``>= k`` consecutive unavailable units
and at every boundary, and ``H_s`` counts a segment's available units.

*Proof.* Upper bound: a hop spans at most ``k`` positions, so it cannot jump
a run of ``k`` or more unavailable units, and by definition it cannot cross a
boundary; hence every block lies inside one segment, and a segment with
``H_s`` available units holds at most ``floor(H_s / m)`` disjoint blocks of
``m`` units.  Achievability: inside a segment, consecutive available units
are at most ``k`` apart (fewer than ``k`` unavailable units between them) and
no boundary separates them, so every ``m`` consecutive available units form
a block; cutting the segment's available units, in order, into runs of ``m``
gives ``floor(H_s / m)`` blocks.  A closed line with no cut at all is one
circular segment (blocks may wrap around position ``L - 1 -> 0``).  The
greedy cut (take the first ``m`` available units of a segment, repeat) is
what :func:`line_blocks` does; :func:`count_line_blocks` evaluates the sum
without forming blocks.  ``tests/solvers/test_allocation_khop.py`` checks the
claim against an exhaustive search over all ring placements (including
interleaved rings, which never do better) on every fault pattern of lines of
up to 12 nodes, ``k`` in 1..3, ``m`` in 1..4, open and closed.

With ``k = 1`` the rule is a plain ring: segments are the runs of available
units between unavailable ones.
"""

from __future__ import annotations

import numpy as np


def line_blocks(avail: np.ndarray, k: int, m: int, closed: bool,
                boundary_before: np.ndarray | None = None) -> np.ndarray:
    """The blocks the rule above forms on one line (exact path).

    Parameters
    ----------
    avail : ndarray of bool, shape (L,)
        Which units are available.
    k : int
        Longest hop in positions (>= 1).
    m : int
        Units per block (>= 1).
    closed : bool
        The line closes into a circle.
    boundary_before : ndarray of bool, shape (L,), optional
        ``boundary_before[c]``: no hop may cross between units ``c - 1`` and
        ``c`` (``c = 0``: between ``L - 1`` and 0, closed lines only).

    Returns
    -------
    ndarray of int, shape (n_blocks, m)
        Unit positions of each block in hop order.

    Examples
    --------
    >>> line_blocks(np.array([1, 0, 1, 1, 0, 0, 1, 1], bool), k=2, m=2, closed=False).tolist()
    [[0, 2], [6, 7]]
    """
    avail = np.asarray(avail, dtype=bool)
    L = avail.size
    h = np.flatnonzero(avail)
    H = h.size
    if H == 0 or H < m:
        return np.zeros((0, m), dtype=np.int64)
    bnd = np.zeros(L, dtype=bool) if boundary_before is None else np.asarray(boundary_before, dtype=bool)
    if not closed:
        bnd = bnd.copy()
        bnd[0] = False
    B = np.cumsum(bnd)  # boundaries at positions <= c

    # hop h[j] -> h[j+1] is allowed iff it spans <= k positions and crosses no boundary in (h[j], h[j+1]]
    ok = (np.diff(h) <= k) & (B[h[1:]] - B[h[:-1]] == 0)
    if closed and H >= 2:
        wrap_ok = (h[0] + L - h[-1] <= k) and (B[-1] - B[h[-1]] + B[h[0]] == 0)
    else:
        wrap_ok = False
    breaks = np.flatnonzero(~ok)  # break after h[j]
    seq = h
    brk = np.zeros(H, dtype=bool)  # brk[i]: a segment starts at seq[i]
    brk[0] = True
    if closed and wrap_ok and breaks.size:
        # the segment across the wrap: start the sequence after the first break
        s = int(breaks[0]) + 1
        seq = np.concatenate([h[s:], h[:s]])
        brk[:] = False
        brk[((breaks + 1 - s) % H)] = True
    else:
        brk[breaks + 1] = True
    seg = np.cumsum(brk) - 1
    starts = np.flatnonzero(brk)
    lengths = np.diff(np.append(starts, H))
    rank = np.arange(H) - starts[seg]
    keep = rank < (lengths // m * m)[seg]
    return seq[keep].reshape(-1, m).astype(np.int64)


def count_line_blocks(rows: np.ndarray, pos: np.ndarray, n_rows: int, length: int, k: int, m: int,
                      closed: bool, marker_rows: np.ndarray | None = None,
                      marker_pos: np.ndarray | None = None) -> np.ndarray:
    """Number of blocks per row, from sparse unavailable units (vectorised count path).

    Every row is one line of ``length`` units; the work is O(unavailable
    units + boundaries), with no loop over rows or units.

    Parameters
    ----------
    rows, pos : ndarray of int
        Unavailable units as (row, position) pairs, sorted by row then
        position, without duplicates.
    n_rows : int
    length : int
        Units per line.
    k, m, closed
        As in :func:`line_blocks`.
    marker_rows, marker_pos : ndarray of int, optional
        Boundaries as (row, c) pairs: no hop between units ``c - 1`` and ``c``
        (any order; duplicates allowed).

    Returns
    -------
    ndarray of int64, shape (n_rows,)
    """
    rows = np.asarray(rows, dtype=np.int64)
    pos = np.asarray(pos, dtype=np.int64)
    nnz = rows.size
    F = np.bincount(rows, minlength=n_rows)
    out = (length - F) // m  # rows without a cut: one segment of all available units
    row_off = np.concatenate([[0], np.cumsum(F)])

    # runs of consecutive unavailable units
    if nnz:
        new = np.ones(nnz, dtype=bool)
        new[1:] = (rows[1:] != rows[:-1]) | (pos[1:] != pos[:-1] + 1)
        sidx = np.flatnonzero(new)
        r_row = rows[sidx]
        r_start = pos[sidx]
        r_len = np.diff(np.append(sidx, nnz))
        r_fb = sidx - row_off[r_row]  # unavailable units before the run, in its row
        eff = r_len.copy()
        if closed:
            # a run touching position 0 and one touching L-1 are one run around the circle
            first = np.ones(sidx.size, dtype=bool)
            first[1:] = r_row[1:] != r_row[:-1]
            last = np.ones(sidx.size, dtype=bool)
            last[:-1] = r_row[:-1] != r_row[1:]
            fi, li = np.flatnonzero(first), np.flatnonzero(last)
            wrap = (r_start[fi] == 0) & (r_start[li] + r_len[li] == length) & (fi != li)
            both = r_len[fi[wrap]] + r_len[li[wrap]]
            eff[fi[wrap]] = both
            eff[li[wrap]] = both
        cut = eff >= k
        c_row, c_start, c_end, c_fb = r_row[cut], r_start[cut], r_start[cut] + r_len[cut], r_fb[cut]
        c_fbend = c_fb + r_len[cut]
    else:
        c_row = c_start = c_end = c_fb = c_fbend = np.zeros(0, dtype=np.int64)

    if marker_rows is not None and np.size(marker_rows):
        mr = np.asarray(marker_rows, dtype=np.int64)
        mp = np.asarray(marker_pos, dtype=np.int64)
        if closed:
            mp = mp % length
        else:
            keep = (mp > 0) & (mp < length)
            mr, mp = mr[keep], mp[keep]
        # unavailable units before position c in the row
        keys = rows * np.int64(length) + pos
        m_fb = np.searchsorted(keys, mr * np.int64(length) + mp) - row_off[mr]
        c_row = np.concatenate([c_row, mr])
        c_start = np.concatenate([c_start, mp])
        c_end = np.concatenate([c_end, mp])
        c_fb = np.concatenate([c_fb, m_fb])
        c_fbend = np.concatenate([c_fbend, m_fb])
        order = np.lexsort((c_end, c_start, c_row))
        c_row, c_start, c_end, c_fb, c_fbend = (a[order] for a in (c_row, c_start, c_end, c_fb, c_fbend))

    if c_row.size == 0:
        return out.astype(np.int64)
    # segments between consecutive cuts of a row
    same_next = np.zeros(c_row.size, dtype=bool)
    same_next[:-1] = c_row[1:] == c_row[:-1]
    nxt = np.flatnonzero(same_next)
    inner = ((c_start[nxt + 1] - c_end[nxt]) - (c_fb[nxt + 1] - c_fbend[nxt])) // m
    last = np.flatnonzero(~same_next)
    first = np.concatenate([[0], last[:-1] + 1])
    rows_cut = c_row[last]
    Fr = F[rows_cut]
    if closed:
        tail = ((c_start[first] + length - c_end[last]) - (Fr - c_fbend[last] + c_fb[first])) // m
        head = np.zeros_like(tail)
    else:
        tail = ((length - c_end[last]) - (Fr - c_fbend[last])) // m
        head = (c_start[first] - c_fb[first]) // m
    total = np.bincount(c_row[nxt], weights=inner, minlength=n_rows)
    total[rows_cut] += tail + head
    out = out.astype(np.int64)
    out[rows_cut] = np.rint(total[rows_cut]).astype(np.int64)
    return out
