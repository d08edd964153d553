"""Evaluate a fabric under faults: waste ratio (Monte Carlo or trace replay) and blast radius.

:func:`evaluate_faults` is the one function behind ``fabric faults`` and the
sweep engine's ``faults`` metric, so both report identical numbers for the
same inputs and seed.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np

from fabric.checks import ratio, whole
from fabric.checks import seed as check_seed
from fabric.errors import FabricError
from fabric.faults import FaultModel, FaultSamples, chunk_sizes, iter_components
from fabric.faultset import FaultDraw, draw_faults
from fabric.metrics import waste_summary
from fabric.model import Fabric
from fabric.trace import MAPPINGS, Trace
from solvers.allocation.base import FaultBatch
from solvers.allocation.blast import blast_radius
from solvers.allocation.effects import EffectMapper
from solvers.allocation.policy import policy_for


def evaluate_faults(fabric: Fabric, tp: int, *, node_fault_ratio: float | None = None,
                    fault_ratios: Mapping[str, float] | None = None, mode: str = "bernoulli",
                    trace: Trace | str | None = None, trace_mapping: str = "tile", samples: int = 1000,
                    seed: int = 0, blast: bool = True, draw: FaultDraw | None = None) -> dict:
    """Waste ratio of ``fabric`` at TP size ``tp`` under one fault model, plus its blast radius.

    Parameters
    ----------
    fabric : Fabric
    tp : int
        GPUs per TP group; must suit ``fabric.hbd`` (multiple of
        ``tp_multiple_of``, at most ``max_tp``, kind-specific rules).
    node_fault_ratio : float, optional
        I.i.d. node failure ratio in [0, 1].
    fault_ratios : mapping, optional
        Further i.i.d. ratios per component type (``gpu``, ``tor``, ``link``, ...).
    mode : {'bernoulli', 'exact'}
        Independent failures, or exactly ``round(ratio * n)`` per sample.
    trace : Trace or str, optional
        A trace (or ``stepfun`` / a file path) replayed on the fabric's nodes
        instead of i.i.d. faults; statistics are weighted by time.
    trace_mapping : {'tile', 'sample'}
        How the trace's servers map onto nodes (:mod:`fabric.trace`).
    samples : int
        Monte Carlo samples (ignored for a trace).
    seed : int
        Seed of the fault sampler or of the trace mapping.
    blast : bool
        Also compute the blast radius per component type.
    draw : FaultDraw, optional
        The fault sets, drawn already by :func:`fabric.faultset.draw_faults`
        with the model, seed and samples above (a sweep's design point draws
        once for all its metrics); drawn here when not given.

    Returns
    -------
    dict
        ``tp``, ``policy``, ``gpus``, ``nodes``, ``fault_model``,
        ``baseline`` (no fault), ``waste_ratio`` (mean, p50, p99, min, max,
        pooled), ``waste_ratio_all_gpus``, ``healthy_gpus``, ``usable_gpus``,
        ``wasted_gpus``, ``blast_radius`` (when ``blast``) and ``trace`` (trace
        statistics, when replaying).
    """
    pol = policy_for(fabric)
    tp = pol.check_tp(tp)
    nodes = pol.nodes
    whole(samples, "samples")
    check_seed(seed)
    model = fault_model(node_fault_ratio, fault_ratios, mode, trace, trace_mapping)
    if model.kind == "none":
        raise FabricError("node_fault_ratio", "give --node-fault-ratio R (or other fault ratios) or --trace")
    if draw is None and model.kind == "trace":
        draw = draw_faults(fabric, model, int(seed), int(samples), nodes)
    base_batch = FaultBatch.from_nodes(nodes, FaultSamples.empty(1, nodes.n_nodes))
    base = int(pol.count(tp, base_batch)[0])
    out: dict = {
        "tp": tp, "policy": {"kind": pol.kind, "rule": pol.rule}, "gpus": nodes.n_gpus, "nodes": nodes.n_nodes,
        "baseline": {"usable_gpus": base, "waste_ratio": (nodes.n_gpus - base) / nodes.n_gpus},
    }
    if model.kind == "trace":
        out.update(_trace_waste(pol, tp, draw, trace_mapping, seed))
    else:
        out.update(_iid_waste(pol, tp, fabric, model, samples, seed, draw))
    if blast:
        out["blast_radius"] = blast_radius(pol, tp)
    return out


def _trace_waste(pol, tp: int, draw: FaultDraw, trace_mapping: str, seed: int) -> dict:
    """``fault_model``, ``trace`` and the time-weighted waste statistics of a replayed trace."""
    nodes = pol.nodes
    tr, replay = draw.trace, draw.replay
    batch = FaultBatch.from_nodes(nodes, replay.down)
    weights = replay.durations
    out: dict = {"fault_model": {"kind": "trace", "trace": tr.name, "mapping": trace_mapping, "seed": seed,
                                 "intervals": int(weights.size), "horizon_days": float(tr.horizon),
                                 "down_nodes_time_mean": replay.time_mean(replay.down.counts())},
                 "trace": tr.statistics().to_dict()}
    out.update(waste_summary(nodes.n_gpus, batch.healthy, pol.count(tp, batch), weights))
    return out


def _iid_waste(pol, tp: int, fabric: Fabric, model, samples: int, seed: int, draw: FaultDraw | None) -> dict:
    """``fault_model`` and the waste statistics over ``samples`` i.i.d. fault sets."""
    nodes = pol.nodes
    mapper = EffectMapper(pol)
    healthy, usable, down = [], [], []
    # batch by batch: the working arrays stay small; the fault sets do not depend on the batching
    # a shared draw is read batch by batch; else the same streams are drawn batch by batch (memory stays
    # bounded for 10^4 samples of 10^5 GPUs): the fault sets are the same either way
    chunks = draw.chunks(chunk_sizes(samples)) if draw is not None else \
        iter_components(fabric, model, int(samples), int(seed), nodes)
    for comp in chunks:
        batch = FaultBatch.from_nodes(nodes, comp["node"]) if set(comp) == {"node"} else mapper.batch(comp)
        healthy.append(batch.healthy)
        usable.append(pol.count(tp, batch))
        down.append(batch.down_nodes.counts())
    out: dict = {"fault_model": {"kind": "iid", **model.to_dict(), "samples": int(samples), "seed": int(seed),
                                 "down_nodes_mean": float(np.concatenate(down).mean())}}
    out.update(waste_summary(nodes.n_gpus, np.concatenate(healthy), np.concatenate(usable)))
    return out


def fault_model(node_fault_ratio: float | None = None, fault_ratios: Mapping[str, float] | None = None,
                mode: str = "bernoulli", trace: Trace | str | None = None,
                trace_mapping: str = "tile") -> FaultModel:
    """The :class:`~fabric.faults.FaultModel` of :func:`evaluate_faults`' arguments.

    ``node_fault_ratio`` joins ``fault_ratios`` as the ``node`` ratio; a trace
    excludes both.
    """
    if trace is not None:
        if node_fault_ratio is not None or fault_ratios:
            raise FabricError("trace", "give either a trace or fault ratios, not both")
        return FaultModel(trace=trace, trace_mapping=trace_mapping)
    ratios = dict(fault_ratios or {})
    if node_fault_ratio is not None:
        if "node" in ratios:  # one of the two was silently dropped (the node_fault_ratio won)
            raise FabricError("fault_ratios[node]", f"{ratios['node']!r} repeats the node fault ratio given on its "
                                                    f"own; give the node ratio once")
        ratios["node"] = node_fault_ratio
    return FaultModel(ratios, mode)


CURVE_FIELDS = ("waste_ratio", "waste_ratio_all_gpus", "healthy_gpus", "usable_gpus", "wasted_gpus")
"""The fields of :func:`evaluate_faults` that a curve row keeps."""


def fault_curve(fabric: Fabric, tp: int, ratios, known: Mapping[float, dict] | None = None, **kwargs) -> list[dict]:
    """One row per node fault ratio: ``node_fault_ratio`` plus the waste metrics (no blast radius).

    Parameters
    ----------
    fabric : Fabric
    tp : int
    ratios : iterable of float
        Node fault ratios, in the order of the rows.
    known : mapping of float to dict, optional
        Results of :func:`evaluate_faults` the caller has already, by ratio
        (with the same ``kwargs``): reused rather than evaluated again.
    **kwargs
        Passed to :func:`evaluate_faults` (``samples``, ``seed``, ``mode``, ``fault_ratios``).
    """
    known = dict(known or {})
    rows = []
    for r in ratios:
        r = ratio(r, "node_fault_ratio")
        res = known.get(float(r)) or evaluate_faults(fabric, tp, node_fault_ratio=float(r), blast=False, **kwargs)
        rows.append({"node_fault_ratio": float(r), **{k: res[k] for k in CURVE_FIELDS}})
    return rows
