"""What the orchestrator sees of a Fabric: slots (a node on a k-hop line, or one GPU), their ToRs, their GPUs.

A *ring* (TP group) is a tuple of slot ids in rank order.  Every slot holds
``g`` GPUs (a k-hop node: ``gpus_per_node``; a switch-domain GPU: 1) that sit
under one ToR, so TP rank ``r`` of a ring is GPU ``r % g`` of slot
``ring[r // g]``.

:func:`khop_line` reads a ``khop_line`` Fabric: slot = line position (the
``position`` grouping), ToR = the ToR of the node's GPUs, or an explicit
``tor_map`` (position -> ToR) that re-wires the line to ToRs hypothetically.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.checks import MAX_WHOLE, is_whole
from fabric.errors import FabricError
from fabric.model import Fabric, HBDKind


@dataclass(frozen=True)
class SlotSpace:
    """Slots and what hangs off them.

    Attributes
    ----------
    gpus : ndarray of int, shape (U, g)
        GPU device ids of each slot, in rank order.
    tor : ndarray of int, shape (U,)
        Dense ToR index of each slot (0..T-1).
    tor_ids : ndarray of int, shape (T,)
        The Fabric's ``tor`` group id of each dense ToR (or the ``tor_map`` value).
    node : ndarray of int, shape (U,)
        Node (``node`` group) of each slot.
    healthy : ndarray of bool, shape (U,)
    """

    gpus: np.ndarray
    tor: np.ndarray
    tor_ids: np.ndarray
    node: np.ndarray
    healthy: np.ndarray

    @property
    def g(self) -> int:
        return int(self.gpus.shape[1])

    @property
    def n_slots(self) -> int:
        return int(self.tor.size)

    @property
    def n_tors(self) -> int:
        return int(self.tor_ids.size)

    def ring_gpus(self, ring) -> np.ndarray:
        """GPU device ids of a ring in rank order."""
        return self.gpus[np.asarray(ring, dtype=np.int64)].ravel()

    def tor_of_gpu(self) -> dict[int, int]:
        """GPU device id -> dense ToR (what the traffic accounting reads)."""
        g = self.g
        return {int(d): int(self.tor[i // g]) for i, d in enumerate(self.gpus.ravel())}


@dataclass(frozen=True)
class Line:
    """A k-hop line of nodes: slots are positions ``0..n-1`` (a circle when ``closed``)."""

    space: SlotSpace
    k: int
    closed: bool

    @property
    def n(self) -> int:
        return self.space.n_slots


def check_faulty_nodes(fabric: Fabric, faulty_nodes, field: str = "faulty_nodes") -> np.ndarray:
    """Node group ids that exist in ``fabric``; duplicates merged.

    Raises
    ------
    FabricError
        An id that is not a node of the Fabric.
    """
    nodes = np.unique(fabric.group("node")[fabric.gpu_ids])
    nodes = nodes[nodes >= 0]
    if isinstance(faulty_nodes, (str, bytes)) or not hasattr(faulty_nodes, "__iter__"):
        raise FabricError(field, f"{faulty_nodes!r} must be a sequence of node ids (whole numbers >= 0)")
    ids = list(faulty_nodes)
    wrong = [v for v in ids if not (is_whole(v) and 0 <= v <= MAX_WHOLE)]
    if wrong:  # 1.5 was read as node 1, True as node 1
        raise FabricError(field, f"{wrong[0]!r} is not a node id (a whole number >= 0)")
    arr = np.unique(np.asarray([int(v) for v in ids], dtype=np.int64))
    bad = arr[~np.isin(arr, nodes)]
    if bad.size:
        lo, hi = (int(nodes.min()), int(nodes.max())) if nodes.size else (0, -1)
        raise FabricError(field, f"node id(s) {bad[:5].tolist()} out of range: this fabric has nodes {lo}..{hi}")
    return arr


def khop_line(fabric: Fabric, faulty_nodes=(), tor_map=None) -> Line:
    """The k-hop line of ``fabric`` with ``faulty_nodes`` (node group ids) down.

    Parameters
    ----------
    fabric : Fabric
        ``hbd.kind == HBDKind.KHOP_LINE``, one line (one ``domain``).
    faulty_nodes : iterable of int
    tor_map : sequence of int, optional
        ToR of each line position (length = nodes on the line, values >= 0);
        replaces the Fabric's wiring for the orchestration.

    Raises
    ------
    FabricError
        Not a k-hop fabric, several lines, a bad ``tor_map``, unknown nodes.
    """
    hbd = fabric.hbd
    if hbd.kind != HBDKind.KHOP_LINE:
        raise FabricError("ARCH", f"{fabric.architecture} is not a k-hop line (hbd kind {hbd.kind})")
    faulty = check_faulty_nodes(fabric, faulty_nodes)
    gpus = fabric.gpu_ids
    node = fabric.group("node")[gpus]
    pos = fabric.group("position")[gpus]
    dom = fabric.group("domain")[gpus]
    if np.unique(dom).size != 1:
        raise FabricError("ARCH", "the orchestrator handles one k-hop line per fabric")
    if np.any(pos < 0):
        raise FabricError("ARCH", "every GPU of a k-hop line needs a position")
    n = int(pos.max()) + 1
    g = int(hbd.gpus_per_node)
    order = np.lexsort((gpus, pos))
    if order.size != n * g:
        raise FabricError("ARCH", f"k-hop line: expected {n} x {g} GPUs, found {order.size}")
    slot_gpus = gpus[order].reshape(n, g)
    slot_node = node[order].reshape(n, g)[:, 0]
    fab_tor = fabric.group("tor")[slot_gpus[:, 0]]
    if tor_map is not None:
        tm = np.asarray(tor_map)
        if tm.ndim != 1 or tm.size != n:
            raise FabricError("tor_map", f"needs one ToR per line position: {n} values, got {tm.size}")
        if not np.issubdtype(tm.dtype, np.integer) or tm.min() < 0:
            raise FabricError("tor_map", "ToR ids must be whole numbers >= 0")
        raw = tm.astype(np.int64)
    else:
        if np.any(fab_tor < 0):
            raise FabricError("ARCH", "k-hop line nodes have no ToR; give a tor_map")
        raw = fab_tor.astype(np.int64)
    tor_ids, tor = np.unique(raw, return_inverse=True)
    healthy = ~np.isin(slot_node, faulty)
    space = SlotSpace(slot_gpus, tor.astype(np.int64), tor_ids.astype(np.int64), slot_node.astype(np.int64),
                      healthy)
    return Line(space, int(hbd.k), bool(hbd.closed))
