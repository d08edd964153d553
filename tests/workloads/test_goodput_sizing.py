"""Sizing a job for goodput (``--sizing goodput``) against brute force and closed forms.

Independent references:
* every size replayed: the pruned search (sizes in decreasing order of an upper bound, stopped when the bound
  falls to the best replayed) must find the effective throughput of replaying every size and taking the best,
  since the bound (healthy rate x share of the span the size fits) is never below what the replay gives;
* one node down for the whole span: the full-size fixed job never fits (goodput 0) and one replica fewer never
  stops, so with perfect scaling the best size is that one, at C / (C + w) of its healthy rate (exact);
* no fault: nothing for spares to absorb, the healthy job is kept (goodput = the MFU model's throughput).
"""

import json
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fabric.errors import FabricError
from fabric.trace import trace_from_events
from topologies import build
from workloads.goodput import JobShape, Recovery, fault_timeline, no_fault_timeline, simulate
from workloads.goodput.events import SECONDS_PER_DAY
from workloads.goodput.sizing import batch_for, fit_share, size_for_goodput
from workloads.goodput.summary import goodput_summary
from workloads.parallelism import Parallelism

CAUSE = {"Level": "Hardware Failure", "Class": "GPU", "Desc": "xid"}
FAB = build("nvl-72", 144, {})  # TP 8: 9 groups per 72-GPU domain, 18 in all
PAR = Parallelism(tp=8, pp=1, dp=18, micro_batch=1, global_batch=72)
REC = Recovery(checkpoint_interval_s=3600.0, checkpoint_stall_s=10.0, restart_s=600.0, replace_s=120.0)


def _rate(scale=1.0, bump=0.0):
    """Healthy tokens/s of a configuration: perfect scaling in DP, ``bump`` more per GPU when dp is even."""
    return lambda p: scale * p.dp * (1.0 + (bump if p.dp % 2 == 0 else 0.0))


def _trace(episodes, horizon):
    ev = []
    for s, (a, d) in enumerate(episodes):
        ev += [{"node_id": f"s{s}", "event_time": a, "event_type": "fault_start", "fault_type": CAUSE},
               {"node_id": f"s{s}", "event_time": a + d, "event_type": "fault_end", "fault_type": CAUSE}]
    ev.sort(key=lambda e: (e["event_time"], e["event_type"] == "fault_start"))
    return trace_from_events(ev, "t", n_servers=36, horizon=horizon)


def _every_size(tl, par, rate_of, policy):
    """Brute force: every size replayed with the batch the search would give it; the best effective tokens/s."""
    best = 0.0
    span = tl.times_s[-1] - tl.times_s[0]
    for dp in range(par.dp, 0, -1):
        b = par.global_batch if dp == par.dp else batch_for(par, dp, False)
        rate = lambda d, gpus=None, b=b: rate_of(replace(par, dp=d, global_batch=b))  # noqa: E731
        led = simulate(tl, JobShape(par.tp, par.pp * par.cp, dp), rate, REC, policy)
        best = max(best, led.gpu_s["useful"] / (dp * par.tp * par.pp * par.cp * span) * rate(dp))
    return best


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(episodes=st.lists(st.tuples(st.floats(0, 20).map(lambda x: round(x, 2)),
                                   st.floats(0.05, 15).map(lambda x: round(x, 2))), min_size=0, max_size=12),
       policy=st.sampled_from(("fixed", "elastic")), bump=st.sampled_from((0.0, 0.05)), seed=st.integers(0, 3))
def test_the_pruned_search_finds_the_best_of_every_size_replayed(episodes, policy, bump, seed):
    tl = fault_timeline(FAB, 8, _trace(episodes, 40.0), seed=seed)
    rate_of = _rate(bump=bump)
    sz = size_for_goodput(tl, PAR, rate_of, REC, policy, batch_pinned=False)
    chosen = next(c for c in sz.candidates if c.dp == sz.parallelism.dp)
    assert chosen.effective_tokens_per_s == pytest.approx(_every_size(tl, PAR, rate_of, policy), rel=1e-12)
    assert sz.parallelism.dp <= PAR.dp and sz.replayed <= len(sz.candidates)
    for c in sz.candidates:  # the bound really bounds
        if c.effective_tokens_per_s is not None:
            assert c.effective_tokens_per_s <= c.bound_tokens_per_s * (1 + 1e-12)


def test_a_node_down_all_year_leaves_the_largest_size_that_always_fits():
    tl = fault_timeline(FAB, 8, _trace([(0.0, 365.0)], 365.0), seed=0)
    assert fit_share(tl, 144) == 0.0 and fit_share(tl, 136) == 1.0  # 8 of one domain's groups are left
    sz = size_for_goodput(tl, PAR, _rate(2.0), REC, "fixed", batch_pinned=False)
    assert sz.parallelism.dp == 17 and sz.parallelism.global_batch == 68  # 17 x 1 x 4 nearest 72
    chosen = next(c for c in sz.candidates if c.dp == 17)
    assert chosen.effective_tokens_per_s == pytest.approx(2.0 * 17 * 3600 / 3610, rel=1e-12)
    healthy = next(c for c in sz.candidates if c.dp == 18)
    assert healthy.effective_tokens_per_s == 0.0  # it never fits
    # a pinned batch of 72 allows only the sizes that divide it: 18, 12, 9, 8, 6, ...
    sz = size_for_goodput(tl, PAR, _rate(2.0), REC, "fixed", batch_pinned=True)
    assert sz.parallelism.dp == 12 and sz.parallelism.global_batch == 72


def test_no_fault_keeps_the_healthy_job():
    tl = no_fault_timeline(FAB, 8, 365 * SECONDS_PER_DAY)
    for policy in ("fixed", "elastic"):
        sz = size_for_goodput(tl, PAR, _rate(bump=0.05), REC, policy, batch_pinned=False)
        assert sz.parallelism == PAR and sz.replayed == 1


def test_the_global_batch_of_a_size():
    par = Parallelism(tp=4, pp=4, dp=128, micro_batch=1, global_batch=512, interleave=8)
    # interleaved: micro-batches a multiple of PP, so the batch is a multiple of dp x mb x pp
    assert batch_for(par, 116, False) == 464 and batch_for(par, 70, False) == 560
    assert batch_for(par, 116, True) is None and batch_for(par, 64, True) == 512
    plain = replace(par, interleave=1, pp=2)
    assert batch_for(plain, 100, False) == 500 and batch_for(plain, 300, False) == 600
    assert batch_for(plain, 700, False) == 700  # at least one micro-batch per replica


def test_goodput_summary_sizes_and_says_so(nvl144):
    tr = _trace([(1.0, 200.0)], 365.0)  # one tray down for most of the year
    kw = dict(trace=tr, search=False, comm="analytic", tp=8, pp=1, global_batch=72, series=False)
    plain = goodput_summary(nvl144, "llama3-8b", **kw)
    sized = goodput_summary(nvl144, "llama3-8b", sizing="goodput", **kw)
    assert plain["sizing"] == {"rule": "throughput"} and plain["config"] == plain["fastest_config"]
    s = sized["sizing"]
    assert s["rule"] == "goodput" and s["healthy_dp"] == plain["dp"] == 18 and s["dp"] == sized["dp"] < 18
    assert s["global_batch"] == 72 and s["spare_gpus"] == 144 - sized["job_gpus"]  # the batch was given: kept
    assert sized["effective_tokens_per_s"] > plain["effective_tokens_per_s"]
    assert any(n.startswith("sized for goodput") for n in sized["notes"])
    with pytest.raises(FabricError, match="^sizing: goodput chooses the DP size"):
        goodput_summary(nvl144, "llama3-8b", sizing="goodput", dp=16, **kw)
    with pytest.raises(FabricError, match="^sizing: 'best' not allowed"):
        goodput_summary(nvl144, "llama3-8b", sizing="best", **kw)


GOODPUT = ("goodput", "dgx", "--gpus", 64, "--model", "llama3-8b", "--comm", "analytic", "--tp", 8, "--pp", 1,
           "--cp", 1, "--no-series", "--json")


def test_cli_sizing_leaves_spares_where_the_fastest_job_had_none(run_cli):
    rc, out, err = run_cli(*GOODPUT)
    assert rc == 0, err
    full = json.loads(out)
    rc, out, err = run_cli(*GOODPUT, "--sizing", "goodput")
    assert rc == 0, err
    sized = json.loads(out)
    assert full["job_gpus"] == 64 and sized["job_gpus"] < 64
    assert sized["effective_tokens_per_s"] > full["effective_tokens_per_s"]
    assert sized["sizing"]["healthy_dp"] == full["dp"] and sized["fastest_config"] == full["config"]


@pytest.mark.parametrize("extra,flag", [
    (("--sizing", "best"), "--sizing"),
    (("--sizing", "goodput", "--dp", 4), "--sizing"),
])
def test_cli_bad_sizing_one_line_exit_2(run_cli, extra, flag):
    rc, out, err = run_cli(*GOODPUT, *extra)
    assert rc == 2 and out == ""
    assert err.startswith("error: ") and flag in err and len(err.strip().splitlines()) == 1


def test_study_refuses_sizing_goodput_with_a_pinned_dp(tmp_path, run_cli):
    import yaml

    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({
        "gpus": 64, "architectures": [{"name": "dgx"}], "faults": {"traces": ["stepfun"]},
        "metrics": [{"goodput": {"model": "llama3-8b", "dp": 4, "sizing": "goodput"}}]}, sort_keys=False))
    rc, out, err = run_cli("sweep", spec, "--out", tmp_path / "out", "--json")
    assert rc == 2 and out == "" and "metrics[0].goodput.sizing" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
