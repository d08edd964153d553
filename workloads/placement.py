"""Map the ranks of a job onto a Fabric's GPUs, and list its communication groups.

Ranks follow the Megatron-Core order (``tp`` fastest, then ``cp``, ``dp``,
``pp``; see :mod:`workloads.parallelism`).  GPUs are taken in HBD order
(domain, then position along a k-hop line or node, then device id), cut into
*TP blocks* of ``tp`` consecutive GPUs that never straddle an HBD domain: a
domain of ``D`` GPUs holds ``floor(D / tp)`` blocks and any remainder stays
idle (NVL-72 with TP 16 runs 64 of each 72 GPUs).  Rank ``r`` goes to GPU
``r mod tp`` of block ``r // tp``, so TP groups are HBD-local and the next
dimensions (CP, then DP) fill the rest of a domain before leaving it, while
pipeline stages, the slowest dimension, are spread furthest apart, as
Megatron places them on a cluster.
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from fabric.errors import FabricError
from fabric.model import Configuration, Fabric, HBDKind
from fabric.rings import group_configuration
from solvers.allocation.base import run_blocks
from workloads.parallelism import Parallelism


def hbd_order(fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """GPU ids in HBD order and the domain of each (GPUs without a domain are their own)."""
    gpus = fabric.gpu_ids
    dom = fabric.group("domain")[gpus].copy()
    lone = dom < 0
    dom[lone] = -1 - np.arange(int(lone.sum()))  # each domain-less GPU is a domain of one
    pos = fabric.group("position")[gpus]
    node = fabric.group("node")[gpus]
    order = np.lexsort((gpus, node, pos, dom))
    return gpus[order], dom[order]


def tp_blocks(fabric: Fabric, tp: int, need: int | None = None) -> np.ndarray:
    """TP blocks of the Fabric: shape (n_blocks, tp), in HBD order.

    With ``need``, the first ``need`` blocks of a balanced choice: a job that
    does not fill the Fabric takes the same number of blocks from each of
    the fewest domains that hold it with an even split (so that DP groups
    have as many ranks in every domain and hierarchical collectives apply);
    if no split is even, domains are filled in order.
    """
    gpus, dom = hbd_order(fabric)
    starts = np.flatnonzero(np.r_[True, dom[1:] != dom[:-1]])
    sizes = np.diff(np.r_[starts, dom.size])
    if tp > sizes.max(initial=0) and np.all(sizes == sizes[0]) and tp % sizes[0] == 0:
        # TP beyond the HBD (e.g. TP 32 on 8-GPU DGX nodes): whole consecutive domains form one group and
        # its traffic crosses the scale-out network; validate() allows it only when asked (tp_beyond_hbd)
        dom = np.repeat(np.arange(dom.size // tp), tp)[: dom.size]
        dom = np.r_[dom, np.full(gpus.size - dom.size, -1)]
        starts = np.flatnonzero(np.r_[True, dom[1:] != dom[:-1]])
        sizes = np.diff(np.r_[starts, dom.size])
    per = sizes // tp
    if per.sum() == 0:
        return np.zeros((0, tp), dtype=np.int64)
    if need is not None and 0 < need < per.sum() and np.unique(per).size == 1:
        fewest = -(-need // int(per[0]))
        n_dom = next((d for d in range(fewest, per.size + 1) if need % d == 0), 0)
        if n_dom:
            per = np.where(np.arange(per.size) < n_dom, need // n_dom, 0)
    return run_blocks(gpus, dom, tp, per)  # the allocation policies' rule for cutting a domain into TP groups


def usable_gpus(fabric: Fabric, tp: int) -> int:
    """GPUs a job with this TP size can use (whole TP blocks inside HBD domains)."""
    return int(tp_blocks(fabric, tp).size)


def hbd_configuration(fabric: Fabric, tp_groups: np.ndarray) -> Configuration | None:
    """The optical configuration that lights each TP group's ring on a k-hop line, or None.

    A k-hop Fabric is built with one ring over all nodes lit; a job lights
    one ring per TP group (:func:`fabric.rings.group_configuration`) and
    nothing between TP groups, so that only TP traffic can use the optics
    (DP and PP traffic go over the NICs).  Other HBD kinds keep their configuration.
    """
    if fabric.hbd.kind != HBDKind.KHOP_LINE:
        return None
    return group_configuration(fabric, tp_groups)


class RankPlacement:
    """The GPU of every rank, and the job's communication groups (each an (n_groups, size) array).

    Parameters
    ----------
    fabric : Fabric
    par : Parallelism

    Raises
    ------
    FabricError
        If the Fabric's HBD domains hold fewer TP blocks than the job needs.
    """

    def __init__(self, fabric: Fabric, par: Parallelism):
        self.fabric = fabric
        self.par = par
        need = par.world // par.tp
        blocks = tp_blocks(fabric, par.tp, need)
        if need > blocks.shape[0]:
            raise FabricError("gpus", f"the job needs {need} TP groups of {par.tp} GPUs ({par.world} GPUs) but the "
                                        f"fabric's HBD domains hold only {blocks.shape[0]} "
                                        f"({usable_gpus(fabric, par.tp)} of {fabric.n_gpus} GPUs usable at tp={par.tp})")
        self.gpus = blocks[:need].reshape(-1)
        p = par
        cfg = hbd_configuration(fabric, self.gpus.reshape(-1, p.tp))
        if cfg is not None:
            self.fabric = fabric.with_configuration(cfg)
        # grid[pp, dp, cp, tp] = GPU device id
        self.grid = self.gpus.reshape(p.pp, p.dp, p.cp, p.tp)

    @cached_property
    def tp_groups(self) -> np.ndarray:
        return self.grid.reshape(-1, self.par.tp)

    @cached_property
    def cp_groups(self) -> np.ndarray:
        return self.grid.transpose(0, 1, 3, 2).reshape(-1, self.par.cp)

    @cached_property
    def dp_groups(self) -> np.ndarray:
        """Groups that reduce dense gradients: data-parallel x context-parallel ranks."""
        p = self.par
        return self.grid.transpose(0, 3, 1, 2).reshape(-1, p.dp * p.cp)

    @cached_property
    def ep_groups(self) -> np.ndarray:
        """Expert-parallel groups: ``ep`` consecutive ranks of a stage (parallel folding)."""
        p = self.par
        return self.grid.reshape(p.pp, -1).reshape(-1, p.ep)

    @cached_property
    def edp_groups(self) -> np.ndarray:
        """Groups that reduce expert gradients: the same slot of every EP group of a stage."""
        p = self.par
        x = p.tp * p.cp * p.dp
        return self.grid.reshape(p.pp, x // p.ep, p.ep).transpose(0, 2, 1).reshape(-1, x // p.ep)

    @cached_property
    def pp_pairs(self) -> np.ndarray:
        """(sender, receiver) of every stage boundary at once (and the wrap-around when interleaved)."""
        p = self.par
        if p.pp == 1:
            return np.zeros((0, 2), dtype=np.int64)
        stages = self.grid.reshape(p.pp, -1)
        src = [stages[i] for i in range(p.pp - 1)]
        dst = [stages[i + 1] for i in range(p.pp - 1)]
        if p.interleave > 1:
            src.append(stages[-1])
            dst.append(stages[0])
        return np.stack([np.concatenate(src), np.concatenate(dst)], axis=1)

    @cached_property
    def embedding_pairs(self) -> np.ndarray:
        """(first stage, last stage) GPU pairs that sum the gradients of tied embeddings."""
        p = self.par
        if p.pp == 1:
            return np.zeros((0, 2), dtype=np.int64)
        stages = self.grid.reshape(p.pp, -1)
        return np.stack([stages[0], stages[-1]], axis=1)

    def to_dict(self) -> dict:
        """Where the job sits: GPUs used, and how many distinct nodes/domains one group of each kind spans."""
        f = self.fabric
        node, dom = f.group("node"), f.group("domain")

        def span(groups: np.ndarray, what: np.ndarray) -> int:
            if groups.size == 0:
                return 0
            return int(max(np.unique(what[g]).size for g in groups[:1]))

        return {"gpus_used": int(self.gpus.size), "gpus_total": int(f.n_gpus),
                "tp_group_nodes": span(self.tp_groups, node), "tp_group_domains": span(self.tp_groups, dom),
                "dp_group_nodes": span(self.dp_groups, node), "ep_group_domains": span(self.ep_groups, dom)}
