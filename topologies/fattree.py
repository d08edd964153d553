"""Standalone fat-tree / leaf-spine of 1-GPU hosts (the DCN every family reuses).

Closed forms (Al-Fares et al., SIGCOMM 2008; FIGURES.md): k-ary 3-tier fat-tree
has k^3/4 hosts and 5k^2/4 switches; 2-tier leaf-spine of radix k has k^2/2
hosts and 3k/2 switches.  Without ``--gpus`` the full tree for ``k`` is built.
"""

from __future__ import annotations


import numpy as np

from fabric.catalog import Catalog
from fabric.model import Fabric, FabricBuilder, HBDKind, HBDSpec
from topologies.clos import DCN_DRIVERS, check_ratios, dcn_params, split_ports
from topologies.params import Param
from topologies.servers import add_gpu_nodes, add_nic_per_gpu, attach_gpus_to_clos
from topologies.size import Size, clos_size, servers_size

PARAMS = [
    Param("gpu", str, "gpu_h100", "catalog id of the host GPU"),
    *dcn_params(default_k=8),
]


def full_hosts(k: int, tiers: int, oversubscription: float = 1.0, agg_oversubscription: float = 1.0) -> int:
    """Hosts of the full Clos for radix ``k``: k^2/2 (2 tiers) or k^3/4 (3 tiers) at 1:1."""
    d, u = split_ports(k, oversubscription)
    if tiers == 2:
        return k * d
    da, _ = split_ports(k, agg_oversubscription)
    return k * da * d


def size(params: dict, gpus: int | None, catalog: Catalog) -> Size:
    """Closed-form size: hosts (``gpus``, else :func:`full_hosts`) with a NIC each, on the Clos."""
    k = params["k"]
    check_ratios(k, params)
    tiers = 3 if params["tiers"] == "auto" else int(params["tiers"])
    hosts = gpus if gpus is not None else full_hosts(k, tiers, params["oversubscription"],
                                                     params["agg_oversubscription"])
    devices, links = clos_size(hosts, k, {**params, "tiers": params["tiers"] if gpus is not None else str(tiers)})
    return servers_size(hosts, devices, links, ("gpus", *DCN_DRIVERS))


def build(params: dict, gpus: int | None, catalog: Catalog) -> Fabric:
    """Build a fat-tree of 1-GPU hosts.

    Examples
    --------
    >>> from fabric.catalog import load_catalog
    >>> f = build({**{p.name: p.default for p in PARAMS}, "tiers": "3"}, None, load_catalog())
    >>> f.counts()["hosts"], f.counts()["packet_switches"]
    (128, 80)
    """
    k = params["k"]
    tiers = 3 if params["tiers"] == "auto" else int(params["tiers"])
    hosts = gpus if gpus is not None else full_hosts(k, tiers, params["oversubscription"],
                                                     params["agg_oversubscription"])
    if gpus is None and params["tiers"] == "auto":
        params = {**params, "tiers": "3"}
    b = FabricBuilder("fat-tree", params, catalog.category)
    bw = catalog.value(params["gpu"], "nic_bandwidth")
    gpu_ids = add_gpu_nodes(b, hosts, 1, nodes_per_rack=max(1, split_ports(k, params["oversubscription"])[0]))
    node = np.arange(hosts)
    nics, _ = add_nic_per_gpu(b, catalog, gpu_ids, bw, node, node // max(1, k // 2))
    attach_gpus_to_clos(b, catalog, gpu_ids, nics, params, nic_bandwidth=bw, node=node)
    b.add_bom(params["gpu"], "compute", hosts)
    b.add_bom("server_1gpu", "compute", hosts)
    return b.build(HBDSpec(kind=HBDKind.NONE, gpus_per_node=1, domain_gpus=1, max_tp=1))
