"""Links as drawn: classified, mapped to glyphs, merged, and given a shape.

What is drawn is the graph traffic can use plus the dark optical paths:

* static links (HBD or DCN layer);
* candidate optical paths: lit ones (a ring hop; a *skip hop* when it jumps
  over a node, i.e. bypasses a faulty or unused node) and dark ones;
* OCS circuits, as one edge between the devices they join (the two fibres into
  the OCS are not drawn: they would all converge on a few OCS glyphs and hide
  which devices the OCS actually joins).

Links whose two ends share a glyph vanish; links between the same two glyphs
of the same class and medium merge into one edge that counts them, sums their
capacity and bytes and keeps the highest utilisation (the hottest one is what
a user looks for).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.model import Fabric, Layer, LinkState, Medium
from fabric.viewer import style
from fabric.viewer.layout import Layout
from fabric.viewer.overlay import Resolved

ARC_POINTS = 9


@dataclass(frozen=True)
class LinkSet:
    """Drawable links at device level (one row per physical link or circuit)."""

    src: np.ndarray
    dst: np.ndarray
    cls: np.ndarray
    medium: np.ndarray
    capacity: np.ndarray
    util: np.ndarray
    bytes: np.ndarray


@dataclass(frozen=True)
class Edges:
    """Merged edges between anchors (glyphs, then boxes), with polylines.

    ``a`` and ``b`` index anchors: ``< n_glyphs`` a glyph, else a box.
    Edge ``e`` is the polyline ``px[offset[e]:offset[e] + npts[e]]`` (same for ``py``).
    """

    a: np.ndarray
    b: np.ndarray
    cls: np.ndarray
    medium: np.ndarray
    count: np.ndarray
    capacity: np.ndarray
    util: np.ndarray
    bytes: np.ndarray
    offset: np.ndarray
    npts: np.ndarray
    px: np.ndarray
    py: np.ndarray

    def __len__(self) -> int:
        return int(self.a.size)


def _hop_gap(fabric: Fabric, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Distance along the k-hop line between the nodes of two devices (0 off the line)."""
    pos = fabric.group("position")
    pa, pb = pos[src], pos[dst]
    gap = np.abs(pa - pb)
    if fabric.hbd.closed and pos.max(initial=-1) >= 0:
        n = int(pos.max()) + 1
        gap = np.minimum(gap, n - gap)
    return np.where((pa >= 0) & (pb >= 0), gap, 0)


def drawable_links(fabric: Fabric, res: Resolved) -> LinkSet:
    """Static links, candidate paths (lit, skip or dark) and OCS circuits, with their loads."""
    L = fabric.links
    cfg = fabric.configuration
    static = L.state == LinkState.STATIC
    lit = np.zeros(len(L), dtype=bool)
    lit[np.asarray(cfg.active_candidates, dtype=np.int64)] = True
    phys = np.flatnonzero(static | (L.state == LinkState.CANDIDATE))
    cls = np.where(static[phys], np.where(L.layer[phys] == Layer.HBD, style.HBD, style.DCN),
                   np.where(lit[phys], style.LIT, style.DARK))
    skip = (cls == style.LIT) & (_hop_gap(fabric, L.src[phys], L.dst[phys]) > 1)
    cls[skip] = style.SKIP

    active = fabric.active_links()
    is_circuit = active.origin < 0
    ca, cb = active.circuit_links[:, 0], active.circuit_links[:, 1]
    # the two fibres of a circuit carry the same traffic: report the busier one
    return LinkSet(
        src=np.concatenate([L.src[phys], active.src[is_circuit]]),
        dst=np.concatenate([L.dst[phys], active.dst[is_circuit]]),
        cls=np.concatenate([cls, np.full(ca.size, style.CIRCUIT)]).astype(np.int64),
        medium=np.concatenate([L.medium[phys], np.full(ca.size, int(Medium.FIBER))]).astype(np.int64),
        capacity=np.concatenate([L.capacity[phys], active.capacity[is_circuit]]),
        util=np.concatenate([res.util[phys], np.fmax(res.util[ca], res.util[cb])]),
        bytes=np.concatenate([res.bytes[phys], np.fmax(res.bytes[ca], res.bytes[cb])]),
    )


def merge(links: LinkSet, end_a: np.ndarray, end_b: np.ndarray, n_anchors: int):
    """Merge links by (anchor pair, class, medium); drop links inside one anchor.

    Returns
    -------
    a, b, cls, medium, count, capacity, util, bytes : ndarrays, one row per edge
    """
    keep = end_a != end_b
    lo = np.minimum(end_a, end_b)[keep]
    hi = np.maximum(end_a, end_b)[keep]
    cls, med = links.cls[keep], links.medium[keep]
    key = ((lo * n_anchors + hi) * len(style.LINK_CLASSES) + cls) * len(Medium) + med
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    inv = inv.reshape(-1)
    m = first.size
    util = np.full(m, np.nan)
    np.fmax.at(util, inv, links.util[keep])
    raw = links.bytes[keep]
    known = ~np.isnan(raw)
    # float even with no link at all (numpy's bincount of an empty array is integer)
    nbytes = np.bincount(inv, weights=np.where(known, raw, 0.0), minlength=m).astype(float)
    nbytes[np.bincount(inv, weights=known, minlength=m) == 0] = np.nan
    return (lo[first], hi[first], cls[first], med[first], np.bincount(inv, minlength=m),
            np.bincount(inv, weights=links.capacity[keep], minlength=m), util, nbytes)


def shape(a: np.ndarray, b: np.ndarray, cls: np.ndarray, au: np.ndarray, av: np.ndarray,
          layout: Layout) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Polylines: straight, or arcs for HBD links along a k-hop line/ring.

    Ring hops (candidate paths) bow below the line, deeper for longer hops, so
    a hop that skips a node is visibly longer and lower than its neighbours;
    links inside a node bow above.  Returns ``offset, npts, px, py``.

    Parameters
    ----------
    a, b : ndarray of int
        Anchor ids of the edge ends.
    cls : ndarray of int
        Link class per edge.
    au, av : ndarray of float
        Band coordinates per anchor.
    layout : Layout
    """
    ua, ub, va, vb = au[a], au[b], av[a], av[b]
    on_line = (np.abs(va) < 1e-9) & (np.abs(vb) < 1e-9)
    hop = np.isin(cls, (style.LIT, style.SKIP, style.DARK))
    arc = layout.arcs & on_line & (hop | (cls == style.HBD))
    if layout.circle:
        # go the short way round the ring
        du = ub - ua
        ub = np.where(np.abs(du) > layout.span / 2, ub - np.sign(du) * layout.span, ub)
    depth = layout.tier_gap * np.minimum(0.35 * np.abs(ub - ua) / layout.pitch, 0.9)
    if layout.circle:
        depth = np.minimum(depth, 0.45 * layout.radius)
    depth = np.where(hop, -depth, 0.6 * depth)
    npts = np.where(arc, ARC_POINTS, 2)
    offset = np.concatenate([[0], np.cumsum(npts)[:-1]]).astype(np.int64)
    total = int(npts.sum())
    pu = np.empty(total)
    pv = np.empty(total)
    st = np.flatnonzero(~arc)
    pu[offset[st]], pv[offset[st]] = ua[st], va[st]
    pu[offset[st] + 1], pv[offset[st] + 1] = ub[st], vb[st]
    ar = np.flatnonzero(arc)
    if ar.size:
        t = np.linspace(0.0, 1.0, ARC_POINTS)[None, :]
        idx = offset[ar][:, None] + np.arange(ARC_POINTS)[None, :]
        pu[idx] = ua[ar, None] + (ub[ar] - ua[ar])[:, None] * t
        # quadratic Bezier whose control point sits at twice the depth: peak = depth at t = 1/2
        pv[idx] = va[ar, None] + 4.0 * depth[ar, None] * t * (1.0 - t)
    px, py = layout.to_xy(pu, pv)
    return offset, npts.astype(np.int64), px, py


def build_edges(links: LinkSet, end_a: np.ndarray, end_b: np.ndarray, au: np.ndarray, av: np.ndarray,
                layout: Layout) -> Edges:
    """Merge ``links`` between anchors ``end_a``/``end_b`` and shape them."""
    a, b, cls, med, count, cap, util, nbytes = merge(links, end_a, end_b, au.size)
    offset, npts, px, py = shape(a, b, cls, au, av, layout)
    return Edges(a, b, cls, med, count, cap, util, nbytes, offset, npts, px, py)


# ---------------------------------------------------------------- link styles
def link_styles(edges: Edges, color_by: str) -> tuple[np.ndarray, list[tuple[str, str, float, float]]]:
    """Style index per edge and the styles ``(label, colour, width, alpha)`` in drawing order.

    Drawing order puts what matters on top: dark paths first, hot or skipping links last.
    """
    cls = edges.cls
    dark = cls == style.DARK
    if color_by == "type":
        order = (style.DARK, style.DCN, style.HBD, style.CIRCUIT, style.LIT, style.SKIP)
        styles = [(style.LINK_CLASSES[c], *style.CLASS_STYLE[c]) for c in order]
        code = np.empty(cls.size, dtype=np.int64)
        for i, c in enumerate(order):
            code[cls == c] = i
        return code, styles
    dark_style = (style.LINK_CLASSES[style.DARK], *style.CLASS_STYLE[style.DARK])
    if color_by == "medium":
        styles = [dark_style] + [(label, colour, 1.5, 0.5) for label, colour in style.MEDIUM_STYLE.values()]
        code = np.where(dark, 0, 1 + edges.medium)
        return code, styles
    if color_by == "load":
        bins = [f"load {int(lo * 100)}-{int(hi * 100)}%" for lo, hi in zip(style.LOAD_EDGES, style.LOAD_EDGES[1:])]
        bins.append(f"load >= {int(style.LOAD_EDGES[-1] * 100)}%")
        styles = [dark_style, style.NO_LOAD] + [
            (label, colour, width, 0.9) for label, colour, width in zip(bins, style.LOAD_COLORS, style.LOAD_WIDTHS)]
        util = edges.util
        level = np.searchsorted(style.LOAD_EDGES, np.nan_to_num(util, nan=0.0), side="right") - 1
        code = np.where(dark, 0, np.where(np.isnan(util), 1, 2 + np.clip(level, 0, len(bins) - 1)))
        return code, styles
    raise ValueError(f"color_by {color_by!r} not in {style.LINK_COLORINGS}")


def bundle(edges: Edges, code: np.ndarray, n_styles: int):
    """One NaN-separated polyline per style (WebGL draws each in one call).

    Returns
    -------
    rows : list of (style index, xs, ys)
        For every style that has edges, in style order; coordinates as float32
        (plenty for a plot, half the page size of float64).
    row, start : ndarray of int
        Per edge: its row in ``rows`` and where its points start in that row's
        arrays (it has ``edges.npts`` of them), so the page can cut one edge
        back out of its bundle.
    """
    rows = []
    row = np.zeros(len(edges), dtype=np.int64)
    start = np.zeros(len(edges), dtype=np.int64)
    for s in range(n_styles):
        idx = np.flatnonzero(code == s)
        if not idx.size:
            continue
        lengths = edges.npts[idx] + 1  # one NaN after every polyline
        total = int(lengths.sum())
        starts = np.cumsum(lengths) - lengths
        rel = np.arange(total) - np.repeat(starts, lengths)
        src = np.repeat(edges.offset[idx], lengths) + rel
        gap = rel == np.repeat(edges.npts[idx], lengths)
        src = np.where(gap, 0, src)
        xs = np.where(gap, np.nan, edges.px[src]).astype(np.float32)
        ys = np.where(gap, np.nan, edges.py[src]).astype(np.float32)
        row[idx], start[idx] = len(rows), starts
        rows.append((s, xs[:-1], ys[:-1]))
    return rows, row, start
