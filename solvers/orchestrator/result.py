"""The result of one orchestration and its JSON form (the object ``fabric orchestrate --json`` prints)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from solvers.orchestrator.jobs import Job
from solvers.orchestrator.placement import Placement
from solvers.orchestrator.space import SlotSpace
from solvers.orchestrator.traffic import TrafficReport


def clamp_bound(objective: float | None, bound: float | None) -> tuple[float | None, float | None]:
    """(bound, gap) with the bound raised to the trivial one (cross-ToR bytes >= 0) and the gap kept in [0, 1].

    The gap is ``(objective - bound) / objective`` (0 when both are 0): a
    lower bound never exceeds the incumbent of a minimisation, so with
    ``bound >= 0`` it lies in [0, 1]; a solver whose bound overshoots the
    incumbent by rounding is read as gap 0.
    """
    if objective is None or bound is None:
        return bound, None
    bound = min(max(float(bound), 0.0), float(objective)) if objective >= 0 else max(float(bound), 0.0)
    if objective <= 0:
        return bound, 0.0
    return bound, min(max((objective - bound) / objective, 0.0), 1.0)


@dataclass
class OrchestrationResult:
    """Everything one orchestration produced.

    Attributes
    ----------
    status : str
        ``optimal``, ``feasible`` (heuristic, or ILP not proven), ``time_limit``, ``infeasible``.
    termination : str or None
        Why the ILP stopped, in the solver's own words (HiGHS' model status,
        CBC's result line), or what stopped it before the solver ran.
    warm_start_unimproved : bool or None
        ILP only: the placement returned is the warm start (the greedy), the
        solver found nothing better (it may still have proven it optimal).
    solver : str
        ``ilp``, ``greedy``, ``fault-unaware``.
    model : str
        ILP formulation used (``blocks``, ``blocks-single``, ``explicit``, ``none``) or ``-``.
    jobs : list of Job
        With DP size and instance count resolved (stage 1).
    restriction_bound : float or None
        A restricted model's own proven bound (objective units), which holds only for the placements its
        model holds (short blocks: rings within two ToRs), not for the request; None otherwise.
    """

    status: str
    solver: str
    model: str
    space: SlotSpace
    jobs: list[Job]
    placement: Placement | None
    traffic: TrafficReport | None
    report: SolveReport | None = None
    unit_bytes: float = 0.0
    model_stats: dict | None = None
    seconds: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    unit: str = "node"
    termination: str | None = None
    warm_start_unimproved: bool | None = None
    restriction_bound: float | None = None

    @property
    def healthy_gpus(self) -> int:
        return int(self.space.healthy.sum()) * self.space.g

    @property
    def used_gpus(self) -> int:
        if self.placement is None:
            return 0
        return len(self.placement.used_rings) * self.jobs[0].tp if self.jobs else 0

    def job_summaries(self) -> list[dict]:
        """Each job's layout, instances placed and DCN bytes (``summary()["jobs"]``), in the order of the request."""
        inst = self.placement.instances if self.placement is not None else ()
        parts = self.traffic.by_job if self.traffic is not None else ()
        out = []
        for i, job in enumerate(self.jobs):
            mine = [x for x in inst if x.job == i]
            rings = sum(len(x.rings) for x in mine)
            tr = parts[i] if i < len(parts) else None
            out.append({
                "name": job.name, "tp": job.tp, "dp": job.dp, "pp": job.pp, "count": job.count,
                "instances": len(mine), "tp_groups": rings, "dp_groups": sum(len(x.stages) for x in mine),
                "used_gpus": rings * job.tp,
                "dp_bytes_per_gpu": job.bytes_dp, "pp_bytes_per_rank": job.bytes_pp,
                "dcn_bytes": tr.dcn_bytes if tr else 0.0, "cross_tor_bytes": tr.cross_bytes if tr else 0.0,
                "cross_tor_traffic_ratio": tr.ratio if tr else None,
            })
        return out

    def summary(self, placement: bool = False) -> dict:
        """The JSON object of ``fabric orchestrate``: scalars (``model_size`` one nested level), placement if asked.

        With several jobs, ``dp``, ``pp``, ``count`` and the bytes per GPU / rank are None at the top and
        ``jobs`` lists each job's (:meth:`job_summaries`); the totals (instances, GPUs, bytes) cover all jobs.

        ``objective`` / ``bound`` are bytes per step on ToR uplinks (the ILP's
        incumbent and proven bound; for a baseline the objective is its
        accounted cross bytes and the bound is None); ``gpu_utilization`` =
        GPUs in complete instances / healthy GPUs; ``cross_tor_traffic_ratio``
        = cross-ToR bytes / DCN bytes (:mod:`solvers.orchestrator.traffic`);
        ``*_seconds`` are wall times (they differ between runs, nothing else does):
        ``build_seconds`` the model build, ``solve_seconds`` the solver,
        ``total_seconds`` the whole orchestration; ``termination`` is the
        solver's own reason for stopping and ``warm_start_unimproved`` says
        whether the result is the greedy warm start unchanged.
        """
        inst = self.placement.instances if self.placement is not None else ()
        tr = self.traffic.to_dict() if self.traffic is not None else {
            "dcn_bytes": 0.0, "cross_tor_bytes": 0.0, "dp_bytes": 0.0, "dp_cross_tor_bytes": 0.0,
            "pp_bytes": 0.0, "pp_cross_tor_bytes": 0.0, "cross_tor_traffic_ratio": None,
            "tors_per_dp_group_mean": None, "tors_per_dp_group_max": None}
        rep = self.report
        scale = self.unit_bytes
        objective = bound = gap = None
        if rep is not None and rep.has_solution and self.traffic is not None:
            # the incumbent is the placement returned, whose bytes the accounting counts exactly; the solver's
            # own objective value carries its feasibility tolerance (HiGHS returned 2.6e-05 bytes for a
            # placement that crosses no ToR, with a bound of 0 and a gap of 0)
            objective = self.traffic.cross_bytes
            if rep.gap == 0.0 or self.status == "optimal":  # proved (at the solver's tolerance): bound = incumbent
                bound, gap = objective, 0.0
            else:
                bound, gap = clamp_bound(objective, rep.bound * scale if rep.bound is not None else 0.0)
        elif rep is not None and rep.has_solution:
            objective = rep.objective * scale if rep.objective is not None else None
            bound = rep.bound * scale if rep.bound is not None else None
            gap = rep.gap  # the adapter keeps the bound in [0, incumbent] and the gap in [0, 1] (solve_model)
        elif self.traffic is not None:
            objective = self.traffic.cross_bytes
            if self.solver == "ilp":  # the warm start kept without a solver incumbent: only the trivial bound
                bound, gap = clamp_bound(objective, 0.0)
        if self.model == "none" and self.traffic is not None:
            objective, bound, gap = 0.0, 0.0, 0.0
        # one job: its layout at the top; several: None there (no one job's DP size stands for the rest), each
        # job's own in "jobs"
        job = self.jobs[0] if len(self.jobs) == 1 else None
        out = {
            "solver": self.solver, "model": self.model, "status": self.status,
            "objective": objective, "bound": bound, "gap": gap,
            "solve_seconds": rep.seconds if rep is not None else 0.0,
            "build_seconds": self.seconds.get("build", 0.0), "total_seconds": self.seconds.get("total", 0.0),
            "mip_solver": rep.solver if rep is not None else None,
            "termination": self.termination,
            "warm_start_unimproved": self.warm_start_unimproved,
            "tp": self.jobs[0].tp if self.jobs else None,  # one TP for all jobs (stage1.check_jobs)
            "dp": job.dp if job else None, "pp": job.pp if job else None,
            "instances": len(inst),
            "tp_groups": sum(len(i.rings) for i in inst),
            "dp_groups": sum(len(i.stages) for i in inst),
            "spare_tp_groups": len(self.placement.spare) if self.placement is not None else 0,
            "gpus": int(self.space.gpus.size), "healthy_gpus": self.healthy_gpus, "used_gpus": self.used_gpus,
            "gpu_utilization": self.used_gpus / self.healthy_gpus if self.healthy_gpus else 0.0,
            "faulty_nodes": int(np.unique(self.space.node[~self.space.healthy]).size),
            **tr,
            "count": job.count if job else None,
            "dp_bytes_per_gpu": job.bytes_dp if job else None,
            "pp_bytes_per_rank": job.bytes_pp if job else None,
            # the default bytes model's source when any job's bytes come from it
            "bytes_model": next(filter(None, (j.to_dict()["bytes_model"] for j in self.jobs)), None),
            "model_size": self.model_stats or {},  # {} when no MIP ran (the bound proved the warm start)
            "notes": "; ".join(self.notes),
        }
        if len(self.jobs) > 1:  # one job's object stays flat (scalars): its layout is the top level's
            out["jobs"] = self.job_summaries()
        if placement and self.placement is not None:
            out["placement"] = self.placement.to_dict(self.space, self.unit)
            if len(self.jobs) > 1:  # each instance says whose it is by name too, as "jobs" lists them
                for inst in out["placement"]["instances"]:
                    inst["job_name"] = self.jobs[inst["job"]].name
        return out
