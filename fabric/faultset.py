"""The one fault-set function: which components of a Fabric are down, for a fault model and a seed.

Every command and metric that needs faulty components draws them here
(``fabric faults``, ``fabric orchestrate``, ``fabric view``, the sweep's
``faults`` and ``orchestrator`` metrics), so the same Fabric, fault model and
seed give the same faulty nodes everywhere.

:func:`draw_faults` draws ``samples`` fault sets at once (the Monte Carlo of
``fabric faults``) or replays a trace; :meth:`FaultDraw.fault_set` is the one
fault set that single-placement commands use: sample 0 of the i.i.d. draw, or
the trace at ``trace_time``.  A design point of a sweep draws once and hands
the same :class:`FaultDraw` to every metric.

Sample 0 does not depend on ``samples`` in ``bernoulli`` mode (its failures
are the first draws of the component's stream; the only exception, a first
sample with more than mean + 8 sigma failures, has probability below 1e-15);
in ``exact`` mode duplicates are redrawn across the whole batch, so sample 0
depends on the batch size: share the :class:`FaultDraw` instead of redrawing.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabric.checks import seed as check_seed
from fabric.errors import FabricError
from fabric.faults import FaultModel, FaultSamples, NodeIndex, sample_components
from fabric.model import Fabric
from fabric.trace import NodeReplay, Trace, load_trace


@dataclass(frozen=True)
class FaultSet:
    """One fault set: the failed positions of every component type that can fail.

    Attributes
    ----------
    components : dict of str to ndarray of int
        Component type -> failed positions, ascending (positions as in
        :func:`fabric.faults.universe`; ``node``: dense node indices).
    nodes : ndarray of int
        The faulty nodes as the Fabric's ``node`` group ids, ascending (node
        faults only; GPUs without a node group are left out).
    source : str
        Where the set came from (``none``, ``iid bernoulli ratio 0.01 seed 0``,
        ``trace stepfun at day 12.5 seed 0``).
    """

    components: dict[str, np.ndarray]
    nodes: np.ndarray
    source: str


@dataclass(frozen=True)
class FaultDraw:
    """The fault sets a :class:`~fabric.faults.FaultModel` and a seed give on one Fabric.

    Attributes
    ----------
    model : FaultModel
    seed : int
    node_index : NodeIndex
        The Fabric's GPUs and nodes (dense node numbering).
    components : dict of str to FaultSamples
        i.i.d. models: component type -> one row per sample; empty otherwise.
    samples : int
        Rows of every entry of ``components`` (1 for ``none`` and ``trace``).
    trace : Trace, optional
        The loaded trace (``trace`` models).
    replay : NodeReplay, optional
        The trace replayed on the nodes (``trace`` models).
    """

    model: FaultModel
    seed: int
    node_index: NodeIndex
    components: dict[str, FaultSamples] = field(default_factory=dict)
    samples: int = 1
    trace: Trace | None = None
    replay: NodeReplay | None = None

    def chunks(self, rows: list[int]):
        """The i.i.d. samples as consecutive batches of ``rows`` samples: type -> FaultSamples."""
        lo = 0
        for n in rows:
            yield {comp: fs.rows(lo, lo + n) for comp, fs in self.components.items()}
            lo += n

    def trace_moment(self) -> float:
        """Days: ``model.trace_time``, or the first moment with the most nodes down."""
        rep = self.replay
        if self.model.trace_time is None:
            counts = rep.down.counts()
            return float(rep.times[int(np.argmax(np.where(rep.durations > 0, counts, -1)))])
        t = float(self.model.trace_time)
        if not rep.times[0] <= t < rep.times[-1]:
            raise FabricError("trace_time", f"{t} is outside the trace window [{rep.times[0]}, {rep.times[-1]}) "
                                              "days")
        return t

    def fault_set(self) -> FaultSet:
        """The one fault set of this draw: sample 0 (i.i.d.), the trace at its moment, or nothing."""
        model, seed = self.model, self.seed
        if model.kind == "trace":
            t = self.trace_moment()
            comps = {"node": self.replay.down_at(t)}
            source = f"trace {self.trace.name} at day {t:.4g} seed {seed}"
        elif model.kind == "iid":
            comps = {comp: fs.row(0).copy() for comp, fs in self.components.items()}
            what = (f"{model.ratios['node']}" if set(model.ratios) == {"node"} else
                    ", ".join(f"{c}={r}" for c, r in model.ratios.items()))
            source = f"iid {model.mode} ratio {what} seed {seed}"
        else:
            comps, source = {}, "none"
        groups = self.node_index.node_group[comps.get("node", np.zeros(0, dtype=np.int64))]
        return FaultSet(comps, np.sort(groups[groups >= 0]).astype(np.int64), source)


def draw_faults(fabric: Fabric, model: FaultModel, seed: int = 0, samples: int = 1,
                nodes: NodeIndex | None = None) -> FaultDraw:
    """Draw the fault sets of ``model`` on ``fabric`` with ``seed``.

    Parameters
    ----------
    fabric : Fabric
    model : FaultModel
        none, i.i.d. ratios per component type, or a trace.
    seed : int
        Seed of the i.i.d. streams (one child stream per component type,
        :func:`fabric.faults.component_samplers`) or of the trace mapping.
    samples : int
        i.i.d. samples to draw (ignored by ``none`` and ``trace``).
    nodes : NodeIndex, optional
        ``NodeIndex.of(fabric)``, when the caller has it already.

    Returns
    -------
    FaultDraw

    Examples
    --------
    >>> from topologies import build
    >>> fab = build("dgx", 64)
    >>> draw = draw_faults(fab, FaultModel({"node": 0.5}, mode="exact"), seed=1, samples=4)
    >>> draw.components["node"].counts().tolist()
    [4, 4, 4, 4]
    >>> fault_set(fab, FaultModel({"node": 0.5}), seed=1).nodes.tolist() == \\
    ...     draw_faults(fab, FaultModel({"node": 0.5}), seed=1, samples=100).fault_set().nodes.tolist()
    True
    """
    seed = check_seed(seed)
    nodes = nodes or NodeIndex.of(fabric)
    if model.kind == "trace":
        tr = model.trace if isinstance(model.trace, Trace) else load_trace(str(model.trace))
        return FaultDraw(model, seed, nodes, trace=tr, replay=tr.replay(nodes.n_nodes, model.trace_mapping, seed))
    if model.kind == "none":
        return FaultDraw(model, seed, nodes)
    return FaultDraw(model, seed, nodes, sample_components(fabric, model, samples, seed, nodes), int(samples))


def fault_set(fabric: Fabric, model: FaultModel, seed: int = 0, nodes: NodeIndex | None = None) -> FaultSet:
    """The one fault set of ``model`` and ``seed`` on ``fabric``: ``draw_faults(...).fault_set()``.

    Parameters
    ----------
    fabric : Fabric
    model : FaultModel
    seed : int
    nodes : NodeIndex, optional

    Returns
    -------
    FaultSet
    """
    return draw_faults(fabric, model, seed, 1, nodes).fault_set()
