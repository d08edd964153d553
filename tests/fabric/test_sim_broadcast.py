"""Broadcast as NCCL runs it: the ring cut at the root, pipelined in pieces of one protocol step.

Before, a broadcast under an NCCL protocol ran the flow DAG of 8 pieces of S / 8 (the ideal model's default),
every piece paying a step latency on every hop: one DGX H100 reached 209 GB/s of the 370 GB/s NCCL's maintainer
gives for every non-all-reduce collective (-43 %), and 1 GiB over 16,384 GPUs took 11 s, the pipeline filling
with 16,382 pieces of 128 MiB.  Now :func:`fabric.sim.nccl.time_broadcast` times one step of every chain hop.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric.sim import Collective, simulate_collectives, simulator
from fabric.sim.collectives import DEFAULT_CHUNKS, Protocol
from fabric.sim.nccl import nccl_model, time_broadcast
from topologies import build


@pytest.mark.parametrize("gpus", [8, 64])
@pytest.mark.parametrize("size", [8 << 20, 1 << 30])
@pytest.mark.parametrize("root", [0, 3])
def test_the_pipelined_chain_is_the_flow_dag_of_the_same_pieces(gpus, size, root):
    """Against the full flow DAG of the same chain and pieces (ideal model, DEFAULT_CHUNKS pieces): on a DGX
    chain no two hops share a link, so every hop moves its pieces at the rate the one-step simulation gives and
    the pipeline's makespan, sum of the hops' piece times + (K - 1) x the slowest, is exact.  The one difference:
    the DAG charges each hop's physical latency to every piece, the step form once per hop, so the DAG is later
    by at most (K - 1) x the longest hop latency (0.2-0.8 us)."""
    fab = build("dgx", gpus)
    devs = np.asarray(fab.gpu_ids)[None, :]
    rt = time_broadcast(simulator(fab), fab, devs, float(size), root, Protocol.NONE, 1, nccl_model(), "auto",
                        "ideal", 0, 0.0)
    # the chain the step form timed, read from its flows (source of hop 0, then every destination)
    src, dst = rt.step_flows.src, rt.step_flows.dst
    order = np.searchsorted(fab.gpu_ids, np.concatenate([src[:1], dst]))
    assert sorted(order.tolist()) == list(range(gpus))
    dag = simulate_collectives(fab, [Collective("broadcast", tuple(order.tolist()), size, "ring", DEFAULT_CHUNKS, 0,
                                                protocol="none")]).collectives[0].time_s
    hop = float(rt.step_problem.route_latency.max())
    assert 0 <= dag - rt.time_s[0] <= (DEFAULT_CHUNKS - 1) * hop * (1 + 1e-9) + 1e-15


def test_one_dgx_broadcast_is_the_closed_form_of_nccl_pieces():
    """Simple on one DGX H100 (8 GPUs, one channel over the NVSwitch, no hop shared): time = base latency +
    (S + (n - 2) P) / R + 7 hop latencies, P = 512 KiB (NCCL's Simple step, BROADCAST_CHUNKSTEPS 1).  R is read
    from two sizes (the slope); the intercept must then be exactly the constants' (base, 6 pieces, 7 steps)."""
    fab = build("dgx", 8)
    model = nccl_model()

    def t(size):
        return simulate_collectives(fab, [Collective("broadcast", tuple(range(8)), size, "ring",
                                                     protocol="simple")]).collectives[0].time_s

    t1, t2 = t(1 << 30), t(2 << 30)
    R = (1 << 30) / (t2 - t1)
    P = model.broadcast_chunk[Protocol.SIMPLE]
    assert P == 512 * 1024
    hop = max(model.ring_step[Protocol.SIMPLE][0], 0.2e-6)  # NVLink step latency vs the physical GPU-switch-GPU
    expected = model.base_latency[Protocol.SIMPLE] + 6 * P / R + 7 * hop
    assert t1 - (1 << 30) / R == pytest.approx(expected, rel=1e-9)
    assert R == pytest.approx(370e9, rel=0.01)  # the NVLink rate NCCL reaches (calibrated on the ring all-reduce)


def test_a_broadcast_moves_at_the_rate_of_an_all_gather_on_the_same_rings():
    """NCCL's maintainer: 370 GB/s 'as BusBw when running non-allreduce operations' on one DGX H100; the
    broadcast's bus bandwidth at 4 GiB is the all-gather's to within its pipeline fill (6 pieces of 512 KiB)."""
    fab = build("dgx", 8)

    def busbw(name):
        return simulate_collectives(fab, [Collective(name, tuple(range(8)), 4 << 30)]).collectives[0].busbw_Bps

    assert busbw("broadcast") == pytest.approx(busbw("all-gather"), rel=0.01)


def test_a_large_broadcast_is_timed_by_one_step_of_its_chains():
    """1,024 ranks over 128 DGX nodes: one flow per chain hop per channel is simulated, standing for every piece
    (K = S / (C P) of them), where the flow DAG held K x C x (n - 1) flows and their dependencies."""
    fab = build("dgx", 1024)
    res = simulate_collectives(fab, [Collective("broadcast", tuple(range(1024)), 1 << 30)]).collectives[0]
    model = nccl_model()
    C = res.channels
    pieces = int(np.ceil((1 << 30) / C / min(model.broadcast_chunk[res.protocol], (1 << 30) / C)))
    assert res.n_flows == C * 1023 * pieces
    # the chain's bottleneck is a NIC (~47 GB/s each, one channel per rail): at least S / (C x 50 GB/s)
    assert res.time_s > (1 << 30) / (C * 50e9)


def test_given_chunks_keep_the_flow_dag():
    """A broadcast with ``chunks`` given (the RL weight sync's pipeline pieces) is the flow DAG of those pieces
    under the protocol, as before; not given, NCCL's pieces."""
    fab = build("dgx", 8)
    nccl = simulate_collectives(fab, [Collective("broadcast", tuple(range(8)), 1 << 30)]).collectives[0]
    given = simulate_collectives(fab, [Collective("broadcast", tuple(range(8)), 1 << 30, chunks=8)]).collectives[0]
    assert given.n_flows == 8 * 7 and given.time_s > 1.5 * nccl.time_s
