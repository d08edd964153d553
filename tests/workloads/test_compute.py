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
