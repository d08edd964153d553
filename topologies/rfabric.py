"""RFabric (OrchestrRL, arXiv 2601.01209): a fat-tree whose aggregation-core links pass through OCS.

Hosts, ToRs and aggregation switches are as in :mod:`topologies.fattree` (8-GPU
DGX-style nodes by default, one NIC per GPU).  Every aggregation uplink and
every core downlink is a fibre into an OCS port; circuits join them.  The
default configuration reproduces the static fat-tree wiring, so with it the
rfabric carries traffic exactly as the fat-tree does; the RL solver re-pairs
ports (within an OCS, i.e. within a core plane) per phase.

``core_ratio`` below 1 builds fewer core switches than aggregation uplinks
(see :func:`_attach_ocs_pods`): every aggregation uplink still ends in an OCS
port, ``round(core_ratio * ua)`` of each aggregation switch's ``ua`` uplinks
find a core-switch port on their OCS, and the OCS joins the others to
aggregation switches of other pods directly (``core_ratio = 0``: no core
switches, a direct-connect pod fabric whose circuits must follow the traffic).
"""

from __future__ import annotations

import math

import numpy as np

from fabric.catalog import Catalog
from fabric.errors import FabricError
from fabric.model import Configuration, DeviceKind, Fabric, FabricBuilder, HBDKind, HBDSpec
from topologies import dgx
from topologies.clos import (DCN_DRIVERS, aggs_per_pod, check_ratios, dcn_params, default_configuration, default_radix, even_spine_count, pods_of_tors_and_aggs,
                             split_ports)
from topologies.params import Param, positive
from topologies.servers import add_gpu_nodes, add_nic_per_gpu, attach_gpus_to_clos, propagate_tor
from topologies.size import Size, dcn_size, servers_size

PARAMS = [
    Param("gpu", str, "h800", "GPU of the 8-GPU nodes", choices=tuple(dgx.VARIANTS)),
    Param("ocs", str, "ocs_palomar", "catalog id of the OCS"),
    Param("nodes_per_rack", int, 4, "nodes per rack (assumed)", check=positive),
    Param("core_ratio", float, 1.0, "core-switch ports behind the OCS per aggregation uplink, 0..1 (rounded to whole "
          "uplinks): 1 = a full core (default circuits reproduce the fat-tree); below 1 the other uplinks are joined "
          "to other pods' aggregation switches directly by the OCS (0 = no core switches); a design knob",
          check=lambda v: None if 0.0 <= v <= 1.0 else "must be in [0, 1]"),
    *[p for p in dcn_params() if p.name != "tiers"],
]


def size(params: dict, gpus: int | None, catalog: Catalog) -> Size:
    """Closed-form size (see :func:`build`): the DCN counted with every agg-core link through an OCS."""
    gpu_item, _, n_chips = dgx.VARIANTS[params["gpu"]]
    G = dgx.GPUS_PER_NODE * math.ceil((gpus or 1024) / dgx.GPUS_PER_NODE)
    devices, links = dcn_size(catalog, {**params, "tiers": "3"}, G, catalog.value(gpu_item, "nic_bandwidth"),
                              ocs_core=True, ocs_ports=catalog.value(params["ocs"], "ports"))
    return servers_size(G, devices + G // dgx.GPUS_PER_NODE * n_chips, links + G * n_chips,
                        ("gpus", *DCN_DRIVERS))


def build(params: dict, gpus: int | None, catalog: Catalog) -> Fabric:
    """Build 8-GPU DGX-style nodes on a 3-tier fat-tree whose aggregation-core links pass through OCS.

    Parameters
    ----------
    params : dict
        :data:`PARAMS` resolved: ``gpu`` (a DGX variant), ``ocs`` (catalog id),
        ``core_ratio`` (core-switch ports behind the OCS per aggregation
        uplink, 0..1), and the DCN's.
    gpus : int, optional
        GPUs wanted (default 1,024); rounded up to whole nodes.
    catalog : Catalog

    Closed forms
    ------------
    ``ceil(gpus / 8)`` nodes, one NIC per GPU; every aggregation uplink is an
    OCS port, and at ``core_ratio`` 1 so is every core downlink: the OCS
    ports are twice the aggregation uplinks, and the default circuits
    (one per uplink) reproduce the static fat-tree.

    Examples
    --------
    >>> from topologies import build
    >>> f = build("rfabric", 64)
    >>> c = f.counts()
    >>> c["nodes"], c["nics"], c["ocs_ports"] == 2 * len(f.configuration.circuits)
    (8, 64, True)
    """
    gpu_item, chip_item, n_chips = dgx.VARIANTS[params["gpu"]]
    gpus = gpus or 1024
    n_nodes = math.ceil(gpus / dgx.GPUS_PER_NODE)
    b = FabricBuilder("rfabric", params, catalog.category)
    ids = add_gpu_nodes(b, n_nodes, dgx.GPUS_PER_NODE, nodes_per_rack=params["nodes_per_rack"],
                        domain_of_node=range(n_nodes))
    node = np.repeat(np.arange(n_nodes), dgx.GPUS_PER_NODE)
    rack = node // params["nodes_per_rack"]
    chips = b.add_devices(DeviceKind.SWITCH_CHIP, n_nodes * n_chips, node=np.repeat(np.arange(n_nodes), n_chips),
                          domain=np.repeat(np.arange(n_nodes), n_chips))
    src = np.repeat(ids, n_chips)
    dst = chips[np.repeat(node, n_chips) * n_chips + np.tile(np.arange(n_chips), ids.size)]
    b.add_links(src, dst, capacity=catalog.value(gpu_item, "hbd_bandwidth") / n_chips,
                latency=catalog.value("nvlink_latency", "latency"), medium="pcb", layer="hbd")
    nic_bw = catalog.value(gpu_item, "nic_bandwidth")
    nics, _ = add_nic_per_gpu(b, catalog, ids, nic_bw, node, rack)
    if params["core_ratio"] >= 1.0:
        info = attach_gpus_to_clos(b, catalog, ids, nics, {**params, "tiers": "3"}, nic_bandwidth=nic_bw, node=node,
                                   rail=np.arange(ids.size) % dgx.GPUS_PER_NODE, ocs_core=True,
                                   ocs_item=params["ocs"])
        config = default_configuration(info)
    else:
        if params["rail_optimized"]:
            raise FabricError("params[rail_optimized]", "not available with core_ratio < 1 (use core_ratio=1)")
        tor_of_nic, pod_of_nic, config = _attach_ocs_pods(b, nics, catalog, nic_bw, params)
        propagate_tor(b, ids, tor_of_nic, pod_of_nic)
    b.add_bom(gpu_item, "compute", ids.size)
    b.add_bom("server_hgx8", "compute", n_nodes)
    b.add_bom(chip_item, "hbd", chips.size)
    return b.build(HBDSpec(kind=HBDKind.SWITCH_DOMAIN, gpus_per_node=8, domain_gpus=8, max_tp=8), config)


def _attach_ocs_pods(b: FabricBuilder, nics: np.ndarray, catalog: Catalog, bw: float, params: dict):
    """ToRs and pods as in :func:`topologies.clos.attach_clos`; aggregation uplinks into OCS, few or no cores.

    Per plane (aggregation switch ``j`` of every pod) there are ``n_o`` OCS;
    uplink ``t`` of every aggregation switch goes to OCS ``t mod n_o``, so
    every OCS has ports of every pod and can join any two pods.  Of the
    ``ua`` uplinks of an aggregation switch the last ``yc = round(core_ratio
    ua)`` face core-switch ports created on the same OCS (spread round-robin
    over the plane's cores, whose count divides ``yc``: every aggregation-core
    pair has the same links); the default circuits join those to their core
    port and pair the first ``ua - yc`` uplinks of the pods as a round-robin
    tournament (uplink ``t`` plays round ``t mod rounds``), a uniform mesh.

    Returns
    -------
    tor_of_nic, pod_of_nic : ndarray of int
    configuration : Configuration
    """
    switch, ocs_item = params["switch"], params["ocs"]
    catalog.get(switch)
    k = params["k"] or default_radix(catalog, switch, bw)
    b.params["k"] = k
    b.params["tiers"] = "3"
    latency = catalog.value("network_latency", "latency")
    trx = catalog.find_by_bandwidth("transceiver", bw)
    check_ratios(k, params)
    d, u = split_ports(k, params["oversubscription"])
    da, ua = split_ports(k, params["agg_oversubscription"])
    E = int(nics.size)
    T = max(1, math.ceil(E / d))
    P = math.ceil(T / da)
    tor_of_ep = np.arange(E, dtype=np.int64) // d  # not a repeat of T x d: d may be a huge radix
    a = aggs_per_pod(T, u, da)
    tors, aggs, pod_of_tor = pods_of_tors_and_aggs(b, nics, tor_of_ep, T, P, da, a, bw, latency, links_per_pair=u // a)
    T = tors.size
    yc = int(round(params["core_ratio"] * ua))
    ud = ua - yc
    ocs_ports = int(catalog.value(ocs_item, "ports"))
    # OCS per plane: enough ports for every uplink and its core port, at most ua (each sees every pod)
    n_o = max(1, math.ceil(P * (ua + yc) / ocs_ports))
    t_all = np.arange(ua)
    while n_o <= ua and (np.bincount(t_all % n_o, minlength=n_o) * P
                         + np.bincount(t_all[ud:] % n_o, minlength=n_o) * P).max() > ocs_ports:
        n_o += 1
    if n_o > ua:
        raise FabricError("gpus", f"{P} pods do not fit: with core_ratio {params['core_ratio']:g} every OCS needs "
                                    f"a port per pod and per core circuit ({ocs_ports} ports on {ocs_item}); "
                                    "use a larger -p k or fewer GPUs")
    cores_pp = even_spine_count(P, yc, k) if yc else 0  # divides yc: every agg has yc / cores_pp links per core
    cores = b.add_devices(DeviceKind.CORE, a * cores_pp)
    ocs = b.add_devices(DeviceKind.OCS, a * n_o)
    j_idx, p_idx, t_idx = (m.ravel() for m in np.meshgrid(np.arange(a), np.arange(P), t_all, indexing="ij"))
    agg_ports = b.add_links(aggs[p_idx * a + j_idx], ocs[j_idx * n_o + t_idx % n_o], capacity=bw,
                            latency=latency / 2, medium="fiber", layer="dcn", state="ocs_port")
    port_of = agg_ports.reshape(a, P, ua)  # OCS-port link of (plane, pod, uplink)
    circuits = []
    if yc:
        cj, cp, ct = (m.ravel() for m in np.meshgrid(np.arange(a), np.arange(P), np.arange(ud, ua), indexing="ij"))
        core_idx = (ct - ud) % cores_pp  # a pod's core circuits spread evenly over its plane's cores
        core_ports = b.add_links(cores[cj * cores_pp + core_idx], ocs[cj * n_o + ct % n_o], capacity=bw,
                                 latency=latency / 2, medium="fiber", layer="dcn", state="ocs_port")
        circuits.append(np.stack([port_of[cj, cp, ct], core_ports], axis=1))
    # a round-robin tournament (circle method) over the pods, one round per direct uplink index
    n_rounds = P - 1 if P % 2 == 0 else P
    for t in range(ud if P > 1 else 0):
        partner = _circle_partners(P, t % n_rounds)
        p = np.flatnonzero(partner > np.arange(P))
        circuits.append(np.stack([port_of[:, p, t].ravel(), port_of[:, partner[p], t].ravel()], axis=1))
    n_agg_fibres = a * P * ua
    n_core_fibres = a * P * yc
    b.add_bom(switch, "dcn", T + aggs.size + cores.size)
    # transceivers at both ends of NIC-ToR and ToR-agg fibres, one per OCS fibre (the OCS is passive)
    b.add_bom(trx, "dcn", 2 * (E + T * u) + n_agg_fibres + n_core_fibres)
    b.add_bom("fiber", "dcn", E + T * u + n_agg_fibres + n_core_fibres)
    b.add_bom(ocs_item, "dcn", ocs.size)
    b.note(f"DCN: 3-tier fat-tree, radix {k}, {P} pods x {min(da, T)} ToRs x {d} endpoints, {aggs.size} aggs; "
           f"agg uplinks through {ocs.size} OCS ({n_o} per plane); {yc} of {ua} uplinks per agg face "
           f"{cores.size} core switches, {ud} join pods directly")
    arr = np.concatenate(circuits) if circuits else np.zeros((0, 2), dtype=np.int64)
    return tor_of_ep, pod_of_tor[tor_of_ep], Configuration(circuits=arr)


def _circle_partners(n: int, r: int) -> np.ndarray:
    """Round ``r`` of a round-robin tournament of ``n`` players (circle method): partner of each, -1 sits out."""
    m = n if n % 2 == 0 else n + 1
    partner = np.full(m, -1, dtype=np.int64)
    others = [(r + i) % (m - 1) for i in range(m - 1)]
    partner[m - 1], partner[others[0]] = others[0], m - 1
    for i in range(1, m // 2):
        x, y = others[i], others[m - 1 - i]
        partner[x], partner[y] = y, x
    partner = partner[:n]
    partner[partner >= n] = -1
    return partner
