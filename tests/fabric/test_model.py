"""The Fabric model: ports, groupings, configurations, networkx view."""

import networkx as nx
import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.model import Configuration, DeviceKind, FabricBuilder, HBDSpec, LinkState


def _tiny():
    b = FabricBuilder("demo", {})
    g = b.add_devices(DeviceKind.GPU, 4, node=[0, 0, 1, 1])
    ocs = b.add_devices(DeviceKind.OCS, 1)
    sw = b.add_devices(DeviceKind.TOR, 1)
    b.add_links(g, sw[0], capacity=50e9, latency=1e-6, medium="fiber", layer="dcn")
    ports = b.add_links(g, ocs[0], capacity=[10e9, 20e9, 30e9, 40e9], latency=2e-6, medium="fiber", layer="hbd",
                        state="ocs_port")
    cand = b.add_links(g[0], g[2], capacity=100e9, latency=1e-6, medium="fiber", layer="hbd", state="candidate")
    b.add_bom("fiber", "hbd", 3)
    return b.build(HBDSpec(kind="none", gpus_per_node=2, domain_gpus=4)), ports, cand


def test_ports_unique_per_device_and_in_link_order():
    f, _, _ = _tiny()
    L = f.links
    for dev in range(f.n_devices):
        ports = np.concatenate([L.src_port[L.src == dev], L.dst_port[L.dst == dev]])
        assert sorted(ports.tolist()) == list(range(ports.size))
    # the ToR sees its 4 GPU links on ports 0..3 in link order
    tor = f.ids_of(DeviceKind.TOR)[0]
    assert L.dst_port[L.dst == tor].tolist() == [0, 1, 2, 3]


def test_circuits_become_direct_links_with_min_capacity_and_summed_latency():
    f, ports, cand = _tiny()
    cfg = Configuration(active_candidates=cand, circuits=np.array([[ports[0], ports[3]]]))
    f2 = f.with_configuration(cfg)
    A = f2.active_links()
    circuit = np.flatnonzero(A.origin < 0)
    assert circuit.size == 1
    j = circuit[0]
    assert {int(A.src[j]), int(A.dst[j])} == {0, 3}
    assert A.capacity[j] == 10e9 and A.latency[j] == pytest.approx(4e-6)
    assert len(A) == 4 + 1 + 1  # static + lit candidate + circuit


@pytest.mark.parametrize("cfg, msg", [
    (lambda p, c: Configuration(active_candidates=np.array([0])), "candidate"),
    (lambda p, c: Configuration(circuits=np.array([[p[0], p[0]]])), "two circuits"),
    (lambda p, c: Configuration(circuits=np.array([[c[0], p[1]]])), "OCS-port"),
    (lambda p, c: Configuration(active_candidates=np.array([c[0], c[0]])), "twice"),
])
def test_invalid_configurations_are_rejected(cfg, msg):
    f, ports, cand = _tiny()
    with pytest.raises(FabricError, match=msg):
        f.with_configuration(cfg(ports, cand))


def test_networkx_view_has_every_device_and_link():
    f, ports, cand = _tiny()
    g = f.to_networkx()
    assert isinstance(g, nx.MultiGraph)
    assert g.number_of_nodes() == f.n_devices and g.number_of_edges() == len(f.links)
    states = {d["state"] for _, _, d in g.edges(data=True)}
    assert states == {"static", "ocs_port", "candidate"}
    assert g.nodes["gpu2"]["node"] == 1


def test_counts_and_inventory():
    f, _, _ = _tiny()
    c = f.counts()
    assert c["gpus"] == 4 and c["hosts"] == 2 and c["ocs"] == 1 and c["ocs_ports"] == 4
    assert c["optical_candidate_links"] == 1 and c["packet_switches"] == 1
    assert f.inventory() == {"fiber": 3}
    assert int((f.links.state == LinkState.OCS_PORT).sum()) == 4


def test_named_devices_keep_their_names():
    """Names given for some batches; the others get kind@id defaults, aligned with device ids."""
    b = FabricBuilder("demo", {})
    b.add_devices(DeviceKind.TOR, 1)
    g = b.add_devices(DeviceKind.GPU, 2, names=["g0", "g1"])
    b.add_devices(DeviceKind.NIC, 1)
    f = b.build(HBDSpec(kind="none", gpus_per_node=1, domain_gpus=2))
    assert f.device_names().tolist() == ["tor@0", "g0", "g1", "nic@3"]
    assert f.device_name(int(g[1])) == "g1"
