"""HBD allocation under faults: closed forms, exact groups vs vectorised counts, TP checks, headline results."""

import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.faults import FaultModel, FaultSamples, sample_components
from solvers.allocation import (EffectMapper, FaultBatch, allocate, allocate_row, blast_radius, count_usable,
                                evaluate_faults, policy_for)
from topologies import build

_CACHE = {}


def fab(name, gpus, **params):
    key = (name, gpus, tuple(sorted(params.items())))
    if key not in _CACHE:
        _CACHE[key] = build(name, gpus, params)
    return _CACHE[key]


# ------------------------------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("p", [0.01, 0.03, 0.06])
def test_tpuv4_waste_tends_to_one_minus_healthy_cube_mates(p):
    """TPUv4, i.i.d. host faults of ratio p, TP = 64: waste -> 1 - (1 - p)^15.

    Exact for the pooled ratio (a ratio of expectations): a healthy host's 4
    chips are usable iff its cube's 15 other hosts are healthy (a cube with
    any faulty host cannot join a slice, and TP 64 is one whole cube), so
    E[wasted] / E[healthy] = 1 - (1 - p)^15 for any cluster size; the Monte
    Carlo estimate only carries sampling error (~4 standard errors allowed).
    """
    r = evaluate_faults(fab("tpuv4", 4096), 64, node_fault_ratio=p, samples=3000, seed=1, blast=False)
    expect = 1 - (1 - p) ** 15
    assert r["waste_ratio"]["pooled"] == pytest.approx(expect, abs=0.006)
    assert r["waste_ratio"]["mean"] == pytest.approx(expect, abs=0.01)


def test_nvl72_fragmentation_without_faults():
    """NVL-72 with no fault strands exactly 72 mod TP GPUs per domain (any TP GPUs of a domain form a group)."""
    f = fab("nvl", 72 * 3, size=72)
    pol = policy_for(f)
    empty = FaultBatch.from_nodes(pol.nodes, FaultSamples.empty(1, pol.nodes.n_nodes))
    for tp in range(1, 73):
        usable = int(count_usable(pol, tp, empty)[0])
        assert 216 - usable == 3 * (72 % tp)
        a = allocate(f, tp)
        assert a.usable_gpus == usable and a.waste_ratio == pytest.approx((72 % tp) / 72)


@pytest.mark.parametrize("tp", [8, 32, 64])
def test_nvl72_expected_usable_matches_the_binomial_law(tp):
    """NVL-72, i.i.d. tray faults of ratio p: E[usable] = domains * sum_f Bin(f; 18, p) floor((72 - 4f) / TP) TP.

    Exact: a domain's failed trays are Binomial(18, p) and its usable GPUs
    depend only on that count; the Monte Carlo mean carries sampling error only.
    """
    from math import comb

    p, domains = 0.05, 8
    f = fab("nvl", 72 * domains, size=72)
    r = evaluate_faults(f, tp, node_fault_ratio=p, samples=4000, seed=2, blast=False)
    expect = domains * sum(comb(18, k) * p ** k * (1 - p) ** (18 - k) * ((72 - 4 * k) // tp * tp) for k in range(19))
    assert r["usable_gpus"]["mean"] == pytest.approx(expect, rel=0.005)
    assert r["healthy_gpus"]["mean"] == pytest.approx(72 * domains * (1 - p), rel=0.003)


def test_dgx_has_no_waste_at_tp8():
    """DGX at TP 8: the domain is the node, so a node fault strands nothing else (waste exactly 0)."""
    r = evaluate_faults(fab("dgx", 512), 8, node_fault_ratio=0.1, samples=100, seed=0, blast=False)
    assert r["waste_ratio"]["max"] == 0 and r["usable_gpus"]["mean"] == r["healthy_gpus"]["mean"]


def test_switch_domain_packs_healthy_gpus_per_domain():
    """usable = sum over domains of floor(healthy_in_domain / TP) * TP; a failed GPU drains its 4-GPU tray."""
    f = fab("nvl", 144, size=72)
    a = allocate(f, 16, faulty_nodes=[0, 1, 20], faulty_gpus=[40])  # trays 0, 1, 10 of domain 0; tray 20 of domain 1
    # domain 0 loses trays 0, 1 and 10 (GPU 40 drains tray 10): 60 left -> 3 groups; domain 1: 68 -> 4 groups
    assert a.n_groups == 7 and a.usable_gpus == 112
    assert a.healthy_gpus == 144 - 12 - 1  # the drained node mates of GPU 40 are healthy but stranded
    dom = f.group("domain")[a.groups]
    assert np.all(dom == dom[:, :1])


# ------------------------------------------------------------------------------------------ exact vs count
ARCHS = [
    ("dgx", 256, {}, 4),
    ("dgx", 256, {"rail_optimized": "true"}, 8),
    ("nvl", 288, {"size": 36}, 12),
    ("nvl", 288, {"size": 72}, 32),
    ("nvl", 576, {"size": 576}, 64),
    ("tpuv4", 512, {}, 16),
    ("tpuv4", 512, {}, 128),
    ("khop-ring", 240, {"k": 2}, 16),
    ("khop-ring", 240, {"k": 3, "closed": "true"}, 12),
    ("khop-ring", 240, {"k": 2, "trx_per_gpu": 4}, 8),
    ("khop-ring", 120, {"k": 2, "gpus_per_node": 2}, 6),
    ("khop-ring", 240, {"k": 2}, 2),  # inside a node's mesh
    ("khop-ring", 240, {"k": 3}, 1),  # every GPU its own group
    ("torus", 0, {"dims": "16x8"}, 8),
    ("torus", 0, {"dims": "8x6"}, 16),
    ("torus", 0, {"dims": "8x4x4"}, 64),
    ("fat-tree", 0, {"k": 8}, 1),
]


@pytest.mark.parametrize("name, gpus, params, tp", ARCHS)
def test_exact_groups_match_vectorised_counts(name, gpus, params, tp):
    """For random mixed fault sets (nodes, GPUs, racks, ToRs, switches, OCS, links, transceivers), the exact
    allocator's groups are valid and as many as the vectorised count path says."""
    f = fab(name, gpus or None, **params)
    pol = policy_for(f)
    model = FaultModel({"node": 0.05, "gpu": 0.01, "rack": 0.02, "tor": 0.02, "switch": 0.05, "ocs": 0.05,
                        "link": 0.01, "transceiver": 0.01})
    comp = sample_components(f, model, 24, seed=5, nodes=pol.nodes)
    batch = EffectMapper(pol).batch(comp)
    counts = count_usable(pol, tp, batch)
    unavailable_ok = 0
    for i in range(batch.n_rows):
        a = allocate_row(pol, tp, batch, i)
        assert a.usable_gpus == counts[i], f"row {i}"
        g = a.groups
        assert g.shape[1] == tp and np.unique(g).size == g.size
        down = set(pol.nodes.gpu_ids[pol.nodes.gpus_of_nodes(batch.down_nodes.row(i))].tolist())
        if batch.down_gpus is not None:
            down |= set(pol.nodes.gpu_ids[batch.down_gpus.row(i)].tolist())
        assert not (set(g.ravel().tolist()) & down)
        unavailable_ok += 1
        assert 0 <= a.usable_gpus <= a.healthy_gpus <= f.n_gpus
    assert unavailable_ok == batch.n_rows


def test_allocate_single_fault_sets_by_component():
    """allocate() accepts component positions; a ToR failure strands exactly the GPUs under it (DGX, TP 8)."""
    f = fab("dgx", 256)
    tor0 = f.group("tor")[f.gpu_ids] == 0
    a = allocate(f, 8, components={"tor": [0]})
    assert a.usable_gpus == 256 - int(tor0.sum())
    with pytest.raises(FabricError, match="components.tor"):
        allocate(f, 8, components={"tor": [10_000]})
    with pytest.raises(FabricError, match="nodes"):
        allocate(f, 8, faulty_nodes=[999])


# ------------------------------------------------------------------------------------------ TP checks
@pytest.mark.parametrize("name, gpus, params, tp, match", [
    ("khop-ring", 256, {}, 6, "multiple of 4"),
    ("khop-ring", 256, {}, 5, "must divide 4 or be a multiple of 4"),  # above the node: whole nodes only
    ("khop-ring", 256, {"gpus_per_node": 8}, 12, "must divide 8 or be a multiple of 8"),
    ("nvl", 144, {"size": 72}, 73, "max 72"),
    ("dgx", 64, {}, 16, "max 8"),
    ("tpuv4", 4096, {}, 96, "whole cubes"),
    ("torus", 0, {"dims": "16x8"}, 24, "whole lines"),
    ("fat-tree", 0, {"k": 4}, 2, "max 1"),
    ("nvl", 72, {"size": 72}, 0, ">= 1"),
])
def test_bad_tp_is_rejected(name, gpus, params, tp, match):
    with pytest.raises(FabricError, match=match):
        evaluate_faults(fab(name, gpus or None, **params), tp, node_fault_ratio=0.01, samples=2)


def test_bad_ratio_and_samples_are_rejected():
    f = fab("dgx", 64)
    for r in (-0.1, 1.5, float("nan")):
        with pytest.raises(FabricError, match="node_fault_ratio"):
            evaluate_faults(f, 8, node_fault_ratio=r, samples=2)
    with pytest.raises(FabricError, match="samples"):
        evaluate_faults(f, 8, node_fault_ratio=0.1, samples=0)


def test_sampling_past_the_limits_is_refused_before_any_draw():
    """The memory limit covers samples x (nodes + fault draws) x 8 B (fabric.limits), for the API, the CLI and
    a sweep's shared draw alike: DGX 64 GPUs = 8 nodes; ratio 0.5 draws ceil(4 + 8 sqrt(2) + 16) = 32 positions
    per sample, so 10,000 samples need 10,000 x 40 x 8 B = 3.2 MB."""
    from fabric import limits
    from fabric.faultset import draw_faults

    f = fab("dgx", 64)
    token = limits.set_limits(limits.parse_limits(["memory=3MB"]))
    try:
        with pytest.raises(FabricError, match=r"needs about .* \(10,000 samples x \(8 nodes \+ 32 fault draws"):
            evaluate_faults(f, 8, node_fault_ratio=0.5, samples=10_000, blast=False)
        with pytest.raises(FabricError, match="memory") as err:
            draw_faults(f, FaultModel({"node": 0.5}), 0, 10_000)
        assert err.value.field == "samples"
        ok = evaluate_faults(f, 8, node_fault_ratio=0.5, samples=9_000, blast=False)
        assert ok["fault_model"]["samples"] == 9_000
        with pytest.raises(FabricError, match="samples"):  # the samples limit itself
            limits.set_limits(limits.parse_limits(["samples=100"]))
            evaluate_faults(f, 8, node_fault_ratio=0.5, samples=101, blast=False)
    finally:
        limits.reset(token)


# ------------------------------------------------------------------------------------------ torus policy
def test_torus_fault_takes_its_whole_line():
    """Whole-ring policy: one faulty host removes the dims[0]-GPU line through it; TP > dims[0] needs
    adjacent fault-free lines."""
    f = fab("torus", None, dims="16x8")
    a = allocate(f, 8, faulty_nodes=[0])  # host 0 = GPUs 0..3 of line 0
    assert a.usable_gpus == 128 - 16
    assert not np.isin(np.arange(16), a.groups).any()
    b = allocate(f, 32, faulty_nodes=[0, 12])  # lines 0 and 3 down: healthy lines 1-2, 4-7 -> 1 + 2 pairs
    assert b.n_groups == 3 and b.unit_kind == "line"
    assert np.all(np.diff(b.units, axis=1) == 1)


# ------------------------------------------------------------------------------------------ blast radius
def test_blast_radius_per_architecture():
    """One failure: NVL-72 tray -> 0 GPUs at 8/9 bandwidth; TPUv4 host -> its 64-chip cube; k-hop node -> own 4."""
    nvl = blast_radius(policy_for(fab("nvl", 4608, size=72)), 32)
    assert nvl["switch"]["max"] == 0 and nvl["switch"]["bandwidth_left"] == pytest.approx(8 / 9)
    assert nvl["rack"]["mean"] == 64  # a rack is a domain: 72 GPUs, 64 of them usable at TP 32
    tpu = blast_radius(policy_for(fab("tpuv4", 4096)), 32)
    assert tpu["node"]["min"] == tpu["node"]["max"] == 64 and tpu["node"]["own"] == 4
    assert tpu["ocs"]["max"] == 0 and tpu["link"]["min"] == 64
    # k >= 2 skips a single faulty node, so the line stays one segment: with 1,154 nodes (144 rings of 8
    # plus 2 spare nodes) a node fault costs no usable GPU; with exactly 1,152 nodes it breaks one ring
    kh = blast_radius(policy_for(fab("khop-ring", 4616, k=2)), 32)
    # the failed node was a spare (idle): it strands no healthy GPU (0, not unusable - own = 0 - 4 = -4)
    assert kh["node"]["max"] == 0 and kh["node"]["own"] == 4 and kh["node"]["stranded"] == 0
    kh = blast_radius(policy_for(fab("khop-ring", 4608, k=2)), 32)
    assert kh["node"]["min"] == kh["node"]["max"] == 32 and kh["gpu"]["own"] == 1
    k1 = blast_radius(policy_for(fab("khop-ring", 4616, k=1)), 32)
    assert k1["node"]["max"] > 4  # k = 1 cannot skip: the line splits at the fault
    dgx = blast_radius(policy_for(fab("dgx", 1024)), 8)
    assert dgx["gpu"]["mean"] == 8 and dgx["switch"]["bandwidth_left"] == pytest.approx(0.75)


# ------------------------------------------------------------------------------------------ headline results
def test_khop_waste_is_ten_times_below_nvl72_and_tpuv4():
    """InfiniteHBD's headline (FIGURES): k-hop waste over 10x lower than NVL-72 and TPUv4, at TP 32 and 3 %
    node faults and on the production trace, at 4,608 GPUs."""
    res = {}
    for label, name, params in [("nvl72", "nvl", {"size": 72}), ("tpuv4", "tpuv4", {}),
                                ("k2", "khop-ring", {"k": 2}), ("k3", "khop-ring", {"k": 3})]:
        f = fab(name, 4608, **params)
        iid = evaluate_faults(f, 32, node_fault_ratio=0.03, samples=1500, seed=0, blast=False)
        tr = evaluate_faults(f, 32, trace="stepfun", seed=0, blast=False)
        res[label] = (iid["waste_ratio"]["mean"], tr["waste_ratio"]["mean"])
    for k in ("k2", "k3"):
        for other in ("nvl72", "tpuv4"):
            assert 10 * res[k][0] < res[other][0], (k, other, res)
            assert 10 * res[k][1] < res[other][1], (k, other, res)


def test_same_seed_same_numbers():
    f = fab("khop-ring", 1024, k=2)
    a = evaluate_faults(f, 16, node_fault_ratio=0.05, samples=300, seed=11)
    b = evaluate_faults(f, 16, node_fault_ratio=0.05, samples=300, seed=11)
    c = evaluate_faults(f, 16, node_fault_ratio=0.05, samples=300, seed=12)
    assert a == b and a["waste_ratio"] != c["waste_ratio"]
