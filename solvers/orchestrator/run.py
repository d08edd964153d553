"""Run one placement ILP inside a wall-clock budget that covers the model build as well as the solve.

``--time-limit`` bounds the whole orchestration from the moment the line (or
the TP groups) has been read: the model build checks the budget between ToRs
and candidate rings and gives up when it is spent; the solver gets what is
left (minus :data:`HANDOVER_SHARE` of the build time for handing the model
over and :data:`EXTRACT_RESERVE_S` plus :data:`EXTRACT_SHARE` of it for reading the solution); when
nothing is left the warm start (the greedy, or its ToR-aware regrouping when
cheaper) is returned as the incumbent, with the
trivial bound (cross-ToR bytes >= 0) and a ``termination`` that says so.
What may still run past the limit: one ToR's or one start position's worth
of build work, a hand-over slower than estimated, the solver's own reaction
time to its limit (HiGHS checks it between presolve passes: up to a few
seconds on the largest block models of the benchmarks), and the extraction
and exact accounting of the result.  :data:`STATED_OVERHEAD_S` is the
overrun on models of up to ~20k columns; the benchmarks print every overrun.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Callable

from solvers.orchestrator.jobs import Job
from solvers.orchestrator.placement import Placement
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.rings import TooManyCandidates
from solvers.orchestrator.solve import solve_model
from solvers.orchestrator.space import SlotSpace
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveOptions, relative_gap

EXTRACT_RESERVE_S = 0.05  # kept back from the solver for extraction and accounting (small models: ms)
# Reading the solution back (PuLP's value copy, the start comparison, extraction, exact accounting) walks the
# model again: measured at ~0.1-0.15 x the build time on the 430k-column block model of 16,384 nodes (k = 3,
# TP 16 x DP 8); kept back from the solver's limit as well.
EXTRACT_SHARE = 0.2
# Handing the PuLP model to the solver walks the same rows and columns as the build: measured at 0.43 x the
# build time on the 52k-column TP 16 x DP 16 model of 1,024 nodes; kept back from the solver's limit.
HANDOVER_SHARE = 0.5
# A model build cut short by the budget is freed (millions of PuLP objects) before the warm start is returned:
# measured 1.0 s after a 26 s build at 16,384 slots (explicit model, interleaved); kept back from the build.
TEARDOWN_SHARE = 0.06
# HiGHS's MIP presolve does not check the time limit everywhere (HiGHS issues 1501, 2478): on an explicit model
# of 108k columns (1,024 nodes, a random --tor-map, TP 16 x DP 16) it spent 21.6 s under a limit of a few seconds,
# the answer coming 18 s late; with presolve off the same run ends within its limit at the same gap.  Explicit
# models that large never prove anything in the time (the bound is the slot bound's), so the MIP only polishes.
PRESOLVE_OFF_VARIABLES = 50_000
# Even with presolve off, HiGHS's root cut rounds on explicit models overran the limit: 1,024 interleaved nodes,
# TP 8 x DP 16 x PP 4 (22k columns), one round from 12.0 s to 20.7 s at a 20 s limit, 1.5-4.8 s late.  Explicit
# models this large run in a child process stopped at the limit (solvers.highs_process; ~0.25 s to start), and so
# do the other models beyond 50k columns (16,384-node block models, up to 430k), whose presolve passes took
# seconds past the limit.
HARD_LIMIT_VARIABLES = 10_000
HARD_LIMIT_ANY_VARIABLES = 50_000
MIN_SOLVE_S = 0.01  # below this the solver is not started: it could not even read the model
STATED_OVERHEAD_S = 1.0  # what a run may exceed its limit by (module docstring; measured in the benchmarks)


class BudgetSpent(Exception):
    """The time budget ran out while the model was being built."""


@dataclass(frozen=True)
class Budget:
    """A wall-clock deadline: ``limit`` seconds from ``t0`` (``time.perf_counter``), or none.

    Attributes
    ----------
    t0 : float
    limit : float or None
    """

    t0: float
    limit: float | None

    def remaining(self) -> float | None:
        """Seconds left (may be negative), None when unlimited."""
        return None if self.limit is None else self.t0 + self.limit - time.perf_counter()

    def share(self, fraction: float) -> Budget:
        """A budget of ``fraction`` of the time left, from now (unlimited when this one is)."""
        left = self.remaining()
        return Budget(time.perf_counter(), None if left is None else max(left, 0.0) * fraction)

    def spent(self) -> bool:
        """Whether the deadline has passed (never, when unlimited)."""
        left = self.remaining()
        return left is not None and left <= 0

    def check(self) -> None:
        """Raise :class:`BudgetSpent` when the deadline has passed (the build calls it between steps)."""
        if self.spent():
            raise BudgetSpent()


UNLIMITED = Budget(0.0, None)


def warm_start_result(space: SlotSpace, jobs: list[Job], greedy: Placement, model: str, why: str,
                      t0: float, t_build: float, unit: str = "node", stats: dict | None = None,
                      termination: str = "time_limit") -> OrchestrationResult:
    """The warm start as the ILP's answer when the solver did not run or found no incumbent.

    Its bound is the trivial one (0 cross-ToR bytes), so the status is
    ``optimal`` only when the warm start moves no cross-ToR bytes.  ``termination`` is in
    :data:`solvers.pulp_adapter.TERMINATIONS` terms; ``why`` says it in words (in the notes).
    """
    traffic = placement_traffic(greedy, space, jobs)
    status = "optimal" if traffic.cross_bytes <= 0 else "feasible"
    res = OrchestrationResult(status, "ilp", model, space, jobs, greedy, traffic, unit=unit, model_stats=stats,
                              termination=termination, warm_start_unimproved=True)
    res.notes.append(f"{why}: the warm start is returned with the trivial bound 0")
    res.seconds.update(build=t_build, total=time.perf_counter() - t0)
    return res


def run_ilp(space: SlotSpace, jobs: list[Job], greedy: Placement, options: SolveOptions, budget: Budget,
            build: Callable[[Budget], object], encode: Callable, extract: Callable, *, unit: str = "node"
            ) -> OrchestrationResult:
    """Build (inside ``budget``), warm-start from ``greedy``, solve with what is left, extract, account.

    Parameters
    ----------
    space : SlotSpace
    jobs : list of Job
        Resolved (stage 1).
    greedy : Placement
        The warm start (and the answer when the budget is spent before the solver runs).
    options : SolveOptions
        Its ``time_limit`` is replaced by what the budget leaves.
    budget : Budget
    build : callable
        ``build(budget) -> BuiltModel``; may raise :class:`BudgetSpent`.
    encode, extract : callable
        ``encode(built, placement) -> start``, ``extract(built) -> Placement``.
    unit : {'node', 'gpu'}
    """
    t1 = time.perf_counter()
    left = budget.remaining()
    # a build cut short is freed before the answer goes out: keep time back for that
    build_budget = budget if left is None else Budget(budget.t0, budget.limit - TEARDOWN_SHARE * max(left, 0.0))
    try:
        built = build(build_budget)
    except BudgetSpent:
        return warm_start_result(space, jobs, greedy, "-", "time limit reached during the model build", budget.t0,
                                 time.perf_counter() - t1, unit)
    except TooManyCandidates as exc:
        return warm_start_result(space, jobs, greedy, "-", f"no exact model fits this request ({exc.message})",
                                 budget.t0, time.perf_counter() - t1, unit, termination="other_limit")
    stats = built.stats()  # before the solver's limit is set: it walks the whole model (seconds at 16k nodes)
    t_build = time.perf_counter() - t1
    exact = getattr(built.data, "exact", True)
    kind = built.kind if exact else built.kind + "-restricted"
    try:
        start = encode(built, greedy)
    except (KeyError, ValueError, StopIteration):
        start = {}  # the greedy uses a ring the (restricted) model cannot express: solve without a start
    left = budget.remaining()
    reserve = EXTRACT_RESERVE_S + EXTRACT_SHARE * t_build
    if left is not None:
        left -= HANDOVER_SHARE * t_build
    if left is not None and left - reserve < MIN_SOLVE_S:
        return warm_start_result(space, jobs, greedy, kind, "time limit reached after the model build",
                                 budget.t0, t_build, unit, stats)
    opts = options if left is None else replace(options, time_limit=max(left - reserve, MIN_SOLVE_S))
    if (left is not None and built.kind == "explicit" and stats.get("variables", 0) > PRESOLVE_OFF_VARIABLES
            and "presolve" not in dict(opts.highs_options)):
        opts = replace(opts, highs_options=tuple(opts.highs_options) + (("presolve", "off"),))
    if left is not None and stats.get("variables", 0) > (HARD_LIMIT_VARIABLES if built.kind == "explicit"
                                                         else HARD_LIMIT_ANY_VARIABLES):
        opts = replace(opts, hard_limit=True)
    report = solve_model(built, opts, start)
    if not report.has_solution and report.status == "time_limit":
        res = warm_start_result(space, jobs, greedy, kind, f"{report.raw_status} (no incumbent)", budget.t0,
                                t_build, unit, stats, termination=report.termination)
        res.report = None
        return res
    if not exact:
        if not report.has_solution:
            return warm_start_result(space, jobs, greedy, kind,
                                     f"{report.raw_status} (model restricted to rings within two ToRs)", budget.t0,
                                     t_build, unit, stats, termination=report.termination)
        restriction_bound = report.bound
        report = _restricted_report(report)
    res = OrchestrationResult(report.status, "ilp", kind, space, jobs, None, None, report, built.unit_bytes,
                              stats, unit=unit, termination=report.termination)
    if not exact:
        res.restriction_bound = restriction_bound
        res.notes.append("rings that could span three ToR blocks were left out of the model: its optimum is a "
                         "feasible placement and only the trivial bound 0 is proven")
    if report.has_solution:
        placement = extract(built)
        placement.check(space)
        res.placement = placement
        res.traffic = placement_traffic(placement, space, jobs)
        warm = placement_traffic(greedy, space, jobs)
        res.warm_start_unimproved = bool(res.traffic.cross_bytes >= warm.cross_bytes * (1 - 1e-12))
        if res.traffic.cross_bytes > warm.cross_bytes * (1 + 1e-12) and report.status != "optimal":
            # the solver ran without the start (a ring its candidates express differently) and ended dearer
            obj = warm.cross_bytes / built.unit_bytes if built.unit_bytes else report.objective
            gap = relative_gap(obj, report.bound)
            res.status = "optimal" if gap == 0.0 else report.status
            res.report = replace(report, objective=obj, gap=gap, status=res.status)
            res.placement, res.traffic = greedy, warm
            res.notes.append("the solver's incumbent was dearer than the warm start: the warm start is kept")
    res.seconds.update(build=t_build, total=time.perf_counter() - budget.t0)
    return res


def _restricted_report(report):
    """A restricted model's report: its incumbent stands, its bound does not (the true optimum may be lower)."""
    obj = report.objective
    status = "optimal" if obj is not None and obj <= 0 else "feasible"
    return replace(report, status=status, bound=0.0, gap=0.0 if status == "optimal" else 1.0)
