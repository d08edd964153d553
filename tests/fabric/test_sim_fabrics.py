"""Hand-built fabrics for the simulator tests (imported by the other test_sim_* modules).

Every builder documents the path latency a flow sees, so closed forms with a
per-step latency ``a`` can be written down exactly.
"""

from __future__ import annotations

import numpy as np

from fabric.model import Configuration, DeviceKind, FabricBuilder, HBDSpec

HBD_NONE = HBDSpec(kind="none", gpus_per_node=1, domain_gpus=1)


def star(n: int, B: float, a: float = 0.0):
    """``n`` GPUs, each with one link (``B`` bytes/s, ``a/2`` s) to one non-blocking switch.

    GPU-to-GPU path: GPU -> switch -> GPU, bottleneck ``B``, latency exactly
    ``a`` (``a/2 + a/2`` is exact in binary floating point).
    """
    b = FabricBuilder("star", {})
    g = b.add_devices(DeviceKind.GPU, n, node=np.arange(n), domain=np.arange(n))
    sw = b.add_devices(DeviceKind.TOR, 1, tor=0)
    b.add_links(g, sw[0], capacity=B, latency=a / 2, medium="copper", layer="dcn")
    return b.build(HBD_NONE)


def ring(n: int, B: float, a: float = 0.0):
    """``n`` GPUs in a cycle: link ``i -- i+1 (mod n)`` of ``B`` bytes/s and latency ``a``."""
    b = FabricBuilder("ring", {})
    g = b.add_devices(DeviceKind.GPU, n, node=np.arange(n))
    b.add_links(g, np.roll(g, -1), capacity=B, latency=a, medium="copper", layer="hbd")
    return b.build(HBD_NONE)


def line(n: int, B: float, a: float = 0.0):
    """``n`` GPUs in a path ``0 -- 1 -- ... -- n-1`` (links ``B``, latency ``a``)."""
    b = FabricBuilder("line", {})
    g = b.add_devices(DeviceKind.GPU, n, node=np.arange(n))
    b.add_links(g[:-1], g[1:], capacity=B, latency=a, medium="copper", layer="hbd")
    return b.build(HBD_NONE)


def two_tier(r: int, k: int, u: int, o: float, B: float, a: float = 0.0):
    """``r`` racks of ``k`` GPUs under a ToR, every ToR linked to each of ``u`` spines.

    GPU links ``B`` (latency ``a/2``); each ToR-spine link ``k B / (o u)``
    (latency 0), so a ToR's uplinks total ``k B / o``: oversubscription ``o``.
    GPU ``i`` is in rack ``i // k``.
    """
    b = FabricBuilder("two-tier", {})
    n = r * k
    g = b.add_devices(DeviceKind.GPU, n, node=np.arange(n), rack=np.arange(n) // k, tor=np.arange(n) // k)
    tors = b.add_devices(DeviceKind.TOR, r, tor=np.arange(r))
    spines = b.add_devices(DeviceKind.CORE, u)
    b.add_links(g, tors[np.arange(n) // k], capacity=B, latency=a / 2, medium="fiber", layer="dcn")
    b.add_links(np.repeat(tors, u), np.tile(spines, r), capacity=k * B / (o * u), latency=0.0, medium="fiber",
                layer="dcn")
    return b.build(HBD_NONE)


def two_level(m: int, h: int, b_in: float, a_in: float, b_out: float, a_out: float):
    """``m`` HBD domains of ``h`` GPUs, and a DCN switch for all of them.

    Inside a domain: every GPU has a link (``b_in``, ``a_in/2``) to the
    domain's switch chip, so GPU -> chip -> GPU has latency ``a_in``.  Across
    domains: GPU -> NIC (PCIe ``4 b_out``, latency 0) -> DCN switch (``b_out``,
    ``a_out/2``), so GPU -> NIC -> switch -> NIC -> GPU has bottleneck
    ``b_out`` and latency ``a_out``.  The in-domain route (2 hops) is shorter
    than any route through the DCN (4 hops), and no path across domains is
    shorter than the DCN one.
    """
    b = FabricBuilder("two-level", {})
    n = m * h
    dom = np.arange(n) // h
    g = b.add_devices(DeviceKind.GPU, n, node=np.arange(n), domain=dom)
    chips = b.add_devices(DeviceKind.SWITCH_CHIP, m, domain=np.arange(m))
    nics = b.add_devices(DeviceKind.NIC, n, node=np.arange(n))
    sw = b.add_devices(DeviceKind.TOR, 1, tor=0)
    b.add_links(g, chips[dom], capacity=b_in, latency=a_in / 2, medium="pcb", layer="hbd")
    b.add_links(g, nics, capacity=4 * b_out, latency=0.0, medium="pcb", layer="dcn")
    b.add_links(nics, sw[0], capacity=b_out, latency=a_out / 2, medium="fiber", layer="dcn")
    return b.build(HBDSpec(kind="switch_domain", gpus_per_node=h, domain_gpus=h, max_tp=h))


def ocs_pair(B: float, a: float, with_circuit: bool = True):
    """Two GPUs, each under its own ToR; the ToRs meet only through an OCS circuit.

    GPU -- ToR links ``B`` (latency ``a``); each ToR has a fibre (``B``,
    latency ``a``) into a port of one OCS.  With the circuit the path is GPU ->
    ToR -> (circuit, latency ``2a``) -> ToR -> GPU, latency ``4a``; without it
    the GPUs are disconnected.
    """
    b = FabricBuilder("ocs-pair", {})
    g = b.add_devices(DeviceKind.GPU, 2, node=[0, 1])
    tors = b.add_devices(DeviceKind.TOR, 2, tor=[0, 1])
    ocs = b.add_devices(DeviceKind.OCS, 1)
    b.add_links(g, tors, capacity=B, latency=a, medium="fiber", layer="dcn")
    ports = b.add_links(tors, ocs[0], capacity=B, latency=a, medium="fiber", layer="dcn", state="ocs_port")
    cfg = Configuration(circuits=np.array([ports], dtype=np.int64)) if with_circuit else None
    return b.build(HBD_NONE, cfg)


# ------------------------------------------------------------------------------- sanity
def test_builders_have_the_documented_shape():
    assert star(4, 1.0).n_gpus == 4 and len(star(4, 1.0).links) == 4
    assert len(ring(5, 1.0).links) == 5
    f = two_tier(3, 4, 2, 4.0, 10.0)
    assert f.n_gpus == 12
    A = f.active_links()
    up = A.capacity[A.capacity != 10.0]
    assert up.size == 6 and np.allclose(up, 4 * 10.0 / (4.0 * 2))
    tl = two_level(3, 4, 5.0, 1e-6, 1.0, 2e-6)
    assert np.array_equal(tl.group("domain")[tl.gpu_ids], np.repeat(np.arange(3), 4))
    assert len(ocs_pair(1.0, 1e-6).active_links()) == 3
    assert len(ocs_pair(1.0, 1e-6, with_circuit=False).active_links()) == 2
