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
from tests.fabric.test_sim_fabrics import ring, star

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
