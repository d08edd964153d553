"""Fault models: i.i.d. sampling (Bernoulli and exact count), seeding, sparse fault sets, component positions."""

import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.faults import (CHUNK_ROWS, COMPONENTS, FaultModel, FaultSamples, IIDSampler, NodeIndex, chunk_sizes,
                           exact_count, sample_components, sample_iid, universe)
from topologies import build


def test_same_seed_same_faults_bit_for_bit():
    a = sample_iid(5000, 0.03, 700, seed=42)
    b = sample_iid(5000, 0.03, 700, seed=42)
    c = sample_iid(5000, 0.03, 700, seed=43)
    assert np.array_equal(a.indptr, b.indptr) and np.array_equal(a.indices, b.indices)
    assert not np.array_equal(a.indices[:50], c.indices[:50])


def test_bernoulli_law():
    """Each position fails with probability p, independently: mean count n p, variance n p (1 - p), uniform."""
    n, p, s = 2000, 0.05, 4000
    fs = sample_iid(n, p, s, seed=1)
    counts = fs.counts()
    assert counts.mean() == pytest.approx(n * p, rel=0.01)
    assert counts.var() == pytest.approx(n * p * (1 - p), rel=0.08)
    per_position = np.bincount(fs.indices, minlength=n) / s
    assert per_position.mean() == pytest.approx(p, rel=0.01)
    assert abs(per_position[: n // 2].mean() - per_position[n // 2:].mean()) < 0.003
    # rows are sorted and unique
    for i in range(0, s, 500):
        r = fs.row(i)
        assert np.all(np.diff(r) > 0)


@pytest.mark.parametrize("n, ratio", [(1000, 0.03), (100, 0.7), (7, 0.5), (10, 1.0), (10, 0.0)])
def test_exact_count_mode(n, ratio):
    """Every sample has exactly round(ratio n) failures, distinct, uniform over positions."""
    fs = sample_iid(n, ratio, 600, seed=3, mode="exact")
    c = exact_count(n, ratio)
    assert np.all(fs.counts() == c)
    d = fs.dense()
    assert np.all(d.sum(axis=1) == c)
    if 0 < c < n:
        freq = d.mean(axis=0)
        assert np.allclose(freq, c / n, atol=0.08)


def test_extreme_ratios():
    assert sample_iid(100, 0.0, 10, seed=0).nnz == 0
    full = sample_iid(100, 1.0, 3, seed=0)
    assert np.all(full.counts() == 100)
    tiny = sample_iid(50, 0.999, 20, seed=0)  # geometric gaps of 1 almost everywhere
    assert np.all(tiny.counts() >= 45)


@pytest.mark.parametrize("bad", [-0.01, 1.01, float("nan"), "x"])
def test_bad_ratio(bad):
    with pytest.raises(FabricError, match="in \\[0, 1\\]|number"):
        sample_iid(10, bad, 1, seed=0)


def test_bad_samples_and_mode():
    with pytest.raises(FabricError, match="samples"):
        sample_iid(10, 0.1, 0)
    with pytest.raises(FabricError, match="mode"):
        sample_iid(10, 0.1, 1, mode="poisson")
    with pytest.raises(FabricError, match="fault"):
        FaultModel({"disk": 0.1})


def test_chunking_is_part_of_the_procedure():
    """Batches of CHUNK_ROWS rows: a prefix of a longer run is the same as a shorter run."""
    assert chunk_sizes(CHUNK_ROWS * 2 + 5) == [CHUNK_ROWS, CHUNK_ROWS, 5]
    a = sample_iid(300, 0.1, CHUNK_ROWS * 3, seed=9)
    b = sample_iid(300, 0.1, CHUNK_ROWS, seed=9)
    assert np.array_equal(a.take(np.arange(CHUNK_ROWS)).indices, b.indices)
    s = IIDSampler(300, 0.1, seed=9)
    assert np.array_equal(s.draw(CHUNK_ROWS).indices, b.indices)


def test_fault_samples_operations():
    fs = FaultSamples.from_rows([[3, 1], [], [0, 4, 4]], 5)
    assert fs.indices.tolist() == [1, 3, 0, 4] and fs.counts().tolist() == [2, 0, 2]
    assert fs.dense().sum() == 4
    assert np.array_equal(FaultSamples.from_dense(fs.dense()).indices, fs.indices)
    other = FaultSamples.from_rows([[1, 2], [0], []], 5)
    u = fs.union(other)
    assert [u.row(i).tolist() for i in range(3)] == [[1, 2, 3], [0], [0, 4]]
    m = fs.map_to(np.array([0, 0, 1, 1, -1]), 2)  # positions -> pairs; 4 dropped
    assert [m.row(i).tolist() for i in range(3)] == [[0, 1], [], [0]]
    e = fs.expand(np.array([0, 1, 1, 3, 3, 5]), np.array([9, 7, 8, 5, 6]), 10)
    assert [e.row(i).tolist() for i in range(3)] == [[], [], [5, 6, 9]]  # 1, 3 -> nothing; 0 -> 9; 4 -> 5, 6
    e = fs.expand(np.array([0, 1, 3, 4, 5, 6]), np.array([9, 7, 8, 5, 6, 2]), 10)
    assert [e.row(i).tolist() for i in range(3)] == [[6, 7, 8], [], [2, 9]]
    assert fs.contains(np.array([0, 0, 2, 1]), np.array([3, 2, 4, 0])).tolist() == [True, False, True, False]
    assert fs.take(np.array([2, 0])).counts().tolist() == [2, 2]


@pytest.mark.parametrize("name, gpus, params, expect", [
    ("nvl", 144, {"size": 72}, {"gpu": 144, "node": 36, "switch": 18, "rack": 2, "link": 144 * 18}),
    ("dgx", 64, {}, {"gpu": 64, "node": 8, "switch": 32, "rack": 2, "transceiver": 0}),
    ("tpuv4", 128, {}, {"node": 32, "ocs": 48, "rack": 2, "transceiver": 192}),
    ("khop-ring", 64, {"k": 2, "trx_per_gpu": 4}, {"node": 16, "transceiver": 256, "ocs": 0}),
])
def test_universe_sizes(name, gpus, params, expect):
    """Positions per component type: NVL-72 trays of 2 chips, TPUv4 face fibres (one transceiver each), ..."""
    f = build(name, gpus, params)
    nodes = NodeIndex.of(f)
    for comp, n in expect.items():
        assert universe(f, comp, nodes).size == n, comp
    with pytest.raises(FabricError, match="component"):
        universe(f, "psu")


def test_component_streams_are_independent():
    """Adding a ratio for one component type leaves the draws of the others unchanged."""
    f = build("nvl", 288, {"size": 72})
    a = sample_components(f, FaultModel({"node": 0.1}), 50, seed=4)
    b = sample_components(f, FaultModel({"node": 0.1, "tor": 0.2, "gpu": 0.01}), 50, seed=4)
    assert np.array_equal(a["node"].indices, b["node"].indices)
    assert set(b) == {"node", "tor", "gpu"} and set(COMPONENTS) >= set(b)


def test_node_index_groups_gpus():
    f = build("nvl", 72, {"size": 72})
    ni = NodeIndex.of(f)
    assert ni.n_nodes == 18 and ni.uniform_size == 4
    assert ni.gpus_of_nodes(np.array([2])).tolist() == [8, 9, 10, 11]
    assert ni.node_index(np.array([17])).tolist() == [17]
    with pytest.raises(FabricError):
        ni.gpu_index(np.array([f.n_devices - 1]))
