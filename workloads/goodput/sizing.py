"""How many DP replicas a job should take to get the most training out of a year of faults (``--sizing goodput``).

The healthy job's fastest configuration (``fabric mfu --search``) takes as
many GPUs as its global batch allows; under the ``fixed`` policy such a job
stops at every fault on any of its nodes and waits whenever too few TP groups
are left, so on a cluster it fills (2,048 DGX GPUs and llama3-70b) it trains
a few percent of the year.  Operators keep spare nodes instead (Llama 3 and
MegaScale both run below the pool's size).  Here the job keeps every
dimension of that configuration (TP, PP, CP, EP, micro-batch, interleave)
and takes ``dp' <= dp`` replicas, the rest of the cluster being its spares;
``dp'`` is the size with the most **effective tokens/s** over the trace
(goodput ratio x healthy tokens/s at that size), found as follows:

* the global batch: the healthy job's when it was given (``--global-batch``:
  only sizes it allows), else the multiple of ``dp' x micro-batch`` (x PP
  when interleaved, as Megatron requires) nearest to it (the default batch
  of about 4 Mi tokens is a choice, not a constraint; the tokens per second
  of two batch sizes compare directly);
* each size's healthy tokens/s from the step model with the analytic
  collective backend (milliseconds; the chosen job is then timed as any job
  is), and its year replayed (:func:`workloads.goodput.job.simulate`, the
  same policy) with a placement-blind rate: what spares decide is whether
  the job fits and whether a fault touches it, not how a re-placement is
  timed;
* exactly, without replaying every size: a size's effective tokens/s is at
  most its healthy tokens/s times the share of the span in which it fits
  (``fixed``; the healthy tokens/s alone under ``elastic``), so sizes are
  replayed in decreasing order of that bound and the search stops when the
  bound falls to the best replayed so far (the same answer as replaying
  every size: a test checks it).

The healthy job stays unless a smaller one does strictly better, so with no
fault the job is the healthy one and its goodput is the MFU model's
throughput.  ``--dp`` pins the size (no sizing).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Optional

import numpy as np

from fabric.errors import FabricError
from workloads.goodput.events import FaultTimeline
from workloads.goodput.job import WAITING, JobShape, simulate
from workloads.goodput.params import Recovery
from workloads.parallelism import Parallelism

SIZINGS = ("throughput", "goodput")


def check_sizing(sizing: str, dp_pinned: bool) -> None:
    """Refuse an unknown sizing rule, and ``goodput`` with a pinned DP size (the rule chooses it).

    The one check of ``fabric goodput --sizing``, :func:`~workloads.goodput.summary.goodput_summary` and the
    study's ``goodput`` metric (field ``sizing``; the CLI names it ``--sizing``).
    """
    if sizing not in SIZINGS:
        raise FabricError("sizing", f"{sizing!r} not allowed; use one of {', '.join(SIZINGS)}")
    if sizing == "goodput" and dp_pinned:
        raise FabricError("sizing", "goodput chooses the DP size; drop the pinned dp, or use sizing throughput")


@dataclass(frozen=True)
class SizeCandidate:
    """One job size and what its year gave, all with the placement-blind rate (module docstring)."""

    dp: int
    global_batch: int
    healthy_tokens_per_s: float
    bound_tokens_per_s: float  # healthy tokens/s x share of the span the size fits (fixed), an upper bound
    effective_tokens_per_s: Optional[float] = None  # None: not replayed (the bound ruled it out)
    goodput_ratio: Optional[float] = None

    def to_dict(self) -> dict:
        return {"dp": self.dp, "global_batch": self.global_batch, "healthy_tokens_per_s": self.healthy_tokens_per_s,
                "bound_tokens_per_s": self.bound_tokens_per_s, "effective_tokens_per_s": self.effective_tokens_per_s,
                "goodput_ratio": self.goodput_ratio}


@dataclass(frozen=True)
class Sizing:
    """The chosen size and the sizes looked at."""

    parallelism: Parallelism
    healthy_dp: int
    candidates: tuple[SizeCandidate, ...]

    @property
    def replayed(self) -> int:
        return sum(c.effective_tokens_per_s is not None for c in self.candidates)

    def to_dict(self, gpus_per_replica: int, cluster_gpus: int) -> dict:
        par = self.parallelism
        return {"rule": "goodput", "healthy_dp": self.healthy_dp, "dp": par.dp, "global_batch": par.global_batch,
                "job_gpus": par.dp * gpus_per_replica, "spare_gpus": cluster_gpus - par.dp * gpus_per_replica,
                "sizes_considered": len(self.candidates), "sizes_replayed": self.replayed,
                "ranked_with": "analytic step model, placement-blind replay",
                "candidates": [c.to_dict() for c in self.candidates if c.effective_tokens_per_s is not None]}


def batch_for(par: Parallelism, dp: int, pinned: bool) -> Optional[int]:
    """The global batch of the job at ``dp`` replicas (module docstring); None if a pinned batch does not allow it."""
    unit = dp * par.micro_batch * (par.pp if par.interleave > 1 else 1)
    if pinned:
        return par.global_batch if par.global_batch % unit == 0 else None
    return unit * max(1, round(par.global_batch / unit))


def fit_share(tl: FaultTimeline, gpus: int) -> float:
    """Share of the timeline's span in which ``gpus`` GPUs of complete TP groups are usable."""
    dur = np.diff(tl.times_s)
    return float(dur[tl.usable_gpus >= gpus].sum() / dur.sum())


def size_for_goodput(tl: FaultTimeline, par: Parallelism, rate_of: Callable[[Parallelism], Optional[float]],
                     recovery: Recovery, policy: str, *, batch_pinned: bool) -> Sizing:
    """The job size with the most effective tokens/s over ``tl`` (module docstring).

    Parameters
    ----------
    tl : FaultTimeline
        The trace on the cluster, TP groups of ``par.tp``.
    par : Parallelism
        The healthy job (its ``dp`` is the largest size considered).
    rate_of : callable
        Healthy tokens/s of a configuration; None where it cannot run (memory, validity).
    recovery : Recovery
    policy : {'fixed', 'elastic'}
    batch_pinned : bool
        Whether the global batch was given (then only the sizes it allows).

    Returns
    -------
    Sizing
    """
    gpr = par.pp * par.cp
    per_replica = par.tp * gpr
    span = float(tl.times_s[-1] - tl.times_s[0])
    rates: dict[tuple[int, int], Optional[float]] = {}

    def rate(dp: int, batch: int) -> Optional[float]:
        key = (dp, batch)
        if key not in rates:
            try:
                rates[key] = rate_of(replace(par, dp=dp, global_batch=batch))
            except FabricError:  # the model cannot run so (EP, batch divisibility)
                rates[key] = None
        return rates[key]

    cands = []
    for dp in range(par.dp, 0, -1):
        batch = par.global_batch if dp == par.dp else batch_for(par, dp, batch_pinned)
        r = None if batch is None else rate(dp, batch)
        if r is None or r <= 0:
            continue
        share = fit_share(tl, dp * per_replica) if policy == "fixed" else 1.0
        cands.append(SizeCandidate(dp, batch, r, r * share))
    if not cands or cands[0].dp != par.dp:
        raise FabricError("dp", f"the healthy job ({par.dp} replicas) cannot be timed for sizing")
    order = sorted(range(len(cands)), key=lambda i: (-cands[i].bound_tokens_per_s, -cands[i].dp))
    best = None
    for i in [0] + [j for j in order if j != 0]:  # the healthy job first: it is kept unless beaten
        c = cands[i]
        if best is not None and c.bound_tokens_per_s <= cands[best].effective_tokens_per_s:
            break  # every size left is bounded below the best found (sorted by bound)
        led = simulate(tl, JobShape(par.tp, gpr, c.dp), lambda d, gpus=None, b=c.global_batch: rate(d, b),
                       recovery, policy)
        ratio = led.gpu_s["useful"] / (c.dp * per_replica * span)
        cands[i] = replace(c, goodput_ratio=ratio, effective_tokens_per_s=ratio * c.healthy_tokens_per_s)
        if best is None or cands[i].effective_tokens_per_s > cands[best].effective_tokens_per_s:
            best = i
        if i == 0 and led.interruptions == 0 and WAITING not in led.state_per_interval:
            break  # no fault ever touched the healthy job: spares have nothing to absorb
    chosen = cands[best]
    return Sizing(replace(par, dp=chosen.dp, global_batch=chosen.global_batch), par.dp, tuple(cands))
