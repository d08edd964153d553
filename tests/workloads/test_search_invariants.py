"""The search's best against the configurations of its own space given by hand, and MFU's step-time relations.

* Search optimality (exact): with one backend for screening and timing (``comm='analytic'``) the search is a
  branch and bound over its space with a valid lower bound, so no configuration of that space, evaluated as a
  pinned ``fabric mfu`` evaluates it (memory switches raised when the defaults do not fit), is faster.  It
  was: the search dropped every candidate that did not fit with ZeRO-1, while a pinned run raised ZeRO-2 and
  ran faster (llama3-8b on 64 H100: search 46.2 % MFU at tp2 mb2, pinned tp1 dp64 mb1 48.4 %; llama3-70b on
  576 GB200: 46.0 % against 50.9 %).
* MFU's definition (exact, same floats): ``mfu = model FLOPs per step / (step time x GPUs used x peak)``, and
  tokens/s = global batch x sequence / step time.
* Global batch (exact): at a fixed micro-batch, doubling the global batch doubles the micro-batches; compute
  per sequence and the DP all-reduce per step are unchanged, so MFU does not fall.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.errors import FabricError
from topologies import build
from workloads.mfu import mfu_summary
from workloads.models import load_model

GPUS, MODEL, BATCH = 64, "llama3-8b", 512


@pytest.fixture(scope="module")
def fab():
    return build("dgx", gpus=GPUS, params={"gpu": "h100"})


@pytest.fixture(scope="module")
def best(fab):
    return mfu_summary(fab, MODEL, search=True, comm="analytic", global_batch=BATCH)


def test_search_raises_memory_switches_as_a_pinned_run_does(fab, best):
    """The regression: tp1 dp64 mb1 fits only with ZeRO-2; a pinned run raises it, so the search must too."""
    pinned = mfu_summary(fab, MODEL, search=False, comm="analytic", global_batch=BATCH, tp=1, pp=1, dp=64,
                         micro_batch=1)
    assert pinned["memory_switches_raised"] == ["zero_stage 1 -> 2"] and pinned["fits"]
    assert best["step_time_s"] <= pinned["step_time_s"]
    assert best.get("memory_switches_raised") == ["zero_stage 1 -> 2"]
    assert best["parallelism"]["zero_stage"] == 2


@settings(max_examples=12, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), mb=st.sampled_from([1, 2, 4]),
       recompute=st.sampled_from(["none", "full"]))
def test_no_pinned_configuration_of_the_space_beats_the_search(fab, best, tp, pp, mb, recompute):
    """Exact: the same StepModel times both (analytic backend), and the pinned one is a member of the space."""
    dp = next((d for d in range(GPUS // (tp * pp), 0, -1) if BATCH % (d * mb) == 0), 0)
    try:
        pinned = mfu_summary(fab, MODEL, search=False, comm="analytic", global_batch=BATCH, tp=tp, pp=pp, dp=dp,
                             micro_batch=mb, recompute=recompute, sequence_parallel=tp > 1)
    except FabricError:  # out of memory even with the switches raised, or not a valid layout: not comparable
        return
    assert best["step_time_s"] <= pinned["step_time_s"] * (1 + 1e-12)
    assert best["mfu"] >= pinned["mfu"] * (1 - 1e-12)


def test_goodput_times_the_job_that_fabric_mfu_times(run_cli):
    """Llama 3 405B's layout fits only with ZeRO-2 and the memory-efficient norm.  `fabric goodput` searched its
    pinned job without raising them and fell back to full recomputation (healthy MFU 32.7 % against
    `fabric mfu`'s 43.7 %); both now run the same job, so the healthy MFU is the same float."""
    args = ["dgx", "--gpus", 8192, "-p", "gpu=h100", "--model", "llama3-405b", "--tp", 8, "--pp", 16, "--dp", 64,
            "--global-batch", 2048, "--interleave", 8, "--comm", "analytic", "--json"]
    rc, out, err = run_cli("mfu", *args)
    assert rc == 0, err
    mfu = json.loads(out)
    rc, out, err = run_cli("goodput", *args, "--no-series")
    assert rc == 0, err
    good = json.loads(out)
    assert mfu["memory_switches_raised"] == ["zero_stage 1 -> 2", "memory_efficient_norm"]
    assert good["config"] == mfu["config"] and good["healthy_mfu"] == mfu["mfu"]
    assert good["healthy_step_time_s"] == mfu["step_time_s"]


def test_mfu_is_model_flops_over_step_time_gpus_and_peak(best):
    """MFU's definition on the search's result: the JSON's own fields, one division each."""
    spec = load_model(MODEL)
    tokens = best["global_batch"] * spec.seq_len
    assert best["tokens_per_s"] == pytest.approx(tokens / best["step_time_s"], rel=1e-12)
    flops_per_s = best["model_tflops_per_gpu"] * 1e12 * best["gpus_used"]
    assert best["mfu"] == pytest.approx(flops_per_s / (best["gpus_used"] * best["peak_tflops_per_gpu"] * 1e12),
                                        rel=1e-12)
    assert sum(best["breakdown_s"].values()) == pytest.approx(best["step_time_s"], rel=1e-12)


def test_doubling_the_global_batch_amortises_the_dp_all_reduce(fab):
    """At a fixed micro-batch the micro-batch count doubles: compute per sequence is the same float, the DP
    all-reduce per step the same, so MFU rises (or stays) and never falls."""
    runs = [mfu_summary(fab, MODEL, search=False, comm="analytic", global_batch=b, tp=2, pp=2, dp=16, micro_batch=1)
            for b in (128, 256, 512)]
    per_seq = [r["breakdown_s"]["compute"] / r["global_batch"] for r in runs]
    assert per_seq[1] == pytest.approx(per_seq[0], rel=1e-12) and per_seq[2] == pytest.approx(per_seq[0], rel=1e-12)
    assert runs[0]["breakdown_s"]["dp"] == runs[1]["breakdown_s"]["dp"] == runs[2]["breakdown_s"]["dp"]
    assert runs[0]["breakdown_s"]["bubble"] == pytest.approx(runs[2]["breakdown_s"]["bubble"], rel=1e-12)
    assert runs[0]["mfu"] < runs[1]["mfu"] < runs[2]["mfu"]


def test_goodput_healthy_job_is_the_searched_mfu_job(fab, best):
    """`fabric goodput` without pins searches the healthy job with mfu_summary: the same configuration and
    the same floats (tokens/s, MFU) as `fabric mfu --search` on the same inputs."""
    from workloads.goodput.summary import goodput_summary

    d = goodput_summary(fab, MODEL, comm="analytic", global_batch=BATCH, series=False)
    assert d["fastest_config"] == best["config"]
    assert d["healthy_tokens_per_s"] == best["tokens_per_s"] and d["healthy_mfu"] == best["mfu"]
    assert 0 < d["goodput_ratio"] <= 1
    assert d["effective_tokens_per_s"] == pytest.approx(d["goodput_ratio"] * d["healthy_tokens_per_s"], rel=1e-12)
    assert d["tokens_per_s_per_musd"] == pytest.approx(d["effective_tokens_per_s"] / (d["capex_usd"] / 1e6),
                                                       rel=1e-12)
