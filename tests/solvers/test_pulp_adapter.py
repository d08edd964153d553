"""The one PuLP adapter: solver choice, true status (never PuLP's word), bound, gap, warm start, logs off stdout."""

import random

import pulp
import pytest

from fabric.errors import FabricError
from solvers.pulp_adapter import SolveOptions, SolveReport, _round_bound, available_solvers, choose_solver, solve

SOLVERS = available_solvers()


def knapsack(n=40, seed=1, sense=pulp.LpMaximize):
    rng = random.Random(seed)
    p = pulp.LpProblem("knap", sense)
    x = [pulp.LpVariable(f"x{i}", cat=pulp.LpBinary) for i in range(n)]
    w = [rng.randint(10, 99) for _ in range(n)]
    v = [rng.randint(10, 99) for _ in range(n)]
    sign = 1 if sense == pulp.LpMaximize else -1
    p += pulp.lpSum(sign * v[i] * x[i] for i in range(n))
    p += pulp.lpSum(w[i] * x[i] for i in range(n)) <= sum(w) // 3
    return p, x


def covering(n=300, m=250, seed=2):
    """A covering problem no solver closes in a fraction of a second (for time-limit statuses)."""
    rng = random.Random(seed)
    p = pulp.LpProblem("cover", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x{i}", lowBound=0, upBound=3, cat=pulp.LpInteger) for i in range(n)]
    p += pulp.lpSum(rng.randint(50, 99) * x[i] for i in range(n))
    for j in range(m):
        p += pulp.lpSum(rng.randint(0, 30) * x[i] for i in rng.sample(range(n), 12)) >= rng.randint(100, 300)
    return p, x


def test_highs_is_the_default():
    assert "highs" in SOLVERS
    assert choose_solver("auto") == "highs"


def test_unknown_or_bad_options_are_bad_input():
    with pytest.raises(FabricError, match="mip_solver"):
        choose_solver("gurobi")
    p, _ = knapsack()
    with pytest.raises(FabricError, match="time_limit"):
        solve(p, SolveOptions(time_limit=0))


@pytest.mark.parametrize("name", SOLVERS)
@pytest.mark.parametrize("sense", [pulp.LpMaximize, pulp.LpMinimize])
def test_optimal_with_bound_equal_objective(name, sense):
    p, _ = knapsack(sense=sense)
    r = solve(p, SolveOptions(solver=name))
    assert r.status == "optimal" and r.has_solution
    assert abs(abs(r.objective) - 1535) < 1e-6  # the optimum of this instance (both senses, both solvers)
    assert r.bound == pytest.approx(r.objective) and r.gap == 0.0
    assert abs(pulp.value(p.objective) - r.objective) < 1e-6


@pytest.mark.parametrize("name", SOLVERS)
def test_infeasible(name):
    p, x = knapsack()
    p += x[0] + x[1] >= 3
    r = solve(p, SolveOptions(solver=name))
    assert r.status == "infeasible" and not r.has_solution and r.objective is None


@pytest.mark.parametrize("name", SOLVERS)
def test_time_limit_with_incumbent_is_feasible_not_optimal(name):
    """PuLP calls this "Optimal"; the adapter reads the bound and says feasible, with the gap."""
    p, x = covering()
    start = {v: 3 for v in x}  # feasible (every covering row is met at the upper bounds)
    r = solve(p, SolveOptions(solver=name, time_limit=0.3), start=start)
    assert pulp.LpStatus[p.status] == "Optimal"  # what PuLP says ...
    assert r.status == "feasible"  # ... and what was proven
    assert r.has_solution and r.bound is not None and r.bound < r.objective
    assert 0 < r.gap <= 1


def test_time_limit_without_incumbent():
    p, _ = covering(n=400, m=350, seed=5)
    r = solve(p, SolveOptions(solver="highs", time_limit=0.01))
    assert r.status in ("time_limit", "feasible")
    if r.status == "time_limit":
        assert not r.has_solution and r.objective is None


def test_stopping_at_a_relative_gap_is_not_called_optimal():
    p, _ = covering()
    r = solve(p, SolveOptions(solver="highs", gap_rel=0.2, time_limit=20))
    assert r.has_solution
    if r.gap > 1e-9:
        assert r.status == "feasible"  # HiGHS says "Optimal" at its gap tolerance


def test_objective_step_rounds_the_bound_up():
    p, _ = knapsack(sense=pulp.LpMinimize)
    raw = SolveReport("feasible", "highs", True, 10.0, 9.2, 0.08, 0.1, "Time limit reached")
    r = _round_bound(raw, p, SolveOptions(objective_step=1.0))
    assert r.bound == 10 and r.status == "optimal" and r.gap == 0.0
    r = _round_bound(raw, p, SolveOptions())
    assert r.status == "feasible" and r.bound == 9.2


@pytest.mark.parametrize("name", SOLVERS)
def test_partial_warm_start(name):
    p, x = knapsack()
    r = solve(p, SolveOptions(solver=name), start={x[0]: 1, x[1]: 0})
    assert r.status == "optimal" and r.warm_start


def test_solver_log_goes_to_stderr_not_stdout(capfd):
    p, _ = knapsack()
    r = solve(p, SolveOptions(solver="highs", msg=True))
    out, err = capfd.readouterr()
    assert r.status == "optimal"
    assert out == ""
    assert "HiGHS" in err


@pytest.mark.parametrize("name", SOLVERS)
def test_nothing_reaches_stdout_even_with_the_log_off(name, capfd):
    """highspy 1.16 prints its banner on fd 1 with ``msg=False``: the adapter routes fd 1 to stderr."""
    p, _ = knapsack()
    r = solve(p, SolveOptions(solver=name, msg=False))
    out, _ = capfd.readouterr()
    assert r.status == "optimal" and out == ""


@pytest.mark.parametrize("name", SOLVERS)
def test_termination_says_why_the_solver_stopped(name):
    p, x = knapsack()
    assert solve(p, SolveOptions(solver=name)).termination == "optimal"
    p, x = covering()
    r = solve(p, SolveOptions(solver=name, time_limit=0.3), start={v: 3 for v in x})
    assert r.status == "feasible" and r.termination == "time_limit"
    p, x = knapsack()
    p += x[0] + x[1] >= 3
    assert solve(p, SolveOptions(solver=name)).termination == "infeasible"


def test_thread_count_changes_within_one_process():
    """Regression: a default-thread HiGHS solve, then ``threads=1``, then default again, all optimal."""
    for threads in (None, 1, None, 2, 1):
        p, _ = knapsack(seed=3)
        r = solve(p, SolveOptions(solver="highs", threads=threads))
        assert r.status == "optimal" and r.termination == "optimal", (threads, r.raw_status)


def test_trivial_bound_is_exact_on_small_cases():
    """The best objective the variable bounds alone allow, against enumeration of the box corners."""
    from itertools import product

    from solvers.pulp_adapter import trivial_bound

    p = pulp.LpProblem("t", pulp.LpMinimize)
    a, b, c = (pulp.LpVariable("a", 0, 3), pulp.LpVariable("b", -2, 5), pulp.LpVariable("c", 1, 4))
    p += 2 * a - 3 * b + c + 7
    corners = [2 * x - 3 * y + z + 7 for x, y, z in product((0, 3), (-2, 5), (1, 4))]
    assert trivial_bound(p) == min(corners)
    p.sense = pulp.LpMaximize
    assert trivial_bound(p) == max(corners)
    p += a >= 0  # constraints do not matter; an unbounded variable in the objective does
    q = pulp.LpProblem("u", pulp.LpMinimize)
    q += pulp.LpVariable("free") + a
    assert trivial_bound(q) is None


def test_a_bound_beyond_the_trivial_bound_is_clamped_and_gap_stays_in_unit_interval():
    """Seen with HiGHS: a bound of -2e12 on a sum of non-negative counts (gap 1.009)."""
    p, _ = knapsack(sense=pulp.LpMinimize)  # objective -sum(v x): trivial bound -sum(v)
    from solvers.pulp_adapter import trivial_bound

    floor = trivial_bound(p)
    raw = SolveReport("feasible", "highs", True, -1000.0, -2e12, None, 0.1, "Time limit reached")
    r = _round_bound(raw, p, SolveOptions())
    assert r.bound == floor and 0 <= r.gap <= 1
    # a bound past the incumbent (tolerance noise) is the incumbent: proven optimal
    raw = SolveReport("feasible", "highs", True, -1000.0, -999.9999999, None, 0.1, "Optimal")
    r = _round_bound(raw, p, SolveOptions())
    assert r.status == "optimal" and r.gap == 0.0


def test_gap_of_a_maximisation_is_at_most_one():
    from solvers.pulp_adapter import relative_gap

    assert relative_gap(10.0, 1000.0) == pytest.approx(0.99)
    assert relative_gap(0.0, 5.0) == 1.0 and relative_gap(0.0, 0.0) == 0.0
    assert relative_gap(-1.0, 1.0) == 1.0


@pytest.mark.parametrize("name", SOLVERS)
def test_warm_start_unimproved_is_reported(name):
    p, x = covering()
    start = {v: 3 for v in x}
    r = solve(p, SolveOptions(solver=name, time_limit=20), start=start)
    assert r.start_objective == pytest.approx(sum(c * 3 for _, c in p.objective.items()))
    assert r.warm_start_unimproved is False  # 20 s is plenty to beat "everything at its upper bound"
    p, x = knapsack()
    r = solve(p, SolveOptions(solver=name), start={x[0]: 1})
    assert r.start_objective is None  # a partial start has no known objective


def test_with_the_log_off_nothing_reaches_stderr_either(capfd):
    """msg=False: the solver's banner and log go nowhere (a sweep's stderr carries progress, not banners)."""
    p, _ = knapsack()
    solve(p, SolveOptions(solver="highs", msg=False))
    out, err = capfd.readouterr()
    assert out == "" and "HiGHS" not in err


def test_a_known_bound_is_never_undercut():
    """The caller's knowledge (e.g. bytes >= 0) tightens a bound the variables' own bounds cannot give."""
    p, _ = knapsack(sense=pulp.LpMinimize)  # trivial bound -sum(v): far below the caller's -1200 here
    raw = SolveReport("feasible", "highs", True, -1000.0, -2e12, None, 0.1, "Time limit reached")
    r = _round_bound(raw, p, SolveOptions(known_bound=-1200.0))
    assert r.bound == -1200.0 and r.gap == pytest.approx(200 / 1200)


def test_a_constant_objective_still_solves_and_the_variable_listing_is_restored():
    """The solve lists the problem's variables once (PuLP walks every constraint per call); a feasibility
    problem (constant objective, to which PuLP adds a dummy variable while solving) must still solve, and
    ``problem.variables`` is PuLP's own method again afterwards."""
    import pulp as _pulp

    from solvers.pulp_adapter import SolveOptions as _Opts
    from solvers.pulp_adapter import solve as _solve
    for objective in (3, "x"):
        prob = _pulp.LpProblem("feas", _pulp.LpMinimize)
        x = _pulp.LpVariable("x", 0, 4, cat="Integer")
        if objective == "x":
            prob += x
        elif objective is not None:
            prob += _pulp.LpAffineExpression(constant=objective)
        prob += x >= 2
        rep = _solve(prob, _Opts(time_limit=10))
        assert rep.status == "optimal" and x.varValue >= 2 - 1e-9
        assert "variables" not in vars(prob)
