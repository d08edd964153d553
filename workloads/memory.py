"""Peak HBM use per GPU: weights, gradients, optimizer states, activations, allowance.

Static memory counts the parameters a GPU holds (its pipeline stage; TP
splits attention and dense MLPs; EP splits experts; the first stage holds
the input embedding and the last the output layer) at ``param_bytes`` +
``grad_bytes`` + ``optimizer_bytes`` per parameter, sharded over the
data-parallel group by ZeRO stage (``Parallelism.zero``: 1 = Megatron's
distributed optimizer shards the optimizer states, 2 also the gradients,
3 / FSDP also the weights; Rajbhandari et al. 2020).  ZeRO-1 is Megatron's
distributed optimizer, ``6 + 12/d`` bytes per parameter with bf16 weights and
fp32 main gradients (Megatron-LM docs, distrib_optimizer.md): the gradient
buffer stays whole.

Activation memory follows Korthikanti et al. 2022 (arXiv 2205.05198), whose
GPT layer stores ``s b h (34 + 5 a s / h)`` bytes without parallelism; here
the same tensors are listed one by one so that GQA, SwiGLU, MoE, flash
attention and missing dropout change the count correctly, and so that TP
without sequence parallelism keeps ``10 s b h`` replicated (their eq. 2),
SP divides everything by ``t`` (eq. 4), selective recomputation drops the
``s^2`` terms and full recomputation keeps only each layer's input.
Each stage holds the micro-batches Megatron's schedule keeps in flight,
counted chunk by chunk (:func:`peak_held_layers`): ``min(p - i, m)`` under
1F1B, ``p (1 + (p-1)/(p v))`` on the first stage when interleaved
(Korthikanti et al., Sec. 4.2.3); one layer's full activations are live
during its backward with recomputation; the last stage adds the logits.
Every stage is counted and the largest reported.  Capacity is the HBM minus
the runtime's allowance (fragmentation fraction + fixed bytes for the CUDA
context and NCCL buffers; :data:`workloads.step.RUNTIME_SOURCES`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workloads.models import ModelSpec
from workloads.parallelism import Parallelism, layer_split

GB = 1e9


@dataclass(frozen=True)
class MemoryReport:
    """Bytes per GPU on the most loaded pipeline stage.

    Attributes
    ----------
    weights, grads, optimizer, activations, other : float
        Bytes; ``other`` is the output-layer logits buffer and the
        recomputation working set.
    capacity : float
        Usable HBM bytes (the GPU's HBM minus the reserve).
    hbm : float
        The GPU's HBM bytes.
    stage : int
        The pipeline stage these numbers are for.
    """

    weights: float
    grads: float
    optimizer: float
    activations: float
    other: float
    capacity: float
    hbm: float
    stage: int

    @property
    def total(self) -> float:
        return self.weights + self.grads + self.optimizer + self.activations + self.other

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    def to_dict(self) -> dict:
        return {"total_gb": self.total / GB, "weights_gb": self.weights / GB, "grads_gb": self.grads / GB,
                "optimizer_gb": self.optimizer / GB, "activations_gb": self.activations / GB,
                "other_gb": self.other / GB, "capacity_gb": self.capacity / GB, "hbm_gb": self.hbm / GB,
                "stage": self.stage, "fits": self.fits}

    def summary(self) -> str:
        """One line with the numbers, e.g. for a does-not-fit error."""
        return (f"{self.total / GB:.1f} GB per GPU (weights {self.weights / GB:.1f}, grads {self.grads / GB:.1f}, "
                f"optimizer {self.optimizer / GB:.1f}, activations {self.activations / GB:.1f}, "
                f"other {self.other / GB:.1f}) vs {self.capacity / GB:.1f} GB usable of {self.hbm / GB:.0f} GB HBM")


def layer_params(model: ModelSpec, par: Parallelism, moe: bool) -> tuple[float, float]:
    """Parameters of one layer on one GPU: (dense part, expert part)."""
    h, t = model.hidden, par.tp
    attn = model.attention_params()
    if model.is_mla:
        # down-projections are replicated over TP ranks, the rest is split
        down = h * (model.q_lora_rank + model.kv_lora_rank + model.rope_head_dim)
        attn_local = down + (attn - down) / t
    else:
        attn_local = attn / t
    dense = attn_local + 2 * h  # + two norm weights (replicated)
    if not moe:
        return dense + model.mlp_params(model.ffn_hidden) / t, 0.0
    dense += h * model.experts  # router
    dense += model.shared_experts * model.mlp_params(model.shared_ffn_hidden) / t
    experts = (model.experts / par.ep) * model.mlp_params(model.expert_ffn_hidden)
    return dense, experts


def stage_layer_counts(model: ModelSpec, par: Parallelism, stage: int) -> tuple[int, int]:
    """(dense layers, MoE layers) held by ``stage``: counted per chunk, not per layer (a file may give 2**24)."""
    total = n_moe = 0
    for lo, hi in _stage_ranges(model, par, stage):
        total += hi - lo
        if model.is_moe:  # layer i is an MoE layer if i >= dense_layers
            n_moe += max(0, hi - max(lo, model.dense_layers))
    return total - n_moe, n_moe


def stage_params(model: ModelSpec, par: Parallelism, stage: int) -> tuple[float, float]:
    """(dense, expert) parameters on one GPU of pipeline ``stage``.

    Layers are assigned to stages (and virtual chunks) in order; layer ``i``
    is an MoE layer if ``i >= dense_layers``.
    """
    n_dense, n_moe = stage_layer_counts(model, par, stage)
    d0, _ = layer_params(model, par, moe=False)
    d1, e1 = layer_params(model, par, moe=True) if n_moe else (0.0, 0.0)
    dense, experts = n_dense * d0 + n_moe * d1, n_moe * e1
    emb = model.vocab * model.hidden / par.tp
    if stage == 0:
        dense += emb
    if stage == par.pp - 1 and (par.pp > 1 or not model.tied_embeddings):
        dense += emb  # output layer (a copy of the tied embedding when pp > 1, as Megatron keeps)
    return dense, experts


def stage_layers(model: ModelSpec, par: Parallelism, stage: int) -> list[int]:
    """Layer indices held by ``stage`` (its ``interleave`` chunks; :func:`~workloads.parallelism.layer_split`)."""
    return [i for lo, hi in _stage_ranges(model, par, stage) for i in range(lo, hi)]


def _stage_ranges(model: ModelSpec, par: Parallelism, stage: int) -> list[tuple[int, int]]:
    """The half-open layer ranges ``[lo, hi)`` of the ``interleave`` chunks of ``stage``."""
    counts = layer_split(model, par)
    starts = [0]
    for c in counts:
        starts.append(starts[-1] + c)
    return [(starts[j], starts[j + 1]) for j in (c * par.pp + stage for c in range(par.interleave))]


def layer_activation_bytes(model: ModelSpec, par: Parallelism, moe: bool, *, flash: bool,
                           recompute: str | None = None, memory_efficient_norm: bool = False) -> float:
    """Bytes one layer stores for backward, per micro-batch, on one GPU.

    Parameters
    ----------
    flash : bool
        Fused (flash) attention: no ``s x s`` score tensors are stored, only
        the softmax log-sum-exp per query.
    recompute : str, optional
        Overrides ``par.recompute``; ``"none"`` gives the full working set of
        a layer (live while its backward runs).
    memory_efficient_norm : bool
        The norms keep their output (which the next linear stores anyway)
        instead of their input for the backward (Apex's memory-efficient
        fused norm, Megatron ``--memory-efficient-layer-norm``): the two
        ``2 Tn h`` norm inputs are not stored.
    """
    rc = par.recompute if recompute is None else recompute
    b, s, h, t = par.micro_batch, model.seq_len, model.hidden, par.tp
    T = b * s / par.cp  # tokens of this CP rank
    Tn = T / t if par.sequence_parallel else T  # tokens seen by norms/dropout (replicated without SP)
    drop = 1.0 if model.dropout > 0 else 0.0
    if rc == "full":
        return 2.0 * Tn * h  # the layer input only
    a_t = model.heads / t
    g_t = max(model.kv_heads / t, 1.0)
    d, dv = model.head_dim, model.v_head_dim
    norm_in = 0.0 if memory_efficient_norm else 2 * Tn * h
    # attention block
    act = norm_in + 2 * Tn * h  # norm input, QKV input (norm output)
    act += 2 * T * a_t * d + 2 * T * g_t * (d + dv)  # Q, K, V
    E = b * a_t * (s / par.cp) * s  # score elements
    if flash:
        act += 4 * b * a_t * s / par.cp  # log-sum-exp (fp32); the output is the projection input below
    elif rc != "selective":
        act += 2 * E + drop * 3 * E  # softmax output; dropout mask (1 B) and output (2 B)
    act += 2 * T * a_t * dv + drop * Tn * h  # projection input, dropout mask
    # MLP block
    act += norm_in + drop * Tn * h  # norm input, dropout mask
    mult = 2 if model.swiglu else 1
    if moe:
        T_loc = T / t
        rows = T_loc * model.top_k
        act += 2 * T_loc * h  # router / dispatch input
        act += 2 * rows * h + 2 * rows * mult * model.expert_ffn_hidden + 2 * rows * model.expert_ffn_hidden
        if model.shared_experts:
            f = model.shared_experts * model.shared_ffn_hidden
            act += 2 * Tn * h + 2 * T * mult * f / t + 2 * T * f / t
    else:
        f = model.ffn_hidden
        act += 2 * Tn * h + 2 * T * mult * f / t + 2 * T * f / t  # up input, activation input, down input
    return act


def inflight_microbatches(par: Parallelism, stage: int = 0) -> float:
    """Micro-batches of its layers that ``stage`` holds at its peak, for equal chunks (1F1B / interleaved).

    1F1B: stage ``i`` runs ``p - i - 1`` warm-up forwards and holds one more
    in the steady state: ``min(p - i, m)``.  Interleaved with ``v`` chunks:
    ``2 (p - i - 1) + (v - 1) p + 1`` chunk micro-batches (Megatron-Core's
    warm-up count), each ``1/v`` of the stage's layers; for stage 0 that is
    ``p (1 + (p - 1)/(p v))`` (Korthikanti et al. 2022, Sec. 4.2.3).
    :func:`peak_held_layers` counts unequal chunks exactly.
    """
    m, p, v = par.microbatches, par.pp, par.interleave
    if v == 1:
        return float(min(p - stage, m))
    chunks = min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v)
    return chunks / v


def peak_held_layers(par: Parallelism, stage: int, chunk_layers: list[int]) -> float:
    """Peak number of (layer, micro-batch) activations ``stage`` holds under Megatron's schedule.

    Forwards run chunk by chunk in groups of ``p`` micro-batches (chunk
    ``(k // p) % v`` for the ``k``-th forward), backwards in the reverse chunk
    order; after the warm-up forwards (:func:`inflight_microbatches`) every
    forward is followed by one backward.  The peak is taken over the steady
    state, so a chunk with fewer layers (the first and last, which hold the
    embedding and the output layer) holds less, as in Llama 3's layout.
    """
    m, p, v = par.microbatches, par.pp, par.interleave
    total = m * v
    k = np.arange(total)
    fwd_chunk = (k // p) % v if v > 1 else np.zeros(total, dtype=int)
    bwd_chunk = v - 1 - fwd_chunk
    layers = np.asarray(chunk_layers, dtype=float)
    f = np.cumsum(layers[fwd_chunk])
    b = np.concatenate([[0.0], np.cumsum(layers[bwd_chunk])])
    warm = min(2 * (p - stage - 1) + (v - 1) * p + 1, total) if v > 1 else min(p - stage, total)
    # after forward number warm-1+j (j >= 0) the first j backwards are done
    j = np.arange(total - warm + 1)
    return float(np.max(f[warm - 1 + j] - b[j]))


def _sharded_states(par: Parallelism, dense: float, experts: float, param_bytes: float, grad_bytes: float,
                    optimizer_bytes: float, layer_params_max: float) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes under ZeRO stage ``par.zero`` (DP-sharded parts divided).

    ZeRO-1 / Megatron's distributed optimizer shards the fp32 master weights
    and Adam moments; ZeRO-2 also the gradients; ZeRO-3 / FSDP also the bf16
    weights, keeping two layers gathered (the one computing and the one
    prefetched).  Dense weights are sharded over ``dp * cp``, expert weights
    over the expert-data-parallel group.
    """
    zero = par.zero
    sd = par.dp * par.cp
    se = par.expert_dp

    def part(level: int) -> float:
        return dense / sd + experts / se if zero >= level else dense + experts

    weights = param_bytes * part(3) + (2 * param_bytes * layer_params_max if zero >= 3 else 0.0)
    grads = grad_bytes * part(2) + (grad_bytes * layer_params_max if zero >= 2 else 0.0)
    return weights, grads, optimizer_bytes * part(1)


def memory_per_gpu(model: ModelSpec, par: Parallelism, hbm_bytes: float, *, flash: bool = True,
                   param_bytes: float = 2.0, grad_bytes: float = 4.0, optimizer_bytes: float = 12.0,
                   reserve_fraction: float = 0.1, reserve_bytes: float = 0.0,
                   memory_efficient_norm: bool = False) -> MemoryReport:
    """Peak memory of the most loaded pipeline stage (every stage is counted; the largest is reported).

    Parameters
    ----------
    hbm_bytes : float
        HBM capacity of the GPU (bytes).
    flash : bool
        Flash attention (no stored ``s^2`` tensors).
    param_bytes, grad_bytes, optimizer_bytes : float
        Bytes per parameter: bf16 weights (2), fp32 main gradients (4; 2 for
        fp16 gradients), fp32 master weights + Adam moments (12).  Sharded
        over DP according to ``par.zero`` (ZeRO 1/2/3, FSDP = 3).
    reserve_fraction, reserve_bytes : float
        The allowance for allocator fragmentation (a fraction of HBM) and
        for the CUDA context, NCCL buffers and framework workspaces (bytes):
        capacity = ``max(0, hbm_bytes * (1 - reserve_fraction) - reserve_bytes)``
        (values and their sources: :data:`workloads.step.RUNTIME_SOURCES`).
    memory_efficient_norm : bool
        Norms store their output, not their input (:func:`layer_activation_bytes`).
    """
    best: MemoryReport | None = None
    kinds = [False, True] if model.is_moe else [False]
    men = memory_efficient_norm
    stored = {moe: layer_activation_bytes(model, par, moe, flash=flash, memory_efficient_norm=men) for moe in kinds}
    working = {moe: layer_activation_bytes(model, par, moe, flash=flash, recompute="none", memory_efficient_norm=men)
               for moe in kinds}
    d0, _ = layer_params(model, par, moe=False)
    d1, e1 = layer_params(model, par, moe=True) if model.is_moe else (0.0, 0.0)
    layer_max = max(d0, d1 + e1)
    # an HBM smaller than the reserve (a catalog's hbm_bytes of 1 B) leaves nothing, not "-4.0 GB usable"
    capacity = max(0.0, hbm_bytes * (1 - reserve_fraction) - reserve_bytes)
    counts = layer_split(model, par)
    for st in range(par.pp):
        dense, experts = stage_params(model, par, st)
        weights, grads, opt = _sharded_states(par, dense, experts, param_bytes, grad_bytes, optimizer_bytes,
                                              layer_max)
        n_dense, n_moe = stage_layer_counts(model, par, st)
        # activations per layer of this stage (an MoE stage mixes kinds: use their mean)
        per_layer = (n_dense * stored[False] + (n_moe * stored[True] if n_moe else 0.0)) / max(n_dense + n_moe, 1)
        chunks = [counts[c * par.pp + st] for c in range(par.interleave)]
        if len(set(chunks)) == 1:  # equal chunks: the closed form (same as the schedule count, tested)
            held = inflight_microbatches(par, st) * sum(chunks)
        else:
            held = peak_held_layers(par, st, chunks)
        acts = per_layer * held
        other = 0.0
        if par.recompute != "none" and (n_dense or n_moe):
            # the layer being recomputed holds its full working set during backward
            other += max(working[moe] for moe, n in ((False, n_dense), (True, n_moe)) if n)
        if st == par.pp - 1:
            T = par.micro_batch * model.seq_len / par.cp
            other += 6.0 * T * model.vocab / par.tp  # bf16 logits + fp32 softmax for the loss, one micro-batch
        rep = MemoryReport(weights, grads, opt, acts, other, capacity, hbm_bytes, st)
        if best is None or rep.total > best.total:
            best = rep
    assert best is not None
    return best
