"""Goodput speed: the StepFun year (348 days) on 4,608 GPUs, one architecture, < 60 s (2 cores).

Run with ``.venv/bin/pytest -m bench -s tests/benchmarks/test_bench_goodput.py``.  Each architecture
runs llama3-70b at the configuration ``fabric mfu --search`` finds for it (pinned: the search is
timed by its own benchmark), with every collective timed by the flow simulator, under the default
fixed-size policy; DGX and NVL-72 also under elastic DP, which times every size the job shrinks to (TPUv4
elastic is left out: each of its sizes costs 15-90 s of simulation).  Every distinct re-placement around
faults is timed too (the analytic delta on the simulated healthy step, :mod:`workloads.goodput.model`):
about 700 per year.  The fabric build is not timed.  The limit is checked on CPU time; wall time is
printed too (on a shared machine it also measures the neighbours).
"""

import time

import pytest

from workloads.goodput.summary import goodput_summary
from topologies import build

GPUS = 4608
LIMIT_S = 60.0
# (label, architecture, params, pinned llama3-70b configuration)
ARCHS = [
    # each architecture's configuration from `fabric mfu ARCH --gpus 4608 --model llama3-70b --search`
    ("dgx-h100", "dgx", {}, dict(tp=4, pp=4, dp=128, cp=2, interleave=8), "fixed"),
    ("dgx-h100", "dgx", {}, dict(tp=4, pp=4, dp=128, cp=2, interleave=8), "elastic"),
    ("nvl-72", "nvl", {"size": 72}, dict(tp=4, pp=1, dp=512, cp=2), "fixed"),
    ("nvl-72", "nvl", {"size": 72}, dict(tp=4, pp=1, dp=512, cp=2), "elastic"),
    ("tpuv4", "tpuv4", {}, dict(tp=8, pp=4, dp=64, cp=2, interleave=8), "fixed"),
    ("khop-ring k=2", "khop-ring", {"k": 2}, dict(tp=4, pp=16, dp=32, cp=2, interleave=4), "fixed"),
    ("khop-ring k=3", "khop-ring", {"k": 3}, dict(tp=4, pp=16, dp=32, cp=2, interleave=4), "fixed"),
]


@pytest.mark.bench
@pytest.mark.parametrize("label,arch,params,config,policy", ARCHS, ids=[f"{a[0]}-{a[4]}" for a in ARCHS])
def test_bench_goodput_year(label, arch, params, config, policy):
    fab = build(arch, GPUS, params)
    t0, c0 = time.perf_counter(), time.process_time()
    d = goodput_summary(fab, "llama3-70b", trace="stepfun", policy=policy, search=False, comm="sim", **config)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\n{label} ({policy}): {d['span_days']:.0f} days, {d['fault_model']['intervals']:,} intervals, "
          f"{len(d['shapes'])} job sizes and {d['re_placements']['distinct_placements']} re-placements timed, "
          f"{d['interruptions']} interruptions: goodput "
          f"{100 * d['goodput_ratio']:.2f} %, wall {wall:.1f} s, CPU {cpu:.1f} s (limit {LIMIT_S:.0f} s)")
    assert d["span_days"] > 340
    assert cpu < LIMIT_S


@pytest.mark.bench
@pytest.mark.parametrize("arch, gpus", [("khop-ring", 16384), ("dgx", 8192), ("dgx", 16384), ("dgx", 65536)])
def test_bench_goodput_command_at_scale(arch, gpus):
    """`fabric goodput ARCH --gpus N --model llama3-70b` end to end (search with `--comm sim`, the year, the
    re-placements), as a user runs it.  Before routes into a GPU behind its NIC were searched once per ToR
    (fabric.sim.routing.Gateways) and the step model's send/recv pairs were timed as one batch without a
    Collective each (Simulator.batch_times), khop-ring 16,384 and dgx 65,536 took > 120 s, dgx 8,192 5-7 s.
    Limit on CPU time; wall time printed too."""
    from cli.app import main

    t0, c0 = time.perf_counter(), time.process_time()
    rc = main(["goodput", arch, "--gpus", str(gpus), "--model", "llama3-70b", "--json", "--no-series"])
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\nfabric goodput {arch} --gpus {gpus} --model llama3-70b (sim): wall {wall:.1f} s, CPU {cpu:.1f} s "
          f"(limit {LIMIT_S:.0f} s)")
    assert rc == 0 and cpu < LIMIT_S


@pytest.mark.bench
@pytest.mark.parametrize("arch, gpus, params", [("dgx", 2048, {}), ("tpuv4", 4608, {}), ("dgx", 4608, {"gpu": "h100"}),
                                                ("khop-ring", 16384, {})])
def test_bench_goodput_sizing(arch, gpus, params):
    """`--sizing goodput` on top of the year: the sizes are timed by the analytic step model and replayed with a
    placement-blind rate until the bound stops the search (workloads/goodput/sizing.py).  The healthy job's
    search is not timed (its own benchmark); the sized year is, as a user gets it.  Limit on CPU time."""
    from workloads.mfu import mfu_summary

    fab = build(arch, gpus, params)
    mfu = mfu_summary(fab, "llama3-70b", comm="sim")
    t0, c0 = time.perf_counter(), time.process_time()
    d = goodput_summary(fab, "llama3-70b", trace="stepfun", comm="sim", series=False, mfu_data=mfu,
                        sizing="goodput")
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    s = d["sizing"]
    print(f"\n{arch} {gpus:,} GPUs sized for goodput: dp {s['dp']} of {s['healthy_dp']} ({s['spare_gpus']:,} GPUs "
          f"spare), {s['sizes_replayed']} of {s['sizes_considered']} sizes replayed, goodput "
          f"{100 * d['goodput_ratio']:.2f} %, {d['effective_tokens_per_s']:,.0f} tokens/s; wall {wall:.1f} s, "
          f"CPU {cpu:.1f} s (limit {LIMIT_S:.0f} s)")
    assert s["dp"] <= s["healthy_dp"] and cpu < LIMIT_S
