"""The fault timeline of one cluster: a trace replayed on its nodes, with what the HBD can still form.

The replay is :meth:`fabric.trace.Trace.replay` (tiling as ``fabric faults``
does it); for every interval between events this adds the healthy GPUs and
the GPUs in complete TP groups (the allocation policy of the HBD kind,
vectorised over all intervals at once), and answers which nodes went down at
each event.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.checks import seed as check_seed
from fabric.errors import FabricError
from fabric.faults import FaultSamples, NodeIndex
from fabric.model import Fabric
from fabric.trace import Trace, load_trace
from solvers.allocation import FaultBatch, Policy, allocate_row, policy_for
from workloads.goodput.placement import healthy_is_balanced
from workloads.placement import balanced_choice, group_domains

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class FaultTimeline:
    """Piecewise-constant fault state of a cluster over a trace's span.

    Attributes
    ----------
    times_s : ndarray of float, shape (I + 1,)
        Interval edges, seconds from the trace's origin.
    batch : FaultBatch
        Row ``i``: the nodes down on ``[times_s[i], times_s[i + 1])``.
    usable_gpus : ndarray of int, shape (I,)
        GPUs in complete TP groups of ``tp`` per interval.
    tp : int
    policy : Policy
    trace_name : str
    balanced : bool
        Whether the healthy job takes as many TP groups from each HBD domain
        (:func:`workloads.goodput.placement.healthy_is_balanced`), which
        re-placements then keep doing.
    """

    times_s: np.ndarray
    batch: FaultBatch
    usable_gpus: np.ndarray
    tp: int
    policy: Policy
    trace_name: str = ""
    balanced: bool = False

    @property
    def n_intervals(self) -> int:
        return int(self.times_s.size - 1)

    @property
    def healthy_gpus(self) -> np.ndarray:
        return self.batch.healthy

    @property
    def nodes(self) -> NodeIndex:
        return self.policy.nodes

    def newly_down(self, i: int) -> np.ndarray:
        """Dense nodes down in interval ``i`` that were up in interval ``i - 1`` (all down nodes for ``i = 0``)."""
        now = self.batch.down_nodes.row(i)
        if i == 0:
            return now
        return np.setdiff1d(now, self.batch.down_nodes.row(i - 1), assume_unique=True)

    def newly_up(self, i: int) -> np.ndarray:
        """Dense nodes up in interval ``i`` that were down in interval ``i - 1`` (none for ``i = 0``)."""
        if i == 0:
            return np.zeros(0, dtype=np.int64)
        return np.setdiff1d(self.batch.down_nodes.row(i - 1), self.batch.down_nodes.row(i), assume_unique=True)

    def groups(self, i: int) -> np.ndarray:
        """TP groups (GPU indices, shape (n, tp)) the policy forms on the healthy GPUs of interval ``i``."""
        alloc = allocate_row(self.policy, self.tp, self.batch, i)
        return self.nodes.gpu_index(alloc.groups.ravel()).reshape(-1, self.tp)

    def job_groups(self, i: int, n_groups: int) -> np.ndarray:
        """The ``n_groups`` TP groups (GPU indices, in rank order) a job placed in interval ``i`` takes.

        The policy's groups of the fault state, chosen as the healthy job
        chooses its own (:mod:`workloads.goodput.placement`); fewer if fewer exist.
        """
        groups = self.groups(i)
        dom = group_domains(self.policy.fabric, self.nodes.gpu_ids[groups])
        return groups[balanced_choice(dom, n_groups, self.balanced)]


def fault_timeline(fabric: Fabric, tp: int, trace: Trace | str, *, mapping: str = "tile", seed: int = 0,
                   trace_servers: int | None = None) -> FaultTimeline:
    """Replay ``trace`` on the nodes of ``fabric`` and count what TP groups of ``tp`` survive in each interval.

    Parameters
    ----------
    fabric : Fabric
    tp : int
        TP group size (checked against the HBD).
    trace : Trace or str
        A trace, ``stepfun`` or a trace file.
    mapping : {'tile', 'sample'}
        Trace servers -> nodes (:mod:`fabric.trace`).
    seed : int
        Seed of the mapping.
    trace_servers : int, optional
        Servers a trace file covers.

    Returns
    -------
    FaultTimeline
    """
    check_seed(seed)
    pol = policy_for(fabric)
    tp = pol.check_tp(tp)
    tr = trace if isinstance(trace, Trace) else load_trace(str(trace), n_servers=trace_servers)
    replay = tr.replay(pol.nodes.n_nodes, mapping, int(seed))
    keep = replay.durations > 0  # zero-length intervals carry no time (and no fault that matters)
    down = replay.down.take(np.flatnonzero(keep))
    edges = np.concatenate([replay.times[:-1][keep], replay.times[-1:]])
    if edges.size < 2:
        raise FabricError("trace", f"{tr.name} spans no time (horizon {tr.horizon} days)")
    batch = FaultBatch.from_nodes(pol.nodes, down)
    usable = pol.count(tp, batch)
    return FaultTimeline(edges * SECONDS_PER_DAY, batch, np.asarray(usable, dtype=np.int64), tp, pol, tr.name,
                         healthy_is_balanced(fabric, tp))


def no_fault_timeline(fabric: Fabric, tp: int, span_s: float) -> FaultTimeline:
    """A timeline of one interval of ``span_s`` seconds with no fault (the healthy baseline)."""
    pol = policy_for(fabric)
    tp = pol.check_tp(tp)
    batch = FaultBatch.from_nodes(pol.nodes, FaultSamples.empty(1, pol.nodes.n_nodes))
    return FaultTimeline(np.array([0.0, float(span_s)]), batch, np.asarray(pol.count(tp, batch), dtype=np.int64),
                         tp, pol, "none", healthy_is_balanced(fabric, tp))
