"""The same placement objective for the other architectures: switch domains (DGX, NVL) and OCS cubes (TPUv4).

TP groups are formed inside the HBD units by the allocation policies of
:mod:`solvers.allocation` (any TP healthy GPUs of a switch domain; TP
groups inside healthy cubes), so here only the *grouping* is decided: which
TP groups form each DP group and pipeline, with the same lexicographic
objective (most GPUs in complete instances, then fewest bytes on ToR
uplinks) and the same exact accounting (:mod:`solvers.orchestrator.traffic`).

Slots are single GPUs (``g = 1``), in GPU id order.  When the ToRs are
contiguous runs of GPUs and every TP group lies in one ToR or straddles one
ToR boundary (DGX, NVL-36/72 and TPUv4 on their default Clos), the fixed TP
groups are handed to the block ILP (:mod:`~solvers.orchestrator.model_blocks`)
with their pure and straddling groups as the only choices; otherwise (e.g.
rail-optimised ToRs) to the explicit ILP with the TP groups as fixed
candidates.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from fabric.errors import FabricError
from fabric.faults import NodeIndex
from fabric.model import Fabric
from solvers.orchestrator.encode import encode_blocks, encode_explicit
from solvers.orchestrator.extract import extract_blocks, extract_explicit
from solvers.orchestrator.greedy import fill_instances
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.model_blocks import build_blocks_model
from solvers.orchestrator.model_explicit import build_explicit_model, unit_costs
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.result import OrchestrationResult
from solvers.orchestrator.rings import Blocks, Candidate, _runs
from solvers.orchestrator.run import Budget, run_ilp
from solvers.orchestrator.space import SlotSpace, check_faulty_nodes
from solvers.orchestrator.stage1 import check_fixed_counts, resolve_jobs
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveOptions

KINDS = ("switch_domain", "ocs_cube", "none")


@dataclass(frozen=True)
class FixedBlocks(Blocks):
    """A :class:`Blocks` view of TP groups that are already formed: pure groups per ToR are given."""

    pure: tuple[tuple[tuple[int, ...], ...], ...] = ()

    def pure_rings(self, t: int, bl: int, br: int) -> list[tuple[int, ...]]:
        return list(self.pure[t])


def _policy(fabric: Fabric, nodes: NodeIndex):
    kind = fabric.hbd.kind
    if kind in ("switch_domain", "none"):
        from solvers.allocation.switch_domain import SwitchDomainPolicy

        return SwitchDomainPolicy(fabric, nodes)
    if kind == "ocs_cube":
        from solvers.allocation.ocs_cube import OCSCubePolicy

        return OCSCubePolicy(fabric, nodes)
    raise FabricError("ARCH", f"the orchestrator handles k-hop lines, switch domains and OCS cubes, not {kind}")


def domain_space(fabric: Fabric, faulty_nodes) -> tuple[SlotSpace, NodeIndex, np.ndarray]:
    """Slots = GPUs in id order; healthy = not in a faulty node.  Returns (space, node index, availability)."""
    nodes = NodeIndex.of(fabric)
    faulty = check_faulty_nodes(fabric, faulty_nodes)
    gpu_ids = nodes.gpu_ids
    node_group = nodes.node_group[nodes.node_of_gpu]
    avail = ~np.isin(node_group, faulty)
    raw = fabric.group("tor")[gpu_ids]
    if np.any(raw < 0):
        raise FabricError("ARCH", f"{fabric.architecture}: every GPU needs a ToR for the orchestrator")
    tor_ids, tor = np.unique(raw, return_inverse=True)
    space = SlotSpace(gpu_ids.reshape(-1, 1), tor.astype(np.int64), tor_ids.astype(np.int64),
                      node_group.astype(np.int64), avail)
    return space, nodes, avail


def tp_groups(fabric: Fabric, tp: int, avail: np.ndarray, nodes: NodeIndex) -> list[tuple[int, ...]]:
    """TP groups the allocation policy forms on the available GPUs (GPU indices, rank order)."""
    policy = _policy(fabric, nodes)
    policy.check_tp(tp)
    groups, _, _ = policy.allocate(tp, avail, np.zeros(avail.size, dtype=bool))
    return [tuple(int(x) for x in g) for g in np.asarray(groups).reshape(-1, tp)]


def fixed_blocks(space: SlotSpace, rings: list[tuple[int, ...]], m: int) -> FixedBlocks | None:
    """The block view of fixed TP groups, or None when ToRs are not contiguous GPU runs or a group spans 3 ToRs."""
    runs = _runs(space.tor)
    tors = [r[0] for r in runs]
    if len(set(tors)) != len(tors):
        return None
    block_of_tor = {t: i for i, t in enumerate(tors)}
    T = len(runs)
    pure: list[list[tuple[int, ...]]] = [[] for _ in range(T)]
    straddle: list[dict[int, tuple[int, ...]]] = [{} for _ in range(max(T - 1, 0))]
    for ring in rings:
        bs = [block_of_tor[int(space.tor[u])] for u in ring]
        if all(b == bs[0] for b in bs):
            pure[bs[0]].append(ring)
            continue
        b0 = bs[0]
        x = sum(1 for b in bs if b == b0)
        if any(b not in (b0, b0 + 1) for b in bs) or bs != sorted(bs) or straddle[b0]:
            return None  # spans three ToRs, or not in ToR order, or a second straddle at this boundary
        straddle[b0][x] = ring
    left = tuple(t - 1 if t > 0 else None for t in range(T))
    right = tuple(t if t < T - 1 else None for t in range(T))
    cap = []
    for t in range(T):
        ls = [0] + (sorted(straddle[left[t]]) if left[t] is not None else [])
        rs = [0] + (sorted(straddle[right[t]]) if right[t] is not None else [])
        cap.append({(a, b): len(pure[t]) for a in ls for b in rs})
    members = tuple(np.array(sorted({u for r in pure[t] for u in r} |
                                    {u for b in (left[t], right[t]) if b is not None
                                     for r in straddle[b].values() for u in r if block_of_tor[int(space.tor[u])] == t}),
                             dtype=np.int64) for t in range(T))
    return FixedBlocks(m, T, False, 0, tuple(tors), members, left, right, tuple(straddle), tuple(cap),
                       space.n_slots, 1, pure=tuple(tuple(p) for p in pure))


def orchestrate_domains(fabric: Fabric, jobs: list[Job], faulty_nodes=(), *, solver: str = "ilp",
                        options: SolveOptions | None = None):
    """:func:`solvers.orchestrator.api.orchestrate` for switch-domain and OCS-cube fabrics (module docstring)."""
    t0 = time.perf_counter()
    if len(jobs) != 1:
        raise FabricError("jobs", "other architectures take one job")
    space, nodes, avail = domain_space(fabric, faulty_nodes)
    tp = jobs[0].tp
    plan_rings = tp_groups(fabric, tp, np.ones_like(avail), nodes)  # the TP groups with no fault
    check_fixed_counts(jobs, len(plan_rings))
    if solver == "fault-unaware":
        plan = resolve_jobs(jobs, len(plan_rings), int(avail.size))
        if plan is None:
            return OrchestrationResult("infeasible", solver, "-", space, list(jobs), None, None)
        full = fill_instances(plan_rings, plan)
        # a planned group survives if its GPUs are still usable by the HBD rule (an OCS cube with a
        # faulty host is out as a whole), i.e. they would be in some TP group of size 1 under the faults
        usable = {u for r in tp_groups(fabric, 1, avail, nodes) for u in r}
        alive = [all(u in usable for u in ring) for ring in full.rings]
        keep = [inst for inst in full.instances if all(alive[r] for r in inst.rings)]
        placement = Placement(full.rings, tuple(keep), ())
        placement = _drop_dead(placement, alive)
        res = OrchestrationResult("feasible", solver, "-", space, plan, placement,
                                  placement_traffic(placement, space, plan), unit="gpu")
        res.notes.append("planned on the fault-free fabric; TP groups and instances touching a faulty node dropped")
        res.seconds["total"] = time.perf_counter() - t0
        return res
    rings = tp_groups(fabric, tp, avail, nodes)
    resolved = resolve_jobs(jobs, len(rings), int(avail.sum()))
    if resolved is None:
        res = OrchestrationResult("infeasible", solver, "-", space, list(jobs), None, None, unit="gpu")
        res.notes.append(f"the fixed instance counts need more than the {len(rings)} TP groups that fit")
        return res
    greedy = fill_instances(rings, resolved)
    if solver == "greedy":
        res = OrchestrationResult("feasible", "greedy", "-", space, resolved, greedy,
                                  placement_traffic(greedy, space, resolved), unit="gpu")
        res.seconds["total"] = time.perf_counter() - t0
        return res
    return _ilp_fixed(space, rings, resolved, greedy, options or SolveOptions(time_limit=60.0), t0)


def _drop_dead(placement: Placement, alive: list[bool]) -> Placement:
    idx, rings = {}, []
    for r, ring in enumerate(placement.rings):
        if alive[r]:
            idx[r] = len(rings)
            rings.append(ring)
    inst = tuple(PlacedInstance(i.job, tuple(tuple(idx[r] for r in st) for st in i.stages))
                 for i in placement.instances)
    used = {r for i in inst for r in i.rings}
    return Placement(tuple(rings), inst, tuple(r for r in range(len(rings)) if r not in used))


def _ilp_fixed(space: SlotSpace, rings, jobs: list[Job], greedy: Placement, options: SolveOptions, t0: float):
    job = jobs[0]
    if job.dp == 1 and job.pp == 1:
        res = OrchestrationResult("optimal", "ilp", "none", space, jobs, greedy,
                                  placement_traffic(greedy, space, jobs), unit="gpu")
        res.notes.append("D = 1 and PP = 1: no DP or PP traffic, any placement with the most GPUs is optimal")
        return res
    unit, _, _ = unit_costs(jobs, 1)
    blocks = fixed_blocks(space, rings, job.tp) if job.pp == 1 else None

    def build(budget: Budget):
        if blocks is not None:
            return build_blocks_model(blocks, job.dp, job.count, unit, budget=budget)
        cands = [Candidate(r, i, 1, tuple(int(space.tor[u]) for u in r)) for i, r in enumerate(rings)]
        built = build_explicit_model(cands, [], jobs, 1, fixed=True, budget=budget)
        built.meta["tor"] = space.tor
        return built

    def encode(built, placement):
        return encode_blocks(built, placement) if blocks is not None else encode_explicit(built, placement)

    def extract(built):
        placement = extract_blocks(built) if blocks is not None else extract_explicit(built)
        # TP groups the model left out are formed anyway (spares)
        formed = set(placement.rings)
        extra = [r for r in rings if r not in formed]
        return Placement(placement.rings + tuple(extra), placement.instances,
                         placement.spare + tuple(range(len(placement.rings), len(placement.rings) + len(extra))))

    return run_ilp(space, jobs, greedy, options, Budget(t0, options.time_limit), build, encode, extract, unit="gpu")
