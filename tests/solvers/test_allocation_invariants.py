"""Relations the GPU-waste model must satisfy for every HBD kind, checked on random fault sets.

* **Monotone under inclusion** (exact): a fault set ``F`` inside ``F'`` leaves at least as many usable GPUs.
  Every policy counts groups formed on the available GPUs, and a group formed under ``F'`` is formed under ``F``
  (switch domain and cube: per-domain counts floor(avail / tp); k-hop line: cutting at every run of ``k`` faults
  and ``floor(a / m) + floor(b / m) <= floor((a + b) / m)``; torus: a fault only removes lines).
* **Bounds** (exact): no fault gives the fault-free baseline; usable <= healthy; every node down gives 0.
* **Ratio ends** (exact): ``fabric faults`` at ratio 0 reports the baseline waste in every sample; at ratio 1
  (Bernoulli) every node is down, so nothing is usable, healthy or wasted.

Not checked, because it does not hold: with the same seed, the *mean* usable GPUs of a curve is not monotone
in the ratio (``dgx --gpus 256 --tp 8``, 30 samples, seed 0: 241.6 at 5 %, 242.4 at 6 %), because each ratio
draws its own fault sets (geometric gaps per ratio, not common random numbers); with nested draws the curve
would be monotone by the first relation.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.faults import FaultSamples, NodeIndex
from solvers.allocation import faults_summary
from solvers.allocation.base import FaultBatch
from solvers.allocation.policy import policy_for
from topologies import build

CASES = {  # (arch, gpus, params, tp)
    "dgx": ("dgx", 64, {}, 8),
    "nvl-72": ("nvl", 144, {"size": 72}, 16),
    "tpuv4": ("tpuv4", 128, {}, 64),
    "khop-k2": ("khop-ring", 96, {"k": 2}, 8),
    "khop-k3-closed": ("khop-ring", 96, {"k": 3, "closed": True}, 12),
    "khop-tp2": ("khop-ring", 64, {"k": 2}, 2),
    "torus": ("torus", 64, {"dims": "8x8", "gpus_per_host": 4}, 16),
}
_POL: dict = {}


def policy(name):
    if name not in _POL:
        arch, gpus, params, tp = CASES[name]
        fab = build(arch, gpus=gpus, params=params)
        nodes = NodeIndex.of(fab)
        pol = policy_for(fab, nodes)
        _POL[name] = (pol, nodes, pol.check_tp(tp))
    return _POL[name]


def usable(name, rows: list[list[int]]) -> np.ndarray:
    pol, nodes, tp = policy(name)
    batch = FaultBatch.from_nodes(nodes, FaultSamples.from_rows([sorted(set(r)) for r in rows], nodes.n_nodes))
    return pol.count(tp, batch), batch.healthy


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(CASES)), data=st.data())
def test_usable_gpus_fall_as_faults_are_added(name, data):
    n = policy(name)[1].n_nodes
    order = data.draw(st.permutations(range(n)))
    cuts = sorted(data.draw(st.lists(st.integers(0, n), min_size=2, max_size=6)))
    rows = [list(order[:c]) for c in cuts]  # nested: each row holds the one before it
    got, healthy = usable(name, rows)
    assert np.all(np.diff(got) <= 0), (rows, got)
    assert np.all(got <= healthy) and np.all(got >= 0)


# fault-free usable GPUs by closed form: floor(domain / tp) x tp per domain (NVL-72: 4 x 16 of 72 per rack),
# whole cubes (TPUv4), whole rings of m = tp / g nodes on the line, whole pairs of 8-GPU torus lines
FAULT_FREE = {"dgx": 64, "nvl-72": 2 * 64, "tpuv4": 128, "khop-k2": 96, "khop-k3-closed": 96, "khop-tp2": 64,
              "torus": 64}


@pytest.mark.parametrize("name", sorted(CASES))
def test_no_fault_and_every_fault(name):
    nodes = policy(name)[1]
    got, healthy = usable(name, [[], list(range(nodes.n_nodes))])
    assert healthy.tolist() == [nodes.n_gpus, 0]
    assert got.tolist() == [FAULT_FREE[name], 0]


@pytest.mark.parametrize("name", sorted(CASES))
def test_fault_ratio_ends(name):
    arch, gpus, params, tp = CASES[name]
    fab = build(arch, gpus=gpus, params=params)
    zero = faults_summary(fab, tp, node_fault_ratio=0.0, samples=20, seed=3, blast=False)
    assert zero["usable_gpus"]["min"] == zero["usable_gpus"]["max"] == zero["baseline"]["usable_gpus"]
    assert zero["waste_ratio"]["max"] == zero["baseline"]["waste_ratio"]
    one = faults_summary(fab, tp, node_fault_ratio=1.0, samples=20, seed=3, blast=False)
    assert one["usable_gpus"]["max"] == one["healthy_gpus"]["max"] == one["wasted_gpus"]["max"] == 0


@pytest.mark.parametrize("nodes", [16, 17, 18, 19, 33])
@pytest.mark.parametrize("k", [1, 2])
def test_node_blast_radius_on_a_khop_line_by_closed_form(nodes, k):
    """One failed node at line position i of an open line of N nodes (rings of m = tp / g nodes):
    k = 1 cuts the line there, so floor(N/m) - floor(i/m) - floor((N-1-i)/m) rings are lost; k >= 2 hops
    over it, so floor(N/m) - floor((N-1)/m) rings are lost wherever it is (0 with a spare node)."""
    g, m = 4, 4
    fab = build("khop-ring", gpus=nodes * g, params={"k": k, "gpus_per_node": g})
    if k == 1:
        lost = [nodes // m - i // m - (nodes - 1 - i) // m for i in range(nodes)]
    else:
        lost = [nodes // m - (nodes - 1) // m] * nodes
    blast = faults_summary(fab, m * g, node_fault_ratio=0.0, samples=1)["blast_radius"]["node"]
    radius = [x * m * g for x in lost]
    assert (blast["min"], blast["max"]) == (min(radius), max(radius))
    assert blast["mean"] == pytest.approx(sum(radius) / nodes, rel=1e-12)
