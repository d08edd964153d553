"""Flows of the RL phases and their pod-to-pod traffic matrices.

A phase's traffic is a set of :class:`Flows` between GPU *device ids*, with
the bytes each moves over the whole phase.  Its pod-to-pod matrix
(:func:`pod_matrix`) is what the OCS circuit assignment reads; flows inside a
pod (and inside an HBD domain) do not enter it.

Phase flows, from the placements (trainer pool first in HBD order, rollout
pool after it):

* **generation**: pipeline-stage sends of a rollout replica (one activation
  vector per generated token per stage boundary); tensor parallelism stays
  inside the HBD.
* **weight sync**: the schedule's flows (:mod:`workloads.rl.weightsync`).
* **training**: per optimizer step, the data-parallel gradient reduce-scatter
  and parameter all-gather as ring edges in each DP group (each edge carries
  ``(n-1)/n`` of the local parameters in the gradient and the gather dtype),
  the pipeline sends of every micro-batch's activation shard forward and
  backward, and for MoE models the expert-parallel all-to-all (dispatch and
  combine, forward and backward).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.model import Fabric


@dataclass(frozen=True)
class Flows:
    """Bytes between GPUs over a phase: ``src[i] -> dst[i]`` moves ``nbytes[i]`` (device ids)."""

    src: np.ndarray
    dst: np.ndarray
    nbytes: np.ndarray

    @staticmethod
    def empty() -> "Flows":
        z = np.zeros(0, dtype=np.int64)
        return Flows(z, z, np.zeros(0))

    @staticmethod
    def of(src, dst, nbytes) -> "Flows":
        src = np.asarray(src, dtype=np.int64).ravel()
        dst = np.asarray(dst, dtype=np.int64).ravel()
        b = np.broadcast_to(np.asarray(nbytes, dtype=np.float64), src.shape).copy()
        keep = (src != dst) & (b > 0)
        return Flows(src[keep], dst[keep], b[keep])

    @staticmethod
    def concat(parts: list["Flows"]) -> "Flows":
        parts = [p for p in parts if len(p)]
        if not parts:
            return Flows.empty()
        return Flows(np.concatenate([p.src for p in parts]), np.concatenate([p.dst for p in parts]),
                     np.concatenate([p.nbytes for p in parts]))

    def scaled(self, factor: float) -> "Flows":
        return Flows(self.src, self.dst, self.nbytes * factor)

    def __len__(self) -> int:
        return int(self.src.size)

    @property
    def total_bytes(self) -> float:
        return float(self.nbytes.sum())


def n_pods(fabric: Fabric) -> int:
    pod = fabric.group("pod")[fabric.gpu_ids]
    return int(pod.max()) + 1 if pod.size else 1


def pod_matrix(fabric: Fabric, flows: Flows) -> np.ndarray:
    """Bytes from pod ``p`` to pod ``q`` (P x P, zero diagonal) of ``flows``."""
    P = n_pods(fabric)
    pod = fabric.group("pod")
    D = np.zeros((P, P))
    if len(flows):
        np.add.at(D, (pod[flows.src], pod[flows.dst]), flows.nbytes)
    np.fill_diagonal(D, 0.0)
    return D


def ring_edges(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of the ring over each row of ``groups`` (rank order), one edge per rank."""
    g = np.asarray(groups, dtype=np.int64)
    if g.shape[1] < 2:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    return g.reshape(-1), np.roll(g, -1, axis=1).reshape(-1)


def all_pairs(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(src, dst) of every ordered pair of distinct ranks within each row of ``groups``."""
    g = np.asarray(groups, dtype=np.int64)
    n = g.shape[1]
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    off = i != j
    return g[:, i[off]].reshape(-1), g[:, j[off]].reshape(-1)
