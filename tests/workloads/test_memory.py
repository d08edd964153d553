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
