"""Equivalence classes of flows (fabric.sim.lumping) against the full flow simulation.

The reference is the same engine on every flow (``Simulator(lump=False)``):
routes per pair, max-min rates per flow.  Where the reduction applies (hosts
under a ToR with equal pendant paths, each sending and receiving alike) it is
exact, so per-flow finish times and per-link bytes must agree to 1e-9 (only
the order of floating-point sums differs).  Where it does not (uneven groups,
flows that wait on others, shared pendant paths), the simulator must fall back
to the full simulation, which the method string shows.
"""

import numpy as np
import pytest

from fabric.model import DeviceKind, FabricBuilder, HBDSpec
from fabric.sim import Collective, FlowTable, Simulator
from topologies import build

S = 2**24


def _both(fab, colls=None, flows=None):
    full, classes = Simulator(fab, lump=False), Simulator(fab, lump=True)
    if flows is not None:
        return classes.run(flows), full.run(flows)
    return classes.collectives(colls).sim, full.collectives(colls).sim


def _same(a, b):
    assert a.finish_s == pytest.approx(b.finish_s, rel=1e-9)
    assert a.tx_end_s == pytest.approx(b.tx_end_s, rel=1e-9)
    assert a.release_s == pytest.approx(b.release_s, rel=1e-9, abs=1e-15)
    scale = max(b.loads.bytes_fwd.max(), 1.0)
    assert np.allclose(a.loads.bytes_fwd, b.loads.bytes_fwd, rtol=1e-9, atol=1e-9 * scale)
    assert np.allclose(a.loads.bytes_rev, b.loads.bytes_rev, rtol=1e-9, atol=1e-9 * scale)


@pytest.mark.parametrize("params", [{"k": 8, "tiers": "3"},
                                    {"k": 8, "tiers": "3", "oversubscription": 3.0},
                                    {"k": 8, "tiers": "2", "oversubscription": 2.0}])
def test_all_to_all_on_fat_trees_matches_every_flow(params):
    """A whole fat-tree (and oversubscribed ones, where the core is the bottleneck and rates differ by class)."""
    fab = build("fat-tree", gpus=32 if params["tiers"] == "2" else 128, params=params)
    n = len(fab.gpu_ids)
    a, b = _both(fab, [Collective("all-to-all", tuple(range(n)), S, protocol="none")])
    assert a.method.startswith("classes+") and not b.method.startswith("classes")
    _same(a, b)


def test_concurrent_collectives_of_different_sizes_keep_their_classes():
    """Two all-to-alls on whole ToRs and a direct all-gather, at once: classes split by tag and size (the
    aggregation tier is oversubscribed, so the core is a bottleneck the collectives share)."""
    fab = build("fat-tree", gpus=128, params={"k": 8, "tiers": "3", "agg_oversubscription": 3.0})
    colls = [Collective("all-to-all", tuple(range(0, 32)), S, protocol="none"),
             Collective("all-to-all", tuple(range(32, 96)), 3 * S, protocol="none"),
             Collective("all-gather", tuple(range(96, 128)), S, "direct", protocol="none")]
    a, b = _both(fab, colls)
    assert a.method.startswith("classes+")
    _same(a, b)
    full = Simulator(fab, lump=False).collectives(colls)
    lumped = Simulator(fab, lump=True).collectives(colls)
    assert [c.time_s for c in lumped.collectives] == pytest.approx([c.time_s for c in full.collectives], rel=1e-9)
    assert [c.n_flows for c in lumped.collectives] == [c.n_flows for c in full.collectives]


def test_uneven_groups_that_still_send_alike_are_exact():
    """Ranks 0, 2, 4, ...: ToRs (5 hosts) hold 2 or 3 ranks, yet every rank of a group sends alike."""
    fab = build("fat-tree", gpus=128, params={"k": 8, "tiers": "3", "oversubscription": 2.0})
    flows = _all_pairs(fab.gpu_ids[::2])
    a, b = _both(fab, flows=flows)
    assert a.method.startswith("classes+")
    _same(a, b)


def _all_pairs(devs, size=float(S)):
    i, j = np.meshgrid(devs, devs, indexing="ij")
    off = i != j
    return FlowTable.build(i[off], j[off], size)


def test_falls_back_where_the_classes_would_not_be_exact():
    fab = build("fat-tree", gpus=128, params={"k": 8, "tiers": "3", "oversubscription": 2.0})
    g = fab.gpu_ids
    # one host sends twice as much to the others: not equitable
    base = _all_pairs(g[:64])
    extra = FlowTable.build(np.full(63, g[0]), g[1:64], float(S))
    flows = FlowTable.concat([base, extra])
    a, b = _both(fab, flows=flows)
    assert not a.method.startswith("classes")
    _same(a, b)
    # flows that wait on others: the event order matters, no classes
    dep = FlowTable.build(g[:2], g[2:4], float(S), deps=[[], [0]])
    a, b = _both(fab, flows=FlowTable.concat([_all_pairs(g[64:96]), dep]))
    assert not a.method.startswith("classes")
    _same(a, b)


def test_no_classes_where_every_endpoint_is_on_the_core():
    """DGX GPUs sit on the core (NVLink and NIC): every endpoint is a group of one, nothing to lump."""
    fab = build("dgx", gpus=32)
    a, b = _both(fab, [Collective("all-to-all", tuple(range(32)), S, protocol="none")])
    assert not a.method.startswith("classes")
    _same(a, b)


def test_shared_pendant_paths_are_not_lumped():
    """Two GPUs behind one NIC share its uplink: their paths are not disjoint, so no classes (and same answer)."""
    b = FabricBuilder("shared-nic", {})
    gpus = b.add_devices(DeviceKind.GPU, 8, node=np.arange(8) // 2)
    nics = b.add_devices(DeviceKind.NIC, 4, node=range(4))
    tor = b.add_devices(DeviceKind.TOR, 2)
    b.add_links(gpus, nics[np.arange(8) // 2], capacity=50e9, latency=1e-7, medium="copper", layer="dcn")
    b.add_links(nics, tor[np.arange(4) // 2], capacity=40e9, latency=2e-7, medium="copper", layer="dcn")
    b.add_links(tor[:1], tor[1:], capacity=30e9, latency=2e-7, medium="copper", layer="dcn")
    fab = b.build(HBDSpec(kind="none", gpus_per_node=2, domain_gpus=1))
    a, ref = _both(fab, flows=_all_pairs(fab.gpu_ids))
    assert not a.method.startswith("classes")
    _same(a, ref)


def test_auto_mode_lumps_large_all_to_alls_only():
    from fabric.sim.lumping import LUMP_MIN_FLOWS

    fab = build("fat-tree", gpus=256, params={"k": 16, "tiers": "3"})
    small = Simulator(fab).collectives([Collective("all-to-all", tuple(range(64)), S, protocol="none")])
    assert 64 * 63 < LUMP_MIN_FLOWS and not small.sim.method.startswith("classes")
    big = Simulator(fab).collectives([Collective("all-to-all", tuple(range(256)), S, protocol="none")])
    assert 256 * 255 >= LUMP_MIN_FLOWS and big.sim.method.startswith("classes")
