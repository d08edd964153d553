"""Shortest-path (hop count) ECMP routes on an :class:`~fabric.sim.graph.ArcGraph`.

A route is the fraction of a flow's bytes on every arc it uses, plus its
latency.  Two ECMP models:

``ideal``
    Fluid split **per next hop**, as ECMP does at each switch: a node divides
    what arrives for destination ``d`` evenly over its ports toward ``d``
    (arcs to neighbours one hop closer to ``d``; a bundle arc counts for its
    ports).  A path's share is the product of the splits along it, so paths
    through a wide switch get less than paths through a narrow one (not an
    even split over paths).  The flow has one rate; its arcs carry that rate
    times their fraction.
``hash``
    Per-flow hashing: every switch picks one of its next-hop ports from a
    hash of ``(seed, source, destination, switch)``, so all flows between one
    pair share one path (as the packets of one connection do) and different
    seeds give independent hash functions.

Routes are computed for many (source, destination) pairs at once
(vectorised) and cached per pair in a :class:`RouteTable`.  A batch runs one
breadth-first search per destination (all of them together, each only as far
as its farthest source) on the core of the graph (pendant trees are walked
directly), records the shortest-path DAG toward that destination, and walks
every source down it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fabric.errors import FabricError
from fabric.idcache import recall, remember
from fabric.sim.csr import ranges, unique_sorted
from fabric.sim.graph import ArcGraph, mix64

ECMP_MODES = ("ideal", "hash")

# Searches x nodes up to which the search keeps dense per-(search, node) tables
# (8 bytes per entry: ~290 MB at the limit, allocated once per routing call and
# reset cell by cell); beyond it, sorted keys.  Batches hold as many destinations
# as fit (at least 16), so that searches in large fabrics stay dense.
_DENSE_SEEN_ENTRIES = 36_000_000
# Pairs routed per vectorised batch (bounds the expansion arrays).
_ROUTE_BATCH = 200_000


class NoRoute(FabricError):
    """Two devices have no path between them under the active configuration."""

    def __init__(self, src_device: int, dst_device: int):
        self.src_device = int(src_device)
        self.dst_device = int(dst_device)
        super().__init__("route", f"device {src_device} cannot reach device {dst_device}")


def _batches(dst: np.ndarray, max_dests: int) -> list[tuple[int, int]]:
    """Cut pairs sorted by destination into batches of at most ``_ROUTE_BATCH`` pairs and ``max_dests``
    destinations, so that each batch's searches fit the dense tables of :func:`shortest_path_dags`."""
    first = np.flatnonzero(np.concatenate([[True], dst[1:] != dst[:-1]]))  # start of every destination
    cuts, lo = [], 0
    while lo < dst.size:
        k = int(np.searchsorted(first, lo, side="right"))  # destinations starting at or before lo
        hi = int(first[k - 1 + max_dests]) if k - 1 + max_dests < first.size else dst.size
        hi = min(hi, lo + _ROUTE_BATCH)
        cuts.append((lo, hi))
        lo = hi
    return cuts


class SearchTables:
    """Dense per-(search, node) tables that batches of searches reuse.

    ``lev`` holds -1 everywhere between searches (each search resets the
    cells it wrote), so a batch costs what it explores, not ``D x n``;
    ``stamp`` is scratch that every search writes before it reads.
    """

    def __init__(self) -> None:
        self.lev = np.zeros(0, dtype=np.int32)
        self.stamp = np.zeros(0, dtype=np.int32)

    def views(self, D: int, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(lev, stamp) as (D, n) views, grown when needed."""
        if self.lev.size < D * n:
            self.lev = np.full(D * n, -1, dtype=np.int32)
            self.stamp = np.empty(D * n, dtype=np.int32)
        return self.lev[:D * n].reshape(D, n), self.stamp[:D * n].reshape(D, n)


def shortest_path_dags(g: ArcGraph, dests: np.ndarray, need_q: np.ndarray, need_v: np.ndarray,
                       tables: SearchTables | None = None) -> "DagIndex":
    """Next-hop arcs toward every destination, by breadth-first search from all of them at once.

    Parameters
    ----------
    g : ArcGraph
    dests : ndarray of int
        Destination core nodes, one search each (search ``q`` is ``dests[q]``).
    need_q, need_v : ndarray of int
        Search ``need_q[i]`` must reach core node ``need_v[i]`` (a source).

    Returns
    -------
    DagIndex
        For every key ``q * n_nodes + v``, the arcs ``v -> u`` with ``u`` one
        hop closer to ``dests[q]``: the shortest-path DAG.

    A search stops as soon as all its sources are settled, so local traffic
    explores a small ball and all-to-all traffic the whole core.  The DAG arcs
    are recorded while searching: an arc that reaches a node of the next level
    for the first time (in this level) is the reverse of a next-hop arc.
    Before a level is expanded, the pending sources check their own (few)
    neighbours: if every pending source of a search touches the current
    level, they are all one hop further, their arcs into the level are their
    next hops, and the search ends without expanding that last level (the
    widest one, for local traffic).  Raises :class:`NoRoute` (with graph nodes)
    for a source that cannot be reached.  ``tables`` lends the dense tables
    (kept across the batches of one routing call).

    **GPUs forward only from HBD link to HBD link** (``g.gpu_node``,
    ``g.hbd_arc``): a torus chip routes ICI traffic on, but no GPU passes
    traffic between its NVLink and its NIC (PCIe) or between two non-HBD
    links; without this rule a flow between two racks of an NVL-72 would
    detour over NVLink through the GPUs of the rack that share the far
    ToR, at equal hop count.  The levels of the search are the distances
    of nodes that may forward (a GPU's only over HBD arcs); a GPU as a
    *source* may leave by any arc, so its next hops are found by the
    neighbour check above, one source at a time, and kept apart
    (:meth:`DagIndex.lookup_source`): its next hops as a source and as a
    forwarding node differ.
    """
    tables = SearchTables() if tables is None else tables
    n, D = g.n_nodes, dests.size
    if D * n > _DENSE_SEEN_ENTRIES:
        return _search(g, dests, need_q, need_v, None, None)
    lev, stamp = tables.views(D, n)
    seen: list[np.ndarray] = []
    try:
        return _search(g, dests, need_q, need_v, lev, stamp, seen)
    finally:
        for keys in seen:  # back to -1 for the next batch
            lev.reshape(-1)[keys] = -1


def _search(g: ArcGraph, dests: np.ndarray, need_q: np.ndarray, need_v: np.ndarray, lev: np.ndarray | None,
            stamp: np.ndarray | None, seen: list | None = None) -> "DagIndex":
    """The searches of :func:`shortest_path_dags`: dense ``lev``/``stamp`` tables (all -1 / scratch), or
    sorted keys when they are None; the keys written to ``lev`` are appended to ``seen``."""
    # long: one breadth-first sweep, level by level, in two storage modes (dense tables, sorted keys) that must
    # stay in step with each other line by line; kept together so the two modes can be read against each other
    n = g.n_nodes
    D = dests.size
    ptr, out = g.core_out_ptr, g.core_out_arc
    deg = np.diff(ptr)
    dense = lev is not None
    need_keys = unique_sorted(need_q * n + need_v)
    nq, nv = need_keys // n, need_keys % n
    fq, fv = np.arange(D, dtype=np.int64), np.asarray(dests, dtype=np.int64)
    level_keys = [np.sort(fq * n + fv)]
    if dense:
        seen.append(level_keys[0])
        lev[fq, fv] = 0
    gpu = g.gpu_node if g.gpu_node is not None and g.gpu_node.any() else None
    src_gpu = gpu[nv] if gpu is not None else np.zeros(nv.size, dtype=bool)
    dests = np.asarray(dests, dtype=np.int64)
    found = _member(need_keys, level_keys[0])
    remaining = np.bincount(nq[~found], minlength=D)
    out_keys, out_arcs, src_keys, src_arcs = [], [], [], []
    level = 0
    while True:
        # the pending sources of a search all next to the current level: finish it from their side
        # (a GPU source as soon as it touches the level: it never settles by the search below)
        pend = np.flatnonzero(~found)
        if pend.size:
            cnt = deg[nv[pend]]
            rep = np.repeat(pend, cnt)
            a = out[ranges(ptr[nv[pend]], cnt)]
            w, qq = g.dst[a], nq[rep]
            hit = (lev[qq, w] == level) if dense else _member(qq * n + w, level_keys[-1])
            if gpu is not None:  # into a forwarding GPU only over HBD
                hit &= ~gpu[w] | g.hbd_arc[a] | (w == dests[qq])
            touching = np.zeros(need_keys.size, dtype=bool)
            touching[rep[hit]] = True
            done_q = (remaining > 0) & (np.bincount(nq[pend[~touching[pend]]], minlength=D) == 0)
            settle = np.zeros(need_keys.size, dtype=bool)
            settle[pend] = done_q[nq[pend]] | (src_gpu[pend] & touching[pend])
            if settle.any():
                take = hit & settle[rep]
                to_src = src_gpu[rep[take]]
                keys_t = qq[take] * n + nv[rep[take]]
                out_keys.append(keys_t[~to_src])
                out_arcs.append(a[take][~to_src])  # source -> neighbour one hop closer
                src_keys.append(keys_t[to_src])
                src_arcs.append(a[take][to_src])
                found[settle] = True
                remaining = np.bincount(nq[~found], minlength=D)
            if dense and level > 0:
                fin_q, keys2, arcs2, skeys2, sarcs2 = _two_hops(g, lev, level, nq, nv, pend, touching,
                                                                remaining > 0, (rep, a, qq, hit), gpu, src_gpu)
                if fin_q.any():
                    out_keys.append(keys2)
                    out_arcs.append(arcs2)
                    src_keys.append(skeys2)
                    src_arcs.append(sarcs2)
                    found[pend[fin_q[nq[pend]]]] = True
                    remaining[fin_q] = 0
        keep = remaining[fq] > 0
        fq, fv = fq[keep], fv[keep]
        if fq.size == 0:
            break
        level += 1
        cnt = deg[fv]
        q = np.repeat(fq, cnt)
        a = out[ranges(ptr[fv], cnt)]
        u = g.dst[a]
        if gpu is not None:  # a GPU forwards (and is reached to forward) only over HBD arcs
            v = np.repeat(fv, cnt)
            ok = g.hbd_arc[a] | (~gpu[u] & (~gpu[v] | (v == dests[q])))
            q, a, u = q[ok], a[ok], u[ok]
        key = q * n + u
        if dense:
            fresh = lev[q, u] < 0
            # distinct new nodes without sorting: the last candidate written to a cell owns it
            idx = np.flatnonzero(fresh)
            stamp[q[idx], u[idx]] = idx
            new_keys = key[idx[stamp[q[idx], u[idx]] == idx]]
            seen.append(new_keys)
            lev[new_keys // n, new_keys % n] = level
        else:
            # neighbours of level L lie on level L-1, L or L+1: only the last two levels can hold them
            ukeys = unique_sorted(key)
            old = _member(ukeys, level_keys[-1])
            if len(level_keys) > 1:
                old |= _member(ukeys, level_keys[-2])
            new_keys = ukeys[~old]
            fresh = _member(key, new_keys)
        out_keys.append(key[fresh])
        out_arcs.append(g.rev_arc[a[fresh]])
        fq, fv = new_keys // n, new_keys % n
        level_keys.append(new_keys if not dense else np.sort(new_keys))
        pend = np.flatnonzero(~found & ~src_gpu)
        found[pend] = (lev[nq[pend], nv[pend]] >= 0) if dense else _member(need_keys[pend], level_keys[-1])
        remaining = np.bincount(nq[~found], minlength=D)
    if not found.all():
        k = int(np.flatnonzero(~found)[0])
        raise NoRoute(int(nv[k]), int(dests[nq[k]]))
    keys = np.concatenate(out_keys) if out_keys else np.zeros(0, dtype=np.int64)
    arcs = np.concatenate(out_arcs) if out_arcs else np.zeros(0, dtype=np.int64)
    order = np.argsort(keys, kind="stable")
    keys, arcs = keys[order], arcs[order]
    skeys = np.concatenate(src_keys) if src_keys else np.zeros(0, dtype=np.int64)
    sarcs = np.concatenate(src_arcs) if src_arcs else np.zeros(0, dtype=np.int64)
    order = np.argsort(skeys, kind="stable")
    source = (skeys[order], sarcs[order])
    if dense and 8 * keys.size >= D * n:  # many keys: a direct index (q, v) -> range of its arcs
        ptr_ = np.concatenate([[0], np.cumsum(np.bincount(keys, minlength=D * n))]).astype(np.int32)
        return DagIndex(ptr_, None, arcs, source)
    return DagIndex(None, keys, arcs, source)


def _two_hops(g: ArcGraph, lev: np.ndarray, level: int, nq: np.ndarray, nv: np.ndarray, pend: np.ndarray,
              touching: np.ndarray, open_q: np.ndarray, one_hop: tuple, gpu: np.ndarray | None = None,
              src_gpu: np.ndarray | None = None) -> tuple[np.ndarray, ...]:
    """Finish the searches whose pending sources are all within two hops of the current level.

    A pending source ``v`` that does not touch level ``L`` is at distance
    ``>= L + 2``; it is at ``L + 2`` exactly when a neighbour ``w`` touches
    level ``L`` (then ``w`` is at ``L + 1``: every node up to ``L`` is in the
    ball).  ``v``'s next hops are those neighbours, and each such ``w``'s next
    hops are its arcs into level ``L``.  So a search whose pending sources are
    all at ``L + 1`` or ``L + 2`` ends without building level ``L + 1`` (the
    widest one, when the sources sit below a switch that reaches everything).

    With GPUs that forward only from HBD arc to HBD arc (``gpu``), a GPU
    ``w`` counts only when both its arcs are HBD; a GPU source (``src_gpu``)
    may leave by any arc, and its next hops are returned apart (see
    :func:`shortest_path_dags`).

    Returns the searches finished, the (key, next-hop arc) pairs of their
    forwarding nodes and non-GPU sources (sources at ``L + 1`` included), and
    those of their GPU sources at ``L + 2`` (GPU sources at ``L + 1`` were
    settled by the caller).
    """
    n = g.n_nodes
    ptr, out = g.core_out_ptr, g.core_out_arc
    rep, a, qq, hit = one_hop
    far = pend[~touching[pend] & open_q[nq[pend]]]
    empty = np.zeros(0, dtype=np.int64)
    if far.size == 0:
        return np.zeros(open_q.size, dtype=bool), empty, empty, empty, empty
    c1 = np.diff(ptr)[nv[far]]
    r1 = np.repeat(np.arange(far.size), c1)
    a1 = out[ranges(ptr[nv[far]], c1)]
    w1, q1 = g.dst[a1], nq[far][r1]
    c2 = np.diff(ptr)[w1]
    r2 = np.repeat(np.arange(w1.size), c2)
    a2 = out[ranges(ptr[w1], c2)]
    hit2 = lev[q1[r2], g.dst[a2]] == level
    if gpu is not None:  # a GPU w forwards only from HBD arc to HBD arc
        hit2 &= ~gpu[w1[r2]] | (g.hbd_arc[a1[r2]] & g.hbd_arc[a2])
        # and a GPU on level L (> 0: not the destination) is entered only by an HBD arc: without this a ToR source
        # reached an NVL-72 GPU through another rack GPU's NIC and NVLink (tor -> nic128 -> gpu128 -> gpu113)
        hit2 &= ~gpu[g.dst[a2]] | g.hbd_arc[a2]
    w_ok = np.zeros(w1.size, dtype=bool)
    w_ok[r2[hit2]] = True
    w_ok &= lev[q1, w1] < 0
    src_ok = np.zeros(far.size, dtype=bool)
    src_ok[r1[w_ok]] = True
    fin_q = open_q & (np.bincount(nq[far[~src_ok]], minlength=open_q.size) == 0)
    fin_q &= np.bincount(nq[far], minlength=open_q.size) > 0  # only searches the two-hop view decides
    if not fin_q.any():
        return fin_q, empty, empty, empty, empty
    is_src_gpu = src_gpu if src_gpu is not None else np.zeros(nq.size, dtype=bool)
    t1 = hit & fin_q[qq] & ~is_src_gpu[rep]    # sources at L + 1: their arcs into level L (GPU ones settled already)
    tv = w_ok & fin_q[q1]                      # sources at L + 2: their arcs to the w at L + 1
    tw = hit2 & w_ok[r2] & fin_q[q1[r2]]       # those w: their arcs into level L
    sv = is_src_gpu[far[r1]]                   # a GPU source's next hops are kept apart (as a source)
    keys = np.concatenate([qq[t1] * n + nv[rep[t1]], q1[tv & ~sv] * n + nv[far[r1[tv & ~sv]]],
                           q1[r2[tw]] * n + w1[r2[tw]]])
    arcs = np.concatenate([a[t1], a1[tv & ~sv], a2[tw]])
    # a w reached from several sources (or itself a source at L + 1) appears more than once: keep one of each
    pair = unique_sorted(keys * g.n_arcs + arcs)
    spair = unique_sorted((q1[tv & sv] * n + nv[far[r1[tv & sv]]]) * g.n_arcs + a1[tv & sv])
    return fin_q, pair // g.n_arcs, pair % g.n_arcs, spair // g.n_arcs, spair % g.n_arcs


class DagIndex:
    """Next-hop arcs per (search, node): a direct CSR pointer array, or sorted keys.

    ``source`` (sorted keys, arcs) holds the next hops of GPU sources, which
    may differ from the same GPU's next hops when it forwards; they follow
    the forwarding arcs in ``arcs``.
    """

    def __init__(self, ptr: np.ndarray | None, keys: np.ndarray | None, arcs: np.ndarray,
                 source: tuple[np.ndarray, np.ndarray] | None = None):
        self.ptr, self.keys = ptr, keys
        self.src_keys = source[0] if source is not None else np.zeros(0, dtype=np.int64)
        self.src_base = arcs.size
        self.arcs = np.concatenate([arcs, source[1]]) if source is not None else arcs

    def lookup_source(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First position and count of the arcs of each key as a GPU source (count 0 if none)."""
        lo = np.searchsorted(self.src_keys, key, side="left")
        return lo + self.src_base, np.searchsorted(self.src_keys, key, side="right") - lo

    def lookup(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """First position and count of the arcs of each key."""
        if self.ptr is not None:
            lo = self.ptr[key]
            return lo, self.ptr[key + 1] - lo
        lo = np.searchsorted(self.keys, key, side="left")
        return lo, np.searchsorted(self.keys, key, side="right") - lo


def _member(x: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """``x in sorted_set`` elementwise (``sorted_set`` sorted, unique)."""
    if sorted_set.size == 0:
        return np.zeros(x.shape, dtype=bool)
    pos = np.minimum(np.searchsorted(sorted_set, x), sorted_set.size - 1)
    return sorted_set[pos] == x


class RouteTable:
    """Routes of one graph and ECMP mode (and seed), computed on demand and cached per pair.

    Routes are rows of a sparse matrix (routes x arcs) of byte fractions.
    """

    def __init__(self, graph: ArcGraph, mode: str, seed: int):
        if mode not in ECMP_MODES:
            raise FabricError("ecmp", f"{mode!r} is not one of {', '.join(ECMP_MODES)}")
        self.graph = graph
        self.mode = mode
        self.seed = int(seed)
        self._keys = np.zeros(0, dtype=np.int64)  # sorted pair keys
        self._key_ids = np.zeros(0, dtype=np.int64)
        self._ptr_parts: list[np.ndarray] = []
        self._arc_parts: list[np.ndarray] = []
        self._frac_parts: list[np.ndarray] = []
        self._lat_parts: list[np.ndarray] = []
        self._n = 0
        self._matrix: sp.csr_matrix | None = None
        self._latency: np.ndarray | None = None

    def __len__(self) -> int:
        return self._n

    def ids(self, src_nodes: np.ndarray, dst_nodes: np.ndarray) -> np.ndarray:
        """Route ids for graph-node pairs, computing (vectorised) the ones not cached yet."""
        n = self.graph.n_nodes
        keys = np.asarray(src_nodes, dtype=np.int64) * n + np.asarray(dst_nodes, dtype=np.int64)
        ukeys, inv = np.unique(keys, return_inverse=True)
        pos = np.searchsorted(self._keys, ukeys)
        found = pos < self._keys.size
        found[found] = self._keys[pos[found]] == ukeys[found]
        out = np.empty(ukeys.size, dtype=np.int64)
        out[found] = self._key_ids[pos[found]]
        miss = np.flatnonzero(~found)
        if miss.size:
            # batches hold whole destinations where possible: one search per destination
            miss = miss[np.lexsort((ukeys[miss] // n, ukeys[miss] % n))]
            new = ukeys[miss]
            new_ids = np.arange(self._n, self._n + new.size, dtype=np.int64)
            tables = SearchTables()
            for lo, hi in _batches(new % n, max(16, _DENSE_SEEN_ENTRIES // max(n, 1))):
                chunk = new[lo:hi]
                ptr, arcs, frac, lat = compute_routes(self.graph, chunk // n, chunk % n, self.mode, self.seed,
                                                      tables)
                self._ptr_parts.append(ptr)
                self._arc_parts.append(arcs)
                self._frac_parts.append(frac)
                self._lat_parts.append(lat)
            self._n += new.size
            out[miss] = new_ids
            merged = np.concatenate([self._keys, new])
            merged_ids = np.concatenate([self._key_ids, new_ids])
            order = np.argsort(merged, kind="stable")
            self._keys, self._key_ids = merged[order], merged_ids[order]
            self._matrix = None
            self._latency = None
        return out[inv]

    def matrix(self) -> sp.csr_matrix:
        """All cached routes as a CSR matrix (routes x arcs) of byte fractions."""
        if self._matrix is None:
            ptrs, offset = [np.zeros(1, dtype=np.int64)], 0
            for p in self._ptr_parts:
                ptrs.append(p[1:] + offset)
                offset += int(p[-1])
            indptr = np.concatenate(ptrs)
            arcs = np.concatenate(self._arc_parts) if self._arc_parts else np.zeros(0, dtype=np.int64)
            frac = np.concatenate(self._frac_parts) if self._frac_parts else np.zeros(0)
            m = sp.csr_matrix((frac, arcs, indptr), shape=(self._n, self.graph.n_arcs))
            m.sum_duplicates()  # canonical (sorted, no duplicates): scipy may otherwise sort shared arrays
            self._matrix = m
            indptr, arcs, frac = m.indptr, m.indices, m.data
            # one chunk each from now on
            self._ptr_parts, self._arc_parts, self._frac_parts = [indptr], [arcs], [frac]
        return self._matrix

    @property
    def latency(self) -> np.ndarray:
        """Latency of every cached route, seconds (max over its ECMP paths)."""
        if self._latency is None:
            self._latency = np.concatenate(self._lat_parts) if self._lat_parts else np.zeros(0)
            self._lat_parts = [self._latency]
        return self._latency


def compute_routes(graph: ArcGraph, src: np.ndarray, dst: np.ndarray, mode: str, seed: int,
                   tables: SearchTables | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Routes for graph-node pairs ``(src[i], dst[i])``.

    Returns
    -------
    indptr, arcs, fractions, latency
        CSR rows (one per pair) of arc ids and the fraction of the flow's
        bytes on each; latency in seconds (sum of arc latencies along a path,
        the maximum over the ECMP paths).
    """
    g = graph
    P = src.size
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    # pendant-tree parts (unique paths)
    t_p, t_a, lat = _tree_parts(g, src, dst)
    parts_p, parts_a, parts_f = [t_p], [t_a], [np.ones(t_a.size)]
    rs, rd = g.root[src], g.root[dst]
    need_core = np.flatnonzero(rs != rd)
    if need_core.size:
        if mode == "ideal" and np.array_equal(rs, src) and np.array_equal(rd, dst):
            # no pendant trees involved: the pairs are the (distinct) core pairs
            cptr, carc, cfrac, clat = _gateway_walk(g, src[need_core], dst[need_core], seed, src[need_core],
                                                    dst[need_core], np.arange(need_core.size), tables)
            rows = np.arange(need_core.size)
        elif mode == "ideal":
            # the core route depends only on the two roots: route each root pair once
            ck, cinv = np.unique(rs[need_core] * g.n_nodes + rd[need_core], return_inverse=True)
            cptr, carc, cfrac, clat = _gateway_walk(g, ck // g.n_nodes, ck % g.n_nodes, seed, src[need_core],
                                                    dst[need_core], cinv, tables)
            rows = cinv
        else:
            # hashing depends on the end devices, so every pair walks on its own
            cptr, carc, cfrac, clat = _core_walk(g, rs[need_core], rd[need_core], mode, seed, src[need_core],
                                                 dst[need_core], src[need_core], dst[need_core],
                                                 np.arange(need_core.size), tables)
            rows = np.arange(need_core.size)
        counts = np.diff(cptr)[rows]
        pos = ranges(cptr[rows], counts)
        parts_p.append(np.repeat(need_core, counts))
        parts_a.append(carc[pos])
        parts_f.append(cfrac[pos])
        lat[need_core] += clat[rows]
    p = np.concatenate(parts_p)
    a = np.concatenate(parts_a)
    f = np.concatenate(parts_f)
    if p.size and np.any(p[1:] < p[:-1]):
        order = np.argsort(p, kind="stable")
        a, f = a[order], f[order]
    indptr = np.concatenate([[0], np.cumsum(np.bincount(p, minlength=P))]).astype(np.int64)
    return indptr, a.astype(np.int64), f, lat



@dataclass(frozen=True)
class Gateways:
    """Per core node: the switch every route from outside its HBD component enters it through, if one exists.

    A GPU ``d`` whose only non-HBD link goes to a node ``x`` (its NIC) that
    links to nothing but ``d`` and one other node ``T`` (the ToR): a route
    from outside ``d``'s HBD component enters the component by a non-HBD arc
    into one of its nodes, and a GPU entered by a non-HBD arc is the
    destination (GPUs forward only from HBD arc to HBD arc), so when every
    node of the component with a non-HBD arc is a GPU, every such route ends
    ``T -> x -> d``.  Its shortest-path DAG above ``T`` is the DAG toward
    ``T`` (the last two hops are forced, and no path toward ``T`` from outside
    can pass ``x`` or the component), and ideal ECMP sends the whole flow
    down the one arc at ``T`` and at ``x``: route(s, d) = route(s, T) +
    ``T -> x -> d``, latency plus the two arcs'.  The GPUs under one ToR
    then share one search instead of one each.  The two arcs' fractions and
    the latency are computed as the walk toward ``d`` computes them, so the
    routes are bit for bit those of the search toward ``d`` (tested).

    Attributes
    ----------
    via : ndarray of int
        ``T`` per node, -1 where the rule does not apply.
    nic, arc_in, arc_last : ndarray of int
        ``x``, the arc ``T -> x`` and the arc ``x -> d`` per node (-1 where ``via`` is).
    component : ndarray of int
        HBD component of every node (connected over HBD arcs).
    """

    via: np.ndarray
    nic: np.ndarray
    arc_in: np.ndarray
    arc_last: np.ndarray
    component: np.ndarray


_GATEWAYS: dict[int, tuple] = {}


def gateways(g: ArcGraph) -> Gateways:
    """The :class:`Gateways` of ``g`` (computed once per graph object)."""
    hit = recall(_GATEWAYS, g)
    if hit is not None:
        return hit
    n = g.n_nodes
    via = np.full(n, -1, dtype=np.int64)
    nic, arc_in, arc_last = via.copy(), via.copy(), via.copy()
    comp = np.arange(n, dtype=np.int64)
    if g.gpu_node is not None and g.hbd_arc is not None and g.gpu_node.any():
        from scipy.sparse.csgraph import connected_components

        inner = g.core_out_arc
        a_src = g.src[inner]
        hbd = g.hbd_arc[inner]
        adj = sp.coo_matrix((np.ones(int(hbd.sum())), (a_src[hbd], g.dst[inner][hbd])), shape=(n, n))
        comp = connected_components(adj, directed=False)[1].astype(np.int64)
        non_hbd = np.bincount(a_src[~hbd], minlength=n)          # non-HBD arcs leaving each node (core)
        degree = np.diff(g.core_out_ptr)
        # components where a non-GPU node has a non-HBD arc can be entered other than at the destination
        open_comp = np.zeros(n, dtype=bool)
        open_comp[comp[(non_hbd > 0) & ~g.gpu_node & g.in_core]] = True
        # a GPU's single non-HBD arc d -> x, with x not a GPU and of degree 2
        one = np.flatnonzero(g.gpu_node & g.in_core & (non_hbd == 1) & ~open_comp[comp])
        arcs_one = inner[~hbd]
        first = np.full(n, -1, dtype=np.int64)
        first[a_src[~hbd][::-1]] = arcs_one[::-1]               # a node's (first) non-HBD core arc
        d_x = first[one]
        x = g.dst[d_x]
        ok = ~g.gpu_node[x] & (degree[x] == 2)
        one, d_x, x = one[ok], d_x[ok], x[ok]
        # x's two arcs: one back to d, the other to T
        arcs_x = g.core_out_arc[g.core_out_ptr[x][:, None] + np.arange(2)]
        back = g.dst[arcs_x] == one[:, None]
        ok = back.sum(axis=1) == 1
        one, x, arcs_x, back = one[ok], x[ok], arcs_x[ok], back[ok]
        to_d = arcs_x[back]
        to_t = arcs_x[~back]
        via[one] = g.dst[to_t]
        nic[one] = x
        arc_in[one] = g.rev_arc[to_t]
        arc_last[one] = to_d
    out = Gateways(via, nic, arc_in, arc_last, comp)
    return remember(_GATEWAYS, g, out)


def _gateway_walk(g: ArcGraph, cs: np.ndarray, cd: np.ndarray, seed: int, err_src: np.ndarray,
                  err_dst: np.ndarray, err_row: np.ndarray, tables: SearchTables | None = None):
    """:func:`_core_walk` under ideal ECMP, with the routes into a GPU behind a gateway (:class:`Gateways`)
    walked to its ToR and extended by the two forced arcs: one search per ToR instead of one per GPU."""
    gw = gateways(g)
    T = gw.via[cd]
    use = (T >= 0) & (gw.component[cs] != gw.component[cd]) & (cs != gw.nic[cd]) & (cs != T)
    if not use.any():
        return _core_walk(g, cs, cd, "ideal", seed, None, None, err_src, err_dst, err_row, tables)
    walk_d = np.where(use, T, cd)
    ptr, arcs, frac, lat = _core_walk(g, cs, walk_d, "ideal", seed, None, None, err_src, err_dst, err_row, tables)
    rows = np.flatnonzero(use)
    counts = np.diff(ptr)
    row_of = np.repeat(np.arange(cs.size), counts)
    # the share reaching T (1 up to rounding), then carried over the single next hop at T and at x as the walk
    # computes it (share x weight / total weight), so the fractions are the bits the walk toward d gives
    into = use[row_of] & (g.dst[arcs] == walk_d[row_of])
    at_t = np.bincount(row_of[into], weights=frac[into], minlength=cs.size)[rows]
    a_in, a_last = gw.arc_in[cd[rows]], gw.arc_last[cd[rows]]
    f_in = at_t * g.weight[a_in] / g.weight[a_in]
    f_last = f_in * g.weight[a_last] / g.weight[a_last]
    p = np.concatenate([row_of, rows, rows])
    a = np.concatenate([arcs, a_in, a_last])
    f = np.concatenate([frac, f_in, f_last])
    lat = lat.copy()
    # hop by hop, in the order the walk toward d itself adds them (same rounding, same bits)
    lat[rows] += g.latency[gw.arc_in[cd[rows]]]
    lat[rows] += g.latency[gw.arc_last[cd[rows]]]
    order = np.argsort(p, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(p, minlength=cs.size))]).astype(np.int64)
    return indptr, a[order], f[order], lat


def _tree_parts(g: ArcGraph, src: np.ndarray, dst: np.ndarray):
    """Arcs of the pendant-tree parts of each route, and their latency sum.

    Different roots: the whole way up from the source and down to the
    destination.  Same root: up to the lowest common ancestor and down.
    """
    P = src.size
    lat = np.zeros(P)
    ps, arcs = [], []
    a, b = src.copy(), dst.copy()
    da, db = g.depth[a].copy(), g.depth[b].copy()
    same = g.root[a] == g.root[b]
    idx = np.arange(P)
    while True:
        meet = same & (a != b)
        move_a = (~same & (da > 0)) | (meet & (da >= db))
        move_b = (~same & (db > 0)) | (meet & (db >= da))
        if not (move_a.any() or move_b.any()):
            break
        ia, ib = idx[move_a], idx[move_b]
        ua, db_arc = g.up_arc[a[ia]], g.down_arc[b[ib]]
        ps += [ia, ib]
        arcs += [ua, db_arc]
        lat[ia] += g.latency[ua]
        lat[ib] += g.latency[db_arc]
        a[ia], da[ia] = g.parent[a[ia]], da[ia] - 1
        b[ib], db[ib] = g.parent[b[ib]], db[ib] - 1
    if ps:
        return np.concatenate(ps), np.concatenate(arcs), lat
    return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), lat


def _hash_pick(seed: int, s: np.ndarray, d: np.ndarray, v: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Deterministic per-(seed, source, destination, switch) choice in ``range(count)``."""
    with np.errstate(over="ignore"):
        h = mix64(np.full(s.size, int(seed) % 2**64, dtype=np.uint64) + np.uint64(0x632BE59BD9B4E019))
        h = mix64(h ^ s.astype(np.uint64))
        h = mix64(h ^ d.astype(np.uint64))
        h = mix64(h ^ v.astype(np.uint64))
    return (h % count.astype(np.uint64)).astype(np.int64)


def _core_walk(g: ArcGraph, cs: np.ndarray, cd: np.ndarray, mode: str, seed: int, hs, hd,
               err_src: np.ndarray, err_dst: np.ndarray, err_row: np.ndarray, tables: SearchTables | None = None):
    """Walk from core nodes ``cs`` to ``cd`` along shortest paths, splitting (ideal) or hashing.

    Returns CSR rows (one per pair) of arcs and fractions, and the latency
    (max over paths).  ``hs, hd`` are the end devices the hash reads;
    ``err_*`` name the original pair of each walk for the error message.
    """
    P = cs.size
    n = g.n_nodes
    udest, row_of = np.unique(cd, return_inverse=True)
    try:
        dag = shortest_path_dags(g, udest, row_of, cs, tables)
    except NoRoute as exc:
        bad = np.flatnonzero((cs == exc.src_device) & (cd == exc.dst_device))[0]
        j = int(np.flatnonzero(err_row == bad)[0])
        raise NoRoute(g.device_of_node[err_src[j]], g.device_of_node[err_dst[j]]) from None
    st_p = np.arange(P, dtype=np.int64)
    st_v = cs.copy()
    st_m = np.ones(P)
    st_l = np.zeros(P)
    lat = np.zeros(P)
    out_p, out_a, out_f = [], [], []
    for step in range(n + 1):  # a shortest path has fewer hops than there are nodes
        if st_p.size == 0:
            break
        done = st_v == cd[st_p]
        if done.any():
            np.maximum.at(lat, st_p[done], st_l[done])
            keep = ~done
            st_p, st_v, st_m, st_l = st_p[keep], st_v[keep], st_m[keep], st_l[keep]
            if st_p.size == 0:
                break
        lo, cnt = dag.lookup(row_of[st_p] * n + st_v)
        if step == 0 and g.gpu_node is not None:  # a GPU source leaves by its own next hops (not its forwarding ones)
            at_gpu = np.flatnonzero(g.gpu_node[st_v])
            lo[at_gpu], cnt[at_gpu] = dag.lookup_source(row_of[st_p[at_gpu]] * n + st_v[at_gpu])
        if not cnt.all():
            raise RuntimeError("route walk reached a node with no next hop (shortest-path DAG is incomplete)")
        if mode == "ideal":
            rep = np.repeat(np.arange(st_p.size), cnt)
            arcs = dag.arcs[ranges(lo, cnt)]
            w = g.weight[arcs]
            tot = np.bincount(rep, weights=w, minlength=st_p.size)
            frac = st_m[rep] * w / tot[rep]
        else:
            rep = np.arange(st_p.size)
            arcs = dag.arcs[lo + _hash_pick(seed, hs[st_p], hd[st_p], g.device_of_node[st_v], cnt)]
            frac = st_m
        p_sel = st_p[rep]
        out_p.append(p_sel)
        out_a.append(arcs)
        out_f.append(frac)
        l_sel = st_l[rep] + g.latency[arcs]
        nxt = g.dst[arcs]
        # merge states of one pair that meet at a node; most pairs have a single state (no merge)
        per_pair = np.diff(np.flatnonzero(np.diff(p_sel, prepend=-1, append=P + 1)))
        if per_pair.max() == 1:
            st_p, st_v, st_m, st_l = p_sel, nxt, frac, l_sel
        else:
            ukey, inv = np.unique(p_sel * n + nxt, return_inverse=True)
            st_p, st_v = ukey // n, ukey % n
            st_m = np.bincount(inv, weights=frac, minlength=ukey.size)
            st_l = np.full(ukey.size, -np.inf)
            np.maximum.at(st_l, inv, l_sel)
    else:
        raise RuntimeError("route walk did not reach its destinations (shortest-path DAG has a cycle)")
    p = np.concatenate(out_p) if out_p else np.zeros(0, dtype=np.int64)
    a = np.concatenate(out_a) if out_a else np.zeros(0, dtype=np.int64)
    f = np.concatenate(out_f) if out_f else np.zeros(0)
    order = np.argsort(p, kind="stable")
    indptr = np.concatenate([[0], np.cumsum(np.bincount(p, minlength=P))]).astype(np.int64)
    return indptr, a[order], f[order], lat
