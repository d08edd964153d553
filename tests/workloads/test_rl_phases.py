"""RL phases in closed form: lengths, the decode/prefill roofline, weight-sync bytes and schedules, pipelines."""

import json

import numpy as np
import pytest

from fabric.catalog import load_catalog
from fabric.errors import FabricError
from topologies import build
from workloads.compute import DEFAULT_GEMM, GpuSpec
from workloads.models import load_model
from workloads.rl import pipeline as pipe
from workloads.rl.config import RLConfig
from workloads.rl.generation import (CommCoeffs, decode_cost, replica_time, schedule_slots, step_profile)
from workloads.rl.lengths import file_lengths, lognormal_lengths
from workloads.rl.network import Timer
from workloads.rl.traffic import Flows, pod_matrix
from workloads.rl.weightsync import plan_sync, shard_overlap, sync_bytes

CAT = load_catalog()
H800 = GpuSpec.from_catalog(CAT, "gpu_h800")


# ------------------------------------------------------------------------------------------- lengths
def test_lengths_seeded_and_long_tailed():
    a = lognormal_lengths(20000, 1000, 1.0, 16384, seed=3)
    assert np.array_equal(a, lognormal_lengths(20000, 1000, 1.0, 16384, seed=3))
    assert not np.array_equal(a, lognormal_lengths(20000, 1000, 1.0, 16384, seed=4))
    assert abs(np.median(a) / 1000 - 1) < 0.05  # the median is the parameter
    assert a.max() == 16384 and a.min() >= 1  # clipped
    assert np.percentile(a, 99) > 5 * np.median(a)  # a long tail
    assert np.all(lognormal_lengths(5, 77, 0.0, 100, seed=0) == 77)


def test_lengths_from_file(tmp_path):
    p = tmp_path / "l.txt"
    p.write_text("10\n20\n30000\n")
    a = file_lengths(p, 50, 1000, seed=1)
    assert set(a.tolist()) <= {10, 20, 1000} and np.array_equal(a, file_lengths(p, 50, 1000, seed=1))
    j = tmp_path / "l.json"
    j.write_text(json.dumps([5, 6]))
    assert set(file_lengths(j, 10, 100, 0).tolist()) <= {5, 6}
    bad = tmp_path / "bad.txt"
    bad.write_text("1.5\n")
    with pytest.raises(FabricError, match="lengths_file"):
        file_lengths(bad, 3, 10, 0)
    with pytest.raises(FabricError, match="no such file"):
        file_lengths(tmp_path / "none.txt", 3, 10, 0)


# ------------------------------------------------------------------------------------------- roofline
def test_slots_and_step_profile_match_a_direct_simulation():
    rng = np.random.default_rng(0)
    lengths = rng.integers(1, 30, size=23)
    starts = schedule_slots(lengths, 4)
    # a direct simulation: 4 slots, each takes the next sequence when free
    free = [0] * 4
    for i, ln in enumerate(lengths):
        s = min(range(4), key=lambda k: (free[k], k))
        assert starts[i] == free[s]
        free[s] += ln
    active, context = step_profile(lengths, starts, prompt=7)
    T = int((starts + lengths).max())
    ref_a, ref_c = np.zeros(T), np.zeros(T)
    for s, ln in zip(starts, lengths):
        for j in range(ln):
            ref_a[s + j] += 1
            ref_c[s + j] += 7 + j
    assert np.array_equal(active, ref_a) and np.allclose(context, ref_c)


def test_decode_roofline_closed_form():
    """One sequence on one GPU: memory-bound steps read the weights and the growing KV cache."""
    m = load_model("llama3-8b")
    cost = decode_cost(m, H800, 1, 2.0, 2.0)
    L, P = 300, 64
    r = replica_time(cost, np.array([L]), P, slots=8, comm=CommCoeffs())
    bw = H800.hbm_bandwidth * DEFAULT_GEMM.mem_efficiency
    W = 2.0 * m.params()
    kv = 2.0 * m.layers * m.kv_heads * (m.head_dim + m.v_head_dim)
    decode = (L * W + kv * (L * P + L * (L - 1) / 2)) / bw
    attn = 2.0 * m.layers * m.heads * (m.head_dim + m.v_head_dim)
    prefill = (2.0 * m.active_params() * P + attn * P * (P + 1) / 2) / (H800.peak_bf16_flops * DEFAULT_GEMM.eta_max)
    assert r.steps == L and r.memory_bound_steps == L
    assert r.decode_s == pytest.approx(decode, rel=1e-12)
    assert r.prefill_s == pytest.approx(prefill, rel=1e-12)
    assert r.total_s == pytest.approx(decode + prefill, rel=1e-12)


def test_long_tail_sets_the_phase():
    """With enough slots the replica runs as many steps as its longest response."""
    m = load_model("llama3-8b")
    cost = decode_cost(m, H800, 8, 2.0, 2.0)
    short = replica_time(cost, np.array([100] * 31), 16, 64, CommCoeffs())
    tail = replica_time(cost, np.array([100] * 31 + [4000]), 16, 64, CommCoeffs())
    assert short.steps == 100 and tail.steps == 4000 and tail.total_s > 10 * short.total_s


def test_moe_reads_only_touched_experts():
    m = load_model("mixtral-8x7b")
    cost = decode_cost(m, H800, 8, 2.0, 2.0)
    one, _ = cost.step_times(np.array([1.0]), np.array([0.0]))
    many, _ = cost.step_times(np.array([512.0]), np.array([0.0]))
    # one token touches top_k of E experts; 512 tokens touch (almost) all of them
    bw = 8 * H800.hbm_bandwidth * DEFAULT_GEMM.mem_efficiency
    assert one[0] == pytest.approx((cost.dense_weight_bytes + cost.expert_weight_bytes * 2 / 8) / bw)
    assert many[0] == pytest.approx(cost.weight_bytes / bw, rel=1e-6)


# ------------------------------------------------------------------------------------------- weight sync
@pytest.mark.parametrize("dtype, nbytes", [("bf16", 2.0), ("fp8", 1.0)])
def test_weight_sync_bytes_are_params_times_bytes(dtype, nbytes):
    m = load_model("llama3-70b")
    cfg = RLConfig.from_params({"gen_dtype": dtype})
    assert sync_bytes(m, cfg.gen_bytes_per_param) == m.params() * nbytes
    # p2p resharding delivers exactly that to every replica, and 1/(tp pp) of it to each of its GPUs
    train = np.arange(2 * 3 * 4).reshape(2, 3, 4)  # pp 2, dp 3, tp 4
    gen = 100 + np.arange(5 * 1 * 8).reshape(5, 1, 8)  # 5 replicas of tp 8
    plan = plan_sync("p2p", m, nbytes, train, gen)
    S = m.params() * nbytes
    recv = np.bincount(plan.flows.dst - 100, weights=plan.flows.nbytes)
    assert recv.sum() == pytest.approx(5 * S) and np.allclose(recv, S / 8)
    assert shard_overlap(2, 4, 1, 8).sum() == pytest.approx(1.0)


def test_broadcast_plan():
    m = load_model("llama3-8b")
    train = np.arange(8).reshape(1, 1, 8)
    gen = 100 + np.arange(3 * 2 * 4).reshape(3, 2, 4)  # 3 replicas of pp 2 x tp 4
    plan = plan_sync("broadcast", m, 2.0, train, gen)
    assert plan.chains.shape == (8, 4) and plan.shard_bytes == pytest.approx(2.0 * m.params() / 8)
    assert plan.flows.total_bytes == pytest.approx(3 * 2.0 * m.params())  # each replica receives S once


@pytest.mark.parametrize("timing", ["sim", "analytic"])
def test_broadcast_from_one_nic_takes_at_least_S_over_B(timing):
    f = build("dgx", 32, {"gpu": "h800", "k": 16, "tiers": "3"})
    B = CAT.value("gpu_h800", "nic_bandwidth")
    S = 8e9
    g = f.gpu_ids
    chain = np.array([[g[0], g[8], g[16], g[24]]])  # one trainer GPU, three rollout nodes
    t = Timer(timing).broadcasts(f, chain, S, chunks=64)
    assert t >= S / B
    # a pipelined chain: the fill is (hops - 1) chunks; the simulator runs it as NCCL does, at NCCL's share of
    # the NIC line rate (catalog nccl_path_efficiency)
    eff = CAT.value("nccl_path_efficiency", "network_factor") if timing == "sim" else 1.0
    assert t <= S / (B * eff) * (1 + 3 / 64) * 1.01 + 1e-3
    # point-to-point from the same NIC to three receivers moves 3 S through it
    p2p = Timer(timing).flows(f, Flows.of([g[0]] * 3, [g[8], g[16], g[24]], S))
    assert p2p >= 3 * S / B and p2p == pytest.approx(3 * S / B, rel=1e-3)


# ------------------------------------------------------------------------------------------- pipeline, traffic
def test_pipelines():
    t = {"generation": 10.0, "weight_sync": 2.0, "training": 5.0}
    assert pipe.iteration_time("sync", t) == 17.0
    assert pipe.iteration_time("async", t) == 12.0  # training hides behind sync + generation
    assert pipe.iteration_time("async", {**t, "training": 20.0}, 0.5) == 20.5
    with pytest.raises(FabricError):
        pipe.epochs("sometimes")


def test_pod_matrix():
    f = build("dgx", 256, {"gpu": "h800", "k": 16, "tiers": "3"})  # 4 pods of 64
    g = f.gpu_ids
    D = pod_matrix(f, Flows.of([g[0], g[1], g[70]], [g[64], g[2], g[200]], [5.0, 7.0, 11.0]))
    assert D.shape == (4, 4) and D[0, 1] == 5.0 and D[1, 3] == 11.0 and D.sum() == 16.0


def test_one_trillion_parameter_sync_is_near_the_published_1_3_s():
    """FIGURES (Perplexity, S): 1T parameters from 256 training GPUs to 128 inference GPUs in 1.3 s.

    The rollout GPUs each receive their bf16 shard over one 400G NIC: 2 TB / 32 GPUs per replica / 50 GB/s.
    """
    from workloads.placement import hbd_order

    m = load_model("megatron-1t")
    f = build("dgx", 384, {"gpu": "h800", "k": 16, "tiers": "3"})
    order, _ = hbd_order(f)
    plan = plan_sync("p2p", m, 2.0, order[:256].reshape(4, 8, 8), order[256:].reshape(4, 4, 8))
    t = Timer("analytic").flows(f, plan.flows)
    B = CAT.value("gpu_h800", "nic_bandwidth")
    assert t == pytest.approx(2.0 * m.params() / 32 / B, rel=0.01)
    assert 1.3 / 2 < t < 1.3 * 2
