"""What a failed component does to TP groups, per HBD kind: component fault sets -> :class:`FaultBatch`.

========== ============================================================================
component  effect
========== ============================================================================
gpu        fails; drains its node (the node's other GPUs are healthy but unavailable)
node       fails with all its GPUs
rack       fails with all its nodes (TPUv4: a cube is a rack)
tor        GPUs whose NIC is under it lose scale-out: healthy, but unavailable for TP
           groups (a TP group's members must each reach their data-parallel peers)
switch     a tray of HBD switch chips: every GPU keeps its other links and stays
           usable at lower HBD bandwidth (NVL-72: 2 of 18 links per GPU, 8/9 of the
           bandwidth); no GPU becomes unavailable (losing *every* tray of a domain
           at once, ratio^9 or less, is ignored)
ocs        TPUv4: each OCS carries 1 of the 16 links per cube face in one dimension;
           its loss opens those rings (lower bandwidth), cubes stay usable.  An OCS
           in the DCN (rfabric) lowers scale-out capacity only
link       switch domains: one GPU loses one of its links (bandwidth only);
           TPUv4: an ICI link or face fibre breaks its cube's torus: the cube is
           unusable; k-hop: a dead optical path ``i -> i+d`` is a boundary when the
           ring would use it (nodes ``i`` and ``i+d`` available, all between them
           unavailable) and only one lane exists (with more lanes: bandwidth only);
           an intra-node PCB link is bandwidth only (g >= 3 GPUs keep a ring inside
           the node) or drains a 2-GPU node; torus: a link along the first
           dimension takes its line, one along the second (third) dimension is a
           boundary between two lines (planes)
transceiver k-hop, one lane: a dead *forward* transceiver of node ``i`` means ``i``
           can only end a ring (the folded ring loops back at its ends), i.e. a
           boundary after ``i``; a dead *backward* one, a boundary before ``i``
           (only while ``i`` is available).  More lanes: bandwidth only (1/lanes of
           that GPU's ring bandwidth).  Other fabrics: its fibre's link effect
========== ============================================================================
"""

from __future__ import annotations

import numpy as np

from fabric.faults import FaultSamples, NodeIndex, transceivers_per_gpu, universe
from fabric.model import DeviceKind, Fabric, HBDKind, LinkState
from solvers.allocation.base import FaultBatch, Policy

BANDWIDTH_ONLY = frozenset({"switch", "ocs"})
"""Component types whose failure lowers bandwidth but never makes a GPU unavailable (table above)."""


def identity_rows(n: int) -> FaultSamples:
    """Row ``i`` fails position ``i`` only: one row per position (blast radius)."""
    return FaultSamples(int(n), np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64))


def _csr(owner: np.ndarray, n_owner: int) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, members) grouping indices ``i`` by ``owner[i]`` (owner -1 dropped)."""
    keep = np.flatnonzero(owner >= 0)
    order = keep[np.argsort(owner[keep], kind="stable")]
    counts = np.bincount(owner[keep], minlength=n_owner)
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), order.astype(np.int64)


def nodes_of_racks(fabric: Fabric, nodes: NodeIndex, rack_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, dense nodes) of each rack in ``rack_ids`` (a node's rack is its first GPU's)."""
    rack_of_node = fabric.group("rack")[nodes.gpu_ids[nodes.node_gpus[nodes.node_indptr[:-1]]]]
    j = np.searchsorted(rack_ids, rack_of_node)
    owner = np.where((j < rack_ids.size) & (rack_ids[np.minimum(j, max(rack_ids.size - 1, 0))] == rack_of_node), j, -1)
    return _csr(owner, rack_ids.size)


def gpus_of_tors(fabric: Fabric, nodes: NodeIndex, tor_devices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indptr, GPU indices) whose NIC sits under each ToR device (matched on the ``tor`` grouping)."""
    tor_index = fabric.group("tor")[tor_devices]
    gpu_tor = fabric.group("tor")[nodes.gpu_ids]
    order = np.argsort(tor_index)
    j = np.searchsorted(tor_index[order], gpu_tor)
    jj = np.minimum(j, max(tor_index.size - 1, 0))
    owner = np.where((gpu_tor >= 0) & (j < tor_index.size) & (tor_index[order][jj] == gpu_tor), order[jj], -1)
    return _csr(owner, tor_devices.size)


class EffectMapper:
    """Turns component fault sets into a :class:`FaultBatch` for one policy."""

    def __init__(self, policy: Policy):
        self.policy = policy
        self.fabric = policy.fabric
        self.nodes = policy.nodes
        self.kind = policy.hbd.kind
        self._u: dict = {}

    def universe(self, comp: str):
        if comp not in self._u:
            self._u[comp] = universe(self.fabric, comp, self.nodes)
        return self._u[comp]

    @property
    def lanes(self) -> int:
        """OCS-transceiver lanes per GPU (k-hop lines)."""
        return transceivers_per_gpu(self.fabric) // 2

    def bandwidth_only(self, comp: str) -> bool:
        """True when no failure of ``comp`` changes the usable GPU count of this fabric."""
        if comp in BANDWIDTH_ONLY:
            return True
        if comp in ("link", "transceiver") and self.kind in (HBDKind.SWITCH_DOMAIN, HBDKind.NONE):
            return True
        if self.kind == HBDKind.KHOP_LINE:
            if comp == "transceiver":
                return self.lanes >= 2
            if comp == "link":
                return self.lanes >= 2 and self.policy.g >= 3
        return False

    # ------------------------------------------------------------------------- mapping
    def batch(self, samples: dict[str, FaultSamples]) -> FaultBatch:
        """The combined effect of the fault sets of every component type in ``samples``."""
        nodes = self.nodes
        n_rows = next(iter(samples.values())).n_rows if samples else 1
        failed_nodes = FaultSamples.empty(n_rows, nodes.n_nodes)
        if "node" in samples:
            failed_nodes = failed_nodes.union(samples["node"])
        if "rack" in samples:
            indptr, members = nodes_of_racks(self.fabric, nodes, self.universe("rack").ids)
            failed_nodes = failed_nodes.union(samples["rack"].expand(indptr, members, nodes.n_nodes))
        lost = np.bincount(failed_nodes.row_of_entries(), weights=nodes.node_size[failed_nodes.indices],
                           minlength=n_rows)
        down = failed_nodes
        if "gpu" in samples:
            fg = samples["gpu"]
            r = fg.row_of_entries()
            fresh = ~failed_nodes.contains(r, nodes.node_of_gpu[fg.indices])
            lost = lost + np.bincount(r[fresh], minlength=n_rows)
            down = down.union(fg.map_to(nodes.node_of_gpu, nodes.n_nodes))
        healthy = nodes.n_gpus - np.rint(lost).astype(np.int64)

        down_gpus = None
        if "tor" in samples:
            indptr, members = gpus_of_tors(self.fabric, nodes, self.universe("tor").ids)
            down_gpus = samples["tor"].expand(indptr, members, nodes.n_gpus)

        # failed HBD links: from "link", and from "transceiver" outside k-hop (a transceiver is its fibre)
        lk_rows, lk_ids = [], []
        for comp in ("link", "transceiver"):
            if comp in samples and not self.bandwidth_only(comp) and not (comp == "transceiver" and
                                                                          self.kind == HBDKind.KHOP_LINE):
                s = samples[comp]
                lk_rows.append(s.row_of_entries())
                lk_ids.append(self.universe(comp).ids[s.indices])
        b_rows, b_pos = [], []
        if lk_rows:
            rows, lk = np.concatenate(lk_rows), np.concatenate(lk_ids)
            (dr, dn), (br, bp) = self._link_effects(rows, lk)
            if dr.size:
                down = down.union(FaultSamples.from_pairs(dr, dn, n_rows, nodes.n_nodes))
            b_rows.append(br)
            b_pos.append(bp)
            if self.kind == HBDKind.KHOP_LINE:
                # dead optical paths matter only where the ring would use them: decided on the final down set
                hr, hi, hj = self._khop_dead_hops(rows, lk)
                br, bp = self._khop_hop_boundaries(hr, hi, hj, down)
                b_rows.append(br)
                b_pos.append(bp)
        if "transceiver" in samples and self.kind == HBDKind.KHOP_LINE and not self.bandwidth_only("transceiver"):
            br, bp = self._khop_transceivers(samples["transceiver"], down)
            b_rows.append(br)
            b_pos.append(bp)
        bnd = None
        if b_rows and sum(x.size for x in b_rows):
            n_b = self.policy.n_boundaries if self.kind == HBDKind.TORUS else nodes.n_nodes
            bnd = FaultSamples.from_pairs(np.concatenate(b_rows), np.concatenate(b_pos), n_rows, n_b)
        return FaultBatch(down, healthy, down_gpus, bnd)

    # ------------------------------------------------------------------------- links
    def _gpu_ends(self, lk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """GPU index (or -1) at the source and at the destination end of links."""
        L = self.fabric.links
        kind = self.fabric.devices.kind
        out = []
        for end in (L.src[lk], L.dst[lk]):
            is_gpu = kind[end] == DeviceKind.GPU
            gi = np.full(lk.size, -1, dtype=np.int64)
            if is_gpu.any():
                gi[is_gpu] = self.nodes.gpu_index(end[is_gpu])
            out.append(gi)
        return out[0], out[1]

    def _link_effects(self, rows: np.ndarray, lk: np.ndarray):
        """((rows, down nodes), (rows, boundaries)) of failed HBD links, k-hop optical paths excepted."""
        empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
        a, b = self._gpu_ends(lk)
        node_of = self.nodes.node_of_gpu
        if self.kind == HBDKind.OCS_CUBE:
            g = np.where(a >= 0, a, b)
            keep = g >= 0
            return (rows[keep], node_of[g[keep]]), empty
        if self.kind == HBDKind.KHOP_LINE:
            both = (a >= 0) & (b >= 0)
            intra = both & (node_of[np.maximum(a, 0)] == node_of[np.maximum(b, 0)])
            if self.policy.g == 2 and intra.any():
                # a 2-GPU node has one internal link: without it the node cannot close its part of a ring
                return (rows[intra], node_of[a[intra]]), empty
            return empty, empty
        if self.kind == HBDKind.TORUS:
            return self._torus_links(rows, a, b)
        return empty, empty

    def _khop_dead_hops(self, rows: np.ndarray, lk: np.ndarray):
        """(rows, from node, to node) of failed optical paths (candidate links join node i -> i+d)."""
        a, b = self._gpu_ends(lk)
        node_of = self.nodes.node_of_gpu
        cand = (a >= 0) & (b >= 0) & (self.fabric.links.state[lk] == LinkState.CANDIDATE)
        if self.lanes != 1:
            cand[:] = False
        return rows[cand], node_of[a[cand]], node_of[b[cand]]

    def _khop_hop_boundaries(self, rows, i_node, j_node, down: FaultSamples):
        """Boundary after ``i`` for dead hops ``i -> j`` that a ring would use: ``i``, ``j`` up, all between down."""
        pol = self.policy
        if rows.size == 0:
            return rows, rows
        ok = ~down.contains(rows, i_node) & ~down.contains(rows, j_node)
        line = pol.line_of_node[i_node]
        length = np.array([ln[0] for ln in pol.lines], dtype=np.int64)[line]
        pi = pol.pos_of_node[i_node]
        d = (pol.pos_of_node[j_node] - pi) % length
        for step in range(1, pol.k):
            between = step < d
            if not between.any():
                continue
            mids = self._node_at(line, (pi + step) % length)
            ok &= ~between | down.contains(rows, mids)
        return rows[ok], self._node_at(line[ok], (pi[ok] + 1) % length[ok])

    def _node_at(self, line: np.ndarray, pos: np.ndarray) -> np.ndarray:
        out = np.empty(line.size, dtype=np.int64)
        for ln in np.unique(line):
            sel = line == ln
            out[sel] = self.policy.lines[ln][1][pos[sel]]
        return out

    def _khop_transceivers(self, s: FaultSamples, down: FaultSamples):
        """Boundaries of dead transceivers (one lane): after the node (forward) or before it (backward)."""
        pol = self.policy
        u = self.universe("transceiver")
        rows = s.row_of_entries()
        node = self.nodes.node_of_gpu[u.ids[s.indices]]
        forward = (u.slot[s.indices] % 2) == 0
        up = ~down.contains(rows, node)
        rows, node, forward = rows[up], node[up], forward[up]
        line = pol.line_of_node[node]
        length = np.array([ln[0] for ln in pol.lines], dtype=np.int64)[line]
        pos = pol.pos_of_node[node]
        if not pol.closed:
            # the ends of an open line have no hop beyond them to lose
            keep = ~((forward & (pos == length - 1)) | (~forward & (pos == 0)))
            rows, node, forward, line, length, pos = (x[keep] for x in (rows, node, forward, line, length, pos))
        target = np.where(forward, self._node_at(line, (pos + 1) % length), node)
        return rows, target

    def _torus_links(self, rows, a, b):
        """First-dimension links take their line; others are boundaries between lines or planes."""
        pol = self.policy
        X, Y, Z = pol.dims
        keep = (a >= 0) & (b >= 0)
        rows, a, b = rows[keep], a[keep], b[keep]
        ca = np.stack([a % X, (a // X) % Y, a // (X * Y)])
        cb = np.stack([b % X, (b // X) % Y, b // (X * Y)])
        dim = np.argmax(ca != cb, axis=0)
        d0 = dim == 0
        down = (rows[d0], self.nodes.node_of_gpu[a[d0]])
        rb, pb = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)]
        for d, size in ((1, Y), (2, Z)):
            sel = dim == d
            if not sel.any():
                continue
            # the boundary sits before the end that is one step further along the dimension
            a_first = (ca[d][sel] + 1) % size == cb[d][sel]
            after = np.where(a_first, b[sel], a[sel])
            line = pol.line_of_gpu[after]
            rb.append(rows[sel])
            pb.append(line if d == 1 else pol.n_lines + line // Y)
        return down, (np.concatenate(rb), np.concatenate(pb))
