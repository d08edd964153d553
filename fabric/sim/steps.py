"""The ideal ring flow DAG timed from one step, exactly, when its steps never contend.

The ideal ring (:mod:`fabric.sim.collectives`, ``protocol='none'``, one
channel) is ``K`` steps (``K = 2 (n-1)`` for all-reduce, ``n-1`` for
reduce-scatter and all-gather) of the same ``n`` flows per group: in every
step rank ``i`` sends ``S/n`` to rank ``i+1``, and that flow waits for the
flow rank ``i`` received and the flow it sent in the previous step.  Its
``2 n (n-1)`` flows grow with the square of the ranks; one step is ``n``.

Why one step is exact here.  Take one step of every group, all at once.  If
every arc carries no more than its capacity when each of these flows runs at
its free rate (its bottleneck alone) and no two flows share a route, then no
subset of the DAG's flows, at any time, oversubscribes an arc either (every
flow of the DAG is one of these flows, shifted in time, and a route is never
used twice at once since a rank's sends wait on each other).  So every flow of
the DAG runs at its free rate: rank ``i``'s flow takes ``w_i`` = bytes / free
rate + path latency in every step, and the DAG's finish times are its longest
paths.  A path through the steps either stays at a rank (its own previous send)
or moves one rank forward (what it received), so the longest path of ``K``
steps stays at the slowest rank: the group finishes at ``start + K max_i w_i``.
This is the engine's own DAG pass (:mod:`fabric.sim.engine`) written out; the
tests check it against the full DAG to 1e-9.  When a step does contend, the
caller runs the full DAG.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.sim.collectives import CollectiveName
from fabric.sim.engine import LOAD_RTOL, Problem, Schedule, free_rates
from fabric.sim.flows import FlowTable

# Flows of the full DAG from which the simulator times an ideal ring from one step by default (below, the DAG
# pass is fast and gives every flow's times).
STEP_MIN_FLOWS = 4_000_000


@dataclass(frozen=True)
class StepTiming:
    """One step of an ideal ring, and the whole ring's time.

    Attributes
    ----------
    time_s : ndarray, shape (G,)
        Finish time of every group minus its start, seconds.
    steps : int
    flows, problem, schedule
        The flows of one step, as routed and scheduled (each at its free rate).
    graph, arcs
        The routing graph and the graph arc of every problem arc.
    """

    time_s: np.ndarray
    steps: int
    flows: FlowTable
    problem: Problem
    schedule: Schedule
    graph: object
    arcs: np.ndarray


def ideal_ring_step_count(name: str, n: int) -> int:
    """Steps of the ideal ring: ``2 (n-1)`` for all-reduce, ``n-1`` for reduce-scatter and all-gather."""
    return (2 if name == CollectiveName.ALL_REDUCE else 1) * (n - 1)


def ideal_ring_by_step(sim, name: str, devices: np.ndarray, size: float, start: float, tags: np.ndarray,
                       ecmp: str, seed: int) -> StepTiming | None:
    """Time the ideal ring of every group (rows of ``devices``) from one step, or None when a step contends.

    Parameters
    ----------
    sim : Simulator
    name : str
        all-reduce, reduce-scatter or all-gather.
    devices : ndarray, shape (G, n)
        Device ids in ring order, one row per group.
    size : float
        Per-rank buffer ``S``, bytes.
    start : float
        Start time, seconds.
    tags : ndarray, shape (G,)
        Tag of every group's flows.
    """
    G, n = devices.shape
    src, dst = devices, np.roll(devices, -1, axis=1)
    flows = FlowTable.build(src.ravel(), dst.ravel(), size / n, start, None, 1, np.repeat(tags, n))
    prob, graph, arcs = sim.problem(flows, ecmp=ecmp, seed=seed, field="ranks")
    if np.bincount(prob.route, minlength=prob.R.shape[0]).max(initial=0) > 1:
        return None  # two flows of a step on one route: they share it
    rho = free_rates(prob)
    demand = prob.R.T @ np.where(np.isfinite(rho), rho, 0.0)
    if np.any(demand > prob.capacity * (1.0 + LOAD_RTOL)):
        return None  # the step oversubscribes an arc: max-min sharing, event by event
    r = rho[prob.route]
    dur = np.where(np.isfinite(r), prob.size * prob.count / np.where(np.isfinite(r), r, 1.0), 0.0)
    w = dur + prob.latency_of_flows()
    k = ideal_ring_step_count(name, n)
    time_s = k * w.reshape(G, n).max(axis=1)
    release = np.full(flows.src.size, float(start))
    sched = Schedule(release, release + dur, release + w, "dag", 0)
    return StepTiming(time_s, k, flows, prob, sched, graph, arcs)
