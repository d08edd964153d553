"""Throughput of the job at each size it may run at: the MFU step model, cached per placement shape.

The healthy job is what ``fabric mfu`` evaluates; when faults shrink it
(elastic DP), the same :class:`~workloads.step.StepModel` times the smaller
shape: ``dp'`` replicas with the same global batch (more micro-batches each,
as Megatron's gradient accumulation does, so the optimizer sees the same
batch and the loss curve per token is unchanged).  ``dp' x micro_batch`` must
divide the global batch, so a job shrinks in few steps (halving, for a
power-of-two batch), and each distinct shape is evaluated once: a year of
events costs a handful of step-time evaluations.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from fabric.errors import FabricError
from workloads.parallelism import Parallelism
from workloads.step import StepModel, StepResult


class ShapeRates:
    """``dp' -> tokens/s`` of one job, cached per distinct shape.

    Parameters
    ----------
    step_model : StepModel
    healthy : StepResult
        The healthy job's evaluation (its throughput is used as is for
        ``dp' = dp``, so a fault-free year reproduces it exactly).
    """

    def __init__(self, step_model: StepModel, healthy: StepResult):
        self.sm = step_model
        self.par: Parallelism = healthy.parallelism
        self.healthy = healthy
        self.cache: dict[int, StepResult | None] = {self.par.dp: healthy}

    def result(self, dp: int) -> StepResult | None:
        """The step result at ``dp`` replicas (None if the model cannot run so)."""
        if dp not in self.cache:
            par = replace(self.par, dp=dp)  # the same global batch: more micro-batches per replica
            try:
                r = self.sm.evaluate(par)
            except FabricError:  # invalid for the model: dp x micro-batch must divide the batch; EP
                r = None
            self.cache[dp] = r if r is not None and r.fits else None
        return self.cache[dp]

    def __call__(self, dp: int) -> float | None:
        r = self.result(dp)
        return None if r is None else r.tokens_per_s

    @property
    def flops_per_token(self) -> float:
        """Model FLOPs per token (forward and backward, no recomputation)."""
        h = self.healthy
        return h.model_tflops_per_gpu * 1e12 * h.gpus_used / h.tokens_per_s

    def evaluated(self) -> dict[int, dict]:
        """Every shape evaluated: dp' -> {tokens_per_s, step_time_s, mfu} (None: cannot run)."""
        return {d: (None if r is None else {"tokens_per_s": r.tokens_per_s, "step_time_s": r.step_time_s,
                                            "mfu": r.mfu}) for d, r in sorted(self.cache.items())}


def constant_rate(tokens_per_gpu_s: float, gpus_per_replica: int) -> Callable[[int], float]:
    """A rate proportional to size (perfect scaling): the reference of the closed-form tests."""
    return lambda dp: tokens_per_gpu_s * gpus_per_replica * dp
