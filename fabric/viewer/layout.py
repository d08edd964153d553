"""Device positions, computed directly from the Fabric's groupings with numpy.

No force layout: a 100k-device fabric would take minutes and the picture would
hide the structure anyway.  Each HBD kind has a *compute band* layout that
shows its structure, and the switches sit in layered tiers above it:

* ``switch_domain`` (DGX, NVL, RFabric): racks side by side, nodes stacked in
  each rack, GPUs side by side in a node; on-board switch chips (DGX) to the
  right of their node's GPUs, rack switch chips (NVL) in the middle of the rack
  as in the real NVL rack.
* ``khop_line``: nodes along a line at their position (GPUs of a node side by
  side); a closed ring of nodes is bent into a circle.  Ring hops are drawn as
  arcs below the line (see :mod:`fabric.viewer.edges`).
* ``ocs_cube``: a grid of cubes; each 4x4x4 cube shows its four z-slices as
  2x2 tiles of 4x4 chips.
* ``torus``: the GPU grid itself (3D: z-slices tiled).
* anything else (fat-tree, custom): hosts in a row, grouped by rack.

Switch tiers (NICs not folded into a GPU, switch chips outside racks, HBD OCS,
ToR, aggregation, DCN OCS, core) go one row each above the band, ordered by
the mean position of their neighbours below (one barycentric sweep, the first
step of Sugiyama's layered drawing) and spread evenly over the band's width.

Everything is placed in (u, v): u along the band, v up.  For the circle,
:meth:`Layout.to_xy` bends u around a circle of circumference ``span`` and
takes v as the radius offset (tiers outside, arcs inside).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabric.model import DeviceKind, Fabric, Layer, LinkState
from fabric.viewer.levels import nic_hosts

# Tiers above the compute band, bottom to top.
TIERS = ("nic", "switch_chip", "hbd_ocs", "tor", "agg", "dcn_ocs", "core", "other")


@dataclass(frozen=True)
class Layout:
    """Positions of every device.

    Attributes
    ----------
    u, v : ndarray of float
        Band coordinates per device (u along the band, v up).
    circle : bool
        Bend u into a circle (a closed k-hop ring).
    span : float
        Length of the band along u (the circle's circumference).
    radius : float
        Radius of the band's baseline (v = 0) when ``circle``.
    arcs : bool
        HBD links along the band are drawn as arcs (k-hop line and ring).
    pitch : float
        u distance between neighbouring nodes on the band (arc depth scales with it).
    tier_gap : float
        v distance between tiers (arc depth is capped by it).
    """

    u: np.ndarray
    v: np.ndarray
    circle: bool = False
    span: float = 1.0
    radius: float = 1.0
    arcs: bool = False
    pitch: float = 1.0
    tier_gap: float = 1.0

    def to_xy(self, u: np.ndarray, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Plot coordinates for band coordinates."""
        if not self.circle:
            return np.asarray(u, dtype=float), np.asarray(v, dtype=float)
        theta = 2.0 * np.pi * np.asarray(u) / self.span
        r = self.radius + np.asarray(v)
        # start at 12 o'clock and go clockwise, the way people draw rings
        return r * np.sin(theta), r * np.cos(theta)

    @property
    def xy(self) -> tuple[np.ndarray, np.ndarray]:
        return self.to_xy(self.u, self.v)


def rank_within(group: np.ndarray, order: np.ndarray | None = None) -> np.ndarray:
    """Rank of every item inside its group, by ``order`` (default: position).

    Examples
    --------
    >>> rank_within(np.array([3, 1, 3, 1, 3])).tolist()
    [0, 0, 1, 1, 2]
    """
    n = group.size
    pos = np.arange(n)
    o = np.lexsort((pos if order is None else order, group))
    g = group[o]
    ranks = np.empty(n, dtype=np.int64)
    ranks[o] = pos - np.searchsorted(g, g, side="left")
    return ranks


def dense(values: np.ndarray) -> np.ndarray:
    """Values renumbered 0..m-1 in sorted order."""
    return np.unique(values, return_inverse=True)[1].reshape(-1)


def _fallback_ids(group: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """A grouping where -1 (not applicable) becomes a group of its own per device."""
    g = group[ids]
    return np.where(g >= 0, g, -(ids + 1))


# ---------------------------------------------------------------- band layouts
def _racks(fabric: Fabric, u: np.ndarray, v: np.ndarray) -> None:
    """Racks side by side; nodes stacked; rack switch chips in the rack's middle."""
    kind = fabric.devices.kind
    node_all, rack_all = fabric.group("node"), fabric.group("rack")
    gpus = np.flatnonzero(kind == DeviceKind.GPU)
    node = _fallback_ids(node_all, gpus)
    rack = np.where(rack_all[gpus] >= 0, rack_all[gpus], node)
    col = rank_within(node)
    # row of a node inside its rack: rank among the distinct nodes of the rack
    pairs, inv = np.unique(np.stack([rack, node]), axis=1, return_inverse=True)
    row = rank_within(pairs[0])[inv.reshape(-1)]
    width = int(col.max()) + 1
    chips = np.flatnonzero(kind == DeviceKind.SWITCH_CHIP)
    board = chips[node_all[chips] >= 0]  # on a node's board (DGX): right of its GPUs
    in_rack = chips[(node_all[chips] < 0) & (rack_all[chips] >= 0)]
    chip_rank = rank_within(rack_all[in_rack])
    chip_rows = int(math.ceil((chip_rank.max() + 1) / width)) if in_rack.size else 0
    half = (int(row.max()) + 1) // 2
    row = np.where(row >= half, row + chip_rows, row)
    board_col = width + 0.5 + rank_within(node_all[board])
    full_width = max(width, float(board_col.max(initial=0)) + 1)
    gap = max(1.5, 0.3 * full_width)
    racks_all = np.unique(np.concatenate([rack, rack_all[in_rack]]))
    slot = lambda r: np.searchsorted(racks_all, r) * (full_width + gap)  # noqa: E731
    u[gpus] = slot(rack) + col
    v[gpus] = row
    if board.size:
        gpu_row = np.zeros(int(node_all.max()) + 1)
        gpu_rack = np.zeros(int(node_all.max()) + 1, dtype=np.int64)
        real = node >= 0
        gpu_row[node[real]] = row[real]
        gpu_rack[node[real]] = rack[real]
        u[board] = slot(gpu_rack[node_all[board]]) + board_col
        v[board] = gpu_row[node_all[board]]
    if in_rack.size:
        r = rack_all[in_rack]
        u[in_rack] = slot(r) + chip_rank % width
        v[in_rack] = half + chip_rank // width


def _line(fabric: Fabric, u: np.ndarray, v: np.ndarray) -> float:
    """Nodes along the line at their position, GPUs of a node side by side; returns the node pitch."""
    kind = fabric.devices.kind
    gpus = np.flatnonzero(kind == DeviceKind.GPU)
    node = _fallback_ids(fabric.group("node"), gpus)
    position = fabric.group("position")[gpus]
    pos = np.where(position >= 0, position, dense(node))
    col = rank_within(node)
    pitch = float(col.max()) + 2.0  # one empty slot between nodes
    u[gpus] = pos * pitch + col
    v[gpus] = 0.0
    return pitch


def _tiles(local: np.ndarray, dims: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """2D position of ``local`` index in a grid of ``dims`` (x fastest); 3D z-slices tiled squarely."""
    dims = tuple(dims) + (1,) * (3 - len(dims))
    dx, dy, dz = dims[:3]
    x, y, z = local % dx, (local // dx) % dy, local // (dx * dy)
    per_row = int(math.ceil(math.sqrt(dz)))
    return (z % per_row) * (dx + 0.6) + x, (z // per_row) * (dy + 0.6) + y


def _cubes(fabric: Fabric, u: np.ndarray, v: np.ndarray) -> None:
    """A grid of cubes, each drawn as its z-slices tiled."""
    kind = fabric.devices.kind
    gpus = np.flatnonzero(kind == DeviceKind.GPU)
    cube = dense(_fallback_ids(fabric.group("cube"), gpus))
    dims = fabric.hbd.dims or (4, 4, 4)
    lx, ly = _tiles(rank_within(cube), dims)
    cw, ch = float(lx.max()) + 1.0, float(ly.max()) + 1.0
    cols = int(math.ceil(math.sqrt(int(cube.max()) + 1)))
    u[gpus] = (cube % cols) * (cw + 1.5) + lx
    # cube 0 at the top left, the way a floor plan is read
    v[gpus] = -(cube // cols) * (ch + 1.5) - ly


def _grid(fabric: Fabric, u: np.ndarray, v: np.ndarray) -> None:
    """The torus grid: GPU rank unravelled over the dims (first dimension fastest)."""
    gpus = np.flatnonzero(fabric.devices.kind == DeviceKind.GPU)
    dims = tuple(fabric.hbd.dims) or (gpus.size,)
    if int(np.prod(dims)) != gpus.size:
        dims = (gpus.size,)
    lx, ly = _tiles(np.arange(gpus.size), dims)
    u[gpus], v[gpus] = lx, -ly


def _row(fabric: Fabric, u: np.ndarray, v: np.ndarray) -> None:
    """Hosts in a row, ordered by rack then node, a gap between racks."""
    gpus = np.flatnonzero(fabric.devices.kind == DeviceKind.GPU)
    node = _fallback_ids(fabric.group("node"), gpus)
    rack = fabric.group("rack")[gpus]
    rack = np.where(rack >= 0, rack, node)
    order = np.lexsort((gpus, node, rack))
    rk = dense(rack)[order]
    u[gpus[order]] = np.arange(gpus.size) + 1.5 * rk  # a gap between racks
    v[gpus] = 0.0


def _place_leftover_band(fabric: Fabric, u: np.ndarray, v: np.ndarray) -> None:
    """Switch chips on a node's board that the family layout did not place: above their node."""
    kind = fabric.devices.kind
    node = fabric.group("node")
    todo = np.flatnonzero((kind == DeviceKind.SWITCH_CHIP) & (node >= 0) & np.isnan(u))
    placed = np.flatnonzero((kind == DeviceKind.GPU) & (node >= 0) & ~np.isnan(u))
    if not todo.size or not placed.size:
        return
    m = int(node.max()) + 1
    cnt = np.bincount(node[placed], minlength=m)
    su = np.bincount(node[placed], weights=u[placed], minlength=m)
    top = float(np.nanmax(v)) + 1.0
    ok = cnt[node[todo]] > 0
    u[todo[ok]] = su[node[todo[ok]]] / cnt[node[todo[ok]]] + 0.4 * rank_within(node[todo[ok]])
    v[todo[ok]] = top


# ---------------------------------------------------------------------- tiers
def tier_of(fabric: Fabric) -> np.ndarray:
    """Tier index (into :data:`TIERS`) of every device not in the compute band; -1 for band devices."""
    kind = fabric.devices.kind
    node, rack = fabric.group("node"), fabric.group("rack")
    tier = np.full(kind.size, TIERS.index("other"), dtype=np.int64)
    tier[kind == DeviceKind.GPU] = -1
    chip = kind == DeviceKind.SWITCH_CHIP
    tier[chip & ((node >= 0) | (rack >= 0))] = -1
    tier[chip & (node < 0) & (rack < 0)] = TIERS.index("switch_chip")
    tier[kind == DeviceKind.NIC] = TIERS.index("nic")
    tier[kind == DeviceKind.TOR] = TIERS.index("tor")
    tier[kind == DeviceKind.AGG] = TIERS.index("agg")
    tier[kind == DeviceKind.CORE] = TIERS.index("core")
    ocs = kind == DeviceKind.OCS
    # an OCS belongs to the layer of the fibres plugged into it
    L = fabric.links
    ports = L.state == LinkState.OCS_PORT
    hbd_ocs = np.zeros(kind.size, dtype=bool)
    for end in (L.src, L.dst):
        m = ports & (L.layer == Layer.HBD) & ocs[end]
        hbd_ocs[end[m]] = True
    tier[ocs] = np.where(hbd_ocs[ocs], TIERS.index("hbd_ocs"), TIERS.index("dcn_ocs"))
    return tier


def _barycentres(fabric: Fabric, members: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Mean u of the placed neighbours of ``members`` (NaN where none is placed)."""
    L = fabric.links
    n = fabric.n_devices
    is_member = np.zeros(n, dtype=bool)
    is_member[members] = True
    placed = ~np.isnan(u)
    total = np.zeros(n)
    count = np.zeros(n)
    for a, b in ((L.src, L.dst), (L.dst, L.src)):
        m = is_member[a] & placed[b]
        total += np.bincount(a[m], weights=u[b[m]], minlength=n)
        count += np.bincount(a[m], minlength=n)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (total / count)[members]


def _spread(bary: np.ndarray, ids: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Evenly spaced u over [lo, hi] in barycentre order (unplaceable ones last, by id)."""
    order = np.lexsort((ids, np.where(np.isnan(bary), np.inf, bary)))
    out = np.empty(ids.size)
    out[order] = lo + (np.arange(ids.size) + 0.5) * (hi - lo) / ids.size
    return out


# ---------------------------------------------------------------------- entry
def compute_layout(fabric: Fabric) -> Layout:
    """Positions of every device of ``fabric`` (see the module docstring)."""
    n = fabric.n_devices
    u = np.full(n, np.nan)
    v = np.full(n, np.nan)
    hbd = fabric.hbd.kind
    pitch = 1.0
    arcs = False
    if hbd == "switch_domain":
        _racks(fabric, u, v)
    elif hbd == "khop_line":
        pitch = _line(fabric, u, v)
        arcs = True
    elif hbd == "ocs_cube":
        _cubes(fabric, u, v)
    elif hbd == "torus":
        _grid(fabric, u, v)
    else:
        _row(fabric, u, v)
    _place_leftover_band(fabric, u, v)
    # a NIC folded into its GPU sits on it, so switches above see the GPU's position
    host = nic_hosts(fabric)
    folded = np.flatnonzero(host >= 0)
    u[folded], v[folded] = u[host[folded]], v[host[folded]]

    band = ~np.isnan(u)
    band[folded] = False
    if band.any():
        lo, hi = float(u[band].min()), float(u[band].max())
        v_lo, v_hi = float(v[band].min()), float(v[band].max())
    else:
        lo, hi, v_lo, v_hi = 0.0, 1.0, 0.0, 0.0
    if hi - lo < 1.0:
        lo, hi = lo - 0.5, hi + 0.5
    circle = hbd == "khop_line" and fabric.hbd.closed
    span = (hi - lo) + pitch  # the closing hop gets the same room as any other
    radius = span / (2 * np.pi)
    # tiers take about as much height as the band, and at least room for arcs
    tier_gap = max(2.0 * pitch if arcs else 2.0, 0.35 * (v_hi - v_lo), 0.12 * radius if circle else 0.0)

    tier = tier_of(fabric)
    level = v_hi
    for t in range(len(TIERS)):
        members = np.flatnonzero((tier == t) & np.isnan(u))
        if not members.size:
            continue
        level += tier_gap
        u[members] = _spread(_barycentres(fabric, members, u), members, lo, hi)
        v[members] = level
    # anything left (nothing, for built fabrics): one more row on top
    rest = np.isnan(u)
    u[rest], v[rest] = lo, level + tier_gap
    return Layout(u, v, circle=circle, span=span, radius=radius, arcs=arcs, pitch=pitch, tier_gap=tier_gap)
