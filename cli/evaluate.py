"""Evaluate one design point: topology -> faults -> allocation -> simulation -> one row of metrics.

A *design point* is an architecture with parameters, a GPU count, a workload,
a fault model and a seed (see :class:`cli.study.DesignPoint`).  Each metric a
study can ask for is one entry of the :data:`METRICS` registry: a function of a
:class:`PointContext` that returns a dict of scalars (nested dicts are
flattened with ``_``).  The evaluator prefixes every column with the metric name
(``cost`` -> ``cost_capex_usd``), so metrics never collide with each other or
with the input columns.

Adding a metric is one registration::

    @register_metric("my_metric", help="what it measures, with units", requires=("tp",))
    def _my_metric(ctx: PointContext) -> dict:
        # ctx.point (the inputs), ctx.fabric (built once per batch), ctx.catalog, ctx.options
        return my_summary(ctx.fabric, ctx.point.tp, seed=ctx.point.seed)   # the single command's function

Metrics reuse the same functions as the single commands (``cost`` calls
:func:`cli.cost.cost_summary`, ``build`` calls :func:`cli.build.build_summary`,
``faults`` calls :func:`solvers.allocation.faults_summary`), so a study row and
``fabric cost ... --json`` agree to the last bit; ``orchestrator``, ``mfu`` and
``rl`` call :func:`solvers.orchestrator.orchestrate_summary`,
:func:`workloads.mfu.mfu_summary` and :func:`cli.rl.rl_point`.  Lists and wall-clock
fields (``*_seconds``, the search's ``seconds``) of their JSON are left out of
rows, so rows stay deterministic apart from :data:`TIMING_COLUMNS`.

The Fabric of a point is built lazily, on the first metric that asks for
``ctx.fabric``, and cached for the rest of the batch: points that differ only
in fault model, seed or workload reuse it (batches keep such points together).
"""

from __future__ import annotations

import datetime as _dt
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import fabric
from cli.build import build_summary
from cli.cost import cost_summary
from cli.orchestrate import parse_dp
from cli.point import DesignPoint
from cli.rl import rl_point
from fabric.catalog import Catalog
from fabric.errors import FabricError
from fabric.faults import MODES
from fabric.faultset import FaultDraw, draw_faults
from fabric.model import Fabric
from fabric.trace import MAPPINGS
from solvers.allocation.summary import DEFAULT_SAMPLES, faults_summary
from topologies import build
from workloads.mfu import mfu_summary

SCHEMA_VERSION = 1
"""Version of the row layout; bump when columns change meaning (readers refuse newer rows)."""

TIMING_COLUMNS = ("evaluated_at", "eval_s")
"""The only columns that differ between two runs of the same point."""

SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class MetricOption:
    """One option a metric accepts in the study spec (``metrics: [{noop: {sleep_s: 0.01}}]``).

    Attributes
    ----------
    type : type
        ``int``, ``float``, ``bool`` or ``str``; an int is accepted for a float.
    default : Any
    help : str
    check : callable, optional
        ``value -> error message or None``.
    """

    type: type
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric.

    Attributes
    ----------
    name : str
        Key in the study spec and prefix of the metric's columns.
    fn : callable
        ``PointContext -> dict`` of scalar columns (a nested dict is flattened
        with ``_``).
    help : str
    requires : tuple of str
        Inputs every point must carry, checked when the spec is validated
        (``"tp"``: the workload's tensor-parallel size).
    options : dict of str to MetricOption
    fabric_only : bool
        The result depends only on the built Fabric (not on faults, seed or
        workload), so it is computed once per Fabric in a batch.
    """

    name: str
    fn: Callable[["PointContext"], dict[str, Any]]
    help: str
    requires: tuple[str, ...] = ()
    options: dict[str, MetricOption] = field(default_factory=dict)
    fabric_only: bool = False


@dataclass(frozen=True)
class MetricRequest:
    """A metric as a study asks for it: its name and validated options (sorted pairs)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "options": dict(self.options)}


METRICS: dict[str, MetricSpec] = {}
"""Metric name -> :class:`MetricSpec`; fill it with :func:`register_metric`."""

def register_metric(name: str, *, help: str, requires: tuple[str, ...] = (),
                    options: dict[str, MetricOption] | None = None, fabric_only: bool = False):
    """Decorator that adds a metric function to :data:`METRICS`.

    Parameters
    ----------
    name : str
        Metric name (lower case, ``[a-z0-9_]``); also the column prefix.
    help : str
        One line shown in errors and docs.
    requires : tuple of str
        Point inputs the metric needs (``"tp"``).
    options : dict of str to MetricOption, optional
        Options a study may set for this metric.
    fabric_only : bool
        Result depends only on the Fabric; computed once per Fabric per batch.

    Returns
    -------
    callable
        The decorator; it returns the function unchanged.

    Examples
    --------
    >>> @register_metric("doctest_gpus", help="GPU count", fabric_only=True)
    ... def _gpus(ctx):
    ...     return {"n": ctx.fabric.n_gpus}
    >>> METRICS["doctest_gpus"].fabric_only
    True
    >>> del METRICS["doctest_gpus"]
    """
    if not name.replace("_", "").isalnum() or name != name.lower():
        raise ValueError(f"metric name {name!r} must be lower case letters, digits and _")

    def deco(fn):
        if name in METRICS:
            raise ValueError(f"metric {name!r} is registered twice")
        METRICS[name] = MetricSpec(name, fn, help, tuple(requires), dict(options or {}), fabric_only)
        return fn

    return deco


# ---------------------------------------------------------------------------------------------- context
class TopologyError(Exception):
    """The point's Fabric could not be built (its row says ``topology: <why>``)."""


class FabricCache:
    """Fabrics built so far in one batch, and results of ``fabric_only`` metrics, by fabric key.

    Holds at most ``size`` Fabrics (least recently used dropped first): batches
    keep the points of one Fabric together, so one or two suffice and memory
    stays bounded for 100k-GPU fabrics.
    """

    def __init__(self, catalog: Catalog, size: int = 2):
        self.catalog = catalog
        self.size = size
        self.builds = 0
        self._entries: OrderedDict[tuple, dict[str, Any]] = OrderedDict()

    def entry(self, point: DesignPoint) -> dict[str, Any]:
        key = point.fabric_key
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        entry: dict[str, Any] = {"fabric": None, "metrics": {}, "memo": {}}
        self._entries[key] = entry
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return entry

    def fabric(self, point: DesignPoint) -> Fabric:
        entry = self.entry(point)
        if entry["fabric"] is None:
            self.builds += 1
            try:
                entry["fabric"] = build(point.architecture, point.gpus, dict(point.given), self.catalog)
            except Exception as exc:
                # the same inputs fail the same way: remember it rather than rebuild for every seed
                entry["fabric"] = TopologyError(_one_line(exc))
        if isinstance(entry["fabric"], TopologyError):
            raise entry["fabric"]
        return entry["fabric"]


class PointContext:
    """What a metric function sees for one design point.

    Attributes
    ----------
    point : DesignPoint
        The inputs (architecture, params, gpus, workload, fault model, seed).
    catalog : Catalog
    options : dict
        The options the study set for the metric being evaluated (defaults filled).
    requests : tuple of MetricRequest
        Every metric the study asks for (a shared intermediate, like the fault
        draw, follows the options of the metric that owns it).
    """

    def __init__(self, point: DesignPoint, catalog: Catalog, cache: FabricCache | None = None,
                 requests: tuple[MetricRequest, ...] = ()):
        self.point = point
        self.catalog = catalog
        self.requests = tuple(requests)
        self.options: dict[str, Any] = {}
        self._cache = cache or FabricCache(catalog)
        self._memo: dict[Any, Any] = {}

    @property
    def fabric(self) -> Fabric:
        """The built Fabric (built on first use, shared by the points of a batch)."""
        return self._cache.fabric(self.point)

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Compute an intermediate once per point and share it between metrics.

        ``faults`` and ``orchestrator`` share the point's fault draw this way
        (:func:`point_faults`).
        """
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def fabric_memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Compute something that depends only on the Fabric (and ``key``) once per batch.

        ``key`` must hold every other input it depends on (e.g. the TP size).
        """
        memo = self._cache.entry(self.point)["memo"]
        if key not in memo:
            memo[key] = compute()
        return memo[key]


# ---------------------------------------------------------------------------------------------- evaluation
def _flatten(prefix: str, values: dict[str, Any], out: dict[str, Any]) -> None:
    for k, v in values.items():
        name = f"{prefix}_{k}"
        if isinstance(v, dict):
            _flatten(name, v, out)
        elif isinstance(v, SCALARS):
            out[name] = v
        elif hasattr(v, "item") and getattr(v, "ndim", 1) == 0:  # numpy scalar
            out[name] = v.item()
        else:
            raise TypeError(f"metric column {name!r} is a {type(v).__name__}, not a scalar")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return msg if isinstance(exc, FabricError) else f"{type(exc).__name__}: {msg}"


def evaluate_point(point: DesignPoint, metrics: tuple[MetricRequest, ...], catalog: Catalog,
                   cache: FabricCache | None = None) -> dict[str, Any]:
    """One row: the point's input columns, each metric's columns, status and provenance.

    A metric that raises does not stop the study, nor the point's other
    metrics: its columns stay blank, the row gets ``status = "failed"`` and
    ``error = "<metric>: <message>"`` (joined by ``; `` when several failed).
    A topology that cannot be built fails every metric at once.

    Parameters
    ----------
    point : DesignPoint
    metrics : tuple of MetricRequest
    catalog : Catalog
    cache : FabricCache, optional
        Shared by the points of a batch.

    Returns
    -------
    dict
        Column name -> scalar.
    """
    t0 = time.perf_counter()
    cache = cache or FabricCache(catalog)
    ctx = PointContext(point, catalog, cache, metrics)
    row = point.input_columns()
    status, errors = "ok", []
    for req in metrics:
        spec = METRICS[req.name]
        # a workload's params set the options of the metrics that have them (validated with the spec)
        from_workload = {k: v for k, v in point.workload.params if k in spec.options}
        ctx.options = {**{k: o.default for k, o in spec.options.items()}, **dict(req.options), **from_workload}
        try:
            if spec.fabric_only:
                done = cache.entry(point)["metrics"]
                key = (req, tuple(sorted(from_workload.items())))
                if key not in done:
                    values: dict[str, Any] = {}
                    _flatten(req.name, spec.fn(ctx), values)
                    done[key] = values
                row.update(done[key])
            else:
                values = {}
                _flatten(req.name, spec.fn(ctx), values)
                row.update(values)
        except TopologyError as exc:
            status, errors = "failed", [f"topology: {exc}"]
            break
        except Exception as exc:  # one bad metric must end neither a long study nor the point's other metrics
            status = "failed"
            errors.append(f"{req.name}: {_one_line(exc)}")
    row["status"] = status
    row["error"] = "; ".join(errors) if errors else None
    row["tool_version"] = fabric.__version__
    row["schema_version"] = SCHEMA_VERSION
    row["evaluated_at"] = _dt.datetime.now(_dt.timezone.utc)
    row["eval_s"] = time.perf_counter() - t0
    return row


@dataclass(frozen=True)
class Batch:
    """A unit of work sent to a process or a Dask worker: points of one architecture.

    Attributes
    ----------
    number : int
        Names the output file ``batch-<number>.parquet``.
    architecture : str
        The partition the rows go to.
    points : tuple of DesignPoint
    metrics : tuple of MetricRequest
    catalog : Catalog
        Sent along so remote workers need no catalog file.
    """

    number: int
    architecture: str
    points: tuple
    metrics: tuple[MetricRequest, ...]
    catalog: Any


def evaluate_batch(batch: Batch) -> list[dict[str, Any]]:
    """Rows for every point of ``batch``, in order (the task a worker runs)."""
    cache = FabricCache(batch.catalog)
    return [evaluate_point(p, batch.metrics, batch.catalog, cache) for p in batch.points]


# ---------------------------------------------------------------------------------------------- metrics
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
    opt.update(next((dict(r.options) for r in ctx.requests if r.name == "faults"), {}))
    model = fault.fault_model(mode=opt["mode"], trace_mapping=opt["trace_mapping"])
    return ctx.memo("fault_draw", lambda: draw_faults(ctx.fabric, model, ctx.point.seed, opt["samples"]))


@register_metric("faults", requires=("tp",), options=FAULT_OPTIONS,
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


@register_metric(
    "orchestrator", requires=("tp",),
    help="cross-ToR traffic and GPU utilisation after placing TP rings and DP groups on the point's faulty fabric "
         "(the numbers of `fabric orchestrate --json`)",
    options={
        "dp": MetricOption(str, "max", "TP groups per DP group, or 'max' (one instance, all replicas that fit)",
                     _dp_option),
        "solver": MetricOption(str, "ilp", "ilp (greedy-warm-started), greedy or fault-unaware",
                         _choice("ilp", "greedy", "fault-unaware")),
        "time_limit": MetricOption(float, 60.0, "ILP time limit, seconds (a row that hits it may differ between runs)",
                             _positive),
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
    opt = ctx.options
    fixed = {k: opt[k] for k in ("tp", "pp", "dp") if opt[k]}
    # memoised per Fabric and options, so that the goodput metric reuses the same healthy job
    key = ("mfu_summary", opt["model"], opt["search"], opt["global_batch"], opt["comm"], tuple(sorted(fixed.items())))
    data = ctx.fabric_memo(key, lambda: mfu_summary(ctx.fabric, opt["model"], catalog=ctx.catalog,
                                                    search=opt["search"], global_batch=opt["global_batch"] or None,
                                                    comm=opt["comm"], **fixed))
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


@register_metric(
    "goodput",
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
        "trace_mapping": MetricOption(str, "tile", "trace servers -> nodes: tile or sample", _choice("tile", "sample")),
    })
def _goodput(ctx: PointContext) -> dict[str, Any]:
    from workloads.goodput.summary import goodput_summary
    from workloads.goodput import SCALAR_KEYS

    p, opt = ctx.point, ctx.options
    if p.fault.kind != "trace":
        return {k: None for k in SCALAR_KEYS}
    fixed = {k: opt[k] for k in ("tp", "pp", "dp") if opt[k]}
    key = ("mfu_summary", opt["model"], opt["search"], opt["global_batch"], opt["comm"], tuple(sorted(fixed.items())))
    mfu = ctx.fabric_memo(key, lambda: mfu_summary(ctx.fabric, opt["model"], catalog=ctx.catalog,
                                                   search=opt["search"], global_batch=opt["global_batch"] or None,
                                                   comm=opt["comm"], **fixed))
    data = goodput_summary(ctx.fabric, opt["model"], trace=p.fault.path, catalog=ctx.catalog, policy=opt["policy"],
                           seed=p.seed, trace_mapping=opt["trace_mapping"], comm=opt["comm"], series=False,
                           mfu_data=mfu)
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
