"""Monte Carlo speed: 10,000 fault samples on a 100k-GPU cluster for every architecture, < 10 s in total.

Run with ``.venv/bin/pytest -m bench -s tests/benchmarks/test_bench_faults.py``.  Building the
fabrics is not timed (``test_bench_build.py`` covers it).  The limit is checked on CPU time, which
measures this code's work; the wall time is printed too (on a shared machine it also measures the
neighbours).
"""

import time
import tracemalloc

import pytest

from solvers.allocation import evaluate_faults
from topologies import build

GPUS = 100_000
SAMPLES = 10_000
RATIO = 0.03
ARCHS = [
    ("dgx", "dgx", {}, 8),
    ("nvl-36", "nvl", {"size": 36}, 32),
    ("nvl-72", "nvl", {"size": 72}, 32),
    ("nvl-576", "nvl", {"size": 576}, 32),
    ("tpuv4", "tpuv4", {}, 32),
    ("khop-ring k=2", "khop-ring", {"k": 2}, 32),
    ("khop-ring k=3", "khop-ring", {"k": 3}, 32),
    ("torus 2D", "torus", {}, 32),
]


@pytest.mark.bench
def test_bench_monte_carlo_100k():
    fabrics = [(label, build(name, GPUS, params), tp) for label, name, params, tp in ARCHS]
    total_wall = total_cpu = 0.0
    print(f"\n{SAMPLES:,} i.i.d. node-fault samples (ratio {RATIO}) per architecture, ~{GPUS:,} GPUs")
    for label, fab, tp in fabrics:
        tracemalloc.start()
        t0, c0 = time.perf_counter(), time.process_time()
        res = evaluate_faults(fab, tp, node_fault_ratio=RATIO, samples=SAMPLES, seed=0, blast=False)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        total_wall += wall
        total_cpu += cpu
        print(f"  {label:14s} {fab.n_gpus:>7,} GPUs  TP {tp:>2}  waste {100 * res['waste_ratio']['mean']:7.3f} %  "
              f"{wall:6.2f} s wall  {cpu:6.2f} s CPU  peak {peak / 2**20:6.0f} MiB")
    print(f"  total: {total_wall:.2f} s wall, {total_cpu:.2f} s CPU")
    assert total_cpu < 10


@pytest.mark.bench
def test_bench_trace_and_blast_100k():
    """Trace replay (1,009 intervals) and blast radius of every component type at 100k GPUs."""
    print()
    for label, name, params, tp in ARCHS:
        fab = build(name, GPUS, params)
        t0 = time.process_time()
        res = evaluate_faults(fab, tp, trace="stepfun", seed=0, blast=True)
        cpu = time.process_time() - t0
        print(f"  {label:14s} trace waste {100 * res['waste_ratio']['mean']:7.3f} %, blast radius of "
              f"{len(res['blast_radius'])} components: {cpu:5.2f} s CPU")
        assert cpu < 30
