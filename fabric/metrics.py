"""Fault metrics: GPU waste ratio, blast radius, and how they are summarised.

Definitions
-----------
*healthy* GPU
    Not failed itself (a GPU drained with a failed GPU of its node, or cut off
    from scale-out, is healthy).
*usable* GPU
    In a complete TP group formed by the HBD's allocation policy
    (``solvers.allocation``).
**GPU waste ratio**
    ``(healthy - usable) / healthy``: the share of healthy GPUs that no complete
    TP group can use (fragmentation, drained node mates, broken cubes or
    rings).  ``waste_ratio_all_gpus`` divides the same count by *all* GPUs.
**blast radius** of a component type at TP size ``T``
    For one failure of one component: ``unusable = usable(no fault) -
    usable(that failure alone)``, in GPUs; summarised as min / mean / max over
    every position of that component type.  It splits into ``own`` (the
    component's own GPUs: 1 for a GPU, the node's GPUs for a node, the rack's
    for a rack, 0 for switches, ToRs, OCS, links and transceivers) and
    ``stranded = max(unusable - own, 0)`` per position: healthy GPUs that lose
    their group.  When the failure lands on GPUs that fragmentation had already
    left idle (e.g. NVL-72 at TP 32 idles 8 GPUs per domain; a failed tray of 4
    among them costs no usable GPU), ``unusable < own`` and nothing healthy is
    stranded: 0, never negative (``unusable - own`` would count the idle
    failed GPUs as a gain).

Summaries of many samples: ``mean``; ``p50`` and ``p99`` are inverse-CDF
quantiles (the smallest value whose cumulative weight reaches q; weights are
the interval lengths for a trace replay, equal for Monte Carlo); ``pooled``
is ``sum(healthy - usable) / sum(healthy)``, the ratio of expectations, which
is what closed forms such as TPUv4's ``1 - (1 - p) ** 15`` give exactly.
"""

from __future__ import annotations

import numpy as np


def waste_ratio(healthy: np.ndarray, usable: np.ndarray) -> np.ndarray:
    """``(healthy - usable) / healthy`` per sample (0 where nothing is healthy)."""
    healthy = np.asarray(healthy, dtype=float)
    usable = np.asarray(usable, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (healthy - usable) / healthy
    return np.where(healthy > 0, r, 0.0)


def quantile(values: np.ndarray, q: float, weights: np.ndarray | None = None) -> float:
    """Inverse-CDF quantile (weighted when ``weights`` is given)."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return float("nan")
    return float(np.quantile(values, q, weights=weights, method="inverted_cdf"))


def summarize(values: np.ndarray, weights: np.ndarray | None = None) -> dict[str, float]:
    """``mean``, ``p50``, ``p99``, ``min``, ``max`` of per-sample values (weighted when given)."""
    values = np.asarray(values, dtype=float)
    if weights is None:
        mean = float(values.mean()) if values.size else float("nan")
    else:
        w = np.asarray(weights, dtype=float)
        mean = float(np.dot(values, w) / w.sum())
    return {"mean": mean, "p50": quantile(values, 0.5, weights), "p99": quantile(values, 0.99, weights),
            "min": float(values.min()) if values.size else float("nan"),
            "max": float(values.max()) if values.size else float("nan")}


def waste_summary(n_gpus: int, healthy: np.ndarray, usable: np.ndarray,
                  weights: np.ndarray | None = None) -> dict[str, dict[str, float]]:
    """The waste metrics of a batch of fault sets.

    Parameters
    ----------
    n_gpus : int
        All GPUs of the cluster.
    healthy, usable : ndarray of int
        Per sample (or per trace interval).
    weights : ndarray of float, optional
        Per sample weight (trace: interval length in days).

    Returns
    -------
    dict
        ``waste_ratio`` (mean, p50, p99, min, max, pooled),
        ``waste_ratio_all_gpus``, ``healthy_gpus``, ``usable_gpus``,
        ``wasted_gpus`` (each mean, p50, p99, min, max).
    """
    healthy = np.asarray(healthy, dtype=float)
    usable = np.asarray(usable, dtype=float)
    w = np.ones_like(healthy) if weights is None else np.asarray(weights, dtype=float)
    out = {"waste_ratio": summarize(waste_ratio(healthy, usable), weights)}
    out["waste_ratio"]["pooled"] = float(np.dot(w, healthy - usable) / np.dot(w, healthy)) if np.dot(w, healthy) \
        else 0.0
    out["waste_ratio_all_gpus"] = summarize((healthy - usable) / max(n_gpus, 1), weights)
    out["healthy_gpus"] = summarize(healthy, weights)
    out["usable_gpus"] = summarize(usable, weights)
    out["wasted_gpus"] = summarize(healthy - usable, weights)
    return out


def blast_summary(unusable: np.ndarray, own: np.ndarray | float) -> dict[str, float]:
    """min / mean / max of ``unusable`` over positions, with mean ``own`` and ``stranded`` GPUs.

    ``unusable`` is usable GPUs before minus after one failure; ``own`` the
    failed component's GPUs.  ``stranded`` (healthy GPUs the failure takes out
    of use) is ``max(unusable - own, 0)`` per position: at most ``own`` of the
    lost usable GPUs can be the component's own, so at least the rest are
    healthy ones; a failure that lands on GPUs that were idle anyway (NVL-72
    at TP 32 idles 8 of 72 GPUs) loses fewer usable GPUs than it owns and
    strands none, never a negative number.
    """
    unusable = np.asarray(unusable, dtype=float)
    own = np.broadcast_to(np.asarray(own, dtype=float), unusable.shape)
    if unusable.size == 0:
        return {"min": 0.0, "mean": 0.0, "max": 0.0, "own": 0.0, "stranded": 0.0, "positions": 0}
    return {"min": float(unusable.min()), "mean": float(unusable.mean()), "max": float(unusable.max()),
            "own": float(own.mean()), "stranded": float(np.maximum(unusable - own, 0.0).mean()),
            "positions": int(unusable.size)}
