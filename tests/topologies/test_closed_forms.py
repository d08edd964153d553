"""Generator counts against closed forms (FIGURES.md: Al-Fares 2008, NVIDIA and TPU v4 docs)."""

import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.model import DeviceKind, LinkState, Medium
from topologies import build
from topologies.khop import candidate_count, ring_configuration


@pytest.mark.parametrize("k", [4, 8, 16, 48])
def test_kary_fat_tree(k):
    """k-ary three-tier fat-tree: k^3/4 hosts, 5k^2/4 switches (Al-Fares et al.)."""
    c = build("fat-tree", params={"k": k, "tiers": "3"}).counts()
    assert c["hosts"] == k ** 3 // 4
    assert c["packet_switches"] == 5 * k * k // 4


@pytest.mark.parametrize("k", [4, 8, 64])
def test_leaf_spine(k):
    """Two-tier leaf-spine of radix k: k^2/2 hosts, 3k/2 switches."""
    c = build("fat-tree", params={"k": k, "tiers": "2"}).counts()
    assert c["hosts"] == k * k // 2 and c["packet_switches"] == 3 * k // 2


def test_fat_tree_every_switch_uses_at_most_k_ports():
    for params in ({"k": 8, "tiers": "3"}, {"k": 8, "tiers": "2"}):
        f = build("fat-tree", params=params)
        L = f.links
        deg = np.bincount(np.concatenate([L.src, L.dst]), minlength=f.n_devices)
        sw = np.isin(f.devices.kind, [DeviceKind.TOR, DeviceKind.AGG, DeviceKind.CORE])
        assert deg[sw].max() == 8


def test_oversubscription_splits_tor_ports():
    f = build("fat-tree", gpus=48, params={"k": 8, "tiers": "2", "oversubscription": 3.0})
    L = f.links
    tor = f.ids_of(DeviceKind.TOR)[0]
    down = np.count_nonzero((L.dst == tor) & (f.devices.kind[L.src] == DeviceKind.NIC))
    up = np.count_nonzero((L.src == tor) & (f.devices.kind[L.dst] == DeviceKind.CORE))
    assert (down, up) == (6, 2)


def test_nvl72():
    """NVL-72: 72 GPUs, 18 switch chips in 9 trays; every GPU has 18 links of 50 GB/s (one per chip)."""
    f = build("nvl-72")
    c = f.counts()
    assert c["gpus"] == 72 and c["switch_chips"] == 18 and f.inventory()["nvlink_switch_tray"] == 9
    L = f.links
    gpu_chip = (f.devices.kind[L.src] == DeviceKind.GPU) & (f.devices.kind[L.dst] == DeviceKind.SWITCH_CHIP)
    per_gpu = np.bincount(L.src[gpu_chip], minlength=f.n_devices)[f.gpu_ids]
    assert set(per_gpu.tolist()) == {18}
    assert set(L.capacity[gpu_chip].tolist()) == {50e9}


def test_nvl36_and_576_port_budgets():
    """Every NVLink5 switch chip has 72 ports; NVL-576 uses 288 L1 + 144 L2 chips (576 x 18 / 72 per tier, x2)."""
    for size, chips in ((36, 9), (576, 432)):
        f = build("nvl", params={"size": size})
        assert f.counts()["switch_chips"] == chips
        L = f.links
        hbd = L.layer == 0
        ports = np.bincount(np.concatenate([L.src[hbd], L.dst[hbd]]), minlength=f.n_devices)
        # NVL-36 aggregates 2 links per GPU-chip pair into one model link: 36 model links = 72 ports
        mult = 2 if size == 36 else 1
        assert set((ports[f.ids_of(DeviceKind.SWITCH_CHIP)] * mult).tolist()) == {72}


def test_tpuv4_pod():
    """TPUv4: 64 cubes -> 4,096 chips, 48 OCS, 6,144 optical links to OCS (FIGURES)."""
    f = build("tpuv4", params={"cubes": 64})
    c = f.counts()
    assert c["gpus"] == 4096 and c["ocs"] == 48 and c["ocs_ports"] == 6144
    hbd_fiber = (f.links.medium == Medium.FIBER) & (f.links.layer == 0)
    assert int(hbd_fiber.sum()) == 6144
    # every OCS uses 128 of its 136 ports; the default circuits use every port once
    assert f.configuration.circuits.shape == (3072, 2)
    A = f.active_links()
    gpu_links = (f.devices.kind[A.src] == DeviceKind.GPU) & (f.devices.kind[A.dst] == DeviceKind.GPU)
    deg = np.bincount(np.concatenate([A.src[gpu_links], A.dst[gpu_links]]), minlength=f.n_devices)
    assert set(deg[f.gpu_ids].tolist()) == {6}  # a 16x16x16 torus: 6 ICI links per chip


@pytest.mark.parametrize("k, g, closed", [(1, 4, False), (2, 4, False), (3, 8, False), (2, 4, True)])
def test_khop_candidates(k, g, closed):
    """Candidate optical paths = g * lanes * sum_{d<=k}(N-d) on a line, g * lanes * k * N on a ring."""
    f = build("khop-ring", gpus=40 * g, params={"k": k, "gpus_per_node": g, "closed": closed, "trx_per_gpu": 4})
    assert f.counts()["optical_candidate_links"] == candidate_count(40, k, g, 2, closed)
    assert f.inventory()["ocs_transceiver_800g"] == 40 * g * 4


def test_khop_ring_configuration_skips_faulty_nodes():
    f = build("khop-ring", gpus=48, params={"k": 3})
    cfg = ring_configuration(f, [[0, 1, 4, 5], [6, 8, 9, 10]])  # skips 2 faulty (2,3), then 1 (7)
    f2 = f.with_configuration(cfg)
    assert len(f2.configuration.active_candidates) == 6 * 4
    with pytest.raises(FabricError, match="gap 4"):
        ring_configuration(f, [[0, 4]])
    with pytest.raises(FabricError, match="two rings"):
        ring_configuration(f, [[0, 1], [1, 2]])


def test_rounding_is_reported():
    f = build("nvl-72", gpus=100)
    assert f.n_gpus == 144 and any("rounded" in n for n in f.notes)
    assert build("dgx", gpus=12).n_gpus == 16


@pytest.mark.parametrize("name, params, gpus, field", [
    ("nope", {}, None, "ARCH"),
    ("fat-tree", {"k": 7}, None, "params[k]"),
    ("nvl", {"size": 64}, None, "params[size]"),
    ("khop-ring", {"k": 0}, None, "params[k]"),
    ("dgx", {}, 0, "gpus"),
    ("dgx", {}, -8, "gpus"),
    ("dgx", {"bogus": 1}, None, "params[bogus]"),
    ("khop-ring", {"trx_per_gpu": 3}, None, "params[trx_per_gpu]"),
    ("torus", {"dims": "3xq"}, None, "params[dims]"),
    ("fat-tree", {"k": 4, "tiers": "2"}, 1000, "gpus"),
    # non-finite floats: inf and nan made split_ports round NaN (a ValueError traceback) or passed the >= 1 check
    ("dgx", {"oversubscription": "inf"}, 64, "params[oversubscription]"),
    ("fat-tree", {"oversubscription": "1e400"}, None, "params[oversubscription]"),
    ("dgx", {"agg_oversubscription": float("inf")}, 64, "params[agg_oversubscription]"),
    # above k-1 there is no uplink left: 1e300 was clamped silently to 127:1 (exit 0)
    ("dgx", {"oversubscription": 1e300}, 64, "params[oversubscription]"),
    ("fat-tree", {"k": 8, "oversubscription": 8.0}, None, "params[oversubscription]"),
    ("fat-tree", {"k": 8, "tiers": "3", "agg_oversubscription": 7.5}, None, "params[agg_oversubscription]"),
    # the optical reach ends at the last node: 16 nodes of 4 GPUs allow k <= 15 (k=17 and 100000 were accepted)
    ("khop-ring", {"k": 16}, 64, "params[k]"),
    ("khop-ring", {"k": 100000}, 64, "params[k]"),
    ("khop-ring", {"k": 1, "closed": True}, 4, "params[closed]"),
])
def test_bad_input(name, params, gpus, field):
    with pytest.raises(FabricError) as exc:
        build(name, gpus, params)
    assert exc.value.field == field


@pytest.mark.parametrize("name, params", [("fat-tree", {"k": 8, "oversubscription": 7.0}),
                                          ("khop-ring", {"k": 15}), ("khop-ring", {"k": 15, "closed": True})])
def test_the_bounds_themselves_are_built(name, params):
    """k-1 = 7 is one uplink per ToR; k = nodes-1 = 15 reaches the last node (candidates: brute force)."""
    f = build(name, 64, params)
    if name == "khop-ring":
        closed = params.get("closed", False)
        pairs = {(i, (i + d) % 16) for i in range(16) for d in range(1, 16) if closed or i + d < 16}
        assert f.counts()["optical_candidate_links"] == 4 * len(pairs) == candidate_count(16, 15, 4, 1, closed)
    else:
        assert f.params["oversubscription"] == 7.0


@pytest.mark.parametrize("name, module, params, gpus, field, limit", [
    ("tpuv4", "tpuv4", {"cubes": 10 ** 9}, None, "params[cubes]", "gpus"),  # was 20 s, then MemoryError
    ("torus", "torus", {"dims": "100000x100000"}, None, "params[dims]", "gpus"),
    ("rfabric", "rfabric", {"k": 10 ** 9}, 64, "params[k]", "devices"),  # was 20 s in a 5e8-long repeat
    ("khop-ring", "khop", {"k": 200_000}, 10 ** 6, "params[k]", "links"),  # 1.2e11 candidate links
    ("khop-ring", "khop", {}, 2 * 10 ** 6, "gpus", "gpus"),
    ("dgx", "dgx", {"k": 64}, 2 * 10 ** 6, "gpus", "gpus"),  # k=64 fits 1,024 GPUs: --gpus made it large
    ("nvl-72", "nvl", {}, 10 ** 9, "gpus", "gpus"),
    ("fat-tree", "fattree", {"k": 4000}, None, "params[k]", "gpus"),  # the full k^3/4-host tree
])
def test_oversized_requests_are_refused_before_building(monkeypatch, name, module, params, gpus, field, limit):
    """The closed-form size is checked first: the builder (which allocates) is never called."""
    import importlib

    def builder_called(*_args):
        raise AssertionError("the builder ran before the size check")

    monkeypatch.setattr(importlib.import_module(f"topologies.{module}"), "build", builder_called)
    with pytest.raises(FabricError) as exc:
        build(name, gpus, params)
    assert exc.value.field == field
    assert f"{limit}=N" in exc.value.message and "--limit" in exc.value.message


@pytest.mark.parametrize("name, gpus, params", [
    ("dgx", 64, {}), ("dgx", 1024, {"k": 16}), ("dgx", 4096, {"k": 32, "oversubscription": 3.0}),
    ("nvl", 144, {}), ("nvl", 1152, {"size": 576}), ("nvl", 576, {"size": 36}),
    ("tpuv4", None, {}), ("tpuv4", 128, {}), ("tpuv4", None, {"cubes": 70}),
    ("khop-ring", 64, {"k": 2}), ("khop-ring", 256, {"k": 3, "closed": True}),
    ("khop-ring", 512, {"k": 2, "nodes_per_tor": 16}), ("torus", 64, {"dims": "8x8"}), ("torus", 1000, {}),
    ("fat-tree", None, {}), ("fat-tree", 100, {"k": 8}), ("fat-tree", None, {"k": 16, "tiers": "2"}),
    ("rfabric", 64, {}), ("rfabric", 1024, {"k": 16}),
])
def test_size_estimate_matches_the_build(catalog, name, gpus, params):
    """The closed-form size against the built fabric (brute force): GPUs and links exact; devices within 1 %
    (spines and cores are estimated by the lower bound ceil(lower x uplinks / k) of even_spine_count)."""
    from topologies import resolve_architecture
    from topologies.params import resolve

    arch, preset = resolve_architecture(name)
    size = arch.size(resolve(arch.name, arch.params, {**preset, **params}), gpus, catalog)
    fab = build(name, gpus, params, catalog)
    assert (size.gpus, size.links) == (fab.n_gpus, len(fab.links))
    assert 0.99 * fab.n_devices <= size.devices <= fab.n_devices


def test_rail_optimized_tors_hold_one_rail():
    """Rail-optimised (NVIDIA reference architecture): NIC r of every server in a group shares a ToR."""
    f = build("dgx", gpus=256, params={"rail_optimized": True, "k": 16})
    gpus = f.gpu_ids
    rail = (gpus - gpus[0]) % 8
    tor = f.group("tor")[gpus]
    for t in np.unique(tor):
        assert np.unique(rail[tor == t]).size == 1
    plain = build("dgx", gpus=256, params={"k": 16})
    ptor = plain.group("tor")[plain.gpu_ids]
    assert all(np.unique(ptor[plain.group("node")[plain.gpu_ids] == n]).size == 1 for n in range(4))


@pytest.mark.parametrize("wiring", ["contiguous", "interleaved"])
def test_khop_tor_wiring(wiring):
    f = build("khop-ring", gpus=4 * 32, params={"nodes_per_tor": 8, "tor_wiring": wiring})
    gpus = f.gpu_ids
    node_tor = f.group("tor")[gpus][::4]
    pos = np.arange(32)
    expected = pos // 8 if wiring == "contiguous" else pos % 4
    assert node_tor.tolist() == expected.tolist()
