"""Output lengths of RL rollouts: a seeded lognormal, or a sample from a file.

RL responses are long-tailed: most end early, a few run to the token cap, and
in a synchronous iteration the slowest replica waits for its longest response
(StreamRL, arXiv 2504.15930).  A lognormal with median ``m`` and shape
``sigma`` has that tail; lengths are rounded to whole tokens and clipped to
``[1, max_tokens]``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from fabric.errors import FabricError


def lognormal_lengths(n: int, median: float, sigma: float, max_tokens: int, seed: int) -> np.ndarray:
    """``n`` output lengths (tokens) from a lognormal, clipped to ``[1, max_tokens]``.

    Parameters
    ----------
    n : int
        Number of responses.
    median : float
        Median length, tokens (``exp(mu)``).
    sigma : float
        Shape (standard deviation of the log); 0 gives ``n`` equal lengths.
    max_tokens : int
        Cap, tokens.
    seed : int

    Returns
    -------
    ndarray of int64

    Examples
    --------
    >>> lognormal_lengths(4, 100, 0.0, 1000, seed=0).tolist()
    [100, 100, 100, 100]
    """
    rng = np.random.default_rng(seed)
    raw = np.exp(np.log(median) + sigma * rng.standard_normal(n)) if sigma > 0 else np.full(n, float(median))
    return np.clip(np.rint(raw), 1, max_tokens).astype(np.int64)


def file_lengths(path: str | Path, n: int, max_tokens: int, seed: int) -> np.ndarray:
    """``n`` lengths drawn with replacement (seeded) from a file, clipped to ``[1, max_tokens]``.

    The file holds whole numbers > 0: one per line, or one JSON list.

    Raises
    ------
    FabricError
        Missing file, or a value that is not a whole number > 0.
    """
    p = Path(path)
    if not p.is_file():
        raise FabricError("params[lengths_file]", f"no such file: {p}")
    text = p.read_text().strip()
    try:
        values = json.loads(text) if text.startswith("[") else [float(x) for x in text.split()]
    except (ValueError, json.JSONDecodeError):
        raise FabricError("params[lengths_file]", f"{p.name} must hold whole numbers, one per line or a JSON list") from None
    arr = np.asarray(values, dtype=np.float64).ravel() if len(values) else np.zeros(0)
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 1) or np.any(arr != np.rint(arr)):
        raise FabricError("params[lengths_file]", f"{p.name} must hold whole numbers >= 1 (got {arr.size} values)")
    rng = np.random.default_rng(seed)
    return np.clip(rng.choice(arr, size=n, replace=True), 1, max_tokens).astype(np.int64)
