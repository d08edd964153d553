"""The goodput model against closed forms (no faults; one fault) and monotonicity in every cost.

Independent references:
* no fault: the job runs at the MFU step model's throughput for the whole span, so the effective
  throughput is that throughput (times C / (C + w) when checkpoints stall w every C: exact arithmetic);
* one fault, free recovery: the job loses exactly the GPUs the fault makes unusable (the blast radius,
  computed by solvers.allocation.blast_radius and by hand from the HBD's shape) for the repair time;
* a cost that rises (restart, re-placement, checkpoint interval with free writes) never raises goodput.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric.catalog import load_catalog
from fabric.errors import FabricError
from fabric.trace import trace_from_events
from solvers.allocation import blast_radius, policy_for
from topologies import build
from workloads.goodput import (CAUSES, JobShape, Recovery, default_recovery, fault_timeline, no_fault_timeline,
                               simulate, summarise, with_overrides)
from workloads.goodput.events import SECONDS_PER_DAY
from workloads.goodput.model import ShapeRates, constant_rate
from workloads.models import load_model
from workloads.parallelism import Parallelism
from workloads.step import StepModel
from workloads.comm import analytic_comm_time

CAUSE = {"Level": "Hardware Failure", "Class": "GPU", "Desc": "xid"}
# Free recovery: no stall, restart or re-placement, and a checkpoint every nanosecond (an interval must be > 0),
# so an interruption loses at most 0.5 ns of training: below every tolerance here by orders of magnitude.
FREE = Recovery(checkpoint_interval_s=1e-9, checkpoint_stall_s=0.0, restart_s=0.0, replace_s=0.0)


def one_fault_trace(n_servers, start_day=1.0, end_day=3.0, horizon=10.0):
    ev = [{"node_id": "a", "event_time": start_day, "event_type": "fault_start",
           "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "xid"}},
          {"node_id": "a", "event_time": end_day, "event_type": "fault_end",
           "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "xid"}}]
    return trace_from_events(ev, "one", n_servers=n_servers, horizon=horizon)


def report(tl, shape, led, rate, rec=FREE, policy="fixed"):
    return summarise(tl, shape, led, healthy_tokens_per_s=rate(shape.dp), flops_per_token=1.0, capex_usd=1e6,
                     power_w=1e6, recovery=rec, policy=policy, series=True)


# ------------------------------------------------------------------ no faults: the MFU model's throughput
def test_no_fault_goodput_is_the_healthy_step_model_throughput(nvl144):
    spec = load_model("llama3-8b")
    sm = StepModel(nvl144, spec, backend=analytic_comm_time)
    par = Parallelism(tp=8, pp=1, dp=16, micro_batch=1, global_batch=64, sequence_parallel=True)
    healthy = sm.evaluate(par)
    rates = ShapeRates(sm, healthy)
    tl = no_fault_timeline(nvl144, 8, 365 * SECONDS_PER_DAY)
    shape = JobShape(8, 1, 16)
    rec = Recovery(checkpoint_interval_s=1800.0, checkpoint_stall_s=0.0)
    out = report(tl, shape, simulate(tl, shape, rates, rec), rates, rec)
    assert out["effective_tokens_per_s"] == pytest.approx(healthy.tokens_per_s, rel=1e-14)
    assert out["goodput_ratio"] == pytest.approx(1.0, rel=1e-14)
    assert all(abs(out["gpu_hours_lost"][c]) < 1e-6 for c in CAUSES)
    # checkpoints that stall w every C of training: a fraction C / (C + w) trains
    rec = Recovery(checkpoint_interval_s=1800.0, checkpoint_stall_s=10.0)
    out = report(tl, shape, simulate(tl, shape, rates, rec), rates, rec)
    assert out["goodput_ratio"] == pytest.approx(1800 / 1810, rel=1e-13)
    assert out["gpu_hours_lost"]["checkpoint"] == pytest.approx(128 * 365 * 24 * 10 / 1810, rel=1e-12)


# ------------------------------------------------------------------ one fault: blast radius x repair time
@pytest.mark.parametrize("arch,gpus,params,tp,blast_by_hand", [
    ("nvl-72", 144, {}, 8, 8),        # a 4-GPU tray down: 68 GPUs of its domain hold 8 groups of 8 (was 9)
    ("nvl-72", 144, {}, 4, 4),        # TP 4: only the tray's own group
    ("dgx", 64, {}, 8, 8),            # the node is the group
    ("tpuv4", 128, {}, 8, 64),        # the whole 64-chip cube leaves the pool
])
def test_one_fault_loses_blast_radius_times_repair(arch, gpus, params, tp, blast_by_hand):
    fab = build(arch, gpus, params)
    pol = policy_for(fab)
    br = blast_radius(pol, tp, components=("node",))["node"]
    assert br["min"] == br["max"] == blast_by_hand  # position-independent here, so one fault has one answer
    tl = fault_timeline(fab, tp, one_fault_trace(pol.nodes.n_nodes), seed=3)
    shape = JobShape(tp, 1, fab.n_gpus // tp)  # the job fills the cluster: every fault touches it
    rate = constant_rate(100.0, tp)
    out = report(tl, shape, simulate(tl, shape, rate, FREE, "elastic"), rate, policy="elastic")
    repair_h = 2 * 24.0
    lost = out["gpu_hours_ideal"] - out["gpu_hours_useful"]
    assert lost == pytest.approx(blast_by_hand * repair_h, rel=1e-12)
    own = fab.hbd.gpus_per_node
    assert out["gpu_hours_lost"]["faults"] == pytest.approx(own * repair_h, rel=1e-12)
    assert out["gpu_hours_lost"]["waste"] == pytest.approx((blast_by_hand - own) * repair_h, rel=1e-12, abs=1e-9)
    assert out["interruptions"] == 1 and out["regrows"] == 1


def test_fixed_job_with_a_spare_loses_nothing_when_recovery_is_free(nvl144):
    """A fixed-size job with one spare TP group: the fault moves it to the spare (free), no work lost."""
    tl = fault_timeline(nvl144, 8, one_fault_trace(36), seed=1)
    shape = JobShape(8, 1, 17)
    rate = constant_rate(100.0, 8)
    out = report(tl, shape, simulate(tl, shape, rate, FREE, "fixed"), rate)
    assert out["goodput_ratio"] == pytest.approx(1.0, rel=1e-14)
    # without a spare it waits for the repair: all its GPUs for the repair time
    shape = JobShape(8, 1, 18)
    out = report(tl, shape, simulate(tl, shape, rate, FREE, "fixed"), rate)
    lost = out["gpu_hours_ideal"] - out["gpu_hours_useful"]
    assert lost == pytest.approx(144 * 48.0, rel=1e-12)


def test_restart_and_recomputation_closed_form(nvl144):
    """One interruption: restart + re-placement on all job GPUs; lost work = training since the start (< C)."""
    tl = fault_timeline(nvl144, 8, one_fault_trace(36), seed=1)
    shape = JobShape(8, 1, 17)  # a spare absorbs the fault, so the job restarts at once
    rate = constant_rate(100.0, 8)
    rec = Recovery(checkpoint_interval_s=2 * SECONDS_PER_DAY, checkpoint_stall_s=0.0, restart_s=600.0,
                   replace_s=120.0)
    out = report(tl, shape, simulate(tl, shape, rate, rec, "fixed"), rate, rec)
    g = 136
    assert out["gpu_hours_lost"]["restart"] == pytest.approx(g * 600 / 3600, rel=1e-12)
    assert out["gpu_hours_lost"]["replacement"] == pytest.approx(g * 120 / 3600, rel=1e-12)
    assert out["gpu_hours_lost"]["recomputation"] == pytest.approx(g * 24.0, rel=1e-12)  # 1 day trained, C = 2 d
    # a fault after more than C of training loses C / 2 (the expectation over the checkpoint phase)
    rec = with_overrides(rec, {"checkpoint_interval": "6h"})
    out = report(tl, shape, simulate(tl, shape, rate, rec, "fixed"), rate, rec)
    assert out["gpu_hours_lost"]["recomputation"] == pytest.approx(g * 3.0, rel=1e-12)


def test_accounting_adds_up_and_is_deterministic(khop64):
    ev = []
    rng = np.random.default_rng(0)
    for s in range(6):
        a = float(rng.uniform(0, 20))
        ev += [{"node_id": f"s{s}", "event_time": a, "event_type": "fault_start", "fault_type": CAUSE},
               {"node_id": f"s{s}", "event_time": a + float(rng.uniform(0.1, 3)), "event_type": "fault_end",
                "fault_type": CAUSE}]
    ev.sort(key=lambda e: e["event_time"])
    tr = trace_from_events(ev, "t", n_servers=16, horizon=30.0)
    for policy in ("fixed", "elastic"):
        outs = []
        for _ in range(2):
            tl = fault_timeline(khop64, 8, tr, seed=5)
            shape = JobShape(8, 2, 3)
            rate = constant_rate(10.0, 16)
            rec = default_recovery("khop_line", load_catalog())
            outs.append(report(tl, shape, simulate(tl, shape, rate, rec, policy), rate, rec, policy))
        assert outs[0] == outs[1]
        o = outs[0]
        total = o["gpu_hours_useful"] + sum(o["gpu_hours_lost"].values())
        assert total == pytest.approx(o["gpu_hours_ideal"], rel=1e-12)
        assert 0 < o["goodput_ratio"] < 1
        assert len(o["series"]["day"]) == 30


def test_bad_inputs():
    with pytest.raises(FabricError, match="restart=-"):
        Recovery(restart_s=-1.0)
    # an interval of 0 made checkpoints free (no stall charged): goodput 28 % at 0 s against less at 1 s or 5 s
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(FabricError, match=r"^recovery\[checkpoint_interval\]: .* must be a finite time > 0"):
            Recovery(checkpoint_interval_s=bad)
    for name in ("checkpoint_stall_s", "restart_s", "replace_s"):  # 0 is an ideal, allowed; below 0 is not
        assert getattr(Recovery(**{name: 0.0}), name) == 0.0
        with pytest.raises(FabricError, match=rf"^recovery\[{name.removesuffix('_s')}\]: .* >= 0"):
            Recovery(**{name: -1e-9})
    with pytest.raises(FabricError, match="recovery: .warmup. unknown"):
        with_overrides(FREE, {"warmup": 3})
    with pytest.raises(FabricError, match="^dp: "):
        JobShape(8, 1, 0)


# ------------------------------------------------------------------ monotonicity in every cost
def _events(draw_pairs):
    ev = []
    for s, (a, d) in enumerate(draw_pairs):
        ev += [{"node_id": f"s{s % 9}", "event_time": a, "event_type": "fault_start", "fault_type": CAUSE},
               {"node_id": f"s{s % 9}", "event_time": a + d, "event_type": "fault_end", "fault_type": CAUSE}]
    ev.sort(key=lambda e: (e["event_time"], e["event_type"] == "fault_start"))
    return ev


FAB = build("nvl-72", 144, {})
TIMES = st.floats(0.0, 5.0, allow_nan=False).map(lambda x: round(x, 3))
COSTS = ("restart_s", "replace_s", "checkpoint_interval_s")


def _one_episode_per_server_timeline(pairs, seed):
    """The TP-8 timeline on FAB of the drawn (start, length) episodes, one per server (of 9 drawn servers):
    a server with overlapping episodes would make fault_end unmatched."""
    seen, kept = set(), []
    for i, p in enumerate(pairs):
        if i % 9 not in seen:
            seen.add(i % 9)
            kept.append(p)
    return fault_timeline(FAB, 8, trace_from_events(_events(kept), "h", n_servers=36, horizon=8.0), seed=seed)


# a timeline of one episode per server, one recovery cost raised from lo to lo + extra (the monotonicity tests)
COST_CASES = given(
    pairs=st.lists(st.tuples(TIMES, st.floats(0.01, 2.0).map(lambda x: round(x, 3))), min_size=1, max_size=8),
    cost=st.sampled_from(COSTS), lo=st.floats(0, 86400.0), extra=st.floats(0, 86400.0),
    dp=st.integers(14, 18), policy=st.sampled_from(("fixed", "elastic")), seed=st.integers(0, 3))


def _recoveries(cost, lo, hi):
    """Two recoveries alike but for ``cost`` (a Recovery field), set to ``lo`` and ``hi``."""
    from dataclasses import replace

    base = Recovery(checkpoint_interval_s=3600.0, checkpoint_stall_s=0.0, restart_s=600.0, replace_s=120.0)
    if cost == "checkpoint_interval_s":  # an interval must be > 0 (0 is refused); 1 ns stands for "free"
        lo, hi = max(lo, 1e-9), max(hi, 1e-9)
    return replace(base, **{cost: lo}), replace(base, **{cost: hi})


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@COST_CASES
def test_goodput_never_rises_with_a_cost(pairs, cost, lo, extra, dp, policy, seed):
    tl = _one_episode_per_server_timeline(pairs, seed)
    shape = JobShape(8, 1, dp)
    rate = constant_rate(1.0, 8)
    a, b = _recoveries(cost, lo, lo + extra)
    ga = report(tl, shape, simulate(tl, shape, rate, a, policy), rate, a, policy)["goodput_ratio"]
    gb = report(tl, shape, simulate(tl, shape, rate, b, policy), rate, b, policy)["goodput_ratio"]
    assert gb <= ga + 1e-12


def placement_aware_rate(tl, shape):
    """Perfect scaling on the healthy placement, 40 % slower on any other (a re-placement around faults)."""
    healthy = {}

    def rate(dp, gpus=None):
        if gpus is None:
            return float(dp)
        if dp not in healthy:
            clean = no_fault_timeline(FAB, shape.tp, 1.0)
            healthy[dp] = clean.nodes.gpu_ids[clean.job_groups(0, dp * shape.groups_per_replica).ravel()]
        return float(dp) * (1.0 if np.array_equal(gpus, healthy[dp]) else 0.6)
    return rate


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@COST_CASES
def test_goodput_never_rises_with_a_cost_when_placements_differ(pairs, cost, lo, extra, dp, policy, seed):
    """As above with a step time that depends on the placement (re-placements and rebalances happen)."""
    tl = _one_episode_per_server_timeline(pairs, seed)
    shape = JobShape(8, 1, dp)
    rate = placement_aware_rate(tl, shape)
    a, b = _recoveries(cost, lo, lo + extra)
    la, lb = simulate(tl, shape, rate, a, policy), simulate(tl, shape, rate, b, policy)
    assert (la.placements, la.rebalances) == (lb.placements, lb.rebalances)  # costs never change where the job runs
    ga = report(tl, shape, la, rate, a, policy)["goodput_ratio"]
    gb = report(tl, shape, lb, rate, b, policy)["goodput_ratio"]
    assert gb <= ga + 1e-12
