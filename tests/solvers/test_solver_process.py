"""The solver layer in a real process: stdout holds only the JSON, and one process can run every ILP in turn.

These run the console script in a fresh subprocess because both failures they guard against live below
Python: HiGHS writes its banner to file descriptor 1 from C (pytest's ``capsys`` would not see it), and
HiGHS's thread scheduler is process-wide state (it survives between solves of one process, so only a
process that has solved before shows the bug: highspy 1.16 answered every ``threads=1`` solve that
followed a default-thread solve with "Not Set").
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from solvers.pulp_adapter import available_solvers

ROOT = Path(__file__).resolve().parents[2]
RL_SMALL = ["-p", "k=16", "-p", "samples=64", "-p", "output_median=128", "-p", "max_tokens=512",
            "-p", "prompt_len=128"]


def _fabric(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "fabric"
    cmd = [str(script)] if script.exists() else [sys.executable, "-c", "from cli.app import entry; entry()"]
    return subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _one_json_object(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = json.loads(proc.stdout)  # raises on a banner or a log line before or after the object
    assert isinstance(data, dict)
    return data


@pytest.mark.parametrize("mip_solver", available_solvers())
def test_orchestrate_json_is_the_only_stdout(mip_solver):
    d = _one_json_object(_fabric("orchestrate", "khop-ring", "--gpus", 64, "--tp", 8, "--dp", 2,
                                 "--node-fault-ratio", 0.05, "--time-limit", 10, "--mip-solver", mip_solver,
                                 "--json"))
    assert d["status"] in ("optimal", "feasible") and d["mip_solver"] in (mip_solver, "-")
    if d["mip_solver"] == "-":  # no MIP ran: only when the warm start already met the slot or line-DP bound
        assert d["status"] == "optimal" and d["gap"] == 0
        assert "line-DP" in d["notes"] or "meets the slot bound" in d["notes"]
    # the solver's own reason for stopping stands beside what was proved
    assert d["termination"] in ("optimal", "time_limit", "gap_limit")
    assert d["bound"] is None or d["bound"] >= 0  # cross-ToR bytes cannot be negative
    assert d["gap"] is None or 0 <= d["gap"] <= 1


def test_orchestrate_table_json_is_the_only_stdout():
    d = _one_json_object(_fabric("orchestrate-table", "--gpus", 128, "--max-ratio", 0.04, "--step", 0.04,
                                 "--samples", 1, "--trace", "", "--json"))
    assert any(r["solver"] == "ilp" for r in d["rows"])


def test_rl_json_is_the_only_stdout_and_carries_the_circuit_termination():
    # 256 GPUs at radix 16: more than one pod, so the rfabric's OCS is used (within one pod no OCS design pays)
    d = _one_json_object(_fabric("rl", "--gpus", 256, "--model", "llama3-8b", *RL_SMALL, "--fabric", "rfabric",
                                 "--json"))
    epochs = d["rfabric"]["epochs"] if "epochs" in d["rfabric"] else None
    text = json.dumps(d)
    assert "circuit_termination" in text, "the circuit ILP's termination reason is missing from the JSON"
    if epochs:
        assert all(e["circuit_status"] in ("optimal", "feasible", "trivial") for e in epochs)


def test_sweep_json_with_an_ilp_metric_is_the_only_stdout(tmp_path):
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({
        "name": "ilp-json", "gpus": 64, "architectures": [{"name": "khop-ring", "grid": {"k": [2]}}],
        "workloads": [{"name": "tp8", "tp": 8}], "faults": {"ratios": [0.05]}, "seeds": [0],
        "metrics": [{"orchestrator": {"dp": "2", "time_limit": 10}}]}, sort_keys=False))
    d = _one_json_object(_fabric("sweep", spec, "--out", tmp_path / "out", "--workers", 1, "--json"))
    assert d["done"] == 1 and d["failed"] == 0


def test_an_orchestrator_ilp_then_a_circuit_ilp_in_one_process():
    """Regression (highspy 1.16): a default-thread solve, then ``threads=1`` solves, in one process."""
    code = textwrap.dedent("""
        import numpy as np
        from solvers.circuits import PodPorts, assign_circuits
        from solvers.orchestrator import orchestrate_summary
        from topologies import build

        fab = build("khop-ring", 64, {})
        o = orchestrate_summary(fab, tp=8, dp=2, node_fault_ratio=0.05, seed=0, time_limit=10)
        assert o["status"] in ("optimal", "feasible"), o["status"]
        D = np.array([[0, 4e9, 1e9], [2e9, 0, 3e9], [1e9, 1e9, 0]])
        for core in (0, 2):  # without and with a core (the core path warm-starts)
            r = assign_circuits(D, PodPorts(np.array([2, 2, 2]), core, 1, 1e9), fill=False)
            assert r.status == "optimal", (core, r.status, r.termination)
        o = orchestrate_summary(fab, tp=8, dp=2, node_fault_ratio=0.05, seed=1, time_limit=10)
        assert o["status"] in ("optimal", "feasible"), o["status"]
        print("ok")
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == "ok\n"  # and no solver banner on stdout
