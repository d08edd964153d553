"""The Bokeh layout of a fabric view, shared by the standalone page and the served app.

Renderers (found by ``name`` in tests and in the browser):

* ``boxes``: cubes / HBD domains / nodes as background quads;
* ``links``: every link, one NaN-separated WebGL polyline per link style, so
  100k links cost a handful of draw calls;
* ``devices``: one scatter glyph per device / node / rack, with hover;
* ``selected_links``: filled in the browser when devices are tapped, from the
  per-edge table ``edge_table`` (not drawn itself; each edge points into its
  style's polyline), with hover that names both ends, capacity and load.
"""

from __future__ import annotations

import html

from bokeh.layouts import column
from bokeh.models import (ColumnDataSource, CustomJS, Div, HoverTool, Legend, LegendItem, TapTool,
                          WheelZoomTool)
from bokeh.plotting import figure

from fabric.errors import FabricError
from fabric.model import Fabric
from fabric.viewer import style
from fabric.viewer.levels import DEFAULT_MAX_EDGES, DEFAULT_MAX_GLYPHS
from fabric.viewer.overlay import Overlay
from fabric.viewer.scene import Scene, build_scene

NODE_TOOLTIPS = [
    ("device", "@name"), ("kind", "@kind"), ("node", "@node"), ("rack", "@rack"), ("ToR", "@tor"),
    ("pod", "@pod"), ("HBD domain", "@domain"), ("fault", "@fault"), ("TP group", "@tp"), ("DP group", "@dp"),
    ("link load", "@load"),
]
LINK_TOOLTIPS = [("link", "@label"), ("ends", "@ends"), ("links", "@count"), ("capacity", "@capacity"),
                 ("load", "@load"), ("bytes", "@bytes")]

# Runs in the browser whenever the device selection changes: collect the edges
# touching a selected glyph into the `selected_links` source.
_HIGHLIGHT_JS = """
const sel = new Set(nodes.selected.indices);
const e = edges.data, lx = links.data.xs, ly = links.data.ys, names = nodes.data.name;
const xs = [], ys = [], color = [], label = [], ends = [], count = [], capacity = [], load = [], bytes = [];
if (sel.size > 0) {
  const n = e.a.length;
  for (let i = 0; i < n; i++) {
    const a = e.a[i], b = e.b[i];
    if (!sel.has(a) && !sel.has(b)) continue;
    const r = e.row[i], o = e.start[i], k = e.npts[i];
    xs.push(Array.from(lx[r].slice(o, o + k)));
    ys.push(Array.from(ly[r].slice(o, o + k)));
    label.push(classes[e.cls[i]]);
    color.push(colors[e.style[i]]);
    ends.push((a >= 0 ? names[a] : "(cube)") + " - " + (b >= 0 ? names[b] : "(cube)"));
    count.push(e.count[i]);
    capacity.push((e.capacity[i] * 8 / 1e9).toFixed(0) + " Gb/s");
    const u = e.util[i];
    load.push(Number.isNaN(u) ? "-" : (100 * u).toFixed(0) + "%");
    const by = e.bytes[i];
    bytes.push(Number.isNaN(by) ? "-" : (by / 1e9).toPrecision(3) + " GB");
  }
}
out.data = {xs, ys, color, label, ends, count, capacity, load, bytes};
"""


def highlight_colors(styles: list[tuple[str, str, float, float]]) -> list[str]:
    """Colour of a highlighted link per style: its own, or black where the style is faint."""
    return [colour if alpha >= 0.5 else "#000000" for _, colour, _, alpha in styles]


def _legend_items(renderer, labels: list[str]) -> list[LegendItem]:
    """One legend entry per distinct label, in order of first appearance (not alphabetical)."""
    first: dict[str, int] = {}
    for i, lab in enumerate(labels):
        first.setdefault(lab, i)
    return [LegendItem(label=lab, renderers=[renderer], index=i) for lab, i in first.items()]


def _header(fabric: Fabric, scene: Scene, title: str | None) -> Div:
    head = html.escape(title or f"{fabric.architecture} fabric")
    lines = "".join(f"<div>{html.escape(s)}</div>" for s in scene.summary)
    hint = ("Hover a device for its groups, faults and link load; tap (shift-tap: add) devices to highlight "
            "their links, then hover a highlighted link; tap empty space to clear.")
    return Div(text=f"<h3 style='margin:4px 0'>{head}</h3>{lines}<div style='color:#666'>{hint}</div>",
               sizing_mode="stretch_width", name="header")


BACKENDS = ("webgl", "canvas")


def figure_from_scene(scene: Scene, *, height: int = 720, backend: str = "webgl"):
    """The Bokeh figure for ``scene`` (see the module docstring for its renderers)."""
    if backend not in BACKENDS:
        raise FabricError("backend", f"{backend!r}; allowed: {', '.join(BACKENDS)}")
    p = figure(output_backend=backend, sizing_mode="stretch_width", height=height, match_aspect=scene.circle,
               tools="pan,box_zoom,reset,save", toolbar_location="above", name="fabric_plot")
    wheel = WheelZoomTool()
    p.add_tools(wheel)
    p.toolbar.active_scroll = wheel
    p.axis.visible = False
    p.grid.visible = False
    p.outline_line_color = None
    items: list[LegendItem] = []

    if len(scene.boxes["left"]):
        boxes = p.quad(left="left", right="right", bottom="bottom", top="top", fill_color="fill",
                       line_color="line", fill_alpha="alpha", source=ColumnDataSource(scene.boxes), name="boxes")
        items += _legend_items(boxes, scene.boxes["legend"])

    link_src = ColumnDataSource(scene.links, name="link_data")
    links = p.multi_line(xs="xs", ys="ys", line_color="color", line_width="width", line_alpha="alpha",
                         source=link_src, name="links")
    items += _legend_items(links, scene.links["label"])

    selected = ColumnDataSource({k: [] for k in ("xs", "ys", "color", "label", "ends", "count", "capacity", "load",
                                                 "bytes")}, name="selected_link_data")
    sel_r = p.multi_line(xs="xs", ys="ys", line_color="color", line_width=3.5, line_alpha=1.0, source=selected,
                         name="selected_links")

    node_src = ColumnDataSource(scene.nodes, name="device_data")
    nodes = p.scatter(x="x", y="y", marker="marker", size="size", fill_color="color", line_color="line_color",
                      line_width=0.6, source=node_src, name="devices")
    nodes.nonselection_glyph.fill_alpha = 0.25
    nodes.nonselection_glyph.line_alpha = 0.25
    items += _legend_items(nodes, scene.nodes["legend"])

    p.add_tools(HoverTool(renderers=[nodes], tooltips=NODE_TOOLTIPS, name="device_hover"))
    p.add_tools(HoverTool(renderers=[sel_r], tooltips=LINK_TOOLTIPS, name="link_hover", line_policy="interp"))
    tap = TapTool(renderers=[nodes])
    p.add_tools(tap)

    edge_src = ColumnDataSource(scene.edges, name="edge_table")
    node_src.selected.js_on_change("indices", CustomJS(
        args={"nodes": node_src, "edges": edge_src, "links": link_src, "out": selected,
              "colors": highlight_colors(scene.styles), "classes": list(style.LINK_CLASSES)},
        code=_HIGHLIGHT_JS))
    legend = Legend(items=items, location="top_left", name="legend", label_text_font_size="9pt",
                    glyph_height=14, spacing=1)
    p.add_layout(legend, "right")
    return p


def build_view(fabric: Fabric, overlay: Overlay | None = None, *, color_links_by: str = "type",
               max_glyphs: int = DEFAULT_MAX_GLYPHS, max_edges: int = DEFAULT_MAX_EDGES, level: str | None = None,
               title: str | None = None, height: int = 720, backend: str = "webgl"):
    """The Bokeh layout (header + plot) that shows ``fabric`` with ``overlay``.

    Both front ends use it: ``fabric view --out`` saves it as a page and
    ``fabric view --serve`` puts it in a live document.

    Parameters
    ----------
    fabric : Fabric
    overlay : Overlay, optional
        Faulty devices or nodes, TP/DP groups (GPU ids) and per-link utilisation
        and bytes (one value per physical link id).
    color_links_by : {'type', 'medium', 'load'}
        What link colour shows: link class (HBD, DCN, lit/dark optical path,
        skip hop, circuit), medium, or utilisation bins.
    max_glyphs, max_edges : int
        Above this many glyphs or drawn edges the view aggregates to one glyph
        per node, then per rack (see :mod:`fabric.viewer.levels`).
    level : {'device', 'node', 'rack'}, optional
        Force the level of detail.
    title : str, optional
    height : int
        Plot height in pixels (the width follows the page).
    backend : {'webgl', 'canvas'}
        WebGL draws 100k lines per frame on a GPU; a browser without WebGL
        falls back to canvas by itself.  ``canvas`` is for browsers whose
        WebGL is emulated on the CPU (SwiftShader), where it is ~10x slower
        than canvas (see the viewer benchmark).

    Returns
    -------
    bokeh.models.Column
        ``[header Div, figure]``; the figure is named ``fabric_plot``.

    Raises
    ------
    FabricError
        If the overlay does not fit the fabric or an option is unknown.
    """
    scene = build_scene(fabric, overlay, color_links_by=color_links_by, max_glyphs=max_glyphs, max_edges=max_edges,
                        level=level)
    return column(_header(fabric, scene, title), figure_from_scene(scene, height=height, backend=backend),
                  sizing_mode="stretch_width", name="fabric_view")
