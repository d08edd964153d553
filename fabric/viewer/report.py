"""The study report: one standalone HTML page of plots and a table from a design study's results.

The page is built from plain data (:class:`ReportData`), so this module knows
no metric names, reads no files and imports nothing outside :mod:`fabric`; the
CLI (:mod:`cli.report`) gathers the data from a sweep folder.  Plots:

- the **Pareto front** of cost per GPU against each quality metric given
  (GPU waste, MFU, goodput, cross-ToR traffic, ...): a design is on the front
  when no other is both cheaper (or as cheap) and better (or as good);
- **waste against fault ratio**, one line per architecture;
- **cost breakdown** per GPU by scope and by component, as stacked bars;
- the **tornado** of assumed prices: how far each moves HBD capex per GPU;
- the comparison **table**.

Every plot has hover tools, units in its axis labels and the study's inputs in
a caption.  A plot whose data is missing is replaced by a note saying why.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from fabric.viewer.page import write_html

PLOT_WIDTH, PLOT_HEIGHT = 760, 420
FRAME_WIDTH, FRAME_HEIGHT = 620, 320
"""The data area of each plot in pixels (fixed, so axis labels and legends do not squeeze it)."""
PLOT_NAME = "report-plot-"
"""Plot ``i`` of the page is the Bokeh model named ``report-plot-<i>``."""
TOP_TORNADO_BARS = 16
"""The tornado shows the assumed prices with the widest swings, at most this many."""


@dataclass(frozen=True)
class QualityAxis:
    """A quality metric to plot against cost on a Pareto front.

    Attributes
    ----------
    key : str
        Key of the value in each design's dict.
    title : str
        Axis label, with its unit.
    higher_is_better : bool
        MFU and goodput: True; waste and cross-ToR traffic: False.
    percent : bool
        The value is a ratio shown in percent.
    """

    key: str
    title: str
    higher_is_better: bool
    percent: bool = True


@dataclass
class ReportData:
    """Everything the page shows, as plain data.

    Attributes
    ----------
    title : str
        Page and heading title.
    caption : str
        The study's inputs in one paragraph (spec, sizes, faults, metrics, catalog), under every plot.
    designs : list of dict
        One dict per design (``label`` and the keys of ``cost_key``, the axes, the table columns).
    cost_key : str
        Key of the cost per GPU (USD) in each design.
    axes : list of QualityAxis
        Quality metrics the study computed; one Pareto plot each.
    table_columns : list of (key, title, fmt)
        The comparison table's columns after ``label``; ``fmt`` is a ``str.format`` pattern.
    waste_curves : dict
        label -> (fault ratios, mean waste ratio), for the waste-vs-fault-ratio plot.
    scope_costs : dict
        label -> {scope: capex per GPU in USD}.
    component_costs : dict
        label -> {component: capex per GPU in USD}.
    tornado : list of dict
        ``label, item, unit_price_usd, source, low, base, high``: HBD capex per GPU (USD) with the
        item's price moved by -swing / +swing.
    swing : float
        The relative price move of the tornado (0.5 = +-50 %).
    notes : list of str
        Why a plot is missing (shown at the top of the page).
    """

    title: str
    caption: str
    designs: list[dict[str, Any]]
    cost_key: str
    axes: list[QualityAxis] = field(default_factory=list)
    table_columns: list[tuple[str, str, str]] = field(default_factory=list)
    waste_curves: dict[str, tuple[Sequence[float], Sequence[float]]] = field(default_factory=dict)
    scope_costs: dict[str, dict[str, float]] = field(default_factory=dict)
    component_costs: dict[str, dict[str, float]] = field(default_factory=dict)
    tornado: list[dict[str, Any]] = field(default_factory=list)
    swing: float = 0.5
    notes: list[str] = field(default_factory=list)


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def pareto_front(points: Sequence[tuple[float, float]], higher_is_better: bool) -> list[bool]:
    """Which points are Pareto-optimal for (lower cost, better quality).

    A point is dominated when another is no more expensive and no worse, and
    strictly better in one of the two; equal points are both kept.

    Parameters
    ----------
    points : sequence of (cost, quality)
    higher_is_better : bool
        Direction of the quality axis.

    Returns
    -------
    list of bool
        True where the point is on the front.

    Examples
    --------
    >>> pareto_front([(1, 0.5), (2, 0.9), (3, 0.8), (1, 0.5)], higher_is_better=True)
    [True, True, False, True]
    >>> pareto_front([(1, 0.3), (2, 0.1), (2, 0.2)], higher_is_better=False)
    [True, True, False]
    """
    sign = 1.0 if higher_is_better else -1.0
    q = [(c, sign * v) for c, v in points]
    out = []
    for i, (ci, vi) in enumerate(q):
        dominated = any(cj <= ci and vj >= vi and (cj < ci or vj > vi) for j, (cj, vj) in enumerate(q) if j != i)
        out.append(not dominated)
    return out


def _color(i: int) -> str:
    from bokeh.palettes import Category20

    palette = Category20[20][0::2] + Category20[20][1::2]  # the ten strong colours first, then their light pairs
    return palette[i % len(palette)]


def _caption(text: str, what: str):
    from bokeh.models import Div

    return Div(text=f"<p style='max-width:{PLOT_WIDTH}px;font-size:12px;color:#444'><b>{html.escape(what)}</b> "
                    f"{html.escape(text)}</p>")


def _label_offsets(xs: list[float], ys: list[float], near: float = 0.03, step: float = 14.0) -> list[float]:
    """Vertical pixel offsets of point labels: a point close to earlier ones gets its label moved down a line.

    "Close" is within ``near`` of the data span on both axes (the k-hop rings of k = 2 and 3 cost
    and waste almost the same, and their labels would print over each other).
    """
    span_x = (max(xs) - min(xs)) or 1.0
    span_y = (max(ys) - min(ys)) or 1.0
    out: list[float] = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        crowd = sum(1 for j in range(i) if abs(xs[j] - x) < near * span_x and abs(ys[j] - y) < near * span_y)
        out.append(-4.0 + step * crowd)
    return out


def _pareto_plot(data: ReportData, axis: QualityAxis):
    from bokeh.models import ColumnDataSource, HoverTool, NumeralTickFormatter
    from bokeh.plotting import figure

    designs = [d for d in data.designs if _finite(d.get(data.cost_key)) and _finite(d.get(axis.key))]
    if not designs:
        return None
    xs = [float(d[data.cost_key]) for d in designs]
    ys = [float(d[axis.key]) for d in designs]
    on = pareto_front(list(zip(xs, ys)), axis.higher_is_better)
    fmt = "{:.2%}" if axis.percent else "{:,.4g}"
    src = ColumnDataSource({"x": xs, "y": ys, "label": [d["label"] for d in designs],
                            "cost": [f"${x:,.0f}" for x in xs], "value": [fmt.format(y) for y in ys],
                            "front": ["on the Pareto front" if o else "dominated" for o in on],
                            "color": [_color(i) for i in range(len(designs))],
                            "size": [16 if o else 10 for o in on], "dy": _label_offsets(xs, ys)})
    better = "higher is better" if axis.higher_is_better else "lower is better"
    p = figure(frame_width=FRAME_WIDTH, frame_height=FRAME_HEIGHT, title=f"Pareto front: {axis.title}, {better}",
               x_axis_label="cluster capex per GPU (USD)", y_axis_label=axis.title,
               tools="pan,wheel_zoom,reset,save", toolbar_location="above")
    p.x_range.range_padding = p.y_range.range_padding = 0.2  # room for the labels of the extreme designs
    front = sorted((x, y) for x, y, o in zip(xs, ys, on) if o)
    if len(front) > 1:
        p.line([f[0] for f in front], [f[1] for f in front], line_dash="dashed", color="#888")
    r = p.scatter("x", "y", source=src, size="size", color="color", line_color="black", alpha=0.85)
    p.text("x", "y", text="label", source=src, x_offset=8, y_offset="dy", text_font_size="10pt")
    p.add_tools(HoverTool(renderers=[r], tooltips=[("design", "@label"), ("capex per GPU", "@cost"),
                                                   (axis.title, "@value"), ("", "@front")]))
    p.xaxis.formatter = NumeralTickFormatter(format="$0,0")
    if axis.percent:
        p.yaxis.formatter = NumeralTickFormatter(format="0.0%")
    return p


def _waste_plot(data: ReportData):
    from bokeh.models import ColumnDataSource, HoverTool, NumeralTickFormatter
    from bokeh.plotting import figure

    curves = {k: v for k, v in data.waste_curves.items() if len(v[0]) > 0}
    if not curves:
        return None
    p = figure(frame_width=FRAME_WIDTH, frame_height=FRAME_HEIGHT, title="GPU waste ratio against node fault ratio",
               x_axis_label="node fault ratio (i.i.d., % of nodes)", y_axis_label="GPU waste ratio (% of healthy GPUs)",
               tools="pan,wheel_zoom,reset,save", toolbar_location="above")
    renderers = []
    for i, (label, (ratios, waste)) in enumerate(curves.items()):
        src = ColumnDataSource({"x": list(ratios), "y": list(waste), "label": [label] * len(ratios)})
        p.line("x", "y", source=src, color=_color(i), line_width=2, legend_label=label)
        renderers.append(p.scatter("x", "y", source=src, color=_color(i), size=7, legend_label=label))
    p.add_tools(HoverTool(renderers=renderers, tooltips=[("design", "@label"), ("node fault ratio", "@x{0.0%}"),
                                                         ("waste ratio", "@y{0.00%}")]))
    p.xaxis.formatter = NumeralTickFormatter(format="0%")
    p.yaxis.formatter = NumeralTickFormatter(format="0%")
    p.legend.location = "top_left"
    p.legend.click_policy = "hide"
    return p


def _stacked_plot(costs: dict[str, dict[str, float]], title: str, what: str):
    from bokeh.models import ColumnDataSource, HoverTool, Legend, NumeralTickFormatter
    from bokeh.plotting import figure

    labels = [lb for lb, parts in costs.items() if parts]
    if not labels:
        return None
    parts: list[str] = []
    for lb in labels:  # stack order: the largest parts at the bottom
        for name in sorted(costs[lb], key=lambda n: -costs[lb][n]):
            if name not in parts:
                parts.append(name)
    columns = {name: [float(costs[lb].get(name, 0.0)) for lb in labels] for name in parts}
    src = ColumnDataSource({"label": labels, **columns})
    height = FRAME_HEIGHT + (18 * max(0, len(parts) - 12))
    p = figure(x_range=labels, frame_width=FRAME_WIDTH, frame_height=height, title=title,
               y_axis_label="capex per GPU (USD)", tools="pan,wheel_zoom,reset,save", toolbar_location="above")
    colors = [_color(i) for i in range(len(parts))]
    rs = p.vbar_stack(parts, x="label", width=0.7, color=colors, source=src, line_color="white")
    for r, name in zip(rs, parts):
        p.add_tools(HoverTool(renderers=[r], tooltips=[("design", "@label"), (what, name),
                                                       ("capex per GPU", f"@{{{name}}}{{$0,0}}")]))
    p.add_layout(Legend(items=[(name, [r]) for name, r in zip(parts, rs)], click_policy="hide"), "right")
    p.yaxis.formatter = NumeralTickFormatter(format="$0,0")
    p.xaxis.major_label_orientation = 0.4
    return p


def _tornado_plot(data: ReportData):
    from bokeh.models import ColumnDataSource, HoverTool, NumeralTickFormatter
    from bokeh.plotting import figure

    rows = [r for r in data.tornado if _finite(r.get("low")) and _finite(r.get("high")) and r["low"] != r["high"]]
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: abs(r["high"] - r["low"]), reverse=True)[:TOP_TORNADO_BARS]
    rows.reverse()  # widest at the top
    names = [f"{r['label']}: {r['item']}" for r in rows]
    src = ColumnDataSource({
        "name": names, "base": [r["base"] for r in rows],
        "left": [min(r["low"], r["high"]) for r in rows], "right": [max(r["low"], r["high"]) for r in rows],
        "low": [r["low"] for r in rows], "high": [r["high"] for r in rows],
        "price": [f"${r['unit_price_usd']:,.0f}" for r in rows], "source": [str(r.get("source", "")) for r in rows]})
    pct = f"{data.swing:.0%}"
    p = figure(y_range=names, frame_width=FRAME_WIDTH, frame_height=max(FRAME_HEIGHT, 28 * len(rows)),
               title=f"Tornado: HBD capex per GPU with each assumed price moved -{pct} / +{pct}",
               x_axis_label="HBD capex per GPU (USD)",
               tools="pan,wheel_zoom,reset,save", toolbar_location="above")
    r = p.hbar(y="name", left="left", right="right", height=0.6, source=src, color=_color(0), alpha=0.8)
    p.scatter("base", "name", source=src, marker="diamond", size=10, color="black")
    p.add_tools(HoverTool(renderers=[r], tooltips=[("price", "@name"), ("unit price (assumed)", "@price"),
                                                   (f"at -{pct}", "@low{$0,0}"), ("base", "@base{$0,0}"),
                                                   (f"at +{pct}", "@high{$0,0}"), ("source", "@source")]))
    p.xaxis.formatter = NumeralTickFormatter(format="$0,0")
    return p


def _fmt(value: Any, fmt: str) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    try:
        return fmt.format(value)
    except (ValueError, TypeError):
        return str(value)


def _table(data: ReportData):
    from bokeh.models import ColumnDataSource, DataTable, TableColumn

    cols = [("label", "architecture", "{}")] + list(data.table_columns)
    src = ColumnDataSource({key: [_fmt(d.get(key), fmt) for d in data.designs] for key, _, fmt in cols})
    columns = [TableColumn(field=key, title=title, width=140 if key == "label" else 90) for key, title, _ in cols]
    return DataTable(source=src, columns=columns, width=min(140 + 92 * len(cols), 1400),
                     height=30 + 28 * max(len(data.designs), 1), index_position=None)


def build_report(data: ReportData):
    """The Bokeh layout of the report (see the module docstring for what it shows).

    Parameters
    ----------
    data : ReportData

    Returns
    -------
    layout : bokeh.models.Column
    notes : list of str
        ``data.notes`` and one line per plot left out, saying why (also at the top of the page).
    """
    from bokeh.layouts import column
    from bokeh.models import Div

    notes = list(data.notes)
    parts: list[Any] = [Div(text=f"<h1>{html.escape(data.title)}</h1>"
                                 f"<p style='max-width:1000px'>{html.escape(data.caption)}</p>")]

    plots = 0

    def add(plot, what: str, missing: str) -> None:
        nonlocal plots
        if plot is None:
            notes.append(missing)
        else:
            plot.name = f"{PLOT_NAME}{plots}"  # the browser test finds every plot by these names
            plots += 1
            # each plot in a column of its own: a column of bare plots lines up their frames, so the
            # tornado's long item names would push every other plot right and out of its box
            parts.append(column(plot, _caption(data.caption, what)))

    for axis in data.axes:
        add(_pareto_plot(data, axis), f"Cluster capex per GPU against {axis.title}; the dashed line joins the "
                                      f"designs on the Pareto front (large dots): none is both cheaper and better.",
            f"Pareto front of {axis.title}: no design has both a cost and this metric.")
    add(_waste_plot(data), "Mean GPU waste ratio over the fault samples at each i.i.d. node fault ratio.",
        "Waste against fault ratio: the study has no faults metric with random node faults.")
    add(_stacked_plot(data.scope_costs, "Capex per GPU by scope", "scope"),
        "Capex per GPU by scope (compute, HBD, DCN).",
        "Cost by scope: no design has a cost (no cost metric, or every point failed).")
    add(_stacked_plot(data.component_costs, "Capex per GPU by component", "component"),
        "Capex per GPU of every component of the bill of materials.",
        # a catalog of $0 parts leaves nothing to stack: the note blamed the rebuild, which had worked
        "Cost by component: no design has a priced part, or the designs could not be rebuilt from the study spec.")
    add(_tornado_plot(data), "Each assumed (unsourced) price moved alone; the diamond is the shipped value.",
        "Tornado: no design has an assumed price that moves its cost, or the designs could not be rebuilt.")
    parts.append(Div(text="<h2>Comparison (means over seeds)</h2>"))
    table = _table(data)
    table.name = "report-table"
    parts.append(table)
    parts.append(_caption(data.caption, "Table."))
    if notes:
        items = "".join(f"<li>{html.escape(n)}</li>" for n in notes)
        parts.insert(1, Div(text=f"<p><b>Not shown:</b></p><ul>{items}</ul>"))
    return column(*parts), notes


def write_report(data: ReportData, path, field: str = "--out"):
    """Write the report of ``data`` to ``path`` (standalone HTML, BokehJS inlined; atomic).

    Returns
    -------
    path : pathlib.Path
    notes : list of str
        What the page leaves out and why.
    """
    layout, notes = build_report(data)
    return write_html(layout, path, title=data.title, field=field), notes
