"""One-step ring timing (fabric.sim.nccl.time_ring) against the full flow DAG where every step contends alike.

The full simulation is the ideal flow DAG of :mod:`fabric.sim.collectives`
(``2 (n-1)`` steps of ``n`` flows per ring, each step waiting on the last),
run by the engine with its max-min sharing.  When every step of every ring
meets the same contention (groups on the same GPUs, channels over the same
links) and every hop has the same latency, each step of the DAG costs the same
transfer time plus one hop's latency, which is what the one-step timing
multiplies out: the two must agree to rounding (1e-9), and both equal the
closed form ``k (a + G S / (n B))`` for ``G`` rings sharing every link.
"""

import numpy as np
import pytest

from fabric.sim import Collective, CollectiveName, Protocol, Simulator
from fabric.sim.nccl import nccl_model, time_ring
from tests.fabric.test_sim_fabrics import ring, star, two_level, two_tier

S = 96 * 2**20
B, A = 40e9, 2e-6


@pytest.mark.parametrize("name", [CollectiveName.ALL_REDUCE, CollectiveName.REDUCE_SCATTER,
                                  CollectiveName.ALL_GATHER])
@pytest.mark.parametrize("groups, channels", [(1, 1), (2, 1), (1, 4), (3, 2)])
@pytest.mark.parametrize("fabric", ["star", "ring"])
def test_one_step_ring_equals_the_flow_dag_when_every_step_contends_alike(name, groups, channels, fabric):
    n = 6
    fab = star(n, B, A) if fabric == "star" else ring(n, B, A)
    sim = Simulator(fab, lump=False)
    # the full simulation: groups x channels rings of S / channels each, all on the same GPUs in the same order
    rings = [Collective(name, tuple(range(n)), S / channels, "ring", protocol="none", channels=1)
             for _ in range(groups * channels)]
    dag = sim.collectives(rings)
    # rings on the same links contend: the DAG pass does not apply, the event loop shares the links
    assert dag.sim.method == ("event" if groups * channels > 1 else "dag")
    devices = np.tile(fab.gpu_ids, (groups, 1))
    rt = time_ring(sim, fab, name, devices, S, Protocol.NONE, channels, nccl_model(), "auto", "ideal", 0, 0.0)
    k = (2 if name == CollectiveName.ALL_REDUCE else 1) * (n - 1)
    closed = k * (A + groups * S / (n * B))  # star: two links of a/2 per hop; ring: one link of a
    assert rt.steps == k
    assert rt.time_s == pytest.approx(np.full(groups, closed), rel=1e-9)
    assert [c.time_s for c in dag.collectives] == pytest.approx([closed] * len(rings), rel=1e-9)


def _ring_times(fab, colls, lump):
    res = Simulator(fab, lump=lump).collectives(colls)
    return res, [c.time_s for c in res.collectives]


@pytest.mark.parametrize("case", ["star", "two-level", "dgx", "fat-tree groups", "two-tier groups", "hashed"])
@pytest.mark.parametrize("name", [CollectiveName.ALL_REDUCE, CollectiveName.REDUCE_SCATTER])
def test_ideal_ring_by_step_equals_the_flow_dag(case, name):
    """fabric.sim.steps: the ideal ring timed from one step = the full flow DAG (DAG pass) to 1e-9, on uniform
    and mixed hops (NVLink and network), single and many groups, ideal and hashed ECMP; link bytes too."""
    from topologies import build

    ecmp = "hash" if case == "hashed" else "ideal"
    if case == "star":
        fab, groups = star(7, B, A), [tuple(range(7))]
    elif case == "two-level":  # fast in-domain hops, slow network hops: max_i w_i is a network hop
        fab, groups = two_level(3, 4, 1e12, 1e-6, 25e9, 3e-6), [tuple(range(12))]
    elif case in ("dgx", "hashed"):
        fab, groups = build("dgx", gpus=32), [tuple(np.r_[0:8, 16:24]), tuple(np.r_[8:16, 24:32])]
    elif case == "fat-tree groups":
        fab = build("fat-tree", gpus=64, params={"k": 8, "tiers": "3"})
        groups = [tuple(range(g, 64, 4)) for g in range(4)]
    else:  # 1:1 two-tier: the groups' steps fit on the uplinks
        fab = two_tier(4, 4, 2, 1.0, B, A)
        groups = [tuple(range(g, 16, 2)) for g in range(2)]
    colls = [Collective(name, r, S, "ring", protocol="none") for r in groups]
    step = Simulator(fab, lump=True).collectives(colls, ecmp=ecmp, seed=3)
    full = Simulator(fab, lump=False).collectives(colls, ecmp=ecmp, seed=3)
    assert step.sim.method == "step+dag" and full.sim.method == "dag"
    assert [c.time_s for c in step.collectives] == pytest.approx([c.time_s for c in full.collectives], rel=1e-9)
    assert [c.n_flows for c in step.collectives] == [c.n_flows for c in full.collectives]
    scale = full.sim.loads.bytes_fwd.max()
    assert np.allclose(step.sim.loads.bytes_fwd, full.sim.loads.bytes_fwd, rtol=1e-9, atol=1e-9 * scale)
    assert np.allclose(step.sim.loads.bytes_rev, full.sim.loads.bytes_rev, rtol=1e-9, atol=1e-9 * scale)


def test_ideal_ring_by_step_declines_when_a_step_contends():
    """Oversubscribed uplinks (4:1) that a step of two groups overloads, or two rings on the same GPUs: the full
    DAG runs (event loop), and the answer is the full simulation's."""
    fab = two_tier(4, 4, 1, 4.0, B, A)
    colls = [Collective("all-reduce", tuple(range(g, 16, 4)), S, "ring", protocol="none") for g in range(4)]
    step = Simulator(fab, lump=True).collectives(colls)
    assert step.sim.method == "event"
    full = Simulator(fab, lump=False).collectives(colls)
    assert [c.time_s for c in step.collectives] == [c.time_s for c in full.collectives]
    same = [Collective("all-reduce", tuple(range(6)), S, "ring", protocol="none")] * 2
    assert Simulator(star(6, B, A), lump=True).collectives(same).sim.method == "event"


def test_large_ideal_rings_go_by_step_by_default():
    from fabric.sim.steps import STEP_MIN_FLOWS

    n = 1500  # 2 n (n-1) = 4.5M flows
    fab = star(n, B, A)
    assert 2 * n * (n - 1) >= STEP_MIN_FLOWS
    r = Simulator(fab).collective(Collective("all-reduce", tuple(range(n)), S, "ring", protocol="none"))
    assert r.n_flows == 2 * n * (n - 1)
    assert r.time_s == pytest.approx(2 * (n - 1) * (A + S / (n * B)), rel=1e-9)
