"""Fault sets for one orchestration: explicit node ids, or the one fault set of :func:`fabric.faultset.fault_set`."""

from __future__ import annotations

import numpy as np

from fabric.errors import FabricError
from fabric.faults import FaultModel
from fabric.faultset import fault_set
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

    The ratio and the trace go through :func:`fabric.faultset.fault_set`, so
    ``fabric faults``, ``fabric view`` and a sweep row see the same faulty
    nodes for the same ratio and seed.

    Raises
    ------
    FabricError
        More than one source, or a bad value.
    """
    given = [x is not None for x in (faulty_nodes, node_fault_ratio, trace)]
    if sum(given) > 1:  # blame the second source given (--trace with --node-fault-ratio named --faulty-nodes)
        second = [name for name, g in zip(("faulty_nodes", "node_fault_ratio", "trace"), given) if g][1]
        raise FabricError(second, "give one of --faulty-nodes, --node-fault-ratio, --trace")
    if trace_time is not None and trace is None:  # it would be ignored: the faults would not be the day asked for
        raise FabricError("trace_time", "reads a day of --trace; give --trace stepfun|FILE with it")
    if faulty_nodes is not None:
        arr = check_faulty_nodes(fabric, faulty_nodes)
        return arr, f"given ({arr.size} nodes)"
    if node_fault_ratio is not None:
        model = FaultModel({"node": node_fault_ratio}, mode)
    else:
        model = FaultModel(trace=trace, trace_time=trace_time)
    faults = fault_set(fabric, model, seed)
    return faults.nodes, faults.source
