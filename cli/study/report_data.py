"""Gather a study report's data from a sweep folder (the page itself is :mod:`fabric.viewer.report`).

Designs are the comparison rows of :func:`cli.study.report.comparison` (one
per label, GPU count and TP size).  The quality axes are whichever headline
metrics the study computed; the cost breakdown by component and the tornado
need the bill of materials, which a sweep row does not hold, so the designs
are rebuilt from the study spec (the spec the sweep ran, or the copy in the
folder) with the same catalog.  Anything missing becomes a note on the page,
never an error.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from fabric.errors import FabricError
from fabric.viewer.report import QualityAxis, ReportData

COST_KEY = "cost_capex_per_gpu_usd"
SCOPES = ("compute", "hbd", "dcn")
TORNADO_METRIC = "hbd_capex_per_gpu_usd"
SWING = 0.5
"""The tornado moves each assumed price by -50 % and +50 % (as `fabric cost --sensitivity`)."""

# (candidate comparison keys or row columns in order of preference, axis title, higher is better)
QUALITY = (
    (("faults_waste_ratio_mean_at_0.03", "faults_waste_ratio_mean_trace", "faults_waste_ratio_mean"),
     "GPU waste ratio", False),
    (("mfu_mfu",), "MFU", True),
    (("goodput_goodput", "goodput_goodput_ratio", "goodput_ratio", "goodput_effective_ratio"), "goodput", True),
    (("orchestrator_cross_tor_traffic_ratio_at_0.03", "orchestrator_cross_tor_traffic_ratio_at_0",
      "orchestrator_cross_tor_traffic_ratio"), "cross-ToR traffic ratio", False),
)
_WHERE = {"_at_0.03": " at 3 % node faults", "_at_0": " without faults", "_trace": " on the fault trace"}


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _groups(df):
    """(label, gpus, tp) -> rows, in the spec's order; the same grouping as the comparison."""
    if "point_index" in df:
        df = df.sort_values("point_index", kind="stable")
    df = df.assign(_tp=df["tp"].fillna(-1).astype(int) if "tp" in df else -1)
    return df.groupby(["label", "gpus", "_tp"], sort=False)


def _names(designs: list[dict[str, Any]]) -> None:
    """Give each design a unique display ``label``: add the GPU count and TP size only where needed."""
    from collections import Counter

    by_label = Counter(d["label"] for d in designs)
    by_label_gpus = Counter((d["label"], d["gpus"]) for d in designs)
    for d in designs:
        name = d["label"]
        if by_label[d["label"]] > 1:
            name += f" {d['gpus']:,} GPUs"
            if by_label_gpus[(d["label"], d["gpus"])] > 1 and d.get("tp") is not None:
                name += f" TP{d['tp']}"
        d["key"] = (d["label"], d["gpus"], d["tp"] if d.get("tp") is not None else -1)
        d["label"] = name


def _axes(df, designs: list[dict[str, Any]], notes: list[str]) -> list[QualityAxis]:
    """The quality axes present: a comparison key with a value, else the mean of a row column per design."""
    groups = dict(iter(_groups(df[df["status"] == "ok"]))) if "status" in df else {}
    axes = []
    for candidates, title, higher in QUALITY:
        chosen = None
        for key in candidates:
            if any(_num(d.get(key)) is not None for d in designs):
                chosen = key
                break
            if key in df.columns:
                for d in designs:
                    rows = groups.get(d["key"])
                    d[key] = None if rows is None else _num(rows[key].astype(float).mean())
                if any(d[key] is not None for d in designs):
                    chosen = key
                    break
        if chosen is None:
            notes.append(f"Pareto front of {title}: the study has no such metric.")
            continue
        where = next((w for suffix, w in _WHERE.items() if chosen.endswith(suffix)), "")
        axes.append(QualityAxis(chosen, f"{title}{where}", higher))
    return axes


def _waste_curves(df, designs: list[dict[str, Any]]) -> dict[str, tuple[list[float], list[float]]]:
    if "faults_waste_ratio_mean" not in df or "fault_model" not in df:
        return {}
    ok = df[(df["status"] == "ok") & (df["fault_model"] == "random")]
    curves = {}
    by_key = dict(iter(_groups(ok))) if not ok.empty else {}
    for d in designs:
        rows = by_key.get(d["key"])
        if rows is None:
            continue
        mean = rows.groupby("fault_ratio")["faults_waste_ratio_mean"].mean().dropna()
        if len(mean):
            curves[d["label"]] = ([float(x) for x in mean.index], [float(y) for y in mean.values])
    return curves


def _scope_costs(df, designs: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    cols = {s: f"cost_{s}_capex_per_gpu_usd" for s in SCOPES if f"cost_{s}_capex_per_gpu_usd" in df}
    if not cols:
        return {}
    by_key = dict(iter(_groups(df[df["status"] == "ok"])))
    out = {}
    for d in designs:
        rows = by_key.get(d["key"])
        if rows is not None:
            parts = {s: _num(rows[c].mean()) for s, c in cols.items()}
            out[d["label"]] = {s: v for s, v in parts.items() if v is not None}
    return out


def _load_spec(out: Path, manifest: dict[str, Any]):
    """The study that wrote ``out``: the original spec if it still matches, else the copy in the folder."""
    from cli.study.spec import load_study
    from cli.study.store import SPEC_COPY

    spec = manifest.get("spec")
    if spec and Path(spec).is_file():
        try:
            study = load_study(spec)
            if study.fingerprint() == manifest.get("fingerprint"):
                return study
        except FabricError:
            pass
    return load_study(out / SPEC_COPY)


def _bom(out: Path, manifest: dict[str, Any], designs: list[dict[str, Any]], notes: list[str]):
    """Capex per GPU by component and the tornado rows, rebuilding each design's Fabric."""
    from fabric.cost import cost_of, price_sensitivity
    from topologies import build

    try:
        study = _load_spec(out, manifest)
    except FabricError as exc:
        notes.append(f"Cost by component and tornado: cannot read the study spec ({exc}).")
        return {}, []
    components: dict[str, dict[str, float]] = {}
    tornado: list[dict[str, Any]] = []
    for d in designs:
        label, gpus, _ = d["key"]
        point = next((p for p in study.points if p.label == label and p.gpus == gpus), None)
        if point is None:
            notes.append(f"Cost by component: {d['label']} is not in the study spec any more.")
            continue
        try:
            fab = build(point.architecture, point.gpus, dict(point.given), study.catalog)
        except FabricError as exc:
            notes.append(f"Cost by component: cannot rebuild {d['label']} ({exc}).")
            continue
        report = cost_of(fab, study.catalog)
        parts: dict[str, float] = {}
        for r in report.rows:
            parts[r.item] = parts.get(r.item, 0.0) + r.capex_usd / max(report.gpus, 1)
        components[d["label"]] = {k: v for k, v in parts.items() if v > 0}
        for r in price_sensitivity(report, swing=SWING, metrics=(TORNADO_METRIC,)):
            m = r[TORNADO_METRIC]
            tornado.append({"label": d["label"], "item": r["item"], "unit_price_usd": r["unit_price_usd"],
                            "source": r["source"], "low": m["low"], "base": m["base"], "high": m["high"]})
    return components, tornado


def _caption(out: Path, manifest: dict[str, Any], df) -> str:
    """The study's inputs in one paragraph."""
    def values(col, fmt="{}"):
        if col not in df:
            return None
        vals = sorted({v for v in df[col].dropna().tolist()}, key=lambda v: (str(type(v)), v))
        return ", ".join(fmt.format(v) for v in vals) if vals else None

    metrics = []
    for m in manifest.get("metrics", []):
        opts = ", ".join(f"{k}={v}" for k, v in (m.get("options") or {}).items())
        metrics.append(f"{m.get('name')}({opts})" if opts else str(m.get("name")))
    bits = [f"Study {manifest.get('study', out.name)}: {len(df):,} rows from {out}",
            f"designs {values('label')}", f"GPUs {values('gpus', '{:,}')}"]
    for col, what, fmt in (("tp", "TP", "{:g}"), ("fault_ratio", "node fault ratios", "{:.0%}"),
                           ("fault_trace", "fault traces", "{}"), ("seed", "seeds", "{:g}")):
        v = values(col, fmt)
        if v:
            bits.append(f"{what} {v}")
    bits.append(f"metrics {'; '.join(metrics) or 'unknown'}")
    bits.append(f"catalog {manifest.get('catalog', 'unknown')}")
    bits.append(f"hbd-fabric {manifest.get('tool_version', '?')}, written {manifest.get('written_at', '?')}")
    return "; ".join(bits) + "."


def report_data(out: Path) -> ReportData:
    """Everything :func:`fabric.viewer.report.build_report` needs, from sweep folder ``out``.

    Raises
    ------
    FabricError
        ``out`` is not a folder or holds no sweep results.
    """
    from cli.study.report import comparison
    from cli.study.store import read_manifest, read_results

    if not out.is_dir():
        raise FabricError("DIR", f"{out} is a file, not a sweep folder" if out.exists()
                          else f"no such folder: {out}")
    df = read_results(out)
    manifest = read_manifest(out)  # empty if damaged (`fabric report` warns): the rows stand without it
    rows, cols = comparison(df)
    designs = [dict(r) for r in rows]
    _names(designs)
    notes: list[str] = []
    if not any(_num(d.get(COST_KEY)) is not None for d in designs):
        notes.append("Pareto fronts: no design has a cost (the study has no cost metric, or every point failed); "
                     "cost per GPU is their x axis.")
    axes = _axes(df, designs, notes)
    has_cost = "cost_capex_usd" in df
    components, tornado = _bom(out, manifest, designs, notes) if has_cost else ({}, [])
    return ReportData(title=f"Study report: {manifest.get('study', out.name)}", caption=_caption(out, manifest, df),
                      designs=designs, cost_key=COST_KEY, axes=axes, table_columns=cols,
                      waste_curves=_waste_curves(df, designs), scope_costs=_scope_costs(df, designs),
                      component_costs=components, tornado=tornado, swing=SWING, notes=notes)
