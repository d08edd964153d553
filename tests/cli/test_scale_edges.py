"""Regression tests from the large-shape probe: CLI tables refuse before building the next fabric or curve.

``fabric faults-table --gpus 131072 --samples 20000`` built every fabric of both tables (2.0 GB) and
computed the DGX curves for 17 s before the NVL-72 fabric's Monte Carlo size was refused; now each
fabric's sampling size is checked as it is built (2 s, 0.8 GB).
"""

from __future__ import annotations

import pytest

from fabric import limits
from fabric.errors import FabricError
from fabric.faults import BYTES_PER_SAMPLE_POSITION, NodeIndex
from topologies import build


def test_waste_table_checks_every_entry_before_the_first_curve(monkeypatch):
    """The larger fabric is over the memory limit: refused before the smaller one's curve is computed."""
    import solvers.allocation.summary as summary

    def curve_called(*_a, **_k):
        raise AssertionError("a curve was computed before every entry was checked")

    monkeypatch.setattr(summary, "fault_curve", curve_called)
    small, large = build("dgx", 64), build("dgx", 1024)
    samples = 100
    # samples x nodes x 8 B (the estimate of fabric.faults.check_sampling_size, draws aside):
    # 1,024 DGX GPUs are 128 nodes, so 100 samples need > 102,400 B; 64 GPUs (8 nodes) fit in 20,000
    assert NodeIndex.of(large).n_nodes == 128
    token = limits.set_limits(limits.Limits(memory=samples * 128 * BYTES_PER_SAMPLE_POSITION - 1))
    try:
        with pytest.raises(FabricError) as exc:
            summary.waste_table([("s", small, (8,)), ("l", large, (8,))], [0.0, 0.1], samples=samples, trace=None)
    finally:
        limits.reset(token)
    assert exc.value.field == "samples" and "128 nodes" in exc.value.message


def test_faults_table_refuses_one_line(run_cli):
    rc, out, err = run_cli("--limit", "memory=5MB", "faults-table", "--gpus", "512", "--samples", "100000",
                           "--tp", "8", "--json")
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --samples:") and "memory=N" in lines[0]


def test_rl_refused_before_any_fabric_is_built(run_cli, monkeypatch):
    """``rl --gpus 524288`` passed every fabric check and ran out of memory in the simulator after 18 s
    (3.7 GB under a 4 GB cap); the run's peak (~14-19 KB per GPU, simulated) is now refused up front."""
    import topologies

    def built(*_a, **_k):
        raise AssertionError("a fabric was built before the RL memory estimate")

    monkeypatch.setattr(topologies, "build", built)
    for extra in ([], ["--table"]):
        rc, out, err = run_cli("rl", "--gpus", "524288", "--model", "llama3-8b", *extra, "--json")
        lines = [line for line in err.splitlines() if line.strip()]
        assert rc == 2 and out == "" and len(lines) == 1, err
        assert lines[0].startswith("error: --gpus:") and "memory" in lines[0] and "524,288 GPUs" in lines[0]


def test_rl_memory_estimate_is_per_gpu_and_by_timing():
    """The estimate is GPUs x the measured peak per GPU of its timing: analytic (2.5 KB measured) admits
    524,288 GPUs under the default 4 GiB, sim (13.7-18.9 KB measured) refuses it and admits 131,072."""
    from workloads.rl.compare import RL_BYTES_PER_GPU, check_rl_size

    check_rl_size(524288, "analytic")
    check_rl_size(131072, "sim")
    with pytest.raises(FabricError) as exc:
        check_rl_size(524288, "sim")
    assert exc.value.field == "gpus"
    token = limits.set_limits(limits.Limits(memory=1000 * RL_BYTES_PER_GPU["analytic"] - 1))
    try:
        with pytest.raises(FabricError):
            check_rl_size(1000, "analytic")
    finally:
        limits.reset(token)


def test_rl_table_holds_one_candidate_fabric_at_a_time(monkeypatch):
    """The table kept all nine rfabric candidates alive to re-evaluate one (65,536 GPUs, analytic: 586 MB
    peak, now 384 MB, same bytes out); at most one rfabric exists at a time, plus the re-built pick."""
    import gc
    import weakref

    import topologies
    from workloads.rl.compare import rl_table

    alive: list[weakref.ref] = []
    most = [0]
    real = topologies.build

    def build(arch, *a, **k):
        fab = real(arch, *a, **k)
        if arch == "rfabric":
            gc.collect()
            live = sum(r() is not None for r in alive)
            most[0] = max(most[0], live + 1)
            alive.append(weakref.ref(fab))
        return fab

    small = {"k": "16", "samples": "64", "output_median": "128", "max_tokens": "512", "prompt_len": "128"}
    # once first: the circuit solver's first (lazy) import keeps the frames of its caller, and so that one
    # Fabric, for the life of the process (an import-time quirk, bounded to one)
    rl_table(topologies, 256, "llama3-8b", params=small, timing="analytic")
    monkeypatch.setattr(topologies, "build", build)
    t = rl_table(topologies, 256, "llama3-8b", params=small, timing="analytic")
    assert len(t["sweep"]) == 5 and sum("error" not in r for r in t["rfabric"]) >= 2
    assert most[0] == 1


def test_mfu_search_keeps_a_bounded_number_of_placements(monkeypatch):
    """Every placement on a k-hop line is a re-configured copy of the Fabric with its own simulator state,
    and the search kept all of them (227 at 16,384 GPUs, 0.64 GB; `mfu khop-ring --gpus 131072 --search` ran
    out of memory).  The StepModel now keeps the most recent few; the result is the same with any bound
    (placements are pure functions of the Fabric and the shape, re-made on a miss)."""
    import gc
    import weakref

    from workloads import step
    from workloads.mfu import mfu_summary
    from workloads.placement import RankPlacement

    fab = build("khop-ring", 256)
    unbounded = mfu_summary(fab, "llama3-8b", search=True, comm="sim")
    made: list[weakref.ref] = []
    most = [0]
    real = RankPlacement.__init__

    def init(self, *a, **k):
        real(self, *a, **k)
        gc.collect()
        made.append(weakref.ref(self))
        most[0] = max(most[0], sum(r() is not None for r in made))

    monkeypatch.setattr(step, "PLACEMENTS_KEPT", 1, raising=False)
    monkeypatch.setattr(RankPlacement, "__init__", init)
    bounded = mfu_summary(fab, "llama3-8b", search=True, comm="sim")
    # mfu_summary times on three StepModels (search, confirmation, the reported one), each with its own
    # placements: at most one each, plus one a caller holds while the next is made (before: all 6 stayed)
    assert most[0] <= 3 + 1 < len(made)
    for key in ("config", "mfu", "step_time_s"):
        assert bounded[key] == unbounded[key]


@pytest.mark.parametrize("command", ["mfu", "goodput"])
def test_simulated_step_models_refused_before_any_collective_is_simulated(run_cli, monkeypatch, command):
    """``mfu dgx --gpus 524288 --search`` grew past 8 GB for 83 s before a route-memory check refused it, naming
    --topology; the peak per GPU of simulated timing (27-40 KB measured) is now checked before the search.

    The limit is lowered so that the case is small: 8,192 GPUs x 24 KiB = 192 MiB > 100 MB.
    """
    import workloads.search as search

    def searched(*_a, **_k):
        raise AssertionError("the search ran before the memory estimate")

    monkeypatch.setattr(search, "search", searched)
    extra = ["--no-series"] if command == "goodput" else ["--search"]
    rc, out, err = run_cli("--limit", "memory=100MB", command, "dgx", "--gpus", "8192", "--model", "llama3-8b",
                           *extra, "--json")
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --gpus:") and "8,192 GPUs" in lines[0] and "--comm analytic" in lines[0]


def test_simulated_step_memory_estimate_is_per_job_gpu_and_only_for_sim():
    """GPUs x SIM_BYTES_PER_GPU against the limit: 131,072 GPUs (measured 3.6-4.0 GB) pass the default 4 GiB,
    524,288 do not; analytic timing holds no routes and is never refused here."""
    from workloads.mfu import SIM_BYTES_PER_GPU, check_sim_memory

    check_sim_memory(131072, "sim")
    check_sim_memory(10 ** 9, "analytic")
    with pytest.raises(FabricError) as exc:
        check_sim_memory(524288, "sim")
    assert exc.value.field == "gpus"
    token = limits.set_limits(limits.Limits(memory=1000 * SIM_BYTES_PER_GPU - 1))
    try:
        with pytest.raises(FabricError):
            check_sim_memory(1000, "sim")
        check_sim_memory(999, "sim")
    finally:
        limits.reset(token)
