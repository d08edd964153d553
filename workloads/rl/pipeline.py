"""Synchronous vs one-step-asynchronous RL iterations, as *epochs* of phases that run at the same time.

``sync``
    Generate, then sync the weights, then train: three epochs, one phase
    each.  ``iteration = generation + weight_sync + training``.
``async`` (one-step asynchronous, StreamRL, arXiv 2504.15930)
    While the trainer trains on the batch generated last iteration, the
    rollout pool receives the weights of the step before and generates the
    next batch with them (one step stale).  Two epochs: weight sync alongside
    training, then generation alongside training.  ``iteration =
    max(training, weight_sync + generation)``.

The fabric sees one traffic matrix per epoch (the sum of its phases'), and an
OCS fabric may re-wire at each epoch boundary; each re-wiring on the
critical path adds the reconfiguration and settle time (counted in full:
traffic through the OCS stops meanwhile).  Phases of one epoch use disjoint
pools; their cross-pod traffic shares links and circuits.  The circuits are
sized for the epoch's summed rate demand, and the point-to-point weight sync
of the asynchronous pipeline is timed together with the training traffic of
its window (on every fabric alike); the other concurrent phases are timed
each on its own.
"""

from __future__ import annotations

from fabric.errors import FabricError

PIPELINES = ("sync", "async")
PHASES = ("generation", "weight_sync", "training")

EPOCHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "sync": (("generation",), ("weight_sync",), ("training",)),
    "async": (("weight_sync", "training"), ("generation", "training")),
}


def epochs(pipeline: str) -> tuple[tuple[str, ...], ...]:
    """The epochs of one iteration, in order (each a tuple of concurrent phases)."""
    if pipeline not in EPOCHS:
        raise FabricError("pipeline", f"pipeline {pipeline!r} must be one of {', '.join(PIPELINES)}")
    return EPOCHS[pipeline]


def iteration_time(pipeline: str, phases: dict[str, float], overhead_s: float = 0.0) -> float:
    """Seconds per iteration from the phase times and the re-wiring overhead.

    Examples
    --------
    >>> t = {"generation": 10.0, "weight_sync": 1.0, "training": 8.0}
    >>> iteration_time("sync", t), iteration_time("async", t)
    (19.0, 11.0)
    """
    epochs(pipeline)
    g, w, t = phases["generation"], phases["weight_sync"], phases["training"]
    if pipeline == "sync":
        return g + w + t + overhead_s
    return max(t, w + g) + overhead_s
