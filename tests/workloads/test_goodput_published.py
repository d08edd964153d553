"""Hold-out validation of the goodput model: the replay against renewal-reward closed forms and published figures.

None of these figures was used to build ``workloads/goodput/``.

The equivalent run.  A synthetic trace of Poisson faults (rate ``mu`` per second on the job), each repaired after
``REPAIR_S`` = 1 s, replayed on an 8-node DGX (TP 8 = one node per TP group) under a fixed job of 8 replicas that
fills the cluster: every fault stops the job (it holds every node), it waits the 1 s repair, then re-places
(``replace``) and restarts (``restart``); a fault during that recovery stops it again (``job.py``: a recovering
job is interrupted as a running one is).  The rate is placement-blind (``constant_rate``), so the step time never
changes and goodput is the share of the job's GPU-time that trains and is kept.

Closed form of the model's documented rules (``workloads/goodput/job.py``): training share ``a = C / (C + w)``
of running time; an interruption after ``tau`` trained seconds loses ``tau`` if ``tau < C``, else ``C / 2``.
Between two interruptions (a renewal cycle of length ``L ~ Exp(mu)``) the job recovers ``D`` (re-placement +
restart + the 1 s wait) and then runs ``X = L - D``; it keeps ``U = a X - C / 2`` when ``a X >= C`` (i.e.
``L >= K = D + C + w``) and nothing otherwise.  With ``Z = L - K ~ Exp(mu)`` (memoryless), ``U = C / 2 + a Z``,
so by the renewal-reward theorem

    goodput = mu E[U] = exp(-mu (D + C + w)) (mu C / 2 + C / (C + w)),

whose first order in ``mu`` is Young's / Daly's ``1 - w / C - mu (C / 2 + D)``.  The replay over a span ``T``
estimates it with the renewal-reward CLT variance ``mu E[(U - g L)^2] / T`` (moments of ``U`` and ``L`` in closed
form below); the tests allow 4 standard deviations.

The physically exact loss of periodic checkpoints is ``tau mod C`` (checkpoints at ``C, 2C, ...`` of training
after each restart); its renewal-reward goodput is ``exp(-mu D) mu C e^{-nu C} / (1 - e^{-nu C})`` with
``nu = mu / a``.  The model's ``C / 2`` (uniform checkpoint phase) overstates the loss by about ``nu C^2 / 12``
per interruption; it is kept because it makes goodput monotone in ``C`` for every trace (``test_goodput.py``
checks it), which ``tau mod C`` is not.  The gap is a modelling approximation, quantified here:

* at the Llama 3 rate with the defaults, 0.21 goodput points (model 84.22 %, exact 84.43 %);
* on Daly's published optima (below) the model's optimum interval is 1.5 %, 2.9 % and 6.7 % short of Daly's for
  MTBIs of 24 h, 6 h and 15 min, where the exact loss reproduces all three within 0.8 %.
"""

import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from fabric.trace import trace_from_events
from topologies import build
from workloads.goodput import JobShape, Recovery, fault_timeline, simulate, summarise
from workloads.goodput.events import SECONDS_PER_DAY
from workloads.goodput.model import constant_rate

CAUSE = {"Level": "Hardware Failure", "Class": "GPU", "Desc": "xid"}
FAB = build("dgx", 64, {})  # 8 nodes of 8 GPUs, TP 8: one TP group per node
SHAPE = JobShape(8, 1, 8)  # fills the cluster: every fault stops it
REPAIR_S = 1.0  # each fault is repaired after 1 s: the job waits that long, then re-places and restarts
SIGMAS = 4.0

# Published figures (held out: not used to build the model)
LLAMA3 = ("P: Llama 3 (arXiv 2407.21783) Sec. 3.3.4 / Table 5: 466 job interruptions in 54 days on 16,384 H100; "
          "> 90 % effective training time")
LLAMA3_INTERRUPTIONS, LLAMA3_DAYS, LLAMA3_ETTR = 466, 54.0, 0.90
DALY = ("P: Daly, 'A higher order estimate of the optimum checkpoint interval for restart dumps', FGCS 22 (2006), "
        "doi:10.1016/j.future.2004.11.016, Figs. 3-5: R = 10 min, delta = 5 min; optimum 117 min at M = 24 h, "
        "57 min at M = 6 h, 9.1 min at M = 15 min (his model agrees with his simulation)")
DALY_CASES = ((24 * 3600.0, 117.0), (6 * 3600.0, 57.0), (15 * 60.0, 9.1))  # (MTBI s, optimum interval min)
FLASHRECOVERY_RESTART_S = 150.0  # P: FlashRecovery (arXiv 2509.03047): training restored on 4,800 devices in 150 s


# ------------------------------------------------------------------ closed forms
def goodput_rule(mu, C, w, D):
    """Renewal-reward goodput of the model's rules (module docstring)."""
    return math.exp(-mu * (D + C + w)) * (mu * C / 2 + C / (C + w))


def goodput_exact_periodic(mu, C, w, D):
    """Renewal-reward goodput when an interruption loses ``tau mod C`` (the physically exact periodic checkpoint)."""
    nu = mu * (C + w) / C
    return math.exp(-mu * D) * mu * C * math.exp(-nu * C) / -math.expm1(-nu * C)


def goodput_sd(mu, C, w, D, T):
    """Standard deviation of the goodput one replay of span ``T`` gives (renewal-reward CLT).

    ``L = K + Z`` with probability ``p = exp(-mu K)`` (then ``U = C / 2 + a Z``), else ``L < K`` and ``U = 0``;
    ``Z ~ Exp(mu)``.  Var = mu (E[U^2] - 2 g E[U L] + g^2 E[L^2]) / T.
    """
    a, K = C / (C + w), D + C + w
    p = math.exp(-mu * K)
    g = p * (mu * C / 2 + a)
    eu2 = p * (C * C / 4 + a * C / mu + 2 * a * a / mu ** 2)
    eul = p * (C * K / 2 + C / (2 * mu) + a * K / mu + 2 * a / mu ** 2)
    el2 = 2 / mu ** 2
    return math.sqrt(mu * (eu2 - 2 * g * eul + g * g * el2) / T)


# ------------------------------------------------------------------ the equivalent run
def fault_trace(fault_days):
    """One fault per time (days), on a server drawn in turn (8 servers), each repaired after REPAIR_S."""
    ev = []
    for k, t in enumerate(np.sort(fault_days)):
        ev.append((float(t), 1, f"s{k % 8}", "fault_start"))
        ev.append((float(t) + REPAIR_S / SECONDS_PER_DAY, 0, f"s{k % 8}", "fault_end"))
    ev.sort()
    return [{"node_id": n, "event_time": t, "event_type": kind, "fault_type": CAUSE} for t, _, n, kind in ev]


def replay(fault_days, span_days, rec):
    tr = trace_from_events(fault_trace(fault_days), "poisson", n_servers=8, horizon=span_days)
    tl = fault_timeline(FAB, 8, tr, seed=0)
    rate = constant_rate(1.0, 8)
    led = simulate(tl, SHAPE, rate, rec, "fixed")
    return summarise(tl, SHAPE, led, healthy_tokens_per_s=rate(SHAPE.dp), flops_per_token=1.0, capex_usd=1e6,
                     power_w=1e6, recovery=rec, policy="fixed", series=False)


def poisson_days(mu, span_days, seed):
    """Fault times (days) of a Poisson process of ``mu`` per second over the span."""
    rng = np.random.default_rng(seed)
    n = rng.poisson(mu * span_days * SECONDS_PER_DAY)
    return rng.uniform(0.0, span_days, n)


def stopping_faults(fault_days):
    """Faults that stop the job: all but those arriving while it waits the REPAIR_S of the previous one."""
    gaps = np.diff(np.sort(fault_days)) * SECONDS_PER_DAY
    return int(fault_days.size - np.count_nonzero(gaps < REPAIR_S))


def young_interval(w, mtbi):
    """Young (1974): the optimum interval sqrt(2 w M) (re-derived in Saxena et al., NVIDIA, arXiv 2410.18124)."""
    return math.sqrt(2 * w * mtbi)


# ------------------------------------------------------------------ the replay = the closed form of its rules
LLAMA3_MU = LLAMA3_INTERRUPTIONS / (LLAMA3_DAYS * SECONDS_PER_DAY)  # 1.0e-4 /s: one every 2.78 h


@pytest.mark.parametrize("mu,C,w,restart,replace_s,span_days,seed", [
    # the Llama 3 interruption rate with the tool's defaults (C 30 min, stall 10 s, restart 10 min, drain 2 min)
    (LLAMA3_MU, 1800.0, 10.0, 600.0, 120.0, 1460.0, 0),
    # the same rate at Young's interval for a 10 s stall (7.5 min)
    (LLAMA3_MU, young_interval(10.0, 1 / LLAMA3_MU), 10.0, 600.0, 120.0, 1460.0, 1),
    # Daly's M = 6 h case at his published optimum (57 min, 5 min dumps, 10 min restart)
    (1 / (6 * 3600.0), 57 * 60.0, 300.0, 600.0, 0.0, 3650.0, 2),
])
def test_poisson_replay_matches_the_renewal_reward_closed_form(mu, C, w, restart, replace_s, span_days, seed):
    """Law of large numbers: one long replay within 4 sd (renewal-reward CLT) of the closed form of its rules."""
    rec = Recovery(checkpoint_interval_s=C, checkpoint_stall_s=w, restart_s=restart, replace_s=replace_s)
    days = poisson_days(mu, span_days, seed)
    out = replay(days, span_days, rec)
    T = span_days * SECONDS_PER_DAY
    D = restart + replace_s + REPAIR_S
    g, sd = goodput_rule(mu, C, w, D), goodput_sd(mu, C, w, D, T)
    assert out["interruptions"] == stopping_faults(days)  # every fault stops a job that holds every node
    assert abs(out["goodput_ratio"] - g) <= SIGMAS * sd, (out["goodput_ratio"], g, sd)
    # the first-order Young/Daly form differs from the exact rule by O((mu (D + C + w))^2): within it here
    first = 1 - w / C - mu * (C / 2 + D)
    assert abs(g - first) <= (mu * (D + C + w)) ** 2
    # GPU-hours by cause: restart + re-placement are the recovery time of each interruption (cut short by the next
    # fault); E[min(D, L)] = (1 - e^{-mu D}) / mu per interruption, share of the ideal = that x mu
    recovering = (out["gpu_hours_lost_restart"] + out["gpu_hours_lost_replacement"]) / out["gpu_hours_ideal"]
    assert recovering == pytest.approx(-math.expm1(-mu * (restart + replace_s)), rel=SIGMAS / math.sqrt(days.size))


# ------------------------------------------------------------------ published: Llama 3
def test_llama3_interruptions_and_effective_training_time():
    """Llama 3 405B (arXiv 2407.21783, Sec. 3.3.4): 466 interruptions in 54 days, > 90 % effective training time.

    The equivalent run: 466 faults at uniform times over 54 days (a Poisson process conditioned on its count), each
    stopping the job.  The paper gives no checkpoint interval or restart time.  With recovery at the published
    bracket (FlashRecovery's 150 s restart, arXiv 2509.03047, plus the 2 min drain) and Young's interval for a 10 s
    stall (7.5 min at a 2.78 h MTBI) the model predicts 93.0 % (closed form), consistent with "> 90 %".
    With the tool's defaults (30 min interval, 10 min restart) it predicts 84.2 %: below the published figure
    (reported as a gap: the defaults are `assumed` conventional-run values; the interval is 4x Young's optimum
    at this rate, which alone costs mu C / 2 = 9 points).
    """
    rng = np.random.default_rng(7)
    days = rng.uniform(0.0, LLAMA3_DAYS, LLAMA3_INTERRUPTIONS)
    w = 10.0
    C = young_interval(w, 1 / LLAMA3_MU)
    rec = Recovery(checkpoint_interval_s=C, checkpoint_stall_s=w, restart_s=FLASHRECOVERY_RESTART_S, replace_s=120.0)
    out = replay(days, LLAMA3_DAYS, rec)
    assert out["interruptions"] == stopping_faults(days) == LLAMA3_INTERRUPTIONS
    D = FLASHRECOVERY_RESTART_S + 120.0 + REPAIR_S
    g = goodput_rule(LLAMA3_MU, C, w, D)
    sd = goodput_sd(LLAMA3_MU, C, w, D, LLAMA3_DAYS * SECONDS_PER_DAY)
    assert g - SIGMAS * sd > LLAMA3_ETTR  # the closed form clears the published bound by more than the noise
    assert out["goodput_ratio"] > LLAMA3_ETTR
    assert abs(out["goodput_ratio"] - g) <= SIGMAS * sd
    # the defaults (README, params.py) at the same rate: the closed form the replay follows, 84.2 %
    assert goodput_rule(LLAMA3_MU, 1800.0, 10.0, 720.0) == pytest.approx(0.8422, abs=1e-4)


# ------------------------------------------------------------------ published: Daly's optimum intervals
def _optimum(f, mu, w, D):
    r = minimize_scalar(lambda c: -f(mu, c, w, D), bounds=(1.0, 20 * 3600.0), method="bounded",
                        options={"xatol": 0.1})
    return r.x / 60.0


@pytest.mark.parametrize("mtbi,published_min", DALY_CASES)
def test_optimum_interval_against_daly(mtbi, published_min):
    """Daly (FGCS 2006) Figs. 3-5: the optimum interval for R = 10 min, delta = 5 min at three MTBIs.

    The exact periodic loss (``tau mod C``) reproduces Daly's three optima within 0.8 %, which validates the
    renewal-reward derivation the other tests use.  The model's ``C / 2`` rule overstates the loss per
    interruption by ~``nu C^2 / 12``, which shortens its optimum: by 1.5 % at M = 24 h, 2.9 % at 6 h, 6.7 % at
    15 min (M ~ 2 C, far outside the regime of the StepFun year, MTBI 20 h for C = 30 min).  Allowed: 4 % while
    C < M / 4, else 8 %.
    """
    mu, w, D = 1 / mtbi, 300.0, 600.0
    exact = _optimum(goodput_exact_periodic, mu, w, D)
    rule = _optimum(goodput_rule, mu, w, D)
    assert exact == pytest.approx(published_min, rel=0.01)  # Daly prints 2-3 digits: 9.1 is 9.05-9.15
    tol = 0.04 if published_min * 60 < mtbi / 4 else 0.08
    assert rule == pytest.approx(published_min, rel=tol)
    assert rule < exact  # the direction the C / 2 rule implies: more loss per interruption, shorter interval
    # and the replay prefers Daly's interval to half and twice it on one common trace (same faults for all three)
    if mtbi >= 6 * 3600:
        days = poisson_days(mu, 3650.0, 3)
        g = {k: replay(days, 3650.0, Recovery(checkpoint_interval_s=k * published_min * 60, checkpoint_stall_s=w,
                                               restart_s=D, replace_s=0.0))["goodput_ratio"] for k in (0.5, 1, 2)}
        assert g[1] > g[0.5] and g[1] > g[2], g


# ------------------------------------------------------------------ published: Llama 3 at its own scale
LLAMA3_HOSTS = 2048  # 16,384 H100 in 8-GPU hosts
LLAMA3_UNEXPECTED = 419  # Table 5: unexpected interruptions (the 47 planned ones are not faults)


def test_llama3_scale_interruptions_from_the_per_host_rate():
    """Llama 3 (arXiv 2407.21783, Table 5): 419 unexpected interruptions in 54 days on 2,048 8-GPU hosts.

    The equivalent run: the per-host fault rate that implies (419 / (54 x 2,048) = 3.8e-3 per host-day, the
    FIGURES.md row) as a Poisson process on every host of a 2,176-host DGX cluster (128 spare hosts), each fault
    repaired after 1 day (assumed; the StepFun trace's median episode is 0.85 d), under a fixed job of 2,048 TP-8
    replicas (one host each).  A fault stops the job when it hits one of its hosts: a host that is up, and then one
    of the 2,048 the job holds among the healthy ones (the faulty host is uniform and independent of where the job
    runs, so the probability is exactly 2,048 / healthy hosts).  Checked: the replay's count against that
    conditional expectation (binomial, 4 sd), and the published 419 within the Poisson noise of the fault count
    (4 sqrt(419)); goodput against the closed form at the realised interruption rate (4 sd).  Replay seed 0:
    454 faults, 432 interruptions (428.9 expected), goodput 85.5 % at the defaults (closed form 85.3 %).
    """
    hosts, T = LLAMA3_HOSTS + 128, LLAMA3_DAYS
    lam = LLAMA3_UNEXPECTED / (LLAMA3_DAYS * LLAMA3_HOSTS)  # per host-day
    rng = np.random.default_rng(0)
    n = rng.poisson(lam * hosts * T)
    t = np.sort(rng.uniform(0.0, T, n))
    srv = rng.integers(0, hosts, n)
    repair = 1.0
    ev, down_until, p_hit = [], {}, []
    for ti, si in zip(t, srv):
        ev.append((float(ti), 1, f"h{si}", "fault_start"))
        if ti + repair <= T:  # a fault still open at the end stays down to the horizon
            ev.append((float(ti) + repair, 0, f"h{si}", "fault_end"))
        healthy = hosts - sum(1 for u in down_until.values() if u > ti)
        p_hit.append(LLAMA3_HOSTS / healthy if down_until.get(si, -1.0) <= ti else 0.0)
        down_until[si] = max(down_until.get(si, -1.0), ti + repair)
    ev.sort()
    tr = trace_from_events([{"node_id": h, "event_time": x, "event_type": k, "fault_type": CAUSE}
                            for x, _, h, k in ev], "llama3-rate", n_servers=hosts, horizon=T)
    fab = build("dgx", hosts * 8, {})
    shape = JobShape(8, 1, LLAMA3_HOSTS)
    rate = constant_rate(1.0, 8)
    rec = Recovery(checkpoint_interval_s=1800.0, checkpoint_stall_s=10.0, restart_s=600.0, replace_s=120.0)
    tl = fault_timeline(fab, 8, tr, seed=0)
    out = summarise(tl, shape, simulate(tl, shape, rate, rec, "fixed"), healthy_tokens_per_s=rate(shape.dp),
                    flops_per_token=1.0, capex_usd=1e6, power_w=1e6, recovery=rec, policy="fixed", series=False)
    p = np.array(p_hit)
    assert abs(out["interruptions"] - p.sum()) <= SIGMAS * math.sqrt((p * (1 - p)).sum())
    assert abs(out["interruptions"] - LLAMA3_UNEXPECTED) <= SIGMAS * math.sqrt(LLAMA3_UNEXPECTED)
    assert out["gpu_hours_lost_faults"] == 0.0  # the spares always absorb the faulty hosts
    mu = out["interruptions"] / (T * SECONDS_PER_DAY)
    D = rec.restart_s + rec.replace_s
    g, sd = goodput_rule(mu, 1800.0, 10.0, D), goodput_sd(mu, 1800.0, 10.0, D, T * SECONDS_PER_DAY)
    assert abs(out["goodput_ratio"] - g) <= SIGMAS * sd, (out["goodput_ratio"], g, sd)
