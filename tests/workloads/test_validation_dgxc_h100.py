"""Hold-out validation: the same Megatron-Core runs on DGX H100 in BF16 and FP8 (NVIDIA dgxc-benchmarking).

``tests/data/nemo_h100_dgxc_bf16_fp8.json``: Llama 3.1 8B / 70B / 405B (NeMo
24.09), GPT-3 175B and Nemotron-4 15B / 340B, 8 to 2,304 H100, each published in BF16 and in FP8 with
the same layout and batch.  Nothing was fitted on them.  Each run is predicted
through the public API (``mfu_summary``, no search) with its published
configuration, and compared on the step time.

What is asserted, and why:

* FP8 runs (held out): each within 15 %, mean within 8 % (measured: max 13 %,
  mean 6.0 %).  15 % because the fp8 GEMMs have no calibration of their own (the
  A100 bf16 curve at the fp8 peak) and the FP8 cast kernels are not timed
  (README, Validation: known gaps).
* BF16 runs (reported, gap pinned): predicted 13-25 % slow.  The cause is one
  constant: the H100 in-training GEMM fraction (0.778 in
  ``gpu-efficiency.yaml``) was fitted on Meta's Llama 3 405B run on 16,384 GPUs,
  a different stack; with the fraction at 1 (the A100 curve carried by the MAMF
  ratio alone, nothing fitted) every BF16 run is within 10 %.  The test checks
  both, so that a recalibration is seen here.
* FP8 / BF16 speedup of the same run: measured 1.32-1.53, predicted 8-23 %
  higher; the ratio cancels the GEMM fraction, so this is the fp8 path's own
  gap (the fp8 GEMMs are given the bf16 fraction of a twice larger peak).
"""

from dataclasses import replace

import pytest

from tests.workloads.published import PublishedSet
from topologies import build
from workloads.mfu import mfu_summary
from workloads.parallelism import Parallelism
from workloads.step import MEGATRON_CORE, StepModel

SET = PublishedSet("nemo_h100_dgxc_bf16_fp8.json")
DATA, POINTS, model = SET.data, SET.points, SET.model


@pytest.fixture(scope="module")
def fabrics() -> dict[int, object]:
    return {g: build("dgx", g, {"gpu": "h100"}) for g in sorted({p["gpus"] for p in POINTS.values()})}


@pytest.fixture(scope="module")
def predicted(fabrics) -> dict[str, dict]:
    out = {}
    for pid, p in POINTS.items():
        out[pid] = mfu_summary(fabrics[p["gpus"]], model(p["model"]), search=False, global_batch=p["global_batch"],
                               seq_len=p["seq_len"], fp8=p["precision"] == "fp8", tp=p["tp"], pp=p["pp"], cp=p["cp"],
                               interleave=p["vp"], micro_batch=p["micro_batch"],
                               dp=p["gpus"] // (p["tp"] * p["pp"] * p["cp"]))
    return out


def error(p: dict, r: dict) -> float:
    """Relative error of the predicted throughput (positive: predicted faster than measured)."""
    return p["step_time_s"] / r["step_time_s"] - 1


def test_fp8_runs_within_15_percent_bf16_runs_predicted_slow(predicted):
    rows, fp8 = [], []
    for pid, p in POINTS.items():
        r = predicted[pid]
        e = error(p, r)
        rows.append(f"| {pid} | {r['config']} | {p['step_time_s']} | {r['step_time_s']:.2f} | {100 * e:+.1f} % | {p['role']} |")
        assert r["fits"] and r["gpus_used"] == p["gpus"] and r["precision"] == p["precision"], pid
        if p["role"] == "held-out":
            fp8.append(abs(e))
            assert abs(e) <= 0.15, (pid, e)
        else:   # the known BF16 gap (module docstring): slow, by a tenth to a third
            assert -0.30 < e < -0.10, (pid, e)
    print("\n| run | configuration | published s/step | predicted | error | role |\n|---|---|---:|---:|---:|---|\n"
          + "\n".join(rows))
    print(f"FP8 held out: mean |error| {100 * sum(fp8) / len(fp8):.1f} %, max {100 * max(fp8):.1f} %")
    assert len(fp8) == 11 and sum(fp8) / len(fp8) <= 0.08
    assert all(p["source"].startswith("P:") and "github.com/NVIDIA/dgxc-benchmarking" in p["source"]
               for p in POINTS.values())


def test_bf16_gap_is_the_fitted_h100_in_training_fraction(predicted, fabrics):
    """The same BF16 runs with the H100 in-training fraction at 1 (the A100 curve carried by the MAMF ratio only):
    every run within 10 %.  Same configuration as the public-API prediction (its ZeRO stage included)."""
    rows = []
    for pid, p in POINTS.items():
        if p["precision"] != "bf16":
            continue
        r = predicted[pid]
        sm = StepModel(fabrics[p["gpus"]], model(p["model"]), runtime=MEGATRON_CORE)
        assert sm.gpu.kernels.training == pytest.approx(0.778)   # the shipped, Meta-fitted value
        sm1 = sm.with_gpu(replace(sm.gpu, kernels=sm.gpu.kernels.with_training(1.0)))
        par = Parallelism(tp=p["tp"], pp=p["pp"], cp=p["cp"], dp=p["gpus"] // (p["tp"] * p["pp"] * p["cp"]),
                          micro_batch=p["micro_batch"], global_batch=p["global_batch"], interleave=p["vp"],
                          sequence_parallel=p["tp"] > 1, zero_stage=r["parallelism"]["zero_stage"])
        shipped, untuned = sm.evaluate(par, check=False), sm1.evaluate(par, check=False)
        assert shipped.step_time_s == pytest.approx(r["step_time_s"], rel=1e-6), pid   # same run as the API's
        e = p["step_time_s"] / untuned.step_time_s - 1
        rows.append(f"| {pid} | {p['step_time_s']} | {shipped.step_time_s:.2f} | {untuned.step_time_s:.2f} | {100 * e:+.1f} % |")
        assert abs(e) <= 0.10, (pid, e)
    print("\n| BF16 run | published s | predicted (fraction 0.778) | fraction 1 | error |\n|---|---:|---:|---:|---:|\n"
          + "\n".join(rows))


def test_fp8_speedup_over_bf16_is_overstated(predicted):
    """The FP8 / BF16 step-time ratio of the same run cancels the GEMM fraction: measured 1.32-1.53, predicted
    8-23 % higher on every run (the fp8 path's own gap, README: known gaps)."""
    rows = []
    for pid, p in POINTS.items():
        if p["precision"] != "bf16":
            continue
        q = POINTS[pid.replace("-bf16", "-fp8")]
        measured = p["step_time_s"] / q["step_time_s"]
        pred = predicted[pid]["step_time_s"] / predicted[q["id"]]["step_time_s"]
        rows.append(f"| {pid[:-5]} | {measured:.3f} | {pred:.3f} | {100 * (pred / measured - 1):+.1f} % |")
        assert 1.05 < pred / measured < 1.30, (pid, measured, pred)
    print("\n| run | measured FP8 speedup | predicted | over |\n|---|---:|---:|---:|\n" + "\n".join(rows))
