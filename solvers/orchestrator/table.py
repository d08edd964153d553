"""The cross-ToR table of ``fabric orchestrate-table``: ILP, greedy and fault-unaware placement per architecture.

Cross-ToR traffic ratio (and GPU utilisation) against node fault ratio, i.i.d.
and on a replayed trace, each cell the mean of several fault sets drawn by
:func:`fabric.faultset.fault_set` (through :func:`orchestrate_summary`).
"""

from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from fabric.faults import FaultModel
from fabric.faultset import draw_faults
from fabric.model import Fabric
from fabric.trace import with_servers
from solvers.orchestrator.api import orchestrate_summary


def cross_tor_table(fabrics: Iterable[tuple[str, Fabric]], *, ratios=tuple(i / 100 for i in range(11)),
                    samples: int = 2, seed: int = 0, tp: int = 8, dp: int = 4, load: float | None = None,
                    solvers=("ilp", "greedy", "fault-unaware"), trace: str | None = "stepfun",
                    trace_points: int = 8, time_limit: float = 60.0, mode: str = "exact",
                    trace_servers: int | None = None) -> list[dict]:
    """Cross-ToR traffic ratio (and GPU utilisation) against node fault ratio, per architecture and solver.

    Parameters
    ----------
    fabrics : iterable of (label, Fabric)
        The architectures to compare, built at equal GPU count.
    ratios : sequence of float
        Node fault ratios of the i.i.d. rows (``mode='exact'``: exactly
        ``round(ratio x nodes)`` faulty nodes, a uniform random subset).
    samples : int
        Fault sets per ratio (seeds ``seed .. seed + samples - 1``); the table holds their mean.
    tp, dp : int
        Equal terms for every architecture.
    load : float, optional
        Instances wanted as a fraction of the fault-free maximum (spare
        capacity); None: as many as fit (the lexicographic maximum).
    trace : str or None
        Also replay this trace: ``trace_points`` fault sets at random times
        (time-weighted, seeded), binned by their node fault ratio (nearest
        ratio of ``ratios``).
    trace_servers : int, optional
        Servers a trace file covers, those that never fail included (default: those in it).

    Returns
    -------
    list of dict
        One row per (architecture, fault source, ratio, solver): ``cross_tor_traffic_ratio``,
        ``gpu_utilization``, ``status`` counts.
    """
    rows = []
    trace = with_servers(trace, trace_servers)
    for label, fab in fabrics:
        count = None
        if load is not None:
            clean = orchestrate_summary(fab, tp=tp, dp=dp, solver="greedy")
            count = max(1, int(math.floor(load * clean["instances"])))
        cells: dict[tuple, list[dict]] = {}
        for ratio in ratios:
            for s in range(samples):
                for solver in solvers:
                    d = orchestrate_summary(fab, tp=tp, dp=dp, count=count, node_fault_ratio=ratio, seed=seed + s,
                                            solver=solver, time_limit=time_limit, fault_mode=mode,
                                            none_fit_empty=ratio > 0)
                    cells.setdefault(("iid", ratio, solver), []).append(d)
        if trace:
            for time_day in _trace_times(fab, trace, trace_points, seed):
                for solver in solvers:
                    d = orchestrate_summary(fab, tp=tp, dp=dp, count=count, trace=trace, trace_time=time_day,
                                            seed=seed, solver=solver, time_limit=time_limit, none_fit_empty=True)
                    near = min(ratios, key=lambda r: abs(r - d["node_fault_ratio"]))
                    cells.setdefault(("trace", near, solver), []).append(d)
        for (source, ratio, solver), ds in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2])):
            cr = [d["cross_tor_traffic_ratio"] for d in ds if d["cross_tor_traffic_ratio"] is not None]
            rows.append({
                "architecture": label, "source": source, "node_fault_ratio": ratio, "solver": solver,
                "samples": len(ds), "cross_tor_traffic_ratio": float(np.mean(cr)) if cr else None,
                "gpu_utilization": float(np.mean([d["gpu_utilization"] for d in ds])),
                "proven_optimal": sum(d["status"] == "optimal" for d in ds),
                "infeasible": sum(d["status"] == "infeasible" for d in ds),
                "tp": tp, "dp": dp, "load": load,
            })
    return rows


def _trace_times(fab, trace: str, points: int, seed: int) -> list[float]:
    """``points`` trace days drawn time-weighted (seeded) from the replay on ``fab``'s nodes."""
    rep = draw_faults(fab, FaultModel(trace=trace), seed).replay
    w = rep.durations
    rng = np.random.default_rng(seed)
    idx = rng.choice(w.size, size=points, p=w / w.sum())
    return sorted(float(rep.times[i]) for i in idx)


def _percent(ratio: float) -> str:
    """A fault ratio as a column head: ``0.005`` is ``0.5%`` (``{:.0%}`` wrote ``0%``, the head of ratio 0 too)."""
    return f"{round(ratio * 100, 4):g}%"


def table_markdown(rows: list[dict]) -> str:
    """One markdown table per (fault source): rows = architecture x solver, columns = node fault ratio."""
    out = []
    for source in sorted({r["source"] for r in rows}):
        sub = [r for r in rows if r["source"] == source]
        ratios = sorted({r["node_fault_ratio"] for r in sub})
        keys = sorted({(r["architecture"], r["solver"]) for r in sub}, key=lambda k: (k[0], k[1]))
        out.append(f"**{source}**: cross-ToR traffic ratio (GPU utilisation)\n")
        out.append("| architecture | solver | " + " | ".join(_percent(x) for x in ratios) + " |")
        out.append("|---|---|" + "---|" * len(ratios))
        for arch, solver in keys:
            cells = []
            for x in ratios:
                r = next((r for r in sub if (r["architecture"], r["solver"], r["node_fault_ratio"]) ==
                          (arch, solver, x)), None)
                if r is not None and r["infeasible"] == r["samples"] and r["gpu_utilization"] == 0:
                    cells.append("no job fits")
                elif r is None or r["cross_tor_traffic_ratio"] is None:
                    cells.append("-")
                else:
                    cells.append(f"{r['cross_tor_traffic_ratio']:.3f} ({r['gpu_utilization']:.2f})")
            out.append(f"| {arch} | {solver} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)
