"""The job's state machine over a fault timeline: running, recovering, waiting; GPU-seconds by cause.

One training job of ``dp`` replicas, each ``groups_per_replica`` TP groups of
``tp`` GPUs (``pp x cp`` TP groups per replica), lives on the cluster for
the trace's span.  At every event (the start of an interval of the
:class:`~workloads.goodput.events.FaultTimeline`):

1. **Blast radius.** If a node that just went down holds a GPU of one of the
   job's TP groups, the job stops: the TP group is broken and a synchronous
   job cannot step without it.  The work since its last checkpoint is lost
   (*recomputation*, rule below).
2. **Re-placement.** A stopped or waiting job is placed again on the TP
   groups the HBD's allocation policy forms on the healthy GPUs
   (``dp' x groups_per_replica`` of them, chosen as the healthy job chooses
   its own: :mod:`workloads.goodput.placement`), then recovers:
   *re-placement* time, then *restart* time, then it runs.  If it does not
   fit it *waits*.
   ``fixed``: it needs all ``dp`` replicas (spares absorb faults; else it
   waits for repair).  ``elastic``: it runs with the most replicas that fit
   and that the model allows (``rate`` is None for sizes it does not, e.g.
   when ``dp' x micro_batch`` does not divide the global batch), at least
   one; when repairs let it grow (even while it is still recovering) it
   checkpoints, re-places and restarts at the larger size (no work lost).
   Elastic picks, among those sizes, the one with the highest throughput on
   the placement that fault state gives (a re-placement forced by faults may
   be much slower: e.g. DP groups with unequal ranks per HBD domain lose the
   hierarchical collective, and a smaller balanced job can do more).
   Either policy *rebalances* when a repair makes a placement faster by more
   than :data:`REBALANCE_GAIN` than the one it runs on (checkpoint,
   re-place, restart), and stays put otherwise.  Which placements happen does not depend on the
   recovery costs (a recovering job is interrupted and re-placed as a
   running one is), so no cost can buy a better placement later.
3. **Running** at the step time of its shape on its placement:
   ``rate(dp', gpus)`` tokens/s, where ``gpus`` are the device ids of the
   placement in rank order (the MFU step model times the DP, PP, CP and TP
   collectives of that placement, so a DP group that the re-placement pushed
   across ToRs slows the step).  It
   checkpoints every ``checkpoint_interval_s`` of training, stalling
   ``checkpoint_stall_s`` each time (a fraction C / (C + w) of running time
   trains).

Lost work at an interruption: with ``tau`` seconds trained since the job's
last (re)start, whose checkpoint is known, the loss is ``tau`` if ``tau < C``,
else ``C / 2``: the fault's phase relative to the periodic checkpoints is
independent of the trace, so its expectation is used rather than an aliasing
artefact of one phase (and the loss never falls as C rises).  ``C > 0``
(:class:`~workloads.goodput.params.Recovery` refuses 0: checkpoints that
cost no stall); ``C -> 0`` with ``w = 0`` is the ideal of nothing recomputed.

Accounting, in GPU-seconds of the job's nominal ``G = dp x gpr`` GPUs over
the span T: ``useful + sum(lost by cause) = G x T`` exactly.  ``useful`` is
work at the healthy job's per-GPU rate (so the goodput ratio is useful /
(G x T)); GPUs the job lacks are lost to *faults* up to the GPUs that are
not healthy (``G - healthy``), the rest to *waste* (healthy GPUs not in a
complete TP group or DP replica); a running shape slower per GPU than the
healthy job (a re-placement whose collectives cross more ToRs or HBD
domains, or a smaller elastic size) loses *slower_placement* (negative if it
is more efficient per GPU).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from fabric.errors import ComputeError, FabricError
from workloads.goodput.events import FaultTimeline
from workloads.goodput.params import Recovery

JOB_POLICIES = ("fixed", "elastic")
# A repair triggers a re-placement of a running job (checkpoint, re-place, restart) only when the new placement
# is at least this much faster: a policy choice (assumed), so that a marginal gain never buys a restart.
REBALANCE_GAIN = 0.05
CAUSES = ("faults", "waste", "restart", "recomputation", "replacement", "checkpoint", "slower_placement")
RUNNING, RECOVERING, WAITING = "running", "recovering", "waiting"


@dataclass(frozen=True)
class JobShape:
    """The job's parallel shape in allocation terms.

    Attributes
    ----------
    tp : int
        GPUs per TP group (the HBD allocation unit).
    groups_per_replica : int
        TP groups per DP replica (``pp x cp``).
    dp : int
        DP replicas of the healthy job.
    """

    tp: int
    groups_per_replica: int
    dp: int

    def __post_init__(self):
        for f in ("tp", "groups_per_replica", "dp"):
            v = getattr(self, f)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise FabricError(f, f"{v!r} must be a whole number >= 1")

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.groups_per_replica

    @property
    def gpus(self) -> int:
        return self.dp * self.gpus_per_replica


@dataclass
class Ledger:
    """What the simulation accumulates: GPU-seconds by cause, events and a per-interval series."""

    gpu_s: dict[str, float] = field(default_factory=lambda: {c: 0.0 for c in ("useful", *CAUSES)})
    interruptions: int = 0
    regrows: int = 0
    rebalances: int = 0
    placements: int = 0
    shapes: dict[int, float] = field(default_factory=dict)  # dp' -> seconds run at that size
    slow_s: float = 0.0  # seconds run on a placement slower per GPU than the healthy job's
    useful_per_interval: list[float] = field(default_factory=list)
    dp_per_interval: list[int] = field(default_factory=list)
    state_per_interval: list[str] = field(default_factory=list)


class _Job:
    """Mutable state of the job during :func:`simulate` (one instance per run)."""

    def __init__(self, tl: FaultTimeline, shape: JobShape, rate: Callable[[int], float], rec: Recovery,
                 policy: str):
        self.tl, self.shape, self.rec, self.policy = tl, shape, rec, policy
        self.rate = rate
        self.g_full = shape.gpus
        healthy = rate(shape.dp)
        if not healthy or healthy <= 0:
            raise ComputeError("goodput", f"the healthy job ({shape.dp} replicas) must have a throughput > 0, got {healthy!r}")
        self.eff0 = healthy / self.g_full  # tokens/s per GPU of the healthy job
        C, w = rec.checkpoint_interval_s, rec.checkpoint_stall_s
        self.train_share = C / (C + w)  # C > 0 (Recovery)
        self.state, self.dp_run, self.run_rate = WAITING, 0, 0.0
        self.job_nodes = np.zeros(tl.nodes.n_nodes, dtype=bool)
        self.segments: list[tuple[str, float]] = []  # recovery steps left: (cause, seconds)
        self.trained = 0.0  # training seconds since the last (re)start
        self.led = Ledger()

    # ------------------------------------------------------------------ decisions
    def gpus_of(self, i: int, dp: int) -> np.ndarray | None:
        """Device ids (rank order) of the placement of ``dp`` replicas in interval ``i``; None if it does not fit."""
        n = dp * self.shape.groups_per_replica
        groups = self.tl.job_groups(i, n)
        if groups.shape[0] < n:
            return None
        return self.tl.nodes.gpu_ids[groups.ravel()]

    def best(self, i: int) -> tuple[int, float]:
        """(replicas, tokens/s) the job would run with in interval ``i`` on that state's placement; (0, 0) if none.

        ``fixed``: all ``dp`` replicas.  ``elastic``: of the sizes that fit
        and that the model allows, the one with the highest throughput on its
        placement (the largest, unless a re-placement at that size is slow
        enough that a smaller, better placed job does more); ties go to the
        larger size.
        """
        replicas = int(self.tl.usable_gpus[i]) // self.shape.gpus_per_replica
        sizes = [self.shape.dp] if self.policy == "fixed" else range(min(self.shape.dp, replicas), 0, -1)
        best_d, best_r = 0, 0.0
        for d in sizes:
            if d > replicas:
                break
            healthy = self.rate(d)
            if healthy is None:  # the model cannot run at this size (EP, memory, batch divisibility)
                continue
            if healthy <= best_r:  # a placement never beats the healthy one by much: nothing smaller can win
                break
            gpus = self.gpus_of(i, d)
            r = self.rate(d, gpus) if gpus is not None else None
            if r is not None and r > best_r:
                best_d, best_r = d, float(r)
        return best_d, best_r

    def place(self, i: int, dp: int, steps: list[tuple[str, float]]) -> None:
        gpus = self.gpus_of(i, dp)
        if gpus is None:  # count and allocation disagree: a policy bug
            raise RuntimeError(f"allocation formed fewer TP groups than {dp} replicas need; count said enough")
        rate = self.rate(dp, gpus)
        if not rate or rate <= 0:
            raise ComputeError("goodput", f"the job at {dp} replicas on its new placement must have a throughput "
                                          f"> 0, got {rate!r}")
        self.job_nodes[:] = False
        self.job_nodes[self.tl.nodes.node_of_gpu[self.tl.nodes.gpu_index(gpus)]] = True
        self.dp_run, self.run_rate, self.state, self.trained = dp, float(rate), RECOVERING, 0.0
        self.segments = [(c, s) for c, s in steps if s > 0]
        self.led.placements += 1

    def lost_training(self) -> float:
        """Training seconds lost at an interruption (module docstring)."""
        C = self.rec.checkpoint_interval_s
        return self.trained if self.trained < C else C / 2

    def on_event(self, i: int) -> None:
        rec = self.rec
        restart = [("replacement", rec.replace_s), ("restart", rec.restart_s)]
        if self.state != WAITING and self.job_nodes[self.tl.newly_down(i)].any():
            self.led.interruptions += 1
            if self.state == RUNNING:
                lost = self.lost_training() * self.run_rate / self.eff0
                self.led.gpu_s["useful"] -= lost
                self.led.gpu_s["recomputation"] += lost
            self.state, self.dp_run, self.run_rate = WAITING, 0, 0.0
            self.job_nodes[:] = False
        if self.state == WAITING:
            dp, _ = self.best(i)
            if dp:
                self.place(i, dp, [] if i == 0 else restart)  # the job starts placed, at no cost
                if i == 0:
                    self.state = RUNNING
            return
        if i > 0 and self.tl.newly_up(i).size:  # a repair may allow a larger or better placed job
            dp, r = self.best(i)
            grow = dp > self.dp_run and r > self.run_rate
            if grow or r > self.run_rate * (1.0 + REBALANCE_GAIN):
                if grow:
                    self.led.regrows += 1
                else:
                    self.led.rebalances += 1
                # a running job checkpoints first; one still recovering has trained nothing since its checkpoint
                ckpt = [("checkpoint", rec.checkpoint_stall_s)] if self.state == RUNNING else []
                self.place(i, dp, [*ckpt, *restart])

    # ------------------------------------------------------------------ time
    def missing(self, gpus: int, seconds: float, i: int) -> None:
        """Charge the job's GPUs that are not in use to faults (not healthy) or waste."""
        m = self.g_full - gpus
        if m <= 0 or seconds <= 0:
            return
        not_healthy = max(0, self.g_full - int(self.tl.healthy_gpus[i]))
        f = min(m, not_healthy)
        self.led.gpu_s["faults"] += f * seconds
        self.led.gpu_s["waste"] += (m - f) * seconds

    def advance(self, i: int, seconds: float) -> float:
        """Spend ``seconds`` of interval ``i``; return the useful GPU-seconds done."""
        useful = 0.0
        while seconds > 0:
            if self.state == WAITING:
                self.missing(0, seconds, i)
                break
            gpus = self.dp_run * self.shape.gpus_per_replica
            if self.state == RECOVERING:
                if not self.segments:
                    self.state = RUNNING
                    continue
                cause, left = self.segments[0]
                d = min(left, seconds)
                self.led.gpu_s[cause] += gpus * d
                self.missing(gpus, d, i)
                seconds -= d
                if d >= left:
                    self.segments.pop(0)
                else:
                    self.segments[0] = (cause, left - d)
                continue
            train = seconds * self.train_share
            u = train * self.run_rate / self.eff0
            slow = train * gpus - u
            # the healthy step on the full size (or it re-timed) is the healthy job: no slower-placement loss, not
            # the rounding residue of rate / (rate / GPUs)
            if gpus == self.g_full and abs(slow) <= 1e-9 * train * gpus:
                slow, u = 0.0, train * gpus
            useful += u
            self.led.gpu_s["useful"] += u
            self.led.gpu_s["slower_placement"] += slow
            self.led.gpu_s["checkpoint"] += (seconds - train) * gpus
            self.missing(gpus, seconds, i)
            self.trained += train
            self.led.shapes[self.dp_run] = self.led.shapes.get(self.dp_run, 0.0) + seconds
            if self.run_rate < self.eff0 * gpus * (1 - 1e-6):  # slower beyond rounding of the step time
                self.led.slow_s += seconds
            break
        return useful


def simulate(timeline: FaultTimeline, shape: JobShape, rate: Callable[[int], float], recovery: Recovery,
             policy: str = "fixed") -> Ledger:
    """Run the job over the timeline (module docstring) and return its :class:`Ledger`.

    Parameters
    ----------
    timeline : FaultTimeline
    shape : JobShape
    rate : callable
        ``rate(dp')``: tokens/s of the job at ``dp'`` replicas on the healthy
        fabric, or None where the model cannot run at that size (EP does not
        divide, out of memory); ``rate(dp', gpus)``: tokens/s on the placement
        whose GPU device ids in rank order are ``gpus`` (a re-placement).
        Called once per distinct size and placement if the caller caches it
        (:class:`workloads.goodput.model.ShapeRates`).
    recovery : Recovery
    policy : {'fixed', 'elastic'}

    Returns
    -------
    Ledger
    """
    if policy not in JOB_POLICIES:
        raise FabricError("policy", f"{policy!r} not allowed; use one of {', '.join(JOB_POLICIES)}")
    if timeline.tp != shape.tp:
        raise FabricError("tp", f"timeline formed TP groups of {timeline.tp}, the job needs {shape.tp}")
    job = _Job(timeline, shape, rate, recovery, policy)
    dur = np.diff(timeline.times_s)
    for i in range(timeline.n_intervals):
        job.on_event(i)
        job.led.state_per_interval.append(job.state)
        job.led.dp_per_interval.append(job.dp_run)
        job.led.useful_per_interval.append(job.advance(i, float(dur[i])))
    return job.led
