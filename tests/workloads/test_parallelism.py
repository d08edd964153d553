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
DGX = HBDSpec(kind="switch_domain", gpus_per_node=8, domain_gpus=8, max_tp=8)
KHOP = HBDSpec(kind="khop_line", gpus_per_node=4, domain_gpus=1024, tp_multiple_of=4, max_tp=1024, k=2)


@pytest.mark.parametrize("model, kw, flag, text", [
    (GPT3, dict(tp=64), "tp", "64 does not divide heads=96"),
    (GPT3, dict(pp=7), "pp", "7 does not divide layers=96"),
    (GPT3, dict(pp=8, interleave=5), "interleave", "does not divide layers=96"),
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
