"""Validation of parallel configurations: every rule names its flag."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.errors import FabricError
from fabric.model import HBDSpec
from workloads.models import load_model
from workloads.parallelism import Parallelism, validate

GPT3 = load_model("gpt3-175b")
MIXTRAL = load_model("mixtral-8x7b")
LLAMA8 = load_model("llama3-8b")  # 32 heads, 8 KV heads (GQA)
DGX = HBDSpec(kind="switch_domain", gpus_per_node=8, domain_gpus=8, max_tp=8)
KHOP = HBDSpec(kind="khop_line", gpus_per_node=4, domain_gpus=1024, tp_multiple_of=4, max_tp=1024, k=2)


@pytest.mark.parametrize("model, kw, flag, text", [
    (GPT3, dict(tp=64), "tp", "64 does not divide heads=96"),
    # Megatron-core with sequence parallelism scatters each CP rank's sequence over TP and asserts it divides
    # (tensor_parallel/mappings.py, _split_along_first_dim): 2061 tokens over 8 TP ranks cannot run
    (LLAMA8.with_seq_len(2061), dict(tp=8, sequence_parallel=True), "seq_len", "over tp=8 ranks"),
    (LLAMA8.with_seq_len(8), dict(tp=8, cp=2, sequence_parallel=True), "seq_len", "seq_len / cp = 4"),
    (GPT3, dict(pp=97, global_batch=97), "pp", "leave a pipeline stage empty"),
    (GPT3, dict(pp=8, first_stage_layers=97), "first_stage_layers", "cannot be met"),
    (GPT3, dict(pp=8, last_stage_layers=-1), "last_stage_layers", ">= 0"),
    (GPT3, dict(zero_stage=4), "zero_stage", "0, 1, 2 or 3"),
    (GPT3, dict(interleave=2), "interleave", "needs --pp > 1"),
    (GPT3, dict(cp=3), "cp", "seq_len=2048"),
    (GPT3, dict(ep=2, dp=2), "ep", "needs an MoE model"),
    (MIXTRAL, dict(ep=3, dp=3), "ep", "does not divide experts=8"),
    (MIXTRAL, dict(ep=8, dp=4), "ep", "does not divide tp x cp x dp = 4"),
    (MIXTRAL, dict(tp=2), "sequence_parallel", "needs sequence parallelism"),
    (GPT3, dict(sequence_parallel=True), "sequence_parallel", "needs --tp > 1"),
    (GPT3, dict(dp=3, global_batch=8), "global_batch", "not a multiple of dp x micro-batch"),
    (GPT3, dict(pp=4, interleave=2, global_batch=6), "interleave", "multiple of pp=4"),
    (GPT3, dict(recompute="some"), "recompute", "not allowed"),
    (GPT3, dict(tp=0), "tp", ">= 1"),
])
def test_rules_name_their_flag(model, kw, flag, text):
    par = Parallelism(**{"global_batch": 64, **kw})
    with pytest.raises(FabricError) as exc:
        validate(model, par)
    assert exc.value.field == flag and text in exc.value.message


def test_hbd_rules():
    with pytest.raises(FabricError, match="exceeds the HBD size"):
        validate(GPT3, Parallelism(tp=12, global_batch=8), DGX)
    with pytest.raises(FabricError, match="multiple of 4"):
        validate(GPT3, Parallelism(tp=6, global_batch=8, sequence_parallel=True), KHOP)
    validate(GPT3, Parallelism(tp=2, global_batch=8), KHOP)  # inside a node
    validate(GPT3, Parallelism(tp=32, global_batch=8), KHOP)  # whole nodes
    with pytest.raises(FabricError) as exc:
        validate(GPT3, Parallelism(tp=8, pp=8, dp=4, global_batch=8), DGX, gpus=128)
    assert exc.value.field == "gpus"


@settings(max_examples=60, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4, 8, 16]), dp=st.integers(1, 16),
       mb=st.sampled_from([1, 2, 4]), v=st.sampled_from([1, 2, 3]))
def test_valid_combinations_pass(tp, pp, dp, mb, v):
    if v > 1 and pp == 1:
        v = 1
    B = dp * mb * pp * 4
    par = Parallelism(tp=tp, pp=pp, dp=dp, micro_batch=mb, global_batch=B, interleave=v, sequence_parallel=tp > 1)
    validate(GPT3, par, DGX, gpus=tp * pp * dp)
    assert par.world == tp * pp * dp and par.microbatches == B // (dp * mb)


# ----------------------------------------------------------------------------- uneven pipeline stages
def test_uneven_split_gives_first_and_last_stage_one_layer_fewer():
    """Llama 3 405B: 126 layers on PP 16 ran as 7, 8 x 14, 7 (arXiv 2407.21783 Sec. 3.3.2): exact."""
    from workloads.models import load_model
    from workloads.parallelism import layer_split

    m = load_model("llama3-405b")
    assert layer_split(m, Parallelism(pp=16)) == [7] + [8] * 14 + [7]
    # divisible: equal stages, as before
    assert layer_split(GPT3, Parallelism(pp=8)) == [12] * 8
    assert layer_split(GPT3, Parallelism(pp=8, interleave=2)) == [6] * 16


def test_megatron_split_options():
    """Megatron-Core's options: embedding/loss counted as a layer; explicit first/last stage layers."""
    from workloads.models import load_model
    from workloads.parallelism import layer_split

    m = load_model("llama3-405b")
    both = layer_split(m, Parallelism(pp=16, interleave=8, account_for_embedding=True, account_for_loss=True))
    assert both[0] == 0 and both[-1] == 0 and set(both[1:-1]) == {1} and sum(both) == 126
    assert layer_split(m, Parallelism(pp=16, account_for_embedding=True, account_for_loss=True)) == \
        [7] + [8] * 14 + [7]  # (126 + 2) / 16 = 8, minus the embedding and the loss
    fl = layer_split(m, Parallelism(pp=16, first_stage_layers=6, last_stage_layers=8))
    assert fl[0] == 6 and fl[-1] == 8 and sum(fl) == 126 and max(fl[1:-1]) - min(fl[1:-1]) <= 1
