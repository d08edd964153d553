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
