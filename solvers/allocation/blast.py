"""Blast radius: GPUs made unusable by one failure of one component, at a given TP size.

For every position of a component type (every GPU, node, rack, tray, ToR,
OCS, link, transceiver; :func:`fabric.faults.universe`), the single failure
is mapped to its effect (:mod:`~solvers.allocation.effects`) and counted with
the vectorised path, one row per position, against the fault-free baseline;
:func:`fabric.metrics.blast_summary` gives min / mean / max over positions
and the split into the component's own GPUs and stranded healthy GPUs.
Components whose failure only lowers bandwidth report 0 unusable GPUs and
the bandwidth left (``bandwidth_left``: the smallest fraction of HBD
bandwidth a touched GPU keeps) in ``note``.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from fabric.faults import COMPONENTS, FaultSamples
from fabric.metrics import blast_summary
from fabric.model import DeviceKind, HBDKind, Layer
from solvers.allocation.base import FaultBatch, Policy
from solvers.allocation.effects import EffectMapper, identity_rows, nodes_of_racks

NOTES = {
    "gpu": "a failed GPU drains its node: its node mates are stranded",
    "node": "the node and its GPUs fail",
    "rack": "every node of the rack fails",
    "tor": "GPUs whose NIC is under the ToR lose scale-out and cannot join a TP group",
}


def _frac(x: float) -> str:
    f = Fraction(x).limit_denominator(200)
    return f"{f.numerator}/{f.denominator}"


def _switch_bandwidth(pol: Policy, mapper: EffectMapper) -> tuple[float, str]:
    """Smallest share of HBD bandwidth a GPU keeps when one tray fails, and a note."""
    fab = pol.fabric
    u = mapper.universe("switch")
    if u.size == 0:
        return 1.0, "no HBD switch chips"
    L = fab.links
    kind = fab.devices.kind
    hbd = L.layer == Layer.HBD
    chips = u.members.ravel()
    tray_of_chip = np.full(fab.n_devices, -1, dtype=np.int64)
    tray_of_chip[chips] = np.repeat(np.arange(u.size), u.members.shape[1])
    gpu_end = np.where(kind[L.src] == DeviceKind.GPU, L.src, L.dst)
    chip_end = np.where(kind[L.src] == DeviceKind.SWITCH_CHIP, L.src, L.dst)
    gc = hbd & (kind[gpu_end] == DeviceKind.GPU) & (kind[chip_end] == DeviceKind.SWITCH_CHIP)
    if not gc.any():
        return 1.0, "GPUs have no direct switch links"
    total = np.bincount(gpu_end[gc], weights=L.capacity[gc], minlength=fab.n_devices)
    key = gpu_end[gc] * np.int64(u.size) + tray_of_chip[chip_end[gc]]
    uk, inv = np.unique(key, return_inverse=True)
    lost = np.bincount(inv, weights=L.capacity[gc])
    left = 1.0 - lost / total[uk // u.size]
    worst = float(left.min())
    trays_touching = np.unique(uk % u.size).size
    note = (f"a tray ({u.note}) takes {_frac(1 - worst)} of the HBD bandwidth of each GPU linked to it; "
            f"those GPUs stay usable at {_frac(worst)} of it")
    if trays_touching < u.size:
        note += f"; {u.size - trays_touching} second-tier trays only thin the switch-to-switch capacity"
    return worst, note


def _note(comp: str, pol: Policy, mapper: EffectMapper) -> tuple[str, float | None]:
    kind = pol.hbd.kind
    if comp == "switch":
        worst, note = _switch_bandwidth(pol, mapper)
        return note, worst
    if comp == "ocs":
        if kind == HBDKind.OCS_CUBE:
            return ("an OCS carries 1 of the 16 optical links of each cube face in one dimension: the rings "
                    "through those links open (lower bandwidth), every cube stays usable"), None
        return "an OCS of the DCN: scale-out capacity drops, HBD unaffected", None
    if comp == "link":
        if kind in (HBDKind.SWITCH_DOMAIN, HBDKind.NONE):
            return "a GPU-switch link: that GPU stays usable with one link fewer", None
        if kind == HBDKind.OCS_CUBE:
            return "an ICI link or face fibre breaks its cube's torus: the cube cannot join a slice", None
        if kind == HBDKind.KHOP_LINE:
            lanes = mapper.lanes
            if lanes >= 2:
                return f"one optical path of one of {lanes} lanes: bandwidth only", (lanes - 1) / lanes
            return ("a dead optical path i->i+d is a ring boundary where a ring would use it (contiguous "
                    "policy; an upper bound: interleaved rings can sometimes route around it); intra-node "
                    "links: bandwidth only"), None
        if kind == HBDKind.TORUS:
            return ("a first-dimension link takes its whole line; a second/third-dimension link splits "
                    "multi-line groups"), None
    if comp == "transceiver":
        if kind == HBDKind.KHOP_LINE:
            lanes = mapper.lanes
            if lanes >= 2:
                return f"one of {lanes} lanes of one GPU: that GPU's ring bandwidth drops to " \
                       f"{lanes - 1}/{lanes}", (lanes - 1) / lanes
            return ("the only lane: the node can only end (forward lost) or start (backward lost) a ring, a "
                    "ring boundary next to it; its own GPUs stay usable"), None
        return "a transceiver loss is its fibre's loss (see link)", None
    return NOTES.get(comp, ""), None


def blast_radius(pol: Policy, tp: int, components=COMPONENTS) -> dict[str, dict]:
    """Blast radius per component type at TP size ``tp``.

    Parameters
    ----------
    pol : Policy
        From :func:`solvers.allocation.policy_for`.
    tp : int
    components : sequence of str
        Types to evaluate; types with no position in the Fabric are left out.

    Returns
    -------
    dict
        component -> ``{min, mean, max, own, stranded, positions, note}``
        (GPUs; see :func:`fabric.metrics.blast_summary`), plus
        ``bandwidth_left`` where a failure only lowers bandwidth.
    """
    tp = pol.check_tp(tp)
    mapper = EffectMapper(pol)
    nodes = pol.nodes
    empty = FaultBatch.from_nodes(nodes, FaultSamples.empty(1, nodes.n_nodes))
    base = int(pol.count(tp, empty)[0])
    out: dict[str, dict] = {}
    for comp in components:
        u = mapper.universe(comp)
        if u.size == 0:
            continue
        if comp == "gpu":
            own = np.ones(u.size)
        elif comp == "node":
            own = nodes.node_size.astype(float)
        elif comp == "rack":
            indptr, members = nodes_of_racks(pol.fabric, nodes, u.ids)
            own = np.add.reduceat(np.append(nodes.node_size[members], 0), indptr[:-1]).astype(float) \
                if members.size else np.zeros(u.size)
            own[np.diff(indptr) == 0] = 0
        else:
            own = np.zeros(u.size)
        if mapper.bandwidth_only(comp):
            unusable = np.zeros(u.size)
        else:
            batch = mapper.batch({comp: identity_rows(u.size)})
            unusable = base - pol.count(tp, batch)
        row = blast_summary(unusable, own)
        note, bw = _note(comp, pol, mapper)
        if bw is not None:
            row["bandwidth_left"] = bw
        row["note"] = note
        out[comp] = row
    return out
