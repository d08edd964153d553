"""HBD-DCN orchestrator: TP rings and DP groups on a faulty fabric, most GPUs first, then least cross-ToR traffic.

Three steps, as in PyPSA: :func:`~solvers.orchestrator.model.build_model`
(a PuLP problem that tests can inspect), :func:`~solvers.orchestrator.solve.solve_model`
(through :mod:`solvers.pulp_adapter`), and the extractors of
:mod:`~solvers.orchestrator.extract`.  :func:`orchestrate` runs them (or a
baseline) and :func:`orchestrate_summary` returns the JSON object of
``fabric orchestrate``.  The traffic accounting is in
:mod:`~solvers.orchestrator.traffic`.
"""

from solvers.orchestrator.api import orchestrate, orchestrate_summary
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.stage1 import resolve_jobs
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.traffic import TrafficReport, placement_traffic

__all__ = ["Job", "OrchestrationResult", "PlacedInstance", "Placement", "TrafficReport", "orchestrate",
           "orchestrate_summary", "placement_traffic", "resolve_jobs"]
