"""Regression tests from the large-shape probe: a flows simulation's memory is checked before routing.

Under ideal ECMP a route spreads over every shortest path, so the memory of a flows run grows with
distinct pairs x route length; 1 M random flows on ``dgx --gpus 16384`` (224 arcs per route) used to run a
minute past 5 GB into a MemoryError although the ``flows`` limit (4 M) let them through.  The limits are
lowered here so that the cases stay small.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fabric import limits
from fabric.errors import FabricError
from fabric.sim import FlowTable, simulator
from fabric.sim.api import BYTES_PER_ROUTE_ARC, BYTES_PER_STEP_FLOW
from topologies import build


def _random_pairs(n_gpus: int, n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    src = rng.integers(0, n_gpus, n)
    dst = (src + 1 + rng.integers(0, n_gpus - 1, n)) % n_gpus
    return src, dst


@pytest.fixture
def fab():
    return build("dgx", 256, {"k": 16})  # 3 tiers: cross-pod routes spread over many arcs


def _table(fab, n):
    src, dst = _random_pairs(fab.n_gpus, n)
    return FlowTable.build(fab.gpu_ids[src], fab.gpu_ids[dst], 2.0 ** 20)


def _true_route_bytes(fab, table) -> float:
    """Route entries of the problem actually built (the independent count), x the per-entry bytes."""
    prob, _, _ = simulator(fab).problem(table)
    return prob.R.nnz * BYTES_PER_ROUTE_ARC


def test_route_estimate_tracks_the_routes_built(fab):
    """The sampled estimate is within 25 % of pairs x route arcs of the CSR the simulator builds."""
    table = _table(fab, 2000)
    true = _true_route_bytes(fab, table)
    token = limits.set_limits(limits.Limits(memory=int(true * 0.75)))
    try:
        with pytest.raises(FabricError) as exc:
            simulator(fab).run(table)
    finally:
        limits.reset(token)
    assert exc.value.field == "flows"
    assert "distinct (src, dst) pairs" in exc.value.message and "memory=N" in exc.value.message
    token = limits.set_limits(limits.Limits(memory=int(true * 1.25)))
    try:
        prob, _, _ = simulator(fab).problem(table)  # routed, not refused (scheduling is not what is checked)
    finally:
        limits.reset(token)
    assert prob.R.nnz * BYTES_PER_ROUTE_ARC == true


def test_few_pairs_are_not_sampled(fab):
    """At most ROUTE_SAMPLE distinct pairs are routed anyway: no estimate, same result as before."""
    table = _table(fab, 10)
    res = simulator(fab).run(table)
    assert res.makespan_s > 0


def test_cli_names_the_flows_flag_and_writes_nothing(run_cli, tmp_path, fab):
    """Over the memory limit the CLI says --flows, one line, exit 2, nothing on stdout."""
    src, dst = _random_pairs(256, 3000)
    path = tmp_path / "flows.json"
    path.write_text(json.dumps([{"src": int(s), "dst": int(d), "bytes": 1048576} for s, d in zip(src, dst)]))
    table = FlowTable.build(fab.gpu_ids[src], fab.gpu_ids[dst], 2.0 ** 20)
    true = _true_route_bytes(fab, table)
    # above the file's parse estimate (16 B per byte) and the fabric's, below its routes
    limit = int(true * 0.75)
    assert limit > 16 * path.stat().st_size
    rc, out, err = run_cli("--limit", f"memory={limit}B", "simulate", "dgx", "--gpus", "256", "-p", "k=16",
                           "--flows", path, "--json")
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --flows:") and "distinct (src, dst) pairs" in lines[0]


def test_cli_refuses_a_flows_file_too_large_to_parse(run_cli, tmp_path):
    """Before parsing: a file whose parsed flows (~16 B per file byte, measured) exceed the memory limit."""
    path = tmp_path / "flows.json"
    path.write_text(json.dumps([{"src": 0, "dst": 1, "bytes": 1}] * 5000))  # ~150 kB
    rc, out, err = run_cli("--limit", "memory=1MB", "simulate", "dgx", "--gpus", "8", "--flows", path, "--json")
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --flows:") and "flows.json is" in lines[0] and "memory=N" in lines[0]


def test_a_simulated_fabric_is_freed_with_its_caches():
    """The module's Simulator cache held each Simulator and so its Fabric: every simulated Fabric (a sweep's
    points, ``rl --table``'s candidates) stayed in memory with its routing graphs until the process ended,
    and the per-Fabric caches keyed by id (gateways, the collective model's view and digest) kept their
    arrays after their object died.  Now all of them go with the Fabric."""
    import gc
    import weakref

    from fabric.sim import api, routing
    from fabric.sim import simulate_collective
    from workloads import comm

    gc.collect()  # Fabrics of earlier tests that wait in reference cycles leave now, not during the test
    before = {name: len(c) for name, c in (("gw", routing._GATEWAYS), ("view", comm._VIEW_BY_ID),
                                            ("digest", comm._DIGESTS))}
    fab = build("dgx", 64)
    ref = weakref.ref(fab)
    t = simulate_collective(fab, "all-reduce", range(16), 2**20, algorithm="ring").time_s
    comm.analytic_comm_time(fab, "all_reduce", np.arange(16).reshape(1, 16), 2.0**20)
    comm.fabric_digest(fab)
    assert api.simulator(fab) is api.simulator(fab) and api.simulator(fab).fabric is fab  # still one per Fabric
    assert api.simulator(build("dgx", 64)).fabric.n_gpus == 64  # a Simulator keeps the Fabric it was given
    del fab
    gc.collect()
    assert ref() is None
    after = {name: len(c) for name, c in (("gw", routing._GATEWAYS), ("view", comm._VIEW_BY_ID),
                                           ("digest", comm._DIGESTS))}
    assert after == before
    # the same Fabric built again times the same (the cache changed nothing but lifetime)
    assert simulate_collective(build("dgx", 64), "all-reduce", range(16), 2**20, algorithm="ring").time_s == t


def test_a_pickled_fabric_leaves_its_simulator_behind():
    """The Simulator cached on a Fabric is not part of its state: pickling (a Dask worker) or deepcopy gives the
    same bytes as before any simulation, and the copy simulates the same time with a Simulator of its own."""
    import copy
    import pickle

    from fabric.sim import simulate_collective, simulator
    from topologies import build

    fab = build("dgx", 16)
    before = pickle.dumps(fab)
    first = simulate_collective(fab, "all_reduce", ranks=list(range(16)), size=1e8)
    assert pickle.dumps(fab) == before
    again = pickle.loads(before)
    assert simulate_collective(again, "all_reduce", ranks=list(range(16)), size=1e8).time_s == first.time_s
    twin = copy.deepcopy(fab)
    assert simulator(twin) is not simulator(fab)


def test_a_collectives_route_memory_blames_the_gpus_not_its_ranks(fab):
    """Collectives route with field "ranks" (an unreachable rank, which `mfu` blames on --topology); their route
    memory grows with the GPUs taking part, so that refusal names ``gpus`` (`mfu` said --topology at 524,288)."""
    table = _table(fab, 2000)
    token = limits.set_limits(limits.Limits(memory=int(_true_route_bytes(fab, table) * 0.75)))
    try:
        with pytest.raises(FabricError) as exc:
            simulator(fab).problem(table, field="ranks")
        with pytest.raises(FabricError) as flows_exc:
            simulator(fab).problem(table, field="flows")
    finally:
        limits.reset(token)
    assert exc.value.field == "gpus" and "distinct (src, dst) pairs" in exc.value.message
    assert flows_exc.value.field == "flows"


@pytest.mark.parametrize("algorithm", ["ring", "tree"])
def test_default_channels_are_checked_against_the_flows_limit(algorithm):
    """NCCL's default is one channel per rank of an HBD domain, so a ring or tree step builds groups x ranks x
    channels flows.  Only a given ``channels`` was checked: all-reduce over two TPUv4 pods (8,192 chips, 4,096
    default channels) built 33.5 M step flows and grew past 23 GB (NCCL's MAXCHANNELS, 64, now caps them).  Two
    NVL-72 racks (64 channels x 144 ranks) stand in for it under a lowered memory limit; a given smaller channel
    count still runs."""
    from fabric.sim import simulate_collective

    fab = build("nvl", 144, {"size": 72})
    token = limits.set_limits(limits.Limits(memory=5000 * BYTES_PER_STEP_FLOW))
    try:
        with pytest.raises(FabricError) as exc:
            simulate_collective(fab, "all-reduce", ranks=range(144), size=2 ** 20, algorithm=algorithm)
        ok = simulate_collective(fab, "all-reduce", ranks=range(144), size=2 ** 20, algorithm=algorithm, channels=4)
    finally:
        limits.reset(token)
    assert exc.value.field == "channels"
    assert "64 " in exc.value.message and "default" in exc.value.message and "memory=N" in exc.value.message
    assert ok.time_s > 0 and ok.channels == 4


def test_cli_names_channels_when_the_default_channels_are_too_many(run_cli):
    """One line naming --channels, exit 2, nothing on stdout (it ran before, past the limit)."""
    rc, out, err = run_cli("--limit", f"memory={5000 * BYTES_PER_STEP_FLOW}B", "simulate", "nvl-72", "--gpus", "144", "--collective",
                           "all-reduce", "--size", "1MiB", "--group-size", "144", "--algorithm", "ring", "--json")
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --channels:") and "64 rings" in lines[0]


def test_auto_checks_every_candidates_step_flows_before_timing_any(monkeypatch):
    """Under ``auto`` the ring ran first and the tree (4 flows per rank and channel) was refused after it: 16 s of
    work on ``nvl-72 --gpus 65536`` before the one-line refusal.  Now no candidate is timed."""
    from fabric.sim import api, simulate_collective

    fab = build("nvl", 144, {"size": 72})
    timed = []
    monkeypatch.setattr(api, "time_ring", lambda *a, **k: timed.append("ring"))
    token = limits.set_limits(limits.Limits(memory=144 * 72 * 2 * BYTES_PER_STEP_FLOW))  # the ring's step fits, the tree's does not
    try:
        with pytest.raises(FabricError) as exc:
            simulate_collective(fab, "all-reduce", ranks=range(144), size=2 ** 30)
    finally:
        limits.reset(token)
    assert exc.value.field == "channels" and "trees" in exc.value.message and timed == []


def test_mfu_names_comm_when_default_channels_are_too_many(run_cli):
    """`mfu` times its DP rings with NCCL's default channels, which it has no flag for: across TPUv4 pods a ring
    over nodes gets one channel per node of the smaller pod (64 here, also NCCL's MAXCHANNELS; 1,024 on 16,384
    chips before that cap, where `mfu tpuv4 --model llama3-8b --search` ran past 5 minutes).  The refusal names --comm (analytic timing pays none), not
    the library's "channels"."""
    rc, out, err = run_cli("--limit", "memory=150MB", "mfu", "tpuv4", "--gpus", "4352", "--model", "megatron-1.7b",
                           "--tp", "4", "--pp", "1", "--dp", "1088", "--global-batch", "1088", "--json")
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --comm:") and "64 rings" in lines[0]


def test_all_to_all_flows_refusal_counts_the_groups(run_cli):
    """1,024 groups of 64 ranks were refused as "4,128,768 flows (all-to-all: ranks x (ranks - 1) per group)",
    which 64 x 63 = 4,032 does not explain; the message now says how many groups."""
    rc, out, err = run_cli("--limit", "flows=100", "simulate", "dgx", "--gpus", "64", "--collective", "all-to-all",
                           "--size", "1MiB", "--group-size", "8", "--groups", "8", "--json")
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --group-size:") and "448 flows" in lines[0] and "x 8 groups" in lines[0]


def test_default_channels_stop_at_nccl_maxchannels():
    """NCCL runs a collective on at most MAXCHANNELS (64) channels (catalog ``nccl_max_channels``).  One channel per
    rank of a domain gave a ring over two TPUv4 pods (one domain of 4,096 chips each) 4,096 rings, which NCCL
    cannot run; two NVL-72 racks 72.  Below the cap nothing changes: 16 ranks in each of two racks, 16 rings."""
    from fabric.sim.nccl import channel_count, nccl_model, ring_channel_count

    assert nccl_model().max_channels == 64
    tpu = build("tpuv4", 8192, {})
    assert channel_count(tpu, tpu.gpu_ids) == 64 and ring_channel_count(tpu, tpu.gpu_ids) == 64
    nvl = build("nvl", 144, {"size": 72})
    assert channel_count(nvl, nvl.gpu_ids) == 64
    assert channel_count(nvl, np.concatenate([nvl.gpu_ids[:16], nvl.gpu_ids[72:88]])) == 16
