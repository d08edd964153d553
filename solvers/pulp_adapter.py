"""The one PuLP adapter: solver choice, time limit, warm start, and the *true* solve status.

Every ILP of the project is solved through :func:`solve`.  It

* picks the solver: HiGHS (``pulp.HiGHS``, the highspy API) by default, CBC
  (``pulp.PULP_CBC_CMD``) as the fallback when highspy is missing, or
  whichever the caller names;
* applies a time limit, a relative gap at which to stop, and a thread count
  (with ``hard_limit``, HiGHS runs in a child process stopped at the limit:
  :mod:`solvers.highs_process`);
* passes a warm start (a possibly *partial* assignment of variables: HiGHS
  and CBC both try to complete it);
* reports what the solver really proved.  PuLP 3.x maps "time limit reached
  with an incumbent" to ``LpStatusOptimal``, and HiGHS calls a solve that
  stopped at ``mip_rel_gap`` "optimal" too, so the status word is never
  trusted: the adapter reads the solver's own model status, its incumbent and
  its dual bound, and derives the status from them.

Statuses (:data:`STATUSES`)
---------------------------
``optimal``
    The incumbent is proven optimal: the gap between it and the dual bound
    is within ``gap_abs`` (and ``1e-9`` relative).
``feasible``
    An incumbent exists but optimality is not proven (time limit, or the
    solver stopped at the requested ``gap_rel``); ``gap`` says how far.
``time_limit``
    The time limit passed before any incumbent was found.
``infeasible``, ``unbounded``
    As proven by the solver.
``error``
    The solver failed; ``raw_status`` says how.

Solver output never reaches stdout: file descriptor 1 points at stderr (log on,
``msg``) or /dev/null (log off) for the whole solve (highspy 1.16 prints its
banner on stdout even with the log off, and stdout belongs to the JSON a
command prints).

Beside ``status`` (what was *proved*), every report carries ``termination``
(:data:`TERMINATIONS`: why the solver *stopped*, in its own terms), so that a
user can act: ``feasible`` + ``time_limit`` means "give it more time",
``feasible`` + ``gap_limit`` means "you asked for this gap".

Bounds are kept honest: a reported bound never lies beyond the objective's
*trivial bound* (the best the objective could be given only the variables'
bounds, e.g. 0 for a sum of non-negative crossing counts) nor beyond the
incumbent, so ``gap`` is always in [0, 1].

HiGHS keeps one thread scheduler per process: once a solve has run with one
thread count, a solve that asks for another fails with "Not Set" (highspy
1.16) unless the scheduler is reset first.  :func:`solve` resets it whenever
the thread count changes.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from typing import Iterator, Mapping

import pulp

from fabric.checks import real, whole
from fabric.errors import FabricError

SOLVERS = ("highs", "cbc")
STATUSES = ("optimal", "feasible", "time_limit", "infeasible", "unbounded", "error")
#: Why a solver stopped: proved optimality (within the requested gap), ran out of time, stopped at the
#: requested relative gap, proved infeasibility / unboundedness, hit another limit, or failed.
TERMINATIONS = ("optimal", "time_limit", "gap_limit", "infeasible", "unbounded", "other_limit", "error")
_REL_TOL = 1e-9


@dataclass(frozen=True)
class SolveOptions:
    """How to solve.

    Attributes
    ----------
    solver : {'auto', 'highs', 'cbc'}
        ``auto``: HiGHS when available, else CBC.
    time_limit : float, optional
        Seconds of solver wall time (model building not included).
    gap_rel : float
        Stop when the relative gap is at most this (0: prove optimality).
    gap_abs : float
        Absolute gap under which the incumbent counts as optimal.
    objective_step : float, optional
        The objective only takes multiples of this value (integral model):
        the dual bound is rounded up to the next multiple, which is still a
        valid bound and often closes the gap.
    threads : int, optional
    msg : bool
        Show the solver log (on stderr).
    highs_options : tuple of (name, value)
        Extra HiGHS options (ignored by CBC).
    known_bound : float, optional
        A bound on the optimum that the caller knows from the model's meaning (a lower bound when
        minimising), e.g. 0 for bytes that cannot be negative when the variables' own bounds do not
        show it.  The reported bound is never weaker than this nor than :func:`trivial_bound`.
    hard_limit : bool
        With HiGHS and a ``time_limit``: solve in a child process that is stopped at the limit (plus
        :data:`solvers.highs_process.GRACE_S`), its last incumbent kept, because HiGHS runs some steps
        for seconds past its limit (:mod:`solvers.highs_process`).  Costs a process start and a copy of
        the model (~0.1-0.3 s): for large models only.
    """

    solver: str = "auto"
    time_limit: float | None = None
    gap_rel: float = 0.0
    gap_abs: float = 1e-6
    objective_step: float | None = None
    threads: int | None = None
    msg: bool = False
    highs_options: tuple[tuple[str, object], ...] = ()
    known_bound: float | None = None
    hard_limit: bool = False

    def __post_init__(self):
        # checked here, not only when a solver is called: many requests are settled without one (a line DP
        # proves the warm start optimal), and a misspelt solver must not pass unnoticed there
        if self.solver != "auto" and self.solver not in SOLVERS:
            raise FabricError("mip_solver", f"{self.solver!r} not allowed; use one of auto, {', '.join(SOLVERS)}")
        # NaN, a negative limit or gap reached the solver as options it reads in its own way (or not at all)
        if self.time_limit is not None:
            real(self.time_limit, "time_limit", 0.0, lo_open=True, unit="seconds; None for no limit")
        real(self.gap_rel, "gap_rel", 0.0, 1.0, hi_open=True)
        if self.threads is not None:
            whole(self.threads, "threads", 1)


@dataclass(frozen=True)
class SolveReport:
    """What a solve proved.

    Attributes
    ----------
    status : str
        One of :data:`STATUSES`.
    solver : str
        ``highs`` or ``cbc``.
    has_solution : bool
        Variable values hold an incumbent.
    objective : float or None
        Incumbent objective (problem sense).
    bound : float or None
        Best proven bound on the optimum (a lower bound when minimising).
    gap : float or None
        ``|objective - bound| / max(|objective|, 1e-9)``; 0 when both are 0.
    seconds : float
        Solver wall time.
    raw_status : str
        The solver's own status text.
    warm_start : bool
        A start was passed to the solver.
    termination : str
        One of :data:`TERMINATIONS`: why the solver stopped.
    start_objective : float or None
        Objective of the warm start, when it fixes every objective variable.
    warm_start_unimproved : bool
        The incumbent is no better than the warm start (the solver found nothing better in its time).
    """

    status: str
    solver: str
    has_solution: bool
    objective: float | None
    bound: float | None
    gap: float | None
    seconds: float
    raw_status: str
    warm_start: bool = False
    termination: str = "error"
    start_objective: float | None = None
    warm_start_unimproved: bool = False

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def available_solvers() -> list[str]:
    """The solvers of :data:`SOLVERS` that work here, preferred first."""
    names = set(pulp.listSolvers(onlyAvailable=True))
    out = []
    if "HiGHS" in names:
        out.append("highs")
    if "PULP_CBC_CMD" in names:
        out.append("cbc")
    return out


def choose_solver(name: str = "auto") -> str:
    """Resolve ``auto`` and check that the named solver is available.

    Raises
    ------
    FabricError
        Unknown or unavailable solver.
    """
    avail = available_solvers()
    if name == "auto":
        if not avail:
            raise FabricError("mip_solver", "no MIP solver available: install highspy (or PuLP's bundled CBC)")
        return avail[0]
    if name not in SOLVERS:
        raise FabricError("mip_solver", f"{name!r} not allowed; use one of auto, {', '.join(SOLVERS)}")
    if name not in avail:
        raise FabricError("mip_solver", f"{name} is not available here (available: {', '.join(avail) or 'none'})")
    return name


@contextlib.contextmanager
def solver_stdout_elsewhere(quiet: bool = False) -> Iterator[None]:
    """Send file descriptor 1 to stderr (or, ``quiet``, to /dev/null) while a C solver may print.

    At the descriptor level, not ``sys.stdout``: HiGHS and CBC write from C, and stdout belongs
    to the JSON a command prints.  With the log off (``quiet``) even the banner highspy 1.16
    prints on every process's first solve is dropped, so it does not clutter a sweep's stderr.
    """
    sys.stdout.flush()
    saved = os.dup(1)
    target = os.open(os.devnull, os.O_WRONLY) if quiet else None
    try:
        os.dup2(2 if target is None else target, 1)
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        if target is not None:
            os.close(target)


def solve(problem: pulp.LpProblem, options: SolveOptions = SolveOptions(),
          start: Mapping[pulp.LpVariable, float] | None = None) -> SolveReport:
    """Solve ``problem`` in place (variable values hold the incumbent) and report the true status.

    Parameters
    ----------
    problem : pulp.LpProblem
    options : SolveOptions
    start : mapping of LpVariable to float, optional
        Warm start; may cover only some variables (the solver completes it).

    Returns
    -------
    SolveReport
    """
    name = choose_solver(options.solver)
    if options.time_limit is not None and not options.time_limit > 0:
        raise FabricError("time_limit", f"{options.time_limit} must be > 0 seconds")
    with solver_stdout_elsewhere(quiet=not options.msg), _variables_listed_once(problem):
        if name == "highs":
            report = _solve_highs(problem, options, start)
            if start and not _values_match(report, problem, options):
                # HiGHS 1.16 can end "Optimal" with the objective of its true optimum while handing back the
                # start's columns (a presolve that empties the problem; cf. HiGHS#907): the placement read
                # from them was the warm start's, reported optimal at a bound it does not reach.  The solve
                # without the start returns its own point.
                left = None if options.time_limit is None else max(options.time_limit - report.seconds, 1.0)
                spent = report.seconds
                report = _solve_highs(problem, replace(options, time_limit=left), None)
                report = replace(report, seconds=spent + report.seconds, warm_start=True)
            if not _values_match(report, problem, options):  # still not the point it reports: believe the point
                report = replace(report, objective=float(pulp.value(problem.objective)),
                                 gap=relative_gap(float(pulp.value(problem.objective)), report.bound))
        else:
            report = _solve_cbc(problem, options, start)
        report = _round_bound(report, problem, options)
        return _compare_with_start(report, problem, options, start)


def _values_match(report: SolveReport, problem: pulp.LpProblem, options: SolveOptions) -> bool:
    """The incumbent's objective equals the objective of the variable values handed back (within the gaps)."""
    if not report.has_solution or report.objective is None:
        return True
    got = pulp.value(problem.objective)
    if got is None:
        return False
    return abs(float(got) - report.objective) <= options.gap_abs + 1e-7 * max(abs(report.objective), 1.0)


@contextlib.contextmanager
def _variables_listed_once(problem: pulp.LpProblem) -> Iterator[None]:
    """``problem.variables()`` walks every constraint each call (PuLP); the solve calls it several times.

    The problem does not change while it is solved, so one walk serves them all (on a 1.6M-nonzero
    model each walk took seconds, after the solver's time limit as well as before it).
    """
    if problem.objective is None or problem.objective.isNumericalConstant():
        yield  # PuLP's solve adds a dummy variable to a constant objective: leave the listing live
        return
    listed = problem.variables()
    problem.variables = lambda: listed  # an instance attribute shadows the method for this solve only
    try:
        yield
    finally:
        del problem.variables


# ------------------------------------------------------------------------------------------ status logic
def relative_gap(obj: float | None, bound: float | None) -> float | None:
    """``|obj - bound| / max(|obj|, |bound|, 1e-9)`` (in [0, 1]), 0 when they coincide, None when unknown.

    The denominator is the larger magnitude (as HiGHS and Gurobi define their gap), so that a
    maximisation whose bound is far above a small incumbent still reports at most 1.
    """
    if obj is None or bound is None or not (math.isfinite(obj) and math.isfinite(bound)):
        return None
    diff = abs(obj - bound)
    if diff <= 1e-12:
        return 0.0
    return min(1.0, diff / max(abs(obj), abs(bound), 1e-9))


def trivial_bound(problem: pulp.LpProblem) -> float | None:
    """The best objective value the variables' own bounds allow (None when unbounded that way).

    Minimising: ``const + sum(c * (lb if c > 0 else ub))``; maximising the mirror image.  Any
    proven bound weaker than this is a solver artefact (HiGHS reported -2e12 on a sum of
    non-negative counts), so :func:`solve` never reports one.
    """
    minimise = problem.sense == pulp.LpMinimize
    total = float(problem.objective.constant or 0.0)
    for v, c in problem.objective.items():
        if c == 0:
            continue
        use_low = (c > 0) == minimise
        b = v.lowBound if use_low else v.upBound
        if b is None:
            return None
        total += c * b
    return total


def _proven(obj: float | None, bound: float | None, options: SolveOptions) -> bool:
    if obj is None or bound is None:
        return False
    return abs(obj - bound) <= options.gap_abs + _REL_TOL * max(abs(obj), 1.0)


def _round_bound(report: SolveReport, problem: pulp.LpProblem, options: SolveOptions) -> SolveReport:
    """Clamp the bound between the trivial bound and the incumbent, round it to the objective lattice,
    and re-derive the status from incumbent and bound."""
    if not report.has_solution or report.status in ("infeasible", "unbounded", "error"):
        return report
    minimise = problem.sense == pulp.LpMinimize
    bound = report.bound
    trivial = trivial_bound(problem)
    known = options.known_bound
    if known is not None:
        trivial = known if trivial is None else (max(trivial, known) if minimise else min(trivial, known))
    if bound is None or not math.isfinite(bound):
        bound = trivial
    elif trivial is not None:
        bound = max(bound, trivial) if minimise else min(bound, trivial)
    step = options.objective_step
    if bound is not None and step:
        q = bound / step
        q = math.ceil(q - 1e-6) if minimise else math.floor(q + 1e-6)
        bound = q * step
    obj = report.objective
    if bound is not None and obj is not None:  # a bound beyond the incumbent is tolerance noise
        bound = min(bound, obj) if minimise else max(bound, obj)
    status = "optimal" if _proven(obj, bound, options) else "feasible"
    return replace(report, status=status, bound=bound, gap=relative_gap(obj, bound))


def _compare_with_start(report: SolveReport, problem: pulp.LpProblem, options: SolveOptions,
                        start: Mapping[pulp.LpVariable, float] | None) -> SolveReport:
    """Record the warm start's objective and whether the incumbent failed to improve on it."""
    if not start:
        return report
    values = {v.name: float(x) for v, x in start.items()}
    terms = list(problem.objective.items())
    if any(v.name not in values for v, c in terms if c != 0):
        return report  # a partial start: its objective is not known
    start_obj = float(problem.objective.constant or 0.0) + sum(c * values[v.name] for v, c in terms)
    unimproved = (report.has_solution and report.objective is not None and report.status != "optimal"
                  and abs(report.objective - start_obj) <= options.gap_abs + _REL_TOL * max(abs(start_obj), 1.0))
    return replace(report, start_objective=start_obj, warm_start_unimproved=bool(unimproved))


# ------------------------------------------------------------------------------------------ HiGHS
class _HiGHS(pulp.HiGHS):
    """``pulp.HiGHS`` plus a (partial) warm start set between building the model and running it."""

    def __init__(self, start: Mapping[pulp.LpVariable, float] | None = None, isolate: bool = False, **kw):
        super().__init__(**kw)
        self._start = start
        self._isolate = isolate  # solve in a child process stopped at the time limit (solvers.highs_process)
        self.seconds = 0.0

    def createAndConfigureSolver(self, lp):
        if not self._isolate:
            super().createAndConfigureSolver(lp)
            return
        from solvers.highs_process import ChildHighs

        # PuLP's own configuration (pulp.HiGHS.createAndConfigureSolver), on the stand-in
        lp.solverModel = h = ChildHighs()
        if not self.msg:
            h.setOptionValue("output_flag", False)
        for name, value in (("mip_rel_gap", self.gapRel), ("mip_abs_gap", self.gapAbs), ("threads", self.threads),
                            ("time_limit", None if self.timeLimit is None else float(self.timeLimit))):
            if value is not None:
                h.setOptionValue(name, value)
        for name, value in self.optionsDict.items():
            h.setOptionValue(name, value)

    def buildSolverModel(self, lp):
        """Pass the whole model to HiGHS at once (PuLP adds it column by column and row by row: slow at 50k columns)."""
        arrays = _model_arrays(lp, self.mip)
        if self._isolate:
            lp.solverModel.pass_arrays(arrays)
        else:
            from solvers.highs_process import highs_lp

            lp.solverModel.passModel(highs_lp(arrays))

    def callSolver(self, lp):
        if self._start:
            import numpy as np

            items = [(v.index, float(x)) for v, x in self._start.items() if getattr(v, "index", None) is not None]
            if items:
                idx = np.array([i for i, _ in items], dtype=np.int32)
                val = np.array([x for _, x in items], dtype=np.float64)
                lp.solverModel.setSolution(len(items), idx, val)
        t0 = time.perf_counter()
        lp.solverModel.run()
        self.seconds = time.perf_counter() - t0


def _model_arrays(lp: pulp.LpProblem, mip: bool) -> dict:
    """The model as the arrays of a row-wise ``HighsLp``, the objective in HiGHS's sense (minimise)."""
    import highspy
    import numpy as np

    inf = highspy.kHighsInf
    sense = -1.0 if lp.sense == pulp.LpMaximize else 1.0
    variables = lp.variables()
    n = len(variables)
    cost = np.zeros(n)
    lower = np.full(n, -inf)
    upper = np.full(n, inf)
    integer = np.zeros(n, dtype=bool)
    for i, v in enumerate(variables):
        v.index = i
        if v.lowBound is not None:
            lower[i] = v.lowBound
        if v.upBound is not None:
            upper[i] = v.upBound
        integer[i] = v.cat == pulp.LpInteger and mip
    for v, c in lp.objective.items():
        cost[v.index] = sense * c
    starts, index, value, rlo, rhi = [0], [], [], [], []
    for i, con in enumerate(lp.constraints.values()):
        con.index = i
        for v, c in con.items():
            if c != 0:
                index.append(v.index)
                value.append(c)
        starts.append(len(index))
        lo, hi = con.getLb(), con.getUb()
        rlo.append(-inf if lo is None else lo)
        rhi.append(inf if hi is None else hi)
    return {"cost": cost, "col_lower": lower, "col_upper": upper, "integer": integer,
            "row_lower": np.array(rlo, dtype=float), "row_upper": np.array(rhi, dtype=float),
            "starts": np.array(starts, dtype=np.int32), "index": np.array(index, dtype=np.int32),
            "value": np.array(value, dtype=float), "offset": sense * float(lp.objective.constant or 0.0)}


_highs_threads: list = []  # the thread count HiGHS's process-wide scheduler was last started with


def _use_highs_threads(threads: int | None) -> None:
    """Reset HiGHS's global scheduler when a solve asks for another thread count than the last one.

    HiGHS starts one task scheduler per process on its first solve; a later solve with another
    ``threads`` option then fails ("Not Set" in highspy 1.16, a warning before).  Resetting it
    between solves is what HiGHS documents (``Highs.resetGlobalScheduler``).
    """
    import highspy

    want = int(threads or 0)
    if _highs_threads and _highs_threads[0] != want:
        reset = getattr(highspy.Highs, "resetGlobalScheduler", None)
        if reset is not None:
            reset(True)
    _highs_threads[:] = [want]


def _highs_termination(ms) -> str:
    import highspy

    S = highspy.HighsModelStatus
    table = {S.kOptimal: "optimal", S.kTimeLimit: "time_limit", S.kInfeasible: "infeasible",
             S.kUnbounded: "unbounded", S.kUnboundedOrInfeasible: "infeasible"}
    if ms in table:
        return table[ms]
    limits = ("kIterationLimit", "kSolutionLimit", "kObjectiveBound", "kObjectiveTarget", "kInterrupt",
              "kMemoryLimit")
    if any(getattr(S, name, None) == ms for name in limits):
        return "other_limit"
    return "error"


def _solve_highs(problem: pulp.LpProblem, options: SolveOptions,
                 start: Mapping[pulp.LpVariable, float] | None) -> SolveReport:
    import highspy

    kw = {"msg": options.msg, "timeLimit": options.time_limit, "gapRel": max(options.gap_rel, _REL_TOL),
          "gapAbs": options.gap_abs}
    if options.threads:
        kw["threads"] = options.threads
    kw.update(dict(options.highs_options))
    isolate = options.hard_limit and options.time_limit is not None
    if not isolate:
        _use_highs_threads(options.threads)  # the child process starts its own scheduler
    solver = _HiGHS(start=start, isolate=isolate, **kw)
    problem.solve(solver)
    h = problem.solverModel
    ms = h.getModelStatus()
    raw = h.modelStatusToString(ms)
    info = h.getInfo()
    S = highspy.HighsModelStatus
    sense = -1.0 if problem.sense == pulp.LpMaximize else 1.0  # pulp hands HiGHS the negated objective
    has = info.primal_solution_status == 2  # kSolutionStatusFeasible
    obj = bound = None
    if has:
        obj = sense * float(info.objective_function_value)
        b = float(info.mip_dual_bound) if _is_mip(problem) else float(info.objective_function_value)
        bound = sense * b if math.isfinite(b) else None
    termination = _highs_termination(ms)
    if termination == "optimal" and has and options.gap_rel > 0:
        gap = relative_gap(obj, bound)
        if gap is not None and gap > _REL_TOL:
            termination = "gap_limit"  # HiGHS calls a stop at mip_rel_gap "optimal"
    if ms == S.kInfeasible:
        status = "infeasible"
    elif ms in (S.kUnbounded, S.kUnboundedOrInfeasible):
        status = "unbounded" if ms == S.kUnbounded else "infeasible"
    elif has:
        status = "feasible"  # refined by _round_bound from incumbent and bound
    elif ms == S.kTimeLimit:
        status = "time_limit"
    else:
        status = "error"
    return SolveReport(status, "highs", has, obj, bound, relative_gap(obj, bound), solver.seconds, raw,
                       bool(start), termination)


def _is_mip(problem: pulp.LpProblem) -> bool:
    return any(v.cat == pulp.LpInteger for v in problem.variables())


# ------------------------------------------------------------------------------------------ CBC
_CBC_RESULT = re.compile(r"^Result - (.+)$", re.M)
_CBC_OBJ = re.compile(r"^Objective value:\s+(\S+)", re.M)
_CBC_BOUND = re.compile(r"^(?:Lower|Upper) bound:\s+(\S+)", re.M)  # printed in the problem's sense
_CBC_BEST_POSSIBLE = re.compile(r"best possible (-?[0-9.eE+-]+)")
_CBC_TIME = re.compile(r"^Time \(Wallclock seconds\):\s+(\S+)", re.M)


def _solve_cbc(problem: pulp.LpProblem, options: SolveOptions,
               start: Mapping[pulp.LpVariable, float] | None) -> SolveReport:
    if start:
        for v in problem.variables():
            v.varValue = None
        for v, x in start.items():
            v.varValue = float(x)
    with tempfile.TemporaryDirectory(prefix="fabric-cbc-") as tmp:
        log_path = os.path.join(tmp, "cbc.log")
        kw = {"msg": False, "timeLimit": options.time_limit, "gapRel": options.gap_rel, "gapAbs": options.gap_abs,
              "warmStart": bool(start), "logPath": log_path}
        if options.threads:
            kw["threads"] = options.threads
        t0 = time.perf_counter()
        try:
            problem.solve(pulp.PULP_CBC_CMD(**kw))
        except pulp.PulpSolverError as exc:
            return SolveReport("error", "cbc", False, None, None, None, time.perf_counter() - t0, str(exc),
                               bool(start))
        seconds = time.perf_counter() - t0
        log = open(log_path).read() if os.path.exists(log_path) else ""
    if options.msg:
        sys.stderr.write(log)
    m = _CBC_RESULT.search(log)
    raw = m.group(1).strip() if m else pulp.LpStatus[problem.status]
    low = raw.lower()
    t = _CBC_TIME.search(log)
    seconds = float(t.group(1)) if t else seconds
    termination = _cbc_termination(low)
    if "infeasible" in low:
        return SolveReport("infeasible", "cbc", False, None, None, None, seconds, raw, bool(start), termination)
    if "unbounded" in low:
        return SolveReport("unbounded", "cbc", False, None, None, None, seconds, raw, bool(start), termination)
    has = problem.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible)
    if not has:
        status = "time_limit" if "time" in low else "error"
        return SolveReport(status, "cbc", False, None, None, None, seconds, raw, bool(start), termination)
    obj = pulp.value(problem.objective)
    obj = float(obj) if obj is not None else 0.0
    b = _CBC_BOUND.search(log)
    if b:
        bound = float(b.group(1))
    elif "optimal" in low and "gap" not in low:
        bound = obj  # proven optimal: CBC prints no separate bound
    else:
        # stopped at the gap tolerance: the last "best possible" of the progress lines
        # (CBC's internal sense is minimisation; flip for a maximisation problem)
        found = _CBC_BEST_POSSIBLE.findall(log)
        bound = float(found[-1]) if found else None
        if bound is not None and problem.sense == pulp.LpMaximize:
            bound = -bound
    return SolveReport("feasible", "cbc", True, obj, bound, relative_gap(obj, bound), seconds, raw, bool(start),
                       termination)


def _cbc_termination(low: str) -> str:
    """CBC's ``Result -`` line in :data:`TERMINATIONS` terms."""
    if "infeasible" in low:
        return "infeasible"
    if "unbounded" in low:
        return "unbounded"
    if "time" in low:
        return "time_limit"
    if "gap" in low:
        return "gap_limit"
    if "optimal" in low:
        return "optimal"
    if "stopped" in low or "limit" in low:
        return "other_limit"
    return "error"
