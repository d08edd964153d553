"""Solve step: a built model through the one PuLP adapter, warm-started, with the model's objective lattice."""

from __future__ import annotations

from dataclasses import replace

import pulp

from solvers.orchestrator.built import BuiltModel
from solvers.pulp_adapter import SolveOptions, SolveReport, relative_gap, solve


def solve_model(model: BuiltModel, options: SolveOptions = SolveOptions(),
                start: dict[pulp.LpVariable, float] | None = None) -> SolveReport:
    """Solve ``model.problem`` in place; objective and bound stay in model units (see ``model.unit_bytes``)."""
    opts = options
    if model.objective_step and opts.objective_step is None:
        # integral objective: an absolute gap below one step is a proof of optimality
        opts = replace(opts, objective_step=model.objective_step,
                       gap_abs=max(opts.gap_abs, 0.5 * model.objective_step))
    report = solve(model.problem, opts, start or None)
    if report.has_solution and report.bound is None:
        # every objective term is a non-negative crossing count: 0 is a valid bound when the solver has none yet
        report = replace(report, bound=0.0, gap=relative_gap(report.objective, 0.0))
    return report
