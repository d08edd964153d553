"""`fabric mfu` through the real entry point: JSON, search, versus, and one-line errors with exit 2."""

import json

import pytest

from cli.app import main


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_one_configuration_json(capsys):
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 16, "-p", "gpu=a100", "--model", "megatron-1.7b", "--tp", 2,
                       "--global-batch", 64, "--recompute", "full", "--runtime", "megatron-2021", "--comm", "analytic",
                       "--json")
    assert rc == 0, err
    d = json.loads(out)
    for key in ("step_time_s", "mfu", "hfu", "tflops_per_gpu", "memory_gb_per_gpu", "breakdown_s", "config"):
        assert key in d
    assert d["config"] == "tp2 pp1 dp8 mb1 sp full" and d["gpus_used"] == 16
    assert sum(d["breakdown_s"].values()) == pytest.approx(d["step_time_s"])
    assert 0 < d["mfu"] < d["hfu"] < 1 and d["comm_backend"] == "analytic"


def test_search_and_versus_table(capsys):
    rc, out, err = run(capsys, "mfu", "nvl-72", "--gpus", 72, "-p", "gpu=gpu_b200", "--model", "llama3-8b",
                       "--global-batch", 72, "--search", "--comm", "analytic", "--versus", "dgx:gpu=b200")
    assert rc == 0, err
    assert "MFU ratio" in out and "compute" in out
    assert "searched" in out


def test_not_fitting_reports_numbers(capsys):
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 64, "--model", "gpt3-175b", "--tp", 8, "--comm", "analytic")
    assert rc == 2 and out == ""
    assert err.startswith("error: memory:") and "GB per GPU" in err and err.count("\n") == 1


@pytest.mark.parametrize("args, text", [
    (["--model", "gpt3-175b", "--tp", 64], "error: --tp: 64 does not divide heads=96"),
    (["--model", "gpt3-175b", "--pp", 97], "error: --pp: 96 layers of gpt3-175b leave a pipeline stage empty"),
    (["--model", "gpt3-175b", "--flops-convention", "half"], "error: --flops-convention: 'half' not allowed"),
    (["--model", "gpt3-175b", "--tp", 8, "--pp", 8, "--zero", 5], "error: --zero: 5 not allowed"),
    (["--model", "gpt3-175b", "--tp", 8, "--pp", 8, "--first-stage-layers", 200], "error: --first-stage-layers:"),
    (["--model", "gpt-5"], "error: --model: unknown preset 'gpt-5'"),
    (["--model", "gpt3-175b", "--recompute", "most"], "error: --recompute:"),
    (["--model", "gpt3-175b", "--tp", 12], "error: --tp: 12 exceeds the switch_domain HBD of 8 GPUs"),
    (["--model", "mixtral-8x7b", "--ep", 3], "error: --ep: 3 does not divide experts=8"),
    # the model-parallel product alone exceeds the 64 GPUs: the flag named is the one that made it so
    (["--model", "llama3-8b", "--cp", 128], "error: --cp: no data-parallel size fits: tp x cp x pp = 128"),
    (["--model", "megatron-1.7b", "--pp", 24, "--tp", 8], "error: --pp: no data-parallel size fits"),
    (["--model", "llama3-8b", "--tp", 8, "--cp", 16], "error: --cp: no data-parallel size fits"),
    # a micro-batch larger than the global batch: that flag, not --global-batch
    (["--model", "llama3-8b", "--tp", 8, "--micro-batch", 1000000], "error: --micro-batch: no data-parallel size"),
    # sequence parallelism (on with --tp > 1) needs TP to divide the sequence (Megatron mappings.py asserts it)
    (["--model", "llama3-8b", "--tp", 8, "--seq-len", 1], "error: --seq-len: 1: sequence parallelism splits"),
])
def test_bad_input_one_line_exit_2(capsys, args, text):
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 64, "--comm", "analytic", *args)
    assert rc == 2 and out == ""
    assert err.startswith(text) and err.count("\n") == 1


def test_malformed_model_file(capsys, tmp_path):
    bad = tmp_path / "m.yaml"
    bad.write_text("hidden: 4096\nlayers: [1, 2\n")
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 8, "--model", bad)
    assert rc == 2 and err.startswith("error: --model: m.yaml is not valid YAML") and err.count("\n") == 1
    wrong = tmp_path / "w.yaml"
    wrong.write_text("hidden: 4096\nlayers: 32\nheads: 32\nvocab: 32000\nseq_len: 0\n")
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 8, "--model", wrong)
    assert rc == 2 and err.startswith("error: w.yaml:seq_len:")


def test_conventions_in_help_and_json(capsys):
    rc, out, err = run(capsys, "mfu", "--help")
    text = " ".join(out.split())
    assert rc == 0 and "--flops-convention" in text and "PaLM" in text and "precision in use" in text


def test_megatron_2021_turns_the_distributed_optimizer_off(capsys):
    args = ["mfu", "dgx", "--gpus", 16, "-p", "gpu=a100", "--model", "megatron-1.7b", "--tp", 2, "--global-batch",
            64, "--recompute", "full", "--comm", "analytic", "--json"]
    rc, out, err = run(capsys, *args, "--runtime", "megatron-2021")
    old = json.loads(out)
    rc2, out2, err2 = run(capsys, *args)
    new = json.loads(out2)
    assert rc == 0 and rc2 == 0
    assert old["parallelism"]["distributed_optimizer"] is False and new["parallelism"]["distributed_optimizer"] is True
    assert old["memory"]["optimizer_gb"] > new["memory"]["optimizer_gb"]
    for d in (old, new):
        assert d["model_tflops_per_gpu"] < d["hardware_tflops_per_gpu"] and "attention_flops" in d["conventions"]
        assert d["flops_convention"] == "causal" and 0 < d["mfu"] < 1


def test_llama3_405b_as_published_is_expressible(capsys):
    """126 layers on PP 16 as Llama 3 laid them out (128 one-layer chunks with the embedding and the loss counted:
    v = 8), no recomputation, TP 8, seq 8K, FSDP-style ZeRO-2, 8,192 H100: fits, MFU within 10 % of the published 43 %
    (arXiv 2407.21783 Table 4).  Without interleaving the 1F1B bubble (15/32) costs a third, as the paper's
    interleaved schedule avoids."""
    args = ("mfu", "dgx", "--gpus", 8192, "-p", "gpu=h100", "--model", "llama3-405b", "--tp", 8, "--pp", 16,
            "--dp", 64, "--global-batch", 2048, "--recompute", "none", "--zero", 2, "--comm", "analytic", "--json")
    rc, out, err = run(capsys, *args, "--interleave", 8, "--account-for-embedding", "--account-for-loss",
                       "--memory-efficient-norm")
    assert rc == 0, err
    d = json.loads(out)
    assert d["fits"] and d["stage_layers"][0] == 7 and d["stage_layers"][-1] == 7 and sum(d["stage_layers"]) == 126
    assert d["parallelism"]["interleave"] == 8 and d["runtime_switches"]["memory_efficient_norm"] is True
    assert abs(d["mfu"] / 0.43 - 1) < 0.10
    rc, out, err = run(capsys, *args)
    flat = json.loads(out)
    assert rc == 0, err
    assert flat["fits"] and flat["mfu"] < 0.85 * d["mfu"]


def test_memory_switches_are_raised_only_when_left_open(capsys):
    """The 405B layout of Llama 3 with the runtime's defaults (ZeRO-1 keeps fp32 gradients whole: 94.9 GB) is
    made to fit by the memory-only switches the run used (ZeRO-2, norms keeping their output: 74.5 GB), stated in
    the JSON and on stderr; the result equals giving them by hand (same model, same switches: exact).  A stage the
    caller fixed is never raised: ZeRO-1 fixed does not fit, a one-line error, exit 2."""
    args = ("mfu", "dgx", "--gpus", 8192, "-p", "gpu=h100", "--model", "llama3-405b", "--tp", 8, "--pp", 16,
            "--dp", 64, "--global-batch", 2048, "--recompute", "none", "--interleave", 8, "--comm", "analytic",
            "--json")
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    auto = json.loads(out)
    assert auto["memory_switches_raised"] == ["zero_stage 1 -> 2", "memory_efficient_norm"]
    assert auto["fits"] and auto["parallelism"]["zero_stage"] == 2
    assert auto["runtime_switches"]["memory_efficient_norm"] is True
    assert "raised zero_stage 1 -> 2" in err and err.count("\n") == 1
    rc, out, _ = run(capsys, *args, "--zero", 2, "--memory-efficient-norm")
    by_hand = json.loads(out)
    assert rc == 0 and "memory_switches_raised" not in by_hand
    assert auto["mfu"] == by_hand["mfu"] and auto["memory_gb_per_gpu"] == by_hand["memory_gb_per_gpu"]
    rc, out, err = run(capsys, *args, "--zero", 1)
    assert rc == 2 and out == "" and "does not fit" in err and err.count("\n") == 1


# A well-formed cache key (digest/backend/kind/GxN/layout/protocol, as CommCache.time writes it).
KEY = "d3ec24dcf33cd0590c6515a2f112d199/sim-9a5ee0518223e22d/all_reduce/8x8/7f58f6fecd0e09fadd8edd10/simple"


@pytest.mark.parametrize("doc, named", [
    ('{"%s": [-1, -1]}' % KEY, "[-1, -1] must be"),             # was read: step time -239999992.957 s, exit 0
    ('{"%s": [1e9, 1e9]}' % KEY, "at most 1e+09 s"),             # was read: absurd step times, exit 0
    ('{"%s": [1000000001, 0]}' % KEY, "at most 1e+09 s"),
    ('{"%s": [NaN, 0]}' % KEY, "two finite numbers >= 0"),
    ('{"%s": [0, Infinity]}' % KEY, "two finite numbers >= 0"),
    ('{"%s": [true, 0]}' % KEY, "two finite numbers >= 0"),
    ('{"%s": [1e-5]}' % KEY, "two finite numbers >= 0"),
    ('{"%s": "1e-5 2e-12"}' % KEY, "two finite numbers >= 0"),
    ('{"x/y": [0, 0]}', "key 'x/y' is not digest/backend/kind/GxN/layout"),
    ('{"%s": [0, 0]}' % KEY.replace("all_reduce", "broadcast"), "kind one of all_reduce"),
    ('[[0, 0]]', "must hold a JSON object"),
    ('{"a": ', "is not JSON"),
])
def test_comm_cache_entries_are_checked_when_read(capsys, tmp_path, doc, named):
    """Each entry of --comm-cache is [intercept_s, slope_s_per_byte], finite, >= 0, and its collective at the
    larger fit size (256 MiB) takes at most 1e9 s; a bad one is named, exit 2, and the file is left as it was."""
    path = tmp_path / "cc.json"
    path.write_text(doc)
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--comm", "analytic",
                       "--comm-cache", path)
    assert rc == 2 and out == "" and "Traceback" not in err
    assert err.startswith("error: --comm-cache: cc.json") and named in err and err.count("\n") == 1
    assert path.read_text() == doc  # not rewritten


def test_comm_cache_round_trip_gives_the_same_step(capsys, tmp_path):
    """A cache written by one run is accepted by the next, which gives the same step time (fits reused exactly)."""
    from workloads import comm

    path = tmp_path / "cc.json"
    args = ("mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--comm", "analytic", "--comm-cache", path, "--json")
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    first = json.loads(out)
    comm.clear_cache()
    rc, out, err = run(capsys, *args)
    assert rc == 0, err
    assert json.loads(out)["step_time_s"] == first["step_time_s"] and json.loads(path.read_text())


def test_expert_parallel_without_dp_takes_the_largest_dp(capsys):
    # Megatron-core folds the EP groups out of the TP x CP x DP ranks, so --tp 1 --ep 8 on 64 GPUs is dp 64 with
    # 8 expert-parallel groups (the Mixtral recipe); the default dp must not be checked at dp = 1 (8 does not
    # divide 1), which refused it
    rc, out, err = run(capsys, "mfu", "dgx", "-p", "gpu=b200", "--gpus", 64, "--model", "mixtral-8x7b", "--tp", 1,
                       "--ep", 8, "--comm", "analytic", "--json")
    assert rc == 0, err
    par = json.loads(out)["parallelism"]
    assert (par["tp"], par["ep"], par["dp"]) == (1, 8, 64)
    # no dp that 8 divides also divides a global batch of 4: refused, naming the batch and the EP rule
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 64, "--model", "mixtral-8x7b", "--tp", 1, "--ep", 8,
                       "--global-batch", 4, "--comm", "analytic")
    assert rc == 2 and out == "" and err.startswith("error: --global-batch:") and "for ep 8" in err


def test_tp_above_the_kv_heads_is_flagged_as_not_megatrons(capsys):
    # llama3-8b has 8 KV heads; Megatron-core asserts that TP divides them (attention.py,
    # divide(num_query_groups, tp)), so TP 16 is modelled (KV heads replicated) but said not to run there
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--tp", 16, "--comm", "analytic",
                       "--json")
    assert rc == 0, err
    assert any("8 KV heads" in w and "Megatron-core refuses" in w for w in json.loads(out)["warnings"])
    rc, out, err = run(capsys, "mfu", "dgx", "--gpus", 64, "--model", "megatron-7.5b", "--tp", 16, "--comm",
                       "analytic", "--json")  # 32 KV heads (MHA): no such warning
    assert rc == 0 and not any("KV heads" in w for w in json.loads(out)["warnings"])


def test_runtime_with_flashattention2_kernels(capsys):
    """--runtime megatron-core-fa2: the same runtime with FlashAttention-2's throughput (H100: 0.34 / 0.325 of the
    peak vs 0.62 / 0.50); only attention slows, so a 32K-token Llama 3 8B step is slower and its memory unchanged."""
    args = ["mfu", "dgx", "--gpus", 8, "-p", "gpu=h100", "--model", "llama3-8b", "--seq-len", 32768, "--tp", 8,
            "--global-batch", 4, "--recompute", "selective", "--comm", "analytic", "--json"]
    rc, out, err = run(capsys, *args, "--runtime", "megatron-core-fa2")
    fa2 = json.loads(out)
    rc2, out2, err2 = run(capsys, *args)
    best = json.loads(out2)
    assert rc == 0 and rc2 == 0, err + err2
    assert fa2["runtime_switches"]["flash_kernel"] == "fa2" and best["runtime_switches"]["flash_kernel"] == "best"
    assert fa2["kernel_efficiency"]["fa2_fwd"] == 0.34 and best["kernel_efficiency"]["flash_fwd"] == 0.62
    # only attention slows, by at most the kernels' ratio (1/0.34 + 2.5/0.325) / (1/0.62 + 2.5/0.50) = 1.61
    assert 1.1 * best["step_time_s"] < fa2["step_time_s"] < 1.61 * best["step_time_s"]
    assert fa2["memory"] == best["memory"]
