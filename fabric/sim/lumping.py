"""Equivalence classes of flows: simulate one row per class where the fabric's symmetry makes that exact.

An all-to-all among ``n`` hosts of a fat-tree is ``n (n-1)`` flows, but the
hosts under one ToR are interchangeable: each hangs off the core by its own
pendant path (GPU -> NIC -> ToR) of the same capacities and latencies, and
each sends to (and receives from) every group of hosts the same number of
flows.  Such flows get the same max-min rate at every instant, so the engine
can run one row per class with ``count`` = the class size over *bundled*
pendant arcs, as :mod:`fabric.sim.graph` does for interchangeable switches.

The reduction (exact; an *equitable partition* of the flow-arc incidence)
-------------------------------------------------------------------------
* **Endpoint groups.**  Every endpoint (graph node of a flow's source or
  destination) has a *private path*: the pendant nodes from it upward that
  are on no other endpoint's path and not on the core (GPU -> NIC under a
  ToR); the node it joins is its *branch*.  Endpoints with the same branch and
  the same private path signature (capacities and latencies of its arcs, both
  ways, compared exactly) form a group.  Endpoints on the core, or on another
  endpoint's path, are groups of one.
* **Flow classes.**  Flows with the same source group, destination group,
  size, start, extra latency, count and tag.  Flows must not wait on other
  flows (the all-at-once collectives: all-to-all, direct reduce-scatter and
  all-gather, one-shot all-reduce) and never go from a node to itself.
* **Equitability, checked on the flows.**  In every class, every source of
  the source group sends the same number of the class's flows, and every
  destination of the destination group receives the same number.

Then every flow of a class crosses exactly one arc of each *bundle* (the
level-``j`` up arcs of a group's paths, or its level-``j`` down arcs) with
its whole bytes, every arc of a bundle carries the same flows of every class,
and the flows of a class share the rest of their route (the tree path from
branch to root and the core route, which depends only on the two roots under
ideal ECMP, :mod:`fabric.sim.routing`).  Progressive filling
therefore keeps every flow of a class at one rate and every arc of a bundle at
one load, at every event: the class is one row of multiplicity ``|class|``
over the bundle of capacity ``|group| x c``, and the event loop on the
classes reproduces the event loop on the flows (up to rounding; the tests
check it to 1e-9 against the full simulation).  Route latencies agree within
a class (same signature, same core route), so finish times do too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fabric.sim.engine import Problem
from fabric.sim.flows import FlowTable
from fabric.sim.graph import ArcGraph
from fabric.sim.routing import RouteTable

# Below this many flows the full simulation is cheap and the reduction is not tried (auto mode).
LUMP_MIN_FLOWS = 20_000


@dataclass(frozen=True)
class Lumped:
    """Flow classes as an engine problem, and how to expand results back to flows.

    Attributes
    ----------
    problem : Problem
        One flow per class (``count`` = class size x the flows' own count).
    class_of_flow : ndarray of int
        Class of every original flow.
    arcs : ndarray of int
        Graph arc of every problem arc that is a real arc (the core arcs);
        bundles come after them.
    bundle_arcs_ptr, bundle_arcs : ndarray of int
        CSR: the graph arcs (one per group member) of every bundle.
    """

    problem: Problem
    class_of_flow: np.ndarray
    arcs: np.ndarray
    bundle_arcs_ptr: np.ndarray
    bundle_arcs: np.ndarray

    def arc_values(self, per_problem_arc: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Graph arcs and their share of a per-problem-arc quantity (a bundle's is split evenly)."""
        k = self.arcs.size
        members = np.diff(self.bundle_arcs_ptr)
        vals = np.repeat(per_problem_arc[k:] / np.maximum(members, 1), members)
        return np.concatenate([self.arcs, self.bundle_arcs]), np.concatenate([per_problem_arc[:k], vals])


def lump(g: ArcGraph, rt: RouteTable, flows: FlowTable, src_nodes: np.ndarray,
         dst_nodes: np.ndarray) -> Lumped | None:
    """The flow classes of ``flows`` on graph ``g`` (module docstring), or None where the reduction is not exact
    or does not pay (no two endpoints alike).

    Parameters
    ----------
    g : ArcGraph
        The ideal-ECMP routing graph.
    rt : RouteTable
        Its route table (ideal ECMP); routes one representative flow per class.
    flows : FlowTable
    src_nodes, dst_nodes : ndarray of int
        Graph node of every flow's source and destination.
    """
    n = len(flows)
    if n == 0 or int(flows.dep_ptr[-1]) > 0 or np.any(src_nodes == dst_nodes):
        return None
    ends, end_inv = unique_ints(np.concatenate([src_nodes, dst_nodes]), g.n_nodes)
    group_of_end, n_groups, levels = _endpoint_groups(g, ends)
    if n_groups == ends.size:
        return None  # no two endpoints alike: nothing to gain
    e_src, e_dst = end_inv[:n], end_inv[n:]
    cls, n_cls = _flow_classes(flows, group_of_end[e_src], group_of_end[e_dst], n_groups)
    if n_cls * 4 > n:
        return None
    size_of_cls = np.bincount(cls, minlength=n_cls)
    members = np.bincount(group_of_end, minlength=n_groups)
    rep = np.full(n_cls, n, dtype=np.int64)
    np.minimum.at(rep, cls, np.arange(n, dtype=np.int64))
    g_src, g_dst = group_of_end[e_src[rep]], group_of_end[e_dst[rep]]
    if not (_equitable(cls, e_src, n_cls, size_of_cls, members[g_src], ends.size)
            and _equitable(cls, e_dst, n_cls, size_of_cls, members[g_dst], ends.size)):
        return None
    return _quotient(g, rt, flows, cls, rep, size_of_cls, levels, group_of_end, src_nodes, dst_nodes)


def _private_paths(g: ArcGraph, ends: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
    """Every endpoint's *private* pendant path, by level, and the node where it joins the rest.

    Level ``j`` holds the node ``j`` steps up from the endpoint (level 0 is the
    endpoint itself), or -1 once the path reaches a node that is on the core or
    on another endpoint's path: such a node is the endpoint's *branch*.  The
    arcs up from (and down to) the nodes of the private path carry the
    endpoint's flows and nothing else.
    """
    levels = [ends.copy()]
    cur = ends.copy()
    while True:
        up = np.full(cur.size, -1, dtype=np.int64)
        live = cur >= 0
        up[live] = g.parent[cur[live]]
        if not (up >= 0).any():
            break
        levels.append(up)
        cur = up
    nodes = np.concatenate([lv[lv >= 0] for lv in levels])
    times = np.bincount(nodes, minlength=g.n_nodes)
    private = []
    alive = np.ones(ends.size, dtype=bool)
    branch = ends.copy()
    for lv in levels:
        alive &= (lv >= 0) & ~g.in_core[np.maximum(lv, 0)] & (times[np.maximum(lv, 0)] == 1)
        # the branch is the first node that is not private: the parent of the last private one
        branch = np.where(alive, g.parent[np.maximum(lv, 0)], branch)
        private.append(np.where(alive, lv, -1))
    while private and not (private[-1] >= 0).any():
        private.pop()
    return private, branch


def _endpoint_groups(g: ArcGraph, ends: np.ndarray) -> tuple[np.ndarray, int, list[np.ndarray]]:
    """Group of every endpoint (branch node, exact signature of its private path) and the private paths."""
    levels, branch = _private_paths(g, ends)
    # columns: branch, then per level the up arc's and down arc's capacity and latency (-1 past the path)
    cols = [branch.astype(np.float64)]
    for lv in levels:
        ok = lv >= 0
        for arcs_of in (g.up_arc, g.down_arc):
            arc = np.where(ok, arcs_of[np.maximum(lv, 0)], -1)
            for attr in (g.capacity, g.latency):
                cols.append(np.where(ok, attr[np.maximum(arc, 0)], -1.0))
    table = np.stack(cols, axis=1)
    _, group = np.unique(table, axis=0, return_inverse=True)
    group = group.ravel().astype(np.int64)
    return group, int(group.max()) + 1, levels


def _flow_classes(flows: FlowTable, gs: np.ndarray, gd: np.ndarray, n_groups: int) -> tuple[np.ndarray, int]:
    """Class of every flow: (source group, destination group, size, start, extra latency, count, tag)."""
    key = gs * n_groups + gd
    for col in (flows.size, flows.start, flows.extra_latency(), flows.count, flows.tag):
        col = np.asarray(col)
        if (col.strides and col.strides[0] == 0) or np.all(col == col.flat[0]):
            continue  # a constant column (often a broadcast view) splits nothing
        _, inv = np.unique(col, return_inverse=True)
        # compact after every column, so that the mixed-radix key stays below n^2
        key = unique_ints(key * (int(inv.max()) + 1) + inv.ravel())[1]
    ukey, cls = unique_ints(key)
    return cls, int(ukey.size)


def unique_ints(x: np.ndarray, bound: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(x, return_inverse=True)`` for non-negative ints: by counting when the values are below a
    small bound (node ids, group pairs), by sorting otherwise."""
    top = int(x.max()) + 1 if bound is None and x.size else (bound or 0)
    if top <= 4 * x.size + 1024:
        present = np.zeros(top, dtype=bool)
        present[x] = True
        rank = np.cumsum(present) - 1
        return np.flatnonzero(present), rank[x].astype(np.int64)
    u, inv = np.unique(x, return_inverse=True)
    return u, inv.ravel().astype(np.int64)


def _equitable(cls: np.ndarray, end: np.ndarray, n_cls: int, size_of_cls: np.ndarray, group_size: np.ndarray,
               n_ends: int) -> bool:
    """Every endpoint of a class's group takes part in the same number of the class's flows."""
    if np.any(size_of_cls % group_size):
        return False
    key = cls * n_ends + end
    if n_cls * n_ends <= 4 * cls.size:
        per = np.bincount(key, minlength=n_cls * n_ends).reshape(n_cls, n_ends)
        present = (per > 0).sum(axis=1)
        vals = per.max(axis=1)
        ok_vals = np.all(per[per > 0] == np.repeat(vals, present))
    else:
        ukey, per = np.unique(key, return_counts=True)
        c = ukey // n_ends
        present = np.bincount(c, minlength=n_cls)
        vals = np.zeros(n_cls, dtype=np.int64)
        np.maximum.at(vals, c, per)
        ok_vals = np.all(per == vals[c])
    return bool(ok_vals and np.all(present == group_size) and np.all(vals * group_size == size_of_cls))


def _quotient(g, rt, flows, cls, rep, size_of_cls, levels, group_of_end, src_nodes, dst_nodes) -> Lumped:
    """The engine problem on classes: representative routes with private pendant arcs replaced by bundles."""
    n_cls = rep.size
    # bundle of every pendant arc: (group, level, up / down)
    bundle_of_arc = np.full(g.n_arcs, -1, dtype=np.int64)
    b_arcs, b_ids = [], []
    n_levels = len(levels)
    for j, lv in enumerate(levels):
        ok = lv >= 0
        for d, arcs_of in enumerate((g.up_arc, g.down_arc)):
            arc = arcs_of[lv[ok]]
            bid = (group_of_end[ok] * n_levels + j) * 2 + d
            bundle_of_arc[arc] = bid
            b_arcs.append(arc)
            b_ids.append(bid)
    b_arcs = np.concatenate(b_arcs) if b_arcs else np.zeros(0, dtype=np.int64)
    b_ids = np.concatenate(b_ids) if b_ids else np.zeros(0, dtype=np.int64)
    used_b, b_local = np.unique(b_ids, return_inverse=True)
    order = np.argsort(b_local, kind="stable")
    bundle_arcs = b_arcs[order]
    bundle_ptr = np.concatenate([[0], np.cumsum(np.bincount(b_local, minlength=used_b.size))]).astype(np.int64)
    # routes of the representatives
    ids = rt.ids(src_nodes[rep], dst_nodes[rep])
    uroutes, route_of_cls = np.unique(ids, return_inverse=True)
    R = rt.matrix()[uroutes]
    is_b = bundle_of_arc[R.indices] >= 0
    core_arcs, core_col = np.unique(R.indices[~is_b], return_inverse=True)
    col = np.empty(R.indices.size, dtype=np.int64)
    col[~is_b] = core_col
    col[is_b] = core_arcs.size + np.searchsorted(used_b, bundle_of_arc[R.indices[is_b]])
    Rq = sp.csr_matrix((R.data, col, R.indptr), shape=(R.shape[0], core_arcs.size + used_b.size))
    Rq.sum_duplicates()
    b_cap = np.bincount(b_local, weights=g.capacity[b_arcs], minlength=used_b.size)
    capacity = np.concatenate([g.capacity[core_arcs], b_cap])
    lat = flows.extra_latency()
    prob = Problem(Rq, capacity, rt.latency[uroutes], route_of_cls.ravel().astype(np.int64),
                   np.asarray(flows.size, dtype=np.float64)[rep], np.asarray(flows.start, dtype=np.float64)[rep],
                   np.asarray(flows.count, dtype=np.float64)[rep] * size_of_cls,
                   np.zeros(n_cls + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                   None if flows.latency is None else np.asarray(lat)[rep])
    return Lumped(prob, cls, core_arcs, bundle_ptr, bundle_arcs)
