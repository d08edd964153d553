"""Goodput speed: the StepFun year (348 days) on 4,608 GPUs, one architecture, < 60 s (2 cores).

Run with ``.venv/bin/pytest -m bench -s tests/benchmarks/test_bench_goodput.py``.  Each architecture
runs llama3-70b at a pinned configuration (no search: ``fabric mfu --search`` is timed by its own
benchmark), elastic DP (the policy that evaluates the most job sizes), every collective timed by the
flow simulator.  The fabric build is not timed.  The limit is checked on CPU time; wall time is
printed too (on a shared machine it also measures the neighbours).
"""

import time

import pytest

from cli.goodput import goodput_summary
from topologies import build

GPUS = 4608
LIMIT_S = 60.0
# (label, architecture, params, pinned llama3-70b configuration)
ARCHS = [
    ("dgx-h100", "dgx", {}, dict(tp=8, pp=4, dp=144, micro_batch=1)),
    ("nvl-72", "nvl", {"size": 72}, dict(tp=8, pp=1, dp=512, micro_batch=1)),
    ("tpuv4", "tpuv4", {}, dict(tp=8, pp=4, dp=128, micro_batch=1)),
    ("khop-ring k=2", "khop-ring", {"k": 2}, dict(tp=8, pp=4, dp=128, micro_batch=1)),
    ("khop-ring k=3", "khop-ring", {"k": 3}, dict(tp=8, pp=4, dp=128, micro_batch=1)),
]


@pytest.mark.bench
@pytest.mark.parametrize("label,arch,params,config", ARCHS, ids=[a[0] for a in ARCHS])
def test_bench_goodput_year(label, arch, params, config):
    fab = build(arch, GPUS, params)
    t0, c0 = time.perf_counter(), time.process_time()
    d = goodput_summary(fab, "llama3-70b", trace="stepfun", policy="elastic", search=False, comm="sim",
                        global_batch=576 if arch in ("dgx",) else 512, **config)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(f"\n{label}: {d['span_days']:.0f} days, {d['fault_model']['intervals']:,} intervals, "
          f"{len(d['shapes'])} job sizes timed, {d['interruptions']} interruptions: goodput "
          f"{100 * d['goodput_ratio']:.2f} %, wall {wall:.1f} s, CPU {cpu:.1f} s (limit {LIMIT_S:.0f} s)")
    assert d["span_days"] > 340
    assert cpu < LIMIT_S
