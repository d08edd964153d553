"""The goodput of one design point: the healthy job, the trace replayed on it, the summary (``fabric goodput``'s JSON).

The healthy job is what :func:`workloads.mfu.mfu_summary` finds (searched, or pinned); the trace is
replayed over its whole span as ``fabric faults --trace`` does (:mod:`workloads.goodput.events`);
every fault that touches the job stops it; it restarts from its last checkpoint on a new placement,
or waits (:mod:`workloads.goodput.job`).
"""

from __future__ import annotations

from typing import Any, Optional

from fabric.catalog import Catalog, load_catalog
from fabric.errors import FabricError

NOTES = (
    "every re-placement around faults is timed by the MFU step model on its own placement (the HBD allocation "
    "policy's TP groups of that fault state, laid out as the healthy job is), so its cross-ToR and cross-domain "
    "DP / PP traffic sets its step time; with the simulator, a placement's step time is the healthy one plus the "
    "change the analytic backend gives (placement_timing)",
    "elastic DP keeps the global batch (more micro-batches per replica), so it shrinks only to sizes whose "
    "replicas x micro-batch divide it",
)


def goodput_summary(fabric, model: Any, *, trace: Any = "stepfun", catalog: Catalog | None = None,
                    policy: str = "fixed", recovery: dict[str, Any] | None = None, seed: int = 0,
                    trace_mapping: str = "tile", trace_servers: int | None = None, search: bool = True,
                    global_batch: Optional[int] = None, comm: str = "sim", confirm: int = 3,
                    runtime: str = "megatron-core", series: bool = True,
                    mfu_data: dict | None = None, placement_timing: str | None = None, sizing: str = "throughput",
                    **fixed: Any) -> dict:
    """The JSON object of `fabric goodput` for a built Fabric (also the sweep metric).

    Parameters
    ----------
    fabric : Fabric
    model : str, Path or ModelSpec
    trace : Trace, str or Path
        ``stepfun`` or a trace file.
    policy : {'fixed', 'elastic'}
    recovery : dict, optional
        Overrides of the recovery costs (:data:`workloads.goodput.RECOVERY_FIELDS`).
    seed : int
        Seed of the trace mapping.
    search, global_batch, comm, confirm, runtime, fixed
        As :func:`workloads.mfu.mfu_summary` (the healthy job).
    series : bool
        Include the daily time series.
    mfu_data : dict, optional
        A :func:`workloads.mfu.mfu_summary` result of the same inputs, reused.
    placement_timing : {'delta', 'exact'}, optional
        How a re-placement's step time is found (:mod:`workloads.goodput.model`);
        default ``delta`` with the simulator, ``exact`` otherwise.
    sizing : {'throughput', 'goodput'}
        ``throughput``: the job is the healthy job's fastest configuration;
        ``goodput``: the same with the DP size (and global batch, unless
        given) that gets the most effective tokens/s over the trace, the rest
        of the cluster its spares (:mod:`workloads.goodput.sizing`; not with
        a pinned ``dp``).
    """
    from workloads.mfu import backend_named, mfu_summary, runtime_named
    from fabric.cost import cost_of
    from workloads.goodput import JobShape, default_recovery, fault_timeline, simulate, summarise, with_overrides
    from workloads.goodput.model import ShapeRates
    from workloads.models import load_model
    from workloads.parallelism import Parallelism
    from workloads.step import StepModel

    from workloads.goodput.job import JOB_POLICIES

    cat = catalog or load_catalog()
    rec = with_overrides(default_recovery(fabric.hbd.kind, cat), recovery or {})
    from workloads.goodput.sizing import check_sizing

    if policy not in JOB_POLICIES:
        raise FabricError("policy", f"{policy!r} not allowed; use one of {', '.join(JOB_POLICIES)}")
    check_sizing(sizing, fixed.get("dp") is not None)
    trace = _checked_trace(fabric, trace, trace_servers)  # before the search: a trace too large is refused first
    d = mfu_data or mfu_summary(fabric, model, catalog=cat, search=search, global_batch=global_batch, comm=comm,
                                confirm=confirm, runtime=runtime, **fixed)
    par = Parallelism(**d["parallelism"])
    notes = list(NOTES)
    tl = fault_timeline(fabric, par.tp, trace, mapping=trace_mapping, seed=seed, trace_servers=trace_servers)
    spec = load_model(model)
    if spec.seq_len != d["model_spec"]["seq_len"]:
        spec = spec.with_seq_len(d["model_spec"]["seq_len"])
    # the healthy job's runtime, norm switch included when mfu_summary raised it to make the job fit
    men = bool(d.get("runtime_switches", {}).get("memory_efficient_norm", False))
    sm = StepModel(fabric, spec, catalog=cat, runtime=runtime_named(runtime, False, men), backend=backend_named(comm))
    sized = None
    if sizing == "goodput":
        sized = _size(sm, tl, par, rec, policy, batch_pinned=global_batch is not None)
        par = sized.parallelism
    healthy = sm.evaluate(par)
    rates = ShapeRates(sm, healthy, placement_timing)
    shape = JobShape(par.tp, par.pp * par.cp, par.dp)
    led = simulate(tl, shape, rates, rec, policy)
    cost = cost_of(fabric, cat)
    out = summarise(tl, shape, led, healthy_tokens_per_s=healthy.tokens_per_s, flops_per_token=rates.flops_per_token,
                    capex_usd=cost.capex_usd, power_w=cost.power_w, recovery=rec, policy=policy, series=series)
    head = {"architecture": fabric.architecture, "params": fabric.params, "gpus": fabric.n_gpus, "model": d["model"],
            "config": d["config"] if sized is None else par.label(), "fastest_config": d["config"],
            "sizing": {"rule": "throughput"} if sized is None else sized.to_dict(par.tp * par.pp * par.cp, fabric.n_gpus),
            "healthy_mfu": healthy.mfu, "healthy_step_time_s": healthy.step_time_s,
            "comm_backend": d["comm_backend"], "hbd_kind": fabric.hbd.kind,
            "fault_model": {"trace": tl.trace_name, "mapping": trace_mapping, "seed": int(seed),
                            "intervals": tl.n_intervals}}
    out["re_placements"] = {**rates.placement_summary(), "days_on_slower_placement": led.slow_s / 86400.0}
    if sized is not None:
        notes.append(f"sized for goodput: {par.dp} of the {sized.healthy_dp} replicas the fastest configuration "
                     f"takes ({d['config']}), global batch {par.global_batch}, {fabric.n_gpus - par.world:,} GPUs "
                     f"spare; {sized.replayed} of {len(sized.candidates)} sizes replayed")
    elif policy == "fixed" and par.world >= fabric.n_gpus:
        # the healthy job's best configuration is sized for throughput, not for faults: with no spare GPU a fixed
        # job runs only while the whole cluster is healthy (on a tiled trace, rarely), which the ratio shows
        notes.append(f"the job uses all {fabric.n_gpus:,} GPUs, leaving no spare: the fixed policy waits until "
                     "every one is healthy again; try --sizing goodput (spares chosen for the trace), --policy "
                     "elastic, or a smaller --dp")
    return {**head, **out, "shapes": {str(k): v for k, v in rates.evaluated().items()}, "notes": notes}


def _size(sm, tl, par, rec, policy: str, *, batch_pinned: bool):
    """:func:`workloads.goodput.sizing.size_for_goodput` with the analytic step model of ``sm``'s job."""
    from workloads.comm import analytic_comm_time
    from workloads.goodput.sizing import size_for_goodput

    screen = sm if sm.backend_name == "analytic" else sm.with_backend(analytic_comm_time)

    def rate_of(p):
        r = screen.evaluate(p)
        return r.tokens_per_s if r.fits else None

    return size_for_goodput(tl, par, rate_of, rec, policy, batch_pinned=batch_pinned)


def _checked_trace(fabric, trace: Any, trace_servers: int | None) -> Any:
    """The trace loaded, and its replay on ``fabric``'s nodes checked against the memory limit.

    Replaying it is the last step, after the healthy job's configuration search (which takes minutes at
    100k GPUs); a trace whose replay cannot fit is refused before that work.
    """
    from fabric.trace import Trace, load_trace
    from solvers.allocation import policy_for

    tr = trace if isinstance(trace, Trace) else load_trace(str(trace), n_servers=trace_servers)
    tr.check_state_memory(policy_for(fabric).nodes.n_nodes)
    return tr

