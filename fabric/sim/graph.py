"""The routing graph the simulator works on: directed arcs over a Fabric's active links.

Every full-duplex active link ``j`` (:meth:`fabric.model.Fabric.active_links`,
OCS circuits already resolved into direct links) becomes two *base arcs* with
independent capacity: ``2 j`` (``src -> dst``) and ``2 j + 1`` (``dst -> src``).
Links with zero capacity and self-loops carry nothing and are left out.

Two exact reductions make routing and the rate solver cheap on large fabrics:

**Folding interchangeable switches** (``fold=True``, for ideal ECMP only).
Two devices are *twins* when they have the same multiset of (neighbour,
capacity, latency) over their links: the spines of a leaf-spine, the cores of
one fat-tree plane, the NVSwitch chips of a DGX node.  Under ideal ECMP (each
switch splits a flow evenly over its equal-cost next-hop ports) twins that are
neither the source nor the destination of a flow receive exactly the same
traffic, so their arcs always carry equal loads.  The twins are folded into one
graph node, and base arcs between the same pair of graph nodes with equal
capacity and latency into one *bundle* arc whose capacity is the sum of its
members and whose ECMP weight is the number of member ports per source device.
That is the "path multiplicity" form of the symmetry: 64 equal spine paths are
one path of weight 64, and the per-link loads are recovered by dividing a
bundle's load evenly over its members.  Devices that may be flow endpoints
(GPUs, NICs and any other endpoint asked for) are never folded.

**Pendant trees.**  Devices that hang off the rest of the graph by a single
arc pair (a host and its NIC under a ToR) are peeled off repeatedly.  Every
route from such a device goes up its unique tree path to the *root* where the
tree joins the *core*, so routes are tree path + core route + tree path and
shortest-path searches only run on the (much smaller) core.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.model import ActiveLinks, DeviceKind, Fabric, Layer

def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64 finaliser on a uint64 array (wrapping arithmetic, deterministic).

    Used for the twin signatures and for per-flow ECMP hashing.
    """
    z = np.asarray(x, dtype=np.uint64).copy()
    with np.errstate(over="ignore"):
        z ^= z >> np.uint64(30)
        z *= np.uint64(0xBF58476D1CE4E5B9)
        z ^= z >> np.uint64(27)
        z *= np.uint64(0x94D049BB133111EB)
        z ^= z >> np.uint64(31)
    return z


@dataclass(frozen=True)
class ArcGraph:
    """Directed arcs over graph nodes, with the pendant-tree decomposition.

    Attributes
    ----------
    n_nodes : int
        Graph nodes (devices, or folded classes of twin devices).
    node_of_device : ndarray of int
        Graph node of every device.
    device_of_node : ndarray of int
        One device of every graph node (its representative).
    class_size : ndarray of int
        Devices per graph node.
    src, dst : ndarray of int
        Arc end nodes.
    capacity : ndarray of float
        Bytes/s per direction of the arc (sum over its member base arcs).
    latency : ndarray of float
        Seconds, one way (equal for all members).
    weight : ndarray of float
        ECMP ports the arc stands for, per device of its source node: ideal
        ECMP splits a node's traffic over next-hop arcs in proportion to it.
    members : ndarray of int
        Base arcs in the bundle.
    member_ptr, member_arc : ndarray of int
        CSR: the base arc ids (``2 * active link + direction``) of each arc.
    out_ptr, out_arc : ndarray of int
        CSR: the arcs leaving each node.
    parent, up_arc, down_arc, root, depth : ndarray of int
        Pendant forest: parent node (-1 for core nodes), the arc to the
        parent, the arc from the parent, the core node the tree hangs from
        (itself for core nodes), and the depth below it.
    in_core : ndarray of bool
        Node is in the core (not in a pendant tree).
    core_out_ptr, core_out_arc : ndarray of int
        CSR: the arcs leaving each node that stay inside the core.
    rev_arc : ndarray of int
        The arc in the opposite direction (same links).
    n_base_arcs : int
        ``2 * len(active links)``.
    gpu_node : ndarray of bool
        Node is a GPU (an endpoint that forwards only from HBD link to HBD
        link, see :func:`~fabric.sim.routing.shortest_path_dags`).
    hbd_arc : ndarray of bool
        Arc is an HBD link (its first member's layer).
    """

    n_nodes: int
    node_of_device: np.ndarray
    device_of_node: np.ndarray
    class_size: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    capacity: np.ndarray
    latency: np.ndarray
    weight: np.ndarray
    members: np.ndarray
    member_ptr: np.ndarray
    member_arc: np.ndarray
    out_ptr: np.ndarray
    out_arc: np.ndarray
    parent: np.ndarray
    up_arc: np.ndarray
    down_arc: np.ndarray
    root: np.ndarray
    depth: np.ndarray
    in_core: np.ndarray
    core_out_ptr: np.ndarray
    core_out_arc: np.ndarray
    rev_arc: np.ndarray
    n_base_arcs: int
    gpu_node: np.ndarray | None = None
    hbd_arc: np.ndarray | None = None

    @property
    def n_arcs(self) -> int:
        return int(self.src.shape[0])


def base_arcs(links: ActiveLinks) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Base arcs of active links: (ids, src, dst, capacity, latency) of the usable ones."""
    n = len(links)
    src = np.empty(2 * n, dtype=np.int64)
    dst = np.empty(2 * n, dtype=np.int64)
    src[0::2], src[1::2] = links.src, links.dst
    dst[0::2], dst[1::2] = links.dst, links.src
    cap = np.repeat(np.asarray(links.capacity, dtype=np.float64), 2)
    lat = np.repeat(np.asarray(links.latency, dtype=np.float64), 2)
    usable = (cap > 0) & (src != dst)
    ids = np.flatnonzero(usable)
    return ids, src[ids], dst[ids], cap[ids], lat[ids]


def endpoint_devices(fabric: Fabric) -> np.ndarray:
    """Devices that are never folded: GPUs and NICs (the endpoints of collectives)."""
    kind = fabric.devices.kind
    return np.flatnonzero((kind == DeviceKind.GPU) | (kind == DeviceKind.NIC))


def twin_classes(n_devices: int, src: np.ndarray, dst: np.ndarray, cap: np.ndarray, lat: np.ndarray,
                 protected: np.ndarray, hbd: np.ndarray | None = None) -> np.ndarray:
    """Class id per device: twins (same neighbour/capacity/latency/HBD-or-not multiset) share one.

    Candidates are grouped by an order-independent 64-bit hash of the
    multiset, then checked exactly, so a hash collision cannot merge
    devices that differ.
    """
    cls = np.arange(n_devices, dtype=np.int64)
    if src.size == 0:
        return cls
    hbd = np.zeros(src.size, dtype=bool) if hbd is None else np.asarray(hbd, dtype=bool)
    h_arc = mix64(_arc_hash(dst, cap, lat) ^ hbd.astype(np.uint64))
    node_hash = np.zeros(n_devices, dtype=np.uint64)
    with np.errstate(over="ignore"):
        np.add.at(node_hash, src, h_arc)
    degree = np.bincount(src, minlength=n_devices)
    eligible = degree > 0
    eligible[protected] = False
    cand = np.flatnonzero(eligible)
    if cand.size < 2:
        return cls
    order = np.lexsort((degree[cand], node_hash[cand]))
    cand = cand[order]
    key_h, key_d = node_hash[cand], degree[cand]
    new_group = np.ones(cand.size, dtype=bool)
    new_group[1:] = (key_h[1:] != key_h[:-1]) | (key_d[1:] != key_d[:-1])
    starts = np.flatnonzero(new_group)
    ends = np.append(starts[1:], cand.size)
    multi = np.flatnonzero(ends - starts > 1)
    if multi.size == 0:
        return cls
    # exact check only for hash groups with more than one member
    arc_order = np.argsort(src, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(degree)])
    for g in multi:
        groups: dict[tuple, int] = {}
        for v in cand[starts[g]:ends[g]]:
            arcs = arc_order[ptr[v]:ptr[v + 1]]
            sig = tuple(sorted(zip(dst[arcs].tolist(), cap[arcs].tolist(), lat[arcs].tolist(), hbd[arcs].tolist())))
            rep = groups.setdefault(sig, int(v))
            cls[v] = rep
    return cls


def _arc_hash(dst: np.ndarray, cap: np.ndarray, lat: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        h = mix64(dst.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15))
        h = mix64(h ^ cap.astype(np.float64).view(np.uint64))
        h = mix64(h ^ lat.astype(np.float64).view(np.uint64))
    return h


def build_arc_graph(fabric: Fabric, links: ActiveLinks, *, fold: bool, bundle: bool,
                    protected: np.ndarray | None = None) -> ArcGraph:
    """Build the routing graph of ``links`` (see the module docstring).

    Parameters
    ----------
    fabric : Fabric
    links : ActiveLinks
        The active links (one OCS configuration).
    fold : bool
        Fold twin devices into one node (exact for ideal ECMP only).
    bundle : bool
        Merge parallel base arcs with equal capacity and latency into one arc
        (exact for ideal ECMP only; per-flow hashing picks one of them).
    protected : ndarray of int, optional
        Devices never folded (default: GPUs and NICs).
    """
    n_dev = fabric.n_devices
    ids, s, d, cap, lat = base_arcs(links)
    # HBD arcs stay apart from the others (a GPU forwards only between HBD links, see fabric.sim.routing):
    # they never share a bundle, and devices are twins only if their links' layers match too
    hbd = np.asarray(links.layer)[ids // 2] == Layer.HBD
    if fold:
        prot = endpoint_devices(fabric) if protected is None else np.asarray(protected, dtype=np.int64)
        cls = twin_classes(n_dev, s, d, cap, lat, prot, hbd)
    else:
        cls = np.arange(n_dev, dtype=np.int64)
    reps, node_of_device = np.unique(cls, return_inverse=True)
    n_nodes = int(reps.size)
    class_size = np.bincount(node_of_device, minlength=n_nodes)
    cs, cd = node_of_device[s], node_of_device[d]

    if bundle or fold:
        # one arc per (source node, destination node, capacity, latency, HBD or not)
        order = np.lexsort((hbd, lat, cap, cd, cs))
        cs_o, cd_o, cap_o, lat_o = cs[order], cd[order], cap[order], lat[order]
        new = np.ones(order.size, dtype=bool)
        new[1:] = ((cs_o[1:] != cs_o[:-1]) | (cd_o[1:] != cd_o[:-1]) | (cap_o[1:] != cap_o[:-1])
                   | (lat_o[1:] != lat_o[:-1]) | (hbd[order][1:] != hbd[order][:-1]))
        first = np.flatnonzero(new)
        members = np.diff(np.append(first, order.size))
        a_src, a_dst = cs_o[first], cd_o[first]
        a_cap1, a_lat = cap_o[first], lat_o[first]
        member_ptr = np.concatenate([[0], np.cumsum(members)]).astype(np.int64)
        member_arc = ids[order]
    else:
        members = np.ones(ids.size, dtype=np.int64)
        a_src, a_dst, a_cap1, a_lat = cs, cd, cap, lat
        member_ptr = np.arange(ids.size + 1, dtype=np.int64)
        member_arc = ids
    members = members.astype(np.int64)
    capacity = a_cap1 * members
    # every device of the source class has the same number of member ports (twins)
    weight = members / class_size[a_src]

    out_order = np.argsort(a_src, kind="stable")
    out_ptr = np.concatenate([[0], np.cumsum(np.bincount(a_src, minlength=n_nodes))]).astype(np.int64)
    out_arc = out_order.astype(np.int64)

    gpu_node = fabric.devices.kind[reps] == DeviceKind.GPU  # GPUs are never folded: a GPU node is one GPU
    hbd_arc = np.asarray(links.layer)[member_arc[member_ptr[:-1]] // 2] == Layer.HBD
    # a GPU with a non-HBD link is never the parent of a pendant tree: routes through a tree's root are not
    # searched, so they could pass it between that link and another
    mixed = gpu_node & (np.bincount(a_src[~hbd_arc], minlength=n_nodes) > 0)
    parent, up_arc, down_arc, root, depth = _pendant_forest(n_nodes, a_src, a_dst, mixed)
    in_core = parent < 0
    inner = np.flatnonzero(in_core[a_src] & in_core[a_dst])
    inner = inner[np.argsort(a_src[inner], kind="stable")]
    core_out_ptr = np.concatenate([[0], np.cumsum(np.bincount(a_src[inner], minlength=n_nodes))]).astype(np.int64)
    # the reverse of an arc is the arc holding the reverse of its first member base arc
    arc_of_base = np.full(2 * len(links), -1, dtype=np.int64)
    arc_of_base[member_arc] = np.repeat(np.arange(a_src.size), members)
    rev_arc = arc_of_base[member_arc[member_ptr[:-1]] ^ 1]
    return ArcGraph(n_nodes, node_of_device.astype(np.int64), reps.astype(np.int64), class_size,
                    a_src.astype(np.int64), a_dst.astype(np.int64), capacity, a_lat.astype(np.float64),
                    weight.astype(np.float64), members, member_ptr, member_arc.astype(np.int64), out_ptr, out_arc,
                    parent, up_arc, down_arc, root, depth, in_core, core_out_ptr, inner.astype(np.int64), rev_arc,
                    2 * len(links), gpu_node, hbd_arc)


def _pendant_forest(n: int, a_src: np.ndarray, a_dst: np.ndarray, no_parent: np.ndarray | None = None):
    """Peel nodes joined to the rest by exactly one arc each way, repeatedly.

    Returns parent, up_arc, down_arc, root, depth per node.  Of two leaves
    joined to each other (a two-node component) the lower id stays as root.
    Nodes in ``no_parent`` (bool per node) never become a parent: their
    leaves stay in the core.
    """
    parent = np.full(n, -1, dtype=np.int64)
    up_arc = np.full(n, -1, dtype=np.int64)
    down_arc = np.full(n, -1, dtype=np.int64)
    if a_src.size == 0:
        return parent, up_arc, down_arc, np.arange(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
    # distinct neighbour pairs (v, u) with their arc count and one arc id
    key = a_src * n + a_dst
    order = np.argsort(key, kind="stable")
    k_sorted = key[order]
    first = np.ones(k_sorted.size, dtype=bool)
    first[1:] = k_sorted[1:] != k_sorted[:-1]
    pair_key = k_sorted[first]
    pair_arc = order[first]
    pair_count = np.diff(np.append(np.flatnonzero(first), k_sorted.size))
    pv, pu = pair_key // n, pair_key % n
    # reverse pair lookup: the (u, v) pair of each (v, u)
    rev_pos = np.searchsorted(pair_key, pu * n + pv)
    rev_pos = np.minimum(rev_pos, pair_key.size - 1)
    has_rev = pair_key[rev_pos] == pu * n + pv
    single = (pair_count == 1) & has_rev & (pair_count[rev_pos] == 1)

    alive = np.ones(n, dtype=bool)
    rounds: list[np.ndarray] = []
    while True:
        live = alive[pv] & alive[pu]
        deg = np.bincount(pv[live], minlength=n)
        leaf = alive & (deg == 1)
        if not leaf.any():
            break
        lp = np.flatnonzero(live & leaf[pv])  # the one live pair of every leaf
        v, u = pv[lp], pu[lp]
        ok = single[lp]
        if no_parent is not None:
            ok &= ~no_parent[u]
        # mutual leaves: keep the lower id as the root of the little tree
        ok &= ~(leaf[u] & (u > v))
        v, u, lp = v[ok], u[ok], lp[ok]
        if v.size == 0:
            break
        parent[v] = u
        up_arc[v] = pair_arc[lp]
        down_arc[v] = pair_arc[rev_pos[lp]]
        alive[v] = False
        rounds.append(v)
    root = np.arange(n, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int64)
    for v in reversed(rounds):  # parents were peeled later, so they are final already
        root[v] = root[parent[v]]
        depth[v] = depth[parent[v]] + 1
    return parent, up_arc, down_arc, root, depth
