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
