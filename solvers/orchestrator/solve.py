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
    if report.has_solution:
        # every objective term is a non-negative crossing count: 0 is a valid bound, and a solver bound below it
        # (none yet, or an LP bound that went negative on rounding) says less than the trivial one
        bound = 0.0 if report.bound is None else max(report.bound, 0.0)
        if report.objective is not None and bound > report.objective:
            bound = report.objective  # rounding to the lattice may overshoot by a hair: no better than the incumbent
        gap = relative_gap(report.objective, bound)
        gap = None if gap is None else min(max(gap, 0.0), 1.0)
        status = report.status
        if report.objective is not None and report.objective - bound <= opts.gap_abs:
            status = "optimal"
        report = replace(report, bound=bound, gap=gap, status=status)
    return report
