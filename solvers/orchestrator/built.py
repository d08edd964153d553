"""A built (not yet solved) placement ILP: the PuLP problem plus handles to its variable families."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pulp


@dataclass
class BuiltModel:
    """The output of a build step.

    Attributes
    ----------
    kind : str
        ``blocks``, ``blocks-single`` or ``explicit``.
    problem : pulp.LpProblem
        A minimisation; its objective is in *units* of ``unit_bytes`` bytes.
    var : dict
        Variable family name -> {index tuple: LpVariable}.
    unit_bytes : float
        Bytes on ToR uplinks per objective unit (0 when the objective is 0 by construction).
    objective_step : float or None
        The objective only takes multiples of this (lets the dual bound be rounded up).
    data : Any
        What extraction needs (the block view, the candidates, the jobs).
    """

    kind: str
    problem: pulp.LpProblem
    var: dict[str, dict]
    unit_bytes: float
    objective_step: float | None
    data: Any = None
    meta: dict = field(default_factory=dict)

    def stats(self) -> dict[str, int]:
        """Counts of the built problem (what tests inspect without solving)."""
        vs = self.problem.variables()
        ints = [v for v in vs if v.cat == pulp.LpInteger]
        binary = [v for v in ints if v.lowBound == 0 and v.upBound == 1]
        return {"variables": len(vs), "integer": len(ints), "binary": len(binary),
                "constraints": len(self.problem.constraints)}

    def value(self, family: str, key, default: float = 0.0) -> float:
        v = self.var.get(family, {}).get(key)
        if v is None or v.varValue is None:
            return default
        return float(v.varValue)

    def ivalue(self, family: str, key) -> int:
        return int(round(self.value(family, key)))
