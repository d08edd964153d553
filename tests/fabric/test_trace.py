"""Trace replay: the shipped StepFun trace reproduces FIGURES.md, replay semantics, mapping, validation."""

import json

import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.trace import SHIPPED, load_trace, shipped_path, trace_from_events


@pytest.fixture(scope="module")
def stepfun():
    return load_trace("stepfun")


def test_shipped_with_license_and_credit():
    folder = shipped_path("stepfun")
    for name in ("fault_trace.json", "fault_statistics.json", "README.md", "LICENSE", "NOTICE"):
        assert (folder / name).is_file(), name
    assert "Apache License" in (folder / "LICENSE").read_text()
    assert "github.com/stepfun-ai/InfiniteHBD-Trace" in (folder / "NOTICE").read_text()
    assert SHIPPED["stepfun"].n_servers == 400


def test_reproduces_figures(stepfun):
    """FIGURES.md "derived from it", to the precision given there, and the "replay caveats"."""
    s = stepfun.statistics()
    assert s.n_servers == 400 and s.faults == 584
    assert f"{s.faults_per_node_day:.1e}" == "4.2e-03"
    assert round(100 * s.down_fraction_time_mean, 1) == 2.3
    assert s.down_fraction_max == 0.0875
    assert round(100 * s.time_at_or_above_7pct, 1) == 3.4
    assert s.never_failed == 169
    assert round(s.episode_median_days, 2) == 0.85
    assert round(s.episode_mean_days, 1) == 5.5
    assert round(s.episode_p99_days) == 81
    assert s.zero_length_episodes == 14 and s.overlapping_starts == 2


def test_tiled_replay_keeps_the_trace_down_fraction(stepfun):
    """tile: every full block of 400 nodes replays all 400 servers, so 1,200 nodes see the trace's fraction."""
    r = stepfun.replay(1200, "tile", seed=5)
    frac = r.down_fraction()
    s = stepfun.statistics()
    assert r.time_mean(frac) == pytest.approx(s.down_fraction_time_mean, rel=1e-12)
    assert frac.max() == pytest.approx(0.0875)
    assert np.array_equal(np.sort(r.server_of_node[:400]), np.arange(400))
    assert not np.array_equal(r.server_of_node[:400], r.server_of_node[400:800])  # blocks shuffle independently
    again = stepfun.replay(1200, "tile", seed=5)
    assert np.array_equal(again.down.indices, r.down.indices)
    sampled = stepfun.replay(1200, "sample", seed=5)
    assert sampled.time_mean(sampled.down_fraction()) == pytest.approx(0.023, abs=0.006)


def test_down_at_and_quantiles(stepfun):
    r = stepfun.replay(400, "tile", seed=0)
    assert r.down_at(0.0).size == 0  # before the first event
    assert r.down_at(3.9).size == 2  # two servers fail at t = 3.8955
    with pytest.raises(FabricError, match="time"):
        r.down_at(1e6)
    assert r.time_quantile(r.down_fraction(), 0.5) <= r.time_quantile(r.down_fraction(), 0.99)


def _ev(node, t, kind, cls="GPU"):
    return {"node_id": node, "event_time": t, "event_type": kind,
            "fault_type": {"Level": "Hardware Failure", "Class": cls, "Desc": "x"}}


def test_zero_length_and_overlapping_episodes():
    """Down while the count of open faults is > 0; a zero-length episode counts as a fault but is never down."""
    events = [_ev("a", 1.0, "fault_start"), _ev("b", 2.0, "fault_start"), _ev("b", 2.0, "fault_end"),
              _ev("a", 3.0, "fault_start"), _ev("a", 4.0, "fault_end"), _ev("a", 6.0, "fault_end"),
              _ev("c", 8.0, "fault_start")]
    tr = trace_from_events(events, "t.json", n_servers=4, horizon=10.0)
    s = tr.statistics()
    assert s.faults == 4 and s.zero_length_episodes == 1 and s.overlapping_starts == 1 and s.never_failed == 1
    r = tr.replay(4, "tile", seed=0)
    node_a = int(np.flatnonzero(r.server_of_node == 0)[0])
    node_b = int(np.flatnonzero(r.server_of_node == 1)[0])
    node_c = int(np.flatnonzero(r.server_of_node == 2)[0])
    assert node_a in r.down_at(4.5)  # a's first fault is still open after the end at t = 4
    assert node_a not in r.down_at(6.0)  # half-open: up again at its last fault_end
    assert node_b not in r.down_at(2.0)
    assert node_c in r.down_at(9.99)  # an open fault stays down to the horizon
    # time-average down: a 5 days, c 2 days, over 4 servers and 10 days
    assert s.down_fraction_time_mean == pytest.approx((5 + 2) / 40)
    srv, start, end = tr.episodes()
    assert sorted((end - start).tolist()) == [0.0, 2.0, 3.0, 3.0]  # a: 1->4 and 3->6 (first in, first out)


@pytest.mark.parametrize("mutate, field", [
    (lambda e: e[1].update(event_type="fault_begin"), "t.json:events[1].event_type"),
    (lambda e: e[2].update(event_time=-1), "t.json:events[2].event_time"),
    (lambda e: e[2].update(event_time=0.5), "t.json:events[2].event_time"),
    (lambda e: e[0].pop("node_id"), "t.json:events[0].node_id"),
    (lambda e: e[1].update(fault_type="GPU"), "t.json:events[1].fault_type"),
    (lambda e: e[1]["fault_type"].pop("Class"), "t.json:events[1].fault_type.Class"),
    (lambda e: e.insert(0, _ev("z", 0.0, "fault_end")), "t.json:events[0].event_type"),
    (lambda e: e.__setitem__(1, 7), "t.json:events[1]"),
])
def test_malformed_event_names_its_index(tmp_path, mutate, field):
    events = [_ev("a", 1.0, "fault_start"), _ev("b", 1.5, "fault_start"), _ev("a", 2.0, "fault_end")]
    mutate(events)
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    with pytest.raises(FabricError) as exc:
        load_trace(path)
    assert exc.value.field == field


@pytest.mark.parametrize("times", [[0.0], [0.0, 0.0], [5e-324], [1e-300, 2e-300]])
def test_a_trace_spanning_under_a_second_is_refused_naming_the_file(times):
    """Rates divide by the span: one event at 5e-324 days gave faults per node-day = inf (printed as null)."""
    kinds = ["fault_start", "fault_end"]
    events = [_ev("a", t, kinds[i % 2]) for i, t in enumerate(times)]
    with pytest.raises(FabricError) as exc:
        trace_from_events(events, "t.json")
    assert exc.value.field == "t.json" and "at least one second" in exc.value.message
    with pytest.raises(FabricError, match="horizon"):
        trace_from_events(events, "t.json", horizon=1e-9)
    s = trace_from_events(events, "t.json", horizon=1.0).statistics()  # a window given by the caller is fine
    assert np.isfinite(s.faults_per_node_day)


def test_bad_files(tmp_path):
    with pytest.raises(FabricError, match="neither a shipped trace"):
        load_trace(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(FabricError, match="not valid JSON"):
        load_trace(bad)
    bad.write_text(json.dumps({"events": []}))
    with pytest.raises(FabricError, match="JSON list"):
        load_trace(bad)
    with pytest.raises(FabricError, match="n_servers"):
        load_trace("stepfun", n_servers=100)
    with pytest.raises(FabricError, match="trace_mapping"):
        load_trace("stepfun").replay(10, "random")
