"""Weight sync: the trainer sends the new policy to every rollout replica.

Bytes
-----
Every rollout replica needs the whole policy in its engine's dtype:
``S = parameters x bytes per parameter`` (2 for bf16; 1 for fp8, which the
trainer quantises before sending, so the wire carries fp8).  A replica of
``tp_g x pp_g`` GPUs holds it as shards: GPU ``(stage, rank)`` needs the
layers of its stage and the ``1/tp_g`` slice of each tensor.

Schedules
---------
``p2p``
    Rollout replica ``r`` pulls from trainer data-parallel replica ``r mod
    dp_t``; each rollout GPU receives its shard directly from the trainer GPUs
    that hold overlapping parts (the overlap of layer ranges of the stages and
    of the tensor slices: resharding without gathering).  All transfers at
    once.
``broadcast``
    One pipelined chain per rollout shard: a trainer GPU (the one holding
    most of that shard, DP replicas taking turns as roots) sends it in
    ``chunks`` pieces to the shard's GPU in the first replica, which forwards
    to the next replica, and so on (replicas in HBD order, so the chain leaves
    a ToR or pod only where the pool does).  A root sends the shard once: a
    broadcast of ``S`` bytes from one NIC of bandwidth ``B`` takes at least
    ``S / B``.

The shards' layer ranges ignore the embedding and output layers (counted
with the layers, evenly).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from workloads.models import ModelSpec
from workloads.rl.traffic import Flows


def sync_bytes(model: ModelSpec, bytes_per_param: float) -> float:
    """Bytes of the full policy on the wire: parameters x bytes per parameter.

    Examples
    --------
    >>> from workloads.models import load_model
    >>> sync_bytes(load_model("llama3-8b"), 2.0) == 2.0 * load_model("llama3-8b").params()
    True
    """
    return float(model.params()) * float(bytes_per_param)


def interval_overlap(n_a: int, n_b: int) -> np.ndarray:
    """(n_a, n_b) matrix: length of the overlap of ``[i/n_a, (i+1)/n_a)`` and ``[j/n_b, (j+1)/n_b)``.

    Examples
    --------
    >>> interval_overlap(2, 1).tolist()
    [[0.5], [0.5]]
    """
    a0 = np.arange(n_a)[:, None] / n_a
    b0 = np.arange(n_b)[None, :] / n_b
    return np.clip(np.minimum(a0 + 1 / n_a, b0 + 1 / n_b) - np.maximum(a0, b0), 0.0, None)


def shard_overlap(train_pp: int, train_tp: int, gen_pp: int, gen_tp: int) -> np.ndarray:
    """Share of the policy held by trainer GPU (stage, rank) that rollout GPU (stage, rank) needs.

    Shape ``(train_pp * train_tp, gen_pp * gen_tp)`` (stage-major); the whole matrix sums to 1.
    """
    layers = interval_overlap(train_pp, gen_pp)
    slices = interval_overlap(train_tp, gen_tp)
    return np.einsum("ac,bd->abcd", layers, slices).reshape(train_pp * train_tp, gen_pp * gen_tp)


@dataclass
class SyncPlan:
    """The weight-sync transfer of one schedule.

    Attributes
    ----------
    schedule : str
    bytes_total : float
        Policy bytes ``S`` (per replica).
    flows : Flows
        What crosses the fabric (p2p: every transfer; broadcast: the chain edges).
    chains : ndarray, shape (shards, replicas + 1)
        Broadcast only: device ids, root first.
    shard_bytes : float
        Broadcast only: bytes per chain.
    """

    schedule: str
    bytes_total: float
    flows: Flows
    chains: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.int64))
    shard_bytes: float = 0.0


def plan_sync(schedule: str, model: ModelSpec, bytes_per_param: float, train_grid: np.ndarray,
              gen_replicas: np.ndarray) -> SyncPlan:
    """The transfers of a weight-sync schedule.

    Parameters
    ----------
    schedule : {'p2p', 'broadcast'}
    model : ModelSpec
    bytes_per_param : float
    train_grid : ndarray, shape (pp_t, dp_t, tp_t)
        Device ids of the trainer (one CP rank; the Megatron grid without CP).
    gen_replicas : ndarray, shape (R, pp_g, tp_g)
        Device ids of the rollout replicas.
    """
    S = sync_bytes(model, bytes_per_param)
    pp_t, dp_t, tp_t = train_grid.shape
    R, pp_g, tp_g = gen_replicas.shape
    O = shard_overlap(pp_t, tp_t, pp_g, tp_g)
    trainers = train_grid.transpose(1, 0, 2).reshape(dp_t, pp_t * tp_t)  # (dp, shard) device ids
    gens = gen_replicas.reshape(R, pp_g * tp_g)
    if schedule == "p2p":
        ti, gj = np.nonzero(O)
        src = trainers[np.arange(R) % dp_t][:, ti]  # (R, overlaps)
        dst = gens[:, gj]
        return SyncPlan("p2p", S, Flows.of(src.ravel(), dst.ravel(), np.tile(S * O[ti, gj], R)))
    # broadcast: one chain per rollout shard, rooted at the trainer GPU holding most of it
    shards = pp_g * tp_g
    root_shard = np.argmax(O, axis=0)
    roots = trainers[np.arange(shards) % dp_t, root_shard]
    chains = np.concatenate([roots[:, None], gens.T], axis=1)
    size = S / shards
    edges = Flows.of(chains[:, :-1].ravel(), chains[:, 1:].ravel(), size)
    return SyncPlan("broadcast", S, edges, chains, size)
