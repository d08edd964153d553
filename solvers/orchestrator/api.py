"""The orchestrator's entry points: :func:`orchestrate` (a result object) and :func:`orchestrate_summary` (a dict).

Pipeline for a k-hop line: read the line and its faults -> stage 1, the
most GPUs in complete instances (a closed form: the maximum ring count of
:mod:`solvers.allocation.segments`, then whole instances) -> build the ILP
with that instance count fixed -> warm-start it from the greedy -> solve
-> extract the placement -> account its traffic exactly.  Other
architectures go through :mod:`solvers.orchestrator.domains`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from fabric.errors import FabricError
from fabric.model import Fabric
from solvers.orchestrator.encode import encode_blocks, encode_explicit
from solvers.orchestrator.extract import extract_blocks, extract_explicit
from solvers.orchestrator.greedy import fault_unaware_placement, greedy_placement
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.model import build_model
from solvers.orchestrator.placement import Placement
from solvers.orchestrator.rings import max_rings
from solvers.orchestrator.solve import solve_model
from solvers.orchestrator.space import Line, SlotSpace, khop_line
from solvers.orchestrator.traffic import TrafficReport, placement_traffic
from solvers.pulp_adapter import SolveOptions, SolveReport

SOLVER_CHOICES = ("ilp", "greedy", "fault-unaware")
DEFAULT_TIME_LIMIT = 60.0


@dataclass
class OrchestrationResult:
    """Everything one orchestration produced.

    Attributes
    ----------
    status : str
        ``optimal``, ``feasible`` (heuristic, or ILP not proven), ``time_limit``, ``infeasible``.
    solver : str
        ``ilp``, ``greedy``, ``fault-unaware``.
    model : str
        ILP formulation used (``blocks``, ``blocks-single``, ``explicit``, ``none``) or ``-``.
    jobs : list of Job
        With DP size and instance count resolved (stage 1).
    """

    status: str
    solver: str
    model: str
    space: SlotSpace
    jobs: list[Job]
    placement: Placement | None
    traffic: TrafficReport | None
    report: SolveReport | None = None
    unit_bytes: float = 0.0
    model_stats: dict | None = None
    seconds: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unit: str = "node"

    @property
    def healthy_gpus(self) -> int:
        return int(self.space.healthy.sum()) * self.space.g

    @property
    def used_gpus(self) -> int:
        if self.placement is None:
            return 0
        return len(self.placement.used_rings) * self.jobs[0].tp if self.jobs else 0

    def summary(self, placement: bool = False) -> dict:
        """The JSON object of ``fabric orchestrate``: scalars (``model_size`` one nested level), placement if asked.

        ``objective`` / ``bound`` are bytes per step on ToR uplinks (the ILP's
        incumbent and proven bound; for a baseline the objective is its
        accounted cross bytes and the bound is None); ``gpu_utilization`` =
        GPUs in complete instances / healthy GPUs; ``cross_tor_traffic_ratio``
        = cross-ToR bytes / DCN bytes (:mod:`solvers.orchestrator.traffic`);
        ``*_seconds`` are wall times (they differ between runs, nothing else does).
        """
        inst = self.placement.instances if self.placement is not None else ()
        tr = self.traffic.to_dict() if self.traffic is not None else {
            "dcn_bytes": 0.0, "cross_tor_bytes": 0.0, "dp_bytes": 0.0, "dp_cross_tor_bytes": 0.0,
            "pp_bytes": 0.0, "pp_cross_tor_bytes": 0.0, "cross_tor_traffic_ratio": None,
            "tors_per_dp_group_mean": None, "tors_per_dp_group_max": None}
        rep = self.report
        scale = self.unit_bytes
        objective = bound = gap = None
        if rep is not None and rep.has_solution:
            objective = rep.objective * scale if rep.objective is not None else None
            bound = rep.bound * scale if rep.bound is not None else None
            gap = rep.gap
        elif self.solver != "ilp" and self.traffic is not None:
            objective = self.traffic.cross_bytes
        if self.model == "none" and self.traffic is not None:
            objective, bound, gap = 0.0, 0.0, 0.0
        job = self.jobs[0] if self.jobs else None
        out = {
            "solver": self.solver, "model": self.model, "status": self.status,
            "objective": objective, "bound": bound, "gap": gap,
            "termination": rep.termination if rep is not None else None,
            "warm_start_unimproved": bool(rep is not None and rep.warm_start_unimproved),
            "solve_seconds": rep.seconds if rep is not None else 0.0,
            "build_seconds": self.seconds.get("build", 0.0), "total_seconds": self.seconds.get("total", 0.0),
            "mip_solver": rep.solver if rep is not None else None,
            "tp": job.tp if job else None, "dp": job.dp if job else None, "pp": job.pp if job else None,
            "instances": len(inst),
            "tp_groups": sum(len(i.rings) for i in inst),
            "dp_groups": sum(len(i.stages) for i in inst),
            "spare_tp_groups": len(self.placement.spare) if self.placement is not None else 0,
            "gpus": int(self.space.gpus.size), "healthy_gpus": self.healthy_gpus, "used_gpus": self.used_gpus,
            "gpu_utilization": self.used_gpus / self.healthy_gpus if self.healthy_gpus else 0.0,
            "faulty_nodes": int(np.unique(self.space.node[~self.space.healthy]).size),
            **tr,
            "count": job.count if job else None,
            "dp_bytes_per_gpu": job.bytes_dp if job else None,
            "pp_bytes_per_rank": job.bytes_pp if job else None,
            "bytes_model": (None if job is None or (job.dp_bytes is not None and job.pp_bytes is not None)
                            else job.to_dict()["bytes_model"]),
            "model_size": self.model_stats,
            "notes": "; ".join(self.notes),
        }
        if placement and self.placement is not None:
            out["placement"] = self.placement.to_dict(self.space, self.unit)
        return out


# ------------------------------------------------------------------------------------------ stage 1
def _check_jobs(jobs: list[Job], g: int, gpus: int) -> None:
    if not jobs:
        raise FabricError("jobs", "give at least one job")
    for j in jobs:
        if j.tp % g:
            raise FabricError("tp", f"{j.tp} must be a multiple of gpus_per_node={g}: a ring takes whole nodes")
        if j.tp > gpus:
            raise FabricError("tp", f"{j.tp} exceeds the {gpus} GPUs of the fabric")
    if len({j.tp for j in jobs}) > 1:
        raise FabricError("jobs", "all jobs must have the same TP size (mixed ring sizes are not supported)")


def resolve_jobs(jobs: list[Job], rings: int, healthy_gpus: int) -> list[Job] | None:
    """Stage 1: the most GPUs in complete instances, given ``rings`` rings of one size.

    ``dp=None`` takes every ring it can (``rings // pp`` replicas); fixed
    counts are served first (None when they do not fit: infeasible); jobs
    with ``count=None`` then share the rest so that the most rings are used
    (an unbounded knapsack over instance sizes; ties go to earlier jobs).

    Raises
    ------
    FabricError
        A single job of which not even one instance fits.
    """
    out = list(jobs)
    for i, j in enumerate(out):
        if j.dp is None:
            D = rings // j.pp
            if D < 1:
                raise FabricError("dp", f"not one DP replica fits: {rings} rings of TP {j.tp} on "
                                          f"{healthy_gpus} healthy GPUs, PP {j.pp} needs {j.pp} rings")
            out[i] = j.with_layout(D, 1)
    need = sum(j.dp * j.pp * j.count for j in out if j.count is not None)
    if need > rings:
        return None
    free = rings - need
    flex = [i for i, j in enumerate(out) if j.count is None]
    counts = _knapsack([out[i].dp * out[i].pp for i in flex], free)
    for i, c in zip(flex, counts):
        out[i] = out[i].with_layout(out[i].dp, c)
    if len(out) == 1 and out[0].count == 0:
        j = out[0]
        raise FabricError("dp", f"DP x TP x PP = {j.dp} x {j.tp} x {j.pp} = {j.dp * j.tp * j.pp} GPUs does not "
                                  f"fit: the {healthy_gpus} healthy GPUs form {rings} TP groups of {j.tp}")
    return out


def _knapsack(sizes: list[int], cap: int) -> list[int]:
    """Counts maximising sum(count * size) <= cap; among optima the lexicographically largest counts."""
    if not sizes:
        return []
    best = [0] * (cap + 1)  # best[c]: most rings usable with capacity c
    for c in range(1, cap + 1):
        best[c] = max([best[c - s] + s for s in sizes if s <= c] + [0])
    counts, c = [0] * len(sizes), cap
    target = best[cap]
    while target > 0:
        for i, s in enumerate(sizes):
            if s <= c and best[c - s] + s == target and best[c - s] == target - s:
                counts[i] += 1
                c -= s
                target -= s
                break
        else:  # pragma: no cover - best[] guarantees a predecessor
            break
    return counts


# ------------------------------------------------------------------------------------------ pipeline
def orchestrate(fabric: Fabric, jobs: list[Job], faulty_nodes=(), *, solver: str = "ilp",
                options: SolveOptions | None = None, tor_map=None, model: str = "auto") -> OrchestrationResult:
    """Place ``jobs`` on ``fabric`` with ``faulty_nodes`` down (see the module docstring).

    Parameters
    ----------
    fabric : Fabric
        A k-hop line (``khop_line``), or a switch-domain / OCS-cube fabric
        (:mod:`solvers.orchestrator.domains`).
    jobs : list of Job
    faulty_nodes : iterable of int
        ``node`` group ids that are down.
    solver : {'ilp', 'greedy', 'fault-unaware'}
    options : SolveOptions, optional
        ILP options (default: HiGHS, 60 s).
    tor_map : sequence of int, optional
        k-hop only: the ToR of each line position (overrides the wiring).
    model : {'auto', 'blocks', 'explicit'}
        Force a formulation (tests compare them).

    Returns
    -------
    OrchestrationResult
    """
    if solver not in SOLVER_CHOICES:
        raise FabricError("solver", f"{solver!r} not allowed; use one of {', '.join(SOLVER_CHOICES)}")
    options = options or SolveOptions(time_limit=DEFAULT_TIME_LIMIT)
    if fabric.hbd.kind != "khop_line":
        from solvers.orchestrator.domains import orchestrate_domains

        if tor_map is not None:
            raise FabricError("tor_map", "only a k-hop line can be re-wired to ToRs")
        return orchestrate_domains(fabric, jobs, faulty_nodes, solver=solver, options=options)
    t0 = time.perf_counter()
    line = khop_line(fabric, faulty_nodes, tor_map)
    return orchestrate_line(line, jobs, solver=solver, options=options, model=model, t0=t0)


def orchestrate_line(line: Line, jobs: list[Job], *, solver: str = "ilp", options: SolveOptions | None = None,
                     model: str = "auto", t0: float | None = None) -> OrchestrationResult:
    """:func:`orchestrate` on an already-read k-hop :class:`~solvers.orchestrator.space.Line`."""
    if solver not in SOLVER_CHOICES:
        raise FabricError("solver", f"{solver!r} not allowed; use one of {', '.join(SOLVER_CHOICES)}")
    options = options or SolveOptions(time_limit=DEFAULT_TIME_LIMIT)
    t0 = time.perf_counter() if t0 is None else t0
    g = line.space.g
    _check_jobs(jobs, g, line.space.gpus.size)
    m = jobs[0].tp // g
    if solver == "fault-unaware":
        return _fault_unaware(line, jobs, m, t0)
    R = len(max_rings(line, m))
    healthy = int(line.space.healthy.sum()) * g
    resolved = resolve_jobs(jobs, R, healthy)
    if resolved is None:
        need = sum(j.dp * j.pp * j.count for j in jobs if j.count is not None and j.dp is not None)
        res = OrchestrationResult("infeasible", solver, "-", line.space, list(jobs), None, None)
        res.notes.append(f"the fixed instance counts need {need} TP groups; the healthy nodes form only {R}")
        res.seconds["total"] = time.perf_counter() - t0
        return res
    greedy = greedy_placement(line, resolved)
    if solver == "greedy":
        res = OrchestrationResult("feasible", "greedy", "-", line.space, resolved, greedy,
                                  placement_traffic(greedy, line.space, resolved))
        res.seconds["total"] = time.perf_counter() - t0
        return res
    return _ilp(line, resolved, greedy, options, model, t0)


def _ilp(line: Line, jobs: list[Job], greedy: Placement, options: SolveOptions, prefer: str,
         t0: float) -> OrchestrationResult:
    t1 = time.perf_counter()
    built = build_model(line, jobs, prefer)
    t_build = time.perf_counter() - t1
    if built is None:  # no DCN bytes: every maximal placement is optimal
        res = OrchestrationResult("optimal", "ilp", "none", line.space, jobs, greedy,
                                  placement_traffic(greedy, line.space, jobs))
        res.notes.append("D = 1 and PP = 1: no DP or PP traffic, any placement with the most GPUs is optimal")
        res.seconds.update(build=t_build, total=time.perf_counter() - t0)
        return res
    start = encode_blocks(built, greedy) if built.kind.startswith("blocks") else encode_explicit(built, greedy)
    report = solve_model(built, options, start)
    res = OrchestrationResult(report.status, "ilp", built.kind, line.space, jobs, None, None, report,
                              built.unit_bytes, built.stats())
    if report.has_solution:
        placement = extract_blocks(built) if built.kind.startswith("blocks") else extract_explicit(built)
        placement.check(line.space)
        res.placement = placement
        res.traffic = placement_traffic(placement, line.space, jobs)
    elif report.status == "time_limit":
        res.notes.append("no incumbent within the time limit; the greedy placement would be: "
                         f"{placement_traffic(greedy, line.space, jobs).ratio:.4f} cross-ToR ratio")
    res.seconds.update(build=t_build, total=time.perf_counter() - t0)
    return res


def _fault_unaware(line: Line, jobs: list[Job], m: int, t0: float) -> OrchestrationResult:
    clean = replace(line, space=replace(line.space, healthy=np.ones(line.n, dtype=bool)))
    R_clean = len(max_rings(clean, m))
    plan = resolve_jobs(jobs, R_clean, clean.n * line.space.g)
    if plan is None:
        res = OrchestrationResult("infeasible", "fault-unaware", "-", line.space, list(jobs), None, None)
        res.notes.append("the fixed instance counts do not fit even the fault-free line")
        return res
    placement = fault_unaware_placement(line, plan, plan)
    res = OrchestrationResult("feasible", "fault-unaware", "-", line.space, plan, placement,
                              placement_traffic(placement, line.space, plan))
    res.notes.append("planned on the fault-free line; rings and instances touching a faulty node dropped")
    res.seconds["total"] = time.perf_counter() - t0
    return res


def orchestrate_summary(fabric: Fabric, *, tp: int, dp: int | None, pp: int = 1, count: int | None = None,
                        faulty_nodes=None, node_fault_ratio: float | None = None, seed: int = 0,
                        trace: str | None = None, trace_time: float | None = None, solver: str = "ilp",
                        time_limit: float | None = DEFAULT_TIME_LIMIT, gap_rel: float = 0.0,
                        mip_solver: str = "auto", tor_map=None, dp_bytes: float | None = None,
                        pp_bytes: float | None = None, placement: bool = False,
                        fault_mode: str = "bernoulli") -> dict:
    """One orchestration as the JSON object of ``fabric orchestrate`` (what a sweep metric registers).

    Exactly one fault source: ``faulty_nodes`` (node ids), ``node_fault_ratio``
    (i.i.d. node faults, ``seed``, ``fault_mode`` bernoulli or exact count;
    :func:`fabric.faults.sample_iid`) or
    ``trace`` (``stepfun`` or a file, replayed on the nodes with ``seed`` and
    read at ``trace_time`` days: default the moment with the most nodes
    down); none of them means no fault.

    Returns
    -------
    dict
        :meth:`OrchestrationResult.summary` plus ``fault_source`` and ``node_fault_ratio``.
    """
    from solvers.orchestrator.faultsets import fault_nodes

    nodes, source = fault_nodes(fabric, faulty_nodes=faulty_nodes, node_fault_ratio=node_fault_ratio, seed=seed,
                                trace=trace, trace_time=trace_time, mode=fault_mode)
    job = Job(tp=tp, dp=dp, pp=pp, count=count, dp_bytes=dp_bytes, pp_bytes=pp_bytes)
    opts = SolveOptions(solver=mip_solver, time_limit=time_limit, gap_rel=gap_rel)
    res = orchestrate(fabric, [job], nodes, solver=solver, options=opts, tor_map=tor_map)
    out = res.summary(placement=placement)
    out["fault_source"] = source
    all_nodes = np.unique(fabric.group("node")[fabric.gpu_ids])
    out["nodes"] = int(all_nodes.size)
    out["node_fault_ratio"] = len(nodes) / all_nodes.size if all_nodes.size else 0.0
    return out
