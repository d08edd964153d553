"""Tables of sweep results: the per-architecture comparison and row listings.

The comparison has one row per (label, GPU count, TP size): HBD and total
capex and power per GPU, and, when a study computed them, the headline figures
of later metrics (GPU waste at a 3 % node fault ratio and under a replayed
trace, blast radius of a node, ...).  Adding a headline is one
:class:`Headline` entry; headlines a study did not compute are left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

REFERENCE_LABEL = "nvl-72"
"""HBD capex is also shown relative to this label when a study has it (InfiniteHBD's baseline)."""


@dataclass(frozen=True)
class Headline:
    """A comparison column: the mean of ``column`` over a group's successful rows.

    Attributes
    ----------
    column : str
        Result column (``<metric>_<name>``).
    title : str
        Table header.
    fmt : str
        ``str.format`` pattern for the table.
    at_ratio : float, optional
        Only rows of random faults at this ``fault_ratio``.
    trace : bool
        Only rows of replayed traces.
    """

    column: str
    title: str
    fmt: str
    at_ratio: float | None = None
    trace: bool = False

    @property
    def key(self) -> str:
        """Key of the value in a comparison row (JSON)."""
        return self.column + (f"_at_{self.at_ratio:g}" if self.at_ratio is not None else "") + (
            "_trace" if self.trace else "")


HEADLINES = (
    Headline("cost_hbd_capex_per_gpu_usd", "HBD $/GPU", "${:,.0f}"),
    Headline("cost_hbd_power_per_gpu_w", "HBD W/GPU", "{:,.1f}"),
    Headline("cost_capex_per_gpu_usd", "total $/GPU", "${:,.0f}"),
    Headline("cost_power_per_gpu_w", "total W/GPU", "{:,.0f}"),
    # later metrics' headline columns (shown only when a study computed them):
    Headline("faults_waste_ratio_mean", "waste @3%", "{:.2%}", at_ratio=0.03),
    Headline("faults_waste_ratio_mean", "waste trace", "{:.2%}", trace=True),
    Headline("faults_blast_radius_node_mean", "node blast GPUs", "{:,.0f}"),
    Headline("orchestrator_cross_tor_traffic_ratio", "cross-ToR @0%", "{:.1%}", at_ratio=0.0),
    Headline("orchestrator_cross_tor_traffic_ratio", "cross-ToR @3%", "{:.1%}", at_ratio=0.03),
    Headline("mfu_mfu", "MFU", "{:.1%}"),
    Headline("goodput_goodput_ratio", "goodput trace", "{:.1%}", trace=True),
    Headline("goodput_tokens_per_s_per_musd", "tokens/s per $M", "{:,.0f}", trace=True),
)


def _mean(values) -> float | None:
    vals = [float(v) for v in values if v is not None and not _isnan(v)]
    return sum(vals) / len(vals) if vals else None


def _select(df, h: Headline):
    if h.at_ratio is not None:
        df = df[(df["fault_model"] == "random") & ((df["fault_ratio"] - h.at_ratio).abs() < 1e-12)]
    if h.trace:
        df = df[df["fault_model"] == "trace"]
    return df


def comparison(df) -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """Comparison rows and their columns ``(key, title, fmt)``, in the spec's order.

    Parameters
    ----------
    df : pandas.DataFrame
        Sweep rows (:func:`cli.sweep_store.read_results`).

    Returns
    -------
    rows : list of dict
        ``label, architecture, gpus, tp, gpus_built, points, failed`` and one key per headline column.
    columns : list of (key, title, fmt)
    """
    if df.empty:
        return [], []
    if "point_index" in df:  # the spec's order, not the folders' alphabetical one
        df = df.sort_values("point_index", kind="stable")
    df = df.assign(_tp=df["tp"].fillna(-1).astype(int) if "tp" in df else -1)
    heads = [h for h in HEADLINES if h.column in df.columns]
    ok = df[df["status"] == "ok"]
    rows: list[dict[str, Any]] = []
    for (label, gpus, tp), group in df.groupby(["label", "gpus", "_tp"], sort=False):
        good = ok.loc[ok.index.intersection(group.index)]
        built = _mean(good["cost_gpus"]) if "cost_gpus" in good else None
        row: dict[str, Any] = {"label": label, "architecture": str(group["architecture"].iloc[0]), "gpus": int(gpus),
                               "tp": None if tp < 0 else int(tp), "gpus_built": None if built is None else int(built),
                               "points": int(len(group)), "failed": int((group["status"] != "ok").sum())}
        for h in heads:
            row[h.key] = _mean(_select(good, h)[h.column].tolist())
        rows.append(row)
    # a headline no group has a value for (no 3 % ratio, no trace in the study) is left out
    cols = [(h.key, h.title, h.fmt) for h in heads if any(r[h.key] is not None for r in rows)]
    ref = {r["gpus"]: r.get("cost_hbd_capex_per_gpu_usd") for r in rows if r["label"] == REFERENCE_LABEL}
    if any(ref.values()):
        key = f"hbd_capex_vs_{REFERENCE_LABEL}"
        for r in rows:
            base, val = ref.get(r["gpus"]), r.get("cost_hbd_capex_per_gpu_usd")
            r[key] = val / base if base and val is not None else None
        cols.insert(1, (key, "HBD $ vs NVL-72", "{:.2f}"))
    return rows, cols


def _isnan(v: Any) -> bool:
    return isinstance(v, float) and math.isnan(v)


def _fmt(value: Any, fmt: str) -> str:
    if value is None or _isnan(value):
        return "-"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def comparison_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]], title: str):
    """A rich Table of :func:`comparison` output."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    t.add_column("architecture")
    t.add_column("GPUs", justify="right")
    show_tp = any(r["tp"] is not None for r in rows)
    if show_tp:
        t.add_column("TP", justify="right")
    for _, col_title, _ in columns:
        t.add_column(col_title, justify="right")
    t.add_column("points", justify="right")
    show_failed = any(r["failed"] for r in rows)
    if show_failed:
        t.add_column("failed", justify="right")
    for r in rows:
        gpus = r["gpus_built"] if r["gpus_built"] is not None else r["gpus"]
        cells = [r["label"], f"{gpus:,}"] + ([_fmt(r["tp"], "{}")] if show_tp else [])
        cells += [_fmt(r.get(k), f) for k, _, f in columns] + [f"{r['points']:,}"]
        if show_failed:
            cells.append(f"{r['failed']:,}")
        t.add_row(*cells)
    return t


def rows_table(df, title: str, limit: int = 200):
    """A rich Table of result rows (first ``limit``), all columns of ``df``."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in df.columns:
        t.add_column(str(c), overflow="fold")
    for rec in df.head(limit).itertuples(index=False):
        t.add_row(*[_fmt(v, "{:.6g}") if isinstance(v, float) else ("-" if v is None else str(v)) for v in rec])
    return t
