"""MFU benchmarks (issue: workloads and MFU): run with `pytest -m bench -s tests/benchmarks/test_bench_mfu.py`.

* one design point < 50 ms once its collective times are cached;
* a search over ~1,000 configurations < 60 s on 2 cores (collectives of the
  shortlist timed by the flow simulator, cold);
* the validation table against narayanan2021-table1.csv with the live
  simulator (cold), with leave-one-out errors; set ``FABRIC_WRITE_REFERENCE=1``
  to rewrite ``tests/data/mfu_validation_comm.json`` from it;
* the seeds' comparison: best-configuration MFU of a dense and an MoE model
  at two scales on DGX, NVL-72 and the k-hop ring.
"""

import os
import time
from pathlib import Path

import pytest

from topologies import build
from workloads import comm
from workloads.models import load_model
from workloads.parallelism import Parallelism
from workloads.search import candidates, search
from workloads.step import StepModel

DATA = Path(__file__).parent.parent / "data" / "mfu_validation_comm.json"


@pytest.mark.bench
def test_bench_design_point_cached():
    fab = build("nvl-72", 4608, {"gpu": "gpu_b200"})
    model = load_model("llama3-405b")
    par = Parallelism(tp=8, pp=9, dp=64, micro_batch=1, global_batch=576, interleave=2, sequence_parallel=True,
                      recompute="full")
    t0 = time.perf_counter()
    sm = StepModel(fab, model)
    first = sm.evaluate(par)
    cold = time.perf_counter() - t0
    n = 20
    t0 = time.perf_counter()
    for _ in range(n):
        sm.evaluate(par)
    warm = (time.perf_counter() - t0) / n
    t0 = time.perf_counter()
    StepModel(fab, model).evaluate(par)  # a new model object: placement rebuilt, collective fits cached
    fresh = time.perf_counter() - t0
    print(f"\nllama3-405b {par.label()} on nvl-72 x 4,608 ({first.comm_backend}): first {cold:.2f} s, "
          f"cached {1e3 * warm:.2f} ms, new StepModel with cached collectives {1e3 * fresh:.1f} ms; "
          f"MFU {100 * first.mfu:.1f} %")
    assert warm < 0.05 and fresh < 0.05


@pytest.mark.bench
def test_bench_search_1000_configurations():
    comm.clear_cache()
    fab = build("dgx", 1024, {"gpu": "h100"})
    sm = StepModel(fab, load_model("gpt3-175b"))
    fixed = {"recompute": "full"}
    n = sum(1 for _ in candidates(sm, 1536, fixed))
    t0 = time.perf_counter()
    res = search(sm, 1536, fixed=fixed, confirm=3)
    elapsed = time.perf_counter() - t0
    b = res.best
    print(f"\nsearch gpt3-175b on dgx-h100 x 1,024: {n:,} configurations ({res.invalid} invalid, {res.oom} out of "
          f"memory, {res.screened} screened, {res.confirmed} simulated) in {elapsed:.1f} s; best {b.parallelism.label()}"
          f" MFU {100 * b.mfu:.1f} % ({b.comm_backend})")
    assert 800 <= n <= 1500 and elapsed < 60


@pytest.mark.bench
def test_bench_validation_live():
    from workloads.validation import SETS, Validator, summary, table

    def dgx(gpus, gpu):
        return build("dgx", gpus, {"gpu": gpu.replace("gpu_", "")})

    comm.clear_cache()
    t0 = time.perf_counter()
    v = Validator(dgx, sets=SETS)
    preds = v.predict_all()
    t_sim = time.perf_counter() - t0
    if os.environ.get("FABRIC_WRITE_REFERENCE"):
        comm.save_fits(DATA)
    s = summary(preds)
    print("\n" + table(preds))
    for name, per in s["per_set"].items():
        print(f"{name}: {per['rows']} rows, {per['held_out']} held out, mean |error| "
              f"{100 * per['mean_abs_error']:.1f} %, max {100 * per['max_abs_error']:.1f} %")
    print(f"simulation {t_sim:.0f} s")
    # the stored simulator fits the unit test uses must agree with the live simulator
    live = {(p.case.set, p.case.row): p.predicted for p in preds}
    comm.clear_cache()
    comm.load_fits(DATA, as_current=True)
    stored = {(p.case.set, p.case.row): p.predicted for p in Validator(dgx, sets=SETS).predict_all()}
    drift = max(abs(stored[k] / live[k] - 1) for k in live)
    print(f"stored fits vs live simulator: max drift {100 * drift:.2f} %")
    k = s["per_set"]["korthikanti2022"]
    assert k["mean_abs_error"] < 0.035 and k["max_abs_error"] < 0.08 and drift < 0.01


@pytest.mark.bench
def test_bench_seeds_comparison():
    from topologies import build
    from workloads.mfu_compare import format_mfu_comparison, mfu_comparison

    t0 = time.perf_counter()
    rows = mfu_comparison(build, ["llama3-70b", "mixtral-8x22b"], [576, 2304])
    print(f"\n{format_mfu_comparison(rows)}\n({time.perf_counter() - t0:.0f} s, collectives by {rows[0]['comm_backend']})")
    assert all(r["mfu"] > 0 for r in rows)
