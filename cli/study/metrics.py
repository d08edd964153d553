"""The shipped metrics of a study: one adapter per metric, each a call of the single command's function.

Adding a metric is one registration (:func:`cli.study.registry.register_metric`)::

    @register_metric("my_metric", help="what it measures, with units", requires=("tp",))
    def _my_metric(ctx: PointContext) -> dict:
        # ctx.point (the inputs), ctx.fabric (built once per batch), ctx.catalog, ctx.options
        return my_summary(ctx.fabric, ctx.point.tp, seed=ctx.point.seed)   # the single command's function

Metrics reuse the same functions as the single commands (``cost`` calls
:func:`fabric.cost.cost_summary`, ``build`` calls :func:`topologies.build_summary`,
``faults`` calls :func:`solvers.allocation.faults_summary`), so a study row and
``fabric cost ... --json`` agree to the last bit; ``orchestrator``, ``mfu`` and
``rl`` call :func:`solvers.orchestrator.orchestrate_summary`,
:func:`workloads.mfu.mfu_summary` and :func:`workloads.rl.compare.rl_point`.  Lists and wall-clock
fields (``*_seconds``, the search's ``seconds``) of their JSON are left out of
rows, so rows stay deterministic apart from :data:`cli.study.evaluator.TIMING_COLUMNS`.
"""

from __future__ import annotations

import functools
import time
from typing import Any, Callable

from cli.common import parse_dp
from cli.study.context import PointContext
from cli.study.registry import MetricOption, register_metric
from fabric.cost import cost_summary
from fabric.errors import FabricError
from fabric.faults import MODES
from fabric.faultset import FaultDraw, draw_faults
from fabric.trace import MAPPINGS
from solvers.allocation.summary import DEFAULT_SAMPLES, faults_summary
from topologies import build_summary
from workloads.mfu import mfu_summary
from workloads.rl.compare import rl_point


_SCOPE_FIELDS = ("capex_usd", "capex_per_gpu_usd", "power_w", "power_per_gpu_w")


@register_metric("cost", fabric_only=True,
                 help="capex and power, total and per GPU, by scope (the numbers of `fabric cost --json`)")
def _cost(ctx: PointContext) -> dict[str, Any]:
    data = cost_summary(ctx.fabric, ctx.catalog)
    out = {k: data[k] for k in ("gpus", *_SCOPE_FIELDS)}
    for scope, values in data["by_scope"].items():
        out[scope] = {k: values[k] for k in _SCOPE_FIELDS}
    return out


@register_metric("build", fabric_only=True, help="counts of what was built (the `counts` of `fabric build --json`)")
def _build(ctx: PointContext) -> dict[str, Any]:
    return build_summary(ctx.fabric)["counts"]


@register_metric("noop", help="no columns and no Fabric: measures the sweep's own overhead per point",
                 options={"sleep_s": MetricOption(float, 0.0, "seconds to sleep per point (tests of interruption)",
                                            lambda v: None if v >= 0 else "must be >= 0")})
def _noop(ctx: PointContext) -> dict[str, Any]:
    if ctx.options["sleep_s"]:
        time.sleep(ctx.options["sleep_s"])
    return {}


def _choice(*allowed: str) -> Callable[[Any], str | None]:
    return lambda v: None if v in allowed else f"{v!r} not allowed; use one of {', '.join(allowed)}"


FAULT_OPTIONS = {
    "samples": MetricOption(int, DEFAULT_SAMPLES, "Monte Carlo samples per point (i.i.d. fault models)",
                            lambda v: None if v >= 1 else "must be >= 1"),
    "mode": MetricOption(str, "bernoulli", "i.i.d. sampling: bernoulli or exact", _choice(*MODES)),
    "trace_mapping": MetricOption(str, "tile", "trace servers -> nodes: tile or sample", _choice(*MAPPINGS)),
    "blast": MetricOption(bool, True, "also compute the blast radius per component"),
}
"""Options of the ``faults`` metric; ``samples``, ``mode`` and ``trace_mapping`` decide the point's fault draw."""


def point_faults(ctx: PointContext) -> FaultDraw | None:
    """The point's fault sets, drawn once and shared by all its metrics (None for fault model ``none``).

    Drawn with the ``faults`` metric's options (``samples``, ``mode``,
    ``trace_mapping``) as the study set them, or their defaults: the
    ``orchestrator`` metric places on sample 0 of the very draw whose waste
    ratio the ``faults`` metric reports.
    """
    fault = ctx.point.fault
    if fault.kind == "none":
        return None
    opt = {k: o.default for k, o in FAULT_OPTIONS.items()}
    request = next((r for r in ctx.requests if r.name == "faults"), None)
    if request is not None:  # the faults metric's options as it sees them: its own, then the workload's
        opt.update(dict(request.options))
        opt.update({k: FAULT_OPTIONS[k].parse(k, v, "workload") for k, v in ctx.point.workload.params
                    if k in FAULT_OPTIONS})
    model = fault.fault_model(mode=opt["mode"], trace_mapping=opt["trace_mapping"])
    return ctx.memo("fault_draw", lambda: draw_faults(ctx.fabric, model, ctx.point.seed, opt["samples"]))


@functools.lru_cache(maxsize=32)
def _tp_policy(architecture: str, gpus: int, given: tuple):
    """The allocation policy of the design built at ``gpus`` (shipped catalog: prices do not shape the HBD), or None
    when it does not build at that size (the point's own build then says why)."""
    from solvers.allocation.policy import policy_for
    from topologies import build

    try:
        return policy_for(build(architecture, gpus, dict(given)))
    except FabricError:
        return None


def check_tp_for_design(design: dict[str, Any], workload: Any, field: str) -> None:
    """Refuse, when the spec is read, a workload's TP size that the design's HBD refuses (exit 2, naming ``field``).

    The check is the allocation's own (:meth:`solvers.allocation.base.Policy.check_tp`, the one of
    ``fabric faults`` and the API) on the design itself up to ``PROBE_GPUS`` GPUs; above, on a probe of
    ``PROBE_GPUS`` GPUs with the same parameters for the rules that do not depend on size (the node, cube or
    line a TP group must divide or fill), plus TP at most the design's GPUs.
    """
    from cli.common import PROBE_GPUS

    tp, gpus = workload.tp, int(design["gpus"])
    if tp is None:
        return
    if tp > gpus:
        raise FabricError(field, f"{tp} exceeds the {gpus:,} GPUs of {design['label']}")
    pol = _tp_policy(design["architecture"], min(gpus, PROBE_GPUS), tuple(design["given"]))
    if pol is None:
        return
    try:
        pol.check_tp(tp) if gpus <= PROBE_GPUS else pol.check_tp_shape(tp)
    except FabricError as exc:
        raise FabricError(field, exc.message) from None


@register_metric("faults", requires=("tp",), options=FAULT_OPTIONS, check=check_tp_for_design,
                 help="GPU waste ratio and blast radius at the point's TP size (the numbers of `fabric faults --json`)")
def _faults(ctx: PointContext) -> dict[str, Any]:
    """``fabric faults --json`` for the point: its fault model, TP size and seed.

    Fault model ``none`` is node fault ratio 0 (the fault-free baseline).  The
    blast radius depends only on the Fabric and the TP size, so the first point
    of each (Fabric, TP) in a batch computes it and the others reuse it: every
    row still equals the command's output.
    """
    p, opt = ctx.point, ctx.options
    kw: dict[str, Any] = {"samples": opt["samples"], "mode": opt["mode"], "seed": p.seed, "draw": point_faults(ctx)}
    if p.fault.kind == "trace":
        kw = {"trace": p.fault.path, "trace_mapping": opt["trace_mapping"], "seed": p.seed, "draw": kw["draw"]}
    elif p.fault.kind == "random" and p.fault.component != "node":
        kw["fault_ratios"] = {p.fault.component: p.fault.ratio}
    else:
        kw["node_fault_ratio"] = p.fault.ratio if p.fault.kind == "random" else 0.0
    tp = p.workload.tp
    if not opt["blast"]:
        data = faults_summary(ctx.fabric, tp, blast=False, **kw)
    else:
        memo = ctx.fabric_memo(("faults_blast_radius", tp), dict)
        if "blast_radius" in memo:
            data = {**faults_summary(ctx.fabric, tp, blast=False, **kw), "blast_radius": memo["blast_radius"]}
        else:
            data = faults_summary(ctx.fabric, tp, blast=True, **kw)
            memo["blast_radius"] = data["blast_radius"]
    # the inputs are columns already (architecture, p_*, tp)
    return {k: v for k, v in data.items() if k not in ("architecture", "params", "tp")}


def _scalar_tree(data: dict[str, Any], drop: tuple[str, ...] = ()) -> dict[str, Any]:
    """``data`` without the keys in ``drop``, wall-clock ``*seconds`` fields and lists (at any depth)."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        if k in drop or k == "seconds" or k.endswith("_seconds") or isinstance(v, (list, tuple)):
            continue
        out[k] = _scalar_tree(v) if isinstance(v, dict) else v
    return out


def _positive(v: Any) -> str | None:
    return None if v > 0 else "must be > 0"


def _dp_option(v: Any) -> str | None:
    try:
        parse_dp(v)
    except FabricError as exc:
        return exc.message
    return None


def _time_limit(v: Any) -> str | None:
    from cli.validate import MAX_SECONDS  # the bound of `fabric orchestrate --time-limit`

    return None if 0 < v <= MAX_SECONDS else f"must be in (0, {MAX_SECONDS:g}] seconds"


def _check_orchestrator_options(options: dict[str, Any], field: str) -> None:
    """The baselines solve no ILP: a ``time_limit`` or ``gap`` with them is refused, as by ``fabric orchestrate``."""
    solver = options.get("solver", "ilp")
    for key in ("time_limit", "gap"):
        if solver != "ilp" and key in options:
            raise FabricError(f"{field}.{key}", f"sets the ILP; solver {solver} solves none (drop it, or use solver "
                                                "ilp)")


@register_metric(
    "orchestrator", requires=("tp", "node_faults"), options_check=_check_orchestrator_options,
    check=check_tp_for_design,
    help="cross-ToR traffic and GPU utilisation after placing TP rings and DP groups on the point's faulty fabric "
         "(the numbers of `fabric orchestrate --json`)",
    options={
        "dp": MetricOption(str, "max", "TP groups per DP group, or 'max' (one instance, all replicas that fit)",
                     _dp_option),
        "solver": MetricOption(str, "ilp", "ilp (greedy-warm-started), greedy or fault-unaware",
                         _choice("ilp", "greedy", "fault-unaware")),
        "time_limit": MetricOption(float, 60.0, "ILP time limit, seconds (a row that hits it may differ between runs)",
                             _time_limit),
        "gap": MetricOption(float, 0.0, "stop the ILP at this relative gap", lambda v: None if 0 <= v < 1 else "must be in [0, 1)"),
    })
def _orchestrator(ctx: PointContext) -> dict[str, Any]:
    """``fabric orchestrate --json`` with the point's TP size and fault model (node faults or a trace) and seed.

    The faulty nodes are the point's one fault set (:func:`point_faults`: sample 0 of the draw the ``faults``
    metric evaluates, or the trace at its moment with the most nodes down), so both metrics of a row see
    the same faults.  Fault model ``none`` places on the fault-free fabric.  Timing fields (``*_seconds``)
    are left out.
    """
    from solvers.orchestrator import orchestrate_summary  # lazily: it imports PuLP

    p, opt = ctx.point, ctx.options
    if p.fault.kind == "random" and p.fault.component not in (None, "node"):
        raise FabricError("orchestrator", f"places on node faults only, not {p.fault.component!r} faults")
    draw = point_faults(ctx)
    faults = None if draw is None else draw.fault_set()
    data = orchestrate_summary(ctx.fabric, tp=p.workload.tp, dp=parse_dp(opt["dp"]), solver=opt["solver"],
                               time_limit=opt["time_limit"], gap_rel=opt["gap"], seed=p.seed,
                               faulty_nodes=None if faults is None else faults.nodes)
    if faults is not None:
        data["fault_source"] = faults.source
    return _scalar_tree(data, drop=("architecture", "tp"))


def _unset_or_positive(v: Any) -> str | None:
    return None if v >= 0 else "must be >= 1 (0: not pinned)"


def _healthy_job(ctx: PointContext) -> dict[str, Any]:
    """``mfu_summary`` of the point's Fabric for the options that the mfu and goodput metrics share.

    Memoised per Fabric and options, so that the goodput metric reuses the mfu metric's healthy job.
    """
    opt = ctx.options
    fixed = {k: opt[k] for k in ("tp", "pp", "dp") if opt[k]}
    key = ("mfu_summary", opt["model"], opt["search"], opt["global_batch"], opt["comm"], tuple(sorted(fixed.items())))
    return ctx.fabric_memo(key, lambda: mfu_summary(ctx.fabric, opt["model"], catalog=ctx.catalog,
                                                    search=opt["search"], global_batch=opt["global_batch"] or None,
                                                    comm=opt["comm"], **fixed))


@register_metric(
    "mfu", fabric_only=True,
    help="LLM training step time and MFU (the numbers of `fabric mfu --json`; once per Fabric)",
    options={
        "model": MetricOption(str, "llama3-70b", "model preset or file"),
        "search": MetricOption(bool, True, "search the best configuration (tp/pp/dp pin theirs)"),
        "global_batch": MetricOption(int, 0, "sequences per step (0: about 4 Mi tokens)", _unset_or_positive),
        "tp": MetricOption(int, 0, "tensor-parallel size (0: free / 1 without search)", _unset_or_positive),
        "pp": MetricOption(int, 0, "pipeline-parallel size (0: free / 1 without search)", _unset_or_positive),
        "dp": MetricOption(int, 0, "data-parallel size (0: free / as many as fit)", _unset_or_positive),
        "comm": MetricOption(str, "sim", "collective timing: sim or analytic", _choice("sim", "analytic")),
    })
def _mfu(ctx: PointContext) -> dict[str, Any]:
    data = _healthy_job(ctx)
    out = _scalar_tree(data, drop=("architecture", "params", "gpus", "model_spec", "gemm_model", "search"))
    out["seq_len"] = data["model_spec"]["seq_len"]
    if "search" in data:
        out["search"] = {k: data["search"][k] for k in ("considered", "invalid", "oom", "screened", "confirmed")
                         if k in data["search"]}
    return out


@register_metric(
    "rl", fabric_only=True,
    help="RL post-training phase times, samples/s and samples/s per $M on the point's Fabric "
         "(one fabric's object of `fabric rl --json`; once per Fabric)",
    options={
        "model": MetricOption(str, "llama3-8b", "model preset or file"),
        "comm": MetricOption(str, "analytic", "timing: analytic (fast) or sim", _choice("sim", "analytic")),
        "pipeline": MetricOption(str, "sync", "sync or async (one-step asynchronous)", _choice("sync", "async")),
        "samples": MetricOption(int, 0, "RL samples per iteration (0: the default)", _unset_or_positive),
        "train_fraction": MetricOption(float, 0.0, "share of GPUs that train (0: the default)",
                                 lambda v: None if 0 <= v < 1 else "must be in [0, 1)"),
    })
def _rl(ctx: PointContext) -> dict[str, Any]:
    opt = ctx.options
    params = {k: opt[k] for k in ("samples", "train_fraction") if opt[k]}
    data = rl_point(ctx.fabric, opt["model"], params=params, catalog=ctx.catalog, pipeline=opt["pipeline"],
                    timing=opt["comm"])
    return _scalar_tree(data, drop=("architecture", "params", "gpus"))


def _check_goodput_options(options: dict[str, Any], field: str) -> None:
    """``sizing: goodput`` chooses the DP size, so a pinned ``dp`` contradicts it (as ``--sizing goodput --dp``)."""
    from workloads.goodput.sizing import check_sizing

    try:
        check_sizing(options.get("sizing", "throughput"), bool(options.get("dp")))
    except FabricError as exc:
        raise FabricError(f"{field}.{exc.field}", exc.message) from None


@register_metric(
    "goodput", options_check=_check_goodput_options,
    help="training goodput over the point's fault trace: effective tokens/s, goodput ratio, GPU-hours lost by "
         "cause, tokens/s per $M and per MW (the numbers of `fabric goodput --json`; trace points only, "
         "other fault models get empty columns)",
    options={
        "model": MetricOption(str, "llama3-70b", "model preset or file"),
        "search": MetricOption(bool, True, "search the healthy job's best configuration (as the mfu metric)"),
        "global_batch": MetricOption(int, 0, "sequences per step (0: about 4 Mi tokens)", _unset_or_positive),
        "tp": MetricOption(int, 0, "tensor-parallel size (0: free / 1 without search)", _unset_or_positive),
        "pp": MetricOption(int, 0, "pipeline-parallel size (0: free / 1 without search)", _unset_or_positive),
        "dp": MetricOption(int, 0, "data-parallel size (0: free / as many as fit)", _unset_or_positive),
        "comm": MetricOption(str, "sim", "collective timing: sim or analytic", _choice("sim", "analytic")),
        "policy": MetricOption(str, "fixed", "fixed (wait / use spares) or elastic DP", _choice("fixed", "elastic")),
        "sizing": MetricOption(str, "throughput", "job size: throughput (the fastest configuration) or goodput (its "
                                                  "DP size with the most effective tokens/s over the trace)",
                               _choice("throughput", "goodput")),
        "trace_mapping": MetricOption(str, "tile", "trace servers -> nodes: tile or sample", _choice("tile", "sample")),
    })
def _goodput(ctx: PointContext) -> dict[str, Any]:
    from workloads.goodput.summary import goodput_summary
    from workloads.goodput import SCALAR_KEYS

    p, opt = ctx.point, ctx.options
    if p.fault.kind != "trace":
        return {k: None for k in SCALAR_KEYS}
    mfu = _healthy_job(ctx)
    data = goodput_summary(ctx.fabric, opt["model"], trace=p.fault.path, catalog=ctx.catalog, policy=opt["policy"],
                           seed=p.seed, trace_mapping=opt["trace_mapping"], comm=opt["comm"], series=False,
                           mfu_data=mfu, sizing=opt["sizing"], global_batch=opt["global_batch"] or None,
                           **({"dp": opt["dp"]} if opt["dp"] else {}))
    return {k: data[k] for k in SCALAR_KEYS}


_MFU_WORKLOAD_PARAMS = ("model", "pp", "dp", "ep", "cp", "micro_batch", "global_batch", "recompute", "interleave")


@register_metric(
    "mfu_workload", requires=("tp",),
    help="step time and MFU of the point's workload at its pinned TP (and params model, ep, pp, ...); a TP larger "
         "than the HBD runs over the scale-out network (the numbers of `fabric mfu --tp T --json`)",
    options={"comm": MetricOption(str, "sim", "collective timing: sim or analytic", _choice("sim", "analytic")),
             # the workload's own parallelism (workloads[i].params), checked by the spec like any option
             "model": MetricOption(str, "llama3-70b", "model preset or file"),
             **{k: MetricOption(int, 0, f"{k} (0: the default)", _unset_or_positive)
                for k in ("pp", "dp", "ep", "cp", "micro_batch", "global_batch", "interleave")},
             "recompute": MetricOption(str, "none", "activation recomputation: none, selective or full",
                                       _choice("none", "selective", "full"))})
def _mfu_workload(ctx: PointContext) -> dict[str, Any]:
    p = ctx.point
    opt = ctx.options
    params = {k: opt[k] for k in _MFU_WORKLOAD_PARAMS if k not in ("model", "global_batch") and opt[k]}
    model = opt["model"]
    gb = opt["global_batch"] or None
    key = ("mfu_workload", p.workload, ctx.options["comm"])
    data = ctx.fabric_memo(key, lambda: mfu_summary(ctx.fabric, model, catalog=ctx.catalog, search=False,
                                                    global_batch=gb, comm=ctx.options["comm"], tp=p.workload.tp,
                                                    **params))
    out = {k: data[k] for k in ("model", "config", "mfu", "cluster_mfu", "step_time_s", "tokens_per_s",
                                "gpus_used", "memory_gb_per_gpu")}
    out["tp_beyond_hbd"] = bool(data.get("warnings"))
    out["exposed_share"] = {k: v / data["step_time_s"] for k, v in data["breakdown_s"].items()}
    return out
