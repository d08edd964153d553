"""Validation against measured Megatron-LM throughput (narayanan2021-table1.csv), per row.

Collective times come from the flow simulator; to keep this test fast the
simulator's fits for these ten placements are read from
``tests/data/mfu_validation_comm.json`` (written by
``tests/benchmarks/test_bench_mfu.py::test_bench_validation_live``, which
re-simulates them and checks the stored ones).
"""

from pathlib import Path

import pytest

from topologies import build
from workloads import comm
from workloads.compute import DEFAULT_GEMM
from workloads.validation import CALIBRATION_ROWS, Validator, summary, table

DATA = Path(__file__).parent.parent / "data" / "mfu_validation_comm.json"


@pytest.fixture(scope="module")
def validator():
    comm.load_fits(DATA, as_current=True)
    v = Validator(lambda g: build("dgx", g, {"gpu": "a100"}))
    yield v
    comm.clear_cache()


def test_every_row_within_target(validator):
    preds = validator.predict_all()
    print("\n" + table(preds))
    s = summary(preds)
    print(f"held-out rows: mean |error| {100 * s['mean_abs_error']:.1f} %, max {100 * s['max_abs_error']:.1f} %")
    assert len(preds) == 10 and len(s["held_out_rows"]) == 7
    assert s["mean_abs_error"] <= 0.05 and s["max_abs_error"] <= 0.10
    for p in preds:  # calibration rows too, and every prediction fits in 80 GB with micro-batch 1 or 2
        assert abs(p.error) <= 0.10 and p.micro_batch in (1, 2) and p.memory_gb < 80
    assert all(p.tflops > 100 for p in preds)
    assert {p.row.model: p.breakdown["bubble"] > 0 for p in preds}["1T"]


def test_shipped_calibration_is_the_fit_on_the_calibration_rows(validator):
    g = validator.calibrate(CALIBRATION_ROWS)
    assert g.eta_max == pytest.approx(DEFAULT_GEMM.eta_max, abs=0.01)
    assert g.d0 == pytest.approx(DEFAULT_GEMM.d0, abs=10)
