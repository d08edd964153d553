"""Routing: ECMP split per next hop, hashing, folding of interchangeable switches, pendant trees, OCS circuits."""

from __future__ import annotations

import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.model import DeviceKind, FabricBuilder
from fabric.sim import Collective, Flow, FlowTable, Simulator, simulator
from tests.fabric.test_sim_fabrics import HBD_NONE, line, ocs_pair, star, two_tier

B = 10e9


def fan_out():
    """s has next hops a and b toward d; a reaches d via c1 only, b via c2 or c3.

    Three equal-cost paths: s-a-c1-d, s-b-c2-d, s-b-c3-d.  Per next hop the
    split is 1/2 at s, then 1/2 of b's half on each of c2, c3: shares 1/2,
    1/4, 1/4 (an even split over paths would give 1/3 each).
    """
    b = FabricBuilder("fan", {})
    s, d = b.add_devices(DeviceKind.GPU, 2, node=[0, 1])
    a, bb, c1, c2, c3 = b.add_devices(DeviceKind.TOR, 5)
    b.add_links([s, s, a, bb, bb, c1, c2, c3], [a, bb, c1, c2, c3, d, d, d], capacity=B, latency=[1e-6] * 7 + [5e-6],
                medium="fiber", layer="dcn")
    return b.build(HBD_NONE), (int(s), int(d), int(a), int(bb), int(c1), int(c2), int(c3))


def _share(route, fabric, u, v):
    """Fraction of the route on the link direction u -> v."""
    L = fabric.active_links()
    for j, fw, x in zip(route["links"], route["forward"], route["fraction"]):
        ends = (int(L.src[j]), int(L.dst[j])) if fw else (int(L.dst[j]), int(L.src[j]))
        if ends == (u, v):
            return x
    return 0.0


def test_ideal_ecmp_splits_per_next_hop():
    fab, (s, d, a, b, c1, c2, c3) = fan_out()
    r = Simulator(fab).route(s, d)
    assert _share(r, fab, s, a) == pytest.approx(0.5) and _share(r, fab, s, b) == pytest.approx(0.5)
    assert _share(r, fab, a, c1) == pytest.approx(0.5)
    assert _share(r, fab, b, c2) == pytest.approx(0.25) and _share(r, fab, b, c3) == pytest.approx(0.25)
    assert _share(r, fab, c3, d) == pytest.approx(0.25)
    # latency: the slowest path (through c3, 1+1+5 us)
    assert r["latency_s"] == pytest.approx(7e-6)
    # the rate is set by the busiest arc per byte: s -> a carries half the flow
    assert Simulator(fab).rates([Flow(s, d, 1.0)])[0] == pytest.approx(2 * B)


def test_hash_takes_one_shortest_path_and_depends_on_the_seed():
    fab, (s, d, *_rest) = fan_out()
    sim = Simulator(fab)
    paths = set()
    for seed in range(30):
        r = sim.route(s, d, ecmp="hash", seed=seed)
        assert len(r["links"]) == 3 and all(x == 1.0 for x in r["fraction"])
        assert sim.route(s, d, ecmp="hash", seed=seed) == r  # deterministic
        paths.add(tuple(sorted(r["links"])))
    assert len(paths) == 3  # every path gets picked by some seed


def test_folding_is_exact_and_smaller():
    """Folding the spines changes the graph, not the answer: same times, same bytes per physical link."""
    fab = two_tier(3, 4, 4, 2.0, B)
    folded, plain = Simulator(fab), Simulator(fab, fold=False)
    assert folded.graph().n_nodes == fab.n_devices - 3  # 4 spines -> 1 node
    assert folded.graph().n_arcs < plain.graph().n_arcs
    coll = Collective("all-to-all", tuple(range(12)), 2**20, protocol="none")
    a = folded.collectives([coll])
    b = plain.collectives([coll])
    assert a.time_s == pytest.approx(b.time_s, rel=1e-12)
    assert np.allclose(a.sim.loads.bytes_fwd, b.sim.loads.bytes_fwd, rtol=1e-12)
    assert np.allclose(a.sim.loads.bytes_rev, b.sim.loads.bytes_rev, rtol=1e-12)
    # every spine link carries the same bytes (the ideal split is even over them)
    L = fab.active_links()
    up = np.flatnonzero(fab.devices.kind[L.dst] == DeviceKind.CORE)
    assert np.allclose(a.sim.loads.bytes_fwd[up], a.sim.loads.bytes_fwd[up][0])


def test_folded_switch_as_an_endpoint_is_routed_unfolded():
    """A flow ending at a folded switch is routed on a graph that keeps that switch apart."""
    fab = two_tier(2, 2, 3, 1.0, B)
    spines = np.flatnonzero(fab.devices.kind == DeviceKind.CORE)
    sim = Simulator(fab)
    r = sim.route(int(fab.gpu_ids[0]), int(spines[1]))
    assert len(r["links"]) == 2 and r["fraction"] == [1.0, 1.0]


def test_pendant_trees_and_the_line():
    """A line is one tree: routes are the unique path; rates and bytes follow."""
    fab = line(6, B, 1e-6)
    sim = Simulator(fab)
    g = sim.graph()
    assert np.count_nonzero(g.in_core) == 1
    r = sim.route(int(fab.gpu_ids[1]), int(fab.gpu_ids[4]))
    assert sorted(r["links"]) == [1, 2, 3] and r["latency_s"] == pytest.approx(3e-6)
    r = sim.route(int(fab.gpu_ids[5]), int(fab.gpu_ids[0]))
    assert sorted(r["links"]) == [0, 1, 2, 3, 4] and not any(r["forward"])


def test_ocs_circuit_is_a_link():
    """Traffic crosses an OCS circuit as one link; its bytes land on both OCS-port fibres."""
    a = 1e-6
    fab = ocs_pair(B, a)
    res = Simulator(fab).run([Flow(int(fab.gpu_ids[0]), int(fab.gpu_ids[1]), 1e6)])
    assert res.makespan_s == pytest.approx(4 * a + 1e6 / B, rel=1e-12)
    recs = res.loads.records()
    circuit = [r for r in recs if r["link"] is None]
    assert len(circuit) == 1 and circuit[0]["bytes_fwd"] + circuit[0]["bytes_rev"] == pytest.approx(1e6)
    fwd, rev = res.loads.physical_bytes(len(fab.links))
    assert np.allclose(fwd + rev, 1e6)  # all four physical links carry the flow once


def test_disconnected_devices_are_an_error():
    fab = ocs_pair(B, 1e-6, with_circuit=False)
    with pytest.raises(FabricError, match="cannot reach"):
        Simulator(fab).run([Flow(int(fab.gpu_ids[0]), int(fab.gpu_ids[1]), 1.0)])
    with pytest.raises(FabricError, match="cannot reach") as exc:
        Simulator(fab).collective(Collective("all-reduce", (0, 1), 1e6, protocol="none"))
    assert exc.value.field == "ranks"


def test_route_cache_is_reused_and_simulator_cached_per_fabric():
    fab = star(6, B)
    sim = simulator(fab)
    assert simulator(fab) is sim
    sim.collective(Collective("all-to-all", tuple(range(6)), 1e6, protocol="none"))
    table = sim._route_table("ideal", 0, np.array([0]))[1]
    n = len(table)
    assert n == 30
    sim.collective(Collective("all-reduce", tuple(range(6)), 1e6, protocol="none"))  # ring pairs are a subset
    assert len(table) == n
    assert simulator(star(6, B)) is not sim


def test_dgx_routes():
    """DGX: same-node GPUs talk over all NVSwitch chips (evenly); other nodes through their NICs."""
    from topologies import build

    fab = build("dgx", gpus=16)
    sim = Simulator(fab)
    g = fab.gpu_ids
    inside = sim.route(int(g[0]), int(g[1]))
    L = fab.active_links()
    kinds = fab.devices.kind
    assert len(inside["links"]) == 8 and np.allclose(inside["fraction"], 0.25)
    assert all(DeviceKind.SWITCH_CHIP in (kinds[L.src[j]], kinds[L.dst[j]]) for j in inside["links"])
    across = sim.route(int(g[0]), int(g[8]))
    assert any(DeviceKind.NIC in (kinds[L.src[j]], kinds[L.dst[j]]) for j in across["links"])
    hashed = sim.route(int(g[0]), int(g[1]), ecmp="hash", seed=1)
    assert len(hashed["links"]) == 2


def test_fat_tree_ring_matches_its_closed_form():
    """On a generated fat-tree, a ring inside one ToR follows 2(n-1)(a + S/(nB)) with the catalog's numbers.

    Each step's flow goes GPU -> NIC -> ToR -> NIC -> GPU alone on its links:
    bottleneck B = min(PCIe, NIC port), latency a = the sum of the four link
    latencies.
    """
    from topologies import build

    fab = build("fat-tree", params={"k": 8, "tiers": "2"})
    n, S = 4, 2**26
    sim = Simulator(fab)
    r0 = sim.route(int(fab.gpu_ids[0]), int(fab.gpu_ids[1]))
    L = fab.active_links()
    bw = min(L.capacity[j] for j in r0["links"])
    a = r0["latency_s"]
    assert len(r0["links"]) == 4
    res = sim.collective(Collective("all-reduce", tuple(range(n)), S, protocol="none"))
    assert res.time_s == pytest.approx(2 * (n - 1) * (a + S / (n * bw)), rel=1e-9)


def test_sparse_search_matches_dense_search(monkeypatch):
    """The searches keep dense per-(search, node) tables when small and sorted keys when large: same routes."""
    from topologies import build

    from fabric.sim import routing

    fab = build("dgx", gpus=64)
    colls = [Collective("all-to-all", tuple(range(0, 64, 3)), 2**24, protocol="none"),
             Collective("all-reduce", tuple(range(1, 64, 8)), 2**24, protocol="none")]
    for ecmp in ("ideal", "hash"):
        monkeypatch.setattr(routing, "_DENSE_SEEN_ENTRIES", 10**9)
        dense = Simulator(fab).collectives(colls, ecmp=ecmp, seed=5)
        monkeypatch.setattr(routing, "_DENSE_SEEN_ENTRIES", 0)
        sparse = Simulator(fab).collectives(colls, ecmp=ecmp, seed=5)
        assert [c.time_s for c in sparse.collectives] == pytest.approx([c.time_s for c in dense.collectives],
                                                                       rel=1e-12)
        assert np.array_equal(sparse.sim.loads.bytes_fwd, dense.sim.loads.bytes_fwd)
        assert np.array_equal(sparse.sim.loads.bytes_rev, dense.sim.loads.bytes_rev)


@pytest.mark.parametrize("arch, n, params", [("dgx", 256, {}), ("fat-tree", 128, {"k": 8, "tiers": "3"})])
def test_two_hop_finish_gives_the_routes_of_the_full_search(monkeypatch, arch, n, params):
    """Dense searches end two hops early when every pending source is within two hops of the current level
    (routing._two_hops); the sorted-key searches build every level.  Every route (arcs and fractions, both ECMP
    modes) must agree, on rings whose neighbours are one ToR apart and across the spines."""
    from topologies import build

    from fabric.sim import routing

    fab = build(arch, gpus=n, params=params)
    calls = []
    real = routing._two_hops
    monkeypatch.setattr(routing, "_two_hops", lambda *a: calls.append(real(*a)) or calls[-1])
    g_src = fab.gpu_ids
    g_dst = np.roll(fab.gpu_ids, -9)  # neighbours 9 GPUs on: other nodes, other ToRs
    for ecmp in ("ideal", "hash"):
        routes = []
        for entries in (10**9, 0):
            monkeypatch.setattr(routing, "_DENSE_SEEN_ENTRIES", entries)
            sim = Simulator(fab)
            routes.append([sim.route(int(s), int(d), ecmp=ecmp, seed=4) for s, d in zip(g_src[:64], g_dst[:64])])
            flows = FlowTable.build(g_src, g_dst, 2.0**24)
            routes[-1].append(sim.run(flows, ecmp=ecmp, seed=4).loads.bytes_fwd.tolist())
        assert routes[0] == routes[1]
    assert any(c[0].any() for c in calls)  # the two-hop finish did run


def test_gpus_forward_only_from_hbd_link_to_hbd_link(monkeypatch):
    """NVL-72, two racks: gpu0 -> gpu72 leaves through gpu0's own NIC, all of it.

    Racks of 72 GPUs hang off 64-port ToRs, so GPUs 64-71 of rack 0 share the ToR of gpu72; a detour
    gpu0 -> NVLink -> gpu64 -> its NIC -> ToR has the same hop count as the direct path and took 18/19 of the
    flow before GPUs were barred from forwarding between NVLink and PCIe.  Same routes from the dense and the
    sparse search tables (a GPU source's next hops are kept apart from its next hops as a forwarding node).
    """
    from topologies import build

    from fabric.model import Layer
    from fabric.sim import routing

    fab = build("nvl-72", 144, {})
    L = fab.active_links()
    r = Simulator(fab).route(0, 72)
    assert not np.any(L.layer[r["links"]] == Layer.HBD)
    names = Simulator(fab).names
    first = [j for j, f in zip(r["links"], r["forward"]) if names[L.src[j] if f else L.dst[j]] == "gpu0"]
    assert [names[L.dst[j]] for j in first] == ["nic0"] and r["fraction"][r["links"].index(first[0])] == 1.0
    ring = tuple(range(0, 16)) + tuple(range(72, 88))
    colls = [Collective("all-reduce", ring, 2**24, protocol="none", channels=1)]
    for ecmp in ("ideal", "hash"):
        monkeypatch.setattr(routing, "_DENSE_SEEN_ENTRIES", 10**9)
        dense = Simulator(fab).collectives(colls, ecmp=ecmp, seed=5)
        monkeypatch.setattr(routing, "_DENSE_SEEN_ENTRIES", 0)
        sparse = Simulator(fab).collectives(colls, ecmp=ecmp, seed=5)
        assert sparse.collectives[0].time_s == pytest.approx(dense.collectives[0].time_s, rel=1e-12)
        assert np.array_equal(sparse.sim.loads.bytes_fwd, dense.sim.loads.bytes_fwd)


@pytest.mark.parametrize("arch, n, params", [("dgx", 256, {}), ("nvl-72", 144, {}), ("khop-ring", 64, {"k": 2}),
                                             ("dgx", 512, {"tiers": "3", "k": 16})])
def test_routes_through_a_gateway_equal_the_searched_routes(monkeypatch, arch, n, params):
    """A GPU whose only non-HBD link is to a NIC hanging off one ToR is entered from outside its HBD domain only as
    ToR -> NIC -> GPU (routing.Gateways), so those routes are searched toward the ToR, one search per ToR instead of
    one per GPU (what made `fabric rl --gpus 16384` take 70 s).  Exact: every route (arcs, fractions, latency)
    equals the search toward the GPU itself, for pairs in one node, under one ToR, across ToRs and pods, GPU to
    ToR and ToR to GPU, and so do the link loads of a permutation of flows."""
    from topologies import build

    from fabric.sim import routing

    fab = build(arch, gpus=n, params=params)
    gpus = fab.gpu_ids
    tors = np.flatnonzero(fab.devices.kind == DeviceKind.TOR)
    rng = np.random.default_rng(3)
    src = np.concatenate([gpus, gpus[:32], rng.choice(tors, 16), rng.choice(gpus, 16)])
    dst = np.concatenate([np.roll(gpus, -1), np.roll(gpus, -37)[:32], rng.choice(gpus, 16), rng.choice(tors, 16)])
    keep = src != dst
    src, dst = src[keep], dst[keep]
    perm = rng.permutation(gpus)
    g = Simulator(fab).graph("ideal")
    assert (routing.gateways(g).via[g.node_of_device[dst]] >= 0).sum() > len(dst) // 2  # it applies to most pairs

    def no_gateways(g):
        return routing.Gateways(*(np.full(g.n_nodes, -1),) * 4, np.arange(g.n_nodes))

    out = []
    for gw in (routing.gateways, no_gateways):
        monkeypatch.setattr(routing, "gateways", gw)
        sim = Simulator(fab)
        out.append(([sim.route(int(s), int(d)) for s, d in zip(src, dst)],
                    sim.run(FlowTable.build(gpus, perm, 2.0**24)).loads.bytes_fwd))
    assert out[0][0] == out[1][0]
    assert np.array_equal(out[0][1], out[1][1])
