"""Step time: the breakdown adds up, MFU follows the FLOP formulas, the bubble and caching behave."""

import numpy as np
import pytest

from fabric.catalog import load_catalog
from workloads.comm import analytic_comm_time
from workloads.flops import hardware_flops, model_flops
from workloads.models import load_model
from workloads.parallelism import Parallelism
from workloads.step import MEGATRON_2021, StepModel, check_fit

GPT = load_model("megatron-18b")


@pytest.fixture(scope="module")
def sm(dgx64):
    return StepModel(dgx64, GPT, runtime=MEGATRON_2021, backend=analytic_comm_time)


def test_breakdown_adds_up_and_flops_match(sm):
    par = Parallelism(tp=8, pp=2, dp=4, micro_batch=1, global_batch=64, recompute="full", distributed_optimizer=False)
    r = sm.evaluate(par)
    assert sum(r.breakdown.values()) == pytest.approx(r.step_time_s)
    assert set(r.breakdown) == {"compute", "tp", "cp", "ep", "pp", "bubble", "dp", "optimizer"}
    assert r.breakdown["tp"] > 0 and r.breakdown["pp"] > 0 and r.breakdown["bubble"] > 0
    peak = load_catalog().value("gpu_a100", "peak_bf16_flops")
    assert r.mfu == pytest.approx(model_flops(GPT, 64) / (r.step_time_s * 64 * peak))
    assert r.tflops_per_gpu * 1e12 == pytest.approx(hardware_flops(GPT, 64, "full") / (r.step_time_s * 64))
    assert r.hfu > r.mfu and r.fits and r.comm_backend == "analytic"


def test_bubble_is_p_minus_1_over_v_m(sm):
    base = Parallelism(tp=8, pp=4, dp=2, micro_batch=1, global_batch=32, recompute="full")
    parts = sm.stage_parts(base, None, with_comm=False)
    mid = sum(parts[1].values())  # a middle stage: layers only
    t1 = sm.pipeline_time(base, np.array([mid] * 4))
    t2 = sm.pipeline_time(base.replace(interleave=2), np.array([mid] * 4))
    m = base.microbatches
    assert t1 == pytest.approx((m + 3) * mid) and t2 == pytest.approx((m + 1.5) * mid)
    assert sm.lower_bound(base) <= sm.evaluate(base).step_time_s


def test_cached_design_point_does_not_call_the_backend_again(dgx64):
    calls = []

    def backend(fabric, kind, groups, nbytes):
        calls.append(kind)
        return analytic_comm_time(fabric, kind, groups, nbytes)

    backend.name = "counting"
    s = StepModel(dgx64, GPT, backend=backend)
    par = Parallelism(tp=8, pp=2, dp=4, global_batch=64, recompute="full", sequence_parallel=True)
    s.evaluate(par)
    n = len(calls)
    s.evaluate(par)
    s.evaluate(par.replace(micro_batch=2))  # other sizes, same layouts: interpolated
    assert n > 0 and len(calls) == n


def test_moe_has_expert_all_to_all(dgx64):
    m = load_model("mixtral-8x7b")
    s = StepModel(dgx64, m, backend=analytic_comm_time)
    r = s.evaluate(Parallelism(tp=2, dp=32, ep=8, global_batch=64, sequence_parallel=True, recompute="full"))
    assert r.breakdown["ep"] > 0 and r.breakdown["dp"] >= 0


def test_context_parallel_and_not_fitting(dgx64):
    m = load_model("llama3-8b")
    s = StepModel(dgx64, m, backend=analytic_comm_time)
    r = s.evaluate(Parallelism(tp=4, cp=4, dp=4, global_batch=16, sequence_parallel=True, recompute="full"))
    assert r.breakdown["cp"] >= 0 and r.fits
    big = StepModel(dgx64, load_model("gpt3-175b"), backend=analytic_comm_time)
    r = big.evaluate(Parallelism(tp=8, dp=8, global_batch=8))
    assert not r.fits and "does not fit" in r.notes[0]
    with pytest.raises(Exception, match="GB per GPU"):
        check_fit(r)
