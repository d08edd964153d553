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
    assert r.mfu == pytest.approx(model_flops(GPT, 64, "causal") / (r.step_time_s * 64 * peak))
    assert r.tflops_per_gpu * 1e12 == pytest.approx(hardware_flops(GPT, 64, "full", "causal") / (r.step_time_s * 64))
    assert r.hardware_tflops_per_gpu == r.tflops_per_gpu and r.flops_convention == "causal"
    d = r.to_dict()
    assert d["hardware_tflops_per_gpu"] == r.tflops_per_gpu and "attention_flops" in d["conventions"]
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


def test_full_convention_is_the_megatron_formula(dgx64):
    """flops_convention='full' gives the 72 B s l h^2 (1 + s/6h + V/12lh) numerator (closed form, exact)."""
    from workloads.flops import gpt_model_flops

    s = StepModel(dgx64, GPT, runtime=MEGATRON_2021, backend=analytic_comm_time, flops_convention="full")
    par = Parallelism(tp=8, pp=2, dp=4, global_batch=64, recompute="full", distributed_optimizer=False)
    r = s.evaluate(par)
    peak = load_catalog().value("gpu_a100", "peak_bf16_flops")
    closed = gpt_model_flops(64, GPT.seq_len, GPT.layers, GPT.hidden, GPT.vocab)
    assert r.mfu == pytest.approx(closed / (r.step_time_s * 64 * peak))
    causal = StepModel(dgx64, GPT, runtime=MEGATRON_2021, backend=analytic_comm_time).evaluate(par)
    assert causal.step_time_s == pytest.approx(r.step_time_s) and causal.mfu < r.mfu


def test_pipeline_time_uneven_stages_is_the_1f1b_critical_path(sm):
    """m * max + sum of the other stages / v; checked against a discrete-event 1F1B schedule (exact for v=1)."""
    par = Parallelism(tp=8, pp=4, dp=2, micro_batch=1, global_batch=16)
    t = np.array([1.0, 1.0, 1.0, 1.3])  # the last stage heavier (output layer)
    m = par.microbatches
    formula = sm.pipeline_time(par, t)
    assert formula == pytest.approx(m * 1.3 + 3.0)
    # brute force: 1F1B with forward = backward / 2 = t/3 per stage and the dependencies of the schedule
    p = 4
    f, b = t / 3, 2 * t / 3
    free = np.zeros(p)
    fdone = np.zeros((p, m))
    bdone = np.zeros((p, m))
    order = []
    for i in range(p):
        warm = min(p - i - 1, m)
        ops = [("F", j) for j in range(warm)]
        for j in range(m - warm):
            ops += [("F", warm + j), ("B", j)]
        ops += [("B", j) for j in range(m - warm, m)]
        order.append(ops)
    pos = [0] * p
    while any(pos[i] < len(order[i]) for i in range(p)):
        progressed = False
        for i in range(p):
            while pos[i] < len(order[i]):
                kind, j = order[i][pos[i]]
                if kind == "F":
                    dep = fdone[i - 1, j] if i > 0 else 0.0
                    if i > 0 and dep == 0.0:
                        break
                    start = max(free[i], dep)
                    fdone[i, j] = free[i] = start + f[i]
                else:
                    dep = bdone[i + 1, j] if i < p - 1 else fdone[i, j]
                    if dep == 0.0:
                        break
                    start = max(free[i], dep)
                    bdone[i, j] = free[i] = start + b[i]
                pos[i] += 1
                progressed = True
        assert progressed
    assert free.max() == pytest.approx(formula, rel=0.02)


def test_fp8_mfu_is_relative_to_the_fp8_peak_and_below_one(dgx64):
    from dataclasses import replace

    from workloads.step import MEGATRON_CORE

    m = load_model("llama3-8b")
    par = Parallelism(tp=8, dp=8, global_batch=64, sequence_parallel=True, recompute="none")
    r8 = StepModel(dgx64, m, runtime=replace(MEGATRON_CORE, fp8=True), backend=analytic_comm_time).evaluate(par)
    assert r8.precision == "fp8" and 0 < r8.mfu < 1 and 0 < r8.hfu < 1
    peak8 = load_catalog().value("gpu_a100", "peak_fp8_flops")
    assert r8.peak_tflops == pytest.approx(peak8 / 1e12)


def test_dp_bucket_follows_megatron_core_default(dgx64):
    """Megatron-Core sizes DP buckets ``max(40M, 1M x dp x cp)`` parameters when none is given, and the last bucket's
    reduce-scatter (and the first all-gather) cannot hide behind compute.  Before, the model kept a fixed 40 M bucket
    at every DP size, so the exposed DP time did not grow with DP (Nemotron-4 15B's ramp, DP 96-288 at constant work
    per GPU, was predicted flat where 0.57 -> 0.64 s was measured: test_validation_scaling_series).  The last bucket
    was also timed as its share of the whole gradient's collective, without the latency of its own NCCL call."""
    from dataclasses import replace

    from workloads.step import MEGATRON_CORE
    assert MEGATRON_CORE.bucket(8) == 40e6 and MEGATRON_CORE.bucket(64) == 64e6 and MEGATRON_CORE.bucket(288) == 288e6
    m = load_model("megatron-1.7b")
    par = Parallelism(dp=64, micro_batch=1, global_batch=64, recompute="none")
    exposed = StepModel(dgx64, m, backend=analytic_comm_time).evaluate(par).breakdown["dp"]
    fixed = replace(MEGATRON_CORE, bucket_params_per_dp_rank=0.0)
    exposed_40m = StepModel(dgx64, m, runtime=fixed, backend=analytic_comm_time).evaluate(par).breakdown["dp"]
    # closed form: the last bucket's reduce-scatter (fp32 gradients) and the first bucket's all-gather (bf16
    # parameters) are NCCL calls of their own, each with its latency: 64 M parameters instead of 40 M
    groups = StepModel(dgx64, m, backend=analytic_comm_time).placement(par).dp_groups

    def last_buckets(n_params):
        return sum(analytic_comm_time(dgx64, kind, groups, n_params * nbytes)
                   for kind, nbytes in (("reduce_scatter", 4), ("all_gather", 2)))
    assert exposed_40m == pytest.approx(last_buckets(40e6), rel=1e-6)
    assert exposed == pytest.approx(last_buckets(64e6), rel=1e-6)
