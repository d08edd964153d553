"""FLOPs from per-layer matmul counts reduce to the published closed forms."""

import pytest

from workloads.flops import (attention_gemms, gpt_hardware_flops_full, gpt_model_flops, hardware_flops,
                             layer_gemms, model_flops, recompute_flops)
from workloads.models import load_model, preset_names

MEGATRON = [n for n in preset_names() if n.startswith("megatron-")] + ["gpt3-175b"]


@pytest.mark.parametrize("name", MEGATRON)
def test_dense_gpt_matches_72_and_96_formulas(name):
    m = load_model(name)
    B, s, l, h, V = 512, m.seq_len, m.layers, m.hidden, m.vocab
    assert model_flops(m, B) == pytest.approx(gpt_model_flops(B, s, l, h, V), rel=1e-12)
    assert hardware_flops(m, B, "full") == pytest.approx(gpt_hardware_flops_full(B, s, l, h, V), rel=1e-12)


def test_selective_recomputes_the_core_attention():
    m = load_model("gpt3-175b")
    # 4 b s^2 h per layer: the score and context products
    assert recompute_flops(m, 1, "selective") == pytest.approx(4 * m.seq_len ** 2 * m.hidden * m.layers)
    assert recompute_flops(m, 1, "none") == 0


@pytest.mark.parametrize("tp, cp", [(2, 1), (8, 1), (4, 2)])
def test_parallel_shards_add_up_to_the_layer(tp, cp):
    m = load_model("llama3-70b")
    whole = sum(g.flops for g in layer_gemms(m, 2, moe=False))
    shard = sum(g.flops for g in layer_gemms(m, 2, moe=False, tp=tp, cp=cp))
    assert shard * tp * cp == pytest.approx(whole)


def test_moe_counts_active_experts_only():
    m = load_model("mixtral-8x7b")
    per_token = model_flops(m, 1) / (3 * m.seq_len)
    # 2 FLOPs per active weight per token, plus attention scores (2 * 2 * s * a * d per layer, causal not halved)
    attn = 4 * m.seq_len * m.heads * m.head_dim * m.layers
    assert per_token == pytest.approx(2 * m.active_params() + attn, rel=0.01)
    ep = sum(g.flops for g in layer_gemms(m, 1, moe=True, ep=8))
    assert ep == pytest.approx(sum(g.flops for g in layer_gemms(m, 1, moe=True)), rel=1e-9)


def test_gqa_shrinks_kv_projections():
    m = load_model("llama3-8b")
    qkv = next(g for g in attention_gemms(m, 1) if g.name == "qkv")
    assert qkv.n == m.hidden + 2 * m.kv_heads * m.head_dim
