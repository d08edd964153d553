"""Regression tests for bad input files found by the input-file probe (every file kind, malformed content).

Each case is the rule of the README: exit status 2, one ``error:`` line naming the flag or the file field at
fault, no traceback, nothing half-written.
"""

from __future__ import annotations

import json

from tests.cli.test_edges import _topology, one_error


def test_a_capacity_in_other_scripts_digits_is_refused(run_cli, tmp_path):
    """Before: "\u0664\u0665\u0660GB/s" (Arabic-Indic digits) in a topology file was read as 450 GB/s and built."""
    path = _topology(tmp_path, lambda d: d["links"][0].update(capacity="\u0664\u0665\u0660GB/s"))
    rc, _, err = run_cli("build", "--topology", path, "--json")
    one_error(rc, err, "topo.json:links[0].capacity")


def test_a_flow_size_in_other_scripts_digits_is_refused(run_cli, tmp_path):
    """Before: a flows file's "bytes": "\u0661\u0660\u0660\u0660" was read as 1000 bytes and simulated."""
    path = tmp_path / "flows.json"
    path.write_text(json.dumps([{"src": 0, "dst": 1, "bytes": "\u0661\u0660\u0660\u0660"}]))
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", "--flows", path, "--json")
    one_error(rc, err, "flows.json:[0].bytes")
