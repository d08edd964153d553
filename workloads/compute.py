"""Compute time on one GPU: an achieved-GEMM-efficiency model and memory-bound kernels.

GEMM model
----------
A product of ``batch`` (m x k)(k x n) matrices takes the longer of its
compute time and its HBM time (a roofline)::

    t = max( 2 m n k batch / (peak * eta(m, n, k)),
             bytes * batch * (m k + k n + m n) / (hbm_bandwidth * mem_efficiency) )

    eta(m, n, k) = eta_max * m/(m + d0) * n/(n + d0) * k/(k + d0)

``eta_max`` is the fraction of the dense peak a large GEMM sustains inside a
training step and ``d0`` the matrix dimension at which a small dimension
halves it (tile and wave quantisation, short inner loops).  The product is
symmetric in (m, n, k), so the two backward products of a layer (data and
weight gradient: the same three dimensions permuted) take exactly twice the
forward time, as their FLOPs do.

Calibration (see :data:`DEFAULT_GEMM` and ``workloads.validation``): ``eta_max``
and ``d0`` are fitted by least squares on the relative iteration-time error of
three *calibration rows* of Korthikanti et al. 2022 (22B, 175B and 1T: small,
middle and large models) on DGX A100 and judged on every other row of every
set, which are not used.

Other GPUs (:meth:`GemmEfficiency.for_gpu`, :class:`KernelEfficiency`, values
and sources in ``workloads/presets/kernels/gpu-efficiency.yaml``): the A100
curve is carried over with ``eta_max`` scaled by the ratio of the GPUs'
maximum achievable matmul fractions (MAMF: 80.1 % on H100 vs 85.9 % on A100)
times their sustained in-training fraction (1 on A100 by definition; for H100
fitted on one declared Llama 3 row, 0.778), and ``d0`` scaled by the ratio of
their machine balances (dense peak / HBM bandwidth, from the catalog: a faster
GPU needs larger matrices to amortise the same operand traffic and tile
quantisation).

Per operator: weight GEMMs by their shape (above); attention either as one
flash kernel timed at the kernel's own published throughput (causal blocks
skipped; FlashAttention-2 on A100, FlashAttention-3 / cuDNN class on Hopper and
later; a short key loop ``s/cp`` costs ``d0/(s/cp + d0)`` as a GEMM's short
dimension does) or as explicit score/context batched GEMMs plus the
memory-bound scale-mask-softmax and dropout kernels over the ``s x s`` scores;
norms, activations, residual adds and the optimizer step by the bytes they move.

Memory-bound kernels
--------------------
Norms, softmax, dropout, activations, residual adds, token permutation,
cross-entropy and the optimizer step are timed by the bytes they move at
``hbm_bandwidth * mem_efficiency`` (``mem_efficiency`` assumed 0.85, about
what a streaming kernel reaches on A100/H100 HBM, not fitted).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace

from workloads.flops import Gemm


@dataclass(frozen=True)
class GemmEfficiency:
    """Parameters of the achieved-GEMM-efficiency model (module docstring).

    Attributes
    ----------
    eta_max : float
        Fraction of the dense peak a large GEMM reaches.
    d0 : float
        Matrix dimension (elements) at which one small dimension halves efficiency.
    ceiling : float
        No product exceeds this fraction of the peak: the GPU's maximum
        achievable matmul FLOP/s (set by :meth:`for_gpu`; 1 = no ceiling).
    mem_efficiency : float
        Fraction of the HBM bandwidth memory-bound kernels reach (assumed).
    source : str
        Where the values come from.
    """

    eta_max: float
    d0: float
    mem_efficiency: float = 0.85
    source: str = ""
    calibration_gpu: str = "gpu_a100"
    ceiling: float = 1.0

    def efficiency(self, m: float, n: float, k: float) -> float:
        """Achieved fraction of peak for an (m x k)(k x n) product."""
        d0 = self.d0
        return min(self.eta_max * (m / (m + d0)) * (n / (n + d0)) * (k / (k + d0)), self.ceiling)

    def gemm_time(self, g: Gemm, peak_flops: float, hbm_bandwidth: float, dtype_bytes: float = 2.0) -> float:
        """Seconds for the forward product ``g`` (the backward takes twice this)."""
        t_compute = g.flops / (peak_flops * self.efficiency(g.m, g.n, g.k))
        moved = dtype_bytes * g.batch * (g.m * g.k + g.k * g.n + g.m * g.n)
        return max(t_compute, moved / (hbm_bandwidth * self.mem_efficiency))

    def memory_time(self, nbytes: float, hbm_bandwidth: float) -> float:
        """Seconds for a memory-bound kernel moving ``nbytes``."""
        return nbytes / (hbm_bandwidth * self.mem_efficiency)

    def for_gpu(self, gpu: "GpuSpec") -> "GemmEfficiency":
        """The curve carried from the calibration GPU to ``gpu`` (module docstring, *Other GPUs*).

        ``eta_max`` scales with the GPU's maximum achievable matmul fraction
        (:class:`KernelEfficiency` ``matmul``) and ``d0`` with its machine
        balance (dense peak / HBM bandwidth); on the calibration GPU both
        ratios are 1 and the curve is unchanged.
        """
        ref = self.reference
        if gpu.kernels is None or ref is None:
            return self
        k, kr = gpu.kernels, ref.kernels
        if gpu.item == ref.item:  # the calibration GPU: only the ceiling (no GEMM beats the MAMF)
            return replace(self, ceiling=min(self.ceiling, k.matmul), calibration_gpu="")
        eta = self.eta_max * (k.matmul * k.training) / (kr.matmul * kr.training)
        d0 = self.d0 * (gpu.peak_bf16_flops / gpu.hbm_bandwidth) / (ref.peak_bf16_flops / ref.hbm_bandwidth)
        how = (f"{self.source}; carried from {ref.item} to {gpu.item}: eta_max x (MAMF x in-training fraction) "
               f"ratio, d0 x machine-balance ratio, capped at the MAMF")
        return replace(self, eta_max=eta, d0=d0, ceiling=min(self.ceiling, k.matmul), calibration_gpu="", source=how)

    @property
    def reference(self) -> "GpuSpec | None":
        """The GPU the curve was calibrated on (``calibration_gpu``), from the catalog."""
        if not self.calibration_gpu:
            return None
        return _reference_gpu(self.calibration_gpu)

    def with_values(self, **changes) -> "GemmEfficiency":
        return replace(self, **changes)

    def to_dict(self) -> dict:
        return {"eta_max": self.eta_max, "d0": self.d0, "mem_efficiency": self.mem_efficiency,
                "ceiling": self.ceiling, "source": self.source, "calibration_gpu": self.calibration_gpu}


# Fitted by workloads.validation.Validator.calibrate() on rows 22B selective+SP, 175B full and 1T selective+SP of
# korthikanti2022-table.csv (DGX A100, default runtime, collectives timed by fabric.sim); every other row of every
# set is held out.  eta_max sits at its bound (validation.ETA_MAX_BOUND): d0 carries the size dependence.
DEFAULT_GEMM = GemmEfficiency(
    eta_max=0.95, d0=339.4, mem_efficiency=0.85,
    source="calibrated: least squares on rows 22B selective+SP, 175B full, 1T selective+SP of "
           "korthikanti2022-table.csv (Korthikanti et al. 2022, DGX A100); other rows and sets held out; "
           "eta_max at its bound 0.95 (assumed); mem_efficiency assumed",
)


# --------------------------------------------------------------------------- per-GPU kernel efficiencies
KERNELS_FILE = "kernels/gpu-efficiency.yaml"


@dataclass(frozen=True)
class KernelEfficiency:
    """Per-GPU kernel efficiencies (``workloads/presets/kernels/gpu-efficiency.yaml``, each with its source).

    Attributes
    ----------
    matmul : float
        Maximum achievable bf16 matmul FLOP/s over the dense peak (MAMF).
    training : float
        Sustained in-training fraction of ``matmul`` relative to the
        calibration GPU's (1 on it; fitted on a declared row for H100).
    flash_fwd, flash_bwd : float
        Fused flash-attention forward / backward FLOP/s over the dense peak
        (causal, head dim 128, long sequences): the best published kernel on
        the GPU (FlashAttention-2 on A100; FlashAttention-3 / cuDNN 9 class on
        Hopper and later).
    fa2_fwd, fa2_bwd : float or None
        The same for FlashAttention-2 on this GPU (what frameworks ran on
        Hopper before FlashAttention-3 and cuDNN 9 fused attention, mid-2024;
        ``Runtime.flash_kernel == 'fa2'``).  None: the same as ``flash_*``.
    sources : dict
        Field -> source.
    """

    matmul: float
    flash_fwd: float
    flash_bwd: float
    training: float = 1.0
    sources: dict = field(default_factory=dict, compare=False, hash=False)
    fa2_fwd: float | None = None
    fa2_bwd: float | None = None

    def flash(self, kernel: str = "best") -> tuple[float, float]:
        """(forward, backward) fraction of the dense peak of the flash kernel ``kernel`` ('best' or 'fa2')."""
        if kernel == "fa2" and self.fa2_fwd is not None and self.fa2_bwd is not None:
            return self.fa2_fwd, self.fa2_bwd
        return self.flash_fwd, self.flash_bwd

    def with_training(self, training: float) -> "KernelEfficiency":
        return replace(self, training=training)


@functools.lru_cache(maxsize=1)
def _kernel_table() -> dict:
    import yaml
    from importlib import resources

    return yaml.safe_load((resources.files("workloads") / "presets" / KERNELS_FILE).read_text())


def kernel_efficiency(item: str) -> KernelEfficiency | None:
    """The kernel efficiencies of catalog GPU ``item`` (``None`` if the file has no entry for it)."""
    row = _kernel_table().get(item)
    if row is None:
        return None
    fa2 = {k: float(row[k]["value"]) if k in row else None for k in ("fa2_fwd", "fa2_bwd")}
    return KernelEfficiency(float(row["matmul"]["value"]), float(row["flash_fwd"]["value"]),
                            float(row["flash_bwd"]["value"]), float(row["training"]["value"]),
                            {k: v["source"] for k, v in row.items()}, **fa2)


@functools.lru_cache(maxsize=8)
def _reference_gpu(item: str) -> "GpuSpec":
    from fabric.catalog import load_catalog

    return GpuSpec.from_catalog(load_catalog(), item)


# --------------------------------------------------------------------------- one layer on one GPU
@dataclass(frozen=True)
class GpuSpec:
    """The numbers of a GPU the step model needs (from the catalog).

    Attributes
    ----------
    item : str
        Catalog id.
    peak_bf16_flops, peak_fp8_flops : float
        Dense peak, FLOP/s.
    hbm_bytes : float
    hbm_bandwidth : float
        Bytes/s.
    """

    item: str
    peak_bf16_flops: float
    peak_fp8_flops: float
    hbm_bytes: float
    hbm_bandwidth: float
    kernels: KernelEfficiency | None = None

    @classmethod
    def from_catalog(cls, catalog, item: str) -> "GpuSpec":
        return cls(item, catalog.value(item, "peak_bf16_flops"), catalog.value(item, "peak_fp8_flops"),
                   catalog.value(item, "hbm_bytes"), catalog.value(item, "hbm_bandwidth"),
                   kernel_efficiency(item))


@dataclass(frozen=True)
class LayerTimes:
    """Seconds one layer takes for one micro-batch on one GPU, without communication.

    Attributes
    ----------
    fwd, bwd : float
        Forward and backward compute.
    recompute : float
        Extra forward work in the backward pass (full or selective recomputation).
    attn_fwd, attn_bwd : float
        The core-attention part of ``fwd`` / ``bwd`` (what context-parallel
        ring exchanges overlap with).
    wgrad_column : float
        Backward weight-gradient GEMMs of the column-parallel layers (QKV and
        MLP up-projections), what Megatron overlaps the backward TP
        collectives with.
    """

    fwd: float
    bwd: float
    recompute: float
    attn_fwd: float
    attn_bwd: float
    wgrad_column: float = 0.0


def layer_times(model, par, moe: bool, gpu: GpuSpec, gemm: GemmEfficiency, *, flash: bool,
                fp8: bool = False, flash_kernel: str = "best") -> LayerTimes:
    """Compute time of one layer (module docstring: GEMM model + memory-bound kernels).

    Parameters
    ----------
    model : ModelSpec
    par : Parallelism
    moe : bool
        An MoE layer (else a dense MLP).
    flash : bool
        Fused flash attention (causal blocks skipped: half the score FLOPs;
        backward 2.5x forward, FlashAttention-2) instead of explicit score
        GEMMs, softmax and dropout kernels over ``s x s`` tensors (Megatron 2021).
    fp8 : bool
        Weight GEMMs at the fp8 peak (attention stays bf16).
    flash_kernel : {'best', 'fa2'}
        Which flash kernel's throughput (:meth:`KernelEfficiency.flash`).
    """
    from workloads.flops import layer_gemms

    gemm = gemm.for_gpu(gpu)
    peak16 = gpu.peak_bf16_flops
    peak_w = gpu.peak_fp8_flops if fp8 else peak16
    bw = gpu.hbm_bandwidth
    b, s, h, t = par.micro_batch, model.seq_len, model.hidden, par.tp
    T = b * s / par.cp
    Tn = T / t if par.sequence_parallel else T
    drop = 1.0 if model.dropout > 0 else 0.0
    gemms = layer_gemms(model, b, moe=moe, tp=t, cp=par.cp, ep=par.ep)
    w_fwd = attn_fwd = column = 0.0
    flash_fwd = flash_bwd = 0.0
    eff_fwd, eff_bwd = gpu.kernels.flash(flash_kernel) if gpu.kernels is not None else (0.0, 0.0)
    for g in gemms:
        if g.name in ("scores", "context"):
            if flash:
                # one fused kernel, causal masking skips half the blocks; timed at the kernel's own
                # published throughput (KernelEfficiency), or on the GEMM curve for a GPU without one
                executed = 0.5 * g.flops
                if gpu.kernels is not None:
                    # short key loops (per call: s / cp keys under ring CP) do not amortise the
                    # kernel's prologue and epilogue; same d0 as the GEMMs
                    keys = s / par.cp
                    short = keys / (keys + gemm.d0)
                    flash_fwd += executed / (peak16 * eff_fwd * short)
                    flash_bwd += 2.5 * executed / (peak16 * eff_bwd * short)
                else:
                    t_g = executed / (peak16 * gemm.efficiency(g.m, g.n, g.k))
                    flash_fwd += t_g
                    flash_bwd += 2.5 * t_g
            else:
                attn_fwd += gemm.gemm_time(g, peak16, bw)
        else:
            t_g = gemm.gemm_time(g, peak_w, bw, dtype_bytes=1.0 if fp8 else 2.0)
            w_fwd += t_g
            if g.tp_split and (g.name in ("qkv", "q", "q_up", "kv_up") or g.name.endswith("_up")):
                column += t_g  # its weight gradient takes as long as its forward
    if flash:
        attn_fwd, attn_bwd = flash_fwd, flash_bwd
    else:
        attn_bwd = 2.0 * attn_fwd
    # memory-bound kernels: bytes moved (2-byte activations, 1-byte dropout masks)
    mult_f = 6.0 if model.swiglu else 4.0   # activation forward: read 2 (or 4) + write 2 per output element
    mult_b = 10.0 if model.swiglu else 6.0  # activation backward
    mem_f = 8 * Tn * h + 2 * (6 + drop) * Tn * h   # two norms, two (bias-)dropout-residual adds
    mem_b = 12 * Tn * h + 2 * (6 + drop) * Tn * h
    if moe:
        T_loc = T / t
        rows = T_loc * model.top_k
        mem_f += mult_f * rows * model.expert_ffn_hidden + 8 * rows * h  # activation, permute + unpermute
        mem_b += mult_b * rows * model.expert_ffn_hidden + 8 * rows * h
        if model.shared_experts:
            f = model.shared_experts * model.shared_ffn_hidden
            mem_f += mult_f * T * f / t
            mem_b += mult_b * T * f / t
    else:
        mem_f += mult_f * T * model.ffn_hidden / t
        mem_b += mult_b * T * model.ffn_hidden / t
    attn_mem_f = attn_mem_b = 0.0
    if not flash:
        E = b * (model.heads / t) * (s / par.cp) * s
        attn_mem_f = (4 + 5 * drop) * E  # scale-mask-softmax; dropout
        attn_mem_b = (6 + 5 * drop) * E
    attn_fwd += gemm.memory_time(attn_mem_f, bw)
    attn_bwd += gemm.memory_time(attn_mem_b, bw)
    fwd = w_fwd + attn_fwd + gemm.memory_time(mem_f, bw)
    bwd = 2 * w_fwd + attn_bwd + gemm.memory_time(mem_b, bw)
    if par.recompute == "full":
        rec = fwd
    elif par.recompute == "selective" and not flash:
        rec = attn_fwd  # the core attention (flash attention recomputes it inside its backward anyway)
    else:
        rec = 0.0
    return LayerTimes(fwd, bwd, rec, attn_fwd, attn_bwd, column)


def logits_times(model, par, gpu: GpuSpec, gemm: GemmEfficiency) -> tuple[float, float]:
    """(forward, backward) seconds of the output layer and the cross-entropy loss, one micro-batch.

    Always at the bf16 peak, also in an fp8 run: Megatron-Core's output layer
    is its own ``tensor_parallel.ColumnParallelLinear`` (a plain bf16 matmul),
    not a Transformer Engine module, so Transformer Engine's fp8 autocast does
    not reach it (only the Transformer layers' linear layers run in fp8).
    """
    from workloads.flops import logits_gemm

    gemm = gemm.for_gpu(gpu)
    g = logits_gemm(model, par.micro_batch, tp=par.tp, cp=par.cp)
    t = gemm.gemm_time(g, gpu.peak_bf16_flops, gpu.hbm_bandwidth)
    elems = g.m * g.n
    # vocab-parallel cross-entropy in fp32: about 3 passes forward, 2 backward
    return (t + gemm.memory_time(12 * elems, gpu.hbm_bandwidth), 2 * t + gemm.memory_time(8 * elems, gpu.hbm_bandwidth))


def embedding_times(model, par, gpu: GpuSpec, gemm: GemmEfficiency) -> tuple[float, float]:
    """(forward, backward) seconds of the input embedding lookup (a gather and a scatter-add)."""
    gemm = gemm.for_gpu(gpu)
    T = par.micro_batch * model.seq_len / par.cp
    nbytes = 4 * T * model.hidden
    return gemm.memory_time(nbytes, gpu.hbm_bandwidth), gemm.memory_time(2 * nbytes, gpu.hbm_bandwidth)
