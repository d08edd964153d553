"""Speed of the HBD-DCN orchestrator ILP (run with ``pytest -m bench -s``; prints its figures).

Instance: a k-hop ring (k = 2, 4 GPUs per node, 16 nodes = 64 GPUs per ToR,
contiguous wiring), TP 16 (rings of 4 nodes), DP 4 (one DP group fills a
fault-free ToR), as many instances as fit, and exactly 5 % of the nodes
faulty (a uniform random subset, seeded).  Times are for the whole
orchestration (model build, warm start, solve, extraction, accounting), not
for building the Fabric.
"""

import time

import pytest

from topologies import build
from solvers.orchestrator import orchestrate_summary

PARAMS = {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 16}


def _run(nodes, seed, time_limit, gap):
    fab = build("khop-ring", nodes * 4, PARAMS)
    t0 = time.perf_counter()
    d = orchestrate_summary(fab, tp=16, dp=4, node_fault_ratio=0.05, seed=seed, fault_mode="exact",
                            time_limit=time_limit, gap_rel=gap)
    wall = time.perf_counter() - t0
    print(f"\n{nodes} nodes seed {seed}: status {d['status']}, gap {d['gap']}, objective {d['objective']:.4g} "
          f"bound {d['bound']:.4g}, solve {d['solve_seconds']:.2f} s, build {d['build_seconds']:.2f} s, "
          f"total {wall:.2f} s, cross-ToR ratio {d['cross_tor_traffic_ratio']:.4f}, "
          f"GPU utilisation {d['gpu_utilization']:.4f}, model {d['model_size']}")
    return d, wall


@pytest.mark.bench
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_1024_nodes_proven_optimal_in_10_s(seed):
    d, wall = _run(1024, seed, time_limit=30, gap=0.0)
    assert d["status"] == "optimal" and d["gap"] == 0.0
    assert wall < 10


@pytest.mark.bench
@pytest.mark.parametrize("seed", [0, 1])
def test_4096_nodes_within_1_percent_in_60_s(seed):
    d, wall = _run(4096, seed, time_limit=50, gap=0.01)
    assert d["status"] in ("optimal", "feasible") and d["gap"] is not None and d["gap"] <= 0.01
    assert wall < 60
