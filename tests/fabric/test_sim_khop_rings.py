"""NCCL rings on a k-hop line: a TP group runs on its own optics, a DP group on every NIC of its nodes.

A k-hop line is one HBD domain, but no switch joins its nodes: the optics a
job lights join neighbouring nodes of a TP group only
(:func:`fabric.rings.group_configuration`).  A ring in rank order over a TP
group of several nodes would close from the last node to the first over a
NIC (what the simulator timed before: 41 GB/s of bus bandwidth for a 32-GPU
TP group on 8 nodes, the NIC's, against 318 GB/s now).  NCCL's topology search
finds the ring that goes down the line on half of every node's GPUs and
comes back on the other half, one channel per rail
(:func:`fabric.sim.nccl.ring_order_candidates`).

Independent check: the bandwidth term of a ring all-reduce is exactly
``2 (n-1) x S / (n C) / (b x eff)`` when every step's busiest link carries
one chunk; there-and-back with ``C`` = 4 channels (one per GPU index) puts
exactly one chunk on every rail link in each direction, so ``b`` is one
optical link's capacity (read off the Fabric) and ``eff`` the catalog's
NCCL efficiency of an HBD path.  Latency does not depend on size, so the
difference of two sizes is the bandwidth term alone, and the check is exact.
"""

import numpy as np
import pytest

from fabric.sim.api import Simulator
from fabric.sim.collectives import Collective
from fabric.sim.nccl import HBD, nccl_model, ring_order_candidates
from topologies import build
from workloads.placement import hbd_configuration

SIZE = 2**30


@pytest.fixture(scope="module")
def line():
    return build("khop-ring", 256)  # 64 nodes of 4 GPUs, k = 2


def _node_gpus(fab, n):
    gp = fab.gpu_ids
    return [int(g) for g in gp[fab.group("node")[gp] == n]]


def _bandwidth_term(sim, ranks, channels=None):
    t = [sim.collective(Collective("all_reduce", ranks, s, algorithm="ring", protocol="simple",
                                   channels=channels)).to_dict() for s in (SIZE, 2 * SIZE)]
    assert t[0]["channels"] == t[1]["channels"]
    return t[1]["time_s"] - t[0]["time_s"], t[0]["channels"]


@pytest.mark.parametrize("nodes", [2, 4, 8])
def test_tp_group_ring_runs_on_its_optics_at_the_closed_form(line, nodes):
    groups = np.array([sum((_node_gpus(line, n) for n in range(s, s + nodes)), []) for s in range(0, 64, nodes)])
    fab = line.with_configuration(hbd_configuration(line, groups))
    A = fab.active_links()
    a, b = groups[0][0], groups[0][4]  # GPU 0 of the first two nodes: one rail hop
    rail = float(A.capacity[(A.src == a) & (A.dst == b)].sum())
    n = groups.shape[1]
    term, C = _bandwidth_term(Simulator(fab), list(groups[0]))
    assert C == 4  # one channel per GPU index (rail)
    expected = 2 * (n - 1) * SIZE / (n * C) / (rail * nccl_model().efficiency[HBD])
    assert term == pytest.approx(expected, rel=1e-6)


def test_there_and_back_layout_every_hop_joins_neighbours(line):
    """Every hop of every channel stays in a node or joins neighbouring nodes, on one GPU index (rail)."""
    devices = np.array(sum((_node_gpus(line, n) for n in range(8)), []))
    layouts = ring_order_candidates(line, devices, 4)
    assert len(layouts) == 2
    back = layouts[1]
    node = line.group("node")[devices]
    local = np.arange(devices.size) % 4
    for ring in back:
        assert sorted(ring.tolist()) == list(range(devices.size))  # a ring over every rank once
        a, b = ring, np.roll(ring, -1)
        cross = node[a] != node[b]
        assert np.all(np.abs(node[a] - node[b]) <= 1)
        assert np.all(local[a][cross] == local[b][cross])
    assert len(ring_order_candidates(line, devices[::4], 1)) == 1  # one GPU per node: no way back


def test_dp_group_uses_the_nic_of_every_rank_in_a_node(line):
    """Two ranks per node and no optics between the nodes: two channels, one per NIC, half the time of one."""
    tp = np.array([_node_gpus(line, n)[2 * i:2 * i + 2] for n in range(64) for i in range(2)])
    fab = line.with_configuration(hbd_configuration(line, tp))
    sim = Simulator(fab)
    dp = [g for n in range(16) for g in _node_gpus(line, n)[::2]]  # 2 ranks per node, in different TP groups
    two, C = _bandwidth_term(sim, dp)
    one, _ = _bandwidth_term(sim, dp, channels=1)
    assert C == 2
    assert two == pytest.approx(one / 2, rel=1e-6)
