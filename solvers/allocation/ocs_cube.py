"""TPUv4-style OCS cubes: slices of whole healthy cubes joined by OCS inside a pod.

Rule (FIGURES: TPUv4 slices are built from whole cubes; fault isolation and
reconfiguration at cube granularity):

* a cube with any unavailable host (a faulty chip drains its 4-chip host, and
  an ICI link fault breaks the cube's mesh) cannot join a slice;
* a slice is any set of healthy cubes of one OCS pod (the ``domain``
  grouping): the OCS can join any cubes of its pod, not cubes of two pods;
* TP groups live inside slices: ``TP <= 64`` gives ``floor(64 / TP)`` groups
  per healthy cube; a larger TP must be whole cubes (a multiple of 64) and
  gives ``floor(healthy cubes of the pod / (TP / 64))`` groups per pod.

Hence, with i.i.d. host faults of ratio ``p`` and TP = 64, a healthy host's
chips are usable iff the 15 other hosts of its cube are healthy: the expected
waste ratio is ``1 - (1 - p) ** 15``.
"""

from __future__ import annotations

import numpy as np

from fabric.errors import FabricError
from fabric.faults import NodeIndex
from fabric.model import Fabric
from solvers.allocation.base import FaultBatch, Policy, dense_ids, group_sum, sorted_runs


class OCSCubePolicy(Policy):
    kind = "ocs_cube"
    rule = "slices of whole healthy cubes within an OCS pod; TP groups inside slices"

    def __init__(self, fabric: Fabric, nodes: NodeIndex):
        super().__init__(fabric, nodes)
        gpus = nodes.gpu_ids
        cube = fabric.group("cube")[gpus]
        pod = fabric.group("domain")[gpus]
        if np.any(cube < 0):
            raise FabricError("hbd", "ocs_cube fabric: every GPU needs a cube group")
        self.cube_ids, self.cube_of_gpu = dense_ids(cube)
        self.n_cubes = int(self.cube_ids.size)
        self.cube_size = np.bincount(self.cube_of_gpu, minlength=self.n_cubes)
        self.C = int(self.hbd.cube_gpus) or int(self.cube_size.max())
        first_gpu = np.full(self.n_cubes, -1, dtype=np.int64)
        first_gpu[self.cube_of_gpu[::-1]] = np.arange(gpus.size)[::-1]
        pod = np.where(pod < 0, 0, pod)
        self.pod_ids, pod_of_first = dense_ids(pod[first_gpu])
        self.pod_of_cube = pod_of_first
        self.n_pods = int(self.pod_ids.size)
        self.cubes_per_pod = np.bincount(self.pod_of_cube, minlength=self.n_pods)
        first = nodes.node_gpus[nodes.node_indptr[:-1]]
        self.cube_of_node = self.cube_of_gpu[first]
        if np.any(self.cube_of_gpu != self.cube_of_node[nodes.node_of_gpu]):
            raise FabricError("hbd", "a host's chips span two cubes")
        if np.any(self.pod_of_cube[self.cube_of_gpu] != dense_ids(pod)[1]):
            raise FabricError("hbd", "a cube's chips span two OCS pods")

    def _check_tp_kind(self, tp: int) -> None:
        if tp > self.C and tp % self.C:
            raise FabricError("tp", f"{tp}: TP groups above one cube ({self.C} chips) must be whole cubes "
                                      f"(a multiple of {self.C})")

    def count(self, tp: int, batch: FaultBatch) -> np.ndarray:
        fn = batch.unit_nodes(self.nodes)
        Cn = np.int64(self.n_cubes)
        keys = fn.row_of_entries() * Cn + self.cube_of_node[fn.indices]
        if keys.size and np.any(keys[1:] < keys[:-1]):
            keys = np.sort(keys)
        bad, _ = sorted_runs(keys)  # (row, cube) pairs with a fault
        rows, cubes = bad // Cn, bad % Cn
        usable = np.empty(batch.n_rows, dtype=np.int64)
        if tp <= self.C:
            per_cube = self.cube_size // tp * tp
            usable[:] = int(per_cube.sum())
            usable -= np.bincount(rows, weights=per_cube[cubes], minlength=batch.n_rows).astype(np.int64)
            return usable
        j = tp // self.C
        base = self.cubes_per_pod // j * tp
        P = np.int64(self.n_pods)
        uk, nbad = group_sum(rows * P + self.pod_of_cube[cubes], np.ones(rows.size, dtype=np.int64))
        p = uk % P
        loss = base[p] - (self.cubes_per_pod[p] - nbad) // j * tp
        usable[:] = int(base.sum())
        usable -= np.rint(np.bincount(uk // P, weights=loss, minlength=batch.n_rows)).astype(np.int64)
        return usable

    def allocate(self, tp: int, avail: np.ndarray, boundaries: np.ndarray):
        bad = np.bincount(self.cube_of_gpu[~avail], minlength=self.n_cubes) > 0
        good = np.flatnonzero(~bad & (self.cube_size == self.C))
        gpus_by_cube = np.argsort(self.cube_of_gpu, kind="stable").reshape(-1, self.C) \
            if np.all(self.cube_size == self.C) else None
        if gpus_by_cube is None:
            raise FabricError("hbd", f"every cube must have {self.C} chips")
        if tp <= self.C:
            per = self.C // tp
            groups = gpus_by_cube[good][:, :per * tp].reshape(-1, tp)
            units = np.repeat(self.cube_ids[good], per).reshape(-1, 1)
            return groups, units, "cube"
        j = tp // self.C
        good = good[np.lexsort((good, self.pod_of_cube[good]))]  # pod by pod
        pods = self.pod_of_cube[good]
        cnt = np.bincount(pods, minlength=self.n_pods)
        start = np.concatenate([[0], np.cumsum(cnt)])[pods]
        rank = np.arange(good.size) - start
        keep = good[rank < (cnt // j * j)[pods]]
        slices = keep.reshape(-1, j)
        groups = gpus_by_cube[slices].reshape(-1, tp)
        return groups, self.cube_ids[slices], "cube"
