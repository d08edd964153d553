"""Fault models: which components are down, sampled i.i.d. by ratio and seeded.

A *fault set* says which components of a Fabric are down.  Monte Carlo needs
thousands of them at once, so a batch is a sparse boolean matrix
(:class:`FaultSamples`: rows = samples, columns = positions of one component
type) rather than a Python set per sample.

Component types (:data:`COMPONENTS`) and their positions (:func:`universe`):

========== ===================================================================
gpu        every GPU device
node       every server / compute tray / host: the ``node`` grouping of GPUs,
           renumbered 0..n_nodes-1 in ascending group id (:class:`NodeIndex`)
rack       every rack id carried by GPUs
switch     every HBD switch *tray*: the Fabric's switch chips in id order, cut
           into trays of ``chips / trays`` chips, where the tray count is the
           bill-of-materials lines of category ``switch_tray`` (one chip per
           unit when there are none, e.g. DGX baseboards)
tor        every ToR device
ocs        every OCS device
link       every physical HBD-layer link (static, candidate or OCS-port
           fibre); scale-out links are covered by ``tor``
transceiver k-hop lines: every OCS transceiver, ``trx_per_gpu`` per GPU
           (from the bill of materials), position ``gpu * trx + slot``, slot
           ``2 * lane + (0 forward | 1 backward)``; other fabrics: the
           non-OCS end of every HBD fibre (its loss is that fibre's loss)
========== ===================================================================

What a failure *does* (drain a node, cut a ring, lower bandwidth) depends on
the HBD kind and lives with the allocation policies
(``solvers.allocation.effects``); this module only samples and indexes.

Sampling
--------
``bernoulli`` (default): every position fails independently with probability
``ratio``.  Drawn as geometric gaps between consecutive failures, which has
exactly the Bernoulli law and costs O(failures) instead of O(positions).
``exact``: every sample has exactly ``round(ratio * n)`` failures, a uniform
subset (drawn with replacement, duplicates redrawn until none is left: the
procedure commutes with any relabelling of positions, so the result is
uniform over subsets of that size).

Everything takes ``seed`` and draws from ``numpy.random.default_rng`` (one
child stream per component type, spawned in :data:`COMPONENTS` order, so
adding a ratio for one type does not change the draws of another): the same
inputs and seed give the same fault sets, bit for bit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Mapping

import numpy as np

from fabric.checks import is_number, whole
from fabric.checks import ratio as check_ratio
from fabric.errors import FabricError
# what can fail, how ratios are drawn, the default sample count: names the CLI shows without importing numpy
from fabric.fault_names import COMPONENTS, DEFAULT_SAMPLES, MODES, FaultComponent  # noqa: F401
from fabric.model import DeviceKind, Fabric, HBDKind, Layer, Medium


@dataclass(frozen=True)
class FaultSamples:
    """A batch of fault sets: a sparse boolean matrix in CSR form.

    Row ``i`` lists the failed positions of sample ``i`` (ascending, unique)
    as ``indices[indptr[i]:indptr[i + 1]]``.

    Attributes
    ----------
    n_cols : int
        Number of positions (components of one type).
    indptr : ndarray of int64, shape (n_rows + 1,)
    indices : ndarray of int64, shape (nnz,)
    """

    n_cols: int
    indptr: np.ndarray
    indices: np.ndarray

    # ----------------------------------------------------------------- builders
    @classmethod
    def empty(cls, n_rows: int, n_cols: int) -> "FaultSamples":
        """``n_rows`` fault-free samples."""
        return cls(int(n_cols), np.zeros(n_rows + 1, dtype=np.int64), np.zeros(0, dtype=np.int64))

    @classmethod
    def from_rows(cls, rows: Iterable[Iterable[int]], n_cols: int) -> "FaultSamples":
        """From one iterable of failed positions per sample (sorted and deduplicated here)."""
        lists = [np.unique(np.asarray(list(r), dtype=np.int64)) for r in rows]
        counts = np.array([a.size for a in lists], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        indices = np.concatenate(lists) if lists else np.zeros(0, dtype=np.int64)
        out = cls(int(n_cols), indptr, indices.astype(np.int64))
        out._check()
        return out

    @classmethod
    def from_pairs(cls, rows: np.ndarray, cols: np.ndarray, n_rows: int, n_cols: int) -> "FaultSamples":
        """From (row, position) pairs in any order; duplicates are merged."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        if rows.size and (rows.min() < 0 or rows.max() >= n_rows or cols.min() < 0 or cols.max() >= n_cols):
            raise ValueError("row or position out of range")
        keys = np.unique(rows * np.int64(n_cols) + cols) if rows.size else np.zeros(0, dtype=np.int64)
        return cls._from_sorted_keys(keys, n_rows, n_cols)

    @classmethod
    def _from_sorted_keys(cls, keys: np.ndarray, n_rows: int, n_cols: int) -> "FaultSamples":
        n_cols = int(n_cols)
        if n_cols == 0:
            return cls.empty(n_rows, 0)
        r = keys // n_cols
        indptr = np.searchsorted(r, np.arange(n_rows + 1), side="left").astype(np.int64)
        return cls(n_cols, indptr, (keys - r * n_cols).astype(np.int64))

    @classmethod
    def from_dense(cls, matrix: np.ndarray) -> "FaultSamples":
        """From a boolean (samples x positions) matrix."""
        m = np.asarray(matrix, dtype=bool)
        if m.ndim != 2:
            raise ValueError("need a 2-D boolean matrix")
        r, c = np.nonzero(m)
        indptr = np.concatenate([[0], np.cumsum(m.sum(axis=1))]).astype(np.int64)
        return cls(int(m.shape[1]), indptr, c.astype(np.int64))

    def _check(self) -> None:
        if self.indices.size and (self.indices.min() < 0 or self.indices.max() >= self.n_cols):
            raise ValueError("position out of range")

    # ------------------------------------------------------------------ access
    @property
    def n_rows(self) -> int:
        return int(self.indptr.size - 1)

    @property
    def nnz(self) -> int:
        return int(self.indices.size)

    def counts(self) -> np.ndarray:
        """Failed positions per sample."""
        return np.diff(self.indptr)

    def row_of_entries(self) -> np.ndarray:
        """Sample index of every stored entry (same order as ``indices``)."""
        return np.repeat(np.arange(self.n_rows, dtype=np.int64), self.counts())

    def keys(self) -> np.ndarray:
        """``row * n_cols + position`` per entry: sorted, unique (handy for membership tests)."""
        return self.row_of_entries() * np.int64(self.n_cols) + self.indices

    def row(self, i: int) -> np.ndarray:
        return self.indices[self.indptr[i]:self.indptr[i + 1]]

    def dense(self) -> np.ndarray:
        """The boolean (samples x positions) matrix (for small batches and tests)."""
        m = np.zeros((self.n_rows, self.n_cols), dtype=bool)
        m[self.row_of_entries(), self.indices] = True
        return m

    def rows(self, lo: int, hi: int) -> "FaultSamples":
        """The samples ``lo..hi-1`` as a new batch (a view of the same entries)."""
        a, b = int(self.indptr[lo]), int(self.indptr[hi])
        return FaultSamples(self.n_cols, self.indptr[lo:hi + 1] - a, self.indices[a:b])

    def take(self, rows: np.ndarray) -> "FaultSamples":
        """The samples ``rows`` (in that order) as a new batch."""
        rows = np.asarray(rows, dtype=np.int64)
        parts = [self.row(int(i)) for i in rows]
        counts = np.array([p.size for p in parts], dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        indices = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        return FaultSamples(self.n_cols, indptr, indices.astype(np.int64))

    # ----------------------------------------------------------- transforms
    def map_to(self, mapping: np.ndarray, n_cols: int) -> "FaultSamples":
        """Send position ``p`` to ``mapping[p]`` (e.g. GPU -> node); ``-1`` drops it; merges duplicates."""
        mapping = np.asarray(mapping, dtype=np.int64)
        target = mapping[self.indices]
        keep = target >= 0
        return FaultSamples.from_pairs(self.row_of_entries()[keep], target[keep], self.n_rows, n_cols)

    def expand(self, members_indptr: np.ndarray, members: np.ndarray, n_cols: int) -> "FaultSamples":
        """Send position ``p`` to the set ``members[members_indptr[p]:members_indptr[p + 1]]`` (e.g. rack -> nodes)."""
        members_indptr = np.asarray(members_indptr, dtype=np.int64)
        lo, hi = members_indptr[self.indices], members_indptr[self.indices + 1]
        sizes = hi - lo
        rows = np.repeat(self.row_of_entries(), sizes)
        starts = np.repeat(lo - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) if sizes.size else lo
        cols = np.asarray(members, dtype=np.int64)[np.arange(int(sizes.sum())) + starts]
        return FaultSamples.from_pairs(rows, cols, self.n_rows, n_cols)

    def union(self, other: "FaultSamples") -> "FaultSamples":
        """Sample-by-sample union of two batches over the same positions."""
        if other.n_rows != self.n_rows or other.n_cols != self.n_cols:
            raise ValueError("batches differ in shape")
        keys = np.union1d(self.keys(), other.keys())
        return FaultSamples._from_sorted_keys(keys, self.n_rows, self.n_cols)

    def contains(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Whether position ``cols[i]`` is failed in sample ``rows[i]`` (vectorised)."""
        rows = np.asarray(rows, dtype=np.int64)
        cols = np.asarray(cols, dtype=np.int64)
        inside = (cols >= 0) & (cols < self.n_cols)
        q = rows * np.int64(self.n_cols) + np.clip(cols, 0, max(self.n_cols - 1, 0))
        keys = self.keys()
        if keys.size == 0:
            return np.zeros(q.shape, dtype=bool)
        j = np.searchsorted(keys, q)
        hit = keys[np.minimum(j, keys.size - 1)] == q
        return hit & inside


# ------------------------------------------------------------------------------------------ sampling
def exact_count(n: int, ratio: float) -> int:
    """Failures per sample in ``exact`` mode: ``ratio * n`` rounded half up."""
    return int(np.floor(ratio * n + 0.5))


def sample_iid(n: int, ratio: float, samples: int, seed=0, *, mode: str = "bernoulli",
               field: str = "ratio") -> FaultSamples:
    """Sample ``samples`` fault sets over ``n`` positions, each failing with ``ratio``.

    Parameters
    ----------
    n : int
        Number of positions (e.g. nodes).
    ratio : float
        Failure probability per position (``bernoulli``), or the fraction
        failed in every sample (``exact``, rounded half up), in [0, 1].
    samples : int
        Number of samples (rows), >= 1.
    seed : int or numpy.random.SeedSequence
        Seed of the ``numpy.random.default_rng`` stream.
    mode : {'bernoulli', 'exact'}
    field : str
        Name used in the error if ``ratio`` is out of range.

    Returns
    -------
    FaultSamples

    Examples
    --------
    >>> fs = sample_iid(10, 0.5, 3, seed=1, mode="exact")
    >>> fs.counts().tolist()
    [5, 5, 5]
    """
    sampler = IIDSampler(n, ratio, seed, mode=mode, field=field)
    return vstack([sampler.draw(rows) for rows in chunk_sizes(samples)], n)


BYTES_PER_SAMPLE_POSITION = 8
"""Bytes per sample and per node or drawn position in the size estimate (int64 arrays)."""

CHUNK_ROWS = 256
"""Samples drawn (and evaluated) per batch: keeps the working arrays in cache and memory bounded.

Part of the sampling procedure: results depend on it, so it is a constant."""


def chunk_sizes(samples: int) -> list[int]:
    """Row counts of the fixed-size batches that make up ``samples`` samples."""
    samples = whole(samples, "samples")  # None, a list, NaN or "abc": refused, not a TypeError
    return [min(CHUNK_ROWS, samples - lo) for lo in range(0, samples, CHUNK_ROWS)]


def vstack(parts: list[FaultSamples], n_cols: int) -> FaultSamples:
    """Stack batches of fault sets over the same positions, rows in order."""
    if not parts:
        return FaultSamples.empty(0, n_cols)
    counts = np.concatenate([p.counts() for p in parts])
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return FaultSamples(int(n_cols), indptr, np.concatenate([p.indices for p in parts]).astype(np.int64))


class IIDSampler:
    """A seeded stream of i.i.d. fault sets over ``n`` positions, drawn batch by batch.

    Drawing ``a`` rows then ``b`` rows gives the same fault sets as the
    batches of :func:`chunk_sizes` would when their sizes agree; callers use
    :func:`chunk_sizes` so that results never depend on how they iterate.
    """

    def __init__(self, n: int, ratio: float, seed=0, *, mode: str = "bernoulli", field: str = "ratio"):
        self.ratio = check_ratio(ratio, field)
        if mode not in MODES:
            raise FabricError("mode", f"{mode!r} not allowed; use one of {', '.join(MODES)}")
        self.n = int(n)
        self.mode = mode
        self.rng = np.random.default_rng(seed)

    def draws_per_row(self) -> int:
        """Positions drawn per sample (for the size estimate of :func:`check_sampling_size`)."""
        n, r = self.n, self.ratio
        if n == 0 or r == 0.0:
            return 0
        if self.mode == "exact":
            c = exact_count(n, r)
            return n if c > n // 2 else c  # the complement path builds a dense row
        if r == 1.0:
            return n
        return _bernoulli_width(n, r)

    def draw(self, rows: int) -> FaultSamples:
        n, r = self.n, self.ratio
        if n == 0 or r == 0.0:
            return FaultSamples.empty(rows, n)
        if self.mode == "exact":
            return _sample_exact(self.rng, n, exact_count(n, r), rows)
        if r == 1.0:
            return FaultSamples(n, np.arange(rows + 1, dtype=np.int64) * n, np.tile(np.arange(n, dtype=np.int64), rows))
        return _sample_bernoulli(self.rng, n, r, rows)


def _bernoulli_width(n: int, p: float) -> int:
    """Geometric draws per row: mean + 8 sigma + 16 (rows that need more get more)."""
    mean = n * p
    return int(np.ceil(mean + 8.0 * np.sqrt(mean * (1 - p)) + 16))


def _sample_bernoulli(rng: np.random.Generator, n: int, p: float, rows: int) -> FaultSamples:
    """Bernoulli(p) on n positions per row, as cumulative sums of Geometric(p) gaps."""
    width = _bernoulli_width(n, p)
    # a gap past n ends the row whatever its length: clipping it to n + 1 keeps every result bit for bit and
    # stops the int64 overflow of tiny p (geometric(1e-300) saturates at 2**63 - 1, whose cumsum wraps negative)
    pos = np.cumsum(np.minimum(rng.geometric(p, size=(rows, width)), n + 1), axis=1, dtype=np.int64) - 1
    short = np.flatnonzero(pos[:, -1] < n)  # rows whose draws did not pass the last position yet
    if short.size:  # rare: a row with far more failures than mean + 8 sigma
        parts = [pos]
        last = pos[:, -1:].copy()
        while np.any(last[:, 0] < n):
            nxt = last + np.cumsum(np.minimum(rng.geometric(p, size=(rows, width)), n + 1), axis=1, dtype=np.int64)
            parts.append(nxt)
            last = nxt[:, -1:]
        pos = np.concatenate(parts, axis=1)
    mask = pos < n
    counts = mask.sum(axis=1)
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    return FaultSamples(n, indptr, pos[mask])


def _sample_exact(rng: np.random.Generator, n: int, c: int, samples: int) -> FaultSamples:
    """Uniform c-subsets of n positions per row (complement when c > n / 2)."""
    flip = c > n // 2
    want = n - c if flip else c
    if want == 0:
        sets = np.zeros((samples, 0), dtype=np.int64)
    else:
        sets = np.sort(rng.integers(0, n, size=(samples, want), dtype=np.int64), axis=1)
        while True:
            dup = np.zeros(sets.shape, dtype=bool)
            dup[:, 1:] = sets[:, 1:] == sets[:, :-1]
            k = int(dup.sum())
            if k == 0:
                break
            sets[dup] = rng.integers(0, n, size=k, dtype=np.int64)
            sets.sort(axis=1)
    if not flip:
        indptr = np.arange(samples + 1, dtype=np.int64) * want
        return FaultSamples(n, indptr, sets.ravel())
    dense = np.ones((samples, n), dtype=bool)
    dense[np.repeat(np.arange(samples), want), sets.ravel()] = False
    return FaultSamples.from_dense(dense)


# ---------------------------------------------------------------------------------------- the Fabric
@dataclass(frozen=True)
class NodeIndex:
    """GPUs and their nodes, renumbered densely: the unit a node fault takes down.

    Attributes
    ----------
    gpu_ids : ndarray of int
        GPU device ids, ascending; "GPU index" below means a position here.
    node_of_gpu : ndarray of int
        Dense node index (0..n_nodes-1) of each GPU.
    node_group : ndarray of int
        The Fabric's ``node`` group id of each dense node (GPUs without one
        get a node of their own, with group id -1).
    node_indptr, node_gpus : ndarray of int
        GPU indices of node ``j``: ``node_gpus[node_indptr[j]:node_indptr[j + 1]]``.
    """

    gpu_ids: np.ndarray
    node_of_gpu: np.ndarray
    node_group: np.ndarray
    node_indptr: np.ndarray
    node_gpus: np.ndarray

    @classmethod
    def of(cls, fabric: Fabric) -> "NodeIndex":
        gpu_ids = fabric.gpu_ids
        groups = fabric.group("node")[gpu_ids].astype(np.int64)
        # a GPU with no node (custom topologies) is its own node, sorted after the real ones
        key = np.where(groups >= 0, groups, groups.max(initial=0) + 1 + np.arange(gpu_ids.size))
        uniq, node_of_gpu = np.unique(key, return_inverse=True)
        node_group = np.where(uniq <= groups.max(initial=-1), uniq, -1)
        order = np.argsort(node_of_gpu, kind="stable")
        sizes = np.bincount(node_of_gpu, minlength=uniq.size)
        indptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return cls(gpu_ids, node_of_gpu.astype(np.int64), node_group.astype(np.int64), indptr,
                   order.astype(np.int64))

    @property
    def n_gpus(self) -> int:
        return int(self.gpu_ids.size)

    @property
    def n_nodes(self) -> int:
        return int(self.node_group.size)

    @property
    def node_size(self) -> np.ndarray:
        return np.diff(self.node_indptr)

    @property
    def uniform_size(self) -> int:
        """GPUs per node when every node has as many, else 0."""
        s = self.node_size
        return int(s[0]) if s.size and np.all(s == s[0]) else 0

    def gpus_of_nodes(self, nodes: np.ndarray) -> np.ndarray:
        """GPU indices of the dense nodes ``nodes`` (concatenated)."""
        nodes = np.asarray(nodes, dtype=np.int64)
        if nodes.size == 0:
            return np.zeros(0, dtype=np.int64)
        return np.concatenate([self.node_gpus[self.node_indptr[j]:self.node_indptr[j + 1]] for j in nodes])

    def gpu_index(self, device_ids: np.ndarray) -> np.ndarray:
        """GPU index of GPU device ids (raises FabricError for non-GPUs)."""
        device_ids = np.asarray(device_ids, dtype=np.int64)
        j = np.searchsorted(self.gpu_ids, device_ids)
        ok = (j < self.gpu_ids.size) & (self.gpu_ids[np.minimum(j, self.gpu_ids.size - 1)] == device_ids)
        if not np.all(ok):
            raise FabricError("gpus", f"device ids {device_ids[~ok][:5].tolist()} are not GPUs")
        return j

    def node_index(self, node_groups: np.ndarray) -> np.ndarray:
        """Dense node index of ``node`` group ids (raises FabricError for unknown ones)."""
        node_groups = np.asarray(node_groups, dtype=np.int64)
        real = self.node_group[self.node_group >= 0]
        j = np.searchsorted(real, node_groups)
        ok = (j < real.size) & (real[np.minimum(j, max(real.size - 1, 0))] == node_groups) if real.size else \
            np.zeros(node_groups.shape, dtype=bool)
        if not np.all(ok):
            raise FabricError("nodes", f"{node_groups[~ok][:5].tolist()} are not nodes with GPUs")
        return j


@dataclass(frozen=True)
class Universe:
    """The positions of one component type in a Fabric (see the module docstring).

    Attributes
    ----------
    component : str
    size : int
        Number of positions.
    ids : ndarray of int
        Per position: device id (gpu, tor, ocs), dense node (node), rack id
        (rack), link id (link, non-k-hop transceiver), GPU index (k-hop
        transceiver), tray index (switch).
    members : ndarray of int, shape (size, m), optional
        ``switch``: the chip device ids of each tray.
    slot : ndarray of int, optional
        k-hop ``transceiver``: ``2 * lane + direction`` (0 forward, 1 backward).
    """

    component: str
    size: int
    ids: np.ndarray
    members: np.ndarray | None = None
    slot: np.ndarray | None = None
    note: str = ""


def chips_per_tray(fabric: Fabric) -> int:
    """Switch chips per tray: chips / trays in the bill of materials (1 when no tray lines)."""
    chips = int(np.count_nonzero(fabric.devices.kind == DeviceKind.SWITCH_CHIP))
    trays = sum(int(line.count) for line in fabric.bom if line.category == "switch_tray")
    if chips == 0 or trays == 0 or chips % trays:
        return 1
    return chips // trays


def transceivers_per_gpu(fabric: Fabric) -> int:
    """OCS transceivers per GPU of a k-hop line (bill of materials), 0 if none."""
    n = sum(int(line.count) for line in fabric.bom if line.category == "ocs_transceiver")
    g = fabric.n_gpus
    return n // g if g and n % g == 0 else 0


def universe(fabric: Fabric, component: str, nodes: NodeIndex | None = None) -> Universe:
    """The positions of ``component`` in ``fabric``.

    Raises
    ------
    FabricError
        For an unknown component type.
    """
    if component not in COMPONENTS:
        raise FabricError("component", f"{component!r} not allowed; use one of {', '.join(COMPONENTS)}")
    kind = fabric.devices.kind
    L = fabric.links
    if component == "gpu":
        ids = fabric.gpu_ids
        return Universe(component, int(ids.size), ids)
    if component == "node":
        n = (nodes or NodeIndex.of(fabric)).n_nodes
        return Universe(component, n, np.arange(n, dtype=np.int64))
    if component == "rack":
        racks = fabric.group("rack")[fabric.gpu_ids]
        ids = np.unique(racks[racks >= 0])
        return Universe(component, int(ids.size), ids)
    if component == "switch":
        chips = fabric.ids_of(DeviceKind.SWITCH_CHIP)
        cpt = chips_per_tray(fabric)
        members = chips.reshape(-1, cpt) if chips.size else np.zeros((0, 1), dtype=np.int64)
        return Universe(component, int(members.shape[0]), np.arange(members.shape[0], dtype=np.int64), members,
                        note=f"{cpt} switch chip(s) per tray")
    if component == "tor":
        ids = fabric.ids_of(DeviceKind.TOR)
        return Universe(component, int(ids.size), ids)
    if component == "ocs":
        ids = fabric.ids_of(DeviceKind.OCS)
        return Universe(component, int(ids.size), ids)
    hbd_links = np.flatnonzero(L.layer == Layer.HBD)
    if component == "link":
        return Universe(component, int(hbd_links.size), hbd_links)
    # transceiver
    if fabric.hbd.kind == HBDKind.KHOP_LINE:
        trx = transceivers_per_gpu(fabric)
        g = fabric.gpu_ids.size
        idx = np.repeat(np.arange(g, dtype=np.int64), trx)
        slot = np.tile(np.arange(trx, dtype=np.int64), g)
        return Universe(component, int(idx.size), idx, slot=slot,
                        note=f"{trx} OCS transceivers per GPU ({trx // 2} lane(s), forward and backward)")
    fib = hbd_links[L.medium[hbd_links] == Medium.FIBER]
    # a fibre has a transceiver at every end that is not an OCS (an OCS is passive)
    ends = (kind[L.src[fib]] != DeviceKind.OCS).astype(np.int64) + (kind[L.dst[fib]] != DeviceKind.OCS)
    ids = np.repeat(fib, ends)
    return Universe(component, int(ids.size), ids, note="one per non-OCS end of each HBD fibre")


FAULT_KINDS = ("none", "iid", "trace")
"""What a :class:`FaultModel` draws: nothing, i.i.d. failures per component type, or a replayed trace."""


@dataclass(frozen=True)
class FaultModel:
    """Which components fail: none, i.i.d. ratios per component type, or a trace read at a time.

    Which of the three follows from the fields (:attr:`kind`): a ``trace``
    replays it; else ``ratios`` draw i.i.d. failures; else nothing fails.
    :func:`fabric.faultset.draw_faults` turns a model and a seed into fault sets.

    Attributes
    ----------
    ratios : mapping of str to float
        Component type (see :data:`COMPONENTS`) -> ratio in [0, 1].
    mode : {'bernoulli', 'exact'}
        Independent failures, or exactly ``round(ratio * n)`` per sample.
    trace : Trace or str, optional
        A :class:`fabric.trace.Trace`, a shipped trace name (``stepfun``) or a
        trace file, replayed on the nodes.
    trace_mapping : {'tile', 'sample'}
        How trace servers map onto nodes (:mod:`fabric.trace`), seeded.
    trace_time : float, optional
        Days: the moment a single fault set reads the trace at (default: the
        first moment with the most nodes down).

    Examples
    --------
    >>> FaultModel({"node": 0.01}).kind, FaultModel().kind, FaultModel(trace="stepfun").kind
    ('iid', 'none', 'trace')
    """

    ratios: Mapping[str, float] = field(default_factory=dict)
    mode: str = "bernoulli"
    trace: Any = None
    trace_mapping: str = "tile"
    trace_time: float | None = None

    def __post_init__(self):
        for comp, r in self.ratios.items():
            if comp not in COMPONENTS:
                raise FabricError("fault_ratios", f"{comp!r} is not a component; use one of {', '.join(COMPONENTS)}")
            check_ratio(r, f"fault_ratios[{comp}]" if comp != "node" else "node_fault_ratio")
        if self.mode not in MODES:
            raise FabricError("mode", f"{self.mode!r} not allowed; use one of {', '.join(MODES)}")
        if self.trace is not None and self.ratios:
            raise FabricError("trace", "give either a trace or fault ratios, not both")
        if self.trace_time is not None and not (is_number(self.trace_time) and math.isfinite(self.trace_time)):
            raise FabricError("trace_time", f"{self.trace_time!r} must be a finite number of days")

    @property
    def kind(self) -> str:
        """``trace``, ``iid`` or ``none`` (one of :data:`FAULT_KINDS`)."""
        return "trace" if self.trace is not None else "iid" if self.ratios else "none"

    def to_dict(self) -> dict:
        return {"ratios": dict(self.ratios), "mode": self.mode}


def component_samplers(fabric: Fabric, model: FaultModel, seed=0,
                       nodes: NodeIndex | None = None) -> dict[str, IIDSampler]:
    """One seeded :class:`IIDSampler` per component type with a ratio in ``model``.

    Streams are the children of ``SeedSequence(seed)``, one per type in
    :data:`COMPONENTS` order.
    """
    children = np.random.SeedSequence(seed).spawn(len(COMPONENTS))
    nodes = nodes or NodeIndex.of(fabric)
    out: dict[str, IIDSampler] = {}
    for comp, child in zip(COMPONENTS, children):
        r = model.ratios.get(comp)
        if r is None:
            continue
        u = universe(fabric, comp, nodes)
        out[comp] = IIDSampler(u.size, r, child, mode=model.mode,
                               field="node_fault_ratio" if comp == "node" else f"fault_ratios[{comp}]")
    return out


def check_sampling_size(samples: int, n_nodes: int, samplers: Mapping[str, "IIDSampler"]) -> None:
    """Refuse, before any draw, a Monte Carlo run past the ``samples`` or ``memory`` limit (:mod:`fabric.limits`).

    The estimate is ``samples x (nodes + fault draws per sample) x 8 B``: the
    per-node arrays the allocation reads and the int64 failed positions of
    every sample (what a shared :class:`~fabric.faultset.FaultDraw` holds at
    once).  Evaluated batch by batch (:data:`CHUNK_ROWS`) the memory stays
    bounded, but the time grows with the same product, so the limit also keeps
    a run from going on for minutes: at the default 4 GiB (measured, DGX
    131,072 GPUs, 30,000 samples at 5 %, estimate 3.9 GB) a run takes about
    2 s; the 500,000-GPU x 10^6-sample request it refuses (492 GiB) would
    run for many minutes.

    Parameters
    ----------
    samples : int
    n_nodes : int
        Nodes of the Fabric.
    samplers : mapping of str to IIDSampler
        The component streams (:func:`component_samplers`).
    """
    from fabric import limits

    samples = whole(samples, "samples")  # None, a list, NaN or "abc": refused, not a TypeError
    limits.check("samples", samples, "samples")
    draws = sum(s.draws_per_row() for s in samplers.values())
    limits.check("memory", float(samples) * (n_nodes + draws) * BYTES_PER_SAMPLE_POSITION, "samples",
                 f"{samples:,} samples x ({n_nodes:,} nodes + {draws:,} fault draws) x "
                 f"{BYTES_PER_SAMPLE_POSITION} B")


def iter_components(fabric: Fabric, model: FaultModel, samples: int, seed=0,
                    nodes: NodeIndex | None = None) -> Iterator[dict[str, FaultSamples]]:
    """Batches of :func:`chunk_sizes` samples: type -> :class:`FaultSamples` (rows of this batch).

    Raises :class:`FabricError` (``samples``) before drawing when the run
    passes the limits (:func:`check_sampling_size`).
    """
    nodes = nodes or NodeIndex.of(fabric)
    samplers = component_samplers(fabric, model, seed, nodes)
    check_sampling_size(samples, nodes.n_nodes, samplers)
    sizes = chunk_sizes(samples)
    for rows in sizes:
        yield {comp: s.draw(rows) for comp, s in samplers.items()}


def sample_components(fabric: Fabric, model: FaultModel, samples: int, seed=0,
                      nodes: NodeIndex | None = None) -> dict[str, FaultSamples]:
    """Sample every component type with a ratio in ``model``: type -> :class:`FaultSamples`.

    The same fault sets as :func:`iter_components`, stacked.
    """
    nodes = nodes or NodeIndex.of(fabric)
    parts: dict[str, list[FaultSamples]] = {}
    sizes: dict[str, int] = {}
    for batch in iter_components(fabric, model, samples, seed, nodes):
        for comp, fs in batch.items():
            parts.setdefault(comp, []).append(fs)
            sizes[comp] = fs.n_cols
    return {comp: vstack(p, sizes[comp]) for comp, p in parts.items()}
