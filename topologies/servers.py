"""Servers of GPUs and their NICs: the pieces every GPU family starts from."""

from __future__ import annotations

import numpy as np

from fabric.catalog import Catalog
from fabric.model import DeviceKind, FabricBuilder


def add_gpu_nodes(b: FabricBuilder, n_nodes: int, gpus_per_node: int, *, nodes_per_rack: int,
                  domain_of_node=None, position_of_node=None) -> np.ndarray:
    """Add ``n_nodes`` x ``gpus_per_node`` GPUs, grouped by node and rack.

    Returns the GPU ids, node-major (GPU ``g`` of node ``i`` is ``ids[i*gpus_per_node + g]``).
    """
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
