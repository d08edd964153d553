"""One RL design point: phase times, OCS circuits per epoch, iteration time, samples/s and per dollar.

:func:`evaluate_rl` is the importable evaluation behind ``fabric rl`` (and
the sweep metric).  Steps:

1. Pools: the training pool is the first ``train_fraction`` of the nodes in
   HBD order, the generation pool the rest (disaggregated: on a fat-tree the
   two pools sit in different ToRs and, at scale, different pods).
2. Output lengths (seeded), the trainer's parallelism (the fewest pipeline
   stages that fit), the rollout replicas.
3. Every phase's flows (:mod:`workloads.rl.traffic`) and, per epoch of the
   pipeline (:mod:`workloads.rl.pipeline`), the pod-to-pod matrix.
4. On a Fabric with OCS between aggregation and core: circuits per epoch.
   The solver (:func:`solvers.circuits.assign_circuits`) gives the best
   circuits for each epoch (phases that run together weighted by the rate
   they need, see :func:`_plan_circuits`) and for the whole iteration's
   traffic (the starting point, and what a fabric that never re-wires would
   hold: the least worst slowdown of any epoch against its own best).  Going
   round the iteration twice (the second time is the steady state), at each
   epoch the fabric re-wires only if the predicted time saved exceeds the
   reconfiguration plus settle time (:func:`solvers.circuits.should_rewire`),
   and the plan is kept only if, over the whole iteration with every re-wire
   paying that time, it beats holding the starting circuits throughout.
   The prediction is the analytic bound: the configuration-independent part
   (NICs, ToR uplinks) and the pod-level time under the circuits.
5. Phase times on the Fabric under each epoch's circuits: generation
   (:mod:`workloads.rl.generation`), weight sync by the flow simulator
   (:mod:`workloads.rl.network`), training by the MFU step model.
6. Iteration time (plus re-wiring overhead), samples/s, capex
   (:func:`fabric.cost.cost_of`) and samples/s per million dollars.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from fabric.catalog import Catalog, load_catalog
from fabric.checks import is_number
from fabric.cost import cost_of
from fabric.errors import FabricError
from fabric.model import Configuration, Fabric, Layer
from solvers.circuits import (Assignment, assign_circuits, assignment_of, configuration_for, ocs_layout,
                              predicted_time, should_rewire)
from workloads.comm import CommCache, analytic_comm_time, default_backend
from workloads.models import ModelSpec
from workloads.placement import RankPlacement
from workloads.rl import pipeline as pipe
from workloads.rl.config import RLConfig
from workloads.rl.generation import generation_flows, generation_phase, plan_replica, replicas
from workloads.rl.lengths import file_lengths, lognormal_lengths
from workloads.rl.network import Timer, analytic_time, capacity_view
from workloads.rl.traffic import Flows, pod_matrix
from workloads.rl.training import plan_training, pools, training_flows, training_phase
from workloads.rl.weightsync import plan_sync
from workloads.step import gpu_of


@dataclass
class RLResult:
    """One RL design point (times in seconds, money in USD).

    Attributes
    ----------
    architecture : str
    gpus : int
    pipeline : str
    phases : dict
        ``generation``, ``weight_sync``, ``training`` -> seconds.
    iteration_s : float
    samples_per_s : float
    capex_usd : float
    samples_per_s_per_musd : float
        Samples per second per million dollars of capex.
    reconfigurations : int
        OCS re-wirings per iteration (steady state).
    reconfiguration_overhead_s : float
    reconfiguration_time_s, settle_time_s : float
    timing : str
        ``sim`` or ``analytic`` (:mod:`workloads.rl.network`).
    details : dict
        Pools, generation, weight sync, training and per-epoch circuit details.
    notes : list of str
    """

    architecture: str
    gpus: int
    pipeline: str
    phases: dict[str, float]
    iteration_s: float
    samples_per_s: float
    capex_usd: float
    samples_per_s_per_musd: float
    reconfigurations: int
    reconfiguration_overhead_s: float
    reconfiguration_time_s: float
    settle_time_s: float
    timing: str
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"architecture": self.architecture, "gpus": self.gpus, "pipeline": self.pipeline,
                "phases": dict(self.phases), "iteration_s": self.iteration_s, "samples_per_s": self.samples_per_s,
                "capex_usd": self.capex_usd, "samples_per_s_per_musd": self.samples_per_s_per_musd,
                "reconfigurations": self.reconfigurations,
                "reconfiguration_overhead_s": self.reconfiguration_overhead_s,
                "reconfiguration_time_s": self.reconfiguration_time_s, "settle_time_s": self.settle_time_s,
                "timing": self.timing, **self.details, "notes": list(self.notes)}


def reconfiguration_time_of(fabric: Fabric, catalog: Catalog) -> float:
    """The catalog ``reconfiguration_time`` of the Fabric's OCS (0 without OCS)."""
    items = sorted({line.item for line in fabric.bom if line.category == "ocs"})
    if not items:
        return 0.0
    return max(catalog.value(i, "reconfiguration_time") for i in items)


def has_ocs_core(fabric: Fabric) -> bool:
    """The Fabric has OCS ports between aggregation and core (its circuits can be re-assigned)."""
    return fabric.has_ocs_ports(Layer.DCN)


def sample_lengths(cfg: RLConfig) -> np.ndarray:
    """Output lengths of the iteration's samples (from ``lengths_file`` or the lognormal)."""
    if cfg.lengths_file:
        return file_lengths(cfg.lengths_file, cfg.samples, cfg.max_tokens, cfg.seed)
    return lognormal_lengths(cfg.samples, cfg.output_median, cfg.output_sigma, cfg.max_tokens, cfg.seed)


def evaluate_rl(fabric: Fabric, model: ModelSpec, cfg: RLConfig, catalog: Catalog | None = None, *,
                reconfiguration_time: float | None = None, timing: str = "sim") -> RLResult:
    """Evaluate one RL iteration on ``fabric`` (see the module docstring).

    Parameters
    ----------
    fabric : Fabric
        A DGX-style Fabric (``dgx``) or an ``rfabric``; the circuits of an
        rfabric are assigned per epoch, any other Fabric keeps its configuration.
    model : ModelSpec
    cfg : RLConfig
    catalog : Catalog, optional
    reconfiguration_time : float, optional
        OCS reconfiguration time, seconds; default the catalog's for the
        Fabric's OCS (Palomar: 1.2 ms median).
    timing : {'sim', 'analytic'}
        How flows and collectives are timed (:mod:`workloads.rl.network`).

    Returns
    -------
    RLResult
    """
    # long: the six numbered steps of one iteration share their intermediates (pools, lengths, flows,
    # circuits, the per-phase estimate and the Fabric per epoch, both closures over them)
    cat = catalog or load_catalog()
    timer = Timer(timing)
    backend = default_backend() if timing == "sim" else analytic_comm_time
    if reconfiguration_time is not None and not (is_number(reconfiguration_time) and
                                                 0 <= reconfiguration_time < float("inf")):
        raise FabricError("reconfiguration_time", f"{reconfiguration_time!r} must be a time >= 0")
    rt = reconfiguration_time_of(fabric, cat) if reconfiguration_time is None else float(reconfiguration_time)
    gpu = gpu_of(fabric, cat)
    notes: list[str] = []

    # 1-2. pools, lengths, parallelism, replicas
    train_devs, gen_devs = pools(fabric, cfg.train_fraction)
    lengths = sample_lengths(cfg)
    m_train, par, tnotes = plan_training(fabric, model, cfg, train_devs.size, float(lengths.mean()), cat)
    notes += tnotes
    tp_g, pp_g = plan_replica(model, gpu, cfg, gen_devs.size, fabric.hbd.gpus_per_node)
    reps = replicas(gen_devs, tp_g, pp_g)
    pl = RankPlacement(fabric, par)

    # 3. flows of every phase, traffic per epoch
    sync_plan = plan_sync(cfg.sync, model, cfg.gen_bytes_per_param, pl.grid[:, :, 0, :], reps)
    flows = {"generation": generation_flows(reps, model, lengths), "weight_sync": sync_plan.flows,
             "training": training_flows(fabric, m_train, par, cfg.train_steps)}
    ep = pipe.epochs(cfg.pipeline)

    # 4. circuits per epoch; a phase's duration estimate (analytic, on the built circuits) weighs
    # concurrent phases by urgency
    estimates: dict[str, float] = {}

    def estimate(phase: str) -> float:
        if phase not in estimates:
            if phase == "weight_sync":
                estimates[phase] = analytic_time(fabric, flows[phase], include_pods=False)
            elif phase == "training":
                estimates[phase] = training_phase(fabric, m_train, par, cfg.train_steps, cat,
                                                  analytic_comm_time).time_s
            else:
                estimates[phase] = generation_phase(fabric, model, gpu, cfg, gen_devs, lengths,
                                                    CommCache(fabric, analytic_comm_time)).time_s
            estimates[phase] = max(estimates[phase], 1e-9)
        return estimates[phase]

    configs, epoch_info, n_rewire = _plan_circuits(fabric, flows, cfg, rt, estimate)
    fabrics: dict[int, Fabric] = {}

    def fab(k: int) -> Fabric:
        c = configs[k]
        key = id(c)
        if key not in fabrics:
            fabrics[key] = fabric if c is fabric.configuration else fabric.with_configuration(c)
        return fabrics[key]

    where = {p: [k for k, e in enumerate(ep) if p in e] for p in pipe.PHASES}

    # 5. phase times under each epoch's circuits
    gk = where["generation"][0]
    gen = generation_phase(fab(gk), model, gpu, cfg, gen_devs, lengths, CommCache(fab(gk), backend))
    notes += gen.notes
    sk = where["weight_sync"][0]
    if sync_plan.schedule == "p2p":
        background = None
        if "training" in ep[sk] and len(flows["training"]):
            # the trainer keeps communicating while it sends (async): its traffic of the sync's window
            # loads the same links, on any fabric
            share = min(estimate("weight_sync") / estimate("training"), 1.0)
            background = flows["training"].scaled(share)
            notes.append(f"weight sync timed with the concurrent training traffic ({share:.1%} of the phase's "
                         "bytes)")
        sync_s = timer.flows(fab(sk), sync_plan.flows, background)
    else:
        sync_s = timer.broadcasts(fab(sk), sync_plan.chains, sync_plan.shard_bytes, cfg.sync_chunks)
    trains = {}
    for k in where["training"]:
        key = id(configs[k])
        if key not in trains:
            trains[key] = training_phase(fab(k), m_train, par, cfg.train_steps, cat, backend)
    train = max(trains.values(), key=lambda r: r.time_s)
    if not train.fits:
        notes.append("training does not fit in HBM: " + "; ".join(train.notes))
    phases = {"generation": gen.time_s, "weight_sync": sync_s, "training": train.time_s}

    # 6. iteration, throughput, money
    overhead = n_rewire * (rt + cfg.settle_time)
    iteration = pipe.iteration_time(cfg.pipeline, phases, overhead)
    n_pods = int(pod_matrix(fabric, Flows.empty()).shape[0])
    if has_ocs_core(fabric) and n_pods < 2:
        notes.append("one pod: the OCS between aggregation and core carries no traffic (use more GPUs or a "
                     "smaller -p k)")
    capex = cost_of(fabric, cat).capex_usd
    if not capex > 0:  # samples/s per $M is what RL compares: a free cluster ended in a ZeroDivisionError
        raise FabricError("catalog", f"prices every part of the {fabric.architecture} cluster at $0, so samples/s "
                                     "per $M is undefined; give the parts a price")
    sps = cfg.samples / iteration if iteration > 0 else float("inf")
    details = {
        "pools": {"train_gpus": int(train_devs.size), "gen_gpus": int(gen_devs.size),
                  "pods": n_pods},
        "generation": gen.to_dict(),
        "weight_sync": {"schedule": sync_plan.schedule, "bytes": sync_plan.bytes_total,
                        "bytes_per_param": cfg.gen_bytes_per_param, "replicas": int(reps.shape[0]),
                        "cross_pod_bytes": float(pod_matrix(fabric, sync_plan.flows).sum()),
                        "time_s": sync_s},
        "training": train.to_dict(),
        "epochs": epoch_info,
    }
    return RLResult(fabric.architecture, fabric.n_gpus, cfg.pipeline, phases, iteration, sps, capex,
                    sps / (capex / 1e6), n_rewire, overhead, rt, cfg.settle_time, timing, details, notes)


def _plan_circuits(fabric: Fabric, flows: dict[str, Flows], cfg: RLConfig, rt: float,
                   estimate: Callable[[str], float]) -> tuple[list[Configuration], list[dict], int]:
    """Configuration per epoch, what was decided, and re-wirings per steady-state iteration.

    An epoch's demand for the solver is the sum of its phases' pod-to-pod
    bytes each divided by the phase's duration estimate (``estimate(phase)``,
    asked only when two phases of one epoch cross pods), so that concurrent
    phases get circuits by the rate they need, not by their byte totals: a
    weight sync that must finish in a fraction of a second outranks the
    gradient traffic spread over a long training phase.  The predicted time
    of a phase under an assignment is ``max(intra, T_p * s)``: its
    configuration-independent bound (NICs, ToR uplinks) or its duration
    stretched by the pod-level load of the epoch's demand, ``s``
    (:func:`solvers.circuits.predicted_time` of the rate matrix).  With one
    phase per epoch this is the pod-level transfer time of its bytes.  The
    epoch's prediction, which the re-wiring rule compares, sums its phases'.
    """
    ep = pipe.epochs(cfg.pipeline)
    D = {p: pod_matrix(fabric, f) for p, f in flows.items()}
    if not has_ocs_core(fabric):
        info = [{"phases": list(e), "cross_pod_bytes": float(sum(D[p].sum() for p in e)), "rewired": False}
                for e in ep]
        return [fabric.configuration] * len(ep), info, 0
    n = len(ep)
    layout = ocs_layout(fabric)
    ports = layout.ports
    view = capacity_view(fabric)
    crossing = [[p for p in e if D[p].sum() > 0] for e in ep]
    intra = {p: analytic_time(fabric, flows[p], view, include_pods=False) for e in crossing for p in e}
    scale = {p: (estimate(p) if len(e) > 1 else 1.0) for e in crossing for p in e}
    rate = [sum((D[p] / scale[p] for p in e), np.zeros_like(D["training"])) for e in crossing]
    realised: dict[Assignment, tuple[Configuration, Assignment]] = {}

    def realise(a: Assignment) -> tuple[Configuration, Assignment]:
        if a not in realised:
            realised[a] = configuration_for(fabric, a, layout)
        return realised[a]

    def predicted(k: int, a: Assignment) -> float:
        if not crossing[k]:
            return 0.0
        stretch = predicted_time(rate[k], a, ports)
        return float(sum(max(intra[p], scale[p] * stretch) for p in crossing[k]))

    def solve(demand: np.ndarray, what: str):
        r = assign_circuits(demand, ports, time_limit=cfg.circuit_time_limit)
        if r.status == "infeasible":
            raise FabricError("rfabric", f"no circuit assignment carries {what}: " + "; ".join(r.notes))
        return r

    best = [solve(R, "an epoch's traffic") for R in rate]
    # the circuits held when the fabric does not re-wire: every epoch's demand relative to its own best
    union = solve(sum((R / b.time_s for R, b in zip(rate, best) if b.time_s > 0), np.zeros_like(rate[0])),
                  "the iteration's traffic")
    start_state = realise(union.assignment) if union.status != "trivial" else \
        (fabric.configuration, assignment_of(fabric, layout=layout))
    chosen: list[tuple[Configuration, Assignment]] = [start_state] * n
    rewired, gains = [False] * n, [0.0] * n
    # go round twice: the second round starts from where the first ended (the steady state)
    for cycle in range(2):
        state = chosen[-1] if cycle else start_state
        for k in range(n):
            rewired[k], gains[k] = False, 0.0
            if best[k].status != "trivial":
                cand = realise(best[k].assignment)
                t_cur, t_new = predicted(k, state[1]), predicted(k, cand[1])
                gains[k] = t_cur - t_new
                if cand[1] != state[1] and should_rewire(t_cur, t_new, rt, cfg.settle_time):
                    state, rewired[k] = cand, True
            chosen[k] = state
    # Each epoch's choice is local; over the whole iteration, re-wiring must also beat holding the
    # start circuits throughout, once every re-wire pays its reconfiguration and settle time.
    planned = sum(predicted(k, chosen[k][1]) for k in range(n)) + sum(rewired) * (rt + cfg.settle_time)
    held = sum(predicted(k, start_state[1]) for k in range(n))
    if any(rewired) and held <= planned:
        chosen, rewired = [start_state] * n, [False] * n
    info = []
    for k, e in enumerate(ep):
        a = chosen[k][1]
        b = realise(best[k].assignment)[1] if best[k].status != "trivial" else a
        info.append({"phases": list(e), "cross_pod_bytes": float(sum(D[p].sum() for p in e)),
                     "rewired": rewired[k], "predicted_gain_s": gains[k], "predicted_s": predicted(k, a),
                     "predicted_best_s": predicted(k, b), "circuit_status": best[k].status,
                     "circuit_termination": best[k].termination, "circuit_gap": best[k].gap, "direct_circuits_per_plane": int(np.triu(a.direct, 1).sum()),
                     "core_circuits_per_plane": int(a.core.sum())})
    return [c for c, _ in chosen], info, int(sum(rewired))
