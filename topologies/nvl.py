"""NVLink switch racks: NVL-36, NVL-72 and NVL-576 (GB200), one 400G NIC per GPU into a Clos DCN.

* NVL-72 (FIGURES, NVIDIA DGX GB200 user guide): 18 compute trays x 4 GPUs,
  9 NVLink switch trays x 2 chips = 18 chips, passive copper spine.  Every GPU
  has 18 NVLink5 links (50 GB/s per direction each), one to each chip.
* NVL-36: 9 compute trays x 4 GPUs and 9 single-chip switch trays (FIGURES:
  NVL36x2 has 9 switch trays per rack); 36 GPUs x 18 links / 72 ports = 9
  chips, so each GPU has 2 links to each chip.
* NVL-576 (FIGURES: NVLink domain up to 576 GPUs via a second switch tier over
  optics): 8 NVL-72 racks whose 36 L1 chips per rack (18 trays x 2) use 36
  ports down and 36 up; 576 x 18 / 72 = 144 L2 chips in 72 switch trays.
  GPU g links to the 18 L1 chips of its rack with the parity of g; L1 chip c's
  36 uplinks go to the 36 L2 chips of group c // 9.  L1-L2 links are optical:
  one fibre and an 800G transceiver per two links at each end (derived).

The HBD is the NVLink domain (36, 72 or 576 GPUs).  A GPU fault drains its
4-GPU compute tray (FIGURES: NVL72 fault unit).
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

GPUS_PER_TRAY = 4
LINKS_PER_GPU = 18
CHIP_PORTS = 72

PARAMS = [
    Param("size", int, 72, "NVLink domain size in GPUs", choices=(36, 72, 576)),
    Param("gpu", str, "gpu_gb200", "catalog id of the GPU"),
    *dcn_params(),
]


def size(params: dict, gpus: int | None, catalog: Catalog) -> Size:
    """Closed-form size (see :func:`build`): per GPU 1/4 chip and 9 (NVL-36) or 18 links; NVL-576 adds its
    second tier (1/2 L1 chip and 18 L1-L2 links per GPU), then a NIC per GPU and the Clos."""
    G = params["size"] * math.ceil((gpus or params["size"]) / params["size"])
    chips, links = (G * 3 / 4, 36 * G) if params["size"] == 576 else (G / 4, (9 if params["size"] == 36 else 18) * G)
    devices, dcn_links = dcn_size(catalog, params, G, catalog.value(params["gpu"], "nic_bandwidth"))
    return servers_size(G, chips + devices, links + dcn_links, ("gpus", *DCN_DRIVERS))


def build(params: dict, gpus: int | None, catalog: Catalog) -> Fabric:
    """Build ``ceil(gpus / size)`` NVLink domains (NVL-36, -72 or -576) on a Clos DCN, one NIC per GPU.

    Parameters
    ----------
    params : dict
        :data:`PARAMS` resolved: ``size`` (GPUs per NVLink domain: 36, 72 or
        576), ``gpu`` (catalog id), and the DCN's.
    gpus : int, optional
        GPUs wanted (default: one domain); rounded up to whole domains.
    catalog : Catalog

    Closed forms
    ------------
    With ``D = ceil(gpus / size)`` domains and 18 NVLink5 links per GPU:
    ``size D`` GPUs in ``size D / 4`` compute trays (the fault unit);
    ``18 size D`` GPU-chip links; switch chips per domain: 9 (NVL-36), 18
    (NVL-72), 8 x 36 L1 + 144 L2 = 432 (NVL-576).

    Examples
    --------
    >>> from topologies import build
    >>> f = build("nvl", 144, {"size": 72})
    >>> c = f.counts()
    >>> c["nodes"], c["switch_chips"], int((f.links.layer == 0).sum())
    (36, 36, 2592)
    """
    size = params["size"]
    gpu_item = params["gpu"]
    catalog.get(gpu_item)
    gpus = gpus or size
    n_dom = math.ceil(gpus / size)
    b = FabricBuilder("nvl", params, catalog.category)
    if n_dom * size != gpus:
        b.note(f"rounded {gpus} GPUs up to {n_dom} whole NVL-{size} domains")
    rack_gpus = 36 if size == 36 else 72
    trays_per_rack = rack_gpus // GPUS_PER_TRAY
    n_trays = n_dom * size // GPUS_PER_TRAY
    dom_of_tray = np.arange(n_trays) // (size // GPUS_PER_TRAY)
    gpu_ids = add_gpu_nodes(b, n_trays, GPUS_PER_TRAY, nodes_per_rack=trays_per_rack, domain_of_node=dom_of_tray)
    G = gpu_ids.size
    gpu_rack = np.arange(G) // rack_gpus
    n_racks = G // rack_gpus
    link_bw = catalog.value("nvlink_switch_tray", "bandwidth")
    lat = catalog.value("nvlink_latency", "latency")

    if size in (36, 72):
        chips_per_rack = 9 if size == 36 else 18
        links_per_chip = LINKS_PER_GPU // chips_per_rack
        chip_rack = np.repeat(np.arange(n_racks), chips_per_rack)
        chips = b.add_devices(DeviceKind.SWITCH_CHIP, n_racks * chips_per_rack, rack=chip_rack,
                              domain=chip_rack * rack_gpus // size)
        src = np.repeat(np.arange(G), chips_per_rack)
        dst = chips[np.repeat(gpu_rack, chips_per_rack) * chips_per_rack + np.tile(np.arange(chips_per_rack), G)]
        b.add_links(gpu_ids[src], dst, capacity=link_bw * links_per_chip, latency=lat, medium="copper", layer="hbd")
        tray_item = "nvlink_switch_tray_nvl36" if size == 36 else "nvlink_switch_tray"
        chips_per_tray = int(catalog.value(tray_item, "chips"))
        b.add_bom(tray_item, "hbd", chips.size // chips_per_tray)
        b.add_bom("nvl_copper_spine", "hbd", n_racks)
    else:
        l1_per_rack, down = 36, CHIP_PORTS // 2
        l1 = b.add_devices(DeviceKind.SWITCH_CHIP, n_racks * l1_per_rack,
                           rack=np.repeat(np.arange(n_racks), l1_per_rack),
                           domain=np.repeat(np.arange(n_racks), l1_per_rack) * rack_gpus // size)
        # GPU g (in rack r) -> the 18 L1 chips of rack r with parity g % 2: every chip gets 36 GPU links
        local = np.arange(G) % rack_gpus
        chip_local = (local % 2)[:, None] + 2 * np.arange(LINKS_PER_GPU)[None, :]
        dst = l1[(gpu_rack[:, None] * l1_per_rack + chip_local).ravel()]
        b.add_links(np.repeat(gpu_ids, LINKS_PER_GPU), dst, capacity=link_bw, latency=lat, medium="copper",
                    layer="hbd")
        n_l2_per_dom = size * LINKS_PER_GPU // CHIP_PORTS  # 144
        groups = l1_per_rack // 9  # 4 groups of 36 L2 chips
        l2 = b.add_devices(DeviceKind.SWITCH_CHIP, n_dom * n_l2_per_dom,
                           domain=np.repeat(np.arange(n_dom), n_l2_per_dom))
        racks_per_dom = size // rack_gpus
        l1_rack, l1_c, t = np.meshgrid(np.arange(n_racks), np.arange(l1_per_rack), np.arange(down), indexing="ij")
        dom = l1_rack // racks_per_dom
        l2_idx = dom * n_l2_per_dom + (l1_c // 9) * (n_l2_per_dom // groups) + t
        src = l1[(l1_rack * l1_per_rack + l1_c).ravel()]
        b.add_links(src, l2[l2_idx.ravel()], capacity=link_bw, latency=lat, medium="fiber", layer="hbd")
        n_up = src.size
        b.add_bom("nvlink_switch_tray", "hbd", (l1.size + l2.size) // 2)
        b.add_bom("nvl_copper_spine", "hbd", n_racks)
        b.add_bom("transceiver_800g", "hbd", n_up)  # 2 ends x (links / 2 per 800G module)
        b.add_bom("fiber", "hbd", n_up // 2)
        b.note(f"NVL-576: {l1.size} L1 + {l2.size} L2 NVLink switch chips, {n_up} optical L1-L2 links")

    nic_bw = catalog.value(gpu_item, "nic_bandwidth")
    node = np.arange(G) // GPUS_PER_TRAY
    nics, _ = add_nic_per_gpu(b, catalog, gpu_ids, nic_bw, node, gpu_rack)
    attach_gpus_to_clos(b, catalog, gpu_ids, nics, params, nic_bandwidth=nic_bw, node=node,
                        rail=np.arange(G) % GPUS_PER_TRAY)
    b.add_bom(gpu_item, "compute", G)
    b.add_bom("server_nvl_compute_tray", "compute", n_trays)
    return b.build(HBDSpec(kind=HBDKind.SWITCH_DOMAIN, gpus_per_node=GPUS_PER_TRAY, domain_gpus=size, max_tp=size))
