"""Index helpers for CSR-style (pointer, index) arrays, shared by the simulator's modules."""

from __future__ import annotations

import numpy as np


def ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenated integer ranges ``starts[i] .. starts[i] + counts[i] - 1``, vectorised.

    Examples
    --------
    >>> ranges(np.array([5, 0]), np.array([2, 3])).tolist()
    [5, 6, 0, 1, 2]
    """
    total = int(counts.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(counts) - counts
    return np.arange(total, dtype=np.int64) - np.repeat(offsets - starts, counts)


def unique_sorted(x: np.ndarray) -> np.ndarray:
    """``np.unique(x)`` by sorting.

    numpy 2.3+ answers ``np.unique`` without ``return_*`` from a hash table,
    which on millions of wide int64 keys is some 20x slower than a sort.

    Examples
    --------
    >>> unique_sorted(np.array([5, 1, 5, 3])).tolist()
    [1, 3, 5]
    """
    s = np.sort(np.asarray(x).ravel())
    if s.size < 2:
        return s
    keep = np.empty(s.size, dtype=bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
