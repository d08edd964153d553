"""Hold-out validation: Megatron-Bridge FP8 throughput on DGX-B200, GB200 and H100 (2025-26), and BLOOM-176B.

``tests/data/published_step_times_2025.json`` holds NVIDIA's Megatron-Bridge
performance tables (25.09-26.02 NeMo containers) for dense Llama 3 models:
the first published Blackwell runs the model meets (every Blackwell kernel
constant in ``gpu-efficiency.yaml`` is ``assumed`` from H100, nothing was fitted
on Blackwell), and H100 runs at layouts and batches not in
``nemo_h100_fp8.json`` (Megatron-FSDP, GBS 256 / 1536).  Each run is predicted
through the public API (``mfu_summary``, no search) with its published
configuration, and compared on tokens/s/GPU, which needs no FLOP convention.

Tolerances, and why: the same as the NeMo FP8 set (per run 25 %, mean 12 %),
since the fp8 path is the same uncalibrated one (the A100 bf16 GEMM curve at
the fp8 peak) and the Blackwell constants are H100's.  Measured (README,
Validation): mean 9.3 %, max 20.4 %; the small single-GPU Llama 3 8B runs
without FSDP are the fast ones (B200 +14.5 %, GB200 +20.4 %), as GPT-3 5B and
Llama 3 8B are on H100 (README: known gap, FP8 trend with model size).

Two rows are reported, not asserted (their reasons are in the data file):
GB200's 405B pipelined run (13 % slower than the same layout on B200, which
hardware does not explain), and BLOOM-176B on A100 (Megatron-DeepSpeed with
CUDA_LAUNCH_BLOCKING=1, a runtime the model does not represent); their errors
are pinned in direction and size so that a change to them is seen.
"""


import pytest

from tests.workloads.published import PublishedSet
from topologies import build
from workloads.mfu import mfu_summary

SET = PublishedSet("published_step_times_2025.json")
DATA, POINTS, model = SET.data, SET.points, SET.model
OPTIONAL = ("zero_stage", "recompute", "sequence_parallel", "first_stage_layers", "last_stage_layers")


def predict(p: dict) -> dict:
    fab = build(p["arch"], p["gpus"], p["params"])
    fixed = {k: p[k] for k in OPTIONAL if p.get(k) is not None}
    return mfu_summary(fab, model(p["model"]), search=False, global_batch=p["global_batch"], seq_len=p["seq_len"],
                       fp8=p["precision"] == "fp8", tp=p["tp"], pp=p["pp"], cp=p["cp"], interleave=p["vp"],
                       micro_batch=p["micro_batch"], dp=p["gpus"] // (p["tp"] * p["pp"] * p["cp"]), **fixed)


@pytest.fixture(scope="module")
def predicted() -> dict[str, dict]:
    return {pid: predict(p) for pid, p in POINTS.items()}


def error(p: dict, r: dict) -> float:
    """Relative error of the predicted tokens/s/GPU (positive: predicted faster than measured)."""
    return r["tokens_per_s"] / r["gpus_used"] / p["tokens_per_s_per_gpu"] - 1


def test_every_published_run_within_25_percent_and_mean_within_12(predicted):
    rows, errs = [], []
    for pid, p in POINTS.items():
        r = predicted[pid]
        e = error(p, r)
        rows.append(f"| {pid} | {p['system']} | {p['gpus']} | {r['config']} | {p['tokens_per_s_per_gpu']:,} | "
                    f"{r['tokens_per_s'] / r['gpus_used']:,.0f} | {100 * e:+.1f} % | {p['role']} |")
        assert r["fits"] and r["gpus_used"] == p["gpus"], pid   # every run fits and uses its GPUs as published
        assert r["precision"] == p["precision"], pid
        # FSDP rows shard as published; the others keep the distributed optimizer (the tool may raise ZeRO-2, which
        # changes memory, not the step: B200 405B holds fp32 main gradients of 51 GB otherwise), never ZeRO-3
        assert (r["parallelism"]["zero_stage"] == 3) == (p["zero_stage"] == 3), pid
        if p["role"] == "held-out":
            errs.append(abs(e))
            assert abs(e) <= 0.25, (pid, e)
        else:
            assert p["role"] == "reported" and p["reason"], pid
    print("\n| run | system | GPUs | configuration | published tok/s/GPU | predicted | error | role |"
          "\n|---|---|---:|---|---:|---:|---:|---|\n" + "\n".join(rows))
    print(f"held out: mean |error| {100 * sum(errs) / len(errs):.1f} %, max {100 * max(errs):.1f} %")
    assert len(errs) == 6 and sum(errs) / len(errs) <= 0.12
    assert all(p["source"].startswith("P:") and "github.com" in p["source"] for p in POINTS.values())


def test_gb200_over_b200_on_the_same_llama3_8b_run(predicted):
    """The same run (Llama 3 8B, 8 GPUs, GBS 128, MBS 2, FP8) on GB200 and B200: measured 2.9 % more on GB200,
    whose dense peak is 11 % higher with the same HBM bandwidth.  The ratio cancels the GEMM efficiency curve and
    checks how much of a step scales with the peak (GEMMs) and how much with HBM (norms, activations, optimizer).
    Held to 6 %: a model that scaled the whole step with the peak would be 8 % off."""
    gb, b = POINTS["bridge25.11-gb200-llama3-8b"], POINTS["bridge25.11-b200-llama3-8b"]
    measured = gb["tokens_per_s_per_gpu"] / b["tokens_per_s_per_gpu"]
    pred = predicted[gb["id"]]["tokens_per_s"] / predicted[b["id"]]["tokens_per_s"]
    peak = predicted[gb["id"]]["peak_tflops_per_gpu"] / predicted[b["id"]]["peak_tflops_per_gpu"]
    print(f"\nGB200 / B200: measured {measured:.3f}, predicted {pred:.3f}, peak ratio {peak:.3f}")
    assert 1 < pred < peak and abs(pred / measured - 1) < 0.06, (measured, pred, peak)


def test_reported_rows_keep_their_known_direction(predicted):
    """Not asserted as validation (see the data file's reasons), but pinned: both are predicted fast, BLOOM by
    about a fifth of its step (105 s measured) and GB200's pipelined 405B run by about a third."""
    bloom = POINTS["bloom-176b-a100"]
    r = predicted[bloom["id"]]
    ratio = r["step_time_s"] / bloom["step_time_s"]
    print(f"\nBLOOM-176B: measured {bloom['step_time_s']} s, predicted {r['step_time_s']:.1f} s ({100 * (ratio - 1):+.1f} %)")
    assert r["parallelism"]["recompute"] == "full" and not r["parallelism"]["sequence_parallel"]
    assert r["stage_layers"][0] == 5 and r["stage_layers"][-1] == 5 and sum(r["stage_layers"]) == 70
    assert 0.65 < ratio < 0.9
    gb = POINTS["bridge25.09-gb200-llama3.1-405b-pp"]
    assert 0.2 < error(gb, predicted[gb["id"]]) < 0.5
