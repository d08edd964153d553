"""Max-min fair rates (fabric.sim.maxmin) against their definition, on random instances.

The allocation is max-min fair if and only if it is feasible and every flow has a *bottleneck*: an arc
it crosses that is saturated and on which no flow gets a higher rate (Bertsekas & Gallager, Data
Networks, 6.5.2).  That characterisation is independent of progressive filling, so it checks the
incremental implementation (the probe of large shapes found the old one recomputing every arc load at
every bottleneck level: hours for 30,000 random flows).  A plain-Python water-filling on small cases
checks the values too.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fabric.sim.maxmin import max_min_rates


def _instance(seed: int, n_flows: int, n_arcs: int, split: bool):
    rng = np.random.default_rng(seed)
    rows, cols, vals = [], [], []
    for f in range(n_flows):
        arcs = rng.choice(n_arcs, size=rng.integers(1, min(6, n_arcs) + 1), replace=False)
        frac = rng.choice([0.25, 0.5, 1.0], size=arcs.size) if split else np.ones(arcs.size)
        rows += [f] * arcs.size
        cols += arcs.tolist()
        vals += frac.tolist()
    R = sp.csr_matrix((vals, (rows, cols)), shape=(n_flows, n_arcs))
    cap = rng.choice([1.0, 2.0, 3.0, 10.0], size=n_arcs)  # repeated capacities make ties
    m = rng.integers(1, 4, n_flows).astype(float)
    return R, cap, m


def _water_fill(R: sp.csr_matrix, cap: np.ndarray, m: np.ndarray) -> np.ndarray:
    """Textbook progressive filling, one arc level at a time, in plain Python."""
    dense = R.toarray()
    n_f, n_a = dense.shape
    rate = [None] * n_f
    cap_rem = cap.astype(float).copy()
    level = 0.0
    while any(r is None for r in rate):
        load = [sum(dense[f, a] * m[f] for f in range(n_f) if rate[f] is None) for a in range(n_a)]
        step = min(cap_rem[a] / load[a] for a in range(n_a) if load[a] > 0)
        level += step
        for a in range(n_a):
            cap_rem[a] -= step * load[a]
        for a in range(n_a):
            if load[a] > 0 and cap_rem[a] <= 1e-12 * cap[a]:
                for f in range(n_f):
                    if rate[f] is None and dense[f, a] > 0:
                        rate[f] = level
    return np.array(rate)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("split", [False, True])
def test_small_cases_match_plain_water_filling(seed, split):
    R, cap, m = _instance(seed, 9, 6, split)
    np.testing.assert_allclose(max_min_rates(R, cap, m), _water_fill(R, cap, m), rtol=1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_every_flow_has_a_bottleneck(seed):
    """Feasible, and each flow crosses a saturated arc where its rate is the largest (the definition)."""
    R, cap, m = _instance(seed, 3000, 400, split=True)
    x = max_min_rates(R, cap, m)
    load = R.T @ (m * x)
    assert np.all(load <= cap * (1 + 1e-9))
    saturated = load >= cap * (1 - 1e-9)
    top = np.zeros(cap.size)
    coo = R.tocoo()
    np.maximum.at(top, coo.col, x[coo.row])
    for f in range(R.shape[0]):
        arcs = R.indices[R.indptr[f]:R.indptr[f + 1]]
        assert np.any(saturated[arcs] & (x[f] >= top[arcs] * (1 - 1e-9))), f


def test_many_bottleneck_levels_stay_linear():
    """2,000 flows with 2,000 distinct bottlenecks (one private arc each, distinct capacities): exact rates.

    Flow i crosses its own arc of capacity i + 1 and a shared arc large enough never to saturate, so its
    rate is exactly i + 1 (2,000 levels; the old loop made 2,000 passes over every entry).
    """
    n = 2000
    rows = np.repeat(np.arange(n), 2)
    cols = np.column_stack([np.arange(n), np.full(n, n)]).ravel()
    R = sp.csr_matrix((np.ones(2 * n), (rows, cols)), shape=(n, n + 1))
    cap = np.concatenate([np.arange(1, n + 1, dtype=float), [1e12]])
    np.testing.assert_allclose(max_min_rates(R, cap), np.arange(1, n + 1), rtol=1e-12)


def test_flow_without_arcs_is_infinite():
    R = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 0.0]]))
    assert max_min_rates(R, np.array([5.0, 5.0])).tolist() == [5.0, np.inf]


@pytest.mark.parametrize("size", [0, 5, 300, 5000])
def test_distinct_flows_is_numpy_unique(size):
    """The frozen-flow set of one level: np.unique's answer by a sort (few ids) or a mark per flow (many)."""
    from fabric.sim.maxmin import _distinct_flows

    ids = np.random.default_rng(size).integers(0, 1000, size)
    assert _distinct_flows(ids, 1000).tolist() == np.unique(ids).tolist()
