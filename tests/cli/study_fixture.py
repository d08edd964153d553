"""A small study with every headline metric, shared by the report, SQL and browser tests."""

from __future__ import annotations

from pathlib import Path

import yaml

SMALL_FULL = {
    "name": "small-full",
    "gpus": 576,
    "architectures": [
        {"name": "dgx", "label": "dgx-h100", "workloads": [{"name": "tp8", "tp": 8}]},
        {"name": "nvl-72"},
        {"name": "khop-ring", "grid": {"k": [2]}},
    ],
    "workloads": [{"name": "tp32", "tp": 32}],
    "faults": {"ratios": [0.0, 0.03, 0.06]},
    "seeds": [0],
    "metrics": ["cost", {"faults": {"samples": 50}}, {"orchestrator": {"dp": "2", "solver": "greedy"}}, "mfu"],
}
COST_ONLY = {"name": "cost-only", "gpus": 256, "architectures": [{"name": "dgx"}, {"name": "tpuv4"}],
             "metrics": ["cost"]}


def write_spec_only(tmp: Path, doc: dict) -> Path:
    spec = tmp / f"{doc['name']}.yaml"
    spec.write_text(yaml.safe_dump(doc, sort_keys=False))
    return spec


def run_small_study(tmp: Path, doc: dict = SMALL_FULL, expect_rc: int = 0) -> Path:
    """Run ``doc`` in this process into ``tmp/out`` (exit status ``expect_rc``: 1 when every point fails)."""
    from cli.app import main

    spec = write_spec_only(tmp, doc)
    out = tmp / "out"
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1", "--json"]) == expect_rc
    return out
