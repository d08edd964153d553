"""DGX / HGX servers: 8 GPUs on NVSwitch chips, one scale-out NIC per GPU into a Clos DCN.

Each GPU's NVLink bandwidth is spread evenly over the node's NVSwitch chips
(one aggregated link per GPU-chip pair): H100 4 chips (FIGURES: DGX H100),
A100 6 NVSwitch gen2 chips, B200 2 NVLink5 chips.  The HBD is the node.
"""

from __future__ import annotations

import math

import numpy as np

from fabric.catalog import Catalog
from fabric.model import DeviceKind, Fabric, FabricBuilder, HBDKind, HBDSpec
from topologies.clos import DCN_DRIVERS, dcn_params
from topologies.params import Param
from topologies.servers import add_gpu_nodes, add_nic_per_gpu, attach_gpus_to_clos
from topologies.size import Size, dcn_size, servers_size

GPUS_PER_NODE = 8
# GPU -> (catalog id, NVSwitch chip item, chips per node). Chip counts: H100 4 (P: DGX BasePOD, FIGURES);
# A100 6 and B200 2 (S: NVIDIA HGX A100 / HGX B200 platform descriptions).
VARIANTS = {
    "a100": ("gpu_a100", "nvswitch_gen2", 6),
    "h100": ("gpu_h100", "nvswitch_gen3", 4),
    "h800": ("gpu_h800", "nvswitch_gen3", 4),
    "b200": ("gpu_b200", "nvswitch_gen3", 2),
}

PARAMS = [
    Param("gpu", str, "h100", "GPU generation of the node", choices=tuple(VARIANTS)),
    Param("nodes_per_rack", int, 4, "DGX nodes per rack (assumed)", check=lambda v: None if v >= 1 else "must be >= 1"),
    *dcn_params(),
]


def size(params: dict, gpus: int | None, catalog: Catalog) -> Size:
    """Closed-form size (see :func:`build`), checked before anything is allocated."""
    gpu_item, _, n_chips = VARIANTS[params["gpu"]]
    n_nodes = math.ceil((gpus or 1024) / GPUS_PER_NODE)
    G = n_nodes * GPUS_PER_NODE
    devices, links = dcn_size(catalog, params, G, catalog.value(gpu_item, "nic_bandwidth"))
    return servers_size(G, devices + n_nodes * n_chips, links + G * n_chips, ("gpus", *DCN_DRIVERS))


def build(params: dict, gpus: int | None, catalog: Catalog) -> Fabric:
    """Build ``ceil(gpus / 8)`` DGX / HGX nodes of 8 GPUs on NVSwitch chips, one NIC per GPU into a Clos DCN.

    Parameters
    ----------
    params : dict
        :data:`PARAMS` resolved: ``gpu`` (``a100``, ``h100``, ``h800``, ``b200``:
        sets the chips per node, ``c`` = 6, 4, 4, 2), ``nodes_per_rack``, and the
        DCN's (radix ``k`` in ports, ``tiers``, ``oversubscription``, ``rail_optimized``).
    gpus : int, optional
        GPUs wanted (default 1,024); rounded up to whole nodes (a note says so).
    catalog : Catalog

    Closed forms
    ------------
    With ``N = ceil(gpus / 8)`` nodes: ``8 N`` GPUs and NICs, ``c N`` switch
    chips, ``8 c N`` HBD links (one aggregated NVLink link per GPU-chip pair);
    the HBD domain is one node (``max_tp`` 8).

    Examples
    --------
    >>> from topologies import build
    >>> f = build("dgx", 16)
    >>> c = f.counts()
    >>> c["nodes"], c["switch_chips"], int((f.links.layer == 0).sum()), f.hbd.max_tp
    (2, 8, 64, 8)
    """
    gpu_item, chip_item, n_chips = VARIANTS[params["gpu"]]
    gpus = gpus or 1024
    n_nodes = math.ceil(gpus / GPUS_PER_NODE)
    b = FabricBuilder("dgx", params, catalog.category)
    if n_nodes * GPUS_PER_NODE != gpus:
        b.note(f"rounded {gpus} GPUs up to {n_nodes} whole 8-GPU nodes")
    gpu_ids = add_gpu_nodes(b, n_nodes, GPUS_PER_NODE, nodes_per_rack=params["nodes_per_rack"],
                            domain_of_node=range(n_nodes))
    node = np.repeat(np.arange(n_nodes), GPUS_PER_NODE)
    rack = node // params["nodes_per_rack"]
    chip_node = [i for i in range(n_nodes) for _ in range(n_chips)]
    chips = b.add_devices(DeviceKind.SWITCH_CHIP, n_nodes * n_chips, node=chip_node,
                          rack=[i // params["nodes_per_rack"] for i in chip_node], domain=chip_node)
    # GPU g of node i -> every chip of node i
    src = np.repeat(gpu_ids, n_chips)
    dst = chips[(np.repeat(node, n_chips) * n_chips + np.tile(np.arange(n_chips), gpu_ids.size))]
    hbd_bw = catalog.value(gpu_item, "hbd_bandwidth")
    b.add_links(src, dst, capacity=hbd_bw / n_chips, latency=catalog.value("nvlink_latency", "latency"),
                medium="pcb", layer="hbd")
    nic_bw = catalog.value(gpu_item, "nic_bandwidth")
    nics, _ = add_nic_per_gpu(b, catalog, gpu_ids, nic_bw, node, rack)
    attach_gpus_to_clos(b, catalog, gpu_ids, nics, params, nic_bandwidth=nic_bw, node=node,
                        rail=gpu_ids % GPUS_PER_NODE)
    b.add_bom(gpu_item, "compute", gpu_ids.size)
    b.add_bom("server_hgx8", "compute", n_nodes)
    b.add_bom(chip_item, "hbd", chips.size)
    return b.build(HBDSpec(kind=HBDKind.SWITCH_DOMAIN, gpus_per_node=GPUS_PER_NODE, domain_gpus=GPUS_PER_NODE,
                           max_tp=GPUS_PER_NODE))
