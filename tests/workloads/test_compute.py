"""The GEMM-efficiency model and layer compute times."""

import pytest

from fabric.catalog import load_catalog
from workloads.compute import DEFAULT_GEMM, GemmEfficiency, GpuSpec, layer_times
from workloads.flops import Gemm
from workloads.models import load_model
from workloads.parallelism import Parallelism

A100 = GpuSpec.from_catalog(load_catalog(), "gpu_a100")


def test_efficiency_is_bounded_and_grows_with_size():
    g = DEFAULT_GEMM
    assert 0 < g.efficiency(128, 128, 128) < g.efficiency(4096, 4096, 4096) < g.eta_max <= 1
    assert g.efficiency(2048, 512, 4096) == pytest.approx(g.efficiency(4096, 2048, 512))  # symmetric
    assert "calibrated" in g.source and "held out" in g.source


def test_roofline_for_skinny_products():
    g = GemmEfficiency(eta_max=1.0, d0=0.0, mem_efficiency=1.0)
    big = Gemm("big", 8192, 8192, 8192)
    assert g.gemm_time(big, 312e12, 2e12) == pytest.approx(big.flops / 312e12)
    skinny = Gemm("skinny", 8192, 8192, 8)  # 2 B x (64k + 64k + 64M) moved, 1 GFLOP
    moved = 2 * (8192 * 8 * 2 + 8192 * 8192)
    assert g.gemm_time(skinny, 312e12, 2e12) == pytest.approx(moved / 2e12)


def test_backward_is_twice_the_gemms_and_full_recompute_one_forward():
    m = load_model("llama3-8b")
    par = Parallelism(tp=2, micro_batch=1, global_batch=1, sequence_parallel=True)
    t = layer_times(m, par, False, A100, DEFAULT_GEMM, flash=True)
    assert 1.9 * t.fwd < t.bwd < 2.6 * t.fwd and t.recompute == 0
    full = layer_times(m, par.replace(recompute="full"), False, A100, DEFAULT_GEMM, flash=True)
    assert full.recompute == pytest.approx(full.fwd)
    sel = layer_times(m, par.replace(recompute="selective"), False, A100, DEFAULT_GEMM, flash=False)
    assert 0 < sel.recompute < sel.fwd


def test_fp8_speeds_up_weight_gemms():
    m = load_model("llama3-70b")
    h100 = GpuSpec.from_catalog(load_catalog(), "gpu_h100")
    par = Parallelism(tp=8, global_batch=1, sequence_parallel=True)
    bf16 = layer_times(m, par, False, h100, DEFAULT_GEMM, flash=True)
    fp8 = layer_times(m, par, False, h100, DEFAULT_GEMM, flash=True, fp8=True)
    assert 0.5 * bf16.fwd < fp8.fwd < bf16.fwd


def test_gemm_curve_carried_to_other_gpus_by_mamf_and_machine_balance():
    """Closed form: eta_max x (MAMF x training) ratio, d0 x (peak / HBM bandwidth) ratio; on the A100 the same curve;
    on every GPU no product beats its maximum achievable matmul FLOP/s (MAMF)."""
    cat = load_catalog()
    h100 = GpuSpec.from_catalog(cat, "gpu_h100")
    a = DEFAULT_GEMM.for_gpu(A100)
    assert (a.eta_max, a.d0, a.ceiling) == (DEFAULT_GEMM.eta_max, DEFAULT_GEMM.d0, A100.kernels.matmul)
    assert a.efficiency(1e6, 1e6, 1e6) == pytest.approx(A100.kernels.matmul)  # the ceiling, not eta_max
    assert a.efficiency(1024, 2048, 512) == pytest.approx(DEFAULT_GEMM.efficiency(1024, 2048, 512))
    g = DEFAULT_GEMM.for_gpu(h100)
    assert g.ceiling == h100.kernels.matmul
    ka, kh = A100.kernels, h100.kernels
    assert g.eta_max == pytest.approx(DEFAULT_GEMM.eta_max * kh.matmul * kh.training / (ka.matmul * ka.training))
    balance = (h100.peak_bf16_flops / h100.hbm_bandwidth) / (A100.peak_bf16_flops / A100.hbm_bandwidth)
    assert g.d0 == pytest.approx(DEFAULT_GEMM.d0 * balance)
    assert g.mem_efficiency == DEFAULT_GEMM.mem_efficiency
    # the H100 reaches a smaller fraction of its (3.2x larger) peak than the A100 on the same large GEMM
    assert g.efficiency(8192, 8192, 8192) < DEFAULT_GEMM.efficiency(8192, 8192, 8192)


def test_every_catalog_gpu_has_sourced_kernel_efficiencies():
    cat = load_catalog()
    for item in ("gpu_a100", "gpu_h100", "gpu_h800", "gpu_h20", "gpu_b200", "gpu_gb200"):
        k = GpuSpec.from_catalog(cat, item).kernels
        assert k is not None and 0 < k.flash_bwd < k.flash_fwd < 1 and 0 < k.matmul < 1 and 0 < k.training <= 1
        assert set(k.sources) - {"fa2_fwd", "fa2_bwd"} == {"matmul", "flash_fwd", "flash_bwd", "training"}
        assert all(k.sources.values())
        # FlashAttention-2 (runtime megatron-core-fa2) is never faster than the best kernel of the GPU
        assert 0 < k.flash("fa2")[0] <= k.flash_fwd and 0 < k.flash("fa2")[1] <= k.flash_bwd
    assert GpuSpec.from_catalog(cat, "gpu_a100").kernels.training == 1.0  # the calibration GPU
    h100 = GpuSpec.from_catalog(cat, "gpu_h100").kernels.training
    for item in ("gpu_h800", "gpu_h20", "gpu_b200", "gpu_gb200"):  # carried over from H100, said so
        k = GpuSpec.from_catalog(cat, item).kernels
        assert k.training == h100 and "as H100" in k.sources["training"]


def test_flash_attention_at_its_own_kernel_efficiency():
    """Causal flash attention: half the score/context FLOPs at flash_fwd (backward 2.5x the FLOPs at flash_bwd),
    derated by keys / (keys + d0) for a short key loop; the weight GEMMs do not change."""
    from workloads.flops import attention_gemms

    h100 = GpuSpec.from_catalog(load_catalog(), "gpu_h100")
    m = load_model("llama3-70b").with_seq_len(32768)
    par = Parallelism(tp=8, cp=2, global_batch=1, sequence_parallel=True)
    t = layer_times(m, par, False, h100, DEFAULT_GEMM, flash=True)
    g = DEFAULT_GEMM.for_gpu(h100)
    keys = m.seq_len / par.cp
    core = sum(x.flops for x in attention_gemms(m, 1, tp=8, cp=2) if x.name in ("scores", "context"))
    short = keys / (keys + g.d0)
    assert t.attn_fwd == pytest.approx(0.5 * core / (h100.peak_bf16_flops * h100.kernels.flash_fwd * short))
    assert t.attn_bwd == pytest.approx(2.5 * 0.5 * core / (h100.peak_bf16_flops * h100.kernels.flash_bwd * short))
