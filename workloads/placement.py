"""Map the ranks of a job onto a Fabric's GPUs, and list its communication groups.

Ranks follow the Megatron-Core order (``tp`` fastest, then ``cp``, ``dp``,
``pp``; see :mod:`workloads.parallelism`).  The job's TP groups are the ones
the HBD's allocation policy forms on the fault-free Fabric
(:func:`solvers.allocation.allocate`, the one rule for which GPUs an HBD can
join into one TP group: any ``tp`` GPUs of a switch domain, a ring of whole
nodes on a k-hop line, a sub-cube slice of whole cubes on TPUv4, whole torus
lines or planes), in HBD order; a domain's remainder stays idle (NVL-72 with
TP 16 runs 64 of each 72 GPUs).  Rank ``r`` goes to GPU ``r mod tp`` of
group ``r // tp``, so TP groups are HBD-local and the next dimensions (CP,
then DP) fill the rest of a domain before leaving it, while pipeline stages,
the slowest dimension, are spread furthest apart, as Megatron places them on
a cluster.

One extension goes beyond what the HBD can join, for the MFU study only:
:func:`tp_across_domains`, TP groups of whole HBD domains joined over the
scale-out NICs (InfiniteHBD's TP 32 on DGX); :func:`~workloads.parallelism.validate`
refuses such a TP unless the step model is told to allow it
(:func:`workloads.mfu.tp_beyond_hbd`, which warns).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from fabric.errors import FabricError
from fabric.model import Configuration, Fabric, HBDKind
from fabric.rings import group_configuration
from solvers.allocation import allocate, policy_for
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


def group_domains(fabric: Fabric, groups: np.ndarray) -> np.ndarray:
    """HBD domain of each TP group (of its first GPU; a GPU without a domain is its own, as in ``hbd_order``)."""
    dom = fabric.group("domain")[groups[:, 0]]
    return np.where(dom >= 0, dom, -1 - groups[:, 0])


def domain_runs(domains: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start index and length of each run of equal values in ``domains`` (groups come domain by domain)."""
    if domains.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    starts = np.flatnonzero(np.r_[True, domains[1:] != domains[:-1]])
    return starts, np.diff(np.r_[starts, domains.size])


def domains_hold_equal(fabric: Fabric, groups: np.ndarray) -> bool:
    """Whether every HBD domain that holds one of ``groups`` (listed domain by domain) holds as many."""
    _, per = domain_runs(group_domains(fabric, groups))
    return bool(per.size and np.unique(per).size == 1)


def balanced_choice(domains: np.ndarray, need: int, balanced: bool) -> np.ndarray:
    """Indices of the ``need`` groups the job takes, given the HBD domain of every available group (in HBD order).

    ``balanced``: take ``need / d`` groups from each of the first ``d`` domains
    that hold at least that many, for the smallest such ``d`` that divides
    ``need`` (so that DP groups have as many ranks in every domain and
    hierarchical collectives apply); if no ``d`` works, or not ``balanced``,
    the first ``need`` groups in order.

    Examples
    --------
    >>> balanced_choice(np.array([0, 0, 0, 1, 1, 1, 2, 2, 2]), 4, True).tolist()
    [0, 1, 3, 4]
    """
    n = int(domains.size)
    need = min(int(need), n)
    if not balanced or need == n:
        return np.arange(need)
    starts, per = domain_runs(domains)
    for d in range(-(-need // int(per.max())), per.size + 1):
        if need % d:
            continue
        q = need // d
        ok = np.flatnonzero(per >= q)[:d]
        if ok.size == d:
            return (starts[ok][:, None] + np.arange(q)[None, :]).ravel()
    return np.arange(need)


def tp_across_domains(fabric: Fabric, tp: int) -> np.ndarray:
    """TP groups larger than the HBD: ``tp / D`` consecutive whole HBD domains of ``D`` GPUs each.

    The MFU study's extension beyond what the HBD can join (InfiniteHBD's
    comparison runs TP 32 on 8-GPU DGX nodes): a group is the fault-free
    allocation's largest groups (whole domains, ``D = max_tp``) taken
    ``tp / D`` at a time in HBD order, and its collectives cross the
    scale-out NICs (the step model times them on this placement).

    Raises
    ------
    FabricError
        ``tp`` is not a multiple of the HBD's largest TP group.
    """
    limit = policy_for(fabric).max_tp
    if tp % limit:
        raise FabricError("tp", f"{tp} exceeds the {fabric.hbd.kind} HBD of {limit} GPUs and is not a multiple "
                                "of it (TP beyond the HBD takes whole domains)")
    whole = allocate(fabric, limit).groups
    j = tp // limit
    return whole[: whole.shape[0] // j * j].reshape(-1, tp)


def fault_free_tp_groups(fabric: Fabric, tp: int) -> np.ndarray:
    """The TP groups of the fault-free Fabric, shape (n_groups, tp), in HBD order.

    Up to the HBD's largest TP group, the allocation policy's groups with no
    fault (:func:`solvers.allocation.allocate`); beyond it,
    :func:`tp_across_domains`.

    Raises
    ------
    FabricError
        A size the HBD cannot join into one group (e.g. TP 6 on a k-hop line of
        4-GPU nodes, TP 96 on TPUv4: not whole cubes).
    """
    if tp > policy_for(fabric).max_tp:
        return tp_across_domains(fabric, tp)
    return allocate(fabric, tp).groups


def tp_blocks(fabric: Fabric, tp: int, need: int | None = None) -> np.ndarray:
    """The job's TP groups: :func:`fault_free_tp_groups`, shape (n_blocks, tp), in HBD order.

    With ``need``, the ``need`` groups of :func:`balanced_choice`: a job that
    does not fill the Fabric takes the same number of groups from each of
    the fewest domains that hold it with an even split when all domains hold
    as many groups; otherwise the first ``need`` groups in HBD order.
    """
    blocks = fault_free_tp_groups(fabric, tp)
    if need is None or not 0 < need < blocks.shape[0]:
        return blocks
    return blocks[balanced_choice(group_domains(fabric, blocks), need, domains_hold_equal(fabric, blocks))]


def usable_gpus(fabric: Fabric, tp: int) -> int:
    """GPUs a job with this TP size can use (in its fault-free TP groups; 0 if the HBD cannot form the size)."""
    try:
        return int(fault_free_tp_groups(fabric, tp).size)
    except FabricError as err:
        if err.field != "tp":
            raise
        return 0


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
