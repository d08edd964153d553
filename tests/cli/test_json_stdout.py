"""Every command's ``--json`` prints exactly one JSON object on stdout, in a real process.

A fresh subprocess per command, because what breaks a user's pipe lives below Python: a C solver
writing a banner to file descriptor 1 (highspy 1.16 does, once per process), a library logging to
stdout. ``json.loads`` of the whole of stdout fails on anything before or after the object.

The table of examples must name every command that has ``--json``: a new command without an
example fails :func:`test_every_json_command_has_an_example`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]

STUDY = {"name": "json", "gpus": 64, "architectures": [{"name": "khop-ring", "grid": {"k": [2]}}],
         "workloads": [{"name": "tp8", "tp": 8}], "faults": {"ratios": [0.05]}, "seeds": [0],
         "metrics": ["cost", {"orchestrator": {"dp": "2", "time_limit": 10}}]}

# command -> its arguments (``{tmp}`` is a per-test folder; ``{study}`` a study spec written there)
EXAMPLES: dict[str, list[str]] = {
    "list": [],
    "build": ["khop-ring", "--gpus", "64"],
    "cost": ["nvl", "--gpus", "144"],
    "compare": ["--gpus", "576"],
    "sweep": ["{study}", "--out", "{tmp}/out", "--workers", "1"],
    "results": ["{tmp}/out"],
    "report": ["{tmp}/out", "--out", "{tmp}/report.html"],
    "view": ["khop-ring", "--gpus", "64", "--out", "{tmp}/view.html"],
    "faults": ["khop-ring", "--gpus", "64", "--tp", "16", "--samples", "20", "--node-fault-ratio", "0.05"],
    "faults-table": ["--samples", "20"],
    "simulate": ["dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MiB", "--group-size", "16"],
    "mfu": ["dgx", "--gpus", "64", "--model", "llama3-8b", "--tp", "8", "--comm", "analytic"],
    "rl": ["--gpus", "128", "--model", "llama3-8b", "-p", "k=16", "-p", "samples=64", "-p", "output_median=128",
           "-p", "max_tokens=512", "-p", "prompt_len=128"],
    "orchestrate": ["khop-ring", "--gpus", "64", "--tp", "8", "--dp", "2", "--node-fault-ratio", "0.05",
                    "--time-limit", "10"],
    "goodput": ["khop-ring", "--gpus", "256", "--model", "llama3-8b", "--tp", "8", "--comm", "analytic"],
    "orchestrate-table": ["--gpus", "128", "--max-ratio", "0.04", "--step", "0.04", "--samples", "1",
                          "--trace", ""],
}
# `results` and `report` read what `sweep` wrote: run them in this order in one test folder
ORDER = ["sweep", "results", "report"] + sorted(set(EXAMPLES) - {"sweep", "results", "report"})


def _fabric(args: list[str], timeout: float = 600) -> subprocess.CompletedProcess:
    script = Path(sys.executable).parent / "fabric"
    cmd = [str(script)] if script.exists() else [sys.executable, "-c", "from cli.app import entry; entry()"]
    return subprocess.run(cmd + args, capture_output=True, text=True, timeout=timeout, cwd=ROOT)


def _json_commands() -> set[str]:
    import typer

    from cli.app import app

    group = typer.main.get_command(app)
    return {name for name, cmd in group.commands.items() if any("--json" in p.opts for p in cmd.params)}


def test_every_json_command_has_an_example():
    assert _json_commands() == set(EXAMPLES)


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("json")
    study = tmp / "study.yaml"
    study.write_text(yaml.safe_dump(STUDY, sort_keys=False))
    done = {}
    for name in ORDER:
        args = [a.format(tmp=tmp, study=study) for a in EXAMPLES[name]]
        done[name] = _fabric([name, *args, "--json"])
    return done


@pytest.mark.parametrize("command", ORDER)
def test_json_is_exactly_one_object(outputs, command):
    proc = outputs[command]
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert isinstance(json.loads(proc.stdout), (dict, list)) and proc.stdout.lstrip()[0] in "{["
    assert proc.stdout.lstrip().startswith("{"), f"{command} --json printed a list, not one object"
