"""Large-shape benchmarks found by the scale probe.  Run: ``pytest -m bench -s tests/benchmarks/test_bench_scale.py``.

Targets: one max-min fair allocation of 30,000 random flows on ``dgx --gpus 16384`` under ideal ECMP
(6.8 M route entries, ~340 bottleneck levels) < 5 s of CPU (it was 20 s: every level recomputed every arc
load); 10,000 such flows simulated end to end (event method) < 30 s of CPU.  CPU time, not wall time,
is asserted: the machine is shared.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from fabric.sim import FlowTable, Simulator
from topologies import build


def _random_table(fab, n: int, seed: int = 0) -> FlowTable:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, fab.n_gpus, n)
    dst = (src + 1 + rng.integers(0, fab.n_gpus - 1, n)) % fab.n_gpus
    return FlowTable.build(fab.gpu_ids[src], fab.gpu_ids[dst], 2.0 ** 20)


@pytest.mark.bench
def test_bench_max_min_many_levels():
    fab = build("dgx", gpus=16384)
    sim = Simulator(fab)
    table = _random_table(fab, 30_000)
    sim.problem(table)  # routes cached: the allocation is what is timed
    c0, t0 = time.process_time(), time.perf_counter()
    rates = sim.rates(table)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    levels = np.unique(rates).size
    print(f"\nmax-min, 30,000 random flows on dgx 16,384: {wall:.2f} s wall, {cpu:.2f} s CPU, {levels} levels")
    assert np.all(np.isfinite(rates)) and levels > 100
    assert cpu < 5.0


@pytest.mark.bench
def test_bench_random_flows_event_run():
    fab = build("dgx", gpus=16384)
    table = _random_table(fab, 10_000)
    c0, t0 = time.process_time(), time.perf_counter()
    res = Simulator(fab).run(table)
    cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    print(f"\n10,000 random flows on dgx 16,384, event run: {wall:.2f} s wall, {cpu:.2f} s CPU, "
          f"{res.events} events, makespan {res.makespan_s:.3e} s")
    assert cpu < 30.0
