"""HiGHS in a child process (solvers.highs_process): the in-process answer when it finishes, the last feasible
incumbent when it is stopped at the limit, an error (not a hang) when it dies."""

import sys
import textwrap

import pulp
import pytest

import solvers.highs_process as hp
from solvers.pulp_adapter import SolveOptions, solve
from tests.solvers.test_pulp_adapter import covering, knapsack


def _values(x):
    return [round(v.varValue) for v in x]


@pytest.mark.parametrize("make", [lambda: knapsack(sense=pulp.LpMaximize), lambda: knapsack(sense=pulp.LpMinimize),
                                  lambda: covering(n=25, m=25)], ids=["max", "min", "cover"])
@pytest.mark.parametrize("warm", [False, True])
def test_the_child_gives_the_in_process_answer(make, warm):
    """Exact: the same HiGHS on the same arrays, options and start, run to optimality (deterministic)."""
    answers = []
    for hard in (False, True):
        p, x = make()
        p.setObjective(p.objective + 7)  # a constant: the offset travels with the model
        start = {v: 0 for v in x} if warm and p.sense == pulp.LpMaximize else None
        r = solve(p, SolveOptions(time_limit=60, hard_limit=hard), start)
        answers.append((r.status, r.objective, r.bound, r.termination, _values(x), pulp.value(p.objective)))
    assert answers[0] == answers[1]
    assert answers[0][0] == "optimal"


FAKE = '''
import os, pickle, sys, time
import numpy as np
request = pickle.load(sys.stdin.buffer)
out = os.fdopen(int(sys.argv[1]), "wb")
n = len(request["model"]["cost"])
for x in {sent}:
    pickle.dump(("incumbent", np.array(x, dtype=float)), out); out.flush()
sys.exit({code}) if {code} is not None else time.sleep(120)
'''


def _fake_child(monkeypatch, tmp_path, sent: str, code=None):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(FAKE.format(sent=sent, code=code)))
    monkeypatch.setattr(hp, "CHILD", str(script))


def test_a_child_past_its_limit_is_stopped_and_its_last_feasible_incumbent_kept(monkeypatch, tmp_path):
    """A child that never answers (sleeps 120 s) is killed at the limit plus the grace. Of the incumbents it sent,
    the last one (all items packed) breaks the knapsack's capacity, so the one before (nothing packed) is the
    answer: objective 0 + 7, no dual bound from HiGHS (the trivial bound, the sum of the values, stands)."""
    _fake_child(monkeypatch, tmp_path, "[[0.0] * n, [1.0] * n]")
    p, x = knapsack()
    p.setObjective(p.objective + 7)
    r = solve(p, SolveOptions(time_limit=0.2, hard_limit=True))
    assert r.has_solution and r.status == "feasible" and r.termination == "time_limit"
    assert r.raw_status == hp.STOPPED
    assert r.objective == 7 and _values(x) == [0] * len(x)
    assert r.bound == sum(c for c in p.objective.values()) + 7  # the trivial bound of a maximisation
    assert r.gap == pytest.approx(1 - 7 / r.bound)


def test_a_child_stopped_without_an_incumbent_reports_the_time_limit(monkeypatch, tmp_path):
    _fake_child(monkeypatch, tmp_path, "[[1.0] * n]")  # nothing feasible was sent
    p, x = knapsack()
    r = solve(p, SolveOptions(time_limit=0.2, hard_limit=True))
    assert not r.has_solution and r.status == "time_limit" and r.termination == "time_limit"


def test_a_child_that_dies_is_an_error_not_a_hang(monkeypatch, tmp_path):
    _fake_child(monkeypatch, tmp_path, "[]", code=3)
    p, x = knapsack()
    r = solve(p, SolveOptions(time_limit=600, hard_limit=True))
    assert r.status == "error" and not r.has_solution
    assert "exit 3" in r.raw_status


def test_without_a_limit_the_solve_stays_in_process(monkeypatch):
    """hard_limit needs a time limit to stop at: without one the in-process solver runs (no child started)."""
    def no_child(self):
        raise AssertionError("a child process was started")

    monkeypatch.setattr(hp.ChildHighs, "run", no_child)
    p, x = knapsack()
    assert solve(p, SolveOptions(hard_limit=True)).status == "optimal"


def test_the_child_script_imports_nothing_of_the_project():
    """It runs in a fresh interpreter from its path: the project need not be importable there."""
    source = open(hp.CHILD).read()
    assert "from solvers" not in source and "from fabric" not in source and "import fabric" not in source
    assert sys.executable
