"""Switch domains (DGX nodes, NVL-36/72/576 racks): pack TP groups into each domain.

Rule: every GPU of a domain reaches every other one through the NVLink
switches at full bandwidth, so any ``TP`` available GPUs of one domain form a
group, and a domain with ``a`` available GPUs holds ``floor(a / TP)`` groups
(usable GPUs ``floor(a / TP) * TP``).  A node fault takes its whole node
(NVL compute tray of 4, DGX server of 8) out of its domain.  With no fault an
NVL-72 domain therefore strands ``72 mod TP`` GPUs (fragmentation).

Kind ``none`` (fat-tree, no HBD) is the same rule with one-GPU domains and
TP 1.
"""

from __future__ import annotations

import numpy as np

from fabric.errors import FabricError
from fabric.faults import NodeIndex
from fabric.model import Fabric, HBDKind
from solvers.allocation.base import FaultBatch, Policy, dense_ids, group_sum, run_blocks, sorted_runs


class SwitchDomainPolicy(Policy):
    kind = "switch_domain"
    rule = "any TP available GPUs of one switch domain form a group"

    def __init__(self, fabric: Fabric, nodes: NodeIndex):
        super().__init__(fabric, nodes)
        dom = fabric.group("domain")[nodes.gpu_ids]
        if self.hbd.kind == HBDKind.NONE or np.any(dom < 0):
            # no HBD domains given: its node is the domain (custom topologies).  With no HBD at all TP is 1
            # (max_tp), so a node forms the same groups as one domain per GPU (one per healthy GPU), and a
            # node of several GPUs (a topology file without graph.hbd) is not refused as spanning domains
            dom = nodes.node_of_gpu
        self.domain_ids, self.dom_of_gpu = dense_ids(dom)
        self.n_domains = int(self.domain_ids.size)
        self.domain_size = np.bincount(self.dom_of_gpu, minlength=self.n_domains)
        first = nodes.node_gpus[nodes.node_indptr[:-1]]
        self.dom_of_node = self.dom_of_gpu[first]
        if np.any(self.dom_of_gpu != self.dom_of_node[nodes.node_of_gpu]):
            raise FabricError("hbd", "a node's GPUs span two switch domains; every node must sit in one domain")
        self._dom_sorted = bool(np.all(np.diff(self.dom_of_node) >= 0))

    @property
    def max_tp(self) -> int:
        return 1 if self.hbd.kind == HBDKind.NONE else super().max_tp

    def count(self, tp: int, batch: FaultBatch) -> np.ndarray:
        D = np.int64(self.n_domains)
        base = self.domain_size // tp * tp
        fn = batch.down_nodes
        keys = fn.row_of_entries() * D + self.dom_of_node[fn.indices]
        g = self.nodes.uniform_size
        if (batch.down_gpus is None or batch.down_gpus.nnz == 0) and g and self._dom_sorted:
            # the common Monte Carlo case: keys come sorted, so runs give the down count per (row, domain)
            uk, starts = sorted_runs(keys)
            down = np.diff(np.append(starts, keys.size)) * g
        else:
            keys, weights = [keys], [self.nodes.node_size[fn.indices].astype(np.int64)]
            if batch.down_gpus is not None and batch.down_gpus.nnz:
                dg = batch.down_gpus
                r = dg.row_of_entries()
                # a GPU of a node that is down anyway is not counted twice
                fresh = ~fn.contains(r, self.nodes.node_of_gpu[dg.indices])
                keys.append(r[fresh] * D + self.dom_of_gpu[dg.indices[fresh]])
                weights.append(np.ones(int(fresh.sum()), dtype=np.int64))
            uk, down = group_sum(np.concatenate(keys), np.concatenate(weights))
        d = uk % D
        left = np.maximum(self.domain_size[d] - down, 0)
        loss = base[d] - left // tp * tp
        usable = np.full(batch.n_rows, int(base.sum()), dtype=np.int64)
        usable -= np.rint(np.bincount(uk // D, weights=loss, minlength=batch.n_rows)).astype(np.int64)
        return usable

    def allocate(self, tp: int, avail: np.ndarray, boundaries: np.ndarray):
        gi = np.flatnonzero(avail)
        order = np.lexsort((gi, self.dom_of_gpu[gi]))
        gi = gi[order]
        groups = run_blocks(gi, self.dom_of_gpu[gi], tp)
        units = self.domain_ids[self.dom_of_gpu[groups[:, 0]]].reshape(-1, 1) if groups.size else \
            np.zeros((0, 1), dtype=np.int64)
        return groups, units, "domain"
