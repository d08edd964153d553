"""GPU-centric torus or mesh (TPUv3 32x32-like, Dojo-like), one NIC per GPU into a Clos DCN.

Every GPU links to its +1 neighbour in each dimension (and wraps around when
``wrap`` is true), so each GPU has ``2 * len(dims)`` HBD links.  GPUs of a
host are consecutive along the first dimension; links inside a host are PCB,
inside a rack copper (one DAC each), otherwise a fibre with two transceivers.
The whole torus is one HBD: a fault breaks the rings of every dimension
through it (FIGURES: fault isolation of a GPU-centric torus is a whole torus
dimension).
"""

from __future__ import annotations

import math

import numpy as np

from fabric.catalog import Catalog
from fabric.errors import FabricError
from fabric.model import Fabric, FabricBuilder, HBDKind, HBDSpec
from fabric.units import parse_bandwidth
from topologies.clos import DCN_DRIVERS, dcn_params
from topologies.params import Param, positive
from topologies.servers import add_gpu_nodes, add_nic_per_gpu, attach_gpus_to_clos
from topologies.size import Size, dcn_size, servers_size

PARAMS = [
    Param("dims", str, None, "torus shape in GPUs, e.g. 32x32 or 16x16x16 (default: near-square 2D for --gpus)"),
    Param("wrap", bool, True, "wrap-around links (torus); false gives a mesh"),
    Param("gpu", str, "gpu_h100", "catalog id of the GPU"),
    Param("link_bandwidth", str, "800Gbps", "bandwidth per torus link per direction (assumed)"),
    Param("gpus_per_host", int, 4, "GPUs per host along the first dimension (assumed)", check=positive),
    Param("hosts_per_rack", int, 16, "hosts per rack (assumed)", check=positive),
    *dcn_params(),
]


def parse_dims(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise FabricError("params[dims]", f"{text!r} must look like 32x32 or 16x16x16") from None
    if not 1 <= len(dims) <= 3 or min(dims) < 2:
        raise FabricError("params[dims]", f"{text!r}: 1 to 3 dimensions, each >= 2")
    return dims


def auto_dims(gpus: int, per_host: int) -> tuple[int, int]:
    """Near-square 2D shape with at least ``gpus`` GPUs, first dimension a multiple of ``per_host``."""
    x = per_host * max(1, math.ceil(math.sqrt(gpus) / per_host))
    return x, max(2, math.ceil(gpus / x))


def size(params: dict, gpus: int | None, catalog: Catalog) -> Size:
    """Closed-form size (see :func:`build`): ``G len(dims)`` torus links at most, a NIC per GPU, the Clos."""
    per_host = params["gpus_per_host"]
    dims = parse_dims(params["dims"]) if params["dims"] else auto_dims(gpus or 1024, per_host)
    G = math.prod(dims)  # Python ints: a shape of 100000 x 100000 must not overflow int64 silently
    devices, links = dcn_size(catalog, params, G, catalog.value(params["gpu"], "nic_bandwidth"))
    return servers_size(G, devices, links + G * len(dims), ("dims", "gpus_per_host", "gpus", *DCN_DRIVERS))


def build(params: dict, gpus: int | None, catalog: Catalog) -> Fabric:
    """Build a GPU-centric torus (or mesh) of shape ``dims`` with one NIC per GPU into a Clos DCN.

    Parameters
    ----------
    params : dict
        :data:`PARAMS` resolved: ``dims`` (shape in GPUs, ``32x32``; default
        the near-square 2D shape for ``gpus``), ``wrap`` (torus or mesh),
        ``gpus_per_host`` (divides the first dimension), ``link_bandwidth``
        (per direction), ``gpu`` and the DCN's.
    gpus : int, optional
        GPUs wanted when ``dims`` is not given (default 1,024).
    catalog : Catalog

    Closed forms
    ------------
    With ``G = prod(dims)`` GPUs: ``G len(dims)`` HBD links with ``wrap``
    (each GPU to its +1 neighbour in every dimension), ``sum_i G (1 - 1 /
    d_i)`` without; every GPU has ``2 len(dims)`` torus links; one HBD domain.

    Examples
    --------
    >>> from topologies import build
    >>> f = build("torus", 64, {"dims": "8x8"})
    >>> int((f.links.layer == 0).sum()), build("torus", 64, {"dims": "8x8", "wrap": False}).counts()["gpus"]
    (128, 64)
    """
    per_host = params["gpus_per_host"]
    dims = parse_dims(params["dims"]) if params["dims"] else auto_dims(gpus or 1024, per_host)
    if dims[0] % per_host:
        raise FabricError("params[dims]", f"first dimension {dims[0]} must be a multiple of gpus_per_host={per_host}")
    G = int(np.prod(dims))
    b = FabricBuilder("torus", {**params, "dims": "x".join(map(str, dims))}, catalog.category)
    if gpus and G != gpus:
        b.note(f"built a {'x'.join(map(str, dims))} torus: {G} GPUs for the {gpus} asked")
    gpu_item = params["gpu"]
    catalog.get(gpu_item)
    n_hosts = G // per_host
    ids = add_gpu_nodes(b, n_hosts, per_host, nodes_per_rack=params["hosts_per_rack"],
                        domain_of_node=np.zeros(n_hosts, dtype=int))
    bw = parse_bandwidth(params["link_bandwidth"], "params[link_bandwidth]")
    if not bw > 0:  # 0 Gbps built a torus every collective divided by (a NaN load, a numpy warning, exit 0)
        raise FabricError("params[link_bandwidth]", f"{params['link_bandwidth']!r} must be more than 0")
    lat = catalog.value("nvlink_latency", "latency")
    coords = np.stack(np.unravel_index(np.arange(G), dims, order="F"))
    host = np.arange(G) // per_host
    rack = host // params["hosts_per_rack"]
    n_fiber = n_dac = 0
    for d, size in enumerate(dims):
        nxt = coords.copy()
        nxt[d] = nxt[d] + 1
        keep = nxt[d] < size
        if params["wrap"] and size > 2:
            nxt[d] %= size
            keep = np.ones(G, dtype=bool)
        src = np.flatnonzero(keep)
        dst = np.ravel_multi_index(tuple(nxt[:, keep]), dims, order="F")
        for medium, mask in (("pcb", host[src] == host[dst]),
                             ("copper", (host[src] != host[dst]) & (rack[src] == rack[dst])),
                             ("fiber", rack[src] != rack[dst])):
            if mask.any():
                b.add_links(ids[src[mask]], ids[dst[mask]], capacity=bw, latency=lat, medium=medium, layer="hbd")
        n_dac += int(((host[src] != host[dst]) & (rack[src] == rack[dst])).sum())
        n_fiber += int((rack[src] != rack[dst]).sum())
    if n_fiber:
        b.add_bom(catalog.find_by_bandwidth("transceiver", bw), "hbd", 2 * n_fiber)
        b.add_bom("fiber", "hbd", n_fiber)
    b.add_bom("dac_copper", "hbd", n_dac)

    nic_bw = catalog.value(gpu_item, "nic_bandwidth")
    nics, _ = add_nic_per_gpu(b, catalog, ids, nic_bw, host, rack)
    attach_gpus_to_clos(b, catalog, ids, nics, params, nic_bandwidth=nic_bw, node=host, rail=np.arange(G) % per_host)
    b.add_bom(gpu_item, "compute", G)
    b.add_bom("server_4gpu" if per_host == 4 else "server_hgx8" if per_host == 8 else "server_1gpu", "compute",
              n_hosts if per_host in (4, 8) else G)
    return b.build(HBDSpec(kind=HBDKind.TORUS, gpus_per_node=per_host, domain_gpus=G, max_tp=G, dims=dims,
                           closed=params["wrap"]))
