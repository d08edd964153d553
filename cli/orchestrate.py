"""`fabric orchestrate` (place TP rings and DP groups on a faulty fabric) and `fabric orchestrate-table`.

``fabric orchestrate [ARCH] --tp T (--dp D|max [--pp P] | --job dp=D,count=N,... ...) (--faulty-nodes i,j
| --node-fault-ratio R [--seed X] | --trace stepfun|FILE [--trace-time DAYS] [--trace-servers N])
[--solver ilp|greedy|fault-unaware] [--time-limit S] [--placement] [--json]`` prints the placement's metrics
(:func:`solvers.orchestrator.orchestrate_summary`: the function a sweep registers as a metric, so both give the
same numbers); several jobs (one ``--job`` each, :mod:`cli.job_spec`) add a ``jobs`` list with each job's layout,
instances and bytes.  Exit status: 0, 1 when the request is infeasible (the JSON says ``status: infeasible``), 2
for bad input.

``fabric orchestrate-table`` evaluates :func:`solvers.orchestrator.table.cross_tor_table`: cross-ToR traffic ratio against node fault
ratio for the ILP, the greedy and the fault-unaware plan, on the k-hop ring (k = 2, 3) and the other
architectures at equal GPU count, i.i.d. and with the production trace.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Optional

import typer

from cli.common import (CATALOG_OPT, GPUS_OPT, JSON_OPT, PARAM_OPT, TOPOLOGY_OPT, build_fabric, console, emit_json,
                        given, parse_dp, parse_int_list)
from fabric.errors import FabricError
from fabric.units import parse_bytes

EXIT_INFEASIBLE = 1


#: Text that is a list of numbers, not a file name (digits, signs, points, commas and spaces).
_NUMBER_LIST = re.compile(r"[\s0-9.,+-]+")


def parse_tor_map(text: str) -> list[int]:
    """``--tor-map``: comma-separated ToR ids (one per line position) or a file with them (JSON list or text)."""
    raw = text
    p = Path(text)
    # a list of numbers is a list even where it looks like a file name: "0,1,1.5" has the suffix ".5" and was
    # refused as "no such file"
    # an empty value is no list, not the working folder ('' is Path('.'): "'.' is a folder; give a file")
    if text.strip() and (p.exists() or (p.suffix and not _NUMBER_LIST.fullmatch(text))):
        from fabric.files import parse_json, read_text

        raw = read_text(p, "--tor-map")
        if raw.lstrip().startswith(("[", "{")):  # a JSON object was split as text: "'{"a":1}' is not a ToR id"
            data = parse_json(raw, p.name, "--tor-map")
            if isinstance(data, list):  # one ToR per line position: at most one per GPU, before the scans below
                from fabric.limits import check

                check("gpus", len(data), "--tor-map", f"{p.name} lists {len(data):,} ToR ids")
            if not isinstance(data, list) or not all(isinstance(x, int) and not isinstance(x, bool) for x in data):
                raise FabricError("--tor-map", f"{p.name} must be a JSON list of ToR ids (whole numbers >= 0)")
            raw = ",".join(str(x) for x in data)
    return parse_int_list(raw, "--tor-map", "{part!r} is not a ToR id (whole numbers >= 0)", whitespace=True,
                          empty="no ToR ids given")


def orchestrate_command(
    arch: Optional[str] = typer.Argument("khop-ring", help="architecture (khop-ring, dgx, nvl-72, tpuv4, ...)"),
    gpus: Optional[int] = GPUS_OPT,
    param: list[str] = PARAM_OPT,
    topology: Optional[Path] = TOPOLOGY_OPT,
    catalog: Optional[Path] = CATALOG_OPT,
    tp: int = typer.Option(..., "--tp", help="GPUs per TP group (a multiple of gpus_per_node on a k-hop ring)"),
    dp: Optional[str] = typer.Option(None, "--dp", help="TP groups per DP group, or 'max' (one instance, all replicas "
                                                        "that fit); required unless --job is given"),
    job: list[str] = typer.Option(
        [], "--job",
        help="one of several jobs sharing --tp, as key=value pairs: dp (required; a whole number or 'max'), pp, "
             "count, dp-bytes, pp-bytes, name; repeat it for each job (instead of --dp/--pp/--count/--dp-bytes/"
             "--pp-bytes); fixed counts are served first, then the jobs without one share what is left (a dp=max "
             "job takes all of it: the others then need a count)"),
    pp: int = typer.Option(1, "--pp", help="pipeline stages"),
    count: Optional[int] = typer.Option(None, "--count", help="instances wanted (default: as many as fit)"),
    faulty_nodes: Optional[str] = typer.Option(None, "--faulty-nodes", help="comma-separated node ids that are down"),
    node_fault_ratio: Optional[float] = typer.Option(None, "--node-fault-ratio", help="i.i.d. node fault ratio"),
    seed: int = typer.Option(0, "--seed", help="seed of the fault sample or of the trace replay"),
    trace: Optional[str] = typer.Option(None, "--trace", help="fault trace: stepfun or a JSON file"),
    trace_time: Optional[float] = typer.Option(None, "--trace-time",
                                               help="trace day to read (default: the most nodes down)"),
    trace_servers: Optional[int] = typer.Option(None, "--trace-servers",
                                                help="servers a trace FILE covers (default: those in it)"),
    solver: str = typer.Option("ilp", "--solver", help="ilp, greedy or fault-unaware"),
    time_limit: Optional[float] = typer.Option(
        None, "--time-limit",
        help="seconds for the whole ILP orchestration after the fabric is built and the faults drawn: reading the "
             "line, model build (reported as build_seconds), hand-over and solve (solve_seconds); the answer comes "
             "within the limit plus about 1 s (extraction, accounting; large models are solved by HiGHS in a child "
             "process stopped at the limit, which keeps its last incumbent); a budget spent before the solver "
             "finds anything returns the warm start with the best bound proven by then (default: 60)"),
    gap: Optional[float] = typer.Option(None, "--gap",
                                        help="stop the ILP at this relative gap (0, the default: prove optimality)"),
    mip_solver: str = typer.Option("auto", "--mip-solver", help="auto (HiGHS, else CBC), highs or cbc"),
    tor_map: Optional[str] = typer.Option(None, "--tor-map", help="k-hop: ToR of each line position (list or file)"),
    dp_bytes: Optional[str] = typer.Option(None, "--dp-bytes",
                                           help="DP all-reduce buffer per GPU per step (e.g. 10GB)"),
    pp_bytes: Optional[str] = typer.Option(None, "--pp-bytes", help="PP bytes per TP rank per stage boundary per step"),
    placement: bool = typer.Option(False, "--placement", help="include the placement (node ids per group) in --json"),
    as_json: bool = JSON_OPT,
) -> None:
    """Place TP rings and DP groups on a faulty fabric: most GPUs in complete groups, least cross-ToR traffic."""
    from fabric.catalog import load_catalog
    from solvers.orchestrator.api import DEFAULT_TIME_LIMIT  # lazily: the solvers package imports PuLP

    jobs = _jobs(tp, dp, pp, count, dp_bytes, pp_bytes, job)
    _check_unused(solver, time_limit, gap, mip_solver, jobs, bool(job))
    if placement and not as_json:  # the table has no place for it: the page came out the same as without
        raise FabricError("--placement", "adds the node ids per group to the --json object; add --json")
    if given("seed") and node_fault_ratio is None and trace is None:  # nothing is drawn: it was ignored
        raise FabricError("--seed", "seeds the faults of --node-fault-ratio or the replay of --trace; give one of "
                                    "them, or leave --seed out")
    time_limit = DEFAULT_TIME_LIMIT if time_limit is None else time_limit
    gap = 0.0 if gap is None else gap
    if not time_limit > 0:
        raise FabricError("--time-limit", f"{time_limit} must be > 0 seconds")
    if not 0 <= gap < 1:
        raise FabricError("--gap", f"{gap} must be in [0, 1)")
    nodes = None if faulty_nodes is None else parse_int_list(
        faulty_nodes, "--faulty-nodes", "{part!r} is not a node id (give comma-separated integers >= 0)",
        empty="no node ids given; leave --faulty-nodes out for none", unique=True)
    fab = build_fabric(arch if topology is None else None, gpus, param, load_catalog(catalog), topology)
    data = _summary(fab, jobs, bool(job), faulty_nodes=nodes, node_fault_ratio=node_fault_ratio, seed=seed,
                    trace=trace, trace_time=trace_time, trace_servers=trace_servers, solver=solver,
                    time_limit=time_limit, gap_rel=gap, mip_solver=mip_solver,
                    tor_map=parse_tor_map(tor_map) if tor_map is not None else None, placement=placement)
    data = {"architecture": fab.architecture, **data}
    if as_json:
        emit_json(data)
    else:
        _print_summary(data)
    if data["status"] == "infeasible":  # the answer is on stdout; the reason, once, on stderr
        sys.stderr.write(f"error: infeasible: {data.get('notes') or 'no placement meets the request'}\n")
        raise typer.Exit(EXIT_INFEASIBLE)


def _summary(fab, jobs: list, from_specs: bool, **kw) -> dict:
    """:func:`solvers.orchestrator.orchestrate_summary` of ``jobs``; with ``from_specs`` (``--job``) a job's
    layout error names ``--job``, the flag typed, and several jobs on another architecture are refused so."""
    from solvers.orchestrator import orchestrate_summary

    if len(jobs) > 1 and fab.hbd.kind != "khop_line":  # said for the flag, not as the library's "jobs"
        raise FabricError("--job", f"several jobs are placed on a k-hop line only; {fab.architecture} takes one "
                                   "(give one --job, or --dp)")
    try:
        return orchestrate_summary(fab, jobs=jobs, **kw)
    except FabricError as exc:
        if from_specs and exc.field in ("dp", "pp", "count", "jobs"):
            raise FabricError("--job", exc.message) from None
        raise


def _jobs(tp: int, dp, pp: int, count, dp_bytes, pp_bytes, specs) -> list:
    """The request's jobs: one from ``--dp`` (with ``--pp``, ``--count`` and the bytes flags) or one per ``--job``."""
    from solvers.orchestrator.jobs import Job  # lazily: the solvers package imports PuLP

    if specs:
        for flag, name in (("--dp", "dp"), ("--pp", "pp"), ("--count", "count"), ("--dp-bytes", "dp_bytes"),
                           ("--pp-bytes", "pp_bytes")):
            if given(name):
                raise FabricError(flag, f"each --job carries its own {flag[2:]}=...; put it there (or drop --job)")
        from cli.job_spec import parse_jobs

        return parse_jobs(specs, tp)
    if dp is None:
        raise FabricError("--dp", "give --dp (TP groups per DP group, or 'max'), or one --job per job")
    return [Job(tp=tp, dp=parse_dp(dp), pp=pp, count=count,
                dp_bytes=parse_bytes(dp_bytes, "--dp-bytes") if dp_bytes is not None else None,
                pp_bytes=parse_bytes(pp_bytes, "--pp-bytes") if pp_bytes is not None else None)]


def _check_unused(solver: str, time_limit, gap, mip_solver: str, jobs: list, from_specs: bool) -> None:
    """Refuse an option the run would ignore: the baselines solve nothing, PP 1 sends no PP bytes, DP 1 no DP bytes."""
    if solver in ("greedy", "fault-unaware"):
        for flag, given in (("--time-limit", time_limit), ("--gap", gap),
                            ("--mip-solver", None if mip_solver == "auto" else mip_solver)):
            if given is not None:
                raise FabricError(flag, f"sets the ILP; --solver {solver} solves none (drop it, or use --solver ilp)")
    for j in jobs:
        if j.pp_bytes is not None and j.pp == 1:
            raise (FabricError("--job", f"job {j.name!r}: pp-bytes prices the sends between pipeline stages; with "
                                        "pp 1 there are none") if from_specs else
                   FabricError("--pp-bytes", "prices the sends between pipeline stages; with --pp 1 there are none"))
        if j.dp_bytes is not None and j.dp == 1:  # `--dp max` may still find replicas: only a literal 1 has none
            raise (FabricError("--job", f"job {j.name!r}: dp-bytes prices the DP all-reduce; with dp 1 there is "
                                        "none") if from_specs else
                   FabricError("--dp-bytes", "prices the DP all-reduce; with --dp 1 there is none"))


def _print_summary(d: dict) -> None:
    from rich.table import Table

    con = console()
    jobs = d.get("jobs") or []
    layout = (f"TP {d['tp']} x DP {d['dp']} x PP {d['pp']}" if len(jobs) <= 1
              else f"TP {d['tp']}, {len(jobs)} jobs")
    t = Table(title=f"{d['architecture']}: {layout} ({d['solver']})", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")

    def fmt(v):
        if v is None:
            return "-"
        if isinstance(v, float):
            return f"{v:.6g}"
        return str(v)

    for key in ("status", "model", "objective", "bound", "gap", "solve_seconds", "instances", "tp_groups",
                "dp_groups", "spare_tp_groups", "healthy_gpus", "used_gpus", "gpu_utilization",
                "cross_tor_traffic_ratio", "cross_tor_bytes", "dcn_bytes", "tors_per_dp_group_mean",
                "tors_per_dp_group_max", "faulty_nodes", "fault_source"):
        t.add_row(key, fmt(d.get(key)))
    con.print(t)
    if len(jobs) > 1:
        con.print(_jobs_table(jobs, fmt))
    if d.get("notes"):
        con.print(f"note: {d['notes']}")


def _jobs_table(jobs: list[dict], fmt):
    """Each job's layout, instances and cross-ToR share (the ``jobs`` list of the JSON), one row per job."""
    from rich.table import Table

    t = Table(title="jobs", title_justify="left")
    cols = (("name", "name"), ("DP", "dp"), ("PP", "pp"), ("count", "count"), ("instances", "instances"),
            ("used GPUs", "used_gpus"), ("cross-ToR bytes", "cross_tor_bytes"),
            ("cross-ToR ratio", "cross_tor_traffic_ratio"))
    for head, _ in cols:
        t.add_column(head, justify="left" if head == "name" else "right")
    for j in jobs:
        t.add_row(*(fmt(j.get(key)) for _, key in cols))
    return t


# ------------------------------------------------------------------------------------------ the figure
DEFAULT_ARCHS = (
    ("khop-ring k=2", "khop-ring", {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 16}),
    ("khop-ring k=3", "khop-ring", {"k": 3, "gpus_per_node": 4, "nodes_per_tor": 16}),
    ("dgx-h100", "dgx", {}),
    ("nvl-72", "nvl-72", {}),
    ("tpuv4", "tpuv4", {}),
)
"""Architectures of the cross-ToR table: label, architecture, parameters (k-hop: 64 GPUs per ToR, like DGX)."""


def table_command(
    gpus: int = typer.Option(1024, "--gpus", help="GPUs of every architecture"),
    tp: int = typer.Option(8, "--tp", help="tensor-parallel size: GPUs per TP group (ring)"),
    dp: int = typer.Option(4, "--dp", help="data-parallel size: TP groups per job"),
    load: Optional[float] = typer.Option(None, "--load", help="instances as a fraction of the fault-free maximum"),
    max_ratio: float = typer.Option(0.10, "--max-ratio", help="largest node fault ratio"),
    step: float = typer.Option(0.01, "--step", help="node fault ratio step"),
    samples: int = typer.Option(2, "--samples", help="fault sets per ratio"),
    seed: int = typer.Option(0, "--seed", help="first fault-sampling seed (sample i uses seed + i)"),
    trace: Optional[str] = typer.Option("stepfun", "--trace", help="trace to replay too ('' for none)"),
    trace_points: Optional[int] = typer.Option(None, "--trace-points",
                                               help="fault sets drawn from the trace at random times (default: 8)"),
    trace_servers: Optional[int] = typer.Option(None, "--trace-servers",
                                                help="servers a trace FILE covers (default: those in it)"),
    time_limit: float = typer.Option(60.0, "--time-limit", help="ILP time limit per solve, seconds"),
    as_json: bool = JSON_OPT,
) -> None:
    """Cross-ToR traffic ratio vs node fault ratio: ILP, greedy, fault-unaware; k-hop ring and the others."""
    if not 0 < max_ratio <= 1:
        raise FabricError("--max-ratio", f"{max_ratio} must be in (0, 1]")
    if not 0 < step <= max_ratio:
        raise FabricError("--step", f"{step} must be in (0, --max-ratio = {max_ratio}]")
    if load is not None and not 0 < load <= 1:
        raise FabricError("--load", f"{load} must be in (0, 1]")
    if trace_points is not None and not trace:
        raise FabricError("--trace-points", "draws from --trace; it is not used with --trace ''")
    trace_points = TRACE_POINTS if trace_points is None else trace_points
    if step < RATIO_RESOLUTION:  # the ratios are kept to 6 decimals: a finer step gave two columns of one ratio
        raise FabricError("--step", f"{step:g} must be >= {RATIO_RESOLUTION:g} (fault ratios are kept to 6 decimals)")
    n = max_ratio / step  # inf for a subnormal step: compared before int() can overflow
    if n > MAX_TABLE_POINTS + 0.5:
        raise FabricError("--step", f"{step:g} gives {n + 1:,.0f} fault ratios up to {max_ratio:g}; "
                                    f"at most {MAX_TABLE_POINTS + 1:,} (each is a set of ILP solves)")
    # whole steps up to --max-ratio, not past it: rounding 0.1 / 0.06 up drew a 0.12 column (and 1 / 0.6 a ratio
    # of 1.2, refused as an internal node_fault_ratio); the 1e-9 keeps 0.1 / 0.01 = 9.999... at 10 steps
    n = int(n + 1e-9)
    ratios = tuple(round(i * step, 6) for i in range(n + 1))
    solves = len(ratios) * samples + (trace_points if trace else 0)
    if solves > MAX_TABLE_SOLVES:  # each solve may take up to --time-limit: bound the run before it starts
        raise FabricError("--samples", f"{len(ratios):,} fault ratios x {samples:,} samples"
                                + (f" + {trace_points:,} trace points" if trace else "")
                                + f" = {solves:,} placements per architecture; at most {MAX_TABLE_SOLVES:,}")
    from solvers.orchestrator.table import cross_tor_table, table_markdown  # lazily: the solvers import PuLP
    from topologies import build

    fabrics = [(label, build(arch, gpus, dict(params))) for label, arch, params in DEFAULT_ARCHS]
    rows = cross_tor_table(fabrics, ratios=ratios, samples=samples, seed=seed, tp=tp, dp=dp, load=load,
                           trace=trace or None, trace_points=trace_points, time_limit=time_limit,
                           trace_servers=trace_servers)
    if as_json:
        emit_json({"rows": rows})
    else:
        console().print(table_markdown(rows), markup=False)


#: Finest --step of orchestrate-table: its fault ratios are rounded to 6 decimals.
RATIO_RESOLUTION = 1e-6
#: Fault sets orchestrate-table draws from its trace unless --trace-points says otherwise.
TRACE_POINTS = 8
#: Most fault-ratio steps of orchestrate-table: each one solves samples x architectures ILPs.
MAX_TABLE_POINTS = 1000
#: Most placements (fault sets) orchestrate-table solves per architecture, each up to --time-limit seconds:
#: 10,000 is days of ILP at the worst, and `--samples 1000000` ran without bound.
MAX_TABLE_SOLVES = 10_000


def register(app: typer.Typer) -> None:
    app.command("orchestrate")(orchestrate_command)
    app.command("orchestrate-table")(table_command)
