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
    short : str
        Header in the compact table (at most ~7 characters; default: ``title``).
    legend : str
        What the short header means, with units, printed under the compact table.
    """

    column: str
    title: str
    fmt: str
    at_ratio: float | None = None
    trace: bool = False
    short: str = ""
    legend: str = ""

    @property
    def key(self) -> str:
        """Key of the value in a comparison row (JSON)."""
        return self.column + (f"_at_{self.at_ratio:g}" if self.at_ratio is not None else "") + (
            "_trace" if self.trace else "")


HEADLINES = (
    Headline("cost_hbd_capex_per_gpu_usd", "HBD $/GPU", "${:,.0f}", short="HBD $",
             legend="HBD capex per GPU (USD)"),
    Headline("cost_hbd_power_per_gpu_w", "HBD W/GPU", "{:,.1f}", short="HBD W", legend="HBD power per GPU (W)"),
    Headline("cost_capex_per_gpu_usd", "total $/GPU", "${:,.0f}", short="$/GPU",
             legend="cluster capex per GPU: compute + HBD + DCN (USD)"),
    Headline("cost_power_per_gpu_w", "total W/GPU", "{:,.0f}", short="W/GPU", legend="cluster power per GPU (W)"),
    # later metrics' headline columns (shown only when a study computed them):
    Headline("faults_waste_ratio_mean", "waste @3%", "{:.2%}", at_ratio=0.03, short="waste3",
             legend="GPU waste ratio at 3 % i.i.d. node faults (share of healthy GPUs in no TP group)"),
    Headline("faults_waste_ratio_mean", "waste trace", "{:.2%}", trace=True, short="wasteT",
             legend="GPU waste ratio replaying the fault trace (time-weighted)"),
    Headline("faults_blast_radius_node_mean", "node blast GPUs", "{:,.0f}", short="blast",
             legend="usable GPUs one node failure removes"),
    Headline("orchestrator_cross_tor_traffic_ratio", "cross-ToR @0%", "{:.1%}", at_ratio=0.0, short="xToR0",
             legend="share of DP/PP bytes crossing ToR uplinks after placement, no faults"),
    Headline("orchestrator_cross_tor_traffic_ratio", "cross-ToR @3%", "{:.1%}", at_ratio=0.03, short="xToR3",
             legend="the same at 3 % node faults"),
    Headline("mfu_mfu", "MFU", "{:.1%}", legend="model FLOPs utilisation at the best searched parallelism"),
    Headline("goodput_goodput_ratio", "goodput trace", "{:.1%}", trace=True, short="goodput",
             legend="goodput ratio over the fault trace: useful work / ideal (fabric goodput)"),
    Headline("goodput_tokens_per_s_per_musd", "tokens/s per $M", "{:,.0f}", trace=True, short="tok/s/$M",
             legend="effective training tokens/s over the trace per $M of cluster capex"),
)
RATIO_SHORT, RATIO_LEGEND = "vsNVL", f"HBD capex per GPU relative to {REFERENCE_LABEL} at the same GPU count"
"""The compact header and legend of the ``hbd_capex_vs_nvl-72`` column."""


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
        Sweep rows (:func:`cli.study.store.read_results`).

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


def _short_names() -> dict[str, tuple[str, str]]:
    """Comparison key -> (compact header, legend)."""
    out = {h.key: (h.short or h.title, h.legend or h.title) for h in HEADLINES}
    out[f"hbd_capex_vs_{REFERENCE_LABEL}"] = (RATIO_SHORT, RATIO_LEGEND)
    return out


def comparison_table(rows: list[dict[str, Any]], columns: list[tuple[str, str, str]], title: str,
                     wide: bool = False):
    """A rich renderable of :func:`comparison` output.

    The default is compact: short headers, no box lines and a legend under the
    table, so that five architectures with every headline fit in 120 columns.
    ``wide`` gives the full titles and the ``points`` column (about 250 columns).
    """
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    short = _short_names()
    # compact: the title is a line of its own, because rich wraps a table's title to the table's width
    t = Table(title=title if wide else None, title_justify="left", box=None if not wide else box.HEAVY_HEAD,
              padding=(0, 1) if wide else (0, 0, 0, 2), show_edge=wide)
    t.add_column("architecture", no_wrap=True)
    t.add_column("GPUs", justify="right", no_wrap=True)
    show_tp = any(r["tp"] is not None for r in rows)
    if show_tp:
        t.add_column("TP", justify="right", no_wrap=True)
    for key, col_title, _ in columns:
        t.add_column(col_title if wide else short.get(key, (col_title, ""))[0], justify="right", no_wrap=True)
    if wide:
        t.add_column("points", justify="right")
    show_failed = any(r["failed"] for r in rows)
    if show_failed:
        t.add_column("failed", justify="right", no_wrap=True)
    for r in rows:
        gpus = r["gpus_built"] if r["gpus_built"] is not None else r["gpus"]
        cells = [r["label"], f"{gpus:,}"] + ([_fmt(r["tp"], "{}")] if show_tp else [])
        cells += [_fmt(r.get(k), f) for k, _, f in columns] + ([f"{r['points']:,}"] if wide else [])
        if show_failed:
            cells.append(f"{r['failed']:,}")
        t.add_row(*cells)
    if wide:
        return t
    legend = [(short[k][0], short[k][1]) for k, _, _ in columns if k in short and short[k][0] != short[k][1]]
    parts = [Text(title, style="italic"), t]
    if legend:
        width = max(len(name) for name, _ in legend)
        parts.append(Text("\n".join(f"  {name:<{width}}  {meaning}" for name, meaning in legend), style="dim"))
    return Group(*parts)


def rows_table(df, title: str, limit: int = 200):
    """A rich Table of result rows (first ``limit``), all columns of ``df``."""
    from rich.table import Table

    t = Table(title=title, title_justify="left")
    for c in df.columns:
        t.add_column(str(c), overflow="fold")
    for row in row_cells(df, limit):
        t.add_row(*row)
    return t


def row_cells(df, limit: int = 200) -> list[tuple[str, ...]]:
    """The text of every cell of the first ``limit`` rows, as :func:`rows_table` shows them."""
    return [tuple(_fmt(v, "{:.6g}") if isinstance(v, float) else ("-" if v is None else str(v)) for v in rec)
            for rec in df.head(limit).itertuples(index=False)]
