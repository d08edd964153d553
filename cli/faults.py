"""`fabric faults` (waste ratio, blast radius, trace replay) and `fabric faults-table` (the comparison tables).

The numbers come from :func:`solvers.allocation.faults_summary` (the
importable form of ``fabric faults --json`` that the sweep engine calls too,
so both give identical numbers for the same inputs and seed) and
:func:`solvers.allocation.waste_table` / :func:`~solvers.allocation.blast_table`;
this module parses, calls and prints.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Optional, Sequence

import typer

from cli.common import (CATALOG_OPT, GPUS_OPT, JSON_OPT, PARAM_OPT, TOPOLOGY_OPT, build_fabric, console, emit_json,
                        given)
from fabric.errors import FabricError
from fabric.fault_names import COMPONENTS, DEFAULT_SAMPLES, MODES
from fabric.fault_names import TRACE_MAPPINGS as MAPPINGS

TABLE_TPS = (8, 16, 32, 64)
TABLE_RATIOS = tuple(round(0.01 * i, 2) for i in range(11))

# The comparison of the InfiniteHBD paper: label -> (architecture, params, TP sizes)
TABLE_ENTRIES: list[tuple[str, str, dict, tuple[int, ...]]] = [
    ("dgx", "dgx", {}, (8,)),
    ("nvl-72", "nvl", {"size": 72}, TABLE_TPS),
    ("tpuv4", "tpuv4", {}, TABLE_TPS),
    ("khop-ring k=2", "khop-ring", {"k": 2}, TABLE_TPS),
    ("khop-ring k=3", "khop-ring", {"k": 3}, TABLE_TPS),
]


def parse_ratios(text: str, field: str = "--node-fault-ratio") -> list[float]:
    """``0.03`` -> [0.03]; ``start:stop:step`` -> the range, stop included within float tolerance.

    Examples
    --------
    >>> parse_ratios("0:0.1:0.05")
    [0.0, 0.05, 0.1]
    """
    parts = str(text).split(":")
    try:
        if not str(text).isascii():  # float() reads other scripts' digits: '\u0660.\u0660\u0665' was 0.05
            raise ValueError
        nums = [float(p) + 0.0 for p in parts]  # + 0.0: -0 is 0
    except ValueError:
        raise FabricError(field, f"{text!r} must be a ratio in [0, 1] or a range start:stop:step") from None
    if len(nums) == 1:
        values = nums
    elif len(nums) == 3:
        start, stop, step = nums
        if not (step > 0 and stop >= start) or not all(map(math.isfinite, nums)):
            raise FabricError(field, f"{text!r}: a range needs step > 0 and stop >= start")
        n = int(math.floor((stop - start) / step + 1e-9)) + 1
        if n > 10_000:
            raise FabricError(field, f"{text!r} has {n} points; at most 10000")
        values = [round(start + i * step, 12) for i in range(n)]
    else:
        raise FabricError(field, f"{text!r} must be a ratio in [0, 1] or a range start:stop:step")
    for v in values:
        if not 0.0 <= v <= 1.0:
            raise FabricError(field, f"{v!r} must be in [0, 1]")
    return values


def parse_fault_ratios(items: Sequence[str]) -> dict[str, float]:
    """``["tor=0.01", "gpu=0.002"]`` -> {component: ratio}."""
    out: dict[str, float] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or name not in COMPONENTS:
            raise FabricError("--fault", f"{item!r} must be COMPONENT=RATIO with COMPONENT one of "
                                         f"{', '.join(COMPONENTS)}")
        if ":" in value:
            raise FabricError(f"--fault {name}", f"{value!r}: one ratio, not a range")
        if name in out:  # the later one silently replaced the earlier
            raise FabricError(f"--fault {name}", f"given twice ({out[name]:g} and {value.strip()}); give it once")
        out[name] = parse_ratios(value, f"--fault {name}")[0]
    return out


def _table_fabrics(gpus: int, catalog=None, samples: int | None = None, seed: int = 0) -> tuple[list, list]:
    """The Fabrics of the two tables: (label, Fabric, TP sizes) and (label, Fabric).

    With ``samples``, each waste-table fabric's Monte Carlo size is checked as soon as it is built, so
    that a run past the limits is refused before the next fabric is allocated.
    """
    from solvers.allocation.summary import check_table_sampling
    from topologies import REFERENCE_ARCHITECTURES, build

    waste = []
    for label, arch, params, tps in TABLE_ENTRIES:
        fab = build(arch, gpus, params, catalog)
        if samples is not None:
            check_table_sampling(fab, TABLE_RATIOS, samples, seed)
        waste.append((label, fab, tps))
    blast = [(label, build(arch, gpus, params, catalog)) for label, arch, params in REFERENCE_ARCHITECTURES]
    return waste, blast


def format_waste_table(rows: list[dict]) -> str:
    """Markdown: one line per architecture x TP, one column per fault ratio (waste in %)."""
    cols: list = []
    for r in rows:
        if r["node_fault_ratio"] not in cols:
            cols.append(r["node_fault_ratio"])
    keyed: dict[tuple, dict] = {}
    for r in rows:
        keyed.setdefault((r["label"], r["tp"]), {})[r["node_fault_ratio"]] = r["waste_ratio"]
    head = ["architecture", "TP"] + [c if c == "trace" else f"{100 * c:g} %" for c in cols]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (label, tp), vals in keyed.items():
        cells = [label, str(tp)] + [f"{100 * vals[c]:.2f}" if c in vals else "" for c in cols]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_blast_table(rows: list[dict]) -> str:
    """Markdown: one line per architecture x component (GPUs made unusable by one failure)."""
    head = ["architecture", "TP", "component", "min", "mean", "max", "own", "stranded", "note"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        note = r.get("note", "")
        if "bandwidth_left" in r:
            note = f"bandwidth left {r['bandwidth_left']:.3f}; " + note
        lines.append("| " + " | ".join([r["label"], str(r["tp"]), r["component"], f"{r['min']:g}",
                                        f"{r['mean']:.1f}", f"{r['max']:g}", f"{r['own']:.1f}",
                                        f"{r['stranded']:.1f}", note]) + " |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ commands
def faults_command(
    arch: Optional[str] = typer.Argument(None, help="architecture (see `fabric list`)"),
    gpus: Optional[int] = GPUS_OPT,
    param: list[str] = PARAM_OPT,
    topology: Optional[Path] = TOPOLOGY_OPT,
    catalog: Optional[Path] = CATALOG_OPT,
    tp: int = typer.Option(..., "--tp", help="TP group size in GPUs (a multiple of what the HBD allows)"),
    node_fault_ratio: Optional[str] = typer.Option(
        None, "--node-fault-ratio", help="i.i.d. node fault ratio R in [0, 1], or a range start:stop:step "
                                         "(stop included) for a curve; the top level then shows the highest R"),
    fault: list[str] = typer.Option([], "--fault", help="further i.i.d. ratio COMPONENT=R (repeatable): "
                                                        + ", ".join(COMPONENTS)),
    mode: Optional[str] = typer.Option(None, "--mode", help="bernoulli (independent, the default) or exact "
                                                             "(round(R n) per sample); i.i.d. faults only"),
    trace: Optional[str] = typer.Option(None, "--trace", help="replay a fault trace: stepfun (shipped) or a FILE "
                                                              "in its format"),
    trace_mapping: str = typer.Option("tile", "--trace-mapping", help="trace servers -> nodes: tile or sample"),
    trace_servers: Optional[int] = typer.Option(None, "--trace-servers",
                                                help="servers a trace FILE covers (default: those in it)"),
    samples: int = typer.Option(DEFAULT_SAMPLES, "--samples", help="Monte Carlo samples"),
    seed: int = typer.Option(0, "--seed", help="seed of the fault sampler / trace mapping"),
    no_blast: bool = typer.Option(False, "--no-blast", help="skip the blast radius"),
    as_json: bool = JSON_OPT,
) -> None:
    """GPU waste ratio under faults (i.i.d. or a production trace) and the blast radius per component."""
    if mode is not None and mode not in MODES:
        raise FabricError("--mode", f"{mode!r} not allowed; use one of {', '.join(MODES)}")
    if trace_mapping not in MAPPINGS:
        raise FabricError("--trace-mapping", f"{trace_mapping!r} not allowed; use one of {', '.join(MAPPINGS)}")
    ratios = parse_fault_ratios(fault)
    if trace is None and node_fault_ratio is None and not ratios:
        raise FabricError("--node-fault-ratio", "give --node-fault-ratio R (or a range) or --trace stepfun|FILE")
    if trace is not None and (node_fault_ratio is not None or ratios):
        raise FabricError("--trace", "give either --trace or fault ratios, not both")
    if trace is None and given("trace_mapping"):  # it maps trace servers to nodes: without a trace it was ignored
        raise FabricError("--trace-mapping", "maps the servers of --trace to nodes; give --trace stepfun|FILE with it")
    if trace is not None and given("samples"):  # a replay has its own fault sets: the count was ignored
        raise FabricError("--samples", "counts i.i.d. fault samples; a trace replays its own faults: drop --samples")
    if trace is not None and mode is not None:
        raise FabricError("--mode", "not used with --trace (it sets how i.i.d. faults are sampled; a trace "
                                    "replays its own faults): drop --mode")
    ratio_arg = None  # one ratio, or a list for a curve (start:stop:step)
    if node_fault_ratio is not None:
        values = parse_ratios(node_fault_ratio)  # reject bad input before building anything
        ratio_arg = values if ":" in node_fault_ratio else values[0]
    from fabric.catalog import load_catalog
    from solvers.allocation.summary import faults_summary  # lazily: start-up (issue 18)

    cat = load_catalog(catalog)
    fab = build_fabric(arch, gpus, param, cat, topology)
    data = faults_summary(fab, tp, node_fault_ratio=ratio_arg, fault_ratios=ratios or None, mode=mode,
                          trace=trace, trace_mapping=trace_mapping, trace_servers=trace_servers, samples=samples,
                          seed=seed, blast=not no_blast)
    data["notes"] = list(fab.notes)
    if as_json:
        emit_json(data)
        return
    _print_summary(data)


def _pct(x: float) -> str:
    return f"{100 * x:.3f} %"


def _print_summary(data: dict) -> None:
    from rich.table import Table

    con = console()
    fm = data["fault_model"]
    what = (f"trace {fm['trace']} ({fm['mapping']} mapping, seed {fm['seed']}, time-weighted)" if fm["kind"] ==
            "trace" else f"i.i.d. {fm['ratios']} ({fm['mode']}, {fm['samples']} samples, seed {fm['seed']})")
    con.print(f"{data['architecture']}: {data['gpus']:,} GPUs, {data['nodes']:,} nodes, TP {data['tp']}; "
              f"policy {data['policy']['kind']}: {data['policy']['rule']}")
    con.print(f"faults: {what}")
    t = Table(title="GPU waste", title_justify="left")
    for col in ("metric", "mean", "p50", "p99"):
        t.add_column(col, justify="left" if col == "metric" else "right")
    w = data["waste_ratio"]
    t.add_row("waste ratio (of healthy GPUs)", _pct(w["mean"]), _pct(w["p50"]), _pct(w["p99"]))
    a = data["waste_ratio_all_gpus"]
    t.add_row("wasted healthy / all GPUs", _pct(a["mean"]), _pct(a["p50"]), _pct(a["p99"]))
    for key in ("healthy_gpus", "usable_gpus"):
        v = data[key]
        t.add_row(key.replace("_", " "), f"{v['mean']:,.1f}", f"{v['p50']:,.0f}", f"{v['p99']:,.0f}")
    t.add_row("no fault: usable GPUs", f"{data['baseline']['usable_gpus']:,}", "", "")
    con.print(t)
    if "curve" in data:
        c = Table(title="waste ratio vs node fault ratio", title_justify="left")
        for col in ("node fault ratio", "waste mean", "p50", "p99", "usable GPUs"):
            c.add_column(col, justify="right")
        for row in data["curve"]:
            w = row["waste_ratio"]
            c.add_row(f"{row['node_fault_ratio']:g}", _pct(w["mean"]), _pct(w["p50"]), _pct(w["p99"]),
                      f"{row['usable_gpus']['mean']:,.1f}")
        con.print(c)
    if "blast_radius" in data:
        b = Table(title=f"blast radius at TP {data['tp']} (GPUs made unusable by one failure)", title_justify="left")
        for col in ("component", "positions", "min", "mean", "max", "own", "stranded", "note"):
            b.add_column(col, justify="left" if col in ("component", "note") else "right")
        for comp, v in data["blast_radius"].items():
            b.add_row(comp, f"{v['positions']:,}", f"{v['min']:g}", f"{v['mean']:.1f}", f"{v['max']:g}",
                      f"{v['own']:.1f}", f"{v['stranded']:.1f}", v["note"])
        con.print(b)
    if "trace" in data:
        s = data["trace"]
        con.print(f"trace: {s['n_servers']} servers, {s['faults']} faults over {s['horizon_days']:.1f} days "
                  f"({s['faults_per_node_day']:.2g} per node-day), time-average {_pct(s['down_fraction_time_mean'])}"
                  f" down, max {_pct(s['down_fraction_max'])}")
    for n in data.get("notes", []):
        con.print(f"note: {n}")


def faults_table_command(
    gpus: int = typer.Option(4608, "--gpus", help="GPU count of every architecture"),
    samples: int = typer.Option(2000, "--samples", help="Monte Carlo samples per point"),
    seed: int = typer.Option(0, "--seed", help="seed"),
    tp: int = typer.Option(32, "--tp",
                           help="TP size of the blast radius table (capped at each HBD's largest: 8 on DGX)"),
    as_json: bool = JSON_OPT,
) -> None:
    """The README tables: waste ratio vs node fault ratio (0-10 %, and the trace) and blast radius."""
    if gpus <= 0:
        raise FabricError("--gpus", f"{gpus} must be a whole number > 0")
    if samples < 1:
        raise FabricError("--samples", f"{samples} must be >= 1")
    from solvers.allocation.summary import blast_table, waste_table  # lazily: start-up (issue 18)

    if tp < 1 or tp > gpus:
        raise FabricError("--tp", f"{tp} must be a whole number in 1..{gpus} (the --gpus of every architecture)")
    waste_fabrics, blast_fabrics = _table_fabrics(gpus, samples=samples, seed=seed)
    blast = blast_table(blast_fabrics, tp)  # first: it checks the TP on every architecture before any work
    waste = waste_table(waste_fabrics, TABLE_RATIOS, samples=samples, seed=seed)
    if as_json:
        emit_json({"gpus": gpus, "samples": samples, "seed": seed, "waste": waste, "blast_radius": blast})
        return
    # plain markdown on stdout (no Rich wrapping): meant to be pasted into the README
    typer.echo(f"GPU waste ratio (%), mean of {samples} samples, ~{gpus:,} GPUs; 'trace' = stepfun, time-weighted\n")
    typer.echo(format_waste_table(waste))
    # the TP is capped at each HBD's largest: said for the rows it was (it said "(DGX: 8)" also at --tp 4)
    capped = {r["label"]: r["tp"] for r in blast if r["tp"] != tp}
    at = ", ".join(f"{label} at {t}" for label, t in capped.items())
    at_most = f" ({at}: the largest its HBD forms)" if capped else ""
    typer.echo(f"\nBlast radius (GPUs made unusable by one failure), TP {tp}{at_most}\n")
    typer.echo(format_blast_table(blast))


def register(app: typer.Typer) -> None:
    app.command("faults")(faults_command)
    app.command("faults-table")(faults_table_command)
