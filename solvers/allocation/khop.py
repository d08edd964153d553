"""k-hop rings (InfiniteHBD): rings of consecutive healthy nodes that skip short runs of faulty ones.

Rule: nodes sit on a line (the ``domain`` grouping; ``position`` orders them;
``hbd.closed`` wraps it).  Every OCS transceiver of node ``i`` reaches nodes
``i+1 .. i+k``, so a TP ring of ``m = TP / g`` nodes (``g = gpus_per_node``;
TP groups take whole nodes, ``hbd.tp_multiple_of``) is ``m`` healthy nodes in
line order whose consecutive members are at most ``k`` positions apart: each
gap skips at most ``k - 1`` faulty nodes.  The rings are cut greedily from
each segment of the line (:mod:`solvers.allocation.segments`, where the
greedy's optimality is proved and checked against brute force): the number
of rings is the true maximum over all ring placements, interleaved ones
included.  ``k = 1`` is a plain ring: rings live in the runs of healthy nodes
between faults.

``TP < g``: a group stays inside one node, on its intra-node full mesh (no
OCS hop), so a healthy node holds ``floor(g / TP)`` groups, as a switch
domain of ``g`` GPUs would (a DGX takes TP 3 too); a size that does not
divide ``g`` idles ``g mod TP`` GPUs of every node, which the waste ratio
shows.  Only a multi-node ring takes whole nodes.

A hop that cannot be lit (a dead transceiver or fibre, see ``effects``) is a
*boundary*: rings are not continued across it (the contiguous policy; this is
exactly optimal for node faults, and an upper bound on the loss otherwise,
since interleaved rings could sometimes route around a single dead fibre).

GPU rank order inside a ring: node by node along the ring, GPUs of a node in
id order (how intra- and inter-node rings join is not published: assumed).
"""

from __future__ import annotations

import numpy as np

from fabric.errors import FabricError
from fabric.faults import NodeIndex
from fabric.model import Fabric
from solvers.allocation.base import FaultBatch, Policy, dense_ids
from solvers.allocation.segments import count_line_blocks, line_blocks


class KHopPolicy(Policy):
    kind = "khop_line"
    rule = "rings of TP/g healthy nodes in line order, each hop skipping at most k-1 faulty nodes"

    def __init__(self, fabric: Fabric, nodes: NodeIndex):
        super().__init__(fabric, nodes)
        self.k = int(self.hbd.k)
        self.g = int(self.hbd.gpus_per_node)
        if self.k < 1:
            raise FabricError("hbd", "khop_line fabric needs k >= 1")
        if np.any(nodes.node_size != self.g):
            raise FabricError("hbd", f"khop_line fabric: every node must have gpus_per_node={self.g} GPUs")
        first = nodes.node_gpus[nodes.node_indptr[:-1]]
        gid = nodes.gpu_ids[first]
        line = fabric.group("domain")[gid]
        pos = fabric.group("position")[gid]
        if np.any(pos < 0):
            raise FabricError("hbd", "khop_line fabric: every GPU needs a position along its line")
        self.line_ids, self.line_of_node = dense_ids(np.where(line < 0, 0, line))
        self.pos_of_node = pos.astype(np.int64)
        self.lines = []  # per line: (length, node at each position)
        for ln in range(self.line_ids.size):
            members = np.flatnonzero(self.line_of_node == ln)
            p = self.pos_of_node[members]
            L = members.size
            if not np.array_equal(np.sort(p), np.arange(L)):
                raise FabricError("hbd", f"khop_line fabric: positions of line {self.line_ids[ln]} must be 0..{L - 1}")
            node_at = np.empty(L, dtype=np.int64)
            node_at[p] = members
            self.lines.append((L, node_at))
        self.closed = bool(self.hbd.closed)
        self._monotone = bool(np.all(np.diff(self.pos_of_node + self.line_of_node * (nodes.n_nodes + 1)) > 0))

    def check_tp_shape(self, tp: int) -> int:
        """Below a node's ``g`` GPUs any size (the intra-node full mesh, module docstring); above, whole nodes.

        The physical rule, as a switch domain's; the MFU model is stricter (Megatron's rank layout wants TP to
        divide the node), and says so itself (:mod:`workloads.parallelism`).
        """
        if isinstance(tp, (int, np.integer)) and not isinstance(tp, bool) and 1 <= tp < self.g:
            return int(tp)
        return super().check_tp_shape(tp)

    def count(self, tp: int, batch: FaultBatch) -> np.ndarray:
        m = tp // self.g
        fn = batch.unit_nodes(self.nodes)
        if m == 0:  # groups inside healthy nodes
            return (self.nodes.n_nodes - fn.counts()) * (self.g // tp * tp)
        rows, nd = fn.row_of_entries(), fn.indices
        if not self._monotone:
            order = np.lexsort((self.pos_of_node[nd], self.line_of_node[nd], rows))
            rows, nd = rows[order], nd[order]
        if batch.boundaries is not None and batch.boundaries.nnz:
            b_rows, b_nodes = batch.boundaries.row_of_entries(), batch.boundaries.indices
        else:
            b_rows = b_nodes = np.zeros(0, dtype=np.int64)
        blocks = np.zeros(batch.n_rows, dtype=np.int64)
        single = len(self.lines) == 1
        for ln, (L, _) in enumerate(self.lines):
            sel = slice(None) if single else self.line_of_node[nd] == ln
            bsel = slice(None) if single else self.line_of_node[b_nodes] == ln
            blocks += count_line_blocks(rows[sel], self.pos_of_node[nd[sel]], batch.n_rows, L, self.k, m,
                                        self.closed, b_rows[bsel], self.pos_of_node[b_nodes[bsel]])
        return blocks * tp

    def allocate(self, tp: int, avail: np.ndarray, boundaries: np.ndarray):
        m = tp // self.g
        node_ok = np.bincount(self.nodes.node_of_gpu[~avail], minlength=self.nodes.n_nodes) == 0
        gpus_of_node = self.nodes.node_gpus.reshape(-1, self.g)  # node_gpus is node-major, g per node
        if m == 0:  # groups inside healthy nodes, in line order
            ok = np.concatenate([node_at[node_ok[node_at]] for _, node_at in self.lines])
            per = self.g // tp
            groups = gpus_of_node[ok][:, :per * tp].reshape(-1, tp)
            return groups, np.repeat(self.nodes.node_group[ok], per).reshape(-1, 1), "node"
        rings = []
        for L, node_at in self.lines:
            blk = line_blocks(node_ok[node_at], self.k, m, self.closed, boundaries[node_at])
            rings.append(node_at[blk])
        rings = np.concatenate(rings) if rings else np.zeros((0, m), dtype=np.int64)
        groups = gpus_of_node[rings].reshape(-1, tp)
        return groups, self.nodes.node_group[rings], "node"
