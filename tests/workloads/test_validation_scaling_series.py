"""Hold-out validation: published strong-scaling series (one model and layout at several GPU counts).

``tests/data/published_scaling_series.json`` holds three series the model was
never fitted on (sources per point):

* Narayanan et al. 2021, Table 2 (PTD-P rows): GPT 175B (TP 8 x PP 12) on
  384-1,536 and GPT 530B (TP 8 x PP 35) on 560-2,240 DGX A100 GPUs at a
  constant global batch, achieved TFLOP/s per GPU.  Same software and
  recipe as the paper's Table 1 (the ``narayanan2021`` set), so the same
  known bias is expected: 6-10 % fast on the PP rows (README, Validation).
* Nemotron-4 15B's batch ramp (arXiv 2402.16819, Table 2): TP 8 on DGX H100
  (BF16), DP 96 / 192 / 288 with 4 sequences per DP rank throughout, so the
  per-GPU work is constant and the step grows only by data-parallel
  communication (0.57 -> 0.64 s measured).
* MegaScale's Megatron-LM baseline (arXiv 2402.15627, Table 2): 175B on
  256-12,288 Ampere GPUs; reported, not asserted (its runtime is not
  published; the reason is in the data file), pinned in size.

Tolerances, and why: per held-out run 20 %, mean 12 % (the A100 Table 1 set
is within 10.4 %, the H100 BF16 path carries the known in-training-fraction
uncertainty of README, Validation).  Measured: mean 9.6 %, max 15.3 % (the
2,304-GPU Nemotron run, whose exposed DP communication the model still
under-predicts).  The scaling test checks the series' shape, which cancels the
GEMM efficiency: the throughput per GPU at the largest over the smallest scale.
"""

import pytest

from tests.workloads.published import PublishedSet
from topologies import build
from workloads.flops import gpt_hardware_flops_full
from workloads.mfu import mfu_summary

SET = PublishedSet("published_scaling_series.json")
POINTS, model = SET.points, SET.model
OPTIONAL = ("recompute", "sequence_parallel", "distributed_optimizer")


def predict(p: dict, **override) -> dict:
    fab = build("dgx", p["gpus"], {"gpu": p["gpu"]})
    fixed = {k: p[k] for k in OPTIONAL if p.get(k) is not None}
    kw = dict(tp=p["tp"], pp=p["pp"], cp=p["cp"], interleave=p["vp"], micro_batch=p["micro_batch"],
              dp=p["gpus"] // (p["tp"] * p["pp"] * p["cp"]), **fixed)
    kw.update(override)
    return mfu_summary(fab, model(p["model"]), search=False, global_batch=p["global_batch"], seq_len=p["seq_len"],
                       runtime=p["runtime"], **kw)


def measured_step(p: dict) -> float:
    """The published step time (s); Narayanan's TFLOP/s converted back through his eq. 3."""
    if p["metric"] == "iteration_time_s":
        return p["measured"]
    assert p["metric"] == "megatron_tflops_per_gpu"
    m = model(p["model"])
    flops = gpt_hardware_flops_full(p["global_batch"], p["seq_len"], m.layers, m.hidden, m.vocab)
    return flops / (p["measured"] * 1e12 * p["gpus"])


def error(p: dict, r: dict) -> float:
    """Relative error of the predicted throughput (positive: predicted faster than measured)."""
    return measured_step(p) / r["step_time_s"] - 1


@pytest.fixture(scope="module")
def predicted() -> dict[str, dict]:
    return {pid: predict(p) for pid, p in POINTS.items()}


def test_every_held_out_run_within_20_percent_and_mean_within_12(predicted):
    rows, errs = [], []
    for pid, p in POINTS.items():
        r = predicted[pid]
        e = error(p, r)
        rows.append(f"| {pid} | {p['gpus']:,} | {r['config']} | {measured_step(p):.2f} s | {r['step_time_s']:.2f} s | "
                    f"{100 * e:+.1f} % | {p['role']} |")
        assert r["fits"] and r["gpus_used"] == p["gpus"], pid
        if p["role"] == "held-out":
            errs.append(abs(e))
            assert abs(e) <= 0.20, (pid, e)
        else:
            assert p["role"] == "reported" and p["reason"], pid
    print("\n| run | GPUs | configuration | measured step | predicted | error | role |\n|---|---:|---|---:|---:|---:|---|\n"
          + "\n".join(rows))
    print(f"held out: mean |error| {100 * sum(errs) / len(errs):.1f} %, max {100 * max(errs):.1f} %")
    assert len(errs) == 9 and sum(errs) / len(errs) <= 0.12
    assert all(p["source"].startswith("P:") and "arXiv" in p["source"] for p in POINTS.values())


@pytest.mark.parametrize("first, last, tol", [
    ("narayanan2021-t2-175b-384", "narayanan2021-t2-175b-1536", 0.03),
    ("narayanan2021-t2-530b-560", "narayanan2021-t2-530b-2240", 0.03),
    ("nemotron4-15b-768", "nemotron4-15b-2304", 0.08),
])
def test_strong_scaling_shape(predicted, first, last, tol):
    """Throughput per GPU (tokens/s/GPU) at the largest scale over the smallest, measured vs predicted.  Narayanan: 0.92 / 0.93
    (4x GPUs at a constant batch: a quarter of the micro-batches, the same bubble and DP time).  Nemotron-4 15B:
    0.89 at constant work per GPU, which only the data-parallel communication explains; before Megatron-Core's
    bucket size was followed (a fixed 40 M-parameter last bucket at every DP size) the model gave 1.00 here."""
    a, b = POINTS[first], POINTS[last]
    scale = b["global_batch"] / a["global_batch"] * a["gpus"] / b["gpus"]   # 1 when the work per GPU is constant
    measured = measured_step(a) / measured_step(b) * scale
    pred = predicted[first]["step_time_s"] / predicted[last]["step_time_s"] * scale
    print(f"\n{first} -> {last}: throughput/GPU ratio measured {measured:.3f}, predicted {pred:.3f}")
    assert abs(pred / measured - 1) <= tol, (measured, pred)


def test_unpublished_micro_batch_is_the_fastest_fitting(predicted):
    """The Nemotron-4 15B micro-batch is not published; the rule (the fastest fitting of the listed options, as
    workloads/validation.py picks Narayanan's) must still pick the stored one."""
    for pid, p in POINTS.items():
        for field, options in p.get("free", {}).items():
            times = {}
            for o in options:
                r = predict(p, **{field: o})
                if r["fits"]:
                    times[o] = r["step_time_s"]
            assert min(times, key=times.get) == p[field], (pid, times)


def test_megascale_baseline_rows_keep_their_known_size(predicted):
    """Reported only (data file: reason).  Pinned: within -10 % .. +20 %, and in each batch group the largest run is
    predicted faster relative to its measurement than the smallest (the measured fixed cost per step, about 1-2 s,
    that the model does not carry)."""
    errs = {pid: error(p, predicted[pid]) for pid, p in POINTS.items() if p["group"] == "megascale2024-megatron"}
    assert len(errs) == 8 and all(-0.10 < e < 0.20 for e in errs.values()), errs
    assert errs["megascale-megatron-175b-1024"] > errs["megascale-megatron-175b-256"]
    assert errs["megascale-megatron-175b-12288"] > errs["megascale-megatron-175b-3072"]
