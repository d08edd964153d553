"""Hierarchical all-reduce timed from one step of each phase, exactly, when no step contends.

Hierarchical all-reduce (:mod:`fabric.sim.collectives`) on ``m`` HBD domains
of ``h`` ranks is three chained ring phases: reduce-scatter rings inside each
domain (``m`` rings of ``h`` ranks, ``h-1`` steps of ``S/h``), an all-reduce
ring across domains among the ranks with the same position (``h`` rings of
``m`` ranks, ``2(m-1)`` steps of ``S/(hm)``), and all-gather rings inside the
domain (the first phase's flows again).  In a ring step a rank's flow waits
for the flow it received and the flow it sent in the previous step; a rank's
first flow of a phase waits for its last send and its last receive of the
previous phase.  The full DAG holds ``2 m h (h-1) + 2 h m (m-1)`` flows per
group, ``~2 n m`` (quadratic in the ranks when ``h`` is fixed); one step of
every phase is ``2 n``.

Why one step of each phase is exact here.  Take one step of the first phase
and one step of the second, of every group, all at once (the third phase's
flows are the first's).  If every arc carries no more than its capacity when
each of these flows runs at its free rate (its bottleneck alone) and no two of
them share a route, then no set of flows of the DAG active at one time
oversubscribes an arc either: every flow of the DAG is one of these flows
shifted in time, and two flows of the DAG that are the same one of these
(same sending rank and phase class) never overlap, since a rank's sends wait
on each other through all three phases.  So every flow of the DAG runs at its
free rate and takes ``w`` = bytes / free rate + path latency (+ its protocol
latency), and the DAG's finish times are its longest paths, computed here by
the engine's own recurrence (:mod:`fabric.sim.engine`, DAG pass) written per
step: in a phase of ``K`` steps on rings of ``L`` ranks,

    F_0(j) = max(start, e_j) + w_j,
    F_s(j) = max(F_{s-1}(j-1), F_{s-1}(j)) + w_j,          s = 1 .. K-1,

and rank ``j`` leaves the phase at ``x_j = max(F_{K-1}(j), F_{K-1}(j-1))``
(its last send and its last receive), which is its entry ``e`` in the next
phase.  That is ``O(K n)`` work on arrays of ``n`` and memory linear in the
ranks; the tests check it against the full DAG to 1e-9.  When a step does
contend (oversubscribed uplinks, groups on the same GPUs), the caller runs
the full DAG.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.sim.engine import LOAD_RTOL, Problem, Schedule, free_rates
from fabric.sim.flows import FlowTable


@dataclass(frozen=True)
class HierarchicalStep:
    """One step of every phase of hierarchical all-reduce in every group, routed, and found contention-free.

    Attributes
    ----------
    flows : FlowTable
        The first phase's step (``G m h`` flows, ring by ring) then the second's (``G h m``).
    problem : Problem
        ``flows`` as routed (ideal model: no protocol).
    graph, arcs
        The routing graph and the graph arc of every problem arc.
    rings : list of (ndarray, int, ndarray)
        Per phase (reduce-scatter, all-reduce across domains, all-gather): the rank slots of its rings
        (shape (R, L); slot ``g n + i`` is position ``i`` of group ``g``), its steps ``K`` and the
        indices of its step's flows in ``flows`` (shape (R, L)); phases with rings of one rank are left out.
    copies : ndarray, shape (len(flows),)
        Steps of the full DAG each step flow stands for (``2 (h-1)`` and ``2 (m-1)``).
    flows_per_group : int
        Flows of the full DAG per group.
    groups, n_ranks : int
        ``G`` and ``n``.
    """

    flows: FlowTable
    problem: Problem
    graph: object
    arcs: np.ndarray
    rings: list
    copies: np.ndarray
    flows_per_group: int
    groups: int
    n_ranks: int


def hierarchical_flow_count(m: int, h: int) -> int:
    """Flows of the hierarchical all-reduce DAG of one group on ``m`` domains of ``h`` ranks."""
    return 2 * m * h * (h - 1) + 2 * h * m * (m - 1)


def hierarchical_step(sim, devices: np.ndarray, domains: np.ndarray, size: float, start: float, tags: np.ndarray,
                      ecmp: str, seed: int) -> HierarchicalStep | None:
    """Route one step of each phase of every group; None when the union of the steps contends.

    Parameters
    ----------
    sim : Simulator
    devices : ndarray, shape (G, n)
        Device ids of the ranks, one row per group.
    domains : ndarray, shape (m, h)
        Rank positions by HBD domain, alike in every group
        (:func:`fabric.sim.collectives.hierarchical_domains`).
    size : float
        Per-rank buffer ``S``, bytes.
    start : float
        Start time, seconds.
    tags : ndarray, shape (G,)
        Tag of every group's flows.
    """
    G, n = devices.shape
    dm = np.asarray(domains, dtype=np.int64)
    m, h = dm.shape
    group_base = (np.arange(G, dtype=np.int64) * n)[:, None, None]
    within = (group_base + dm[None]).reshape(G * m, h)            # reduce-scatter / all-gather rings
    across = (group_base + dm.T[None]).reshape(G * h, m)          # all-reduce rings across domains
    src, dst, chunk, copies, rings = [], [], [], [], []
    off = 0
    for slots, k, c, phases in ((within, h - 1, size / h, (0, 2)), (across, 2 * (m - 1), size / h / m, (1,))):
        if slots.shape[1] < 2:
            continue  # a ring of one rank: the phase has no flows
        idx = off + np.arange(slots.size, dtype=np.int64).reshape(slots.shape)
        src.append(slots.ravel())
        dst.append(np.roll(slots, -1, axis=1).ravel())
        chunk.append(np.full(slots.size, c))
        copies.append(np.full(slots.size, k * len(phases), dtype=np.int64))
        rings += [(p, slots, k, idx) for p in phases]
        off += slots.size
    if not src:
        return None
    slot_src, slot_dst = np.concatenate(src), np.concatenate(dst)
    flat = devices.ravel()
    flows = FlowTable.build(flat[slot_src], flat[slot_dst], np.concatenate(chunk), start, None, 1,
                            np.asarray(tags, dtype=np.int64)[slot_src // n])
    prob, graph, arcs = sim.problem(flows, ecmp=ecmp, seed=seed, field="ranks")
    if np.bincount(prob.route, minlength=prob.R.shape[0]).max(initial=0) > 1:
        return None  # two step flows on one route (groups on the same GPUs): they would share it
    rho = free_rates(prob)
    demand = prob.R.T @ np.where(np.isfinite(rho), rho, 0.0)
    if np.any(demand > prob.capacity * (1.0 + LOAD_RTOL)):
        return None  # the steps oversubscribe an arc: max-min sharing, event by event
    rings = [(slots, k, idx) for _, slots, k, idx in sorted(rings, key=lambda r: r[0])]
    return HierarchicalStep(flows, prob, graph, arcs, rings, np.concatenate(copies),
                            hierarchical_flow_count(m, h), G, n)


def time_hierarchical(step: HierarchicalStep, size: np.ndarray, start: np.ndarray,
                      latency: np.ndarray | None) -> tuple[np.ndarray, Schedule]:
    """Finish of every group of the full DAG, from the step flows' sizes, starts and extra latencies.

    Parameters
    ----------
    step : HierarchicalStep
    size, start : ndarray, shape (len(step.flows),)
        Bytes and start time of every step flow (as the full DAG's flows of its class: e.g. an NCCL protocol's
        wire bytes and base latency, :func:`fabric.sim.nccl.with_protocol`).
    latency : ndarray or None
        Extra latency of every step flow (a protocol's step latency), seconds.

    Returns
    -------
    finish : ndarray, shape (G,)
        Finish time of every group (not minus its start), seconds.
    schedule : Schedule
        The step flows, each released at its start and running at its free rate.
    """
    prob = step.problem
    rho = free_rates(prob)[prob.route]
    with np.errstate(divide="ignore", invalid="ignore"):
        dur = np.where(size > 0, size * prob.count / rho, 0.0)  # the engine's DAG pass, term for term
    dur = np.where(np.isfinite(rho), dur, 0.0)
    lat = prob.route_latency[prob.route] + (0.0 if latency is None else latency)
    busy = dur + lat
    leave = np.full(step.groups * step.n_ranks, -np.inf)        # every rank slot's exit of its last phase
    finish = np.full(step.groups, -np.inf)
    for slots, k, idx in step.rings:
        w = busy[idx]
        f = np.maximum(start[idx], leave[slots]) + w
        for _ in range(k - 1):
            f = np.maximum(f, np.roll(f, 1, axis=1)) + w
        leave[slots] = np.maximum(f, np.roll(f, 1, axis=1))      # its last send and its last receive
        # finish times only grow along a ring: a phase ends with its last step
        np.maximum.at(finish, slots[:, 0] // step.n_ranks, f.max(axis=1))
    return finish, Schedule(start, start + dur, start + busy, "dag", 0)
