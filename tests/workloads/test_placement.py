"""Ranks onto GPUs: TP groups inside HBD domains, Megatron order, k-hop rings lit per TP group."""

import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.model import LinkState
from workloads.parallelism import Parallelism
from workloads.placement import RankPlacement, tp_blocks, usable_gpus


def test_tp_groups_never_straddle_a_domain(nvl144):
    blocks = tp_blocks(nvl144, 16)
    dom = nvl144.group("domain")[blocks]
    assert blocks.shape == (8, 16) and np.all(dom == dom[:, :1])
    assert usable_gpus(nvl144, 16) == 128 and usable_gpus(nvl144, 8) == 144


def test_megatron_rank_order(dgx64):
    par = Parallelism(tp=4, pp=2, dp=8, global_batch=8)
    pl = RankPlacement(dgx64, par)
    node = dgx64.group("node")
    assert pl.tp_groups.shape == (16, 4) and np.all(node[pl.tp_groups] == node[pl.tp_groups][:, :1])
    assert pl.dp_groups.shape == (8, 8)
    # consecutive DP ranks are the next TP block: the second half of a node, then the next node
    assert pl.dp_groups[0, 1] == pl.tp_groups[1, 0]
    src, dst = pl.pp_pairs[:, 0], pl.pp_pairs[:, 1]
    assert pl.pp_pairs.shape == (32, 2) and np.all(dst - src == 32)
    assert pl.embedding_pairs.shape == (32, 2)


def test_expert_groups_are_consecutive_ranks(dgx64):
    par = Parallelism(tp=2, dp=32, ep=8, global_batch=32, sequence_parallel=True)
    pl = RankPlacement(dgx64, par)
    assert pl.ep_groups.shape == (8, 8) and np.all(np.diff(pl.ep_groups, axis=1) == 1)
    assert pl.edp_groups.shape == (8, 8)
    assert set(pl.ep_groups.ravel()) == set(pl.edp_groups.ravel())


def test_khop_lights_only_each_tp_ring(khop64):
    pl = RankPlacement(khop64, Parallelism(tp=8, dp=8, global_batch=8))
    lit = pl.fabric.configuration.active_candidates
    L = khop64.links
    node = khop64.group("node")
    assert np.all(L.state[lit] == LinkState.CANDIDATE)
    a, b = node[L.src[lit]], node[L.dst[lit]]
    assert np.all(np.minimum(a, b) % 2 == 0) and np.all(np.abs(a - b) == 1)  # pairs (0,1), (2,3), ...
    assert lit.size == 8 * 4 * 1  # 8 TP groups x 4 GPUs x 1 lane
    inside = RankPlacement(khop64, Parallelism(tp=4, dp=16, global_batch=16))
    assert inside.fabric.configuration.active_candidates.size == 0


def test_too_many_gpus(nvl144):
    with pytest.raises(FabricError, match="holds? only 8"):
        RankPlacement(nvl144, Parallelism(tp=16, dp=9, global_batch=9))


@pytest.mark.parametrize("arch, gpus, params, tps", [
    ("dgx", 64, {}, (1, 4, 8)), ("nvl", 144, {"size": 72}, (4, 16, 72)), ("khop-ring", 64, {"k": 2}, (4, 16, 64)),
    ("tpuv4", 128, {}, (4, 16, 64)), ("torus", 64, {"dims": "8x8"}, (4, 16)),
])
def test_tp_blocks_are_the_fault_free_allocation(arch, gpus, params, tps):
    """The job's TP blocks and the allocator's TP groups with no fault are the same groups in the same order."""
    from solvers.allocation import allocate
    from topologies import build

    fab = build(arch, gpus, params)
    for tp in tps:
        assert np.array_equal(tp_blocks(fab, tp), allocate(fab, tp).groups), tp
