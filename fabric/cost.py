"""Capex and power of a Fabric from its bill of materials and the catalog.

Cost is linear in unit prices, so the sensitivity to each assumed price is
computed exactly from the breakdown (no rebuild): moving the price of item
``i`` by a factor ``f`` moves a total by ``(f - 1) * count_i * price_i``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fabric.catalog import Catalog
from fabric.checks import real
from fabric.errors import FabricError
from fabric.model import SCOPES, Fabric


@dataclass(frozen=True)
class CostRow:
    item: str
    description: str
    category: str
    scope: str
    count: int
    unit_price_usd: float
    capex_usd: float
    unit_power_w: float
    power_w: float
    price_source: str
    power_source: str

    @property
    def price_assumed(self) -> bool:
        return self.price_source.lower().startswith("assumed")

    def to_dict(self) -> dict[str, Any]:
        return {
            "item": self.item, "description": self.description, "category": self.category,
            "scope": self.scope, "count": self.count, "unit_price_usd": self.unit_price_usd,
            "capex_usd": self.capex_usd, "unit_power_w": self.unit_power_w, "power_w": self.power_w,
            "price_source": self.price_source, "power_source": self.power_source,
        }


@dataclass(frozen=True)
class CostReport:
    """Capex (USD) and power (W) of a Fabric, per component and per scope."""

    gpus: int
    rows: tuple[CostRow, ...]

    @property
    def capex_usd(self) -> float:
        return sum(r.capex_usd for r in self.rows)

    @property
    def power_w(self) -> float:
        return sum(r.power_w for r in self.rows)

    def scope_capex(self, scope: str) -> float:
        return sum(r.capex_usd for r in self.rows if r.scope == scope)

    def scope_power(self, scope: str) -> float:
        return sum(r.power_w for r in self.rows if r.scope == scope)

    def metric(self, name: str) -> float:
        """A named output: ``capex_usd``, ``capex_per_gpu_usd``, ``power_w``,
        ``power_per_gpu_w``, or ``<scope>_capex_per_gpu_usd`` / ``<scope>_power_per_gpu_w``."""
        g = max(self.gpus, 1)
        if name == "capex_usd":
            return self.capex_usd
        if name == "capex_per_gpu_usd":
            return self.capex_usd / g
        if name == "power_w":
            return self.power_w
        if name == "power_per_gpu_w":
            return self.power_w / g
        scope, _, rest = name.partition("_")
        if scope in SCOPES and rest == "capex_per_gpu_usd":
            return self.scope_capex(scope) / g
        if scope in SCOPES and rest == "power_per_gpu_w":
            return self.scope_power(scope) / g
        raise KeyError(name)

    def to_dict(self) -> dict[str, Any]:
        g = max(self.gpus, 1)
        return {
            "gpus": self.gpus,
            "capex_usd": self.capex_usd,
            "capex_per_gpu_usd": self.capex_usd / g,
            "power_w": self.power_w,
            "power_per_gpu_w": self.power_w / g,
            "by_scope": {
                s: {"capex_usd": self.scope_capex(s), "capex_per_gpu_usd": self.scope_capex(s) / g,
                    "power_w": self.scope_power(s), "power_per_gpu_w": self.scope_power(s) / g}
                for s in SCOPES
            },
            "breakdown": [r.to_dict() for r in self.rows],
        }


def cost_of(fabric: Fabric, catalog: Catalog) -> CostReport:
    """Price every BOM line of ``fabric`` with ``catalog``.

    Parameters
    ----------
    fabric : Fabric
    catalog : Catalog

    Returns
    -------
    CostReport
        One row per (item, scope), in BOM order.
    """
    if not isinstance(fabric, Fabric):
        raise FabricError("fabric", f"must be a Fabric (topologies.build), not {type(fabric).__name__}")
    if not isinstance(catalog, Catalog):
        raise FabricError("catalog", f"must be a Catalog (fabric.catalog.load_catalog), not {type(catalog).__name__}")
    merged: dict[tuple[str, str], int] = {}
    for line in fabric.bom:
        key = (line.item, line.scope)
        merged[key] = merged.get(key, 0) + line.count
    rows = []
    for (item, scope), count in merged.items():
        comp = catalog.get(item)
        price = comp.values.get("price_usd", 0.0)
        power = comp.values.get("power_w", 0.0)
        rows.append(CostRow(item, comp.description, comp.category, scope, count, price, price * count,
                            power, power * count, comp.sources.get("price_usd", "assumed: missing"),
                            comp.sources.get("power_w", "assumed: missing")))
    return CostReport(fabric.n_gpus, tuple(rows))


def cost_summary(fab: Fabric, catalog: Catalog, report: CostReport | None = None) -> dict:
    """The JSON object of ``fabric cost`` (without sensitivity): architecture, params, the report, notes.

    Parameters
    ----------
    fab : Fabric
    catalog : Catalog
    report : CostReport, optional
        ``cost_of(fab, catalog)``, when the caller has it already.

    Returns
    -------
    dict
        ``architecture``, ``params``, the fields of :meth:`CostReport.to_dict` (USD, W) and ``notes``.
    """
    report = report or cost_of(fab, catalog)
    return {"architecture": fab.architecture, "params": fab.params, **report.to_dict(), "notes": list(fab.notes)}


METRICS = ("capex_per_gpu_usd", "hbd_capex_per_gpu_usd", "dcn_capex_per_gpu_usd", "compute_capex_per_gpu_usd")


def _shifted(report: CostReport, item: str, factor: float, metric: str) -> float:
    """``metric`` of ``report`` with the unit price of ``item`` multiplied by ``factor`` (exact: linear)."""
    base = report.metric(metric)
    g = max(report.gpus, 1)
    delta = 0.0
    for r in report.rows:
        if r.item != item:
            continue
        if metric.startswith(("capex_usd", "capex_per_gpu")) or metric.startswith(f"{r.scope}_capex"):
            delta += (factor - 1.0) * r.capex_usd
    if metric.endswith("per_gpu_usd"):
        delta /= g
    return base + delta


def price_sensitivity(report: CostReport, versus: CostReport | None = None, swing: float = 0.5,
                      metrics: tuple[str, ...] = METRICS, ratio_metric: str = "hbd_capex_per_gpu_usd"
                      ) -> list[dict[str, Any]]:
    """Tornado table: each assumed unit price moved by -swing and +swing.

    Parameters
    ----------
    report : CostReport
        The architecture under study.
    versus : CostReport, optional
        A second architecture; adds the ratio ``report / versus`` of
        ``ratio_metric`` and how each assumed price (of either) moves it.
    swing : float
        Relative price change, 0.5 for +-50 %.

    Returns
    -------
    list of dict
        One row per assumed-price item, sorted by the widest swing of the
        ratio (or of the first metric), with ``low`` / ``base`` / ``high``
        per output.
    """
    swing = real(swing, "swing", 0.0, 1.0, lo_open=True, hi_open=True)  # 1 or more would price items at <= $0
    if isinstance(metrics, str) or not metrics:
        raise FabricError("metrics", f"{metrics!r} must be a non-empty sequence of metric names")
    for field, names in (("metrics", metrics), ("ratio_metric", (ratio_metric,) if versus is not None else ())):
        for m in names:
            try:
                report.metric(m)
            except (KeyError, TypeError):
                raise FabricError(field, f"{m!r} is not a metric; use one of {', '.join(METRICS)} or "
                                         "SCOPE_capex_per_gpu_usd / SCOPE_power_per_gpu_w") from None
    items = {r.item: r for r in report.rows if r.price_assumed}
    if versus is not None:
        items.update({r.item: r for r in versus.rows if r.price_assumed and r.item not in items})
    rows = []
    for item, row in items.items():
        out: dict[str, Any] = {"item": item, "unit_price_usd": row.unit_price_usd,
                               "source": row.price_source}
        for m in metrics:
            out[m] = {"low": _shifted(report, item, 1 - swing, m), "base": report.metric(m),
                      "high": _shifted(report, item, 1 + swing, m)}
        if versus is not None:
            base = report.metric(ratio_metric) / versus.metric(ratio_metric)
            lo = _shifted(report, item, 1 - swing, ratio_metric) / _shifted(versus, item, 1 - swing, ratio_metric)
            hi = _shifted(report, item, 1 + swing, ratio_metric) / _shifted(versus, item, 1 + swing, ratio_metric)
            out["ratio"] = {"metric": ratio_metric, "low": lo, "base": base, "high": hi}
        rows.append(out)
    key_metric = "ratio" if versus is not None else metrics[0]

    def span(r):
        v = r[key_metric]
        return abs(v["high"] - v["low"])

    rows.sort(key=span, reverse=True)
    return rows


def cost_table(entries, catalog: Catalog) -> list[dict]:
    """HBD / DCN / total capex and power per GPU for each (label, Fabric), with the HBD capex relative to NVL-72.

    Parameters
    ----------
    entries : iterable of (label, Fabric)
        Fabrics built at (about) equal GPU count; the one labelled ``nvl-72``
        is the reference of ``hbd_capex_vs_nvl72`` (None without it, or when its HBD costs $0).
    catalog : Catalog

    Returns
    -------
    list of dict
        ``label``, ``architecture``, ``params``, ``gpus`` and the per-GPU metrics of :func:`cost_of`.
    """
    rows = []
    for label, fab in entries:
        r = cost_of(fab, catalog)
        rows.append({
            "label": label, "architecture": fab.architecture, "params": fab.params, "gpus": fab.n_gpus,
            "hbd_capex_per_gpu_usd": r.metric("hbd_capex_per_gpu_usd"),
            "hbd_power_per_gpu_w": r.metric("hbd_power_per_gpu_w"),
            "dcn_capex_per_gpu_usd": r.metric("dcn_capex_per_gpu_usd"),
            "capex_per_gpu_usd": r.metric("capex_per_gpu_usd"),
            "power_per_gpu_w": r.metric("power_per_gpu_w"),
        })
    ref = next((r for r in rows if r["label"] == "nvl-72"), None)
    # a catalog may price NVL-72's HBD parts at $0 (it ended in ZeroDivisionError): no ratio to it then
    ref = ref if ref is not None and ref["hbd_capex_per_gpu_usd"] > 0 else None
    for r in rows:
        r["hbd_capex_vs_nvl72"] = r["hbd_capex_per_gpu_usd"] / ref["hbd_capex_per_gpu_usd"] if ref else None
    return rows
