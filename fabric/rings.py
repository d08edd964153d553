"""Lighting rings on a k-hop line: which candidate links carry a ring's hops between nodes.

A k-hop Fabric (``hbd.kind`` ``khop_line``) holds, between every two nodes at
most ``k`` apart along the line, candidate optical links (one per GPU index
and lane).  A ring over nodes ``n1, n2, ..., nm`` lights the candidates of
every hop ``n_i -> n_{i+1}``.  The topology's default ring over all nodes
(:mod:`topologies.khop`), the rings the allocator forms around faulty nodes
(``fabric view``) and the TP groups of a job (:mod:`workloads.placement`) all
light their hops here.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from fabric.errors import FabricError
from fabric.model import Configuration, Fabric, LinkState


def candidate_index(fabric: Fabric) -> dict[tuple[int, int], np.ndarray]:
    """(node i, node j) -> ids of the candidate links lit for a ring hop from i to j (ascending)."""
    L = fabric.links
    cand = np.flatnonzero(L.state == LinkState.CANDIDATE)
    node = fabric.group("node")
    a, c = node[L.src[cand]], node[L.dst[cand]]
    key = a * fabric.n_devices + c
    order = np.argsort(key, kind="stable")
    keys, starts = np.unique(key[order], return_index=True)
    bounds = list(starts) + [order.size]
    n = fabric.n_devices
    return {(int(kv // n), int(kv % n)): cand[order[bounds[t]:bounds[t + 1]]] for t, kv in enumerate(keys)}


def hop_links(fabric: Fabric, src_nodes: np.ndarray, dst_nodes: np.ndarray) -> np.ndarray:
    """Ids of the candidate links between the nodes of each hop, in either direction (ascending, unique).

    Vectorised over hops; a hop without candidates lights nothing.
    """
    node = fabric.group("node")
    n_dev = fabric.n_devices
    a, b = np.asarray(src_nodes, dtype=np.int64), np.asarray(dst_nodes, dtype=np.int64)
    wanted = np.unique(np.minimum(a, b) * n_dev + np.maximum(a, b))
    L = fabric.links
    cand = np.flatnonzero(L.state == LinkState.CANDIDATE)
    u, v = node[L.src[cand]], node[L.dst[cand]]
    key = np.minimum(u, v) * n_dev + np.maximum(u, v)
    return cand[np.isin(key, wanted)]


def ring_configuration(fabric: Fabric, rings: Sequence[Sequence[int]]) -> Configuration:
    """The configuration lighting a folded ring over each list of node ids.

    Parameters
    ----------
    fabric : Fabric
        A k-hop line Fabric.
    rings : sequence of sequences of int
        Node ids along the line, in order; consecutive nodes must be at most
        ``k`` apart (a gap skips up to ``k-1`` nodes).

    Raises
    ------
    FabricError
        If a hop is longer than ``k`` or a node is in two rings.
    """
    index = candidate_index(fabric)
    k, N = fabric.hbd.k, int(fabric.group("node").max()) + 1
    lit: list[np.ndarray] = []
    seen: set[int] = set()
    for ring in rings:
        for n in ring:
            if n in seen:
                raise FabricError("rings", f"node {n} is in two rings")
            seen.add(n)
        for a, c in zip(ring[:-1], ring[1:]):
            links = index.get((a, c))
            if links is None:
                gap = (c - a) % N if fabric.hbd.closed else c - a
                raise FabricError("rings", f"hop {a}->{c} (gap {gap}) is not an optical path of a k={k} ring")
            lit.append(links)
    active = np.concatenate(lit) if lit else np.zeros(0, dtype=np.int64)
    return Configuration(active_candidates=active)


def group_configuration(fabric: Fabric, groups: np.ndarray) -> Configuration:
    """The configuration lighting one ring per group of GPUs, and nothing between groups.

    For every group spanning nodes ``n1 < n2 < ... < nm`` the hops between
    consecutive nodes are lit (every GPU index and lane); OCS circuits stay.

    Parameters
    ----------
    fabric : Fabric
        A k-hop line Fabric.
    groups : ndarray of int, shape (n_groups, size)
        GPU device ids of each group (e.g. TP groups).
    """
    node = fabric.group("node")
    gnodes = np.sort(node[np.asarray(groups, dtype=np.int64)], axis=1)
    a, b = gnodes[:, :-1], gnodes[:, 1:]
    step = a != b  # consecutive distinct nodes of a group
    lit = hop_links(fabric, a[step], b[step])
    return Configuration(active_candidates=lit, circuits=fabric.configuration.circuits)
