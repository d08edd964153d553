"""Solve step: a built model through the one PuLP adapter, warm-started, with the model's objective lattice."""

from __future__ import annotations

from dataclasses import replace

import pulp

from solvers.orchestrator.built import BuiltModel
from solvers.pulp_adapter import SolveOptions, SolveReport, solve


def solve_model(model: BuiltModel, options: SolveOptions = SolveOptions(),
                start: dict[pulp.LpVariable, float] | None = None) -> SolveReport:
    """Solve ``model.problem`` in place; objective and bound stay in model units (see ``model.unit_bytes``).

    Every objective term is a non-negative crossing count, so 0 is a valid lower bound even where the
    model's variable bounds do not show it (the explicit model has negative coefficients): the adapter
    is told so (``known_bound``, or the caller's own ``options.known_bound`` when higher, e.g. the line
    DP's bound of :mod:`solvers.orchestrator.line_bound`), and keeps the bound in [0, incumbent] and
    the gap in [0, 1].
    """
    opts = replace(options, known_bound=max(0.0, options.known_bound or 0.0))
    if model.objective_step and opts.objective_step is None:
        # integral objective: an absolute gap below one step is a proof of optimality
        opts = replace(opts, objective_step=model.objective_step,
                       gap_abs=max(opts.gap_abs, 0.5 * model.objective_step))
    return solve(model.problem, opts, start or None)
