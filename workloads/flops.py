"""Matrix multiplies of a transformer layer, and the model / hardware FLOPs derived from them.

Everything here counts the matrix multiplies (GEMMs and the batched GEMMs of
attention) one layer performs, shaped as one GPU sees them under tensor,
context and expert parallelism.  With all parallel sizes 1 the same lists give
the model FLOPs used for MFU, so the MFU numerator is *derived from the
per-layer matmul counts*; for a dense GPT it reduces exactly to

    model FLOPs    = 72 B s l h^2 (1 + s/6h + V/12lh)     (Korthikanti et al. 2022)
    hardware FLOPs = 96 B s l h^2 (1 + s/6h + V/16lh)     (full recomputation, Narayanan et al. 2021)

(FIGURES, performance conventions), which :func:`gpt_model_flops` and
:func:`gpt_hardware_flops_full` state in closed form and the tests compare.
For GQA, SwiGLU, MLA and MoE the same per-layer counting applies: K/V
projections are ``g/a`` of the query projection, a gated MLP has three
matrices, an MoE layer counts the router, ``top_k`` routed experts and the
shared experts per token.  Conventions, as in the formulas above: a multiply-add
is 2 FLOPs; the backward pass is twice the forward; element-wise work (norms,
softmax, activations) is not counted.

Attention convention (``convention``): ``"full"`` counts the score and context
products over the full s x s square, as the PaLM (Chowdhery et al. 2022, App. B)
and Megatron (Narayanan 2021, Korthikanti 2022) formulas above do; ``"causal"``
counts the lower triangle only (half), which is what a causal model needs and
what a flash-attention kernel executes, and how long-context MFU is reported
in practice (Llama 3, arXiv 2407.21783 Table 4: MFU falls from 8K to 131K).
The closed forms above are the ``"full"`` convention.
"""

from __future__ import annotations

from dataclasses import dataclass

from workloads.models import ModelSpec


@dataclass(frozen=True)
class Gemm:
    """``batch`` independent products of an (m x k) and a (k x n) matrix.

    Attributes
    ----------
    name : str
    m, n, k : float
        Matrix dimensions (elements).
    batch : float
        Number of such products (attention heads x sequences, local experts).
    tp_split : bool
        Whether the weight is split across tensor-parallel ranks.
    """

    name: str
    m: float
    n: float
    k: float
    batch: float = 1.0
    tp_split: bool = True

    @property
    def flops(self) -> float:
        """FLOPs of the forward product (2 per multiply-add)."""
        return 2.0 * self.m * self.n * self.k * self.batch


def attention_gemms(model: ModelSpec, b: int, *, tp: int = 1, cp: int = 1) -> list[Gemm]:
    """Forward matmuls of one attention block for ``b`` sequences on one GPU.

    Parameters
    ----------
    model : ModelSpec
    b : int
        Sequences in the micro-batch.
    tp : int
        Tensor-parallel size: heads split ``a/tp`` (K/V heads ``max(g/tp, 1)``:
        with fewer K/V heads than ranks they are replicated, as Megatron does).
    cp : int
        Context-parallel size: each rank holds ``s/cp`` queries and attends to
        all ``s`` keys (ring attention).
    """
    h, s = model.hidden, model.seq_len
    d, dv = model.head_dim, model.v_head_dim
    a_t = model.heads / tp
    g_t = max(model.kv_heads / tp, 1.0)
    T = b * s / cp
    out: list[Gemm] = []
    if model.is_mla:
        rope, nope = model.rope_head_dim, model.head_dim - model.rope_head_dim
        if model.q_lora_rank:
            out.append(Gemm("q_down", T, model.q_lora_rank, h, tp_split=False))
            out.append(Gemm("q_up", T, a_t * d, model.q_lora_rank))
        else:
            out.append(Gemm("q", T, a_t * d, h))
        out.append(Gemm("kv_down", T, model.kv_lora_rank + rope, h, tp_split=False))
        out.append(Gemm("kv_up", T, a_t * (nope + dv), model.kv_lora_rank))
    else:
        out.append(Gemm("qkv", T, a_t * d + g_t * (d + dv), h))
    out.append(Gemm("scores", s / cp, s, d, batch=b * a_t))
    out.append(Gemm("context", s / cp, dv, s, batch=b * a_t))
    out.append(Gemm("proj", T, h, a_t * dv))
    return out


def mlp_gemms(model: ModelSpec, b: int, width: int, *, tp: int = 1, cp: int = 1, name: str = "mlp") -> list[Gemm]:
    """Forward matmuls of a dense MLP of ``width`` (TP splits the width)."""
    T = b * model.seq_len / cp
    up = (2 if model.swiglu else 1) * width / tp
    return [Gemm(f"{name}_up", T, up, model.hidden), Gemm(f"{name}_down", T, model.hidden, width / tp)]


def moe_gemms(model: ModelSpec, b: int, *, tp: int = 1, cp: int = 1, ep: int = 1) -> list[Gemm]:
    """Forward matmuls of an MoE block on one GPU, experts balanced.

    Expert weights are not split by TP (expert tensor parallel size 1, the
    Megatron-Core "parallel folding" layout); sequence parallelism gives each
    TP rank ``1/tp`` of the tokens, which it dispatches to the ``ep`` ranks
    holding ``E/ep`` experts each.  Balanced routing gives each local expert
    ``tokens * top_k * ep / E`` rows.  Shared experts are TP-split like a dense MLP.
    """
    T_loc = b * model.seq_len / cp / tp
    E, k = model.experts, model.top_k
    mult = 2 if model.swiglu else 1
    local = E / ep
    rows = T_loc * k * ep / E
    out = [Gemm("router", T_loc, E, model.hidden, tp_split=False),
           Gemm("experts_up", rows, mult * model.expert_ffn_hidden, model.hidden, batch=local),
           Gemm("experts_down", rows, model.hidden, model.expert_ffn_hidden, batch=local)]
    if model.shared_experts:
        out += mlp_gemms(model, b, model.shared_experts * model.shared_ffn_hidden, tp=tp, cp=cp, name="shared")
    return out


def layer_gemms(model: ModelSpec, b: int, *, moe: bool, tp: int = 1, cp: int = 1, ep: int = 1) -> list[Gemm]:
    """Forward matmuls of one transformer layer (attention + dense MLP or MoE) on one GPU."""
    mlp = moe_gemms(model, b, tp=tp, cp=cp, ep=ep) if moe else mlp_gemms(model, b, model.ffn_hidden, tp=tp, cp=cp)
    return attention_gemms(model, b, tp=tp, cp=cp) + mlp


def logits_gemm(model: ModelSpec, b: int, *, tp: int = 1, cp: int = 1) -> Gemm:
    """The output-layer product (vocabulary split across TP ranks)."""
    return Gemm("logits", b * model.seq_len / cp, model.vocab / tp, model.hidden)


def forward_flops(gemms: list[Gemm]) -> float:
    return float(sum(g.flops for g in gemms))


def core_attention_flops(model: ModelSpec, b: int, *, tp: int = 1, cp: int = 1) -> float:
    """Forward FLOPs of the score and context products (what selective recomputation redoes)."""
    return float(sum(g.flops for g in attention_gemms(model, b, tp=tp, cp=cp) if g.name in ("scores", "context")))


CONVENTIONS = ("causal", "full")


def _layer_forward_flops(model: ModelSpec, moe: bool, convention: str) -> float:
    """Forward FLOPs of one layer for one sequence under the attention ``convention``."""
    if convention not in CONVENTIONS:
        raise ValueError(f"convention {convention!r} not allowed; use one of {', '.join(CONVENTIONS)}")
    gemms = layer_gemms(model, 1, moe=moe)
    half = 0.5 if convention == "causal" else 1.0
    return float(sum(g.flops * (half if g.name in ("scores", "context") else 1.0) for g in gemms))


def model_flops(model: ModelSpec, global_batch: int, convention: str = "full") -> float:
    """Model FLOPs of one training step (forward + backward, no recomputation).

    ``convention``: ``"full"`` (PaLM/Megatron, the default here for the
    closed forms) or ``"causal"`` (module docstring).

    Examples
    --------
    >>> from workloads.models import load_model
    >>> m = load_model("gpt3-175b")
    >>> abs(model_flops(m, 1536) / gpt_model_flops(1536, 2048, 96, 12288, 51200) - 1) < 1e-12
    True
    """
    dense = _layer_forward_flops(model, False, convention)
    moe = _layer_forward_flops(model, True, convention) if model.is_moe else 0.0
    per_seq = (model.layers - model.moe_layers) * dense + model.moe_layers * moe + logits_gemm(model, 1).flops
    return 3.0 * global_batch * per_seq


def recompute_flops(model: ModelSpec, global_batch: int, recompute: str, convention: str = "full") -> float:
    """Extra forward FLOPs of activation recomputation in one step.

    ``full`` recomputes every layer's forward (not the output layer);
    ``selective`` recomputes the core attention products; ``none`` nothing.
    """
    if recompute == "none":
        return 0.0
    half = 0.5 if convention == "causal" else 1.0
    if recompute == "selective":
        return global_batch * model.layers * core_attention_flops(model, 1) * half
    dense = _layer_forward_flops(model, False, convention)
    moe = _layer_forward_flops(model, True, convention) if model.is_moe else 0.0
    return global_batch * ((model.layers - model.moe_layers) * dense + model.moe_layers * moe)


def hardware_flops(model: ModelSpec, global_batch: int, recompute: str, convention: str = "full") -> float:
    """FLOPs the GPUs execute in one step: model FLOPs plus recomputation (``recompute`` as executed)."""
    return model_flops(model, global_batch, convention) + recompute_flops(model, global_batch, recompute, convention)


def gpt_model_flops(B: int, s: int, l: int, h: int, V: int) -> float:
    """Closed form 72 B s l h^2 (1 + s/6h + V/12lh) (Korthikanti et al. 2022; FIGURES)."""
    return 72.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h))


def gpt_hardware_flops_full(B: int, s: int, l: int, h: int, V: int) -> float:
    """Closed form 96 B s l h^2 (1 + s/6h + V/16lh) with full recomputation (Narayanan et al. 2021; FIGURES)."""
    return 96.0 * B * s * l * h * h * (1 + s / (6 * h) + V / (16 * l * h))
