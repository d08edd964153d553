"""RFabric (OrchestrRL, arXiv 2601.01209): a fat-tree whose aggregation-core links pass through OCS.

Hosts, ToRs and aggregation switches are as in :mod:`topologies.fattree` (8-GPU
DGX-style nodes by default, one NIC per GPU).  Every aggregation uplink and
every core downlink is a fibre into an OCS port; circuits join them.  The
default configuration reproduces the static fat-tree wiring, so with it the
rfabric carries traffic exactly as the fat-tree does; the RL solver re-pairs
ports (within an OCS, i.e. within a core plane) per phase.
"""

from __future__ import annotations

import math

import numpy as np

from fabric.catalog import Catalog
from fabric.model import DeviceKind, Fabric, FabricBuilder, HBDSpec
from topologies import dgx
from topologies.clos import dcn_params, default_configuration
from topologies.params import Param
from topologies.servers import add_gpu_nodes, add_nic_per_gpu, attach_gpus_to_clos

PARAMS = [
    Param("gpu", str, "h800", "GPU of the 8-GPU nodes", choices=tuple(dgx.VARIANTS)),
    Param("ocs", str, "ocs_palomar", "catalog id of the OCS"),
    Param("nodes_per_rack", int, 4, "nodes per rack (assumed)"),
    *[p for p in dcn_params() if p.name != "tiers"],
]


def build(params: dict, gpus: int | None, catalog: Catalog) -> Fabric:
    """Build 8-GPU nodes on a 3-tier fat-tree with OCS between aggregation and core."""
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
    info = attach_gpus_to_clos(b, catalog, ids, nics, {**params, "tiers": "3"}, nic_bandwidth=nic_bw, node=node,
                               rail=np.arange(ids.size) % dgx.GPUS_PER_NODE, ocs_core=True, ocs_item=params["ocs"])
    b.add_bom(gpu_item, "compute", ids.size)
    b.add_bom("server_hgx8", "compute", n_nodes)
    b.add_bom(chip_item, "hbd", chips.size)
    return b.build(HBDSpec(kind="switch_domain", gpus_per_node=8, domain_gpus=8, max_tp=8),
                   default_configuration(info))
