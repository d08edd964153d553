"""Hold-out validation: NVIDIA's published NeMo / Megatron-Bridge FP8 throughput on DGX H100.

``tests/data/nemo_h100_fp8.json`` holds 11 published pre-training runs (NeMo
24.07 and Megatron-Bridge 25.09 performance tables: GPT-3 5B-175B, Llama 2
7B-70B, Llama 3 8B-405B; 8 to 1,024 H100; TP 1-8, PP 1-8, CP 1-2, VP 1-20),
each with its source.  None of them was used to set anything: the step model
has no FP8 calibration at all (the H100 curve is the A100 bf16 fit carried
over, with the in-training fraction fitted on one *bf16* Llama 3 row of Meta's
stack).  Each run is predicted through the public API (``mfu_summary``, no
search) with its published configuration on DGX H100 nodes, and compared on
tokens/s/GPU, which needs no FLOP-counting convention.

Tolerances, and why: the model assumes fp8 weight GEMMs reach the same
fraction of the fp8 peak as bf16 GEMMs of the bf16 peak (no published fp8
MAMF), and does not time Transformer Engine's fp8 cast/transpose kernels
(about 2-3 % of a layer by the bytes they move).  Per run 25 %, mean 12 %.
Measured (README, Validation): mean 8.5 %, max 19 %; the small single-GPU-TP
models (GPT-3 5B, Llama 3 8B, Llama 2 7B) are predicted 9-19 % fast and the
large pipelined ones 2-11 % slow, a size trend the GEMM curve carried from A100
bf16 does not capture (README: known gap).
"""

import json
from pathlib import Path

import pytest

from tests.workloads.published import PublishedSet
from topologies import build
from workloads.mfu import mfu_summary

SET = PublishedSet("nemo_h100_fp8.json")
DATA, POINTS, model = SET.data, SET.points, SET.model


@pytest.fixture(scope="module")
def predicted() -> dict[str, dict]:
    fabrics, out = {}, {}
    for p in DATA["points"]:
        g = p["gpus"]
        if g not in fabrics:
            fabrics[g] = build("dgx", g, {"gpu": "h100"})
        r = mfu_summary(fabrics[g], model(p["model"]), search=False, global_batch=p["global_batch"],
                        seq_len=p["seq_len"], fp8=True, tp=p["tp"], pp=p["pp"], cp=p["cp"], interleave=p["vp"],
                        micro_batch=p["micro_batch"], dp=g // (p["tp"] * p["pp"] * p["cp"]))
        out[p["id"]] = r
    return out


def error(p: dict, r: dict) -> float:
    return r["tokens_per_s"] / p["gpus"] / p["tokens_per_s_per_gpu"] - 1


def test_every_published_fp8_run_within_25_percent_and_mean_within_12(predicted):
    rows, errs = [], []
    for pid, p in POINTS.items():
        r = predicted[pid]
        e = error(p, r)
        errs.append(abs(e))
        rows.append(f"| {pid} | {p['gpus']} | {r['config']} | {p['tokens_per_s_per_gpu']:,} | "
                    f"{r['tokens_per_s'] / p['gpus']:,.0f} | {100 * e:+.1f} % |")
        assert r["fits"] and r["precision"] == "fp8", pid   # every run fits as published
        assert abs(e) <= 0.25, (pid, e)
    print("\n| run | GPUs | configuration | published tok/s/GPU | predicted | error |\n|---|---:|---|---:|---:|---:|")
    print("\n".join(rows))
    print(f"mean |error| {100 * sum(errs) / len(errs):.1f} %, max {100 * max(errs):.1f} %")
    assert len(errs) == 11 and sum(errs) / len(errs) <= 0.12


def test_gpt3_175b_scaling_from_128_to_512_gpus_follows_the_published_one(predicted):
    """Same model and layout (TP 4, PP 8, VP 6); 512 GPUs run micro-batch 2 and 8x the batch: NeMo measured 7.7 %
    more tokens/s/GPU (smaller bubble (p-1)/(v m), larger GEMMs).  The ratio cancels the absolute GEMM efficiency,
    so it is held to 6 %."""
    a, b = POINTS["nemo24.07-gpt3-175b-128"], POINTS["nemo24.07-gpt3-175b-512"]
    measured = b["tokens_per_s_per_gpu"] / a["tokens_per_s_per_gpu"]
    pred = (predicted[b["id"]]["tokens_per_s"] / b["gpus"]) / (predicted[a["id"]]["tokens_per_s"] / a["gpus"])
    assert pred > 1 and abs(pred / measured - 1) < 0.06, (measured, pred)


def test_output_layer_stays_bf16_under_fp8():
    """Megatron-Core's output layer is not a Transformer Engine module: fp8 leaves its time unchanged."""
    from dataclasses import replace

    from workloads.step import MEGATRON_CORE, StepModel
    from workloads.parallelism import Parallelism

    fab = build("dgx", 8, {"gpu": "h100"})
    m = model("llama3-8b")
    par = Parallelism(tp=1, pp=2, dp=4, micro_batch=1, global_batch=32)
    parts = {fp8: StepModel(fab, m, runtime=replace(MEGATRON_CORE, fp8=fp8)).stage_parts(par, None, with_comm=False)
             for fp8 in (False, True)}
    # both stages hold 16 identical layers; the last adds the output layer and loss, the first the embedding
    extra = {fp8: parts[fp8][1]["compute"] - parts[fp8][0]["compute"] for fp8 in parts}
    assert extra[True] == pytest.approx(extra[False], rel=1e-9)
    assert parts[True][0]["compute"] < parts[False][0]["compute"]   # the Transformer layers do speed up


# --------------------------------------------------------------------------- long sequences (context parallelism)
LONG = json.loads((Path(__file__).parent.parent / "data" / "nemo_h100_long_sequence.json").read_text())


def predict_long(p: dict, runtime: str) -> dict:
    fab = build("dgx", max(p["gpus"], 8), {"gpu": "h100"})
    return mfu_summary(fab, model(LONG["model"]), search=False, runtime=runtime, global_batch=p["global_batch"],
                       seq_len=p["seq_len"], fp8=True, tp=p["tp"], pp=p["pp"], cp=p["cp"], dp=p["dp"],
                       micro_batch=p["micro_batch"])


@pytest.fixture(scope="module")
def long_predicted() -> dict[str, dict[str, dict]]:
    return {rt: {p["id"]: predict_long(p, rt) for p in LONG["points"]} for rt in ("megatron-core-fa2", "megatron-core")}


def test_long_sequences_4k_to_1m_within_10_percent_with_the_kernels_of_their_time(long_predicted):
    """Llama 2 7B at 4K-1M tokens with CP 1-32 (NeMo 24.03.01, before FlashAttention-3): with FlashAttention-2's
    published H100 throughput every row within 10 % (measured: max 3.6 %).  Attention is 8 % of the FLOPs at 4K and
    95 % at 1M, so this checks the attention kernel, the causal work split, the CP ring overlap and TP/CP placement
    over three orders of magnitude of sequence length; 10 % covers the GEMM curve's own error at 4K (the 24.07 rows)."""
    rows, errs = [], []
    for p in LONG["points"]:
        r = long_predicted["megatron-core-fa2"][p["id"]]
        best = long_predicted["megatron-core"][p["id"]]
        e = r["tokens_per_s"] / r["gpus_used"] / p["tokens_per_s_per_gpu"] - 1
        e_best = best["tokens_per_s"] / best["gpus_used"] / p["tokens_per_s_per_gpu"] - 1
        errs.append(abs(e))
        rows.append(f"| {p['seq_len'] // 1024}K | {p['gpus']} | {r['config']} | {p['tokens_per_s_per_gpu']:,} | "
                    f"{r['tokens_per_s'] / r['gpus_used']:,.0f} | {100 * e:+.1f} % | {100 * e_best:+.1f} % |")
        assert r["fits"] and r["runtime_switches"]["flash_kernel"] == "fa2", p["id"]
        assert abs(e) <= 0.10, (p["id"], e)
    print("\n| seq | GPUs | configuration | published tok/s/GPU | predicted (FA2) | error | error with FA3-class |")
    print("|---:|---:|---|---:|---:|---:|---:|\n" + "\n".join(rows))
    print(f"mean |error| {100 * sum(errs) / len(errs):.1f} %, max {100 * max(errs):.1f} %")


def test_the_best_kernel_would_overstate_long_sequences_increasingly(long_predicted):
    """The evidence for the kernel of the time: with FlashAttention-3-class figures the error grows with the
    attention share (4K -> 1M), which no sequence-independent cause (GEMM curve, communication) produces."""
    errs = [long_predicted["megatron-core"][p["id"]]["tokens_per_s"] / long_predicted["megatron-core"][p["id"]]["gpus_used"]
            / p["tokens_per_s_per_gpu"] - 1 for p in LONG["points"]]
    assert errs[-1] > errs[0] + 0.3 and errs[-1] > 0.4
