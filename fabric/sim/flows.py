"""Flows: the user-facing :class:`Flow` and the columnar :class:`FlowTable` the engine runs.

A flow moves ``bytes`` from device ``src`` to device ``dst``.  It is
*released* at ``max(start_s, finish of every flow it waits on)``; its data
transfer starts then, and it *finishes* when its last byte has been sent plus
its path latency (see :mod:`fabric.sim.engine`).  ``count`` makes one row a
class of identical parallel flows (same ends, same release), each of which
gets the rate the engine reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Hashable, Sequence

import numpy as np

from fabric.checks import whole
from fabric.errors import FabricError


@dataclass(frozen=True)
class Flow:
    """One flow for :func:`fabric.sim.simulate_flows`.

    Parameters
    ----------
    src, dst : int or str
        Device ids (``fabric.gpu_ids[i]`` is GPU ``i``) or device names
        (``fabric.device_names()``).
    bytes : float
        Bytes to move (>= 0).
    start_s : float
        Earliest start, seconds (>= 0).
    after : tuple
        Ids of flows (in the same list) that must finish first.
    id : hashable, optional
        Name of the flow for ``after``; default its position in the list.
    count : int
        Identical parallel flows this one stands for (>= 1).
    """

    src: int | str
    dst: int | str
    bytes: float
    start_s: float = 0.0
    after: tuple = ()
    id: Hashable | None = None
    count: int = 1


@dataclass
class FlowTable:
    """Flows as columns (what collectives generate and the engine consumes).

    Attributes
    ----------
    src, dst : ndarray of int
        Device ids.
    size : ndarray of float
        Bytes per flow (per member of a ``count`` class).
    start : ndarray of float
        Earliest start, seconds.
    dep_ptr, dep_idx : ndarray of int
        CSR: flow ``i`` waits for flows ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``.
    count : ndarray of int
        Identical flows per row.
    tag : ndarray of int
        Which collective / group a flow belongs to (-1: none).
    latency : ndarray of float, optional
        Extra latency of each flow, seconds, added to its path latency (the
        per-step software/protocol latency of a collective step; see
        :mod:`fabric.sim.nccl`).  None: zero.
    pair_of, pair_src, pair_dst : ndarray of int, optional
        A precomputed map of flows to their distinct (src, dst) pairs, which
        saves sorting millions of flows when a generator knows it.
    trusted : bool
        Made by a generator that guarantees valid values and acyclic,
        backward dependencies (:meth:`validate` then only checks the ends).
    """

    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray
    start: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    count: np.ndarray
    tag: np.ndarray
    pair_of: np.ndarray | None = None
    pair_src: np.ndarray | None = None
    pair_dst: np.ndarray | None = None
    trusted: bool = False
    latency: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.src.shape[0])

    @staticmethod
    def empty() -> "FlowTable":
        z = np.zeros(0, dtype=np.int64)
        return FlowTable(z, z, np.zeros(0), np.zeros(0), np.zeros(1, dtype=np.int64), z, z, z, z, z, z)

    @staticmethod
    def build(src, dst, size, start=0.0, deps: Sequence[Sequence[int]] | None = None, count=1,
              tag=-1) -> "FlowTable":
        """A table from per-flow values (scalars broadcast); ``deps[i]`` lists flow indices."""
        src = np.asarray(src, dtype=np.int64).ravel()
        n = src.size
        b = lambda v, dt: np.broadcast_to(np.asarray(v, dtype=dt), (n,)).copy()  # noqa: E731
        deps = deps or [()] * n
        if len(deps) != n:
            raise FabricError("after", f"{len(deps)} dependency lists for {n} flows")
        lens = np.array([len(d) for d in deps], dtype=np.int64)
        ptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
        idx = np.array([int(x) for d in deps for x in d], dtype=np.int64)
        return FlowTable(src, b(dst, np.int64), b(size, np.float64), b(start, np.float64), ptr, idx,
                         b(count, np.int64), b(tag, np.int64))

    @staticmethod
    def concat(tables: Sequence["FlowTable"], shift_deps: bool = True) -> "FlowTable":
        """One table with all flows; dependency indices (unless ``shift_deps`` is False: they are
        global already) and pair maps are shifted."""
        tables = [t for t in tables if len(t)]
        if not tables:
            return FlowTable.empty()
        if len(tables) == 1:
            return tables[0]
        offs = np.cumsum([0] + [len(t) for t in tables])
        dep_offs = np.cumsum([0] + [int(t.dep_ptr[-1]) for t in tables])
        cat = np.concatenate
        ptr = cat([tables[0].dep_ptr[:1]] + [t.dep_ptr[1:] + dep_offs[i] for i, t in enumerate(tables)])
        idx = cat([t.dep_idx + (offs[i] if shift_deps else 0) for i, t in enumerate(tables)])
        pairs = None
        if all(t.pair_of is not None for t in tables):
            poffs = np.cumsum([0] + [t.pair_src.size for t in tables])
            pairs = (cat([t.pair_of + poffs[i] for i, t in enumerate(tables)]),
                     cat([t.pair_src for t in tables]), cat([t.pair_dst for t in tables]))
        latency = None
        if any(t.latency is not None for t in tables):
            latency = cat([t.extra_latency() for t in tables])
        return FlowTable(cat([t.src for t in tables]), cat([t.dst for t in tables]), cat([t.size for t in tables]),
                         cat([t.start for t in tables]), ptr, idx, cat([t.count for t in tables]),
                         cat([t.tag for t in tables]), *(pairs or (None, None, None)),
                         trusted=all(t.trusted for t in tables), latency=latency)

    def extra_latency(self) -> np.ndarray:
        """Per-flow extra latency, seconds (zeros when the table has none)."""
        if self.latency is None:
            return np.broadcast_to(np.float64(0.0), (len(self),))
        return self.latency

    def validate(self, n_devices: int, field: str = "flows") -> None:
        """Raise :class:`FabricError` for out-of-range ends, sizes, starts or dependencies."""
        n = len(self)
        for name, arr in (("src", self.src), ("dst", self.dst)):
            if n and (arr.min() < 0 or arr.max() >= n_devices):
                raise FabricError(f"{field}.{name}", f"device ids must be in 0..{n_devices - 1}")
        if self.trusted:
            return
        if n and not np.all(np.isfinite(self.size) & (self.size >= 0)):
            raise FabricError(f"{field}.bytes", "must be finite numbers >= 0")
        if n and not np.all(np.isfinite(self.start) & (self.start >= 0)):
            raise FabricError(f"{field}.start_s", "must be finite numbers >= 0")
        if n and np.any(self.count < 1):
            raise FabricError(f"{field}.count", "must be whole numbers >= 1")
        if self.dep_idx.size and (self.dep_idx.min() < 0 or self.dep_idx.max() >= n):
            raise FabricError(f"{field}.after", "refers to a flow that does not exist")
        owner = np.repeat(np.arange(n), np.diff(self.dep_ptr))
        if np.any(owner == self.dep_idx):
            raise FabricError(f"{field}.after", "a flow cannot wait for itself")

    def pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(pair_of, pair_src, pair_dst): distinct (src, dst) pairs and each flow's pair."""
        if self.pair_of is not None:
            return self.pair_of, self.pair_src, self.pair_dst
        if len(self) == 0:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        big = int(max(self.src.max(), self.dst.max())) + 1
        keys, inv = np.unique(self.src * big + self.dst, return_inverse=True)
        return inv.astype(np.int64), keys // big, keys % big


def table_from_flows(flows: Sequence[Flow], resolve_device) -> tuple[FlowTable, list]:
    """Turn :class:`Flow` objects into a table; ``resolve_device(value, field)`` maps src/dst to ids.

    Returns the table and the flow ids in order.
    """
    ids = [f.id if f.id is not None else i for i, f in enumerate(flows)]
    index: dict = {}
    for i, fid in enumerate(ids):
        if fid in index:
            raise FabricError("flows.id", f"duplicate flow id {fid!r}")
        index[fid] = i
    deps = []
    for i, f in enumerate(flows):
        after = f.after if isinstance(f.after, (list, tuple)) else (f.after,)
        try:
            deps.append([index[a] for a in after])
        except KeyError as exc:
            raise FabricError(f"flows[{i}].after", f"unknown flow id {exc.args[0]!r}") from None
        except TypeError:
            raise FabricError(f"flows[{i}].after", "must list flow ids") from None
    src = [resolve_device(f.src, f"flows[{i}].src") for i, f in enumerate(flows)]
    dst = [resolve_device(f.dst, f"flows[{i}].dst") for i, f in enumerate(flows)]
    for i, f in enumerate(flows):
        for name, v in (("bytes", f.bytes), ("start_s", f.start_s), ("count", f.count)):
            if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)):
                raise FabricError(f"flows[{i}].{name}", f"{v!r} must be a number")
        if not (np.isfinite(f.bytes) and f.bytes >= 0):
            raise FabricError(f"flows[{i}].bytes", f"{f.bytes!r} must be a finite number >= 0")
        if not (np.isfinite(f.start_s) and f.start_s >= 0):
            raise FabricError(f"flows[{i}].start_s", f"{f.start_s!r} must be a finite number >= 0")
        whole(f.count, f"flows[{i}].count", 1)
    table = FlowTable.build(src, dst, [float(f.bytes) for f in flows], [float(f.start_s) for f in flows], deps,
                            [int(f.count) for f in flows])
    return table, ids
