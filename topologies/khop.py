"""InfiniteHBD k-hop ring: nodes on a line of OCS-transceiver paths (arXiv 2502.03885).

Model (what the paper publishes, FIGURES "k-hop ring"; everything else is a
parameter marked assumed):

* ``N`` nodes of ``gpus_per_node`` GPUs at positions 0..N-1 on a line
  (``closed=true``: a ring of nodes).
* Every GPU has ``trx_per_gpu`` OCS transceivers: half face "forward" (+),
  half "backward" (-); a forward/backward pair is a *lane*.  The forward
  transceiver of lane ``l`` of GPU ``g`` on node ``i`` has ``k`` switchable
  optical paths, one to the backward transceiver of lane ``l`` of GPU ``g`` on
  each node ``i+1 .. i+k``.  Each path is one duplex fibre and one *candidate*
  link; so the candidate links number
  ``gpus_per_node * lanes * sum_{d=1..k} (N - d)`` on a line and
  ``gpus_per_node * lanes * k * N`` on a closed ring.
* A TP ring over nodes ``n1 < n2 < ... < nm`` lights the path from ``n_j`` to
  ``n_{j+1}`` (gap at most ``k``, i.e. it skips up to ``k-1`` faulty nodes) for
  every GPU and lane; the ring closes by transceiver loopback at both ends,
  so traffic goes out on one direction of each duplex link and back on the
  other ("folded" ring: each link direction carries one ring hop).
* GPUs of a node are joined by an intra-node full mesh (PCB) whose per-GPU
  bandwidth equals the GPU's HBD bandwidth (assumed: how intra- and
  inter-node rings join is not published).
* DCN: one NIC per GPU into a Clos; ``nodes_per_tor`` whole nodes per ToR, in
  line order (``contiguous``) or round-robin (``interleaved``).
"""

from __future__ import annotations

import math

import numpy as np

from fabric.catalog import Catalog
from fabric.errors import FabricError
from fabric.model import Fabric, FabricBuilder, HBDKind, HBDSpec
from fabric.rings import candidate_index, ring_configuration  # noqa: F401  (the k-hop ring's lighting)
from topologies.clos import DCN_DRIVERS, check_ratios, dcn_params, default_radix, split_ports
from topologies.params import Param, at_least, even_at_least, positive
from topologies.servers import add_gpu_nodes, add_nic_per_gpu, attach_gpus_to_clos
from topologies.size import Size, clos_size, servers_size

PARAMS = [
    Param("k", int, 2, "reach of each OCS transceiver: paths to nodes i+1..i+k (k=1 is a plain ring)",
          check=at_least(1)),
    Param("gpus_per_node", int, 4, "GPUs per node (assumed: not published)", check=positive),
    Param("trx_per_gpu", int, 2, "OCS transceivers per GPU, half forward and half backward (assumed)",
          check=even_at_least(2)),
    Param("trx", str, "ocs_transceiver_800g", "catalog id of the OCS transceiver"),
    Param("closed", bool, False, "close the line of nodes into a ring of nodes"),
    Param("gpu", str, "gpu_b200", "catalog id of the GPU"),
    Param("nodes_per_rack", int, 8, "nodes per rack (assumed)", check=positive),
    Param("nodes_per_tor", int, None, "whole nodes per ToR (default: ToR downlinks / gpus_per_node)",
          check=positive),
    Param("tor_wiring", str, "contiguous", "line position -> ToR order", choices=("contiguous", "interleaved")),
    # the DCN radix is `dcn_k` here: `k` is the optical reach
    *[Param("dcn_k", p.type, p.default, p.help, p.choices, p.check) if p.name == "k" else p for p in dcn_params()],
]


def candidate_count(n_nodes: int, k: int, gpus_per_node: int, lanes: int, closed: bool) -> int:
    """Closed form for the number of optical candidate links (see module docstring).

    On a line ``sum_{d=1..m} (N - d) = m N - m (m + 1) / 2`` with ``m = min(k, N - 1)``
    (reaches beyond the line's end have no path), in O(1) for any ``k``.
    """
    if closed:
        return gpus_per_node * lanes * min(k, n_nodes - 1) * n_nodes if n_nodes > 1 else 0
    m = max(min(k, n_nodes - 1), 0)
    return gpus_per_node * lanes * (m * n_nodes - m * (m + 1) // 2)


def check_reach(k: int, n_nodes: int, closed: bool) -> None:
    """Refuse a reach ``k`` past the last node: a transceiver has a path to each of the next ``k`` nodes.

    Parameters
    ----------
    k : int
        Optical reach in nodes.
    n_nodes : int
        Nodes on the line (or ring).
    closed : bool
        A ring of nodes.
    """
    if closed and n_nodes < 2:
        raise FabricError("params[closed]", f"a closed ring needs at least 2 nodes ({n_nodes} built); use closed=false")
    top = max(n_nodes - 1, 1)  # a single node on a line has no optical path; k=1 (a plain ring) is still accepted
    if k > top and n_nodes < 2:  # "nodes-1 = 1" would be false arithmetic for one node
        raise FabricError("params[k]", f"k={k} reaches past the only node; allowed: 1 (a single node has no "
                                       "optical path)")
    if k > top:
        raise FabricError("params[k]", f"k={k} must be at most nodes-1 = {top} ({n_nodes} node(s) on a "
                                       f"{'ring' if closed else 'line'}); allowed: 1..{top}")


def tor_fill(params: dict, dcn: dict, radix: int) -> tuple[int, int]:
    """Nodes whose NICs share ToRs, and endpoints per ToR, as :func:`build` wires them.

    Without rail optimisation a ToR takes ``nodes_per_tor`` whole nodes (default: as many as its
    downlinks hold).  With it, a group of ``nodes_per_tor`` nodes (default: one per downlink) shares
    ``gpus_per_node`` rail ToRs, each taking one NIC of every node of the group, so the default fills every
    ToR as the other families do (the whole-node default left three quarters of each rail ToR empty).

    Returns
    -------
    nodes, endpoints : int
    """
    g = params["gpus_per_node"]
    down = split_ports(radix, dcn["oversubscription"])[0]
    if dcn["rail_optimized"] and g > 1:
        nodes = params["nodes_per_tor"] or down
        return nodes, nodes
    if not params["nodes_per_tor"] and down < g:
        # the default fills a ToR with whole nodes; one that cannot hold one node is the radix's fault
        raise FabricError("params[dcn_k]", f"radix {radix} leaves {down} ToR downlinks, fewer than one node's {g} NICs "
                                           f"(gpus_per_node={g}); use a larger -p dcn_k")
    nodes = params["nodes_per_tor"] or down // g
    return nodes, nodes * g


def size(params: dict, gpus: int | None, catalog: Catalog) -> Size:
    """Closed-form size (see :func:`build`), checked before anything is allocated."""
    k, g = params["k"], params["gpus_per_node"]
    n = math.ceil((gpus or 64 * g) / g)
    check_reach(k, n, params["closed"])
    lanes = params["trx_per_gpu"] // 2
    hbd_links = n * g * (g - 1) // 2 + candidate_count(n, k, g, lanes, params["closed"])
    dcn = _dcn_view(params)
    radix = dcn["k"] or default_radix(catalog, dcn["switch"], catalog.value(params["gpu"], "nic_bandwidth"))
    check_ratios(radix, dcn, "dcn_k")  # before split_ports: a ratio of 1e308 overflows its port arithmetic
    _, ept = tor_fill(params, dcn, radix)
    devices, links = clos_size(n * g, radix, dcn, endpoints_per_tor=ept, radix_param="dcn_k")
    return servers_size(n * g, devices, hbd_links + links,
                        ("k", "gpus", "gpus_per_node", "trx_per_gpu", "nodes_per_tor", "dcn_k", *DCN_DRIVERS[1:]))


def build(params: dict, gpus: int | None, catalog: Catalog) -> Fabric:
    """Build a k-hop ring (InfiniteHBD) of ``ceil(gpus / gpus_per_node)`` nodes with a Clos DCN.

    Parameters
    ----------
    params : dict
        :data:`PARAMS` resolved: ``k`` (optical reach in nodes), ``gpus_per_node``,
        ``trx_per_gpu`` (OCS transceivers per GPU, ``2 lanes``), ``closed``,
        ``trx`` and ``gpu`` (catalog ids), ``nodes_per_rack``, ``nodes_per_tor``,
        ``tor_wiring`` and the DCN's (radix ``dcn_k``).
    gpus : int, optional
        GPUs wanted (default 1,024); rounded up to whole nodes.
    catalog : Catalog

    Closed forms
    ------------
    With ``N`` nodes of ``g`` GPUs and ``l = trx_per_gpu / 2`` lanes:
    ``trx_per_gpu g N`` OCS transceivers and :func:`candidate_count` optical
    candidate links, ``g l sum_{d=1..k} max(N - d, 0)`` for a line and
    ``g l min(k, N - 1) N`` for a closed ring; the default configuration
    lights one ring over all nodes.

    Examples
    --------
    >>> from topologies import build
    >>> f = build("khop-ring", 32, {"k": 2})
    >>> c = f.counts()
    >>> c["nodes"], c["ocs_transceivers"], c["optical_candidate_links"], candidate_count(8, 2, 4, 1, False)
    (8, 64, 52, 52)
    """
    k, g = params["k"], params["gpus_per_node"]
    lanes = params["trx_per_gpu"] // 2
    gpu_item, trx_item = params["gpu"], params["trx"]
    catalog.get(gpu_item)
    if catalog.category(trx_item) != "ocs_transceiver":
        raise FabricError("params[trx]", f"{trx_item!r} is not an ocs_transceiver in the catalog")
    gpus = gpus or 64 * g
    N = math.ceil(gpus / g)
    check_reach(k, N, params["closed"])
    b = FabricBuilder("khop-ring", params, catalog.category)
    if N * g != gpus:
        b.note(f"rounded {gpus} GPUs up to {N} whole {g}-GPU nodes")
    ids = add_gpu_nodes(b, N, g, nodes_per_rack=params["nodes_per_rack"], domain_of_node=np.zeros(N, dtype=int),
                        position_of_node=np.arange(N))
    G = ids.size
    hbd_bw = catalog.value(gpu_item, "hbd_bandwidth")
    lat_pcb = catalog.value("nvlink_latency", "latency")
    if g > 1:
        a, c = np.triu_indices(g, 1)
        src = (np.arange(N)[:, None] * g + a[None, :]).ravel()
        dst = (np.arange(N)[:, None] * g + c[None, :]).ravel()
        b.add_links(ids[src], ids[dst], capacity=hbd_bw / (g - 1), latency=lat_pcb, medium="pcb", layer="hbd")

    trx_bw = catalog.value(trx_item, "bandwidth")
    lat_opt = catalog.value("optical_hbd_latency", "latency")
    n_cand = 0
    for lane in range(lanes):
        for d in range(1, min(k, N - 1) + 1):  # a reach past the last node has no path
            i = np.arange(N) if params["closed"] else np.arange(max(N - d, 0))
            if i.size == 0:
                continue
            j = (i + d) % N
            src = (i[:, None] * g + np.arange(g)[None, :]).ravel()
            dst = (j[:, None] * g + np.arange(g)[None, :]).ravel()
            b.add_links(ids[src], ids[dst], capacity=trx_bw, latency=lat_opt, medium="fiber", layer="hbd",
                        state="candidate")
            n_cand += src.size
    b.add_bom(trx_item, "hbd", G * params["trx_per_gpu"])
    b.add_bom("fiber", "hbd", n_cand)

    # DCN
    nic_bw = catalog.value(gpu_item, "nic_bandwidth")
    node = np.repeat(np.arange(N), g)
    nics, _ = add_nic_per_gpu(b, catalog, ids, nic_bw, node, node // params["nodes_per_rack"])
    dcn = _dcn_view(params)
    radix = dcn["k"] or default_radix(catalog, dcn["switch"], nic_bw)
    check_ratios(radix, dcn, "dcn_k")
    npt, _ = tor_fill(params, dcn, radix)
    T = math.ceil(N / npt)
    if params["tor_wiring"] == "interleaved":
        node_order = np.lexsort((np.arange(N) // T, np.arange(N) % T))
    else:
        node_order = np.arange(N)
    order = (node_order[:, None] * g + np.arange(g)[None, :]).ravel()
    attach_gpus_to_clos(b, catalog, ids, nics, dcn, nic_bandwidth=nic_bw, node=node, rail=np.arange(G) % g,
                        order=order, nodes_per_tor=npt, radix_param="dcn_k")
    b.params["nodes_per_tor"] = npt
    b.add_bom(gpu_item, "compute", G)
    b.add_bom("server_4gpu" if g == 4 else "server_hgx8" if g == 8 else "server_1gpu", "compute",
              N if g in (4, 8) else G)
    fab = b.build(HBDSpec(kind=HBDKind.KHOP_LINE, gpus_per_node=g, domain_gpus=G, tp_multiple_of=g, max_tp=G, k=k,
                          closed=params["closed"]))
    return fab.with_configuration(ring_configuration(fab, [list(range(N))]))


def _dcn_view(params: dict) -> dict:
    """The DCN parameters: the k-hop ``k`` is the optical reach, the DCN radix is ``dcn_k``."""
    return {**params, "k": params.get("dcn_k")}
