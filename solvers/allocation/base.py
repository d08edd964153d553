"""What every allocation policy shares: the fault batch it reads, the allocation it returns, TP checks.

A policy reads only plain data of the Fabric: ``fabric.hbd`` (an
:class:`~fabric.model.HBDSpec`), the device groupings and device kinds.

Vocabulary
----------
*failed* GPUs are broken; *healthy* GPUs are the others.  A healthy GPU may
still be *unavailable* for TP groups: drained with a failed GPU of its node
(FIGURES: a GPU fault drains its NVL-72 compute tray; assumed for every other
server, as schedulers drain a server on a GPU error and the production trace
records faults per node), cut off from scale-out by a ToR failure, or in an
HBD unit (cube, torus line) that a failure made unusable.  *Usable* GPUs are
those in a complete TP group; **GPU waste ratio** = healthy GPUs in no
complete TP group / healthy GPUs (:mod:`fabric.metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabric.errors import FabricError
from fabric.faults import FaultSamples, NodeIndex
from fabric.model import Fabric


@dataclass(frozen=True)
class FaultBatch:
    """Fault sets as the allocation policies see them, one row per sample (or per position).

    Attributes
    ----------
    down_nodes : FaultSamples
        Dense nodes (:class:`~fabric.faults.NodeIndex`) unavailable as a whole:
        failed, drained, or cut out of the HBD.
    down_gpus : FaultSamples or None
        GPU indices unavailable one by one (healthy, e.g. no scale-out after
        a ToR failure); policies built on whole nodes treat their node as down.
    boundaries : FaultSamples or None
        Hops that cannot be lit, as boundary positions (``khop_line``: a
        boundary ``c`` between line positions ``c - 1`` and ``c``; ``torus``:
        see :mod:`solvers.allocation.torus`).
    healthy : ndarray of int
        Healthy GPUs per row.
    """

    down_nodes: FaultSamples
    healthy: np.ndarray
    down_gpus: FaultSamples | None = None
    boundaries: FaultSamples | None = None

    @property
    def n_rows(self) -> int:
        return self.down_nodes.n_rows

    @classmethod
    def from_nodes(cls, nodes: NodeIndex, failed: FaultSamples) -> "FaultBatch":
        """Whole-node failures only (the i.i.d. node model and trace replay)."""
        g = nodes.uniform_size
        if g:
            lost = failed.counts() * g
        else:
            lost = np.rint(np.bincount(failed.row_of_entries(), weights=nodes.node_size[failed.indices],
                                       minlength=failed.n_rows)).astype(np.int64)
        return cls(failed, nodes.n_gpus - lost)

    def unit_nodes(self, nodes: NodeIndex) -> FaultSamples:
        """Down nodes plus the nodes of individually unavailable GPUs (for whole-node policies)."""
        if self.down_gpus is None or self.down_gpus.nnz == 0:
            return self.down_nodes
        return self.down_nodes.union(self.down_gpus.map_to(nodes.node_of_gpu, nodes.n_nodes))


@dataclass(frozen=True)
class Allocation:
    """TP groups formed on the available GPUs of one fault set.

    Attributes
    ----------
    tp : int
        GPUs per TP group.
    policy : str
        HBD kind and the rule used.
    groups : ndarray of int, shape (n_groups, tp)
        GPU device ids of each group, in rank order.
    units : ndarray of int, shape (n_groups, u)
        The HBD units each group occupies, in order: node ids along the ring
        (``khop_line``), cube ids of the slice (``ocs_cube``), torus line ids
        (``torus``), the domain id (``switch_domain``).
    unit_kind : str
        ``node``, ``cube``, ``line``, ``plane`` or ``domain``.
    n_gpus, healthy_gpus : int
    """

    tp: int
    policy: str
    groups: np.ndarray
    units: np.ndarray
    unit_kind: str
    n_gpus: int
    healthy_gpus: int
    notes: tuple[str, ...] = field(default=())

    @property
    def n_groups(self) -> int:
        return int(self.groups.shape[0])

    @property
    def usable_gpus(self) -> int:
        return int(self.groups.size)

    @property
    def wasted_gpus(self) -> int:
        """Healthy GPUs in no complete TP group."""
        return self.healthy_gpus - self.usable_gpus

    @property
    def waste_ratio(self) -> float:
        return self.wasted_gpus / self.healthy_gpus if self.healthy_gpus else 0.0

    def to_dict(self) -> dict:
        return {"tp": self.tp, "policy": self.policy, "unit_kind": self.unit_kind, "n_groups": self.n_groups,
                "usable_gpus": self.usable_gpus, "healthy_gpus": self.healthy_gpus, "n_gpus": self.n_gpus,
                "waste_ratio": self.waste_ratio, "groups": self.groups.tolist(), "units": self.units.tolist(),
                "notes": list(self.notes)}


class Policy:
    """One allocation rule for one HBD kind (subclasses: one module each)."""

    kind = ""
    rule = ""

    def __init__(self, fabric: Fabric, nodes: NodeIndex):
        self.fabric = fabric
        self.hbd = fabric.hbd
        self.nodes = nodes

    # ----------------------------------------------------------------- TP size
    @property
    def max_tp(self) -> int:
        return int(self.hbd.max_tp) if self.hbd.max_tp > 0 else int(self.hbd.domain_gpus)

    def check_tp(self, tp: int) -> int:
        """Validate a TP size against the HBD: the one TP check of ``fabric faults``, the API and the sweep.

        Allowed: a divisor of ``tp_multiple_of`` or a multiple of it (whole nodes), unless the kind says
        otherwise (:meth:`check_tp_shape`: a k-hop node's full mesh takes any size below the node), the kind's
        own rules (:meth:`_check_tp_kind`), and at most ``max_tp``.
        """
        tp = self.check_tp_shape(tp)
        if tp > self.max_tp:
            raise FabricError("tp", f"{tp} exceeds the largest TP group of {self.fabric.architecture} "
                                      f"({self.hbd.kind}): max {self.max_tp}")
        return tp

    def check_tp_shape(self, tp: int) -> int:
        """:meth:`check_tp` without the size bound ``max_tp``: the rules that do not depend on the GPU count.

        What a study checks on a small probe of a large design before any work (the size bound is checked
        when the point's own Fabric is built).
        """
        if isinstance(tp, bool) or not isinstance(tp, (int, np.integer)) or tp < 1:
            raise FabricError("tp", f"{tp!r} must be a whole number >= 1")
        mult = max(int(self.hbd.tp_multiple_of), 1)
        if tp % mult and mult % tp:
            raise FabricError("tp", f"{tp} must divide {mult} or be a multiple of {mult} for "
                                      f"{self.fabric.architecture} ({self.hbd.kind}: a TP group inside a node "
                                      f"divides its {mult} GPUs; one across nodes takes whole {mult}-GPU nodes)")
        self._check_tp_kind(int(tp))
        return int(tp)

    def _check_tp_kind(self, tp: int) -> None:
        """Kind-specific TP constraints (override)."""

    # --------------------------------------------------------------- interface
    def count(self, tp: int, batch: FaultBatch) -> np.ndarray:
        """Usable GPUs per row of ``batch`` (vectorised)."""
        raise NotImplementedError

    def allocate(self, tp: int, avail: np.ndarray, boundaries: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
        """(groups as GPU indices, units, unit kind) for one availability mask over GPU indices."""
        raise NotImplementedError


def sorted_runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique values of ``keys`` and the slice start of each, for keys that are grouped (equal keys adjacent)."""
    if keys.size == 0:
        return keys, np.zeros(0, dtype=np.int64)
    new = np.ones(keys.size, dtype=bool)
    new[1:] = keys[1:] != keys[:-1]
    starts = np.flatnonzero(new)
    return keys[starts], starts


def run_blocks(items: np.ndarray, keys: np.ndarray, size: int, per: np.ndarray | None = None) -> np.ndarray:
    """Blocks of ``size`` consecutive ``items`` inside each run of equal ``keys`` (items listed run by run).

    How the switch-domain policy cuts a domain's available GPUs into TP groups (a job's TP groups are
    this policy's groups on the fault-free Fabric, :func:`workloads.placement.tp_blocks`).

    Parameters
    ----------
    items : ndarray
        GPU ids (or any values), grouped by ``keys``.
    keys : ndarray
        The run (domain) of each item; equal keys adjacent.
    size : int
        Items per block (the TP size).
    per : ndarray of int, optional
        Blocks to take from each run, in run order (default: as many as fit, ``floor(run length / size)``).

    Returns
    -------
    ndarray, shape (n_blocks, size)
        A run's blocks start at its first item; a remainder shorter than ``size`` stays out.

    Examples
    --------
    >>> run_blocks(np.arange(10, 17), np.array([0, 0, 0, 0, 0, 1, 1]), 2).tolist()
    [[10, 11], [12, 13], [15, 16]]
    """
    _, starts = sorted_runs(keys)
    per = np.diff(np.r_[starts, keys.size]) // size if per is None else per
    # index of the first item of every block: run start + j * size
    first = np.repeat(starts, per) + size * (np.arange(per.sum()) - np.repeat(np.cumsum(per) - per, per))
    return items[first[:, None] + np.arange(size)[None, :]]


def group_sum(keys: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sum ``weights`` per distinct key: (keys, sums), sorting only when keys are not already grouped."""
    if keys.size and np.any(keys[1:] < keys[:-1]):
        order = np.argsort(keys, kind="stable")
        keys, weights = keys[order], weights[order]
    uk, starts = sorted_runs(keys)
    sums = np.add.reduceat(weights, starts) if keys.size else weights[:0]
    return uk, sums


def dense_ids(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values ascending, dense index of each value)."""
    uniq, inv = np.unique(values, return_inverse=True)
    return uniq, inv.astype(np.int64)
