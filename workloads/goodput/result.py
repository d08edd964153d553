"""What a year of faults did to the job: throughput, goodput ratio, GPU-hours by cause, per dollar, per MW.

:func:`summarise` turns a :class:`~workloads.goodput.job.Ledger` into the
JSON object of ``fabric goodput``; :data:`SCALAR_KEYS` lists its scalar
columns (a study row has these, flattened).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from workloads.goodput.events import SECONDS_PER_DAY, FaultTimeline
from workloads.goodput.job import CAUSES, JobShape, Ledger
from workloads.goodput.params import Recovery

SCALAR_KEYS = ("span_days", "job_gpus", "healthy_tokens_per_s", "effective_tokens_per_s",
               "effective_model_flops_per_s", "goodput_ratio", "tokens_per_s_per_musd", "tokens_per_s_per_mw",
               "model_pflops_per_musd", "interruptions", "placements", "regrows", "rebalances") + tuple(
    f"gpu_hours_lost_{c}" for c in CAUSES)


def daily_series(timeline: FaultTimeline, ledger: Ledger, eff0: float, gpus_per_replica: int) -> dict[str, list]:
    """Per day of the span: mean effective tokens/s (before recomputation losses), mean job GPUs, mean healthy GPUs.

    Interval values are spread uniformly over their interval (the rate within
    one is not constant while the job recovers, so a day's figure is an
    interpolation).
    """
    t = timeline.times_s
    days = np.unique(np.append(np.arange(t[0], t[-1], SECONDS_PER_DAY), t[-1]))
    dur = np.diff(t)

    def per_day(per_interval: np.ndarray, integrate: bool) -> np.ndarray:
        total = per_interval if integrate else per_interval * dur
        cum = np.concatenate([[0.0], np.cumsum(total)])
        at = np.interp(days, t, cum)
        return np.diff(at) / np.diff(days)

    useful = np.asarray(ledger.useful_per_interval) * eff0
    gpus = np.asarray(ledger.dp_per_interval, dtype=float) * gpus_per_replica
    return {"day": (days[:-1] / SECONDS_PER_DAY).tolist(),
            "tokens_per_s": per_day(useful, True).tolist(),
            "job_gpus": per_day(gpus, False).tolist(),
            "healthy_gpus": per_day(timeline.healthy_gpus.astype(float), False).tolist()}


def summarise(timeline: FaultTimeline, shape: JobShape, ledger: Ledger, *, healthy_tokens_per_s: float,
              flops_per_token: float, capex_usd: float, power_w: float, recovery: Recovery, policy: str,
              series: bool = True) -> dict[str, Any]:
    """The goodput report (see ``fabric goodput --help`` for the meaning of every field).

    Parameters
    ----------
    healthy_tokens_per_s : float
        The healthy job's throughput (the MFU model's).
    flops_per_token : float
        Model FLOPs per token.
    capex_usd, power_w : float
        The whole cluster's capex and power (:mod:`fabric.cost`).
    """
    T = float(timeline.times_s[-1] - timeline.times_s[0])
    G = shape.gpus
    eff0 = healthy_tokens_per_s / G
    useful = ledger.gpu_s["useful"]
    eff_tokens = useful * eff0 / T
    lost = {c: ledger.gpu_s[c] / 3600.0 for c in CAUSES}
    out: dict[str, Any] = {
        "policy": policy, "span_days": T / SECONDS_PER_DAY, "job_gpus": G, "cluster_gpus": timeline.nodes.n_gpus,
        "tp": shape.tp, "groups_per_replica": shape.groups_per_replica, "dp": shape.dp,
        "healthy_tokens_per_s": healthy_tokens_per_s, "effective_tokens_per_s": eff_tokens,
        "effective_model_flops_per_s": eff_tokens * flops_per_token,
        "goodput_ratio": useful / (G * T),
        # None where a catalog prices (or powers) every part at 0: the division ended in a ZeroDivisionError
        "tokens_per_s_per_musd": eff_tokens / (capex_usd / 1e6) if capex_usd > 0 else None,
        "tokens_per_s_per_mw": eff_tokens / (power_w / 1e6) if power_w > 0 else None,
        "model_pflops_per_musd": eff_tokens * flops_per_token / 1e15 / (capex_usd / 1e6) if capex_usd > 0 else None,
        "capex_usd": capex_usd, "power_w": power_w,
        "gpu_hours_ideal": G * T / 3600.0, "gpu_hours_useful": useful / 3600.0, "gpu_hours_lost": lost,
        "interruptions": ledger.interruptions, "placements": ledger.placements, "regrows": ledger.regrows,
        "rebalances": ledger.rebalances,
        "time_at_size_days": {str(d): s / SECONDS_PER_DAY for d, s in sorted(ledger.shapes.items())},
        "time_waiting_days": float(np.diff(timeline.times_s)[np.asarray(ledger.state_per_interval) == "waiting"].sum()
                                   / SECONDS_PER_DAY) if ledger.state_per_interval else 0.0,
        "recovery": recovery.to_dict(),
    }
    for c in CAUSES:
        out[f"gpu_hours_lost_{c}"] = lost[c]
    if series:
        out["series"] = daily_series(timeline, ledger, eff0, shape.gpus_per_replica)
    return out
