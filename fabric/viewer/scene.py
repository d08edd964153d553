"""The document model: everything the page shows, as plain columns, before any Bokeh object.

:func:`build_scene` turns a Fabric and an :class:`~fabric.viewer.overlay.Overlay`
into glyph, box and edge tables (one row per glyph / box / edge, ready to be a
ColumnDataSource).  Keeping this step free of Bokeh makes it cheap to test and
lets :mod:`fabric.viewer.document` stay a thin mapping to renderers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fabric.errors import FabricError
from fabric.model import DeviceKind, Fabric, HBDKind
from fabric.viewer import style
from fabric.viewer.edges import Edges, build_edges, bundle, drawable_links, link_styles
from fabric.viewer.layout import Layout, compute_layout, tier_of
from fabric.viewer.levels import DEFAULT_MAX_EDGES, DEFAULT_MAX_GLYPHS, LEVELS, Glyphs, assign, choose_level
from fabric.viewer.overlay import Overlay, Resolved, resolve

# the grouping each HBD kind draws as background boxes, and their legend labels (healthy, faulty)
BOX_GROUPING = {
    "ocs_cube": ("cube", "cube", "cube lost (a faulty chip)"),
    "switch_domain": ("domain", "HBD domain", "HBD domain with a fault"),
    "khop_line": ("node", "node", "faulty node"),
    "torus": ("node", "host", "faulty host"),
}
UNIT_LABELS = {1: "node", 2: "rack", 3: "domain switch chips"}


@dataclass(frozen=True)
class Scene:
    """Tables for the page; every dict is a ColumnDataSource's ``data``.

    Attributes
    ----------
    nodes : dict
        One row per glyph: ``x, y, color, line_color, marker, size, legend``,
        tooltip strings (``name, kind, node, rack, tor, pod, domain, fault, tp,
        dp, load``) and numbers (``gpus, faulty, tp_group, device``).
    boxes : dict
        One row per background box (cube, HBD domain, node): ``left, right,
        bottom, top, fill, line, alpha, legend, label, gpus, faulty``.
    edges : dict
        One row per merged edge: glyph ends ``a, b`` (-1 for a box end),
        ``cls, count, capacity, util, bytes, style``, and where its polyline
        is: ``npts`` points from ``start`` in row ``row`` of ``links``.
    links : dict
        One row per link style, each a NaN-separated polyline: ``xs, ys, color,
        width, alpha, label``.
    styles : list of (label, colour, width, alpha)
    """

    level: str
    level_reason: str
    circle: bool
    nodes: dict
    boxes: dict
    edges: dict
    links: dict
    styles: list
    summary: list[str] = field(default_factory=list)

    @property
    def n_glyphs(self) -> int:
        return len(self.nodes["x"])

    @property
    def n_edges(self) -> int:
        return len(self.edges["a"])


# ------------------------------------------------------------------- helpers
def _span(lo: np.ndarray, hi: np.ndarray, none: str = "-") -> list[str]:
    """``"3"``, ``"3-7"`` or ``none`` per row."""
    return [none if a < 0 else str(a) if a == b else f"{a}-{b}" for a, b in zip(lo.tolist(), hi.tolist())]


def _min_max(glyph: np.ndarray, values: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Min and max of the non-negative ``values`` per glyph (-1 where none)."""
    ok = values >= 0
    big = np.iinfo(np.int64).max
    lo = np.full(n, big, dtype=np.int64)
    hi = np.full(n, -1, dtype=np.int64)
    np.minimum.at(lo, glyph[ok], values[ok])
    np.maximum.at(hi, glyph[ok], values[ok])
    lo[lo == big] = -1
    return lo, hi


def _distinct(glyph: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Number of distinct non-negative ``values`` per glyph."""
    ok = values >= 0
    pairs = np.unique(np.stack([glyph[ok], values[ok]]), axis=1)
    return np.bincount(pairs[0], minlength=n) if pairs.size else np.zeros(n, dtype=np.int64)


def _centroids(glyph: np.ndarray, u: np.ndarray, v: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    cnt = np.bincount(glyph, minlength=n)
    return (np.bincount(glyph, weights=u, minlength=n) / np.maximum(cnt, 1),
            np.bincount(glyph, weights=v, minlength=n) / np.maximum(cnt, 1))


def _percent(util: np.ndarray) -> list[str]:
    return ["-" if np.isnan(x) else f"max {100 * x:.0f}%" for x in util.tolist()]


# -------------------------------------------------------------------- glyphs
@dataclass(frozen=True)
class _Members:
    """What each glyph holds: counts and group ranges over its member devices."""

    single: np.ndarray   # the glyph is one device
    dev: np.ndarray      # that device, else -1
    kind: np.ndarray     # its kind (GPU for a node / rack / domain glyph)
    gpus: np.ndarray
    faulty: np.ndarray   # faulty GPUs (or 1 for a faulty single device)
    idle: np.ndarray     # healthy GPUs in no TP group
    tp: tuple[np.ndarray, np.ndarray, np.ndarray]  # min, max, distinct TP groups
    dp: tuple[np.ndarray, np.ndarray]


def _members(fabric: Fabric, glyphs: Glyphs, res: Resolved) -> _Members:
    n, g = glyphs.n, glyphs.of_device
    kind = fabric.devices.kind
    single = glyphs.unit == 0
    dev = np.where(single, glyphs.unit_id, -1)
    is_gpu = kind == DeviceKind.GPU
    gpus = np.bincount(g[is_gpu], minlength=n)
    faulty = np.where(single, res.faulty[np.maximum(dev, 0)],
                      np.bincount(g[is_gpu & res.faulty], minlength=n)).astype(np.int64)
    idle = np.bincount(g[is_gpu & (res.tp < 0) & ~res.faulty], minlength=n)
    return _Members(single, dev, np.where(single, kind[np.maximum(dev, 0)], DeviceKind.GPU), gpus, faulty, idle,
                    (*_min_max(g, res.tp, n), _distinct(g, res.tp, n)), _min_max(g, res.dp, n))


def _appearance(glyphs: Glyphs, m: _Members, res: Resolved) -> dict:
    """Fill colour, outline, marker, size and legend label: faults first, then TP groups, then the kind."""
    label, color, marker, size = [], [], [], []
    for k, unit, gpus, bad, tp in zip(m.kind.tolist(), glyphs.unit.tolist(), m.gpus.tolist(), m.faulty.tolist(),
                                      m.tp[0].tolist()):
        k = DeviceKind(k)
        noun = style.KIND_NAMES[k] if unit == 0 else UNIT_LABELS[unit]
        if bad:
            lab, col = (f"faulty {noun}" if unit == 0 else f"{noun} with a faulty GPU"), style.FAULT_COLOR
        elif res.has_groups and gpus and tp >= 0:
            lab, col = f"{noun} in a TP group", style.GROUP_PALETTE[tp % len(style.GROUP_PALETTE)]
        elif res.has_groups and gpus:
            lab, col = f"{noun} in no TP group", style.IDLE_COLOR
        else:
            lab, col = noun, style.KIND_COLORS[DeviceKind.SWITCH_CHIP if unit == 3 else k]
        label.append(lab)
        color.append(col)
        if unit == 0:
            marker.append(style.KIND_MARKERS[k])
            size.append(7.0 if k in (DeviceKind.GPU, DeviceKind.NIC) else 10.0)
        else:
            marker.append({1: "circle", 2: "square", 3: "diamond"}[unit])
            size.append(12.0 if unit == 2 else 10.0)
    # many glyphs: shrink them so the band does not turn into one blob; faults stay visible at a glance
    sizes = np.asarray(size) * float(np.clip(np.sqrt(3000.0 / max(glyphs.n, 1)), 0.45, 1.4))
    bad = m.faulty > 0
    sizes[bad] = np.maximum(sizes[bad] * 1.3, 9.0)
    return {"color": color, "line_color": np.where(bad, style.FAULT_LINE, style.OUTLINE).tolist(),
            "marker": marker, "size": sizes, "legend": label}


def _tooltips(fabric: Fabric, glyphs: Glyphs, m: _Members, res: Resolved) -> dict:
    """Text columns for the hover tooltip."""
    n, g = glyphs.n, glyphs.of_device
    names = fabric.device_names()
    units, ids = glyphs.unit.tolist(), glyphs.unit_id.tolist()
    name = [str(names[i]) if u == 0 else f"{UNIT_LABELS[u]} {i}" for u, i in zip(units, ids)]
    kind = [style.KIND_NAMES[DeviceKind(k)] if u == 0 else f"{UNIT_LABELS[u]} ({c} GPUs)" if c else UNIT_LABELS[u]
            for k, u, c in zip(m.kind.tolist(), units, m.gpus.tolist())]
    fault = [("down" if f else "healthy") if u == 0 else (f"{f} of {c} GPUs down" if f else "healthy")
             for f, c, u in zip(m.faulty.tolist(), m.gpus.tolist(), units)]
    rank = np.full(n, -1, dtype=np.int64)
    rank[m.single] = res.rank[m.dev[m.single]]
    tp = []
    for lo, hi, cnt, r, c, idle in zip(*(a.tolist() for a in (*m.tp, rank, m.gpus, m.idle))):
        if lo < 0:
            text = "none" if res.has_groups and c else "-"
        elif lo == hi:
            text = f"{lo} (rank {r})" if r >= 0 else str(lo)
        else:
            text = f"{lo}-{hi} ({cnt} groups)"
        tp.append(text + (f"; {idle} GPUs idle" if res.has_groups and idle and c > 1 else ""))
    L = fabric.links
    load = np.full(n, np.nan)
    np.fmax.at(load, g[L.src], res.util)
    np.fmax.at(load, g[L.dst], res.util)
    groups = {gname: _span(*_min_max(g, fabric.group(gname), n)) for gname in ("node", "rack", "tor", "pod", "domain")}
    return {"name": name, "kind": kind, "fault": fault, "tp": tp, "dp": _span(*m.dp), "load": _percent(load),
            **groups}


def _glyph_table(fabric: Fabric, glyphs: Glyphs, gu: np.ndarray, gv: np.ndarray, layout: Layout,
                 res: Resolved) -> dict:
    m = _members(fabric, glyphs, res)
    x, y = layout.to_xy(gu, gv)
    return {"x": x, "y": y, **_appearance(glyphs, m, res), **_tooltips(fabric, glyphs, m, res),
            "gpus": m.gpus, "faulty": m.faulty, "tp_group": m.tp[0], "device": m.dev}


# --------------------------------------------------------------------- boxes
def _boxes(fabric: Fabric, glyphs: Glyphs, layout: Layout, res: Resolved) -> tuple[dict, np.ndarray, tuple]:
    """Background boxes, the box of every device (-1: none) and the boxes' band centres."""
    n = fabric.n_devices
    none = ({k: [] for k in ("left", "right", "bottom", "top", "fill", "line", "alpha", "legend", "label", "gpus",
                             "faulty")}, np.full(n, -1, dtype=np.int64), (np.zeros(0), np.zeros(0)))
    spec = BOX_GROUPING.get(fabric.hbd.kind)
    if spec is None:
        return none
    gname, healthy_label, faulty_label = spec
    group = fabric.group(gname)
    member = (tier_of(fabric) < 0) & (group >= 0)
    # a box is only worth drawing around several glyphs
    if not member.any() or np.unique(group[member]).size >= np.unique(glyphs.of_device[member]).size:
        return none
    ids, box = np.unique(group[member], return_inverse=True)
    box = box.reshape(-1)
    m = ids.size
    x, y = layout.xy
    pad = 0.5
    left = np.full(m, np.inf)
    right = np.full(m, -np.inf)
    bottom = np.full(m, np.inf)
    top = np.full(m, -np.inf)
    xm, ym = x[member], y[member]
    np.minimum.at(left, box, xm)
    np.maximum.at(right, box, xm)
    np.minimum.at(bottom, box, ym)
    np.maximum.at(top, box, ym)
    gpu = fabric.devices.kind[member] == DeviceKind.GPU
    gpus = np.bincount(box[gpu], minlength=m)
    faulty = np.bincount(box[gpu & res.faulty[member]], minlength=m)
    bad = faulty > 0
    of_device = np.full(n, -1, dtype=np.int64)
    of_device[member] = box
    cu, cv = _centroids(box, layout.u[member], layout.v[member], m)
    data = {
        "left": left - pad, "right": right + pad, "bottom": bottom - pad, "top": top + pad,
        "fill": np.where(bad, style.FAULT_COLOR, style.BOX_FILL).tolist(),
        "line": np.where(bad, style.FAULT_COLOR, style.BOX_LINE).tolist(),
        "alpha": np.where(bad, 0.15, 0.5),
        "legend": np.where(bad, faulty_label, healthy_label).tolist(),
        "label": [f"{healthy_label} {i}" for i in ids.tolist()],
        "gpus": gpus, "faulty": faulty,
    }
    return data, of_device, (cu, cv)


# --------------------------------------------------------------------- entry
def build_scene(fabric: Fabric, overlay: Overlay | None = None, *, color_links_by: str = "type",
                max_glyphs: int = DEFAULT_MAX_GLYPHS, max_edges: int = DEFAULT_MAX_EDGES,
                level: str | None = None) -> Scene:
    """Lay out ``fabric`` with ``overlay`` into the tables of a :class:`Scene`.

    Parameters
    ----------
    fabric : Fabric
    overlay : Overlay, optional
        Faults, TP/DP groups and link loads.
    color_links_by : {'type', 'medium', 'load'}
    max_glyphs, max_edges : int
        Budgets that decide the level of detail (see :mod:`fabric.viewer.levels`).
    level : {'device', 'node', 'rack'}, optional
        Force a level of detail.

    Examples
    --------
    >>> from fabric.model import FabricBuilder, HBDSpec
    >>> b = FabricBuilder("demo", {})
    >>> g = b.add_devices(DeviceKind.GPU, 4, node=[0, 0, 1, 1], rack=0)
    >>> _ = b.add_links(g[:2], g[2:], capacity=1e9, latency=1e-6, medium="copper", layer="hbd")
    >>> scene = build_scene(b.build(HBDSpec("none", 2, 4)), Overlay(faulty_nodes=[1]))
    >>> scene.level, scene.n_glyphs, scene.n_edges, scene.nodes["faulty"].tolist()
    ('device', 4, 2, [0, 0, 1, 1])
    """
    if color_links_by not in style.LINK_COLORINGS:
        raise FabricError("color_links_by", f"{color_links_by!r}; allowed: {', '.join(style.LINK_COLORINGS)}")
    res = resolve(fabric, overlay)
    links = drawable_links(fabric, res)
    if level is None:
        level, reason = choose_level(fabric, max_glyphs, max_edges, links.src, links.dst, links.cls)
    elif level not in LEVELS:
        raise FabricError("level", f"{level!r}; allowed: {', '.join(LEVELS)}")
    else:
        reason = f"one glyph per {level} (chosen)" if level != "device" else "every device drawn (chosen)"
    glyphs = assign(fabric, level)
    layout = compute_layout(fabric)
    gu, gv = _centroids(glyphs.of_device, layout.u, layout.v, glyphs.n)
    nodes = _glyph_table(fabric, glyphs, gu, gv, layout, res)
    boxes, box_of, (bu, bv) = _boxes(fabric, glyphs, layout, res)

    end_a, end_b = glyphs.of_device[links.src], glyphs.of_device[links.dst]
    if fabric.hbd.kind == HBDKind.OCS_CUBE and len(boxes["left"]):
        # circuits join cubes: drawn chip to chip they would hide the grid; draw them cube to cube
        circ = (links.cls == style.CIRCUIT) & (box_of[links.src] >= 0) & (box_of[links.dst] >= 0)
        end_a = np.where(circ, glyphs.n + box_of[links.src], end_a)
        end_b = np.where(circ, glyphs.n + box_of[links.dst], end_b)
    edges = build_edges(links, end_a, end_b, np.concatenate([gu, bu]), np.concatenate([gv, bv]), layout)
    code, styles = link_styles(edges, color_links_by)
    parts, row, start = bundle(edges, code, len(styles))
    return Scene(
        level=level, level_reason=reason, circle=layout.circle, nodes=nodes, boxes=boxes,
        edges=_edge_table(edges, code, row, start, glyphs.n),
        links={"xs": [p[1] for p in parts], "ys": [p[2] for p in parts],
               "color": [styles[p[0]][1] for p in parts], "width": [styles[p[0]][2] for p in parts],
               "alpha": [styles[p[0]][3] for p in parts], "label": [styles[p[0]][0] for p in parts]},
        styles=styles, summary=_summary(fabric, res, nodes, edges, glyphs, reason),
    )


def _edge_table(edges: Edges, code: np.ndarray, row: np.ndarray, start: np.ndarray, n_glyphs: int) -> dict:
    """Per-edge columns for the page; 32-bit, since the page carries one row per edge."""
    i32 = np.int32
    return {
        "a": np.where(edges.a < n_glyphs, edges.a, -1).astype(i32),
        "b": np.where(edges.b < n_glyphs, edges.b, -1).astype(i32),
        "cls": edges.cls.astype(i32), "count": edges.count.astype(i32),
        "capacity": edges.capacity.astype(np.float32), "util": edges.util.astype(np.float32),
        "bytes": edges.bytes.astype(np.float32), "style": code.astype(i32),
        "row": row.astype(i32), "start": start.astype(i32), "npts": edges.npts.astype(i32),
    }


def _summary(fabric: Fabric, res: Resolved, nodes: dict, edges: Edges, glyphs: Glyphs, reason: str) -> list[str]:
    """Lines for the page header."""
    counts = fabric.counts()
    lines = [f"{fabric.architecture}: {counts['gpus']:,} GPUs, {fabric.n_devices:,} devices, "
             f"{counts['links']:,} links; HBD {fabric.hbd.kind}", f"Level of detail: {reason}."]
    if res.has_faults:
        gpu = fabric.devices.kind == DeviceKind.GPU
        lines.append(f"Faults: {int((res.faulty & gpu).sum()):,} GPUs down"
                     + (f" ({res.label})" if res.label else ""))
    if res.has_groups:
        gpu = fabric.devices.kind == DeviceKind.GPU
        n_groups = int(res.tp.max()) + 1 if (res.tp >= 0).any() else 0
        idle = int((gpu & (res.tp < 0) & ~res.faulty).sum())
        lines.append(f"Allocation: {n_groups:,} TP groups; {idle:,} healthy GPUs in no group")
    if res.has_loads and np.isfinite(edges.util).any():
        lines.append(f"Link load: busiest drawn link at {100 * np.nanmax(edges.util):.0f}% utilisation")
    return lines
