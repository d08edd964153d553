"""RL design points and the OCS circuit ILP at realistic sizes (run with `pytest -m bench -s`); prints its figures."""

import time

import numpy as np
import pytest

from fabric.catalog import load_catalog
from solvers.circuits import PodPorts, assign_circuits
from topologies import build
from workloads.models import load_model
from workloads.rl import RLConfig, evaluate_rl


@pytest.mark.bench
@pytest.mark.parametrize("arch, params, gpus, model, timing", [
    ("rfabric", {"k": 16, "core_ratio": 0.0}, 512, "llama3-8b", "sim"),
    ("dgx", {"k": 32, "tiers": "3", "gpu": "h800"}, 1024, "llama3-70b", "sim"),
    ("rfabric", {"core_ratio": 0.0}, 16384, "llama3-70b", "analytic"),
    ("dgx", {"tiers": "3", "gpu": "h800"}, 16384, "llama3-70b", "analytic"),
])
def test_bench_rl_design_point(arch, params, gpus, model, timing):
    cat = load_catalog()
    t0 = time.perf_counter()
    f = build(arch, gpus, params, cat)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = evaluate_rl(f, load_model(model), RLConfig(), cat, timing=timing)
    elapsed = time.perf_counter() - t0
    ph = ", ".join(f"{k} {v:.3f} s" for k, v in r.phases.items())
    print(f"\nrl {arch} {params} {gpus} GPUs {model} ({timing}): build {t_build:.2f} s, evaluate {elapsed:.2f} s; "
          f"{ph}; iteration {r.iteration_s:.3f} s, {r.reconfigurations} re-wirings, "
          f"{r.samples_per_s_per_musd:.4f} samples/s per $M")
    assert r.iteration_s > 0


def _rl_demand(P: int) -> np.ndarray:
    """Trainer pods 0..P/2-1 (DP ring between neighbours) send the policy to rollout pods P/2..P-1."""
    D = np.zeros((P, P))
    h = P // 2
    for p in range(h):
        D[p, (p + 1) % h] += 5e11
        D[p, h:] += 1e12 / h
    return D


@pytest.mark.bench
@pytest.mark.parametrize("pods", [8, 16, 32, 64])
@pytest.mark.parametrize("core", [0.0, 0.5])
@pytest.mark.parametrize("pattern", ["rl", "random"])
def test_bench_circuit_ilp(pods, core, pattern):
    """Ports per pod and plane as at radix 128 (64 aggregation uplinks), 64 planes of 400G."""
    U = 64
    ports = PodPorts(np.full(pods, U), int(core * U) * pods, 64, 50e9)
    rng = np.random.default_rng(pods)
    D = _rl_demand(pods) if pattern == "rl" else rng.random((pods, pods)) * 1e11 * (rng.random((pods, pods)) < 0.3)
    t0 = time.perf_counter()
    r = assign_circuits(D, ports, time_limit=10.0, gap=1e-4)
    elapsed = time.perf_counter() - t0
    gap = "-" if r.gap is None else f"{r.gap:.2%}"
    print(f"\ncircuit ILP {pods} pods, core_ratio {core}, {pattern} demand: {elapsed:.2f} s, {r.status} (gap {gap}), "
          f"predicted {r.time_s * 1e3:.2f} ms")
    assert r.status in ("optimal", "feasible", "infeasible")


@pytest.mark.bench
@pytest.mark.parametrize("gpus, table", [(8192, False), (16384, False), (8192, True)])
def test_bench_rl_command_at_scale(gpus, table):
    """`fabric rl --gpus N --model llama3-70b` with the default `--comm sim`, static and rfabric, end to end.

    16,384 GPUs took 76 s (8,192: 1.6 s) before routes into a GPU behind its NIC were searched once per ToR
    (fabric.sim.routing.Gateways): the weight sync's 8,192 flows each ran a breadth-first search of their own.
    ``--table`` (every static and rfabric variant) at 8,192 GPUs took > 60 s.  Limit on CPU time (the machine is
    shared); wall time printed too."""
    from cli.app import main

    t0, c0 = time.perf_counter(), time.process_time()
    rc = main(["rl", "--gpus", str(gpus), "--model", "llama3-70b", "--json"] + (["--table"] if table else []))
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\nfabric rl --gpus {gpus} --model llama3-70b{' --table' if table else ''} (sim): wall {wall:.1f} s, "
          f"CPU {cpu:.1f} s (limit 30 s)")
    assert rc == 0 and cpu < 30.0
