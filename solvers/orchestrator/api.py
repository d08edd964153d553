"""The orchestrator's entry points: :func:`orchestrate` (a result object) and :func:`orchestrate_summary` (a dict).

Pipeline for a k-hop line: read the line and its faults -> stage 1, the
most GPUs in complete instances (a closed form: the maximum ring count of
:mod:`solvers.allocation.segments`, then whole instances) -> build the ILP
with that instance count fixed -> warm-start it from the cheaper of the
greedy and its ToR-aware regrouping -> solve, all inside the time budget
(:mod:`solvers.orchestrator.run`) -> extract the placement -> account its
traffic exactly.  Other architectures go through
:mod:`solvers.orchestrator.domains`.
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np

from fabric.errors import FabricError
from fabric.model import Fabric
from fabric.trace import with_servers
from solvers.orchestrator.bounded import run_bounded
from solvers.orchestrator.domains import orchestrate_domains
from solvers.orchestrator.encode import encode_blocks, encode_explicit
from solvers.orchestrator.explicit_bounded import run_explicit_bounded, slot_bound, with_bound, with_slot_bound
from solvers.orchestrator.extract import extract_blocks, extract_explicit
from solvers.orchestrator.greedy import fault_unaware_placement, greedy_placement, tor_aware_placement
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.jobs_bound import separate_jobs_bound
from solvers.orchestrator.model import EXPLICIT_MAX_SLOTS, build_chosen, choose_model, explicit_model_fits
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.jobs_line_bound import JointBound, joint_line_bound
from solvers.orchestrator.jobs_run import (ALONE_NOTE, JOBS_FULL_MAX_OPTIONS, JOINT_NOTE, count_options,
                                           run_jobs_blocks)
from solvers.orchestrator.model_blocks import tor_options
from solvers.orchestrator.model_jobs import usable
from solvers.orchestrator.pipelined import run_pipelined, run_pipelined_jobs
from solvers.orchestrator.placement import Placement
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.rings import block_structure, max_rings
from solvers.orchestrator.run import Budget, BudgetSpent, run_ilp, warm_start_result
from solvers.orchestrator.single_group import large_group, run_single_group
from solvers.orchestrator.space import Line, khop_line
from solvers.orchestrator.stage1 import NoInstanceFits, check_fixed_counts, check_jobs, fixed_rings, resolve_jobs
from solvers.orchestrator.three_blocks import bounding_view
from solvers.orchestrator.traffic import placement_traffic
from solvers.orchestrator.several_jobs import deal, live, merged_job, mergeable, relabel
from solvers.pulp_adapter import SolveOptions, relative_gap

__all__ = ["DEFAULT_TIME_LIMIT", "SOLVER_CHOICES", "OrchestrationResult", "orchestrate", "orchestrate_line",
           "orchestrate_summary", "resolve_jobs"]

SOLVER_CHOICES = ("ilp", "greedy", "fault-unaware")
DEFAULT_TIME_LIMIT = 60.0
# several jobs on short blocks, of the budget: the sum of each job's own bound (measured 3-6 s of a 58 s limit at
# 1,024 nodes, k = 3, TP 32), before the three-block view's LP (jobs_run.py)
ALONE_SHARE = 0.15
# Several jobs: the several-job line DP's share of the time left (two jobs: it converged in 2-12 s at 1,024 nodes,
# 14 s at 4,096 nodes for TP 16 x (DP 8 x 20 + DP 4); jobs_line_bound.PRICING_ROUNDS decides whether it prices)
JOINT_SHARE = 0.45
# ... and where the several-job block ILP is too large to build (jobs_run.JOBS_FULL_MAX_OPTIONS), so that only the
# small ILP over the paths' options follows (4,096 nodes, three jobs, TP 32: listing the rows took 6.4 s, then ~35
# rounds of 0.5 s a path)
JOINT_SHARE_ALONE = 0.85
ALONE_MIN_LEFT = 20.0  # seconds: below, the block ILP gets the time first (40 s unbudgeted at 4,096 nodes)


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
        Force a formulation (tests compare them).  ``blocks`` with PP > 1 bounds the job through its DP
        groups (:mod:`solvers.orchestrator.pipelined`), which ``auto`` does above 128 slots.

    Returns
    -------
    OrchestrationResult
    """
    if solver not in SOLVER_CHOICES:
        raise FabricError("solver", f"{solver!r} not allowed; use one of {', '.join(SOLVER_CHOICES)}")
    options = options or SolveOptions(time_limit=DEFAULT_TIME_LIMIT)
    if fabric.hbd.kind != "khop_line":
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
    check_jobs(jobs, g, line.space.gpus.size)
    check_fixed_counts(jobs, line.n // (jobs[0].tp // g))  # any m consecutive nodes form a ring
    m = jobs[0].tp // g
    if solver == "fault-unaware":
        return _fault_unaware(line, jobs, m, t0)
    R = len(max_rings(line, m))
    healthy = int(line.space.healthy.sum()) * g
    resolved = resolve_jobs(jobs, R, healthy)
    if resolved is None:
        need = fixed_rings(jobs)
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
    if not _moves_bytes(resolved, g):  # --dp-bytes 0 (and no PP bytes): nothing crosses a ToR, whatever the placement
        return warm_start_result(line.space, resolved, greedy, "-", "no DP or PP bytes to place (all are 0): every "
                                 "placement with the most instances is optimal", t0, 0.0, termination="optimal")
    if len(resolved) > 1:  # several jobs: one job where that is exact or bounds it (several_jobs.py)
        res = _several(line, resolved, greedy, options, model, t0)
        if res is not None:
            return res
    return _ilp(line, resolved, _warm_start(line, resolved, greedy), options, model, t0)


def _each_job_bounded(line: Line, jobs: list[Job], res: OrchestrationResult, options: SolveOptions,
                      t0: float) -> OrchestrationResult:
    """Several jobs left to the explicit model, not proved: the sum of each job's own bound (jobs_bound.py)."""
    if res.status == "optimal" or res.traffic is None:
        return res
    budget = Budget(t0, options.time_limit)
    if budget.spent():
        return res
    unit, _, _ = unit_costs(jobs, line.space.g)
    bound = separate_jobs_bound(line, jobs, budget)
    res = with_bound(res, bound, unit, "sum of the jobs' own bounds", ALONE_NOTE.format(bound))
    res.seconds["total"] = time.perf_counter() - t0
    return res


def _moves_bytes(jobs: list[Job], g: int) -> bool:
    """Some job has DP or PP bytes that could cross a ToR (the objective's unit is then > 0)."""
    return unit_costs(jobs, g)[0] > 0


def _several(line: Line, jobs: list[Job], greedy: Placement, options: SolveOptions, prefer: str,
             t0: float) -> OrchestrationResult | None:
    """Jobs without instances dropped, jobs of one DP size merged (None: neither reduction applies).

    Jobs with PP > 1 go through their DP groups first (:func:`_several_pipelined`), where that applies.
    """
    if any(j.pp > 1 for j in jobs):
        return _several_pipelined(line, jobs, options, prefer, t0)
    idx = live(jobs)
    sub = [jobs[i] for i in idx]
    if not sub:
        return None
    if not (len(sub) == 1 or mergeable(sub, exact=True)):
        res = _jobs_blocks(line, sub, options, prefer, t0)
        if res is not None and res.placement is not None:
            res.placement = relabel(res.placement, idx)
            res.traffic = placement_traffic(res.placement, line.space, jobs)
            res.jobs = jobs
            res.notes.append(f"several jobs: {len(jobs) - len(sub)} without instances dropped, {len(sub)} of DP "
                             f"sizes {sorted({j.dp for j in sub})} on one block model "
                             "(solvers/orchestrator/model_jobs.py)")
            return res
        if not mergeable(sub):  # one DP size with unequal buffers off blocks: the merge still bounds it
            return None
    one = [merged_job(sub, line.space.g)] if len(sub) > 1 else sub
    res = _ilp(line, one, _warm_start(line, one, greedy_placement(line, one)), options, prefer, t0)
    if res.placement is None:
        return None
    placement = relabel(deal(res.placement, line.space, sub, one[0]) if len(sub) > 1 else res.placement, idx)
    traffic = placement_traffic(placement, line.space, jobs)
    if placement_traffic(greedy, line.space, jobs).cross_bytes < traffic.cross_bytes:
        placement, traffic = greedy, placement_traffic(greedy, line.space, jobs)
        res.warm_start_unimproved = True
    res.placement, res.traffic, res.jobs = placement, traffic, jobs
    unit = res.unit_bytes
    rep = res.report
    if rep is not None and rep.has_solution and unit:
        # the merged job's bound (bytes at the least bytes per crossing) bounds the request: several_jobs.py
        obj = traffic.cross_bytes / unit
        bound = min(rep.bound if rep.bound is not None else 0.0, obj)
        optimal = obj - bound <= 1e-6 * max(1.0, obj)
        res.report = replace(rep, objective=obj, bound=bound, gap=relative_gap(obj, bound),
                             status="optimal" if optimal else "feasible")
        res.status = res.report.status
        if not optimal:  # what proved the merged job optimal does not prove the request
            res.notes = [n for n in res.notes if not n.startswith("optimality proved")]
        if not optimal and res.termination == "optimal":
            res.termination = "other_limit"  # the merged job (a relaxation) was solved; the request is not proved
    res.notes.append(f"several jobs: {len(jobs) - len(sub)} without instances dropped" +
                     (f", {len(sub)} of DP {sub[0].dp} merged into one job of {one[0].count} groups "
                      "(solvers/orchestrator/several_jobs.py)" if len(sub) > 1 else ""))
    return res


def _several_pipelined(line: Line, jobs: list[Job], options: SolveOptions, prefer: str,
                       t0: float) -> OrchestrationResult | None:
    """Several jobs, some with PP > 1, as one job's PP > 1 is (:func:`_ilp`): their DP groups placed as jobs of
    PP = 1 by this module's several-job runs, then chained per job (pipelined.run_pipelined_jobs).  None (the
    explicit model then) where :func:`_through_dp_groups` says no."""
    if not _through_dp_groups(line, jobs, prefer):
        return None
    flat_opts = _dp_groups_options(options)
    return run_pipelined_jobs(line, jobs, lambda flat: orchestrate_line(line, flat, options=flat_opts, t0=t0), t0)


def _warm_start(line: Line, jobs: list[Job], greedy: Placement) -> Placement:
    """The cheaper of the greedy and the ToR-aware grouping of the same rings (the ILP's start)."""
    other = tor_aware_placement(line, jobs)
    a = placement_traffic(greedy, line.space, jobs).cross_bytes
    b = placement_traffic(other, line.space, jobs).cross_bytes
    return other if b < a else greedy


# Of a pipelined job's time limit, kept back from its DP groups' run for chaining them and the PP-aware bound: a
# groups' run that used the whole limit left the answer 0.64-0.67 s late (1,024 interleaved nodes at 20 s).
CHAIN_SHARE = 0.05


def _through_dp_groups(line: Line, jobs: list[Job], prefer: str) -> bool:
    """Whether the jobs' PP > 1 goes through their DP groups (solvers/orchestrator/pipelined.py): some job has
    PP > 1, every such job DP > 1 (its groups alone carry no DP bytes to bound it by otherwise), and the line has
    ToR blocks or is above the explicit model's exact size (small lines: the explicit model is exact and quick)."""
    staged = [j for j in jobs if j.pp > 1]
    big = prefer == "auto" and line.n > EXPLICIT_MAX_SLOTS
    if not staged or any(j.dp < 2 for j in staged) or not (big or prefer == "blocks"):
        return False
    return big or block_structure(line, jobs[0].tp // line.space.g, allow_short=True) is not None


def _dp_groups_options(options: SolveOptions) -> SolveOptions:
    """The options of the DP groups' run: the chaining's share of the time kept back, and half the gap asked for
    (the PP bytes the chaining adds widen it)."""
    limit = None if options.time_limit is None else options.time_limit * (1 - CHAIN_SHARE)
    return replace(options, gap_rel=options.gap_rel / 2, time_limit=limit)


def _ilp(line: Line, jobs: list[Job], greedy: Placement, options: SolveOptions, prefer: str,
         t0: float) -> OrchestrationResult:
    job = jobs[0]
    if len(jobs) == 1 and _through_dp_groups(line, jobs, prefer):
        # PP > 1 on ToR blocks, or on any wiring above the explicit model's exact size: bounded through its DP
        # groups alone, which are then chained (solvers/orchestrator/pipelined.py).  Off blocks (interleaved wiring,
        # --tor-map) the DP groups get the slot bound and the spare-node search of explicit_bounded.py, and
        # their chaining beat the explicit model everywhere tried (1,024 interleaved nodes at 58 s: TP 16 x DP 4
        # x PP 2 1.60e13 -> 8.9e12 cross-ToR bytes, TP 32 x DP 4 x PP 2 1.87e13 -> 1.15e13, TP 8 x DP 16 x PP 4
        # 1.41e13 -> 1.26e13; 160 nodes TP 16 x DP 4 x PP 2 1.98e12 -> 4.8e9)
        flat_opts = _dp_groups_options(options)
        res = run_pipelined(line, job, lambda fj, g: _ilp(line, fj, _warm_start(line, fj, g), flat_opts, "auto", t0),
                            t0, options.time_limit)
        if res is not None:
            return res
    budget = Budget(t0, options.time_limit)
    kind, blocks = choose_model(line, jobs, prefer)
    if kind == "none":  # no DCN bytes: every maximal placement is optimal
        res = OrchestrationResult("optimal", "ilp", "none", line.space, jobs, greedy,
                                  placement_traffic(greedy, line.space, jobs))
        res.notes.append("D = 1 and PP = 1: no DP or PP traffic, any placement with the most GPUs is optimal")
        res.seconds.update(total=time.perf_counter() - t0)
        return res

    def encode(built, placement):
        return encode_blocks(built, placement) if built.kind.startswith("blocks") else encode_explicit(built,
                                                                                                         placement)

    def extract(built):
        return extract_blocks(built) if built.kind.startswith("blocks") else extract_explicit(built)

    if kind == "blocks-single" and large_group(blocks, job.dp):  # one group: a path along the blocks
        res = run_single_group(line, jobs, blocks, budget, greedy)
        if res is not None:
            return res
    build = lambda b: build_chosen(line, jobs, kind, blocks, b)  # noqa: E731
    if kind == "blocks":  # the line-DP bound (with a wrap state on a closed line) proves most of these optimal
        unit, _, _ = unit_costs(jobs, line.space.g)
        return run_bounded(line.space, jobs, greedy, options, budget, blocks, unit, build)
    if kind == "explicit" and len(jobs) == 1 and job.pp == 1 and line.n > EXPLICIT_MAX_SLOTS:
        # any wiring: the slot-by-slot bound first (solvers/orchestrator/explicit_bounded.py)
        listed: dict = {}  # the candidate rings, listed once for the size check and the build
        return run_explicit_bounded(line, jobs, greedy, options, budget,
                                    lambda b: build_chosen(line, jobs, kind, blocks, b, listed.get("cands")),
                                    encode, extract, fits=lambda: explicit_model_fits(line, jobs, budget, listed))
    def floored(lb: float) -> OrchestrationResult:  # the ILP told a proven lower bound (objective units)
        return run_ilp(line.space, jobs, greedy, replace(options, known_bound=max(lb, options.known_bound or 0.0)),
                       budget, build, encode, extract)

    if kind == "explicit" and line.n > EXPLICIT_MAX_SLOTS and (len(jobs) > 1 or job.pp > 1):
        # too large to prove itself: bounded first by the DP groups alone (PP bytes >= 0, and each job's
        # instances are a placement of that job alone: jobs_bound.py); after the search no time would be left
        lb = separate_jobs_bound(line, jobs, budget.share(ALONE_SHARE))
        return with_bound(floored(lb), lb, unit_costs(jobs, line.space.g)[0], "sum of the jobs' own bounds",
                          ALONE_NOTE.format(lb))
    if kind == "explicit" and len(jobs) == 1 and job.pp == 1 and (job.dp or 0) > 1:
        # small lines: the explicit model is exact, but HiGHS may not close its gap in time (128 nodes, 4-node
        # ToRs, k = 3, TP 32 x DP 2: every placement costs the same, and it stood at a 100 % gap after 10 s); the
        # slot bound (milliseconds, any wiring) is its floor and settles such lines at once
        lb = slot_bound(line.space, job)
        return with_slot_bound(floored(lb), lb, unit_costs(jobs, line.space.g)[0])
    res = run_ilp(line.space, jobs, greedy, options, budget, build, encode, extract)
    # several jobs on a line the explicit model proves itself on: if it did not, their own bounds (time left)
    return _each_job_bounded(line, jobs, res, options, t0) if len(jobs) > 1 else res


def _jobs_blocks(line: Line, jobs: list[Job], options: SolveOptions, prefer: str,
                 t0: float) -> OrchestrationResult | None:
    """Jobs of different DP sizes, PP = 1, on ToR blocks: the several-job block ILP (None: no blocks here).

    On short blocks (a ring may span three ToRs) the ILP is a restriction, proved against its three-block view
    (jobs_run.py) and, where that leaves a gap, against the sum of each job's own bound.
    """
    if prefer == "explicit" or any(j.pp > 1 for j in jobs):
        return None
    blocks = block_structure(line, jobs[0].tp // line.space.g, allow_short=True)
    if not usable(blocks, [j.dp for j in jobs], allow_short=True):
        return None
    bounding = None if blocks.exact else bounding_view(blocks, line.space.healthy, line.space.tor)
    if not blocks.exact and bounding is None:
        return None
    unit, dpc, _ = unit_costs(jobs, line.space.g)
    greedy = _warm_start(line, jobs, greedy_placement(line, jobs))
    budget = Budget(t0, options.time_limit)
    floor, joint, n_options = 0.0, None, None
    left = budget.remaining()
    if left is None or left > ALONE_MIN_LEFT:
        try:
            n_options = count_options(blocks, [j.dp for j in jobs], budget)
        except BudgetSpent:
            n_options = None
        # too large to build: only the small ILP over the line DP's paths' options follows, which needs them priced
        share = JOINT_SHARE if n_options is None or n_options <= JOBS_FULL_MAX_OPTIONS else JOINT_SHARE_ALONE
        joint = _joint_bound(line, jobs, greedy, bounding or (blocks, tor_options), unit, dpc, budget, share)
        floor = joint.bound if joint is not None else 0.0
    if not blocks.exact and (left is None or left > ALONE_MIN_LEFT) and not (joint is not None and joint.converged):
        # the higher where the view's LP is weak or out of time (a job out of time: its slot bound)
        floor = max(floor, separate_jobs_bound(line, jobs, budget.share(ALONE_SHARE)))
    res = run_jobs_blocks(line.space, jobs, greedy, options, budget, blocks, unit, dpc, bounding=bounding,
                          floor=floor, floor_note=_floor_note(joint, floor),
                          path_options=list(joint.options) if joint is not None else None,
                          converged=joint is not None and joint.converged, n_options=n_options)
    # short blocks without the jobs' own bounds first (too little time then): after the ILP, if time is left; and
    # exact blocks where the ILP proved nothing (16,384 nodes, TP 16 x (DP 4 x 100 + DP 8 x 50): its model too
    # large, the warm start came back in 3 s of 280 with the trivial bound 0)
    trivial = res.report is None or not res.report.bound
    return res if floor > 0 or (blocks.exact and not trivial) else _each_job_bounded(line, jobs, res, options, t0)


def _joint_bound(line: Line, jobs: list[Job], greedy: Placement, bounding, unit: float, dpc: list[float],
                 budget: Budget, share: float = JOINT_SHARE) -> JointBound | None:
    """The several-job line DP (jobs_line_bound.py) on ``bounding`` = (blocks or their three-block view, options
    function), priced until it reaches the warm start's cost or converges, in ``share`` of the time left; None:
    no bound."""
    if len(jobs) < 2:
        return None
    view, options_of = bounding
    warm = placement_traffic(greedy, line.space, jobs).cross_bytes / unit
    return joint_line_bound(view, [j.dp for j in jobs], [j.count for j in jobs], dpc, budget=budget.share(share),
                            options_of=options_of, upper=warm)


def _floor_note(joint: JointBound | None, floor: float) -> str:
    """The note of the floor handed to the several-job block run: the several-job DP's or the jobs' own bounds."""
    if joint is not None and joint.bound >= floor - 1e-9 and floor > 0:
        return JOINT_NOTE.format(floor)
    return ALONE_NOTE.format(floor)


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


def orchestrate_summary(fabric: Fabric, *, tp: int | None = None, dp: int | None = None, pp: int = 1,
                        count: int | None = None,
                        faulty_nodes=None, node_fault_ratio: float | None = None, seed: int = 0,
                        trace: str | None = None, trace_time: float | None = None, solver: str = "ilp",
                        time_limit: float | None = DEFAULT_TIME_LIMIT, gap_rel: float = 0.0,
                        mip_solver: str = "auto", tor_map=None, dp_bytes: float | None = None,
                        pp_bytes: float | None = None, placement: bool = False,
                        fault_mode: str = "bernoulli", trace_servers: int | None = None,
                        none_fit_empty: bool = False, jobs: list[Job] | None = None) -> dict:
    """One orchestration as the JSON object of ``fabric orchestrate`` (what a sweep metric registers).

    Exactly one fault source: ``faulty_nodes`` (node ids), ``node_fault_ratio``
    (i.i.d. node faults, ``seed``, ``fault_mode`` bernoulli or exact count;
    :func:`fabric.faults.sample_iid`) or
    ``trace`` (``stepfun`` or a file, replayed on the nodes with ``seed`` and
    read at ``trace_time`` days: default the moment with the most nodes
    down); none of them means no fault.  ``trace_servers`` counts the servers
    a trace file covers, those that never fail included (default: those in it).
    When not one instance fits on the healthy GPUs it raises
    :class:`~solvers.orchestrator.stage1.NoInstanceFits` (bad input for one
    orchestration), or with ``none_fit_empty`` returns status ``infeasible``
    with no instance (a cell of a table over fault ratios).

    One job is ``tp``, ``dp`` (None: "max"), ``pp``, ``count``, ``dp_bytes`` and ``pp_bytes``; several are
    ``jobs`` instead (each with its own layout and bytes, all of one TP), and those six are then left out.

    Returns
    -------
    dict
        :meth:`OrchestrationResult.summary` plus ``fault_source`` and ``node_fault_ratio``.
    """
    from solvers.orchestrator.faultsets import fault_nodes

    trace = with_servers(trace, trace_servers)
    nodes, source = fault_nodes(fabric, faulty_nodes=faulty_nodes, node_fault_ratio=node_fault_ratio, seed=seed,
                                trace=trace, trace_time=trace_time, mode=fault_mode)
    if jobs is None:
        if tp is None:
            raise FabricError("tp", "give tp (and dp) for one job, or jobs")
        jobs = [Job(tp=tp, dp=dp, pp=pp, count=count, dp_bytes=dp_bytes, pp_bytes=pp_bytes)]
    elif (tp, dp, pp, count, dp_bytes, pp_bytes) != (None, None, 1, None, None, None):
        raise FabricError("jobs", "each job carries its own tp, dp, pp, count and bytes; give jobs or those, "
                                  "not both")
    opts = SolveOptions(solver=mip_solver, time_limit=time_limit, gap_rel=gap_rel)
    try:
        res = orchestrate(fabric, list(jobs), nodes, solver=solver, options=opts, tor_map=tor_map)
        out = res.summary(placement=placement)
    except NoInstanceFits as exc:
        if not none_fit_empty:
            raise
        out = {"status": "infeasible", "instances": 0, "gpu_utilization": 0.0, "cross_tor_traffic_ratio": None,
               "notes": [exc.message]}
    out["fault_source"] = source
    all_nodes = np.unique(fabric.group("node")[fabric.gpu_ids])
    out["nodes"] = int(all_nodes.size)
    out["node_fault_ratio"] = len(nodes) / all_nodes.size if all_nodes.size else 0.0
    return out
