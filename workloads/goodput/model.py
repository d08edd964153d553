"""Throughput of the job at each size and placement it may run at: the MFU step model, cached.

The healthy job is what ``fabric mfu`` evaluates; when faults shrink it
(elastic DP), the same :class:`~workloads.step.StepModel` times the smaller
shape: ``dp'`` replicas with the same global batch (more micro-batches each,
as Megatron's gradient accumulation does, so the optimizer sees the same
batch and the loss curve per token is unchanged).  ``dp' x micro_batch`` must
divide the global batch, so a job shrinks in few steps (halving, for a
power-of-two batch), and each distinct shape is evaluated once.

A re-placement around faults puts the job's ranks on other GPUs
(:mod:`workloads.goodput.placement`): its DP, PP, CP and TP groups are timed
on that placement by the same step model (a
:class:`~workloads.goodput.placement.GivenPlacement` instead of the healthy
fabric's first blocks), so cross-ToR or cross-domain traffic of the new
placement sets its step time.  Each distinct placement is timed once (cached
by its GPUs, so fault states that leave the same placement share it):

``exact``
    with the job's own collective backend;
``delta`` (default when the job is timed by the flow simulator)
    the healthy step time (job backend) plus the change the analytic
    backend gives between the new placement and the healthy one.  A year
    holds hundreds of distinct placements and the simulator takes about a
    second per placement at 4,608 GPUs; the analytic backend is
    milliseconds.  Exact when the job's backend is analytic; the tests
    bound the difference to ``exact`` with the simulator on small fabrics.
"""

from __future__ import annotations

import hashlib
from dataclasses import replace
from typing import Callable

import numpy as np

from fabric.errors import FabricError
from workloads.comm import analytic_comm_time
from workloads.goodput.placement import GivenPlacement
from workloads.parallelism import Parallelism
from workloads.placement import RankPlacement
from workloads.step import StepModel, StepResult

PLACEMENT_TIMINGS = ("delta", "exact")


class PinnedStepModel(StepModel):
    """A :class:`StepModel` that evaluates its job on one given placement (sharing the base model's caches)."""

    def __init__(self, base: StepModel, placement: RankPlacement):  # noqa: D107 (no StepModel.__init__: a view)
        self.__dict__.update(base.__dict__)
        self.pinned = placement

    def placement(self, par: Parallelism) -> RankPlacement:
        p = self.pinned.par
        if (par.tp, par.cp, par.dp, par.pp, par.ep, par.interleave > 1) == (p.tp, p.cp, p.dp, p.pp, p.ep,
                                                                             p.interleave > 1):
            return self.pinned
        return super().placement(par)


class ShapeRates:
    """``dp' -> tokens/s`` of one job, cached per distinct shape.

    Parameters
    ----------
    step_model : StepModel
    healthy : StepResult
        The healthy job's evaluation (its throughput is used as is for
        ``dp' = dp``, so a fault-free year reproduces it exactly).
    """

    def __init__(self, step_model: StepModel, healthy: StepResult, placement_timing: str | None = None):
        if placement_timing is None:
            placement_timing = "delta" if step_model.backend_name == "sim" else "exact"
        if placement_timing not in PLACEMENT_TIMINGS:
            raise FabricError("placement_timing", f"{placement_timing!r} not allowed; use one of "
                                                  f"{', '.join(PLACEMENT_TIMINGS)}")
        self.sm = step_model
        self.par: Parallelism = healthy.parallelism
        self.healthy = healthy
        self.cache: dict[int, StepResult | None] = {self.par.dp: healthy}
        self.timing = placement_timing
        self.ref = step_model if placement_timing == "exact" or step_model.backend_name == "analytic" else \
            step_model.with_backend(analytic_comm_time)
        self._ref_healthy: dict[int, float] = {}
        self._floor: dict[int, float] = {}
        self._healthy_gpus: dict[int, np.ndarray] = {}
        self._configured: dict[bytes, object] = {}
        self.placed: dict[tuple[int, str], float] = {}  # (dp', digest of the GPUs) -> step time (s)

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

    def __call__(self, dp: int, gpus: np.ndarray | None = None) -> float | None:
        """Tokens/s at ``dp`` replicas: on the healthy placement, or on the placement of device ids ``gpus``."""
        r = self.result(dp)
        if r is None:
            return None
        if gpus is None:
            return r.tokens_per_s
        step = self.placed_step_time(dp, gpus)
        return r.tokens_per_s * r.step_time_s / step  # same tokens per step

    def healthy_gpus(self, dp: int) -> np.ndarray:
        """Device ids of the healthy placement at ``dp`` replicas, in rank order."""
        g = self._healthy_gpus.get(dp)
        if g is None:
            g = self._healthy_gpus[dp] = self.sm.placement(replace(self.par, dp=dp)).gpus
        return g

    def placed_step_time(self, dp: int, gpus: np.ndarray) -> float:
        """Step time (s) of the job at ``dp`` replicas on the placement ``gpus`` (module docstring), cached."""
        r = self.result(dp)
        gpus = np.ascontiguousarray(gpus, dtype=np.int64)
        if np.array_equal(gpus, self.healthy_gpus(dp)):
            return r.step_time_s
        key = (dp, hashlib.blake2b(gpus.tobytes(), digest_size=16).hexdigest())
        t = self.placed.get(key)
        if t is None:
            par = replace(self.par, dp=dp)
            pl = GivenPlacement(self.sm.fabric, par, gpus, self._configured)
            t_ref = PinnedStepModel(self.ref, pl).evaluate(par, check=False).step_time_s
            if self.ref is self.sm:
                t = t_ref
            else:
                if dp not in self._ref_healthy:
                    self._ref_healthy[dp] = self.ref.evaluate(par, check=False).step_time_s
                # no placement beats the step without communication (a guard against a delta larger than the step)
                if dp not in self._floor:
                    self._floor[dp] = self.sm.lower_bound(par)
                t = max(r.step_time_s + t_ref - self._ref_healthy[dp], self._floor[dp])
            self.placed[key] = t
        return t

    @property
    def flops_per_token(self) -> float:
        """Model FLOPs per token (forward and backward, no recomputation)."""
        h = self.healthy
        return h.model_tflops_per_gpu * 1e12 * h.gpus_used / h.tokens_per_s

    def evaluated(self) -> dict[int, dict]:
        """Every shape evaluated: dp' -> {tokens_per_s, step_time_s, mfu} (None: cannot run)."""
        return {d: (None if r is None else {"tokens_per_s": r.tokens_per_s, "step_time_s": r.step_time_s,
                                            "mfu": r.mfu}) for d, r in sorted(self.cache.items())}


    def placement_summary(self) -> dict:
        """How the re-placements ran: how many distinct placements were timed, their step times against healthy."""
        steps = np.array(list(self.placed.values()))
        out = {"timing": self.timing, "backend": self.sm.backend_name,
               "reference_backend": self.ref.backend_name, "distinct_placements": int(steps.size)}
        if steps.size:
            out.update(step_time_min_s=float(steps.min()), step_time_max_s=float(steps.max()),
                       healthy_step_time_s=self.healthy.step_time_s)
        return out


def constant_rate(tokens_per_gpu_s: float, gpus_per_replica: int) -> Callable[..., float]:
    """A rate proportional to size and blind to placement (perfect scaling): the reference of the closed-form tests."""
    return lambda dp, gpus=None: tokens_per_gpu_s * gpus_per_replica * dp
