"""Level of detail: which devices share one glyph.

Drawing every device stops being readable (and fast) long before it stops
being possible, so the viewer draws one glyph per

* ``device``: every GPU, switch chip, switch and OCS (a NIC is folded into the
  GPU it serves, since it sits on the same PCIe board and adds no structure);
* ``node``: one glyph per server / compute tray / host (its GPUs, NICs and
  on-board switch chips); switches, rack-level switch chips and OCS stay
  individual;
* ``rack``: one glyph per rack; switch chips outside racks (the NVL-576 second
  tier) collapse into one glyph per HBD domain; packet switches and OCS stay.

:func:`choose_level` takes the finest level whose glyph count fits the budget
(``DEFAULT_MAX_GLYPHS``) and whose merged links fit the edge budget
(``DEFAULT_MAX_EDGES``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fabric.errors import FabricError
from fabric.model import DeviceKind, Fabric

LEVELS = ("device", "node", "rack")
DEFAULT_MAX_GLYPHS = 12_000
"""Glyph budget: a finer level with more glyphs is not drawn (see the benchmark for the figures)."""
DEFAULT_MAX_EDGES = 60_000
"""Edge budget: links cost more to draw than devices, and 60k lines are already a solid mesh on screen."""

# glyph key = code * stride + id
_DEVICE, _NODE, _RACK, _DOMAIN = range(4)
COMPUTE_KINDS = (DeviceKind.GPU, DeviceKind.NIC, DeviceKind.SWITCH_CHIP)


@dataclass(frozen=True)
class Glyphs:
    """Which glyph each device is drawn as.

    Attributes
    ----------
    level : str
        One of :data:`LEVELS`.
    of_device : ndarray of int
        Glyph id per device.
    unit : ndarray of int
        Per glyph: 0 a single device, 1 a node, 2 a rack, 3 the switch chips of a domain.
    unit_id : ndarray of int
        Per glyph: the device id, node id, rack id or domain id it stands for.
    """

    level: str
    of_device: np.ndarray
    unit: np.ndarray
    unit_id: np.ndarray

    @property
    def n(self) -> int:
        return int(self.unit.size)


def nic_hosts(fabric: Fabric) -> np.ndarray:
    """Per device, the GPU a NIC is folded into (the lowest-id GPU it links to), else -1."""
    kind = fabric.devices.kind
    L = fabric.links
    n = fabric.n_devices
    host = np.full(n, n, dtype=np.int64)
    for a, b in ((L.src, L.dst), (L.dst, L.src)):
        m = (kind[a] == DeviceKind.NIC) & (kind[b] == DeviceKind.GPU)
        np.minimum.at(host, a[m], b[m])
    host[host == n] = -1
    return host


def _stride(fabric: Fabric) -> int:
    """A multiplier that keeps (unit code, id) keys unique."""
    top = max(int(fabric.group(g).max(initial=0)) for g in ("node", "rack", "domain"))
    return max(fabric.n_devices, top) + 1


def _keys(fabric: Fabric, level: str, host: np.ndarray) -> np.ndarray:
    """Glyph key per device: ``unit code * stride + id``; a folded NIC takes its GPU's key."""
    if level not in LEVELS:
        raise FabricError("level", f"{level!r} is not one of {', '.join(LEVELS)}")
    kind = fabric.devices.kind
    node, rack, domain = fabric.group("node"), fabric.group("rack"), fabric.group("domain")
    stride = _stride(fabric)
    key = np.arange(fabric.n_devices, dtype=np.int64) + _DEVICE * stride
    compute = np.isin(kind, COMPUTE_KINDS)
    if level in ("node", "rack"):
        key = np.where(compute & (node >= 0), _NODE * stride + node, key)
    if level == "rack":
        tier_chip = (kind == DeviceKind.SWITCH_CHIP) & (rack < 0) & (domain >= 0)
        key = np.where(tier_chip, _DOMAIN * stride + domain, key)
        key = np.where(compute & (rack >= 0), _RACK * stride + rack, key)
    return np.where(host >= 0, key[np.maximum(host, 0)], key)


def assign(fabric: Fabric, level: str) -> Glyphs:
    """Glyphs of ``fabric`` at ``level``."""
    host = nic_hosts(fabric)
    key = _keys(fabric, level, host)
    uniq, inverse = np.unique(key, return_inverse=True)
    stride = _stride(fabric)
    return Glyphs(level, inverse.astype(np.int64), uniq // stride, uniq % stride)


def count_level(fabric: Fabric, level: str, src: np.ndarray | None = None, dst: np.ndarray | None = None,
                cls: np.ndarray | None = None, host: np.ndarray | None = None) -> tuple[int, int]:
    """(glyphs, drawn edges) at ``level``; edges are counted when the drawable links are given.

    An edge is a distinct (glyph pair, link class); links inside one glyph are not drawn.
    """
    host = nic_hosts(fabric) if host is None else host
    uniq, glyph = np.unique(_keys(fabric, level, host), return_inverse=True)
    glyph = glyph.reshape(-1)
    if src is None:
        return int(uniq.size), 0
    ga, gb = glyph[src], glyph[dst]
    keep = ga != gb
    pair = (np.minimum(ga, gb) * uniq.size + np.maximum(ga, gb))[keep]
    return int(uniq.size), int(np.unique(pair * 8 + cls[keep]).size)


def counts(fabric: Fabric, src: np.ndarray | None = None, dst: np.ndarray | None = None,
           cls: np.ndarray | None = None) -> dict[str, tuple[int, int]]:
    """:func:`count_level` at every level."""
    host = nic_hosts(fabric)
    return {lvl: count_level(fabric, lvl, src, dst, cls, host) for lvl in LEVELS}


def choose_level(fabric: Fabric, max_glyphs: int = DEFAULT_MAX_GLYPHS, max_edges: int = DEFAULT_MAX_EDGES,
                 src: np.ndarray | None = None, dst: np.ndarray | None = None,
                 cls: np.ndarray | None = None) -> tuple[str, str]:
    """The finest level within the glyph and edge budgets (the coarsest if none is), and why.

    Parameters
    ----------
    fabric : Fabric
    max_glyphs, max_edges : int
        Budgets.
    src, dst, cls : ndarray of int, optional
        Drawable links (device ends and link class) to count edges; without
        them only glyphs are counted.

    Returns
    -------
    level : str
    reason : str
        One line for the page header.
    """
    if max_glyphs < 1 or max_edges < 1:
        raise FabricError("max_glyphs", f"budgets must be >= 1 (got {max_glyphs} glyphs, {max_edges} edges)")
    host = nic_hosts(fabric)
    found = {}
    for lvl in LEVELS:  # finest first; coarser levels are only counted when needed
        found[lvl] = count_level(fabric, lvl, src, dst, cls, host)
        if found[lvl][0] <= max_glyphs and found[lvl][1] <= max_edges:
            break
    glyphs, edges = found[lvl]
    if lvl == "device":
        return lvl, f"every device drawn ({glyphs:,} glyphs, {edges:,} edges; NICs folded into their GPU)"
    dev_glyphs, dev_edges = found["device"]
    return lvl, (f"one glyph per {lvl} ({glyphs:,} glyphs, {edges:,} edges): every device would take "
                 f"{dev_glyphs:,} glyphs and {dev_edges:,} edges, over the budget of {max_glyphs:,} glyphs / "
                 f"{max_edges:,} edges")
