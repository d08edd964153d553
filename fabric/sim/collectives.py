"""Collectives as flow DAGs.

Sizes: ``size`` is the per-rank buffer ``S`` in bytes, as in nccl-tests:
all-reduce reduces ``S`` on every rank; reduce-scatter takes ``S`` in and
leaves ``S/n`` per rank; all-gather leaves ``S`` on every rank, ``S/n`` from
each; all-to-all sends ``S/n`` to every peer; broadcast sends ``S`` from the
root; send-recv sends ``S`` from each rank to the next.

Algorithms (``ranks`` order is the ring / chain order):

=============== ================================================================
ring            ``n-1`` steps (``2(n-1)`` for all-reduce); in step ``k`` rank
                ``i`` sends ``S/n`` to rank ``i+1``.  A step's flow waits for
                the flow it received in the previous step *and* for its own
                previous send (one channel sends in order), so each step costs
                a full per-step latency.  Broadcast ``ring`` is the pipelined
                chain: ``S`` in ``chunks`` pieces along root, root+1, ...; piece
                ``c`` leaves rank ``j`` after it arrived and after piece ``c-1``
                left (under an NCCL protocol with ``chunks`` not given, NCCL's
                pieces of one protocol step: :func:`fabric.sim.nccl.time_broadcast`).
tree            all-reduce: NCCL-style double binary tree.  Tree 1 is the
                balanced in-order binary tree over rank positions, tree 2 the
                same over positions shifted by one, so most ranks are a leaf in
                one of them.  Each tree carries ``S/2`` in ``chunks`` pieces:
                a piece goes up (reduce) once it arrived from all children,
                then down (broadcast) from the root; pieces pipeline.
                Broadcast: a pipelined binary heap tree under the root
                (parent of position ``i`` is ``(i-1)//2`` counted from root).
hierarchical    all-reduce: ring reduce-scatter inside each HBD domain (ranks
                that share the Fabric's ``domain`` group) -> ring all-reduce of
                ``S/h`` across domains among the ranks with the same position
                in their domain -> ring all-gather inside the domain.  Every
                domain must hold the same number ``h`` of the ranks.
direct          all flows at once, no steps: all-to-all and direct
                reduce-scatter / all-gather send ``S/n`` to every peer;
                one-shot all-reduce sends all of ``S`` to every peer (for one
                switch domain); send-recv sends ``S`` from rank ``i`` to
                ``i+1`` (pipeline point-to-point, no wrap).
=============== ================================================================
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from fabric.checks import MAX_WHOLE, is_number, is_whole, whole
from fabric.errors import FabricError
from fabric.limits import check
from fabric.sim.csr import ranges
from fabric.sim.flows import FlowTable

class _Vocabulary(str, Enum):
    """A str-Enum whose members compare, hash, print and format as their value."""

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)


class CollectiveName(_Vocabulary):
    """What a collective does (nccl-tests' names, hyphenated)."""

    ALL_REDUCE = "all-reduce"
    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    ALL_TO_ALL = "all-to-all"
    BROADCAST = "broadcast"
    SEND_RECV = "send-recv"

    @classmethod
    def parse(cls, value, field: str = "collective") -> "CollectiveName":
        """A member from its value; ``all_reduce`` (the workloads' spelling) and ``All-Reduce`` mean ``all-reduce``."""
        try:
            return cls(str(value).replace("_", "-").lower())
        except ValueError:
            raise FabricError(field, f"unknown collective {value!r}; allowed: {', '.join(cls)}") from None


class Algorithm(_Vocabulary):
    """How a collective moves its data (see the module docstring); ``auto`` picks as NCCL's tuner does."""

    AUTO = "auto"
    RING = "ring"
    TREE = "tree"
    HIERARCHICAL = "hierarchical"
    DIRECT = "direct"
    NVLS = "nvls"
    NVLS_TREE = "nvls-tree"
    SHARP = "sharp"


class Protocol(_Vocabulary):
    """NCCL protocol of every step (:mod:`fabric.sim.nccl`); ``none`` is the ideal flow model."""

    AUTO = "auto"
    NONE = "none"
    LL = "ll"
    LL128 = "ll128"
    SIMPLE = "simple"


COLLECTIVES = tuple(CollectiveName)
ALGORITHMS = {
    CollectiveName.ALL_REDUCE: (Algorithm.RING, Algorithm.TREE, Algorithm.HIERARCHICAL, Algorithm.DIRECT,
                                Algorithm.NVLS, Algorithm.NVLS_TREE, Algorithm.SHARP),
    CollectiveName.REDUCE_SCATTER: (Algorithm.RING, Algorithm.DIRECT),
    CollectiveName.ALL_GATHER: (Algorithm.RING, Algorithm.DIRECT),
    CollectiveName.ALL_TO_ALL: (Algorithm.DIRECT,),
    CollectiveName.BROADCAST: (Algorithm.RING, Algorithm.TREE),
    CollectiveName.SEND_RECV: (Algorithm.DIRECT,),
}
PROTOCOLS = tuple(Protocol)
DEFAULT_CHUNKS = 8


def bus_factor(name: str, n: int) -> float:
    """nccl-tests bus-bandwidth factor: busbw = algbw x factor.

    all-reduce ``2(n-1)/n``; reduce-scatter, all-gather, all-to-all ``(n-1)/n``;
    broadcast, send-recv 1.
    """
    if name not in COLLECTIVES:
        raise FabricError("collective", f"unknown collective {name!r}; allowed: {', '.join(COLLECTIVES)}")
    n = whole(n, "n", 1)
    if name == CollectiveName.ALL_REDUCE:
        return 2.0 * (n - 1) / n
    if name in (CollectiveName.REDUCE_SCATTER, CollectiveName.ALL_GATHER, CollectiveName.ALL_TO_ALL):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True)
class Collective:
    """One collective among ranks.

    Parameters
    ----------
    name : CollectiveName or str
        One of :data:`COLLECTIVES` (``all_reduce`` is read as ``all-reduce``).
    ranks : tuple of int
        GPU indices (into ``fabric.gpu_ids``); their order is the ring/chain order.
    size : float
        Per-rank buffer ``S``, bytes (> 0); see the module docstring.
    algorithm : str, optional
        ``auto`` (the default, None) or one of :data:`ALGORITHMS` ``[name]``.
        ``auto`` picks what NCCL would (:func:`fabric.sim.nccl.choose`): for
        all-reduce the fastest of ring, tree and NVLS; otherwise the first.
    chunks : int, optional
        Pipeline pieces of the flow DAG's tree and chain algorithms (>= 1; default :data:`DEFAULT_CHUNKS`).
        A broadcast under an NCCL protocol with ``chunks`` not given is pipelined as NCCL does, one
        protocol step per piece (:func:`fabric.sim.nccl.time_broadcast`).
    root : int
        Position in ``ranks`` of the broadcast root.
    start_s : float
        When the collective starts, seconds.
    protocol : str, optional
        ``auto`` (the default, None: NCCL's choice by size), ``ll``,
        ``ll128``, ``simple``, or ``none``: the ideal flow model (no per-step
        protocol latency, no protocol overhead), for closed forms.
    channels : int, optional
        Parallel rings a multi-node ring is split into (default, None: one per
        rank of the group in each HBD domain, i.e. one per NIC rail; see
        :func:`fabric.sim.nccl.channel_count`).  ``protocol='none'`` with
        ``channels=1`` is the single-ring flow DAG of the closed forms.
    """

    name: str
    ranks: tuple
    size: float
    algorithm: str | None = None
    chunks: int | None = None
    root: int = 0
    start_s: float = 0.0
    protocol: str | None = None
    channels: int | None = None

    def __post_init__(self):
        if isinstance(self.name, str) and not isinstance(self.name, CollectiveName):
            try:
                object.__setattr__(self, "name", CollectiveName(self.name.replace("_", "-")))
            except ValueError:
                pass  # validate_params names the field

    @property
    def resolved_algorithm(self) -> str:
        """The algorithm asked for (``auto`` when not given; the simulator resolves ``auto``)."""
        return Algorithm.AUTO if self.algorithm in (None, Algorithm.AUTO) else self.algorithm

    @property
    def pieces(self) -> int:
        """Pipeline pieces of the flow DAG's trees and chains: ``chunks``, or :data:`DEFAULT_CHUNKS` when not given."""
        return DEFAULT_CHUNKS if self.chunks is None else int(self.chunks)

    @property
    def resolved_protocol(self) -> str:
        return Protocol.AUTO if self.protocol is None else self.protocol

    @property
    def ideal(self) -> bool:
        """True for the ideal flow model: no protocol, a single channel, a flow-DAG algorithm (the closed forms).

        In the ideal model ``auto`` is the first algorithm of :data:`ALGORITHMS` (there is no tuner).
        """
        return (self.resolved_protocol == Protocol.NONE and self.channels in (None, 1)
                and self.resolved_algorithm not in (Algorithm.NVLS, Algorithm.NVLS_TREE, Algorithm.SHARP))

    def validate(self, n_gpus: int) -> None:
        """Raise :class:`FabricError` naming the bad field."""
        self.validate_params()
        check_ranks(_rank_matrix([self.ranks]), n_gpus)

    def validate_params(self) -> None:
        """Check everything but the ranks themselves."""
        if self.name not in COLLECTIVES:
            raise FabricError("collective", f"unknown collective {self.name!r}; allowed: {', '.join(COLLECTIVES)}")
        algo = self.resolved_algorithm
        if algo != Algorithm.AUTO and algo not in ALGORITHMS[self.name]:
            raise FabricError("algorithm", f"{algo!r} is not available for {self.name}; allowed: auto, "
                                           f"{', '.join(ALGORITHMS[self.name])}")
        if self.resolved_protocol not in PROTOCOLS:
            raise FabricError("protocol", f"{self.protocol!r} is not one of {', '.join(PROTOCOLS)}")
        if algo in (Algorithm.NVLS, Algorithm.NVLS_TREE, Algorithm.SHARP) and \
                self.resolved_protocol not in (Protocol.AUTO, Protocol.SIMPLE):
            # NCCL runs in-switch / in-network reduction with Simple only; the run would not be the one asked
            raise FabricError("protocol", f"{self.resolved_protocol!r} with algorithm {algo}: {algo} runs only with "
                                          "NCCL's Simple protocol; use protocol simple or auto")
        try:
            n = len(self.ranks)
        except TypeError:
            raise FabricError("ranks", f"{self.ranks!r} must be a sequence of GPU indices") from None
        if n == 0:
            raise FabricError("ranks", "need at least one rank")
        if self.channels is not None:
            whole(self.channels, "channels", 1)
            # every channel is a ring over the ranks: a flow per rank each, sized before any array
            check("flows", int(self.channels) * n, "channels", "channels x ranks")
            object.__setattr__(self, "channels", int(self.channels))  # 8.0 or np.int64(8): ranges need an int
        # bytes beyond 2**62 (4.6 EB) overflow the per-step arithmetic; no buffer comes near
        if not (is_number(self.size) and 0 < self.size <= MAX_WHOLE):  # also refuses NaN and inf
            raise FabricError("size", f"{self.size!r} must be a finite number of bytes > 0 (at most 2**62)")
        if self.chunks is not None:
            object.__setattr__(self, "chunks", whole(self.chunks, "chunks", 1))
        if not (is_whole(self.root) and 0 <= self.root < n):
            raise FabricError("root", f"{self.root!r} must be a position in ranks (0..{n - 1})")
        object.__setattr__(self, "root", int(self.root))
        if not (is_number(self.start_s) and 0 <= self.start_s < float("inf")):  # also refuses NaN
            raise FabricError("start_s", f"{self.start_s!r} must be a finite time >= 0")

    def batch_key(self) -> tuple:
        """Collectives with equal keys differ only in their ranks (and are generated together)."""
        return (str(self.name), str(self.resolved_algorithm), len(self.ranks), float(self.size), self.chunks,
                int(self.root), float(self.start_s), str(self.resolved_protocol), self.channels)


def _rank_matrix(rank_lists) -> np.ndarray:
    try:
        arr = np.array([tuple(r) for r in rank_lists])
    except (TypeError, ValueError):
        raise FabricError("ranks", "must be sequences of GPU indices") from None
    if arr.dtype.kind not in "iu" and arr.size:
        raise FabricError("ranks", "must be GPU indices (whole numbers)")
    return arr.astype(np.int64).reshape(len(rank_lists), -1)


def check_ranks(ranks: np.ndarray, n_gpus: int) -> None:
    """Every row of ``ranks`` must hold distinct GPU indices in ``0..n_gpus-1``."""
    if ranks.size == 0:
        raise FabricError("ranks", "need at least one rank")
    bad = (ranks < 0) | (ranks >= n_gpus)
    if bad.any():
        raise FabricError("ranks", f"GPU {int(ranks[bad][0])} is not in the topology (GPUs 0..{n_gpus - 1})")
    srt = np.sort(ranks, axis=1)
    dup = srt[:, 1:] == srt[:, :-1]
    if dup.any():
        raise FabricError("ranks", f"GPU {int(srt[:, 1:][dup][0])} appears twice in one collective")


# ----------------------------------------------------------------------------- DAG building
# Builders work on G groups of n ranks at once (every DP group of a job runs the same
# collective): rank *slot* g*n + i is position i of group g.  Flows are laid out step by
# step (all groups' step 0, then all groups' step 1, ...), so the engine sees one block per
# step however many groups there are.
class _Builder:
    """Accumulates flow blocks; flow indices are global across blocks."""

    def __init__(self, start: float, tags: np.ndarray, n: int):
        self.start = start
        self.tags = np.asarray(tags, dtype=np.int64)
        self.n_ranks = n  # per group
        self.parts: list[FlowTable] = []
        self.n = 0

    @property
    def groups(self) -> int:
        return int(self.tags.size)

    def table(self) -> FlowTable:
        return FlowTable.concat(self.parts, shift_deps=False)  # parts hold global indices


def _csr(lists: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    idx = np.array([v for x in lists for v in x], dtype=np.int64)
    return ptr, idx


def _empty_entry(n: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros(n + 1, dtype=np.int64), np.zeros(0, dtype=np.int64)


def _replicate(G: int, n: int, t_src: np.ndarray, t_dst: np.ndarray, same: tuple, prev: tuple):
    """A one-group template (rank positions 0..n-1) repeated for G groups (rank slots)."""
    T = t_src.size
    if G == 1:
        return t_src, t_dst, same, prev
    off = np.repeat(np.arange(G, dtype=np.int64), T)
    out = [np.tile(t_src, G) + off * n, np.tile(t_dst, G) + off * n]
    for ptr, idx in (same, prev):
        lens = np.tile(np.diff(ptr), G)
        new_ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        new_idx = np.tile(idx, G) + np.repeat(np.arange(G, dtype=np.int64), idx.size) * T
        out.append((new_ptr, new_idx))
    return tuple(out)


def _repeat_template(b: _Builder, devices: np.ndarray, t_src: np.ndarray, t_dst: np.ndarray, size: float,
                     copies: int, same: tuple, prev: tuple, entry: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Add ``copies`` copies of a template of ``T`` flows between rank slots.

    Flow ``t`` of copy ``c`` waits for flows ``same[t]`` of copy ``c``, flows
    ``prev[t]`` of copy ``c-1`` and, in copy 0, the global flows
    ``entry[slot of its source]``.  Returns the exit CSR per rank slot: the
    flows of the last copy a rank sends or receives.
    """
    n_slots = devices.size
    T = int(t_src.size)
    if T == 0 or copies == 0:
        return entry
    base = b.n
    s_ptr, s_idx = same
    p_ptr, p_idx = prev
    e_ptr, e_idx = entry
    s_len, p_len = np.diff(s_ptr), np.diff(p_ptr)
    e_len = np.diff(e_ptr)[t_src]
    # copy 0: same-copy deps then entry deps of the sending rank
    len0 = s_len + e_len
    idx0 = np.empty(int(len0.sum()), dtype=np.int64)
    start0 = np.cumsum(len0) - len0
    idx0[ranges(start0, s_len)] = base + s_idx
    idx0[ranges(start0 + s_len, e_len)] = e_idx[ranges(e_ptr[t_src], e_len)]
    # copies 1..: same-copy deps (shift c T) then previous-copy deps (shift (c-1) T)
    lenc = s_len + p_len
    tmpl = np.empty(int(lenc.sum()), dtype=np.int64)
    startc = np.cumsum(lenc) - lenc
    pos_s, pos_p = ranges(startc, s_len), ranges(startc + s_len, p_len)
    tmpl[pos_s] = s_idx
    tmpl[pos_p] = p_idx - T
    if copies > 1:
        c = np.repeat(np.arange(1, copies, dtype=np.int64) * T + base, tmpl.size)
        idxc = np.tile(tmpl, copies - 1) + c
    else:
        idxc = np.zeros(0, dtype=np.int64)
    lens = np.concatenate([len0, np.tile(lenc, copies - 1)])
    ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    F = T * copies
    keys = t_src * n_slots + t_dst
    if keys.size > 1 and np.all(keys[1:] > keys[:-1]):  # distinct and sorted already (all pairs): skip the sort
        pair_keys, pair_of_t = keys, np.arange(keys.size, dtype=np.int64)
    else:
        pair_keys, pair_of_t = np.unique(keys, return_inverse=True)
    tag_t = b.tags[t_src // b.n_ranks]
    # constant columns are read-only broadcast views (no memory per flow)
    table = FlowTable(np.tile(devices[t_src], copies), np.tile(devices[t_dst], copies),
                      np.broadcast_to(np.float64(size), (F,)), np.broadcast_to(np.float64(b.start), (F,)), ptr,
                      np.concatenate([idx0, idxc]), np.broadcast_to(np.int64(1), (F,)),
                      np.tile(tag_t, copies) if b.groups > 1 else np.broadcast_to(tag_t[0], (F,)),
                      np.tile(pair_of_t.astype(np.int64), copies), devices[pair_keys // n_slots],
                      devices[pair_keys % n_slots], trusted=True)
    b.parts.append(table)
    b.n += F
    last = base + (copies - 1) * T + np.arange(T)
    ends = np.concatenate([t_src, t_dst])
    order = np.argsort(ends, kind="stable")
    exit_ptr = np.concatenate([[0], np.cumsum(np.bincount(ends, minlength=n_slots))]).astype(np.int64)
    return exit_ptr, np.concatenate([last, last])[order]



def _rings(rings: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple]:
    """Template of disjoint rings (rows of ``rings``, rank slots): each sends to its successor.

    Returns src, dst and the previous-step deps (incoming flow and own send).
    """
    m, h = rings.shape
    src = rings.ravel()
    dst = np.roll(rings, -1, axis=1).ravel()
    local = np.arange(m * h).reshape(m, h)
    incoming = np.roll(local, 1, axis=1).ravel()  # flow into my source in the previous step
    mine = local.ravel()
    prev_idx = np.stack([incoming, mine], axis=1).ravel()
    prev_ptr = np.arange(0, 2 * m * h + 1, 2, dtype=np.int64)
    return src, dst, (prev_ptr, prev_idx)


def _ring_phase(b: _Builder, devices: np.ndarray, rings: np.ndarray, steps: int, chunk: float, entry):
    """``steps`` ring steps on every row of ``rings`` (rank positions of one group), in all groups."""
    if rings.shape[1] < 2 or steps == 0:
        return entry
    G, n = b.groups, b.n_ranks
    slots = (np.arange(G)[:, None, None] * n + rings[None, :, :]).reshape(-1, rings.shape[1])
    src, dst, prev = _rings(slots)
    return _repeat_template(b, devices, src, dst, chunk, steps, _empty_entry(src.size), prev, entry)


def _templated(b: _Builder, devices: np.ndarray, t_src, t_dst, size: float, copies: int, same, prev, entry):
    t_src, t_dst, same, prev = _replicate(b.groups, b.n_ranks, np.asarray(t_src, dtype=np.int64),
                                          np.asarray(t_dst, dtype=np.int64), same, prev)
    return _repeat_template(b, devices, t_src, t_dst, size, copies, same, prev, entry)


#: A pipelined layout's flow counts this many against the ``flows`` limit: each waits for the piece before it, so
#: the engine gives it an event of its own (about 30 us: 7.3 M chained flows ran for 4 minutes), where 7.9 M flows
#: of an all-to-all, timed at once, took 5.5 s.  At the default limit (8 M) that admits 2 M chained flows.
PIPELINED_FLOW_WEIGHT = 4


def _check_chunked(b: _Builder, per_chunk: int, chunks: int, what: str) -> None:
    """Refuse a pipelined layout whose flows (``per_chunk`` per group per piece), each counted
    :data:`PIPELINED_FLOW_WEIGHT` times, pass the ``flows`` limit.

    ``chunks`` multiplies the flows of a tree or chain: 1,048,576 pieces of a broadcast over 8 ranks were
    7.3 M flows and ran for minutes, while every other way to ask for that many flows is refused up front.
    """
    check("flows", PIPELINED_FLOW_WEIGHT * b.groups * per_chunk * chunks, "chunks",
          f"{chunks:,} chunks x {per_chunk:,} flows of the {what}" + (f" x {b.groups:,} groups" if b.groups > 1 else "")
          + f", each counted {PIPELINED_FLOW_WEIGHT}x: a pipelined flow is an event of its own")


def _chain_broadcast(b: _Builder, devices: np.ndarray, order: np.ndarray, size: float, chunks: int, entry):
    n = order.size
    if n < 2:
        return entry
    _check_chunked(b, n - 1, chunks, "chain")
    j = np.arange(n - 1)
    same = _csr([[int(x) - 1] if x > 0 else [] for x in j])
    prev = (np.arange(n, dtype=np.int64), j.astype(np.int64))
    return _templated(b, devices, order[:-1], order[1:], size / chunks, chunks, same, prev, entry)


def _heap_broadcast(b: _Builder, devices: np.ndarray, order: np.ndarray, size: float, chunks: int, entry):
    n = order.size
    if n < 2:
        return entry
    _check_chunked(b, n - 1, chunks, "tree")
    child = np.arange(1, n)
    parent = (child - 1) // 2
    # template flow t carries a piece from parent(t+1) to t+1; it waits for the piece reaching the parent
    same = _csr([[int(p) - 1] if p > 0 else [] for p in parent])
    prev = (np.arange(n, dtype=np.int64), np.arange(n - 1, dtype=np.int64))
    return _templated(b, devices, order[parent], order[child], size / chunks, chunks, same, prev, entry)


def inorder_tree(n: int) -> np.ndarray:
    """Parent of every position of a balanced in-order binary tree over ``0..n-1`` (-1: root)."""
    parent = np.full(n, -1, dtype=np.int64)
    stack = [(0, n - 1, -1)]
    while stack:
        lo, hi, par = stack.pop()
        if lo > hi:
            continue
        mid = (lo + hi) // 2
        parent[mid] = par
        stack.append((lo, mid - 1, mid))
        stack.append((mid + 1, hi, mid))
    return parent


def _double_binary_tree(b: _Builder, devices: np.ndarray, n: int, size: float, chunks: int, entry):
    if n < 2:
        return entry
    _check_chunked(b, 4 * (n - 1), chunks, "two trees (reduce and broadcast)")
    base_parent = inorder_tree(n)
    src, dst, same = [], [], []
    for shift in (0, 1):
        node = (np.arange(n) + shift) % n  # tree position p holds rank position node[p]
        parent = base_parent
        nonroot = [p for p in range(n) if parent[p] >= 0]
        root = int(np.flatnonzero(parent < 0)[0])
        children: dict[int, list[int]] = {p: [] for p in range(n)}
        for p in nonroot:
            children[int(parent[p])].append(p)
        off = len(src)
        up = {p: off + k for k, p in enumerate(nonroot)}                   # reduce: p -> parent
        down = {p: off + len(nonroot) + k for k, p in enumerate(nonroot)}  # broadcast: parent -> p
        for p in nonroot:
            src.append(node[p])
            dst.append(node[parent[p]])
            same.append([up[c] for c in children[p]])
        for p in nonroot:
            src.append(node[parent[p]])
            dst.append(node[p])
            q = int(parent[p])
            same.append([up[c] for c in children[root]] if q == root else [down[q]])
    T = len(src)
    prev = (np.arange(T + 1, dtype=np.int64), np.arange(T, dtype=np.int64))
    return _templated(b, devices, np.array(src), np.array(dst), size / (2 * chunks), chunks, _csr(same), prev, entry)


def _all_pairs(b: _Builder, devices: np.ndarray, n: int, size: float, entry):
    if n < 2:
        return entry
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    off = i != j
    src, dst = i[off], j[off]
    none = _empty_entry(src.size)
    return _templated(b, devices, src, dst, size, 1, none, none, entry)


def domain_rows(devices: np.ndarray, domain: np.ndarray) -> list[np.ndarray]:
    """Rank positions per domain, domains in order of first appearance (rows may differ in length).

    Ranks share a row when their devices share the Fabric's ``domain`` group
    (a device outside any domain is a domain of its own).
    """
    dom = domain[np.asarray(devices)].copy()
    alone = dom < 0
    dom[alone] = -1 - np.flatnonzero(alone)
    _, first, inv = np.unique(dom, return_index=True, return_inverse=True)
    row = np.argsort(np.argsort(first))[inv]
    order = np.lexsort((np.arange(dom.size), row))
    return np.split(order, np.cumsum(np.bincount(row))[:-1])


def domain_matrix(devices: np.ndarray, domain: np.ndarray) -> np.ndarray:
    """Rank positions as a (domains, h) matrix (:func:`domain_rows`, every domain holding ``h`` ranks)."""
    rows = domain_rows(devices, domain)
    counts = {r.size for r in rows}
    if len(counts) != 1 or 0 in counts:
        raise FabricError("algorithm", "hierarchical needs the same number of ranks in every HBD domain "
                                       f"(got {sorted(counts)})")
    return np.stack(rows)


def hierarchical_domains(devices: np.ndarray, domain: np.ndarray | None) -> np.ndarray:
    """Rank positions by HBD domain, shape (m, h), shared by every group (row of ``devices``) as hierarchical
    all-reduce needs; :class:`FabricError` naming ``algorithm`` otherwise."""
    if domain is None:
        raise FabricError("algorithm", "hierarchical needs the Fabric's domain grouping")
    groups = domain_matrix(devices[0], domain)
    for g in range(1, devices.shape[0]):
        if not np.array_equal(domain_matrix(devices[g], domain), groups):
            raise FabricError("algorithm", "hierarchical groups must split into HBD domains alike")
    return groups


def default_algorithm(name: str) -> Algorithm:
    """The first algorithm of :data:`ALGORITHMS` for a collective (ring, or direct)."""
    return ALGORITHMS[CollectiveName.parse(name)][0]


def collective_flows(coll: Collective, devices: np.ndarray, domain: np.ndarray | None = None,
                     tags=0, algorithm: str | None = None) -> FlowTable:
    """The flow DAG of one collective, or of the same collective in several groups at once.

    Parameters
    ----------
    coll : Collective
        What to run (its ``ranks`` are not read here).
    devices : ndarray of int, shape (n,) or (G, n)
        Device ids of the ranks, one row per group.
    domain : ndarray of int, optional
        The Fabric's ``domain`` group per device (needed for ``hierarchical``;
        every group must split into domains the same way as the first).
    tags : int or array_like of int, shape (G,)
        Written into the ``tag`` of each group's flows.
    algorithm : str, optional
        The algorithm to lay out (default the collective's own; ``auto``
        means :func:`default_algorithm`).  NVLS is built by
        :func:`fabric.sim.nccl.time_nvls`.
    """
    devices = np.atleast_2d(np.asarray(devices, dtype=np.int64))
    G, n = devices.shape
    b = _Builder(float(coll.start_s), np.broadcast_to(np.asarray(tags, dtype=np.int64), (G,)), n)
    flat = devices.ravel()
    S = float(coll.size)
    algo = algorithm or coll.resolved_algorithm
    if algo == Algorithm.AUTO:
        algo = default_algorithm(coll.name)
    entry = _empty_entry(G * n)
    pos = np.arange(n)
    name = coll.name
    AR, RS, AG = CollectiveName.ALL_REDUCE, CollectiveName.REDUCE_SCATTER, CollectiveName.ALL_GATHER
    if name == AR and algo == Algorithm.RING:
        _ring_phase(b, flat, pos[None, :], 2 * (n - 1), S / n, entry)
    elif name in (RS, AG) and algo == Algorithm.RING:
        _ring_phase(b, flat, pos[None, :], n - 1, S / n, entry)
    elif name == AR and algo == Algorithm.HIERARCHICAL:
        groups = hierarchical_domains(devices, domain)
        m, h = groups.shape
        e1 = _ring_phase(b, flat, groups, h - 1, S / h, entry)
        e2 = _ring_phase(b, flat, groups.T.copy(), 2 * (m - 1), S / h / m, e1)
        _ring_phase(b, flat, groups, h - 1, S / h, e2)
    elif name == AR and algo == Algorithm.TREE:
        _double_binary_tree(b, flat, n, S, coll.pieces, entry)
    elif name == AR and algo == Algorithm.DIRECT:
        _all_pairs(b, flat, n, S, entry)
    elif name in (RS, AG, CollectiveName.ALL_TO_ALL) and algo == Algorithm.DIRECT:
        _all_pairs(b, flat, n, S / n, entry)
    elif name == CollectiveName.BROADCAST:
        order = np.roll(pos, -int(coll.root))
        if algo == Algorithm.RING:
            _chain_broadcast(b, flat, order, S, coll.pieces, entry)
        else:
            _heap_broadcast(b, flat, order, S, coll.pieces, entry)
    elif name == CollectiveName.SEND_RECV:
        if n >= 2:
            none = _empty_entry(n - 1)
            _templated(b, flat, pos[:-1], pos[1:], S, 1, none, none, entry)
    else:  # pragma: no cover - validate() rejects these
        raise FabricError("algorithm", f"{algo!r} is not available for {name}")
    return b.table()
