"""Timing a phase's flows on a Fabric: the flow simulator, or a labelled analytic bound.

``sim`` (the default)
    :func:`fabric.sim.simulate_flows` / :func:`fabric.sim.simulate_collectives`
    on the Fabric's active graph under its OCS configuration: shortest-path
    ECMP, max-min fair rates, link latencies.
``analytic`` (fallback, and the *prediction* the re-wiring rule uses)
    The bottleneck bound: the largest ``bytes / capacity`` over the
    resources the flows share (each GPU's HBD ports or NIC, each ToR's
    uplinks, and the pod level under its circuits, see
    :func:`solvers.circuits.pod_transfer_time`), plus the longest path
    latency.  It is the makespan of the best schedule on ideal ECMP, a lower
    bound on max-min fair sharing; it ignores hash collisions.

Capacities are read from the active links (:meth:`fabric.model.Fabric.active_links`):
GPU-NIC (PCIe) and NIC-ToR links per GPU, ToR-to-aggregation (or spine)
links per ToR, aggregation-to-core links per pod (the core is non-blocking)
and aggregation-to-aggregation OCS circuits per pod pair.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.errors import FabricError
from fabric.model import Configuration, DeviceKind, Fabric, Layer
from solvers.circuits import pod_transfer_time
from workloads.rl.traffic import Flows

TIMINGS = ("sim", "analytic")


@dataclass(frozen=True)
class CapacityView:
    """Per-device and per-pod capacities of a Fabric under one configuration (bytes/s per direction).

    Attributes
    ----------
    nic : ndarray
        Per device: the GPU's scale-out bandwidth (min of its PCIe and NIC links), 0 for others.
    hbd : ndarray
        Per device: the GPU's HBD egress (sum of its HBD links).
    tor_up : ndarray
        Per ToR id: capacity of its uplinks.
    direct : ndarray, shape (P, P)
        OCS circuits between aggregation switches of two pods.
    core : ndarray, shape (P,)
        Links from a pod's aggregation switches to core switches.
    latency_hbd, latency_dcn : float
        One-way latency of a path inside an HBD domain, and of one DCN hop, seconds.
    """

    nic: np.ndarray
    hbd: np.ndarray
    tor_up: np.ndarray
    direct: np.ndarray
    core: np.ndarray
    latency_hbd: float
    latency_dcn: float
    latency_host: float


def capacity_view(fabric: Fabric, configuration: Configuration | None = None) -> CapacityView:
    """Read the capacities the analytic bound needs from the active links."""
    A = fabric.active_links(configuration)
    kind = fabric.devices.kind
    ks, kd = kind[A.src], kind[A.dst]
    n = fabric.n_devices
    pod = fabric.group("pod")
    tor = fabric.group("tor")
    P = max(int(pod[fabric.gpu_ids].max()) + 1 if fabric.n_gpus else 1, 1)

    def between(a, b):
        return ((ks == a) & (kd == b)) | ((ks == b) & (kd == a))

    def end(mask, k):
        return np.where(ks[mask] == k, A.src[mask], A.dst[mask])

    nic = np.zeros(n)
    m = between(DeviceKind.GPU, DeviceKind.NIC)
    gpu_of_nic = np.full(n, -1, dtype=np.int64)
    g, c = end(m, DeviceKind.GPU), end(m, DeviceKind.NIC)
    gpu_of_nic[c] = g
    pcie = np.zeros(n)
    pcie[g] = A.capacity[m]
    m2 = between(DeviceKind.NIC, DeviceKind.TOR)
    c2 = end(m2, DeviceKind.NIC)
    owner = gpu_of_nic[c2]
    ok = owner >= 0
    nic[owner[ok]] = np.minimum(pcie[owner[ok]], A.capacity[m2][ok])
    hbd = np.zeros(n)
    mh = (A.layer == Layer.HBD) & ((ks == DeviceKind.GPU) | (kd == DeviceKind.GPU))
    for side in (A.src, A.dst):
        sel = mh & (kind[side] == DeviceKind.GPU)
        np.add.at(hbd, side[sel], A.capacity[sel])
    n_tor = max(int(tor.max()) + 1, 1)
    tor_up = np.zeros(n_tor)
    for up in (DeviceKind.AGG, DeviceKind.CORE):
        mt = between(DeviceKind.TOR, up)
        np.add.at(tor_up, tor[end(mt, DeviceKind.TOR)], A.capacity[mt])
    core = np.zeros(P)
    mc = between(DeviceKind.AGG, DeviceKind.CORE)
    np.add.at(core, pod[end(mc, DeviceKind.AGG)], A.capacity[mc])
    direct = np.zeros((P, P))
    md = (ks == DeviceKind.AGG) & (kd == DeviceKind.AGG)
    pa, pb = pod[A.src[md]], pod[A.dst[md]]
    cross = pa != pb
    np.add.at(direct, (pa[cross], pb[cross]), A.capacity[md][cross])
    np.add.at(direct, (pb[cross], pa[cross]), A.capacity[md][cross])

    def lat(mask):
        return float(A.latency[mask].max()) if mask.any() else 0.0

    return CapacityView(nic, hbd, tor_up, direct, core, 2 * lat(mh), lat(m2), lat(m))


def analytic_time(fabric: Fabric, flows: Flows, view: CapacityView | None = None,
                  include_pods: bool = True, measure: np.ndarray | None = None) -> float:
    """The bottleneck bound of ``flows`` (module docstring), seconds.

    Parameters
    ----------
    fabric : Fabric
    flows : Flows
    view : CapacityView, optional
        Capacities under the configuration to time (default: the Fabric's own).
    include_pods : bool
        False leaves out the pod level (what the circuits decide): the
        configuration-independent part, which the re-wiring rule adds to the
        circuit solver's pod-level prediction.
    measure : ndarray of bool, optional
        The flows whose completion counts; the others are background that
        loads the same NICs and ToR uplinks (default: all flows count).
    """
    t, lat = bottleneck(fabric, flows, view, include_pods, measure)
    return t + lat


def bottleneck(fabric: Fabric, flows: Flows, view: CapacityView | None = None,
               include_pods: bool = True, measure: np.ndarray | None = None) -> tuple[float, float]:
    """(transfer time at the bottleneck, longest path latency) of ``flows``, seconds (see :func:`analytic_time`).

    Only resources that measured flows use count; their load includes every flow.
    """
    if len(flows) == 0:
        return 0.0, 0.0
    v = view or capacity_view(fabric)
    mw = np.ones(len(flows), dtype=bool) if measure is None else np.asarray(measure, dtype=bool)
    dom, tor, pod = fabric.group("domain"), fabric.group("tor"), fabric.group("pod")
    s, d, b = flows.src, flows.dst, flows.nbytes
    n = fabric.n_devices
    t = 0.0
    local = (dom[s] == dom[d]) & (dom[s] >= 0)
    lat = 0.0
    if local.any():
        for ends in (s[local], d[local]):
            load = np.bincount(ends, weights=b[local], minlength=n)
            busy = np.bincount(ends, weights=mw[local], minlength=n) > 0
            if (v.hbd[busy] <= 0).any():
                raise FabricError("flows", "a flow inside an HBD domain has no HBD link")
            t = max(t, float((load[busy] / v.hbd[busy]).max()))
        lat = v.latency_hbd
    far = ~local
    if far.any():
        sf, df, bf, mf = s[far], d[far], b[far], mw[far]
        for ends in (sf, df):
            load = np.bincount(ends, weights=bf, minlength=n)
            busy = np.bincount(ends, weights=mf, minlength=n) > 0
            if (v.nic[busy] <= 0).any():
                raise FabricError("flows", "a GPU that sends over the DCN has no NIC")
            t = max(t, float((load[busy] / v.nic[busy]).max()))
        hops = 2
        cross_tor = tor[sf] != tor[df]
        if cross_tor.any():
            hops = 4
            for ends in (tor[sf][cross_tor], tor[df][cross_tor]):
                load = np.bincount(ends, weights=bf[cross_tor], minlength=v.tor_up.size)
                busy = np.bincount(ends, weights=mf[cross_tor], minlength=v.tor_up.size) > 0
                t = max(t, float((load[busy] / np.maximum(v.tor_up[busy], 1e-300)).max()))
        cross_pod = pod[sf] != pod[df]
        if cross_pod.any():
            hops = 6
            if include_pods:
                P = v.core.size
                D = np.zeros((P, P))
                np.add.at(D, (pod[sf][cross_pod], pod[df][cross_pod]), bf[cross_pod])
                t = max(t, pod_transfer_time(D, v.direct, v.core))
        lat = max(lat, 2 * v.latency_host + hops * v.latency_dcn)
    return t, lat


class Timer:
    """Times flows and broadcasts on one Fabric, by the simulator or the analytic bound.

    Parameters
    ----------
    timing : {'sim', 'analytic'}
    """

    def __init__(self, timing: str = "sim"):
        if timing not in TIMINGS:
            raise FabricError("timing", f"{timing!r} not allowed; use one of {', '.join(TIMINGS)}")
        self.timing = timing

    def flows(self, fabric: Fabric, flows: Flows, background: Flows | None = None) -> float:
        """Seconds until all ``flows`` (started together) have finished, sharing links with ``background``."""
        if len(flows) == 0:
            return 0.0
        both = Flows.concat([flows, background]) if background is not None and len(background) else flows
        measure = np.arange(len(both)) < len(flows)
        if self.timing == "analytic":
            return analytic_time(fabric, both, capacity_view(fabric), measure=measure)
        from fabric.sim import FlowTable, simulate_flows

        res = simulate_flows(fabric, FlowTable.build(both.src, both.dst, both.nbytes))
        return float(res.finish_s[measure].max())

    def broadcasts(self, fabric: Fabric, chains: np.ndarray, size: float, chunks: int) -> float:
        """Seconds for pipelined chain broadcasts of ``size`` bytes, one per row of ``chains`` (device ids, root first).

        The analytic form: the bottleneck time of all chain edges carrying
        ``size`` at once, stretched by the pipeline fill ``(chunks + hops - 1)
        / chunks``, plus one latency per hop.
        """
        chains = np.asarray(chains, dtype=np.int64)
        if chains.size == 0 or chains.shape[1] < 2 or size <= 0:
            return 0.0
        if self.timing == "sim":
            from fabric.sim import Collective, simulate_collectives

            index = np.searchsorted(fabric.gpu_ids, chains)
            colls = [Collective("broadcast", tuple(row.tolist()), float(size), "ring", int(chunks), 0)
                     for row in index]
            return float(max(c.time_s for c in simulate_collectives(fabric, colls).collectives))
        edges = Flows.of(chains[:, :-1].ravel(), chains[:, 1:].ravel(), size)
        hops = chains.shape[1] - 1
        body, lat = bottleneck(fabric, edges, capacity_view(fabric))
        return body * (chunks + hops - 1) / chunks + hops * lat
