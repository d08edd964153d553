"""Step time, MFU and memory of one training configuration on a Fabric.

One step of a pipeline stage is, per micro-batch, the forward and backward of
its layers (:func:`workloads.compute.layer_times`) plus the communication on
the critical path:

* **TP** (inside the HBD): per layer 2 all-reduces of the ``b s/cp h``
  activation forward, or with sequence parallelism 2 all-gathers and 2
  reduce-scatters, exposed (Megatron runs them on the compute stream) and
  repeated by full recomputation.  Backward (``Runtime.tp_overlap_backward``):
  the input-gradient all-reduce, or SP's re-gather and reduce-scatter, overlap
  the column-parallel weight-gradient GEMMs; SP's all-gather of the output
  gradient stays exposed.  All TP groups of the job communicate at once.
* **CP**: ``cp - 1`` ring exchanges of the K/V chunk per layer forward (twice
  the bytes backward: K/V and their gradients), overlapped with the core
  attention; only the excess is exposed.
* **EP**: dispatch and combine all-to-alls per MoE layer, each way (and again
  under full recomputation); all EP groups at once; exposed.
* **PP**: a send/recv of the ``b s/cp h / tp`` activation shard per stage
  boundary per micro-batch (per virtual chunk when interleaved), forward and
  backward, all boundaries at once; exposed.  Stages may hold different layer
  counts (:func:`workloads.parallelism.layer_split`; the first holds the
  embedding, the last the output layer).  The pipeline takes
  ``m * max_i t_i + sum_{i != slowest} t_i / v`` (:meth:`StepModel.pipeline_time`):
  the slowest stage sets the pace and fill/drain passes every other stage
  once, ``(p-1)/(v m)`` of the ideal for equal stages (FIGURES, Narayanan et al. 2021).
* **DP** (over the DCN): gradient reduce-scatter + parameter all-gather with
  the distributed optimizer (all-reduce without), all DP groups of all stages
  at once, in the gradient dtype.  With ``overlap_grad_reduce`` (Megatron-Core)
  the reduce-scatter hides behind the backward of the last micro-batch except
  for its last bucket, and the all-gather behind the next step's first forward
  except for its first; that bucket (``max(40 M, 1 M x dp x cp)`` parameters,
  Megatron-Core's default) is an NCCL call of its own, timed at its size;
  otherwise (Megatron-LM 2021) both follow the pipeline flush.
* The optimizer step (Adam, memory-bound) and the tied-embedding gradient sum
  between the first and last stage close the step.

Every collective is timed by :class:`workloads.comm.CommCache` on the job's
placement (:class:`workloads.placement.RankPlacement`).
"""

from __future__ import annotations

from collections import OrderedDict
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
from workloads.memory import MemoryReport, memory_per_gpu, stage_layer_counts, stage_params
from workloads.models import ModelSpec
from workloads.parallelism import Parallelism, validate
from workloads.placement import RankPlacement


@dataclass(frozen=True)
class Runtime:
    """What the training framework does (as opposed to what the model and fabric are).

    Attributes
    ----------
    name : str
    attention : {'auto', 'flash', 'unfused'}
        Fused flash attention, or explicit score GEMMs + Megatron's fused
        scale-mask-softmax + dropout kernels.  ``auto``: flash unless the
        model trains with dropout (:meth:`StepModel.flash`).
    overlap_grad_reduce, overlap_param_gather : bool
        Megatron-Core's bucketed overlap of DP communication with compute.
    grad_bytes : float
        Bytes per gradient element held and reduced (4: fp32 main gradients).
    param_gather_bytes : float
        Bytes per parameter in the distributed optimizer's all-gather (bf16).
    bucket_params, bucket_params_per_dp_rank : float
        Parameters per DP communication bucket: Megatron-Core's default
        ``max(40 M, 1 M x dp x cp)`` (:meth:`bucket`), larger at large DP so
        that each bucket's ring collective stays bandwidth-bound.
    fp8 : bool
        Weight GEMMs at the fp8 peak.
    tp_overlap_backward : bool
        Backward TP collectives run asynchronously under the weight-gradient
        GEMMs (Megatron's ``LinearWithGradAccumulationAndAsyncCommunication``:
        the input-gradient all-reduce, or with sequence parallelism the
        reduce-scatter, overlaps the column-parallel weight gradient); only the
        excess is exposed.
    memory_reserve : float
        Fraction of HBM lost to allocator fragmentation (:data:`RUNTIME_SOURCES`).
    memory_reserve_bytes : float
        Bytes kept back for the CUDA context, NCCL buffers and framework
        workspaces (:data:`RUNTIME_SOURCES`).
    distributed_optimizer : bool or None
        Megatron's ``--use-distributed-optimizer`` as the framework default
        for configurations that do not set it (None: leave them as given).
    memory_efficient_norm : bool
        Norms keep their output instead of their input for the backward
        (:func:`workloads.memory.layer_activation_bytes`).
    flash_kernel : {'best', 'fa2'}
        The flash-attention kernel: ``best``, the best published kernel on the
        GPU (FlashAttention-3 / cuDNN 9 class on Hopper), or ``fa2``,
        FlashAttention-2, what frameworks ran on Hopper until mid-2024 (about
        half the throughput there; :class:`workloads.compute.KernelEfficiency`).
    """

    name: str = "megatron-core"
    attention: str = "auto"
    overlap_grad_reduce: bool = True
    overlap_param_gather: bool = True
    grad_bytes: float = 4.0
    param_gather_bytes: float = 2.0
    bucket_params: float = 40e6
    bucket_params_per_dp_rank: float = 1e6
    fp8: bool = False
    tp_overlap_backward: bool = True
    memory_reserve: float = 0.05
    memory_reserve_bytes: float = 4e9
    distributed_optimizer: bool | None = True
    memory_efficient_norm: bool = False
    flash_kernel: str = "best"

    def bucket(self, dp_cp: int) -> float:
        """Parameters per DP bucket for a data-parallel (x context-parallel) group of ``dp_cp`` ranks.

        Megatron-Core sizes buckets ``max(40000000, 1000000 * dp_cp_size)``
        when ``bucket_size`` is not given (``DistributedDataParallelConfig``),
        so the last bucket, whose reduce-scatter cannot start before the
        backward ends, grows with the DP size (:data:`RUNTIME_SOURCES`).
        """
        return max(self.bucket_params, self.bucket_params_per_dp_rank * dp_cp)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


# Where each runtime switch comes from (also printed in `fabric mfu --json` as runtime_sources).
RUNTIME_SOURCES = {
    "attention": "flash: Megatron-Core with Transformer Engine fused/flash attention (default since 2023); "
                 "unfused: Megatron-LM's scaled-masked-softmax kernel with explicit score GEMMs (2021-2022 papers)",
    "overlap_grad_reduce": "Megatron-Core --overlap-grad-reduce / --overlap-param-gather (bucketed DP overlap)",
    "grad_bytes": "Megatron: fp32 main gradients (--accumulate-allreduce-grads-in-fp32) with bf16; fp16 "
                  "gradients in the 2021 runs (Narayanan et al. 2021)",
    "bucket_params": "Megatron-Core DDP default bucket size max(40M, 1M x dp x cp) parameters when bucket_size is "
                     "unset ('larger DP sizes need larger buckets to ensure collectives do not become "
                     "latency-bound', megatron/core/distributed/distributed_data_parallel_config.py bucket_size)",
    "tp_overlap_backward": "Megatron-LM --async-tensor-model-parallel-allreduce (default on since late 2021) and "
                           "the overlapped all-gather / reduce-scatter of sequence parallelism (Korthikanti et al. "
                           "2022, Sec. 4.2.2); off for the April 2021 runs",
    "memory_reserve": "assumed: PyTorch caching-allocator fragmentation, about 5 % of HBM",
    "memory_reserve_bytes": "assumed: CUDA context (~0.5-1 GB), NCCL communicator buffers (~1-2 GB) and "
                            "cuBLAS/TE workspaces, about 4 GB per GPU",
    "distributed_optimizer": "Megatron-Core --use-distributed-optimizer (ZeRO-1); off in Megatron-LM 2021",
    "flash_kernel": "best: the GPU's best published fused attention (FlashAttention-3, Shah et al. 2024, or cuDNN 9 "
                    "on Hopper; FlashAttention-2 on A100); fa2: FlashAttention-2 (Dao 2023), which Transformer "
                    "Engine / NeMo ran on Hopper before FlashAttention-3 and cuDNN 9 fused attention (mid-2024)",
    "memory_efficient_norm": "Megatron --memory-efficient-layer-norm (Apex fused norm that keeps its output, not its "
                             "input, for the backward); off by default (Transformer Engine's LayerNormLinear keeps both)",
}


MEGATRON_CORE = Runtime()
# Megatron-LM as of the April 2021 weak-scaling runs: unfused attention with dropout, fp16 gradients
# all-reduced after the pipeline flush (local DDP, no overlap), no distributed optimizer.
MEGATRON_2021 = Runtime(name="megatron-lm-2021", attention="unfused", overlap_grad_reduce=False,
                        overlap_param_gather=False, grad_bytes=2.0, distributed_optimizer=False,
                        tp_overlap_backward=False)

# MFU conventions for the attention score and context products (see workloads.flops).
FLOPS_CONVENTIONS = ("causal", "full")


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
    flops_convention: str = "causal"
    precision: str = "bf16"
    peak_tflops: float = 0.0
    stage_layers: list[int] = field(default_factory=list)
    slowest_stage: int = 0

    @property
    def hardware_tflops_per_gpu(self) -> float:
        """Executed (hardware) TFLOP/s per GPU, recomputation included (``tflops_per_gpu`` is its old name)."""
        return self.tflops_per_gpu

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
            "tflops_per_gpu": self.tflops_per_gpu, "hardware_tflops_per_gpu": self.hardware_tflops_per_gpu,
            "model_tflops_per_gpu": self.model_tflops_per_gpu, "flops_convention": self.flops_convention,
            "precision": self.precision, "peak_tflops_per_gpu": self.peak_tflops,
            "conventions": conventions(self.flops_convention, self.precision),
            "stage_layers": list(self.stage_layers), "slowest_stage": self.slowest_stage,
            "tokens_per_s": self.tokens_per_s, "memory_gb_per_gpu": self.memory_gb_per_gpu, "fits": self.fits,
            "memory": self.memory.to_dict(), "breakdown_s": dict(self.breakdown),
            "comm_backend": self.comm_backend, "placement": self.placement, "notes": list(self.notes),
        }


def gpu_of(fabric: Fabric, catalog: Catalog) -> GpuSpec:
    """The GPU a Fabric is built from (its compute-scope BOM line of category ``gpu``)."""
    items = sorted({line.item for line in fabric.bom if line.category == "gpu" or
                    (line.scope == "compute" and catalog.category(line.item) == "gpu")})
    if len(items) != 1:
        source = fabric.params.get("file")  # a topology file: its graph.bom lists the parts, -p gpu is not taken
        if source:
            raise FabricError(f"{source}:graph.bom", f"cannot tell the fabric's GPU ({items or 'no GPU item'}); list "
                                                     "exactly one, e.g. {item: gpu_h100, scope: compute, count: N}")
        raise FabricError("gpu", f"cannot tell the fabric's GPU from its bill of materials ({items or 'none'})")
    return GpuSpec.from_catalog(catalog, items[0])


#: Placements (and the collective caches of their Fabrics) a StepModel keeps.  A placement on a Fabric with
#: re-configurable HBD circuits (k-hop) is a re-configured copy of the Fabric with its own simulator, graphs and
#: routes; a search that kept all of them grew with configurations x GPUs (`mfu khop-ring --search`, llama3-70b:
#: 227 placements, 0.64 GB at 16,384 GPUs; out of memory at 131,072).  Measured with 64 kept: 0.43 GB, 17.3 s
#: at 16,384 GPUs (unbounded 16.0 s; 8 kept 0.39 GB but 32 s, as the search comes back to earlier shapes);
#: 131,072 GPUs 3.6 GB, 231 s.  A miss re-makes the placement: the results do not depend on the bound.
PLACEMENTS_KEPT = 64


class Recent(OrderedDict):
    """A dict that keeps its ``size`` most recently used entries (lookups with :meth:`get` count as use)."""

    def __init__(self, size: int):
        super().__init__()
        self.size = int(size)

    def get(self, key, default=None):
        if key in self:
            self.move_to_end(key)
            return self[key]
        return default

    def __setitem__(self, key, value) -> None:
        super().__setitem__(key, value)
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


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
    flops_convention : {'causal', 'full'}
        How model FLOPs count the attention products (:mod:`workloads.flops`);
        stated in every result.
    """

    def __init__(self, fabric: Fabric, model: ModelSpec, *, catalog: Catalog | None = None,
                 runtime: Runtime = MEGATRON_CORE, gemm: GemmEfficiency = DEFAULT_GEMM,
                 backend=None, gpu: GpuSpec | None = None, flops_convention: str = "causal"):
        if flops_convention not in FLOPS_CONVENTIONS:
            raise FabricError("flops_convention", f"{flops_convention!r} not allowed; use one of "
                                                    f"{', '.join(FLOPS_CONVENTIONS)}")
        self.flops_convention = flops_convention
        self.fabric = fabric
        self.model = model
        self.catalog = catalog or load_catalog()
        self.runtime = runtime
        self.gemm = gemm
        self.backend = backend or default_backend()
        self.gpu = gpu or gpu_of(fabric, self.catalog)
        self._placements: Recent = Recent(PLACEMENTS_KEPT)
        self._comms: Recent = Recent(PLACEMENTS_KEPT)
        self._layers: dict[tuple, LayerTimes] = {}

    # Issue 19: TP larger than the HBD domain (e.g. TP 32 on 8-GPU DGX nodes), whole domains per group, its
    # traffic over the scale-out NICs; off by default, set by `fabric mfu --tp N` beyond the HBD (with a warning).
    tp_beyond_hbd: bool = False

    def with_gpu(self, gpu: GpuSpec) -> "StepModel":
        """A StepModel with other GPU numbers (e.g. kernel efficiencies), sharing placements and collectives."""
        if gpu == self.gpu:
            return self
        other = self._variant(gpu=gpu)
        other._placements, other._comms = self._placements, self._comms
        return other

    def with_gemm(self, gemm: GemmEfficiency) -> "StepModel":
        """A StepModel with another GEMM model, sharing placements and collective caches."""
        if gemm == self.gemm:
            return self
        other = self._variant(gemm=gemm)
        other._placements, other._comms = self._placements, self._comms
        return other

    def _variant(self, **changes) -> "StepModel":
        """A new StepModel of the same job, some constructor arguments changed (caches of its own)."""
        kw = dict(catalog=self.catalog, runtime=self.runtime, gemm=self.gemm, backend=self.backend, gpu=self.gpu,
                  flops_convention=self.flops_convention)
        return StepModel(self.fabric, self.model, **{**kw, **changes})

    def with_runtime(self, runtime: Runtime) -> "StepModel":
        """The same job's StepModel under another runtime (own caches); ``self`` when the runtime is already it.

        TP beyond the HBD, if allowed here, is allowed there too.
        """
        if runtime == self.runtime:
            return self
        other = self._variant(runtime=runtime)
        other.tp_beyond_hbd = self.tp_beyond_hbd
        return other

    def with_backend(self, backend) -> "StepModel":
        """The same job's StepModel timing its collectives with ``backend`` (own caches: times depend on it).

        TP beyond the HBD, if allowed here, is allowed there too; ``self`` when the backend is already it.
        """
        if backend is self.backend:
            return self
        other = self._variant(backend=backend)
        other.tp_beyond_hbd = self.tp_beyond_hbd
        return other

    @property
    def flash(self) -> bool:
        """Whether attention runs as one fused (flash) kernel.

        ``auto`` resolves by the training recipe: models with dropout (the
        GPT-3-style recipes of the Megatron papers, 2021-2022) ran Megatron-LM's
        fused scale-mask-softmax path with explicit score GEMMs, which flash
        attention replaced in every dropout-free recipe since (Llama, Mixtral,
        DeepSeek); set ``attention`` explicitly to override.
        """
        att = self.runtime.attention
        return att == "flash" or (att == "auto" and self.model.dropout == 0)

    @property
    def backend_name(self) -> str:
        return getattr(self.backend, "name", "custom")

    # ----------------------------------------------------------------- pieces
    def placement(self, par: Parallelism) -> RankPlacement:
        key = (par.tp, par.cp, par.dp, par.pp, par.ep, par.interleave > 1)
        pl = self._placements.get(key)
        if pl is None:
            pl = self._placements[key] = RankPlacement(self.fabric, par)
        return pl

    def comm(self, pl: RankPlacement) -> CommCache:
        """The collective-time cache of the placement's (possibly re-configured) Fabric."""
        c = self._comms.get(id(pl.fabric))
        if c is None or c.fabric is not pl.fabric:
            c = self._comms[id(pl.fabric)] = CommCache(pl.fabric, self.backend)
        return c

    def memory(self, par: Parallelism) -> MemoryReport:
        rt = self.runtime
        return memory_per_gpu(self.model, par, self.gpu.hbm_bytes, flash=self.flash,
                              grad_bytes=rt.grad_bytes, reserve_fraction=rt.memory_reserve,
                              reserve_bytes=rt.memory_reserve_bytes,
                              memory_efficient_norm=rt.memory_efficient_norm)

    def layer(self, par: Parallelism, moe: bool) -> LayerTimes:
        """Compute times of one layer (cached per shape-relevant fields)."""
        key = (moe, par.tp, par.cp, par.ep, par.micro_batch, par.sequence_parallel, par.recompute)
        t = self._layers.get(key)
        if t is None:
            t = self._layers[key] = layer_times(self.model, par, moe, self.gpu, self.gemm,
                                                flash=self.flash, fp8=self.runtime.fp8,
                                                flash_kernel=self.runtime.flash_kernel)
        return t

    def _layer_kinds(self) -> tuple[bool, ...]:
        m = self.model
        if not m.is_moe:
            return (False,)
        return (False, True) if m.dense_layers else (True,)

    def _stage_counts(self, par: Parallelism) -> list[tuple[int, int]]:
        """(dense layers, MoE layers) of every pipeline stage."""
        return [stage_layer_counts(self.model, par, st) for st in range(par.pp)]

    def _layer_comm(self, par: Parallelism, pl: RankPlacement, moe: bool, times: LayerTimes) -> dict[str, tuple]:
        """Exposed communication of one layer for one micro-batch: {dim: (forward, backward)} seconds."""
        m, c = self.model, self.comm(pl)
        b, s, h = par.micro_batch, m.seq_len, m.hidden
        act = 2.0 * b * s / par.cp * h  # bf16 activation of one micro-batch on one CP rank
        out: dict[str, tuple[float, float]] = {}
        if par.tp > 1:
            # forward: the collectives of the f / g operators (Korthikanti et al. 2022, Fig. 5), exposed.
            # backward: without SP the input-gradient all-reduce overlaps the column-parallel weight
            # gradient; with SP the gradient of the reduce-scatter is an all-gather needed before the
            # row-parallel backward (exposed), while the re-gather of the stored sharded input and the
            # input-gradient reduce-scatter overlap the column-parallel dgrad and wgrad GEMMs.
            n = 2 if (not moe or m.shared_experts or not par.sequence_parallel) else 1  # MoE without shared experts: no TP comm
            overlap = self.runtime.tp_overlap_backward
            if par.sequence_parallel:
                ag = c.time("all_gather", pl.tp_groups, act)
                rs = c.time("reduce_scatter", pl.tp_groups, act)
                fwd = n * (ag + rs)
                bwd = n * ag + (max(0.0, n * (ag + rs) - 2 * times.wgrad_column) if overlap else n * (ag + rs))
            else:
                ar = c.time("all_reduce", pl.tp_groups, act)
                fwd = n * ar
                bwd = max(0.0, n * ar - times.wgrad_column) if overlap else n * ar
            out["tp"] = (fwd, bwd)
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

    def _p2p(self, par: Parallelism, pl: RankPlacement) -> float:
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

    def stage_parts(self, par: Parallelism, pl: RankPlacement | None, with_comm: bool = True) -> list[dict[str, float]]:
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
        out_f, out_b = logits_times(m, par, self.gpu, self.gemm)  # bf16 also under fp8
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
        """One step of the pipeline from the stages' times per micro-batch (forward + backward).

        The critical path of 1F1B: the first micro-batch passes every stage
        forward and backward once, and the slowest stage then works without
        pause on the other ``m - 1``: ``m * max_i t_i + sum_{i != slowest} t_i``.
        Interleaved with ``v`` chunks, fill and drain pass one chunk of each
        stage: ``m * max_i t_i + sum_{i != slowest} t_i / v``.  For equal
        stages this is ``(m + (p - 1)/v) t``, the published bubble ``(p-1)/(v m)``
        (Narayanan et al. 2021; FIGURES).
        """
        slow = int(np.argmax(totals))
        rest = float(totals.sum() - totals[slow])
        return par.microbatches * float(totals[slow]) + rest / par.interleave

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
        params = [stage_params(m, par, st) for st in range(par.pp)]
        dense_p = max(p[0] for p in params)
        expert_p = max(p[1] for p in params)
        breakdown["dp"] = self._dp_exposed(par, pl, dense_p, expert_p)
        # optimizer, memory-bound over the local shard: Adam reads and writes the fp32 master weights and
        # both moments (24 B) and reads the gradient; the gradient is also read for the norm (clipping) and
        # the inf/nan check and zeroed after; the bf16 weights are written from the master copy (read 4, write 2)
        shard_d = par.dp * par.cp if par.zero >= 1 else 1
        shard_e = par.expert_dp if par.zero >= 1 else 1
        local = dense_p / shard_d + expert_p / shard_e
        breakdown["optimizer"] = self.gemm.memory_time(local * (30.0 + 4 * rt.grad_bytes), gpu.hbm_bandwidth)
        step = float(sum(breakdown.values()))
        conv = self.flops_convention
        mf = model_flops(m, par.global_batch, conv)
        # hardware FLOPs count the recomputation the runtime performs (flash attention's backward
        # recomputes the scores inside the kernel, so selective recomputation adds nothing there)
        executed = "none" if (par.recompute == "selective" and self.flash) else par.recompute
        hf = hardware_flops(m, par.global_batch, executed, conv)
        world, peak = par.world, self.peak_flops
        mem = self.memory(par)
        notes = [] if mem.fits else ["does not fit: " + mem.summary()]
        return StepResult(
            model=m.name, parallelism=par, gpu=gpu.item, gpus_used=world, gpus_total=self.fabric.n_gpus,
            step_time_s=step, mfu=mf / (step * world * peak), hfu=hf / (step * world * peak),
            cluster_mfu=mf / (step * self.fabric.n_gpus * peak), tflops_per_gpu=hf / (step * world) / 1e12,
            model_tflops_per_gpu=mf / (step * world) / 1e12, tokens_per_s=par.global_batch * m.seq_len / step,
            memory=mem, breakdown={k: float(v) for k, v in breakdown.items()}, comm_backend=self.backend_name,
            placement=pl.to_dict(), notes=notes, flops_convention=conv, precision=self.precision,
            peak_tflops=peak / 1e12, stage_layers=[sum(stage_layer_counts(m, par, st)) for st in range(par.pp)],
            slowest_stage=slow)

    @property
    def precision(self) -> str:
        """The precision of the weight GEMMs (``fp8`` or ``bf16``), whose dense peak MFU is relative to."""
        return "fp8" if self.runtime.fp8 else "bf16"

    @property
    def peak_flops(self) -> float:
        """Dense peak FLOP/s of the precision in use (MFU and HFU are relative to it)."""
        return self.gpu.peak_fp8_flops if self.runtime.fp8 else self.gpu.peak_bf16_flops

    def _dp_exposed(self, par: Parallelism, pl: RankPlacement, dense_p: float, expert_p: float) -> float:
        """Exposed DP communication and tied-embedding gradient sum after the pipeline (module docstring)."""
        m, rt, c = self.model, self.runtime, self.comm(pl)
        # overlap windows: the backward (incl. recomputation) of the last micro-batch on the first stage,
        # and the forward of the next step's first micro-batch
        t = self.layer(par, self._layer_kinds()[-1])
        n_layers = sum(stage_layer_counts(m, par, 0))
        window_b = n_layers * (t.bwd + t.recompute)
        window_f = n_layers * t.fwd
        total = 0.0
        for params, groups in ((dense_p, pl.dp_groups), (expert_p, pl.edp_groups)):
            if params <= 0 or groups.shape[1] < 2:
                continue
            # the expert-parallel buffers take the same bucket size as the dense ones (one DDP config); the
            # last bucket is an NCCL call of its own after the backward: timed at its size, with its latency
            bucket = min(params, rt.bucket(par.dp * par.cp))
            if par.zero >= 1:
                rs, rs_last = (c.time("reduce_scatter", groups, p * rt.grad_bytes) for p in (params, bucket))
                ag, ag_last = (c.time("all_gather", groups, p * rt.param_gather_bytes) for p in (params, bucket))
            else:
                rs, rs_last = (c.time("all_reduce", groups, p * rt.grad_bytes) for p in (params, bucket))
                ag = ag_last = 0.0
            total += max(rs - window_b, rs_last) if rt.overlap_grad_reduce else rs
            total += max(ag - window_f, ag_last) if rt.overlap_param_gather else ag
        if m.tied_embeddings and par.pp > 1:
            total += c.time("all_reduce", pl.embedding_pairs, m.vocab * m.hidden / par.tp * rt.grad_bytes)
        return total


def conventions(flops_convention: str, precision: str) -> dict[str, str]:
    """The accounting conventions of a result, in words (printed in the JSON and by ``fabric mfu --help``)."""
    attn = ("causal: attention score/context FLOPs over the lower triangle only (s^2/2), as a causal model needs "
            "and flash attention executes" if flops_convention == "causal" else
            "full: attention score/context FLOPs over the full s x s square (PaLM / Megatron formula "
            "72 B s l h^2 (1 + s/6h + V/12lh))")
    return {
        "attention_flops": attn,
        "mfu": f"model FLOPs (forward + backward = 3x forward, no recomputation) per second per GPU over the dense "
               f"{precision} peak of the GPU",
        "hfu": "hardware FLOPs (model FLOPs + the recomputation the runtime executes) over the same peak",
        "model_tflops_per_gpu": "model FLOPs / step time / GPUs used",
        "hardware_tflops_per_gpu": "hardware FLOPs / step time / GPUs used (tflops_per_gpu: same, older name)",
    }


def check_fit(result: StepResult) -> None:
    """Raise a one-line :class:`FabricError` with the numbers if ``result`` does not fit in HBM."""
    if not result.fits:
        raise FabricError("memory", f"{result.parallelism.label()} does not fit: {result.memory.summary()}; "
                                    "try --recompute full/selective, a larger --tp or --pp, or a smaller --micro-batch")


def evaluate(fabric: Fabric, model: ModelSpec, par: Parallelism, **kwargs) -> StepResult:
    """One design point: :meth:`StepModel.evaluate` with a fresh :class:`StepModel` (kwargs go to it)."""
    return StepModel(fabric, model, **kwargs).evaluate(par)
