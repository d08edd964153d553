"""`fabric goodput`: a production fault trace replayed on an architecture, and the training it still delivers.

A thin shell over :mod:`workloads.goodput`: the healthy job is what ``fabric
mfu`` finds (searched, or pinned by the parallelism flags); the trace is
replayed over its whole span as ``fabric faults --trace`` does; every fault
that touches the job stops it, it restarts from its last checkpoint on a new
placement (or waits), and the report gives the time-weighted throughput, the
goodput ratio, GPU-hours lost by cause, and goodput per dollar of capex and
per MW.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.common import CATALOG_OPT, GPUS_OPT, JSON_OPT, PARAM_OPT, TOPOLOGY_OPT, build_fabric, console, emit_json
from fabric.errors import FabricError


def parse_recovery(items: list[str]) -> dict[str, str]:
    """``["restart=5min", ...]`` -> ``{"restart": "5min"}`` (validated later by the Recovery)."""
    from cli.validate import MAX_SECONDS
    from fabric.units import parse_time
    from workloads.goodput import RECOVERY_FIELDS

    out: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in RECOVERY_FIELDS or not value.strip():
            raise FabricError("--recovery", f"{item!r} must be NAME=TIME with NAME one of {', '.join(RECOVERY_FIELDS)}")
        if name in out:  # the later one silently replaced the earlier
            raise FabricError(f"--recovery {name}", f"given twice ({out[name]} and {value.strip()}); give it once")
        seconds = parse_time(value.strip(), f"--recovery {name}")
        if seconds > MAX_SECONDS:
            raise FabricError(f"--recovery {name}", f"{value.strip()!r} is {seconds:.3g} s; at most {MAX_SECONDS:g} s")
        out[name] = value.strip()
    return out


def goodput_command(
    arch: Optional[str] = typer.Argument(None, help="architecture (see `fabric list`)"),
    gpus: Optional[int] = GPUS_OPT,
    param: list[str] = PARAM_OPT,
    model: str = typer.Option(..., "--model", help="model preset (e.g. llama3-70b) or a .yaml/.json file"),
    trace: str = typer.Option("stepfun", "--trace", help="fault trace: stepfun (shipped) or a FILE in its format"),
    trace_mapping: str = typer.Option("tile", "--trace-mapping", help="trace servers -> nodes: tile or sample"),
    trace_servers: Optional[int] = typer.Option(None, "--trace-servers", help="servers a trace FILE covers"),
    policy: str = typer.Option("fixed", "--policy", help="fixed (wait for repair / use spares) or elastic (DP "
                                                         "shrinks and regrows)"),
    sizing: str = typer.Option("throughput", "--sizing", help="job size: throughput (the healthy job's fastest "
                                                              "configuration) or goodput (its DP size with the most "
                                                              "effective tokens/s over the trace, the rest spares)"),
    recovery: list[str] = typer.Option([], "--recovery", help="recovery cost NAME=TIME (repeatable): "
                                                              "checkpoint_interval, checkpoint_stall, restart, "
                                                              "replace (e.g. restart=5min)"),
    seed: int = typer.Option(0, "--seed", help="seed of the trace mapping"),
    tp: Optional[int] = typer.Option(None, "--tp", help="tensor-parallel size (pins the search)"),
    pp: Optional[int] = typer.Option(None, "--pp", help="pipeline-parallel size"),
    dp: Optional[int] = typer.Option(None, "--dp", help="data-parallel size"),
    ep: Optional[int] = typer.Option(None, "--ep", help="expert-parallel size (MoE)"),
    cp: Optional[int] = typer.Option(None, "--cp", help="context-parallel size"),
    micro_batch: Optional[int] = typer.Option(None, "--micro-batch", help="sequences per micro-batch"),
    interleave: Optional[int] = typer.Option(None, "--interleave", help="virtual pipeline chunks per stage (v)"),
    global_batch: Optional[int] = typer.Option(None, "--global-batch", help="sequences per step (default ~4M tokens)"),
    do_search: bool = typer.Option(True, "--search/--no-search", help="search the healthy job's best configuration "
                                                                      "(flags given pin theirs)"),
    comm: str = typer.Option("sim", "--comm", help="collective timing: sim | analytic"),
    placement_timing: Optional[str] = typer.Option(None, "--placement-timing",
                                                   help="step time of a re-placement: delta (the healthy step plus "
                                                        "the analytic change; default with --comm sim) or exact "
                                                        "(the job's backend on every placement: slow at scale)"),
    no_series: bool = typer.Option(False, "--no-series", help="leave the daily time series out of --json"),
    topology: Optional[Path] = TOPOLOGY_OPT,
    catalog: Optional[Path] = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Goodput over a year of real faults: effective tokens/s, GPU-hours lost by cause, per $ and per MW."""
    from fabric.trace import MAPPINGS
    from workloads.goodput.job import JOB_POLICIES

    if no_series and not as_json:  # the printed summary has no series to leave out
        raise FabricError("--no-series", "leaves the daily series out of --json; add --json")

    if policy not in JOB_POLICIES:
        raise FabricError("--policy", f"{policy!r} not allowed; use one of {', '.join(JOB_POLICIES)}")
    from workloads.goodput.sizing import check_sizing

    check_sizing(sizing, dp is not None)  # before the fabric is built
    if trace_mapping not in MAPPINGS:
        raise FabricError("--trace-mapping", f"{trace_mapping!r} not allowed; use one of {', '.join(MAPPINGS)}")
    if seed < 0:
        raise FabricError("--seed", f"{seed} must be a whole number >= 0")
    from workloads.goodput.model import PLACEMENT_TIMINGS

    if placement_timing is not None and placement_timing not in PLACEMENT_TIMINGS:
        raise FabricError("--placement-timing", f"{placement_timing!r} not allowed; use one of "
                                                f"{', '.join(PLACEMENT_TIMINGS)}")
    rec = parse_recovery(recovery)
    from fabric.catalog import load_catalog
    from workloads.goodput import Recovery, with_overrides
    from workloads.goodput.summary import goodput_summary  # lazily: start-up (issue 18)

    cat = load_catalog(catalog)

    with_overrides(Recovery(), rec)  # reject a bad --recovery before building anything
    fab = build_fabric(arch, gpus, param, cat, topology)
    fixed = {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "cp": cp, "micro_batch": micro_batch, "interleave": interleave}
    data = goodput_summary(fab, model, trace=trace, catalog=cat, policy=policy, recovery=rec, seed=seed,
                           trace_mapping=trace_mapping, trace_servers=trace_servers, search=do_search,
                           global_batch=global_batch, comm=comm, series=not no_series,
                           placement_timing=placement_timing, sizing=sizing,
                           **{k: v for k, v in fixed.items() if v is not None})
    if as_json:
        emit_json(data)
        return
    _print(data)


def _print(d: dict) -> None:
    from rich.table import Table

    from workloads.goodput import CAUSES

    con = console()
    fm = d["fault_model"]
    con.print(f"{d['architecture']} ({d['gpus']:,} GPUs), {d['model']} {d['config']} on {d['job_gpus']:,} GPUs; "
              f"trace {fm['trace']} ({fm['mapping']}, seed {fm['seed']}) over {d['span_days']:.1f} days; "
              f"policy {d['policy']}")
    t = Table(title="goodput", title_justify="left")
    t.add_column("")
    t.add_column("value", justify="right")
    t.add_row("healthy throughput", f"{d['healthy_tokens_per_s']:,.0f} tokens/s (MFU {100 * d['healthy_mfu']:.1f} %)")
    t.add_row("effective throughput", f"{d['effective_tokens_per_s']:,.0f} tokens/s, "
                                      f"{d['effective_model_flops_per_s'] / 1e15:,.1f} model PFLOP/s")
    t.add_row("goodput ratio", f"{100 * d['goodput_ratio']:.2f} %")
    per_musd, per_mw = d["tokens_per_s_per_musd"], d["tokens_per_s_per_mw"]  # None for a $0 (0 W) cluster
    t.add_row("per $M of capex", f"{'-' if per_musd is None else f'{per_musd:,.1f}'} tokens/s "
                                 f"({d['capex_usd'] / 1e6:,.1f} $M)")
    t.add_row("per MW", f"{'-' if per_mw is None else f'{per_mw:,.0f}'} tokens/s ({d['power_w'] / 1e6:,.2f} MW)")
    t.add_row("interruptions / placements / regrows / rebalances",
              f"{d['interruptions']} / {d['placements']} / {d['regrows']} / {d['rebalances']}")
    rp = d["re_placements"]
    if rp.get("distinct_placements"):
        t.add_row("re-placements timed",
                  f"{rp['distinct_placements']} ({rp['timing']}); step {rp['step_time_min_s']:.3f}-"
                  f"{rp['step_time_max_s']:.3f} s vs healthy {rp['healthy_step_time_s']:.3f} s; "
                  f"{rp['days_on_slower_placement']:.1f} days on a slower placement")
    con.print(t)
    b = Table(title=f"GPU-hours lost by cause (of {d['gpu_hours_ideal']:,.0f} ideal)", title_justify="left")
    b.add_column("cause")
    b.add_column("GPU-hours", justify="right")
    b.add_column("share of ideal", justify="right")
    for c in CAUSES:
        v = d["gpu_hours_lost"][c]
        b.add_row(c.replace("_", " "), f"{v:,.0f}", f"{100 * v / d['gpu_hours_ideal']:.2f} %")
    con.print(b)
    for k, v in d["recovery"]["sources"].items():
        con.print(f"{k} = {d['recovery'][k]:g} s: {v}")
    for n in d["notes"]:
        con.print(f"note: {n}")


def register(app: typer.Typer) -> None:
    app.command("goodput")(goodput_command)
