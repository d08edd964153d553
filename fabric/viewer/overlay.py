"""What the viewer draws on top of a Fabric: faults, TP/DP groups, link loads.

The viewer takes these as plain data (ids and arrays), so it depends on no
fault sampler, allocation solver or simulator: whoever computes them passes
the result in.  :func:`resolve` checks them against the Fabric and expands
them to one value per device or per physical link.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import numpy as np

from fabric.errors import FabricError
from fabric.model import DeviceKind, Fabric


@dataclass(frozen=True)
class Overlay:
    """Optional inputs drawn over the topology.

    Attributes
    ----------
    faulty_devices : sequence of int, optional
        Device ids that are down.
    faulty_nodes : sequence of int, optional
        Node ids (the ``node`` grouping) that are down; every device of the
        node is marked.
    tp_groups : sequence of sequences of int, optional
        The TP groups formed on healthy GPUs, as GPU device ids in rank order.
    dp_groups : sequence of sequences of int, optional
        DP groups as GPU device ids (shown in tooltips).
    link_utilisation : array_like of float, optional
        Utilisation (busy fraction, may exceed 1 for oversubscribed demand) per
        physical link id, ``len(fabric.links)`` values; NaN where unknown.
    link_bytes : array_like of float, optional
        Bytes carried per physical link id.
    label : str
        One line that says where the overlay came from (e.g. the fault seed).
    """

    faulty_devices: Optional[Sequence[int]] = None
    faulty_nodes: Optional[Sequence[int]] = None
    tp_groups: Optional[Sequence[Sequence[int]]] = None
    dp_groups: Optional[Sequence[Sequence[int]]] = None
    link_utilisation: Optional[Sequence[float]] = None
    link_bytes: Optional[Sequence[float]] = None
    label: str = ""


@dataclass(frozen=True)
class Resolved:
    """An :class:`Overlay` expanded per device and per physical link.

    ``tp``, ``rank`` and ``dp`` are -1 where a device is in no group;
    ``util`` and ``bytes`` are NaN where no load was given.
    """

    faulty: np.ndarray
    tp: np.ndarray
    rank: np.ndarray
    dp: np.ndarray
    util: np.ndarray
    bytes: np.ndarray
    has_faults: bool
    has_groups: bool
    has_loads: bool
    label: str


def _ids(values, field: str, upper: int, what: str) -> np.ndarray:
    arr = np.asarray(list(values) if not isinstance(values, np.ndarray) else values)
    if arr.size == 0:
        return np.zeros(0, dtype=np.int64)
    if arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        raise FabricError(field, f"must be a flat list of integer {what} ids")
    if arr.min() < 0 or arr.max() >= upper:
        raise FabricError(field, f"{what} ids must be in 0..{upper - 1}")
    return arr.astype(np.int64)


def _groups(groups, field: str, fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """Group id and rank per device; a GPU may be in one group only."""
    n = fabric.n_devices
    gid = np.full(n, -1, dtype=np.int64)
    rank = np.full(n, -1, dtype=np.int64)
    is_gpu = fabric.devices.kind == DeviceKind.GPU
    for g, members in enumerate(groups):
        ids = _ids(members, field, n, "GPU device")
        if not is_gpu[ids].all():
            raise FabricError(field, f"group {g} holds devices that are not GPUs")
        if (gid[ids] >= 0).any() or np.unique(ids).size != ids.size:
            raise FabricError(field, f"group {g} repeats a GPU that is already in a group")
        gid[ids] = g
        rank[ids] = np.arange(ids.size)
    return gid, rank


def _per_link(values, field: str, n_links: int) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.shape != (n_links,):
        raise FabricError(field, f"needs one value per physical link ({n_links}), got shape {arr.shape}")
    if np.any(arr[np.isfinite(arr)] < 0) or np.any(np.isinf(arr)):
        raise FabricError(field, "values must be finite and >= 0 (NaN where unknown)")
    return arr


def resolve(fabric: Fabric, overlay: Overlay | None) -> Resolved:
    """Check ``overlay`` against ``fabric`` and expand it per device and per link.

    Raises
    ------
    FabricError
        If an id is out of range, a group holds a non-GPU or repeats a GPU, or
        a load array has the wrong length.
    """
    ov = overlay or Overlay()
    n, m = fabric.n_devices, len(fabric.links)
    faulty = np.zeros(n, dtype=bool)
    if ov.faulty_devices is not None:
        faulty[_ids(ov.faulty_devices, "faulty_devices", n, "device")] = True
    if ov.faulty_nodes is not None:
        node = fabric.group("node")
        upper = int(node.max()) + 1 if n else 0
        nodes = _ids(ov.faulty_nodes, "faulty_nodes", max(upper, 1), "node")
        faulty |= np.isin(node, nodes) & (node >= 0)
    tp, rank = _groups(() if ov.tp_groups is None else ov.tp_groups, "tp_groups", fabric)
    dp, _ = _groups(() if ov.dp_groups is None else ov.dp_groups, "dp_groups", fabric)
    util = (_per_link(ov.link_utilisation, "link_utilisation", m) if ov.link_utilisation is not None
            else np.full(m, np.nan))
    nbytes = _per_link(ov.link_bytes, "link_bytes", m) if ov.link_bytes is not None else np.full(m, np.nan)
    return Resolved(faulty, tp, rank, dp, util, nbytes, has_faults=bool(faulty.any()) or
                    ov.faulty_devices is not None or ov.faulty_nodes is not None,
                    has_groups=ov.tp_groups is not None, has_loads=ov.link_utilisation is not None or
                    ov.link_bytes is not None, label=ov.label)
