"""GPU-centric torus (TPUv3 / Dojo-like): a fault takes out every TP ring through it.

Policy modelled: **whole rings**.  TP groups are laid along the first torus
dimension (``dims[0]``, the dimension a host's GPUs share): a *line* is the
ring of ``dims[0]`` GPUs with the same other coordinates.

* ``TP <= dims[0]``: a fault-free line holds ``floor(dims[0] / TP)`` groups;
  a line with any unavailable GPU holds none.
* ``dims[0] < TP <= dims[0] * dims[1]`` (TP a multiple of ``dims[0]``): a group
  is ``TP / dims[0]`` adjacent fault-free lines along the second dimension of
  one plane (adjacent: a torus cannot skip a line; the second dimension wraps
  when the torus does), i.e. the line rule of :mod:`~solvers.allocation.segments`
  with ``k = 1`` over lines.
* larger TP (3-D tori, a multiple of ``dims[0] * dims[1]``): adjacent
  fault-free planes along the third dimension.

Why whole rings: a GPU-centric torus has no switch or OCS to route around a
dead GPU, so a fault opens every ring through it; TP collectives on a torus
run as rings along a dimension, a ring opened into a path runs at half the
bandwidth (no wrap-around link) and systems of this kind hand out whole rings
and slices (FIGURES: fault isolation of a GPU-centric torus is a whole torus
dimension).  The alternative we do not model, packing short paths into the
healthy stretches of an opened ring, would behave like the k = 1 ring.

Layout assumption (how ``topologies.torus`` builds it; custom torus files must
follow it): GPUs in id order are the torus coordinates with the first
dimension fastest, so GPU ``i`` is on line ``i // dims[0]``.

Boundaries (a broken link across lines or planes, see ``effects``): position
``b < n_lines`` stops groups from spanning line ``b`` and the line before it
along the second dimension; ``n_lines + z`` does the same for plane ``z``.
"""

from __future__ import annotations

import numpy as np

from fabric.errors import FabricError
from fabric.faults import NodeIndex
from fabric.model import Fabric
from solvers.allocation.base import FaultBatch, Policy, sorted_runs
from solvers.allocation.segments import count_line_blocks, line_blocks


class TorusPolicy(Policy):
    kind = "torus"
    rule = "whole rings: TP groups in fault-free lines of dims[0] GPUs (adjacent lines/planes for larger TP)"

    def __init__(self, fabric: Fabric, nodes: NodeIndex):
        super().__init__(fabric, nodes)
        dims = tuple(int(d) for d in self.hbd.dims)
        if not dims or int(np.prod(dims)) != nodes.n_gpus:
            raise FabricError("hbd", f"torus dims {dims} do not multiply to the {nodes.n_gpus} GPUs")
        self.dims = dims + (1,) * (3 - len(dims))
        X, Y, Z = self.dims
        self.X, self.Y, self.Z = X, Y, Z
        self.n_lines = Y * Z
        self.n_planes = Z
        self.line_of_gpu = np.arange(nodes.n_gpus, dtype=np.int64) // X
        first = nodes.node_gpus[nodes.node_indptr[:-1]]
        self.line_of_node = self.line_of_gpu[first]
        if np.any(self.line_of_gpu != self.line_of_node[nodes.node_of_gpu]):
            raise FabricError("hbd", "torus: a host's GPUs must lie on one line of the first dimension")
        self._monotone = bool(np.all(np.diff(self.line_of_node) >= 0))
        # wrap-around along a dimension only when the torus wraps and the ring has more than two members
        self.closed_y = bool(self.hbd.closed) and Y > 2
        self.closed_z = bool(self.hbd.closed) and Z > 2

    @property
    def n_boundaries(self) -> int:
        return self.n_lines + self.n_planes

    def _check_tp_kind(self, tp: int) -> None:
        X, Y = self.X, self.Y
        if X < tp <= X * Y and tp % X:
            raise FabricError("tp", f"{tp}: TP groups larger than a torus line ({X} GPUs) must be whole lines "
                                      f"(a multiple of {X})")
        if tp > X * Y and tp % (X * Y):
            raise FabricError("tp", f"{tp}: TP groups larger than a torus plane ({X * Y} GPUs) must be whole "
                                      f"planes (a multiple of {X * Y})")

    def _faulty_lines(self, batch: FaultBatch) -> tuple[np.ndarray, np.ndarray]:
        fn = batch.unit_nodes(self.nodes)
        keys = fn.row_of_entries() * np.int64(self.n_lines) + self.line_of_node[fn.indices]
        if not self._monotone:
            keys = np.sort(keys)
        bad, _ = sorted_runs(keys)
        return bad // self.n_lines, bad % self.n_lines

    def _markers(self, batch: FaultBatch, planes: bool) -> tuple[np.ndarray, np.ndarray]:
        if batch.boundaries is None or batch.boundaries.nnz == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        r, b = batch.boundaries.row_of_entries(), batch.boundaries.indices
        sel = b >= self.n_lines if planes else b < self.n_lines
        return r[sel], b[sel]

    def count(self, tp: int, batch: FaultBatch) -> np.ndarray:
        X, Y, Z = self.dims
        rows, lines = self._faulty_lines(batch)
        S = batch.n_rows
        if tp <= X:
            bad = np.bincount(rows, minlength=S)
            return (self.n_lines - bad) * (X // tp * tp)
        if tp <= X * Y:
            m = tp // X
            mr, mb = self._markers(batch, planes=False)
            blocks = count_line_blocks(rows * Z + lines // Y, lines % Y, S * Z, Y, 1, m, self.closed_y,
                                       mr * Z + mb // Y, mb % Y)
            return blocks.reshape(S, Z).sum(axis=1) * tp
        m = tp // (X * Y)
        prow, _ = sorted_runs(rows * np.int64(Z) + lines // Y)
        mr, mb = self._markers(batch, planes=True)
        blocks = count_line_blocks(prow // Z, prow % Z, S, Z, 1, m, self.closed_z, mr, mb - self.n_lines)
        return blocks * tp

    def allocate(self, tp: int, avail: np.ndarray, boundaries: np.ndarray):
        X, Y, Z = self.dims
        line_ok = np.bincount(self.line_of_gpu[~avail], minlength=self.n_lines) == 0
        gpus_of_line = np.arange(self.nodes.n_gpus, dtype=np.int64).reshape(self.n_lines, X)
        if tp <= X:
            per = X // tp
            ok = np.flatnonzero(line_ok)
            groups = gpus_of_line[ok][:, :per * tp].reshape(-1, tp)
            return groups, np.repeat(ok, per).reshape(-1, 1), "line"
        if tp <= X * Y:
            m = tp // X
            blocks = []
            for z in range(Z):
                lines = z * Y + np.arange(Y)
                blk = line_blocks(line_ok[lines], 1, m, self.closed_y, boundaries[lines])
                blocks.append(lines[blk])
            units = np.concatenate(blocks).reshape(-1, m)
            return gpus_of_line[units].reshape(-1, tp), units, "line"
        m = tp // (X * Y)
        plane_ok = line_ok.reshape(Z, Y).all(axis=1)
        blk = line_blocks(plane_ok, 1, m, self.closed_z, boundaries[self.n_lines:])
        gpus_of_plane = np.arange(self.nodes.n_gpus, dtype=np.int64).reshape(Z, X * Y)
        return gpus_of_plane[blk].reshape(-1, tp), blk, "plane"
