"""Exact DCN traffic accounting of a placement: bytes per step, and the bytes that cross ToR uplinks.

Only DP and PP traffic use the DCN; TP traffic stays in the HBD (the ring).
Every GPU has its own NIC under one ToR (``tor_of_gpu``).

DP (per instance, per stage ``p``, per TP rank ``j``)
    The ``D`` GPUs holding rank ``j`` of the stage's ``D`` rings all-reduce
    ``S = dp_bytes`` with a ring all-reduce (reduce-scatter + all-gather).
    Every member sends ``2 (D - 1) / D * S`` to its ring successor, so the
    DP group's rank ``j`` moves ``2 (D - 1) S`` bytes in total.  The ring is
    ordered by ToR: if its members sit under ``T`` distinct ToRs, exactly
    ``T`` of its ``D`` hops go from one ToR to another when ``T > 1`` (none
    when ``T = 1``), each carrying ``2 (D - 1) / D * S`` up a ToR uplink.
    Hence cross bytes = ``phi(T) * 2 (D - 1) / D * S`` with ``phi(1) = 0``
    and ``phi(T) = T`` otherwise.  ``D = 1`` moves nothing.
PP (per instance, per pipeline ``r``, per stage boundary ``p -> p+1``, per TP rank ``j``)
    Rank ``j`` of ring ``stages[p][r]`` and rank ``j`` of ring
    ``stages[p+1][r]`` exchange ``pp_bytes`` (forward activations and
    backward gradients together); all of it crosses when their ToRs differ.

``cross_tor_traffic_ratio`` = (DP + PP cross bytes) / (DP + PP bytes), the
share of DCN bytes that leave a ToR; 0 when the placement moves no DCN bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solvers.orchestrator.jobs import Job
from solvers.orchestrator.placement import Placement
from solvers.orchestrator.space import SlotSpace


def phi(t: np.ndarray) -> np.ndarray:
    """ToR-crossing hops of a ring all-reduce over ``t`` distinct ToRs: 0 for one ToR, ``t`` otherwise."""
    t = np.asarray(t)
    return np.where(t > 1, t, 0)


@dataclass(frozen=True)
class TrafficReport:
    """Bytes per training step of a placement.

    Attributes
    ----------
    dp_bytes, pp_bytes : float
        All DCN bytes of DP all-reduces and PP send/recv.
    dp_cross_bytes, pp_cross_bytes : float
        The part of each on ToR uplinks.
    tors_per_dp_group : tuple of int
        Distinct ToRs under the GPUs of each DP group.
    by_job : tuple of TrafficReport
        The same for each job's instances alone, in the order of the request (empty in a per-job report).
    """

    dp_bytes: float
    pp_bytes: float
    dp_cross_bytes: float
    pp_cross_bytes: float
    tors_per_dp_group: tuple[int, ...]
    by_job: tuple["TrafficReport", ...] = ()

    @property
    def dcn_bytes(self) -> float:
        return self.dp_bytes + self.pp_bytes

    @property
    def cross_bytes(self) -> float:
        return self.dp_cross_bytes + self.pp_cross_bytes

    @property
    def ratio(self) -> float:
        return self.cross_bytes / self.dcn_bytes if self.dcn_bytes > 0 else 0.0

    def to_dict(self) -> dict:
        t = np.asarray(self.tors_per_dp_group, dtype=float)
        return {
            "dcn_bytes": self.dcn_bytes, "cross_tor_bytes": self.cross_bytes,
            "dp_bytes": self.dp_bytes, "dp_cross_tor_bytes": self.dp_cross_bytes,
            "pp_bytes": self.pp_bytes, "pp_cross_tor_bytes": self.pp_cross_bytes,
            "cross_tor_traffic_ratio": self.ratio,
            "tors_per_dp_group_mean": float(t.mean()) if t.size else 0.0,
            "tors_per_dp_group_max": int(t.max()) if t.size else 0,
        }


def placement_traffic(placement: Placement, space: SlotSpace, jobs: list[Job],
                      tor_of_gpu: dict[int, int] | None = None) -> TrafficReport:
    """Account the DCN bytes of ``placement`` exactly (module docstring).

    Parameters
    ----------
    placement : Placement
    space : SlotSpace
        Gives each ring's GPUs in rank order.
    jobs : list of Job
        ``placement.instances[i].job`` indexes this list (bytes per step).
    tor_of_gpu : dict, optional
        GPU device id -> ToR; default: the slots' ToRs.

    Returns
    -------
    TrafficReport
    """
    tor_of_gpu = tor_of_gpu if tor_of_gpu is not None else space.tor_of_gpu()
    ring_tors = [np.array([tor_of_gpu[int(x)] for x in space.ring_gpus(r)], dtype=np.int64)
                 for r in placement.rings]
    # [dp, pp, dp cross, pp cross] bytes and the DP groups' ToR counts, of all instances and of each job's: each
    # instance's terms are computed once and added to both in the same order, so the totals do not move by a
    # rounding when jobs are split out
    total = [0.0, 0.0, 0.0, 0.0, []]
    per = [[0.0, 0.0, 0.0, 0.0, []] for _ in jobs] if len(jobs) > 1 else [total]
    for inst in placement.instances:
        job = jobs[inst.job]
        terms, spans = _instance_terms(inst, ring_tors, job.bytes_dp, job.bytes_pp)
        for acc in (total,) if per[inst.job] is total else (total, per[inst.job]):
            for k, v in terms:
                acc[k] += v
            acc[4].extend(spans)
    return TrafficReport(*total[:4], tuple(total[4]),
                         by_job=tuple(TrafficReport(*acc[:4], tuple(acc[4])) for acc in per))


def _instance_terms(inst, ring_tors: list[np.ndarray], S: float, A: float) -> tuple[list, list[int]]:
    """One instance's byte terms (module docstring) in accounting order, as (index into [dp, pp, dp cross, pp
    cross], bytes), and the distinct ToRs of each of its DP groups."""
    terms, spans = [], []
    for stage in inst.stages:
        M = np.stack([ring_tors[r] for r in stage])  # (D, TP)
        D = M.shape[0]
        spans.append(int(np.unique(M).size))
        if D > 1:
            srt = np.sort(M, axis=0)
            T = 1 + np.count_nonzero(srt[1:] != srt[:-1], axis=0)  # distinct ToRs per TP rank
            per_hop = 2.0 * (D - 1) / D * S
            terms += [(0, M.shape[1] * 2.0 * (D - 1) * S), (2, float(phi(T).sum()) * per_hop)]
    for p in range(len(inst.stages) - 1):
        for a, b in zip(inst.stages[p], inst.stages[p + 1]):
            ta, tb = ring_tors[a], ring_tors[b]
            terms += [(1, ta.size * A), (3, float(np.count_nonzero(ta != tb)) * A)]
    return terms, spans
