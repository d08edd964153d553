"""What ``fabric faults`` and ``fabric faults-table`` report, as importable functions.

:func:`faults_summary` is ``fabric faults --json`` (and the sweep's ``faults``
metric), so a notebook, a sweep row and the command give identical numbers for
the same inputs and seed.  :func:`waste_table` and :func:`blast_table` are the
comparison tables of the README, on Fabrics the caller built.
"""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from fabric.checks import is_whole, ratio
from fabric.errors import FabricError
from fabric.faults import DEFAULT_SAMPLES, FaultModel, NodeIndex, check_sampling_size, component_samplers
from fabric.faultset import FaultDraw
from fabric.model import Fabric
from fabric.trace import Trace, load_trace, with_servers
from solvers.allocation.blast import blast_radius
from solvers.allocation.evaluate import CURVE_FIELDS, evaluate_faults, fault_curve
from solvers.allocation.policy import policy_for



def faults_summary(fabric: Fabric, tp: int, *, node_fault_ratio: float | Sequence[float] | None = None,
                   fault_ratios: Mapping[str, float] | None = None, mode: str | None = None,
                   trace: Trace | str | Path | None = None, trace_mapping: str = "tile",
                   trace_servers: int | None = None, samples: int = DEFAULT_SAMPLES, seed: int = 0,
                   blast: bool = True, draw: FaultDraw | None = None) -> dict[str, Any]:
    """The JSON object of ``fabric faults``: waste ratio, blast radius, and a curve for a list of ratios.

    Parameters
    ----------
    fabric : Fabric
    tp : int
        TP group size in GPUs.
    node_fault_ratio : float or sequence of float, optional
        I.i.d. node failure ratio; a sequence gives a ``curve`` (one row per
        ratio, :func:`fault_curve`) and the top-level figures of the highest ratio.
    fault_ratios : dict, optional
        Further i.i.d. ratios per component type.
    mode : {'bernoulli', 'exact'}, optional
        How i.i.d. faults are sampled (default ``bernoulli``); not with a ``trace``.
    trace : Trace, str or Path, optional
        ``stepfun`` or a trace file, replayed instead of i.i.d. faults.
    trace_mapping : {'tile', 'sample'}
    trace_servers : int, optional
        Servers a trace file covers (default: those in the file; 400 for stepfun).
    samples, seed : int
    blast : bool
    draw : FaultDraw, optional
        The fault sets drawn already for this model and seed (one ratio only);
        see :func:`evaluate_faults`.

    Returns
    -------
    dict
        ``architecture``, ``params``, and everything
        :func:`solvers.allocation.evaluate_faults` returns (``waste_ratio``
        {mean, p50, p99, ...}, ``healthy_gpus``, ``usable_gpus``,
        ``blast_radius`` {component: {min, mean, max, ...}}, ...), plus
        ``curve`` when ``node_fault_ratio`` is a sequence.
    """
    head = {"architecture": fabric.architecture, "params": fabric.params}
    trace = with_servers(trace, trace_servers)  # a server count without a trace is refused, not ignored
    if trace is not None:
        if node_fault_ratio is not None or fault_ratios:
            raise FabricError("trace", "give either --trace or fault ratios, not both")
        if mode is not None:
            raise FabricError("mode", "not used with a trace (it sets how i.i.d. faults are sampled; a trace "
                                      "replays its own faults): drop it")
        tr = trace if isinstance(trace, Trace) else load_trace(str(trace))
        return {**head, **evaluate_faults(fabric, tp, trace=tr, trace_mapping=trace_mapping, seed=seed,
                                          blast=blast, draw=draw)}
    kw = dict(fault_ratios=fault_ratios, mode=mode or "bernoulli", samples=samples, seed=seed)
    if isinstance(node_fault_ratio, np.ndarray) and node_fault_ratio.ndim == 0:
        node_fault_ratio = node_fault_ratio.item()
    if not isinstance(node_fault_ratio, (list, tuple, np.ndarray)):  # one ratio; a sequence draws a curve
        one = None if node_fault_ratio is None else ratio(node_fault_ratio, "node_fault_ratio")
        return {**head, **evaluate_faults(fabric, tp, node_fault_ratio=one, blast=blast, draw=draw, **kw)}
    if isinstance(node_fault_ratio, np.ndarray) and node_fault_ratio.ndim != 1:
        raise FabricError("node_fault_ratio", f"must be one ratio or a 1-D sequence of ratios, not an array of "
                                              f"shape {node_fault_ratio.shape}")
    ratios = [ratio(r, "node_fault_ratio") for r in node_fault_ratio]
    if not ratios:
        raise FabricError("node_fault_ratio", "the range is empty")
    top = evaluate_faults(fabric, tp, node_fault_ratio=max(ratios), blast=blast, **kw)
    curve = fault_curve(fabric, tp, ratios, known={max(ratios): top}, **kw)
    return {**head, **top, "curve": curve}


def waste_table(entries: Iterable[tuple[str, Fabric, Sequence[int]]], ratios: Sequence[float], samples: int = 2000,
                seed: int = 0, trace: Trace | str | None = "stepfun") -> list[dict]:
    """Mean GPU waste ratio per architecture x TP x node fault ratio (and the trace's time-weighted waste).

    Parameters
    ----------
    entries : iterable of (label, Fabric, TP sizes)
    ratios : sequence of float
        Node fault ratios (i.i.d., ``samples`` Monte Carlo samples each).
    samples, seed : int
    trace : Trace or str, optional
        Also replay this trace (a row with ``node_fault_ratio`` ``'trace'``).

    Returns
    -------
    list of dict
        ``{label, architecture, gpus, tp, node_fault_ratio (float or 'trace'), waste_ratio, waste_ratio_p99}``.
    """
    if isinstance(ratios, (str, bytes)) or not isinstance(ratios, (Sequence, np.ndarray)):
        raise FabricError("ratios", f"{ratios!r} must be a sequence of node fault ratios in [0, 1]")
    ratios = [ratio(r, "node_fault_ratio") for r in ratios]  # all refused before the first slow curve
    entries = list(entries)
    for _, fab, _ in entries:  # every architecture's sampling size too
        check_table_sampling(fab, ratios, samples, seed)
    rows = []
    for label, fab, tps in entries:
        head = {"label": label, "architecture": fab.architecture, "gpus": fab.n_gpus}
        for tp in tps:
            tp = int(tp) if is_whole(tp) else tp  # a numpy TP is reported as the int it is
            for r in fault_curve(fab, tp, ratios, samples=samples, seed=seed):
                rows.append({**head, "tp": tp, "node_fault_ratio": r["node_fault_ratio"],
                             "waste_ratio": r["waste_ratio"]["mean"], "waste_ratio_p99": r["waste_ratio"]["p99"]})
            if trace:
                res = evaluate_faults(fab, tp, trace=trace, seed=seed, blast=False)
                rows.append({**head, "tp": tp, "node_fault_ratio": "trace", "waste_ratio": res["waste_ratio"]["mean"],
                             "waste_ratio_p99": res["waste_ratio"]["p99"]})
    return rows


def check_table_sampling(fab: Fabric, ratios: Sequence[float], samples: int, seed: int = 0) -> None:
    """Refuse ``samples`` on ``fab`` at the largest of ``ratios`` past the limits (``samples``, ``memory``).

    :func:`waste_table` checks every entry before its first curve; ``fabric faults-table`` checks each
    fabric as it is built, so that a refusal comes before the next one is allocated.
    """
    nodes = NodeIndex.of(fab)
    model = FaultModel(ratios={"node": max(ratios, default=0.0)})
    check_sampling_size(samples, nodes.n_nodes, component_samplers(fab, model, seed, nodes))


def blast_table(entries: Iterable[tuple[str, Fabric]], tp: int = 32) -> list[dict]:
    """Blast radius per architecture and component type at TP ``tp`` (capped at each HBD's largest TP).

    Every entry's TP is checked (:meth:`Policy.check_tp`, and ``tp`` at most the entry's GPUs) before
    any is computed, so a TP one architecture refuses fails at once.

    Parameters
    ----------
    entries : iterable of (label, Fabric)
    tp : int

    Returns
    -------
    list of dict
        ``{label, architecture, gpus, tp, component, min, mean, max, own, stranded, ...}``.
    """
    planned = []
    for label, fab in list(entries):  # check every entry's TP before any work
        pol = policy_for(fab)
        if isinstance(tp, bool) or not isinstance(tp, numbers.Integral) or not 1 <= tp <= fab.n_gpus:
            raise FabricError("tp", f"{tp!r} must be a whole number in 1..{fab.n_gpus:,} (the GPUs of {label})")
        planned.append((label, fab, pol, pol.check_tp(min(int(tp), pol.max_tp))))
    rows = []
    for label, fab, pol, t in planned:
        for comp, v in blast_radius(pol, t).items():
            rows.append({"label": label, "architecture": fab.architecture, "gpus": fab.n_gpus, "tp": t,
                         "component": comp, **v})
    return rows


__all__ = ["DEFAULT_SAMPLES", "CURVE_FIELDS", "faults_summary", "waste_table", "blast_table"]
