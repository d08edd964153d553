"""Regression tests from the large-shape probe: a fault trace's replay memory is checked before allocating.

A trace's down state is dense (intervals between event times x servers, then x nodes): 300,000
events over 75,000 servers asked numpy for 84 GiB at once (``faults``, ``orchestrate``) or, in
``goodput``, after a minute of configuration search, and every command ended in a MemoryError.  The
limit is lowered here so that the traces stay small.
"""

from __future__ import annotations

import json

import pytest

from fabric import limits
from fabric.errors import FabricError
from fabric.trace import STATE_BYTES_PER_NODE, STATE_BYTES_PER_SERVER, trace_from_events

N_SERVERS, N_NODES = 400, 16


def _events(n_servers: int = N_SERVERS) -> list[dict]:
    """Server s down on [s, s + 0.5) days: 2 events each, 2 n_servers + 2 interval edges."""
    cause = {"Level": "Hardware Failure", "Class": "GPU", "Desc": "x"}
    out = []
    for s in range(n_servers):
        out.append({"node_id": f"n{s}", "event_time": float(s), "event_type": "fault_start", "fault_type": cause})
        out.append({"node_id": f"n{s}", "event_time": s + 0.5, "event_type": "fault_end", "fault_type": cause})
    return out


def _needed(n_nodes: int) -> float:
    """The dense matrices' bytes, counted from the event list itself (distinct times + 0 and the horizon)."""
    intervals = 2 * N_SERVERS + 2
    return intervals * (N_SERVERS * STATE_BYTES_PER_SERVER + n_nodes * STATE_BYTES_PER_NODE)


@pytest.mark.parametrize("factor, refused", [(0.9, True), (1.1, False)])
def test_replay_checks_its_dense_state_against_the_memory_limit(factor, refused):
    tr = trace_from_events(_events(), "t.json")
    token = limits.set_limits(limits.Limits(memory=int(_needed(N_NODES) * factor)))
    try:
        if refused:
            with pytest.raises(FabricError) as exc:
                tr.replay(N_NODES)
            assert exc.value.field == "trace" and "event times" in exc.value.message
        else:
            rp = tr.replay(N_NODES)
            # the replay is right too: tile mapping puts each of the 16 nodes on a distinct server, each
            # down for half a day once, so 16 x 0.5 node-days are down
            down_node_days = sum(len(rp.down.row(i)) * d for i, d in enumerate(rp.durations))
            assert down_node_days == pytest.approx(N_NODES * 0.5)
    finally:
        limits.reset(token)


def test_statistics_check_the_server_state_too():
    tr = trace_from_events(_events(), "t.json")
    token = limits.set_limits(limits.Limits(memory=int(_needed(0) * 0.9)))
    try:
        with pytest.raises(FabricError) as exc:
            tr.statistics()
    finally:
        limits.reset(token)
    assert exc.value.field == "trace"


@pytest.mark.parametrize("command", [["faults", "dgx", "--gpus", "128", "--tp", "8"],
                                     ["orchestrate", "dgx", "--gpus", "128", "--tp", "8", "--dp", "2"],
                                     ["goodput", "dgx", "--gpus", "128", "--model", "llama3-8b", "--tp", "8"]])
def test_cli_names_the_trace_flag(run_cli, tmp_path, command):
    """One line naming --trace, exit 2, nothing on stdout; goodput refuses before its MFU search."""
    path = tmp_path / "big_trace.json"
    path.write_text(json.dumps(_events()))
    # 128 DGX GPUs are 16 nodes; above the fabric's own estimate, below the trace's
    limit = int(_needed(N_NODES) * 0.9)
    rc, out, err = run_cli("--limit", f"memory={limit}B", *command, "--trace", path, "--json")
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and out == "" and len(lines) == 1, err
    assert lines[0].startswith("error: --trace:") and "event times" in lines[0]
