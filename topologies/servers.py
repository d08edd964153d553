"""Servers of GPUs and their NICs: the pieces every GPU family starts from."""

from __future__ import annotations

import numpy as np

from fabric.catalog import Catalog
from fabric.model import DeviceKind, FabricBuilder
from topologies.clos import ClosInfo, attach_clos, default_radix, rail_order, split_ports


def add_gpu_nodes(b: FabricBuilder, n_nodes: int, gpus_per_node: int, *, nodes_per_rack: int,
                  domain_of_node=None, position_of_node=None) -> np.ndarray:
    """Add ``n_nodes`` x ``gpus_per_node`` GPUs, grouped by node and rack.

    Returns the GPU ids, node-major (GPU ``g`` of node ``i`` is ``ids[i*gpus_per_node + g]``).
    """
    from fabric.limits import check_fabric_size
    from fabric.model import LIMIT_FIELD

    # before the per-GPU arrays exist: each GPU brings at least a NIC or a link
    check_fabric_size(b.n_devices + n_nodes * gpus_per_node, b.n_links + n_nodes * gpus_per_node, LIMIT_FIELD,
                      f"{n_nodes} nodes x {gpus_per_node} GPUs")
    node = np.repeat(np.arange(n_nodes, dtype=np.int64), gpus_per_node)
    groups = {"node": node, "rack": node // max(nodes_per_rack, 1)}
    if domain_of_node is not None:
        groups["domain"] = np.asarray(domain_of_node, dtype=np.int64)[node]
    if position_of_node is not None:
        groups["position"] = np.asarray(position_of_node, dtype=np.int64)[node]
    return b.add_devices(DeviceKind.GPU, n_nodes * gpus_per_node, **groups)


def add_nic_per_gpu(b: FabricBuilder, catalog: Catalog, gpus: np.ndarray, nic_bandwidth: float,
                    node: np.ndarray, rack: np.ndarray) -> tuple[np.ndarray, str]:
    """One scale-out NIC per GPU, joined to it by PCIe.

    Returns the NIC ids and the catalog id of the NIC (matched by bandwidth).
    """
    nic_item = catalog.find_by_bandwidth("nic", nic_bandwidth)
    nics = b.add_devices(DeviceKind.NIC, gpus.size, node=node, rack=rack)
    pcie = catalog.value("pcie_gen5_x16", "bandwidth")
    b.add_links(gpus, nics, capacity=pcie, latency=catalog.value("pcb_latency", "latency"),
                medium="pcb", layer="dcn")
    b.add_bom(nic_item, "dcn", gpus.size)
    return nics, nic_item


def propagate_tor(b: FabricBuilder, gpus: np.ndarray, tor_of_nic: np.ndarray, pod_of_nic: np.ndarray) -> None:
    """GPUs inherit the ToR and pod of their NIC (same order)."""
    b.set_group(gpus, "tor", tor_of_nic)
    b.set_group(gpus, "pod", pod_of_nic)


def attach_gpus_to_clos(b: FabricBuilder, catalog: Catalog, gpus: np.ndarray, nics: np.ndarray, params: dict, *,
                        nic_bandwidth: float, node: np.ndarray, rail: np.ndarray | None = None,
                        order: np.ndarray | None = None, nodes_per_tor: int | None = None,
                        radix_param: str = "k", **clos_kw) -> ClosInfo:
    """Put one-NIC-per-GPU servers on a Clos DCN; GPUs inherit their NIC's ToR and pod.

    Parameters
    ----------
    gpus, nics : ndarray of int
        Device ids, GPU ``i`` owning NIC ``i``.
    params : dict
        The DCN parameters (:func:`topologies.clos.dcn_params`).
    nic_bandwidth : float
        Bytes/s per direction.
    node, rail : ndarray of int
        Server of each NIC and its index within the server (the rail).
    order : ndarray of int, optional
        Order in which *servers' NICs* fill ToRs (default: as given); with
        ``rail_optimized`` the NICs are re-ordered so that each ToR holds one
        rail of a group of servers.
    nodes_per_tor : int, optional
        Whole servers per ToR (default: as many NICs as the ToR has downlinks).
    """
    per_node = int(np.bincount(node).max()) if node.size else 1
    order = np.arange(nics.size) if order is None else order
    ept = nodes_per_tor * per_node if nodes_per_tor else None
    if params.get("rail_optimized") and rail is not None and per_node > 1:
        k = params["k"] or default_radix(catalog, params["switch"], nic_bandwidth)
        servers_per_tor = nodes_per_tor or split_ports(k, params["oversubscription"])[0]
        rank = np.empty(nics.size, dtype=np.int64)
        rank[order] = np.arange(nics.size)  # position of each NIC in the wiring order
        order = order[rail_order(rank[order] // per_node, rail[order], servers_per_tor)]
        ept = servers_per_tor
    info = attach_clos(b, nics[order], catalog, port_bandwidth=nic_bandwidth, params=params,
                       endpoints_per_tor=ept, radix_param=radix_param, **clos_kw)
    tor = np.empty(nics.size, dtype=np.int64)
    pod = np.empty(nics.size, dtype=np.int64)
    tor[order], pod[order] = info.tor_of_endpoint, info.pod_of_endpoint
    propagate_tor(b, gpus, tor, pod)
    return info
