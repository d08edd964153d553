"""Activation and static memory against Korthikanti et al. 2022 and the usual bytes per parameter."""

import pytest

from workloads.memory import layer_activation_bytes, memory_per_gpu, stage_params
from workloads.models import load_model
from workloads.parallelism import Parallelism

GPT3 = load_model("gpt3-175b")  # GeLU, MHA, dropout 0.1: the paper's GPT layer


def _sbh(par):
    return GPT3.seq_len * par.micro_batch * GPT3.hidden


@pytest.mark.parametrize("t", [1, 2, 8])
def test_korthikanti_equations(t):
    s, h, a = GPT3.seq_len, GPT3.hidden, GPT3.heads
    base = Parallelism(tp=t, micro_batch=2, global_batch=2)
    sbh = _sbh(base)
    # eq. 2: tensor parallel, no SP, no recompute
    assert layer_activation_bytes(GPT3, base, False, flash=False) == pytest.approx(
        sbh * (10 + 24 / t + 5 * a * s / (h * t)))
    if t > 1:
        sp = base.replace(sequence_parallel=True)
        assert layer_activation_bytes(GPT3, sp, False, flash=False) == pytest.approx(sbh / t * (34 + 5 * a * s / h))
        sel = sp.replace(recompute="selective")
        assert layer_activation_bytes(GPT3, sel, False, flash=False) == pytest.approx(sbh / t * 34)
    full = base.replace(recompute="full")
    assert layer_activation_bytes(GPT3, full, False, flash=False) == pytest.approx(2 * sbh)


def test_static_bytes_per_parameter():
    par = Parallelism(tp=8, pp=8, dp=16, global_batch=16, distributed_optimizer=False, recompute="full")
    rep = memory_per_gpu(GPT3, par, 80e9, flash=True)
    dense, experts = stage_params(GPT3, par, rep.stage)
    assert rep.weights == pytest.approx(2 * dense) and rep.grads == pytest.approx(4 * dense)
    assert rep.optimizer == pytest.approx(12 * dense)
    zero1 = memory_per_gpu(GPT3, par.replace(distributed_optimizer=True), 80e9, flash=True)
    assert zero1.optimizer == pytest.approx(12 * dense / 16)


def test_does_not_fit_is_reported_with_numbers():
    rep = memory_per_gpu(GPT3, Parallelism(tp=8, dp=8, global_batch=8), 80e9, flash=True)
    assert not rep.fits
    text = rep.summary()
    assert "GB per GPU" in text and "weights" in text and "72.0 GB usable of 80 GB" in text
    ok = memory_per_gpu(GPT3, Parallelism(tp=8, pp=16, dp=1, global_batch=16, recompute="full"), 80e9, flash=True)
    assert ok.fits and ok.total < ok.capacity


def test_pipeline_holds_p_microbatches_interleaving_more():
    one = Parallelism(tp=8, pp=8, global_batch=64, recompute="full")
    inter = one.replace(interleave=2)
    a = memory_per_gpu(GPT3, one, 80e9).activations
    b = memory_per_gpu(GPT3, inter, 80e9).activations
    assert b == pytest.approx(a * (1 + 7 / 16))


def test_moe_experts_split_by_ep():
    m = load_model("mixtral-8x7b")
    p1 = stage_params(m, Parallelism(ep=1, dp=8, global_batch=8), 0)
    p8 = stage_params(m, Parallelism(ep=8, dp=8, global_batch=8), 0)
    assert p8[1] == pytest.approx(p1[1] / 8) and p8[0] == pytest.approx(p1[0])


@pytest.mark.parametrize("stage, published_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_stages_match_the_zero_paper(stage, published_gb):
    """Rajbhandari et al. 2020 (ZeRO, arXiv 1910.02054) Fig. 1: a 7.5B model, 64-way DP, fp16 weights and
    gradients, fp32 Adam (K = 12): 120 / 31.4 / 16.6 / 1.9 GB of model states per GPU for ZeRO 0-3 (exact
    arithmetic 16, 4 + 12/64, 2 + 14/64, 16/64 bytes per parameter; the figure excludes working buffers)."""
    from workloads.memory import _sharded_states

    psi = 7.5e9
    par = Parallelism(dp=64, global_batch=64, zero_stage=stage)
    w, g, o = _sharded_states(par, psi, 0.0, 2.0, 2.0, 12.0, layer_params_max=0.0)
    assert (w + g + o) / 1e9 == pytest.approx(published_gb, abs=0.05)


def test_peak_held_layers_closed_forms():
    """Megatron's schedules: 1F1B holds min(p - i, m) micro-batches on stage i; interleaved stage 0 holds
    p (1 + (p-1)/(p v)) (Korthikanti et al. 2022 Sec. 4.2.3); a chunk without layers holds nothing."""
    from workloads.memory import inflight_microbatches, peak_held_layers

    for p, v, m in [(4, 1, 8), (8, 1, 4), (4, 2, 8), (8, 4, 64), (16, 8, 32)]:
        par = Parallelism(pp=p, interleave=v, global_batch=m)
        for st in range(p):
            assert peak_held_layers(par, st, [1] * v) / v == pytest.approx(inflight_microbatches(par, st))
        if v > 1 and m >= p:
            assert inflight_microbatches(par, 0) == pytest.approx(p * (1 + (p - 1) / (p * v)))
    par = Parallelism(pp=16, interleave=8, global_batch=16)
    assert peak_held_layers(par, 0, [0] + [1] * 7) == pytest.approx(16 * 7)  # Llama 3's lighter first chunk


def test_llama3_405b_fits_without_recomputation_on_80gb():
    """The published run (TP 8, PP 16 of 126 layers, seq 8K, no checkpointing, optimizer and gradients sharded
    over DP 64; arXiv 2407.21783 Sec. 3.3) fits in an H100's 80 GiB with the catalogued allowance."""
    m = load_model("llama3-405b")
    par = Parallelism(tp=8, pp=16, dp=64, global_batch=2048, sequence_parallel=True, recompute="none", zero_stage=2)
    rep = memory_per_gpu(m, par, 80 * 2**30, flash=True, reserve_fraction=0.05, reserve_bytes=4e9)
    assert rep.fits and rep.activations > 0.7 * rep.total
    # the same without sharded gradients and with fp32 unsharded gradients costs ~13 GB more
    one = memory_per_gpu(m, par.replace(zero_stage=1), 80 * 2**30, flash=True)
    assert one.grads - rep.grads > 10e9


def test_memory_efficient_norm_drops_the_two_norm_inputs():
    """Megatron --memory-efficient-layer-norm: the norms keep their output (stored by the next linear anyway),
    so exactly the two norm inputs, 2 x 2 bytes x (s b h / t with SP), are not stored."""
    llama = load_model("llama3-405b")
    par = Parallelism(tp=8, pp=16, micro_batch=1, global_batch=32, sequence_parallel=True)
    a = layer_activation_bytes(llama, par, False, flash=True)
    b = layer_activation_bytes(llama, par, False, flash=True, memory_efficient_norm=True)
    assert a - b == pytest.approx(4 * llama.seq_len * llama.hidden / 8)
    full = par.replace(recompute="full")
    assert layer_activation_bytes(llama, full, False, flash=True, memory_efficient_norm=True) == pytest.approx(
        layer_activation_bytes(llama, full, False, flash=True))


@pytest.mark.parametrize("pp, v, dense_layers, layers", [(1, 1, 0, 4), (4, 1, 3, 26), (4, 2, 1, 30), (3, 2, 5, 13),
                                                         (2, 4, 0, 16), (5, 1, 12, 13)])
def test_stage_layer_counts_match_counting_the_layers_one_by_one(pp, v, dense_layers, layers):
    """Counted per chunk [lo, hi): equal to the brute force over the layer indices (exact: integer counts)."""
    from workloads.memory import stage_layer_counts, stage_layers
    from workloads.models import ModelSpec

    moe = ModelSpec.from_dict({"hidden": 512, "layers": layers, "heads": 8, "vocab": 1000, "seq_len": 1024,
                               "experts": 4, "top_k": 2, "expert_ffn_hidden": 512, "dense_layers": dense_layers})
    par = Parallelism(pp=pp, interleave=v, global_batch=pp * 4)
    for st in range(pp):
        idx = stage_layers(moe, par, st)
        n_moe = sum(1 for i in idx if i >= dense_layers)
        assert stage_layer_counts(moe, par, st) == (len(idx) - n_moe, n_moe)


def test_a_model_of_2_24_layers_is_sized_without_a_list_per_layer(monkeypatch):
    """A model file may give 2**24 layers: `fabric mfu` took 70 s (goodput > 2 min) building per-layer lists."""
    import workloads.memory as memory
    from workloads.models import ModelSpec

    def per_layer(*a, **k):
        raise AssertionError("a list per layer")

    monkeypatch.setattr(memory, "stage_layers", per_layer)
    deep = ModelSpec.from_dict({"hidden": 1024, "layers": 1 << 24, "heads": 8, "vocab": 32000, "seq_len": 2048})
    rep = memory_per_gpu(deep, Parallelism(tp=8, pp=2, global_batch=8), 80e9, flash=True)
    assert not rep.fits


def test_an_hbm_below_the_reserve_leaves_zero_usable_not_negative():
    """A catalog may give hbm_bytes 1 B: the usable memory was hbm - reserve = -4.0 GB in the error message."""
    rep = memory_per_gpu(GPT3, Parallelism(tp=8, pp=8, dp=1, global_batch=8), 1.0, flash=True, reserve_bytes=4e9)
    assert rep.capacity == 0.0 and not rep.fits and "vs 0.0 GB usable" in rep.summary()
