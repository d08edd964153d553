"""Step time, MFU and memory of one training configuration on a Fabric.

One step of a pipeline stage is, per micro-batch, the forward and backward of
its layers (:func:`workloads.compute.layer_times`) plus the communication on
the critical path:

* **TP** (inside the HBD): per layer 2 all-reduces forward and 2 backward of
  the ``b s/cp h`` activation, or with sequence parallelism 2 all-gathers and
  2 reduce-scatters each way; repeated by full recomputation.  All TP groups
  of the job communicate at once.  Exposed (Megatron runs them on the
  compute stream).
* **CP**: ``cp - 1`` ring exchanges of the K/V chunk per layer forward (twice
  the bytes backward: K/V and their gradients), overlapped with the core
  attention; only the excess is exposed.
* **EP**: dispatch and combine all-to-alls per MoE layer, each way (and again
  under full recomputation); all EP groups at once; exposed.
* **PP**: a send/recv of the ``b s/cp h / tp`` activation shard per stage
  boundary per micro-batch (per virtual chunk when interleaved), forward and
  backward, all boundaries at once; exposed.  The pipeline takes
  ``m * max_stage(f + b) + (p - 1)/v * mean_stage(f + b)``: the slowest stage
  (the first holds the embedding, the last the output layer) sets the pace and
  the fill/drain is the bubble, ``(p-1)/(v m)`` of the ideal for equal stages
  (FIGURES, Narayanan et al. 2021).
* **DP** (over the DCN): gradient reduce-scatter + parameter all-gather with
  the distributed optimizer (all-reduce without), all DP groups of all stages
  at once, in the gradient dtype.  With ``overlap_grad_reduce`` (Megatron-Core)
  the reduce-scatter hides behind the backward of the last micro-batch except
  for its last bucket, and the all-gather behind the next step's first forward;
  otherwise (Megatron-LM 2021) both follow the pipeline flush.
* The optimizer step (Adam, memory-bound) and the tied-embedding gradient sum
  between the first and last stage close the step.

Every collective is timed by :class:`workloads.comm.CommCache` on the job's
placement (:class:`workloads.placement.Placement`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fabric.catalog import Catalog, load_catalog
from fabric.errors import FabricError
from fabric.model import Fabric
from workloads.comm import CommCache, default_backend
from workloads.compute import (DEFAULT_GEMM, GemmEfficiency, GpuSpec, LayerTimes, embedding_times, layer_times,
                               logits_times)
from workloads.flops import hardware_flops, model_flops
from workloads.memory import MemoryReport, memory_per_gpu, stage_layer_counts, stage_layers, stage_params
from workloads.models import ModelSpec
from workloads.parallelism import Parallelism, validate
from workloads.placement import Placement


@dataclass(frozen=True)
class Runtime:
    """What the training framework does (as opposed to what the model and fabric are).

    Attributes
    ----------
    name : str
    attention : {'flash', 'unfused'}
        Fused flash attention, or explicit score GEMMs + softmax + dropout.
    overlap_grad_reduce, overlap_param_gather : bool
        Megatron-Core's bucketed overlap of DP communication with compute.
    grad_bytes : float
        Bytes per gradient element held and reduced (4: fp32 main gradients).
    param_gather_bytes : float
        Bytes per parameter in the distributed optimizer's all-gather (bf16).
    bucket_params : float
        Parameters per DP communication bucket (Megatron default 40 M).
    fp8 : bool
        Weight GEMMs at the fp8 peak.
    memory_reserve : float
        Fraction of HBM kept back for CUDA context, NCCL buffers, fragmentation (assumed).
    """

    name: str = "megatron-core"
    attention: str = "flash"
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    grad_bytes: float = 4.0
    param_gather_bytes: float = 2.0
    bucket_params: float = 40e6
    fp8: bool = False
    memory_reserve: float = 0.1

    def to_dict(self) -> dict:
        return dict(self.__dict__)


MEGATRON_CORE = Runtime()
# Megatron-LM as of the April 2021 weak-scaling runs: unfused attention with dropout, fp16 gradients
# all-reduced after the pipeline flush (local DDP, no overlap), no distributed optimizer.
MEGATRON_2021 = Runtime(name="megatron-lm-2021", attention="unfused", overlap_grad_reduce=False,
                        overlap_param_gather=False, grad_bytes=2.0)


@dataclass
class StepResult:
    """Everything one design point reports (times in s, memory in bytes unless ``_gb``)."""

    model: str
    parallelism: Parallelism
    gpu: str
    gpus_used: int
    gpus_total: int
    step_time_s: float
    mfu: float
    hfu: float
    cluster_mfu: float
    tflops_per_gpu: float
    model_tflops_per_gpu: float
    tokens_per_s: float
    memory: MemoryReport
    breakdown: dict[str, float]
    comm_backend: str
    placement: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.memory.fits

    @property
    def memory_gb_per_gpu(self) -> float:
        return self.memory.total / 1e9

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model, "gpu": self.gpu, "parallelism": self.parallelism.to_dict(),
            "config": self.parallelism.label(), "gpus_used": self.gpus_used, "gpus_total": self.gpus_total,
            "step_time_s": self.step_time_s, "mfu": self.mfu, "hfu": self.hfu, "cluster_mfu": self.cluster_mfu,
            "tflops_per_gpu": self.tflops_per_gpu, "model_tflops_per_gpu": self.model_tflops_per_gpu,
            "tokens_per_s": self.tokens_per_s, "memory_gb_per_gpu": self.memory_gb_per_gpu, "fits": self.fits,
            "memory": self.memory.to_dict(), "breakdown_s": dict(self.breakdown),
            "comm_backend": self.comm_backend, "placement": self.placement, "notes": list(self.notes),
        }


def gpu_of(fabric: Fabric, catalog: Catalog) -> GpuSpec:
    """The GPU a Fabric is built from (its compute-scope BOM line of category ``gpu``)."""
    items = sorted({line.item for line in fabric.bom if line.category == "gpu" or
                    (line.scope == "compute" and catalog.category(line.item) == "gpu")})
    if len(items) != 1:
        raise FabricError("--gpu", f"cannot tell the fabric's GPU from its bill of materials ({items or 'none'})")
    return GpuSpec.from_catalog(catalog, items[0])


class StepModel:
    """Evaluate configurations of one model on one Fabric, sharing the collective-time cache.

    Parameters
    ----------
    fabric : Fabric
    model : ModelSpec
    catalog : Catalog, optional
    runtime : Runtime
    gemm : GemmEfficiency
    backend : callable, optional
        Collective timing backend (:mod:`workloads.comm`); default the
        simulator when importable.
    gpu : GpuSpec, optional
        Defaults to the Fabric's GPU.
    """

    def __init__(self, fabric: Fabric, model: ModelSpec, *, catalog: Catalog | None = None,
                 runtime: Runtime = MEGATRON_CORE, gemm: GemmEfficiency = DEFAULT_GEMM,
                 backend=None, gpu: GpuSpec | None = None):
        self.fabric = fabric
        self.model = model
        self.catalog = catalog or load_catalog()
        self.runtime = runtime
        self.gemm = gemm
        self.backend = backend or default_backend()
        self.gpu = gpu or gpu_of(fabric, self.catalog)
        self._placements: dict[tuple, Placement] = {}
        self._comms: dict[int, CommCache] = {}
        self._layers: dict[tuple, LayerTimes] = {}

    # Issue 19: TP larger than the HBD domain (e.g. TP 32 on 8-GPU DGX nodes), whole domains per group, its
    # traffic over the scale-out NICs; off by default, set by `fabric mfu --tp N` beyond the HBD (with a warning).
    tp_beyond_hbd: bool = False

    def with_gemm(self, gemm: GemmEfficiency) -> "StepModel":
        """A StepModel with another GEMM model, sharing placements and collective caches."""
        if gemm == self.gemm:
            return self
        other = StepModel(self.fabric, self.model, catalog=self.catalog, runtime=self.runtime, gemm=gemm,
                          backend=self.backend, gpu=self.gpu)
        other._placements, other._comms = self._placements, self._comms
        return other

    @property
    def backend_name(self) -> str:
        return getattr(self.backend, "name", "custom")

    # ----------------------------------------------------------------- pieces
    def placement(self, par: Parallelism) -> Placement:
        key = (par.tp, par.cp, par.dp, par.pp, par.ep, par.interleave > 1)
        pl = self._placements.get(key)
        if pl is None:
            pl = self._placements[key] = Placement(self.fabric, par)
        return pl

    def comm(self, pl: Placement) -> CommCache:
        """The collective-time cache of the placement's (possibly re-configured) Fabric."""
        c = self._comms.get(id(pl.fabric))
        if c is None or c.fabric is not pl.fabric:
            c = self._comms[id(pl.fabric)] = CommCache(pl.fabric, self.backend)
        return c

    def memory(self, par: Parallelism) -> MemoryReport:
        rt = self.runtime
        return memory_per_gpu(self.model, par, self.gpu.hbm_bytes, flash=rt.attention == "flash",
                              grad_bytes=rt.grad_bytes, reserve_fraction=rt.memory_reserve)

    def layer(self, par: Parallelism, moe: bool) -> LayerTimes:
        """Compute times of one layer (cached per shape-relevant fields)."""
        key = (moe, par.tp, par.cp, par.ep, par.micro_batch, par.sequence_parallel, par.recompute)
        t = self._layers.get(key)
        if t is None:
            t = self._layers[key] = layer_times(self.model, par, moe, self.gpu, self.gemm,
                                                flash=self.runtime.attention == "flash", fp8=self.runtime.fp8)
        return t

    def _layer_kinds(self) -> tuple[bool, ...]:
        m = self.model
        if not m.is_moe:
            return (False,)
        return (False, True) if m.dense_layers else (True,)

    def _stage_counts(self, par: Parallelism) -> list[tuple[int, int]]:
        """(dense layers, MoE layers) of every pipeline stage."""
        m = self.model
        if not m.is_moe or m.dense_layers == 0:  # every stage alike
            n = m.layers // par.pp
            return [(0, n) if m.is_moe else (n, 0)] * par.pp
        return [stage_layer_counts(m, par, st) for st in range(par.pp)]

    def _layer_comm(self, par: Parallelism, pl: Placement, moe: bool, times: LayerTimes) -> dict[str, tuple]:
        """Exposed communication of one layer for one micro-batch: {dim: (forward, backward)} seconds."""
        m, c = self.model, self.comm(pl)
        b, s, h = par.micro_batch, m.seq_len, m.hidden
        act = 2.0 * b * s / par.cp * h  # bf16 activation of one micro-batch on one CP rank
        out: dict[str, tuple[float, float]] = {}
        if par.tp > 1:
            if par.sequence_parallel:
                one = c.time("all_gather", pl.tp_groups, act) + c.time("reduce_scatter", pl.tp_groups, act)
                n = 2 if (not moe or m.shared_experts) else 1  # an MoE block without shared experts: no TP comm
            else:
                one, n = c.time("all_reduce", pl.tp_groups, act), 2
            out["tp"] = (n * one, n * one)
        if par.cp > 1:
            kv_heads = m.heads / par.tp if m.is_mla else max(m.kv_heads / par.tp, 1.0)
            kv = 2.0 * b * s / par.cp * kv_heads * (m.head_dim + m.v_head_dim)
            ring = np.stack([pl.cp_groups.reshape(-1), np.roll(pl.cp_groups, -1, axis=1).reshape(-1)], axis=1)
            n = par.cp - 1
            fwd, bwd = n * c.time("send_recv", ring, kv), n * c.time("send_recv", ring, 2 * kv)
            # ring attention overlaps each exchange with the attention on the previous chunk
            out["cp"] = (max(0.0, fwd - times.attn_fwd), max(0.0, bwd - times.attn_bwd))
        if moe and par.ep > 1:
            tokens = b * s / par.cp / par.tp
            a2a = c.time("all_to_all", pl.ep_groups, 2.0 * tokens * m.top_k * h)
            out["ep"] = (2 * a2a, 2 * a2a)  # dispatch + combine
        return out

    def _p2p(self, par: Parallelism, pl: Placement) -> float:
        """One pipeline send/recv of a micro-batch's activation (all stage boundaries at once)."""
        if par.pp == 1:
            return 0.0
        m, c = self.model, self.comm(pl)
        shard = 2.0 * par.micro_batch * m.seq_len / par.cp * m.hidden / par.tp
        t = c.time("send_recv", pl.pp_pairs, shard)
        if not par.sequence_parallel and par.tp > 1:
            # scatter/gather optimisation: each TP rank sends 1/tp, the receivers all-gather inside the HBD
            t += c.time("all_gather", pl.tp_groups, shard * par.tp)
        return t

    def stage_parts(self, par: Parallelism, pl: Placement | None, with_comm: bool = True) -> list[dict[str, float]]:
        """Seconds per micro-batch of every stage, by part (compute, tp, cp, ep, pp)."""
        m = self.model
        kinds = self._layer_kinds()
        times = {moe: self.layer(par, moe) for moe in kinds}
        comm = {moe: (self._layer_comm(par, pl, moe, times[moe]) if with_comm else {}) for moe in kinds}
        rec = par.recompute == "full"
        per_layer = {}
        for moe in kinds:
            t = times[moe]
            d = {"compute": t.fwd + t.bwd + t.recompute, "tp": 0.0, "cp": 0.0, "ep": 0.0}
            for dim, (f, b) in comm[moe].items():
                d[dim] += f + b + (f if rec else 0.0)  # full recomputation repeats the forward's communication
            per_layer[moe] = d
        emb_f, emb_b = embedding_times(m, par, self.gpu, self.gemm)
        out_f, out_b = logits_times(m, par, self.gpu, self.gemm, fp8=self.runtime.fp8)
        p2p = self._p2p(par, pl) if with_comm else 0.0
        out = []
        for st, (n_dense, n_moe) in enumerate(self._stage_counts(par)):
            parts = {"compute": 0.0, "tp": 0.0, "cp": 0.0, "ep": 0.0, "pp": 2.0 * par.interleave * p2p}
            for moe, n in ((False, n_dense), (True, n_moe)):
                if n:
                    for k, v in per_layer[moe].items():
                        parts[k] += n * v
            if st == 0:
                parts["compute"] += emb_f + emb_b
            if st == par.pp - 1:
                parts["compute"] += out_f + out_b
            out.append(parts)
        return out

    @staticmethod
    def pipeline_time(par: Parallelism, totals: np.ndarray) -> float:
        """``m * max(stage) + (p - 1)/v * mean(stage)``: steady state at the slowest stage plus fill/drain."""
        return par.microbatches * float(totals.max()) + (par.pp - 1) / par.interleave * float(totals.mean())

    def lower_bound(self, par: Parallelism) -> float:
        """A step time no configuration ``par`` can beat: compute and bubble only, no communication."""
        totals = np.array([sum(p.values()) for p in self.stage_parts(par, None, with_comm=False)])
        return self.pipeline_time(par, totals)

    # ----------------------------------------------------------------- evaluation
    def evaluate(self, par: Parallelism, *, check: bool = True) -> StepResult:
        """Step time, MFU, memory and breakdown of configuration ``par``.

        Raises
        ------
        FabricError
            If ``par`` is invalid for the model or the Fabric.  Memory is
            reported in the result (``fits``), not raised; see :func:`check_fit`.
        """
        m, rt, gpu = self.model, self.runtime, self.gpu
        if check:
            validate(m, par, None if self.tp_beyond_hbd else self.fabric.hbd, self.fabric.n_gpus)
        pl = self.placement(par)
        parts = self.stage_parts(par, pl)
        totals = np.array([sum(p.values()) for p in parts])
        slow = int(np.argmax(totals))
        pipe = self.pipeline_time(par, totals)
        nmb = par.microbatches
        breakdown = {k: nmb * v for k, v in parts[slow].items()}
        breakdown["bubble"] = pipe - nmb * float(totals[slow])
        dense_p = max(stage_params(m, par, st)[0] for st in {0, par.pp - 1})
        expert_p = max(stage_params(m, par, st)[1] for st in {0, par.pp - 1})
        breakdown["dp"] = self._dp_exposed(par, pl, dense_p, expert_p)
        # optimizer: Adam over the local shard, memory-bound: read the gradient twice (norm, update),
        # read and write fp32 master weights and both moments (24 B), write the bf16 weight (2 B)
        shard_d = par.dp * par.cp if par.distributed_optimizer else 1
        shard_e = par.expert_dp if par.distributed_optimizer else 1
        local = dense_p / shard_d + expert_p / shard_e
        breakdown["optimizer"] = self.gemm.memory_time(local * (26.0 + 2 * rt.grad_bytes), gpu.hbm_bandwidth)
        step = float(sum(breakdown.values()))
        mf = model_flops(m, par.global_batch)
        hf = hardware_flops(m, par.global_batch, par.recompute)
        world, peak = par.world, gpu.peak_bf16_flops
        mem = self.memory(par)
        notes = [] if mem.fits else ["does not fit: " + mem.summary()]
        return StepResult(
            model=m.name, parallelism=par, gpu=gpu.item, gpus_used=world, gpus_total=self.fabric.n_gpus,
            step_time_s=step, mfu=mf / (step * world * peak), hfu=hf / (step * world * peak),
            cluster_mfu=mf / (step * self.fabric.n_gpus * peak), tflops_per_gpu=hf / (step * world) / 1e12,
            model_tflops_per_gpu=mf / (step * world) / 1e12, tokens_per_s=par.global_batch * m.seq_len / step,
            memory=mem, breakdown={k: float(v) for k, v in breakdown.items()}, comm_backend=self.backend_name,
            placement=pl.to_dict(), notes=notes)

    def _dp_exposed(self, par: Parallelism, pl: Placement, dense_p: float, expert_p: float) -> float:
        """Exposed DP communication and tied-embedding gradient sum after the pipeline (module docstring)."""
        m, rt, c = self.model, self.runtime, self.comm(pl)
        # overlap windows: the backward (incl. recomputation) of the last micro-batch on the first stage,
        # and the forward of the next step's first micro-batch
        t = self.layer(par, self._layer_kinds()[-1])
        n_layers = len(stage_layers(m, par, 0))
        window_b = n_layers * (t.bwd + t.recompute)
        window_f = n_layers * t.fwd
        total = 0.0
        for params, groups in ((dense_p, pl.dp_groups), (expert_p, pl.edp_groups)):
            if params <= 0 or groups.shape[1] < 2:
                continue
            last_bucket = min(1.0, rt.bucket_params / params)
            if par.distributed_optimizer:
                rs = c.time("reduce_scatter", groups, params * rt.grad_bytes)
                ag = c.time("all_gather", groups, params * rt.param_gather_bytes)
            else:
                rs, ag = c.time("all_reduce", groups, params * rt.grad_bytes), 0.0
            total += max(rs - window_b, rs * last_bucket) if rt.overlap_grad_reduce else rs
            total += max(ag - window_f, ag * last_bucket) if rt.overlap_param_gather else ag
        if m.tied_embeddings and par.pp > 1:
            total += c.time("all_reduce", pl.embedding_pairs, m.vocab * m.hidden / par.tp * rt.grad_bytes)
        return total


def check_fit(result: StepResult) -> None:
    """Raise a one-line :class:`FabricError` with the numbers if ``result`` does not fit in HBM."""
    if not result.fits:
        raise FabricError("memory", f"{result.parallelism.label()} does not fit: {result.memory.summary()}; "
                                    "try --recompute full/selective, a larger --tp or --pp, or a smaller --micro-batch")


def evaluate(fabric: Fabric, model: ModelSpec, par: Parallelism, **kwargs) -> StepResult:
    """One design point: :meth:`StepModel.evaluate` with a fresh :class:`StepModel` (kwargs go to it)."""
    return StepModel(fabric, model, **kwargs).evaluate(par)
