"""Output lengths of RL rollouts: a seeded lognormal, or a sample from a file.

RL responses are long-tailed: most end early, a few run to the token cap, and
in a synchronous iteration the slowest replica waits for its longest response
(StreamRL, arXiv 2504.15930).  A lognormal with median ``m`` and shape
``sigma`` has that tail; lengths are rounded to whole tokens and clipped to
``[1, max_tokens]``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fabric.checks import is_whole, shown
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
    log_len = np.log(median) + sigma * rng.standard_normal(n) if sigma > 0 else np.full(n, np.log(float(median)))
    # clipped in log space: exp of a wide tail (sigma 50) overflowed to inf with a RuntimeWarning on stderr
    raw = np.exp(np.clip(log_len, 0.0, np.log(max_tokens)))
    return np.clip(np.rint(raw), 1, max_tokens).astype(np.int64)


def file_lengths(path: str | Path, n: int, max_tokens: int, seed: int) -> np.ndarray:
    """``n`` lengths drawn with replacement (seeded) from a file, clipped to ``[1, max_tokens]``.

    The file holds whole numbers > 0: one per line (or separated by spaces), or one flat JSON list of numbers.

    Raises
    ------
    FabricError
        Missing file, a folder, not UTF-8, malformed JSON, or a value that is not a whole number > 0 (a
        string, a boolean, a nested list, NaN, a number past float range).
    """
    from fabric.files import parse_json, read_text

    field = "params[lengths_file]"
    p = Path(path)
    # the one reader of input files: a folder, non-UTF-8, over 1 GiB (non-UTF-8 raised UnicodeDecodeError)
    text = read_text(p, field).strip()
    if text.startswith("["):
        # parse_json refuses nesting past 64 levels (a RecursionError was blamed on --gpus) and NaN
        values = parse_json(text, p.name, field)
        wrong = next((i for i, v in enumerate(values) if not (is_whole(v) and v >= 1)), None)
        if wrong is not None:  # [[1, 2], [3]], [{}], [true] and ["100"] were ValueError, TypeError or read as 1
            raise FabricError(field, f"{p.name}[{wrong}]: {shown(values[wrong])} must be a whole number >= 1")
    else:
        try:
            values = [float(x) for x in text.split()]
        except ValueError:
            raise FabricError(field, f"{p.name} must hold whole numbers, one per line or a JSON list") from None
    try:
        arr = np.asarray(values, dtype=np.float64) if len(values) else np.zeros(0)
    except OverflowError:  # a JSON integer past float range
        raise FabricError(field, f"{p.name} holds a number past float range; lengths are whole tokens") from None
    if arr.size == 0 or not np.all(np.isfinite(arr)) or np.any(arr < 1) or np.any(arr != np.rint(arr)):
        raise FabricError(field, f"{p.name} must hold whole numbers >= 1 (got {arr.size} values)")
    rng = np.random.default_rng(seed)
    return np.clip(rng.choice(arr, size=n, replace=True), 1, max_tokens).astype(np.int64)
