"""Bad arguments to solvers.orchestrator.orchestrate_summary: a FabricError naming the parameter.

Independent check: the documented contract (tp, dp, pp, count whole numbers >= 1; node ids whole numbers;
a solver time limit > 0 and a relative gap in [0, 1); bytes finite and >= 0); numpy inputs give the result
of the same Python numbers.
"""

import time

import numpy as np
import pytest

from fabric.errors import FabricError
from solvers.orchestrator import orchestrate_summary
from topologies import build

BASE = dict(tp=8, dp=2, solver="greedy", time_limit=None)


@pytest.fixture(scope="module")
def fab():
    return build("khop-ring", 64)


@pytest.mark.parametrize("kw, field", [({k: v}, k) for k in ("tp", "dp", "pp", "count")
                                       for v in ("8", True, [8], float("nan"), 2**63)]
                         + [({"faulty_nodes": v}, "faulty_nodes") for v in ([1.5], [True], "1,2", 3, [None])]
                         + [({"dp_bytes": v}, "dp_bytes") for v in ("1", [1.0], float("inf"), float("nan"), -1.0)]
                         + [({"trace": "stepfun", "trace_time": v}, "trace_time") for v in ("1", [1.0], float("nan"))]
                         + [({"node_fault_ratio": 0.1, "seed": v}, "seed") for v in ("1", -1, 1.5, float("nan"))]
                         + [({"solver": "ilp", "time_limit": v}, "time_limit")
                            for v in ("1", 0, -1.0, float("nan"), float("inf"), [1])]
                         + [({"solver": "ilp", "time_limit": 5, "gap_rel": v}, "gap_rel")
                            for v in ("0", -0.1, 1.0, float("nan"), [0.1])])
def test_orchestrate_summary_refuses(fab, kw, field):
    with pytest.raises(FabricError) as exc:
        orchestrate_summary(fab, **{**BASE, **kw})
    assert exc.value.field == field


def test_numpy_inputs_equal_python(fab):
    a = orchestrate_summary(fab, **{**BASE, "tp": np.int64(8), "dp": np.int64(2), "faulty_nodes": np.array([1, 5]),
                                    "dp_bytes": np.float64(1e9)})
    b = orchestrate_summary(fab, **{**BASE, "faulty_nodes": [1, 5], "dp_bytes": 1e9})
    assert {k: v for k, v in a.items() if k != "total_seconds"} == {k: v for k, v in b.items() if k != "total_seconds"}


@pytest.mark.parametrize("kind", ["explicit", "blocks"])
@pytest.mark.parametrize("variables, limit, user, off", [(60_000, 10.0, (), True), (1_000, 10.0, (), False),
                                                         (60_000, None, (), False), (20_000, 10.0, (), False),
                                                         (60_000, 10.0, (("presolve", "on"),), False)])
def test_large_explicit_models_solve_with_presolve_off_under_a_limit(monkeypatch, kind, variables, limit, user, off):
    """run.run_ilp: HiGHS's MIP presolve does not check the time limit everywhere, so an explicit model above
    PRESOLVE_OFF_VARIABLES is solved without it when a limit is set (and the user did not choose)."""
    import solvers.orchestrator.run as run
    from solvers.pulp_adapter import SolveOptions

    seen = {}

    class Stop(Exception):
        pass

    class Built:
        data = None

        def __init__(self):
            self.kind = kind

        def stats(self):
            return {"variables": variables}

    def solve_model(built, opts, start):
        seen["highs"] = dict(opts.highs_options)
        seen["hard"] = opts.hard_limit
        raise Stop

    monkeypatch.setattr(run, "solve_model", solve_model)
    budget = run.Budget(time.perf_counter(), limit)
    with pytest.raises(Stop):
        run.run_ilp(None, [], None, SolveOptions(time_limit=limit, highs_options=user), budget,
                    lambda b: Built(), lambda built, p: {}, None)
    assert (seen["highs"].get("presolve") == "off") == (off and kind == "explicit")
    assert variables > run.PRESOLVE_OFF_VARIABLES or not off
    # and, beyond HARD_LIMIT_VARIABLES (any model: HARD_LIMIT_ANY_VARIABLES), in a child process stopped at the
    # limit (HiGHS's cut rounds and presolve passes overran it)
    most = run.HARD_LIMIT_VARIABLES if kind == "explicit" else run.HARD_LIMIT_ANY_VARIABLES
    assert seen["hard"] == (limit is not None and variables > most)
