"""The generation (rollout) phase: roofline decode and prefill of each rollout replica, continuous batching.

A *replica* is ``tp x pp`` GPUs holding one copy of the policy (TP inside the
HBD, pipeline stages across nodes).  It decodes up to ``slots`` sequences at
once; a finished sequence's slot takes the next waiting one at once
(continuous batching, list scheduling in sample order).  One decode step with
``n`` active sequences whose contexts sum to ``c`` tokens costs, on the
replica's ``G`` GPUs (roofline: the slower of memory and compute, at the
achieved fractions of the catalog peaks that :data:`workloads.compute.DEFAULT_GEMM`
gives)::

    memory  = (W_dense + W_experts * f(n) + c * kv_per_token) / (G * hbm_bw * mem_eff)
    compute = (2 * active_params * n + attn_per_pair * c)     / (G * peak * eta_max)
    step    = max(memory, compute) + comm(n)

with ``f(n) = 1 - (1 - top_k/E)^n`` the expected share of an MoE layer's
experts that ``n`` tokens touch, ``attn_per_pair = 2 l a (d + d_v)`` the
score and context FLOPs of one (query, key) pair, and ``comm(n)`` the
per-step tensor-parallel all-reduces (2 per layer) and pipeline sends of the
``n x h`` activation, timed on the Fabric by :class:`workloads.comm.CommCache`
(affine in bytes).  Prefill of a ``p``-token prompt is compute-bound
(``2 active_params p + attn_per_pair p (p+1)/2`` FLOPs) and stalls decoding
(added serially).  The phase ends when the slowest replica finishes (the long
tail of the output lengths).

MoE models spread their experts over the replica's GPUs (expert parallelism
inside the replica, balanced); the dispatch/combine all-to-all inside the HBD
is approximated by the same two per-layer collectives as a dense layer.

Sums over steps are exact and vectorised: the number of active sequences and
their context sum per step come from difference arrays over the sequences'
``[start, start + length)`` step intervals.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

import numpy as np

from fabric.errors import FabricError
from fabric.model import Fabric
from workloads.comm import CommCache
from workloads.compute import DEFAULT_GEMM, GemmEfficiency, GpuSpec
from workloads.models import ModelSpec
from workloads.rl.config import RLConfig
from workloads.rl.traffic import Flows

ACT_BYTES = 2.0
"""Bytes per activation element exchanged between GPUs (bf16, by definition of the format)."""

WEIGHT_SHARE_OF_ENGINE = 0.5
"""Auto ``gen_pp`` keeps the weights within this share of the engine's memory, the rest for KV cache (assumed)."""


@dataclass(frozen=True)
class DecodeCost:
    """What one decode step of a replica reads and computes (whole replica, not per GPU).

    Attributes
    ----------
    gpus : int
        GPUs in the replica.
    dense_weight_bytes : float
        Weights every step reads (all but the routed experts).
    expert_weight_bytes : float
        Routed-expert weights (read only for the experts the step's tokens touch).
    expert_touch_p : float
        ``top_k / E``: probability that a token uses a given expert (0 for dense models).
    kv_bytes_per_token : float
        KV cache of one token over all layers.
    flops_per_token : float
        ``2 x active parameters``.
    attn_flops_per_pair : float
        Score + context FLOPs of one (query, key) pair over all layers.
    peak_flops, hbm_bandwidth : float
        Per GPU (catalog).
    gemm : GemmEfficiency
        Achieved fractions of peak (``eta_max``) and of HBM bandwidth (``mem_efficiency``).
    """

    gpus: int
    dense_weight_bytes: float
    expert_weight_bytes: float
    expert_touch_p: float
    kv_bytes_per_token: float
    flops_per_token: float
    attn_flops_per_pair: float
    peak_flops: float
    hbm_bandwidth: float
    gemm: GemmEfficiency = DEFAULT_GEMM

    @property
    def weight_bytes(self) -> float:
        return self.dense_weight_bytes + self.expert_weight_bytes

    def step_times(self, active: np.ndarray, context: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(memory, compute) seconds of decode steps with ``active`` sequences and ``context`` tokens."""
        n = np.asarray(active, dtype=np.float64)
        touched = 1.0 - np.power(1.0 - self.expert_touch_p, n) if self.expert_touch_p > 0 else 0.0
        read = self.dense_weight_bytes + self.expert_weight_bytes * touched + context * self.kv_bytes_per_token
        mem = read / (self.gpus * self.hbm_bandwidth * self.gemm.mem_efficiency)
        comp = (self.flops_per_token * n + self.attn_flops_per_pair * context) / (
            self.gpus * self.peak_flops * self.gemm.eta_max)
        return mem, comp

    def prefill_time(self, prompt_tokens: np.ndarray) -> float:
        """Seconds to prefill prompts of these lengths (compute-bound, causal attention)."""
        p = np.asarray(prompt_tokens, dtype=np.float64)
        flops = float((self.flops_per_token * p + self.attn_flops_per_pair * p * (p + 1) / 2).sum())
        return flops / (self.gpus * self.peak_flops * self.gemm.eta_max)


def decode_cost(model: ModelSpec, gpu: GpuSpec, gpus: int, weight_bytes_per_param: float,
                kv_bytes: float) -> DecodeCost:
    """The :class:`DecodeCost` of ``model`` on a replica of ``gpus`` GPUs.

    Parameters
    ----------
    model : ModelSpec
    gpu : GpuSpec
        Catalog numbers of the GPU.
    gpus : int
    weight_bytes_per_param : float
        2 (bf16) or 1 (fp8); fp8 also selects the fp8 peak.
    kv_bytes : float
        Bytes per KV-cache element.
    """
    experts = 0.0
    p = 0.0
    if model.is_moe:
        experts = float(model.moe_layers * model.experts * model.mlp_params(model.expert_ffn_hidden))
        p = model.top_k / model.experts
    total = float(model.params())
    if model.is_mla:
        kv_elems = model.layers * (model.kv_lora_rank + model.rope_head_dim)
    else:
        kv_elems = model.layers * model.kv_heads * (model.head_dim + model.v_head_dim)
    attn = 2.0 * model.layers * model.heads * (model.head_dim + model.v_head_dim)
    peak = gpu.peak_fp8_flops if weight_bytes_per_param < 2 else gpu.peak_bf16_flops
    return DecodeCost(gpus, (total - experts) * weight_bytes_per_param, experts * weight_bytes_per_param, p,
                      kv_elems * kv_bytes, 2.0 * model.active_params(), attn, peak, gpu.hbm_bandwidth)


@dataclass(frozen=True)
class CommCoeffs:
    """Per decode step communication ``a + b * n`` seconds for ``n`` active sequences."""

    a: float = 0.0
    b: float = 0.0

    def __call__(self, n: np.ndarray) -> np.ndarray:
        n = np.asarray(n, dtype=np.float64)
        return np.where(n > 0, self.a + self.b * n, 0.0)


@dataclass(frozen=True)
class ReplicaTimes:
    """Seconds one replica spends: decode (memory-, compute-bound steps), communication, prefill."""

    total_s: float
    decode_s: float
    comm_s: float
    prefill_s: float
    steps: int
    memory_bound_steps: int


@dataclass
class GenerationResult:
    """The generation phase.

    Attributes
    ----------
    time_s : float
        Until the slowest replica finishes, seconds.
    replicas, gpus_per_replica, tp, pp, slots : int
    replica_s : ndarray
        Seconds per replica.
    slowest : ReplicaTimes
    output_tokens : int
        Generated tokens (all samples).
    lengths : ndarray
        Output length of every sample.
    pp_pairs : ndarray, shape (m, 2)
        Device ids of pipeline-stage boundaries (sender, receiver) of all replicas.
    pp_bytes : float
        Bytes each boundary carries over the phase (all replicas alike up to
        their step counts; the slowest replica's count is used).
    notes : list of str
    """

    time_s: float
    replicas: int
    gpus_per_replica: int
    tp: int
    pp: int
    slots: int
    replica_s: np.ndarray
    slowest: ReplicaTimes
    output_tokens: int
    lengths: np.ndarray
    pp_pairs: np.ndarray
    pp_bytes: float
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        s = self.slowest
        return {"time_s": self.time_s, "replicas": self.replicas, "gpus_per_replica": self.gpus_per_replica,
                "tp": self.tp, "pp": self.pp, "slots": self.slots, "output_tokens": self.output_tokens,
                "mean_output_tokens": float(self.lengths.mean()), "max_output_tokens": int(self.lengths.max()),
                "replica_s_mean": float(self.replica_s.mean()), "slowest": s.__dict__, "notes": list(self.notes)}


def schedule_slots(lengths: np.ndarray, slots: int) -> np.ndarray:
    """Start step of every sequence when ``slots`` run at once and each free slot takes the next one.

    Examples
    --------
    >>> schedule_slots(np.array([3, 1, 2]), 2).tolist()
    [0, 0, 1]
    """
    n = lengths.size
    if n <= slots:
        return np.zeros(n, dtype=np.int64)
    heap = [(0, s) for s in range(slots)]
    start = np.empty(n, dtype=np.int64)
    for i, ln in enumerate(lengths.tolist()):
        t, s = heapq.heappop(heap)
        start[i] = t
        heapq.heappush(heap, (t + ln, s))
    return start


def step_profile(lengths: np.ndarray, starts: np.ndarray, prompt: int) -> tuple[np.ndarray, np.ndarray]:
    """Active sequences and their context sum (tokens) at every decode step.

    Sequence ``i`` decodes its ``j``-th token (``j = 0..l-1``) at step
    ``start + j`` with a context of ``prompt + j`` tokens; both profiles are
    built from difference arrays, so the cost is linear in sequences + steps.
    """
    end = starts + lengths
    T = int(end.max()) if end.size else 0
    act = np.zeros(T + 1)
    np.add.at(act, starts, 1.0)
    np.add.at(act, end, -1.0)
    # context at step t of a sequence active then: (prompt - start) + t
    const = np.zeros(T + 1)
    np.add.at(const, starts, prompt - starts.astype(np.float64))
    np.add.at(const, end, -(prompt - starts.astype(np.float64)))
    active = np.cumsum(act)[:T]
    context = np.cumsum(const)[:T] + np.arange(T) * active
    return active, context


def replica_time(cost: DecodeCost, lengths: np.ndarray, prompt: int, slots: int, comm: CommCoeffs) -> ReplicaTimes:
    """Seconds a replica needs for its sequences (prefill + decode steps + per-step communication)."""
    if lengths.size == 0:
        return ReplicaTimes(0.0, 0.0, 0.0, 0.0, 0, 0)
    starts = schedule_slots(lengths, slots)
    active, context = step_profile(lengths, starts, prompt)
    mem, comp = cost.step_times(active, context)
    decode = float(np.maximum(mem, comp).sum())
    comm_s = float(comm(active).sum())
    prefill = cost.prefill_time(np.full(lengths.size, prompt))
    return ReplicaTimes(decode + comm_s + prefill, decode, comm_s, prefill, int(active.size),
                        int(np.count_nonzero(mem >= comp)))


def plan_replica(model: ModelSpec, gpu: GpuSpec, cfg: RLConfig, gen_gpus: int, gpus_per_node: int) -> tuple[int, int]:
    """(tp, pp) of a rollout replica: ``gen_tp`` and ``gen_pp`` or the fewest stages whose weights fit.

    Raises
    ------
    FabricError
        If tp does not fit the HBD or the heads, or no stage count leaves room for the KV cache.
    """
    tp = cfg.gen_tp
    if tp > gpus_per_node or gpus_per_node % tp:
        raise FabricError("params[gen_tp]", f"{tp} must divide the {gpus_per_node} GPUs of an HBD node")
    if model.heads % tp:
        raise FabricError("params[gen_tp]", f"{tp} does not divide heads={model.heads} of {model.name}")
    weights = model.params() * cfg.gen_bytes_per_param
    engine = gpu.hbm_bytes * cfg.gpu_memory_utilization
    if cfg.gen_pp:
        if model.layers % cfg.gen_pp:
            raise FabricError("params[gen_pp]", f"{cfg.gen_pp} does not divide layers={model.layers} of {model.name}")
        pp = cfg.gen_pp
    else:
        fits = [p for p in range(1, model.layers + 1) if model.layers % p == 0
                and weights / (tp * p) <= WEIGHT_SHARE_OF_ENGINE * engine]
        if not fits:
            raise FabricError("params[gen_tp]", f"{model.name} weights do not fit any pipeline of tp={tp} replicas")
        pp = fits[0]
    if weights / (tp * pp) >= engine:
        raise FabricError("params[gen_pp]", f"{weights / (tp * pp) / 1e9:.1f} GB of weights per GPU exceed the engine's "
                                       f"{engine / 1e9:.1f} GB; use a larger gen_pp or gen_tp, or gen_dtype=fp8")
    if tp * pp > gen_gpus:
        raise FabricError("params[train_fraction]", f"a rollout replica needs {tp * pp} GPUs but the generation pool "
                                               f"has {gen_gpus}")
    return tp, pp


def kv_slots(cost: DecodeCost, gpu: GpuSpec, cfg: RLConfig, lengths: np.ndarray) -> int:
    """Sequences a replica can hold: ``gen_max_batch``, or fewer if the KV cache of the mean sequence runs out."""
    engine = gpu.hbm_bytes * cfg.gpu_memory_utilization * cost.gpus
    free = engine - cost.weight_bytes
    per_seq = cost.kv_bytes_per_token * (cfg.prompt_len + float(lengths.mean()))
    return int(max(1, min(cfg.gen_max_batch, math.floor(free / per_seq))))


def replicas(gen_gpus: np.ndarray, tp: int, pp: int) -> np.ndarray:
    """Device ids of the rollout replicas, shape (R, pp, tp): consecutive GPUs of the pool in HBD order."""
    G = tp * pp
    R = gen_gpus.size // G
    return np.asarray(gen_gpus[:R * G], dtype=np.int64).reshape(R, pp, tp)


def generation_flows(reps: np.ndarray, model: ModelSpec, lengths: np.ndarray) -> Flows:
    """Bytes between GPUs over the phase: one activation per generated token per stage boundary and TP rank."""
    R, pp, tp = reps.shape
    if pp < 2 or R == 0:
        return Flows.empty()
    tokens = np.array([lengths[r::R].sum() for r in range(R)], dtype=np.float64)
    src = reps[:, :-1, :].reshape(R, -1)
    dst = reps[:, 1:, :].reshape(R, -1)
    nbytes = np.repeat(ACT_BYTES * model.hidden * tokens, src.shape[1])
    return Flows.of(src.ravel(), dst.ravel(), nbytes)


def generation_phase(fabric: Fabric, model: ModelSpec, gpu: GpuSpec, cfg: RLConfig, gen_gpus: np.ndarray,
                     lengths: np.ndarray, comm: CommCache | None = None) -> GenerationResult:
    """Time of the generation phase on the rollout pool ``gen_gpus`` (GPU indices in HBD order).

    Parameters
    ----------
    fabric : Fabric
        With the OCS configuration of the generation phase (for the
        communication timing).
    model : ModelSpec
    gpu : GpuSpec
    cfg : RLConfig
    gen_gpus : ndarray of int
        Device ids of the rollout pool, whole nodes, in HBD order.
    lengths : ndarray of int
        Output length of every sample.
    comm : CommCache, optional
        Collective timing on ``fabric`` (default: a new one with the default backend).
    """
    gpn = fabric.hbd.gpus_per_node
    tp, pp = plan_replica(model, gpu, cfg, gen_gpus.size, gpn)
    G = tp * pp
    R = gen_gpus.size // G
    notes = []
    if R * G < gen_gpus.size:
        notes.append(f"{gen_gpus.size - R * G} GPUs of the generation pool idle (replicas of {G})")
    cost = decode_cost(model, gpu, G, cfg.gen_bytes_per_param, cfg.kv_bytes)
    slots = kv_slots(cost, gpu, cfg, lengths)
    reps = replicas(gen_gpus, tp, pp)
    c = comm or CommCache(fabric)
    coeffs = CommCoeffs()
    act1 = ACT_BYTES * model.hidden  # one sequence's activation vector
    if tp > 1:
        groups = reps.reshape(-1, tp)
        a1, a2 = c.time("all_reduce", groups, act1), c.time("all_reduce", groups, 2 * act1)
        per_layer = 2 * model.layers  # attention and MLP block, once each per layer
        coeffs = CommCoeffs(coeffs.a + per_layer * (2 * a1 - a2), coeffs.b + per_layer * (a2 - a1))
    pairs = np.zeros((0, 2), dtype=np.int64)
    if pp > 1:
        # every TP rank sends its copy of the activation to the same rank of the next stage
        pairs = np.stack([reps[:, :-1, :].reshape(-1), reps[:, 1:, :].reshape(-1)], axis=1)
        s1, s2 = c.time("send_recv", pairs, act1), c.time("send_recv", pairs, 2 * act1)
        coeffs = CommCoeffs(coeffs.a + (pp - 1) * (2 * s1 - s2), coeffs.b + (pp - 1) * (s2 - s1))
    times = []
    for r in range(R):
        times.append(replica_time(cost, lengths[r::R], cfg.prompt_len, slots, coeffs))
    replica_s = np.array([t.total_s for t in times])
    slow = int(np.argmax(replica_s)) if R else 0
    pp_bytes = 0.0
    if pp > 1:
        # bytes over the phase: one activation per generated token per boundary (slowest replica's share)
        pp_bytes = act1 * float(lengths[slow::R].sum())
    if slots < cfg.gen_max_batch:
        notes.append(f"KV cache holds {slots} sequences per replica (gen_max_batch {cfg.gen_max_batch})")
    return GenerationResult(float(replica_s.max()) if R else 0.0, R, G, tp, pp, slots, replica_s, times[slow],
                            int(lengths.sum()), lengths, pairs, pp_bytes, notes)
