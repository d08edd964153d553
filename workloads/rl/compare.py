"""Disaggregated RL on a static fat-tree vs an OCS-reconfigured rfabric: one Fabric, a pair, the table.

The static fabric is ``dgx`` (8-GPU nodes, one NIC per GPU) on a fat-tree
with ToR oversubscription ``oversubscription`` (3 tiers once the GPUs need
more than one pod; a single pod is a 2-tier leaf-spine unless ``tiers=3``);
the rfabric is the same ToRs and pods with the aggregation uplinks through
OCS (``core_ratio``: 0 by default, the OCS joining pods directly; 1 keeps a
full electrical core behind it), whose circuits the solver assigns per phase.

The comparison is fair by construction: both sides are built for the same
GPUs, on the same ToRs and pods at the same oversubscription, and the OCS is
placed between pods, where it can replace or re-wire a tier.  When the static
fat-tree reaches every GPU in one pod (a 2-tier leaf-spine), no OCS design can
pay, and the rfabric object says so (``verdict``, ``reason``) instead of
pricing an idle OCS core.

:func:`rl_point` evaluates one Fabric built elsewhere (a sweep's design point);
:func:`rl_summary` the static fabric and/or the rfabric (one object per fabric
with ``phases``, ``iteration_s``, ``samples_per_s``, ``capex_usd`` and
``samples_per_s_per_musd``); :func:`rl_table` static fat-trees at 1:1, 2:1
and 4:1 against the rfabric at equal cost and at equal performance, and the
rfabric's win as the OCS reconfiguration time grows.

``workloads`` does not import ``topologies`` (DESIGN's layers): the functions
that build Fabrics take the topology layer as an argument, any object with
:class:`Topologies`' three functions; the ``topologies`` package itself is one::

    import topologies
    from workloads.rl.compare import format_table, rl_table

    print("\\n".join(format_table(rl_table(topologies, 256, "llama3-8b", params={"k": 16}, timing="analytic"))))
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol

from fabric.catalog import Catalog, load_catalog
from fabric.checks import is_number, is_whole
from fabric.errors import ComputeError, FabricError
from fabric.model import Fabric


class Topologies(Protocol):
    """What the comparison needs of the topology layer (the ``topologies`` package satisfies it)."""

    build: Callable[..., Fabric]
    """``build(architecture, gpus, params, catalog) -> Fabric``."""

    def param_names(self, architecture: str) -> frozenset[str]:
        """The ``-p`` parameter names of ``architecture``."""

    def split_ports(self, k: int, ratio: float) -> tuple[int, int]:
        """Down and up ports of a radix-``k`` switch at oversubscription ``ratio``."""


FABRICS = ("static", "rfabric", "both")
STATIC_RATIOS = (1.0, 2.0, 4.0)
RFABRIC_CORE_RATIOS = (0.0, 0.5, 1.0)
DEFAULT_GPU = "h800"  # OrchestrRL's testbed GPU (FIGURES: 64 H800)
DEFAULT_RFABRIC_CORE_RATIO = 0.0
RECONFIG_SWEEP = ("ocs_palomar", "10ms", "50ms", "100ms", "ocs_calient_s320")
EQUAL_PERF_TOLERANCE = 0.005  # "equal performance": within 0.5 % of the static samples/s
#: Peak resident bytes per GPU of one RL evaluation of both fabrics, by timing (measured, llama3-8b, default
#: parameters): sim 13.7 KB at 131,072 GPUs (1.79 GB), 14.8 KB at 65,536, 18.9 KB with --async at 131,072
#: (its weight sync is simulated with the training traffic behind it); analytic 2.5 KB at 524,288 (1.33 GB).
#: The simulator's routes of the weight-sync flows dominate: about one flow per rollout GPU, each over a
#: fat-tree route of ~260 arcs.  Rounded up to cover the worst measured case.
RL_BYTES_PER_GPU = {"sim": 20 << 10, "analytic": 4 << 10}


def check_rl_size(gpus: int, timing: str, field: str = "gpus") -> None:
    """Refuse, before any Fabric is built, a GPU count that is not a whole number > 0 or an RL evaluation whose
    peak memory passes the ``memory`` limit.

    Each fabric is checked against the limits as it is built, but the simulated weight sync and
    training then hold several times the Fabric's own memory: ``rl --gpus 524288`` passed every
    fabric check and ran out of memory in the simulator after 18 s.

    Parameters
    ----------
    gpus : int
        GPUs of the cluster.
    timing : {'sim', 'analytic'}
    field : str
        The input to blame.
    """
    from fabric.limits import check_memory_per

    if not (is_whole(gpus) and gpus > 0):
        raise FabricError(field, f"{gpus!r} must be a whole number > 0")
    if timing not in RL_BYTES_PER_GPU:
        raise FabricError("timing", f"{timing!r} not allowed; use one of {', '.join(RL_BYTES_PER_GPU)}")
    check_memory_per(gpus, "GPUs", RL_BYTES_PER_GPU[timing], field, f"for RL with {timing} timing")


def split_params(topologies: Topologies, given: dict[str, str]) -> tuple[dict, dict, dict]:
    """``-p`` values into (RL parameters, static-fabric parameters, rfabric parameters).

    Raises
    ------
    FabricError
        A name that is neither an RL nor a fabric parameter.
    """
    from workloads.rl.config import PARAMS_BY_NAME

    static_names = topologies.param_names("dgx") - {"oversubscription"}
    rfab_names = topologies.param_names("rfabric") - {"oversubscription"}
    if not isinstance(given, Mapping):
        raise FabricError("params", f"must be a mapping of parameter name to value, not {type(given).__name__}")
    rl, st, rf = {}, {}, {}
    for name, value in given.items():
        if name in PARAMS_BY_NAME:
            rl[name] = value
        elif name in static_names or name in rfab_names:
            if name in static_names:
                st[name] = value
            if name in rfab_names:
                rf[name] = value
        else:
            allowed = sorted(set(PARAMS_BY_NAME) | static_names | rfab_names)
            raise FabricError(f"params[{name}]", f"unknown parameter for `fabric rl`; allowed: {', '.join(allowed)}")
    return rl, st, rf


def build_pair(topologies: Topologies, gpus: int, oversubscription: float, static_params: dict,
               rfabric_params: dict, catalog: Catalog, which: str = "both") -> dict:
    """The Fabrics to compare: ``{"static": dgx fat-tree, "rfabric": ...}`` (the ones asked for)."""
    build = topologies.build
    if not (is_number(oversubscription) and oversubscription >= 1.0):
        raise FabricError("oversubscription", f"{oversubscription!r} must be >= 1 (ToR downlink:uplink)")
    oversubscription = float(oversubscription)  # the builders' -p oversubscription is a float
    out = {}
    try:
        if which in ("static", "both"):
            out["static"] = build("dgx", gpus, {"gpu": DEFAULT_GPU, **static_params,
                                                "oversubscription": oversubscription}, catalog)
        if which in ("rfabric", "both"):
            out["rfabric"] = build("rfabric", gpus, {"gpu": DEFAULT_GPU, "core_ratio": DEFAULT_RFABRIC_CORE_RATIO,
                                                     **rfabric_params, "oversubscription": oversubscription}, catalog)
    except FabricError as exc:
        # the builders' params[oversubscription] is this function's own parameter here (never a -p of the caller):
        # `rl --oversubscription 1e6` was blamed on `-p oversubscription`, which rl does not take
        if exc.field == "params[oversubscription]":
            raise FabricError("oversubscription", exc.message) from None
        raise
    return out


def fabric_result(result, fabric) -> dict:
    """The JSON object of one fabric."""
    d = result.to_dict()
    d["params"] = {k: v for k, v in fabric.params.items()}
    d["notes"] = list(d.get("notes", [])) + list(fabric.notes)
    return d


def rl_summary(topologies: Topologies, gpus: int, model: Any, *, fabric: str = "both",
               oversubscription: float = 1.0, reconfig_time: float | None = None, pipeline: str = "sync", params: dict | None = None,
               catalog: Catalog | None = None, timing: str = "sim") -> dict:
    """RL iteration on the static fat-tree and/or the rfabric: one object per fabric.

    Parameters
    ----------
    topologies : Topologies
        The topology layer (the ``topologies`` package).
    gpus : int
    model : str or ModelSpec
        A preset name, a model file, or a spec.
    fabric : {'static', 'rfabric', 'both'}
    oversubscription : float
        ToR downlink:uplink ratio of both fabrics.
    reconfig_time : float, optional
        OCS reconfiguration time, seconds (default: the catalog's, Palomar 1.2 ms).
    pipeline : {'sync', 'async'}
    params : dict, optional
        ``-p`` values: RL parameters (:data:`workloads.rl.config.PARAMS`) and
        fabric parameters (``k``, ``gpu``, ``core_ratio``, ...).
    catalog : Catalog, optional
    timing : {'sim', 'analytic'}

    Returns
    -------
    dict
        ``{"static": {...}, "rfabric": {...}}``, each with ``phases`` (name ->
        seconds), ``iteration_s``, ``samples_per_s``, ``capex_usd``,
        ``samples_per_s_per_musd`` and details.
    """
    from workloads.models import load_model
    from workloads.rl import RLConfig, evaluate_rl

    if fabric not in FABRICS:
        raise FabricError("fabric", f"{fabric!r} not allowed; use one of {', '.join(FABRICS)}")
    check_rl_size(gpus, timing)
    cat = catalog or load_catalog()
    m = load_model(model)
    rl, st, rf = split_params(topologies, {} if params is None else params)
    cfg = RLConfig.from_params(rl, pipeline=pipeline)
    fabrics = build_pair(topologies, int(gpus), oversubscription, st, rf, cat,
                         "both" if fabric == "rfabric" else fabric)
    reason = None if fabric == "static" else ocs_useless(topologies, fabrics["static"])
    out = {}
    for name, fab in fabrics.items():
        if name == "static" and fabric == "rfabric":
            continue
        if name == "rfabric" and reason:
            out[name] = {"model": m.name, "architecture": "rfabric", "gpus": int(gpus),
                         "verdict": "no OCS design pays at this size", "reason": reason}
            continue
        r = evaluate_rl(fab, m, cfg, cat, reconfiguration_time=reconfig_time, timing=timing)
        out[name] = {"model": m.name, **fabric_result(r, fab)}
    if "rfabric" in out and "phases" in out["rfabric"]:
        out["rfabric"]["comparison"] = (
            f"same GPUs, ToRs and pods at {oversubscription:g}:1 as the static 3-tier fat-tree; the rfabric's "
            f"aggregation uplinks go through OCS with core_ratio {fabrics['rfabric'].params['core_ratio']:g} "
            "(0: no electrical core). Neither equal cost nor equal performance is imposed here: compare "
            "samples/s per $M, or use --table for the rfabric at equal cost and at equal performance")
        if "static" in out:
            out["rfabric"]["per_dollar_vs_static"] = (out["rfabric"]["samples_per_s_per_musd"]
                                                      / out["static"]["samples_per_s_per_musd"])
    return out


def ocs_useless(topologies: Topologies, static: Fabric) -> str | None:
    """Why no OCS design can pay on this cluster (None if one might): the static fabric has a single pod.

    An rfabric's OCS joins pods (or replaces the core between them).  When the
    static fat-tree reaches every GPU within one pod (a 2-tier leaf-spine),
    there is no pod-to-pod tier to replace or re-wire: an rfabric for the same
    GPUs would only add an aggregation tier and idle OCS, so it is never better
    per dollar.  The comparison is then decided by construction.
    """
    import numpy as np

    pods = np.unique(static.group("pod")[static.gpu_ids]).size
    if pods > 1:
        return None
    k = static.params.get("k")
    d, _ = topologies.split_ports(int(k), float(static.params.get("oversubscription", 1.0))) if k else (None, None)
    limit = f" (up to {int(k) * d:,} GPUs at radix {k} and this oversubscription)" if k else ""
    return (f"the static fabric reaches all {static.n_gpus:,} GPUs in one 2-tier leaf-spine{limit}, so there is no "
            "pod-to-pod tier for an OCS to replace or re-wire; an rfabric for the same GPUs would add an "
            "aggregation tier and idle OCS, and cost more for the same performance. Use more GPUs or a smaller "
            "radix (-p k) for a size where the OCS can pay")


def rl_point(fab, model: Any, *, params: dict | None = None, catalog: Catalog | None = None,
             reconfig_time: float | None = None, pipeline: str = "sync", timing: str = "sim") -> dict:
    """The RL object (as in :func:`rl_summary`) of one Fabric built elsewhere, e.g. a sweep's design point.

    ``params`` holds RL parameters only (the Fabric is already built).
    """
    from workloads.models import load_model
    from workloads.rl import RLConfig, evaluate_rl

    check_rl_size(fab.n_gpus, timing)
    cat = catalog or load_catalog()
    m = load_model(model)
    cfg = RLConfig.from_params(dict(params or {}), pipeline=pipeline)
    r = evaluate_rl(fab, m, cfg, cat, reconfiguration_time=reconfig_time, timing=timing)
    return {"model": m.name, **fabric_result(r, fab)}


def rl_table(topologies: Topologies, gpus: int, model: Any, *, reconfig_times: tuple = RECONFIG_SWEEP,
             pipeline: str = "sync", params: dict | None = None, catalog: Catalog | None = None, timing: str = "sim",
             ratios: tuple = STATIC_RATIOS, core_ratios: tuple = RFABRIC_CORE_RATIOS) -> dict:
    """Static fat-trees (``ratios``) vs the rfabric at equal cost and at equal performance; reconfiguration sweep.

    The rfabric candidates are every ToR ratio of ``ratios`` x every
    ``core_ratios``.  For each static ratio: *at equal cost* is the fastest
    rfabric whose capex does not exceed the static one's; *at equal
    performance* the cheapest rfabric within 0.5 % of its samples/s.  The
    sweep re-evaluates the rfabric that matches the first (reference) static
    fat-tree at equal performance, against it, at each reconfiguration time
    (catalog ids or times).

    Returns
    -------
    dict
        ``static`` and ``rfabric`` (candidate rows), ``rows`` (the comparison),
        ``sweep`` (the reconfiguration-time rows).
    """
    from fabric.units import parse_time
    from workloads.models import load_model
    from workloads.rl import RLConfig, evaluate_rl

    check_rl_size(gpus, timing)
    build = topologies.build
    cat = catalog or load_catalog()
    m = load_model(model)
    rl, st, rf = split_params(topologies, {} if params is None else params)
    cfg = RLConfig.from_params(rl, pipeline=pipeline)

    def row(label, fab, r):
        return {"label": label, "params": dict(fab.params), "capex_usd": r.capex_usd, "iteration_s": r.iteration_s,
                "samples_per_s": r.samples_per_s, "samples_per_s_per_musd": r.samples_per_s_per_musd,
                "phases": dict(r.phases), "reconfigurations": r.reconfigurations,
                "reconfiguration_time_s": r.reconfiguration_time_s}

    # the candidates' build parameters, not their Fabrics: holding all nine at once took nine times one
    # Fabric's memory; the one the sweep re-evaluates is built again (the same parameters, the same Fabric)
    statics, rfabs, built = [], [], {}
    for o in ratios:
        fab = build("dgx", gpus, {"gpu": DEFAULT_GPU, **st, "oversubscription": o}, cat)
        statics.append(row(f"static {o:g}:1", fab, evaluate_rl(fab, m, cfg, cat, timing=timing)))
    fab = None
    for o in ratios:
        for c in core_ratios:
            label = f"rfabric {o:g}:1 core {c:g}"
            p = {"gpu": DEFAULT_GPU, **rf, "oversubscription": o, "core_ratio": c}
            fab = r = None  # the previous candidate is let go before the next is built
            try:
                fab = build("rfabric", gpus, p, cat)
                r = evaluate_rl(fab, m, cfg, cat, timing=timing)
            except (FabricError, ComputeError) as exc:  # e.g. too many pods for a direct-connect OCS
                rfabs.append({"label": label, "error": str(exc)})
                continue
            built[label] = p
            rfabs.append(row(label, fab, r))
    fab = r = None
    ok = [r for r in rfabs if "error" not in r]
    if not ok:
        first = rfabs[0]
        raise ComputeError("rl table", f"every rfabric candidate failed ({len(rfabs)}); first, "
                                       f"{first['label']}: {first['error']}")
    rows = [_matches(s, ok) for s in statics]
    # the sweep: the rfabric that matches the reference fat-tree (first ratio) at equal performance, against it
    ref = statics[0]
    pick = rows[0]["equal_perf"] if rows else None
    sweep = []
    if pick:
        best = next(r for r in ok if r["label"] == pick)
        best_static = ref
        fab = build("rfabric", gpus, built[best["label"]], cat)
        for t in reconfig_times:
            rt = cat.value(t, "reconfiguration_time") if isinstance(t, str) and t in cat else \
                parse_time(t, "reconfig_times")
            r = evaluate_rl(fab, m, cfg, cat, reconfiguration_time=rt, timing=timing)
            sweep.append({"reconfiguration_time_s": rt, "source": t if isinstance(t, str) else "",
                          "rfabric": best["label"], "iteration_s": r.iteration_s,
                          "reconfigurations": r.reconfigurations, "samples_per_s_per_musd": r.samples_per_s_per_musd,
                          "versus": best_static["label"],
                          "per_dollar_gain": r.samples_per_s_per_musd / best_static["samples_per_s_per_musd"]})
    return {"model": m.name, "gpus": gpus, "pipeline": pipeline, "timing": timing, "static": statics,
            "rfabric": rfabs, "rows": rows, "sweep": sweep}


def _matches(s: dict, ok: list[dict]) -> dict:
    """One comparison row: static fat-tree ``s`` and, among the rfabric candidates ``ok``, the fastest at
    equal (or lower) capex and the cheapest at equal performance (within :data:`EQUAL_PERF_TOLERANCE`)."""
    cheap = [r for r in ok if r["capex_usd"] <= s["capex_usd"] * (1 + 1e-9)]
    eq_cost = max(cheap, key=lambda r: (r["samples_per_s"], -r["capex_usd"])) if cheap else None
    fast = [r for r in ok if r["samples_per_s"] >= s["samples_per_s"] * (1 - EQUAL_PERF_TOLERANCE)]
    eq_perf = min(fast, key=lambda r: (r["capex_usd"], -r["samples_per_s"])) if fast else None
    return {
        "static": s["label"], "static_capex_usd": s["capex_usd"], "static_samples_per_s": s["samples_per_s"],
        "static_samples_per_s_per_musd": s["samples_per_s_per_musd"],
        "equal_cost": eq_cost and eq_cost["label"],
        "equal_cost_samples_per_s": eq_cost and eq_cost["samples_per_s"],
        "equal_cost_speedup": eq_cost and eq_cost["samples_per_s"] / s["samples_per_s"],
        "equal_cost_per_dollar_gain": eq_cost and eq_cost["samples_per_s_per_musd"] / s["samples_per_s_per_musd"],
        "equal_perf": eq_perf and eq_perf["label"],
        "equal_perf_capex_usd": eq_perf and eq_perf["capex_usd"],
        "equal_perf_capex_saving": eq_perf and 1 - eq_perf["capex_usd"] / s["capex_usd"],
        "equal_perf_per_dollar_gain": eq_perf and eq_perf["samples_per_s_per_musd"] / s["samples_per_s_per_musd"],
    }


def format_table(data: dict) -> list[str]:
    """The comparison as Markdown lines (what the README shows)."""
    out = [f"{data['model']}, {data['gpus']:,} GPUs, {data['pipeline']} pipeline, timing: {data['timing']}", "",
           "| static | capex | samples/s | samples/s per $M | rfabric at equal cost | speed-up | per-$ gain "
           "| rfabric at equal performance | capex saving | per-$ gain |",
           "|---|---:|---:|---:|---|---:|---:|---|---:|---:|"]

    def pct(v):
        return "-" if v is None else f"{(v - 1) * 100:+.1f} %"

    for r in data["rows"]:
        saving = "-" if r["equal_perf_capex_saving"] is None else f"{r['equal_perf_capex_saving'] * 100:.1f} %"
        out.append(f"| {r['static']} | ${r['static_capex_usd'] / 1e6:,.1f}M | {r['static_samples_per_s']:.2f} | "
                   f"{r['static_samples_per_s_per_musd']:.4f} | {r['equal_cost'] or '-'} | "
                   f"{pct(r['equal_cost_speedup'])} | {pct(r['equal_cost_per_dollar_gain'])} | "
                   f"{r['equal_perf'] or '-'} | {saving} | {pct(r['equal_perf_per_dollar_gain'])} |")
    if data["sweep"]:
        s0 = data["sweep"][0]
        out += ["", f"{s0['rfabric']} vs {s0['versus']} as the OCS reconfiguration time grows:", "",
                "| reconfiguration time | re-wirings / iteration | iteration | per-$ gain |", "|---:|---:|---:|---:|"]
        for s in data["sweep"]:
            src = f" ({s['source']})" if s["source"] and not s["source"][0].isdigit() else ""
            out.append(f"| {s['reconfiguration_time_s'] * 1e3:g} ms{src} | {s['reconfigurations']} | "
                       f"{s['iteration_s']:.3f} s | {pct(s['per_dollar_gain'])} |")
    return out


