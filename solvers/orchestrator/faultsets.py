"""Fault sets for one orchestration: the fault samplers and trace replay of ``fabric.faults``, ``fabric.trace``."""

from __future__ import annotations

import numpy as np

from fabric.errors import FabricError
from fabric.faults import NodeIndex, sample_iid
from fabric.model import Fabric
from solvers.orchestrator.space import check_faulty_nodes


def fault_nodes(fabric: Fabric, *, faulty_nodes=None, node_fault_ratio: float | None = None, seed: int = 0,
                trace: str | None = None, trace_time: float | None = None,
                mode: str = "bernoulli") -> tuple[np.ndarray, str]:
    """(faulty ``node`` group ids, a description of where they came from).

    Parameters
    ----------
    faulty_nodes : iterable of int, optional
        Explicit node ids.
    node_fault_ratio : float, optional
        I.i.d. node faults (``mode``: ``bernoulli`` or ``exact`` count), seeded.
    trace : str, optional
        ``stepfun`` or a trace file, replayed on the nodes (``tile``, seeded)
        and read at ``trace_time`` days (default: the moment with the most
        nodes down).

    Raises
    ------
    FabricError
        More than one source, or a bad value.
    """
    given = [x is not None for x in (faulty_nodes, node_fault_ratio, trace)]
    if sum(given) > 1:
        raise FabricError("--faulty-nodes", "give one of --faulty-nodes, --node-fault-ratio, --trace")
    nodes = NodeIndex.of(fabric)
    if faulty_nodes is not None:
        arr = check_faulty_nodes(fabric, faulty_nodes)
        return arr, f"given ({arr.size} nodes)"
    if node_fault_ratio is not None:
        fs = sample_iid(nodes.n_nodes, node_fault_ratio, 1, seed, mode=mode, field="--node-fault-ratio")
        dense = fs.row(0)
        return nodes.node_group[dense].astype(np.int64), f"iid {mode} ratio {node_fault_ratio} seed {seed}"
    if trace is not None:
        from fabric.trace import load_trace

        tr = load_trace(trace)
        rep = tr.replay(nodes.n_nodes, method="tile", seed=seed)
        counts = rep.down.counts()
        if trace_time is None:
            i = int(np.argmax(np.where(rep.durations > 0, counts, -1)))
            t = float(rep.times[i])
        else:
            t = float(trace_time)
            if not rep.times[0] <= t < rep.times[-1]:
                raise FabricError("--trace-time", f"{t} is outside the trace window "
                                                  f"[{rep.times[0]}, {rep.times[-1]}) days")
        dense = rep.down_at(t)
        return nodes.node_group[dense].astype(np.int64), f"trace {tr.name} at day {t:.4g} seed {seed}"
    return np.zeros(0, dtype=np.int64), "none"
