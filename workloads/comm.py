"""Collective times for the step-time model: one small interface, two backends, one cache.

The step model asks one question, :meth:`CommCache.time`:

    how long do all these groups take when each runs collective ``kind`` on a
    buffer of ``nbytes`` at the same time, on this Fabric?

``groups`` is an int array of shape (n_groups, group_size) of GPU device ids
in rank order (all TP groups of the job, all DP groups, ...): the groups run
concurrently and contend for shared links; the answer is the completion time
of the slowest.  ``nbytes`` follows nccl-tests: the all-reduce buffer, the
full (unsharded) reduce-scatter input / all-gather output, the bytes each
rank sends in an all-to-all, the message of a send/recv (groups are
(src, dst) pairs).

Backends
--------
``sim``
    The flow-level simulator (:mod:`fabric.sim`) on the Fabric's real graph,
    with max-min fair sharing among every flow of every group.
``analytic``
    Fallback only, used when the simulator cannot be imported: alpha-beta
    closed forms (Thakur, Rabenseifner & Gropp 2005; FIGURES) on the
    bottleneck bandwidth of each group read from the Fabric's links (HBD
    egress of a GPU, its NIC link, the k-hop optical lane) times NCCL's path
    efficiency, with NCCL's channels and step latencies on rings across HBD
    components (the simulator's Simple-protocol model in closed form).

Both time each schedule of :func:`plans` (a group with several ranks in each
of several nodes or domains runs a flat ring or a hierarchical plan) and the
faster wins at each size.

Cache
-----
For a fixed set of flows a flow-level completion time is affine in the
buffer size (fixed latencies plus bytes over max-min rates that do not depend
on the size), so :class:`CommCache` times each (fabric, backend, kind, group
layout) at two sizes and interpolates every other size exactly; the fit is
shared process-wide, keyed by a digest of the Fabric and of the groups array.
The simulator runs collectives as NCCL does; each NCCL protocol (LL, LL128,
Simple) and each schedule is affine on its own, so the cache fits each and
answers with the fastest at the size asked, which is how NCCL's tuner picks
the protocol and the algorithm.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Protocol

import numpy as np

from fabric.checks import MAX_SECONDS, is_number
from fabric.errors import FabricError
from fabric.idcache import recall, remember
from fabric.model import DeviceKind, Fabric, Layer, LinkState

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all", "send_recv")

# NCCL base latency of one collective (Simple protocol, ring or tree): FIGURES, NCCL tuning.cc.
NCCL_BASE_LATENCY = 8.4e-6

# The two buffer sizes (bytes) whose simulated times fix the affine fit; far enough apart that
# the fit is well-conditioned, both of the order a training step moves.
FIT_SIZES = (4.0 * 2**20, 256.0 * 2**20)


class CommBackend(Protocol):
    """A timing function: ``backend(fabric, kind, groups, nbytes) -> seconds``."""

    name: str

    def __call__(self, fabric: Fabric, kind: str, groups: np.ndarray, nbytes: float) -> float: ...


def _check(kind: str, groups: np.ndarray) -> np.ndarray:
    if kind not in KINDS:
        raise FabricError("collective", f"{kind!r} not allowed; use one of {', '.join(KINDS)}")
    g = np.asarray(groups, dtype=np.int64)
    if g.ndim != 2:
        raise FabricError("groups", f"must be a 2-D array (n_groups, group_size), got shape {g.shape}")
    if kind == "send_recv" and g.shape[1] != 2:
        raise FabricError("groups", "send_recv groups are (src, dst) pairs")
    return g


# --------------------------------------------------------------------------- analytic fallback
@dataclass
class _FabricView:
    """Per-GPU bandwidths and groupings read once from a Fabric's active links."""

    node: np.ndarray
    domain: np.ndarray
    tor: np.ndarray
    hbd_egress: np.ndarray      # bytes/s per direction: all active HBD links of the GPU
    intra_node: np.ndarray      # bytes/s per direction towards the rest of its node
    optical_lane: np.ndarray    # bytes/s per direction of one lit inter-node HBD link (k-hop)
    nic: np.ndarray             # bytes/s per direction of its scale-out path (min of PCIe and NIC-ToR)
    hbd_latency: float
    dcn_latency: float          # seconds, one GPU-to-GPU step through the DCN
    switch_domain: bool
    dcn_oversubscription: float


def _view(fabric: Fabric) -> _FabricView:
    kind = fabric.devices.kind
    n = fabric.n_devices
    node, domain, tor = fabric.group("node"), fabric.group("domain"), fabric.group("tor")
    A = fabric.active_links()
    is_gpu = kind == DeviceKind.GPU
    hbd = A.layer == Layer.HBD
    hbd_egress = np.zeros(n)
    np.add.at(hbd_egress, A.src[hbd], A.capacity[hbd])
    np.add.at(hbd_egress, A.dst[hbd], A.capacity[hbd])
    # intra-node: HBD links to GPUs of the same node, or to switch chips (a switched node or domain)
    same_node = hbd & (node[A.src] == node[A.dst]) & is_gpu[A.src] & is_gpu[A.dst]
    to_switch = hbd & ((kind[A.src] == DeviceKind.SWITCH_CHIP) | (kind[A.dst] == DeviceKind.SWITCH_CHIP))
    intra = np.zeros(n)
    for mask in (same_node, to_switch):
        np.add.at(intra, A.src[mask], A.capacity[mask])
        np.add.at(intra, A.dst[mask], A.capacity[mask])
    # k-hop: lit optical links between GPUs of different nodes; a ring uses one per direction
    phys = A.origin >= 0
    cand = np.zeros(len(A), dtype=bool)
    cand[phys] = fabric.links.state[A.origin[phys]] == LinkState.CANDIDATE
    cross = hbd & is_gpu[A.src] & is_gpu[A.dst] & (node[A.src] != node[A.dst])
    lane = np.zeros(n)
    for ends in (A.src, A.dst):
        np.maximum.at(lane, ends[cross | cand], A.capacity[cross | cand])
    # NIC path: the GPU's DCN link (to its NIC), then the NIC's link onwards
    dcn = A.layer == Layer.DCN
    nic = np.full(n, np.inf)
    gpu_nic_src = dcn & is_gpu[A.src] & (kind[A.dst] == DeviceKind.NIC)
    gpu_nic_dst = dcn & is_gpu[A.dst] & (kind[A.src] == DeviceKind.NIC)
    nic_of = np.full(n, -1)
    nic_of[A.src[gpu_nic_src]] = A.dst[gpu_nic_src]
    nic_of[A.dst[gpu_nic_dst]] = A.src[gpu_nic_dst]
    np.minimum.at(nic, A.src[gpu_nic_src], A.capacity[gpu_nic_src])
    np.minimum.at(nic, A.dst[gpu_nic_dst], A.capacity[gpu_nic_dst])
    nic_up = np.zeros(n)
    nic_links = dcn & ((kind[A.src] == DeviceKind.NIC) ^ (kind[A.dst] == DeviceKind.NIC)) & ~(gpu_nic_src | gpu_nic_dst)
    np.add.at(nic_up, A.src[nic_links], A.capacity[nic_links])
    np.add.at(nic_up, A.dst[nic_links], A.capacity[nic_links])
    has_nic = nic_of >= 0
    nic[has_nic] = np.minimum(nic[has_nic], nic_up[nic_of[has_nic]])
    # hosts without a NIC (1-GPU fat-tree hosts attach directly): their own DCN links
    direct = dcn & is_gpu[A.src] & ~gpu_nic_src
    np.minimum.at(nic, A.src[direct], A.capacity[direct])
    direct = dcn & is_gpu[A.dst] & ~gpu_nic_dst
    np.minimum.at(nic, A.dst[direct], A.capacity[direct])
    hbd_lat = float(np.median(A.latency[hbd])) if hbd.any() else 0.0
    # one DCN step: GPU -> NIC -> ToR -> spine -> ToR -> NIC -> GPU (two PCIe hops, four network hops)
    pcie = dcn & (is_gpu[A.src] | is_gpu[A.dst])
    net = dcn & ~pcie
    dcn_lat = (2 * float(np.median(A.latency[pcie])) if pcie.any() else 0.0) + \
        (4 * float(np.median(A.latency[net])) if net.any() else 0.0)
    return _FabricView(node, domain, tor, hbd_egress, intra, lane, nic, hbd_lat, dcn_lat,
                       fabric.hbd.kind == "switch_domain", float(fabric.params.get("oversubscription", 1.0) or 1.0))


_VIEW_BY_ID: dict[int, tuple] = {}


def _cached_view(fabric: Fabric) -> _FabricView:
    """The view of ``fabric``, computed once per Fabric object (freed with it: :mod:`fabric.idcache`)."""
    hit = recall(_VIEW_BY_ID, fabric)
    return hit if hit is not None else remember(_VIEW_BY_ID, fabric, _view(fabric))


def analytic_comm_time(fabric: Fabric, kind: str, groups: np.ndarray, nbytes: float,
                       schedule: str | None = None) -> float:
    """Alpha-beta completion time of concurrent groups (fallback; see module docstring).

    The collective is cut into the same phases the simulator is given
    (:func:`plan`), each an NCCL launch (base latency); each phase takes the
    closed form of its algorithm at the bottleneck bandwidth of its groups:
    the GPU's intra-node bandwidth inside a node, its HBD egress (switched)
    or lit optical lane (k-hop) inside an HBD component, else its NIC divided
    by the ToR oversubscription; each times NCCL's path efficiency (catalog
    ``nccl_path_efficiency``: the share of the line rate its Simple protocol
    reaches on NVLink / a NIC, as the simulator applies it).  Every GPU has
    its own HBD ports and NIC, so concurrent groups only slow each other
    through that oversubscription.  ``schedule`` names one of :func:`plans`;
    by default the fastest at ``nbytes``.
    """
    g = _check(kind, groups)
    if g.size == 0 or nbytes <= 0 or g.shape[1] < 2:
        return 0.0
    v = _cached_view(fabric)
    comp = hbd_components(fabric)
    options = plans(fabric, kind, g, float(nbytes))  # once: each schedule's phases come from the one dict
    chosen = [_pick(options, schedule)] if schedule is not None else options.values()
    return min(sum(NCCL_BASE_LATENCY + _phase_time(v, comp, ph) for ph in phases) for phases in chosen)


def _phase_time(v: _FabricView, comp: np.ndarray, ph: "Phase") -> float:
    g, S, kind = ph.groups, ph.nbytes, ph.kind
    G, n = g.shape
    if n < 2:
        return 0.0
    same_node = np.all(v.node[g] == v.node[g][:, :1], axis=1)
    same_comp = np.all(comp[g] == comp[g][:, :1], axis=1)
    spans_tor = ~np.all(v.tor[g] == v.tor[g][:, :1], axis=1)
    eff_hbd, eff_net = nccl_path_efficiencies()
    hbd_bw = eff_hbd * (v.hbd_egress[g].min(axis=1) if v.switch_domain else v.optical_lane[g].min(axis=1))
    nic = eff_net * v.nic[g].min(axis=1) / np.where(spans_tor, v.dcn_oversubscription, 1.0)
    intra = eff_hbd * v.intra_node[g].min(axis=1)
    bw = np.where(same_node, intra, np.where(same_comp, hbd_bw, nic))
    if not np.all(bw > 0):  # a GPU without the link this phase needs (e.g. a topology file without NICs)
        first = int(g[np.flatnonzero(~(bw > 0))[0], 0])
        raise FabricError("topology", f"the group of GPU {first} has no link for its {kind.replace('_', '-')} "
                                      f"(no intra-node, HBD or NIC bandwidth); every GPU must reach its group")
    # a step costs NCCL's per-step latency of its path type (Simple protocol), which holds the hardware path,
    # or the physical latency of the path if that is longer (as fabric.sim.nccl charges it)
    step_hbd, step_net = nccl_step_latencies()
    a_hbd, a_net = max(2 * v.hbd_latency, step_hbd), max(v.dcn_latency, step_net)
    alpha = np.where(same_node, max(v.hbd_latency, step_hbd), np.where(same_comp, a_hbd, a_net))
    if kind == "send_recv":
        t = alpha + S / bw
    elif kind == "all_to_all":
        # ranks sharing a node exchange over the HBD, the rest of the buffer leaves through the NIC
        node = np.sort(v.node[g], axis=1)
        local = np.ones(G)
        run = np.zeros(G)
        for j in range(n - 1):
            run = np.where(node[:, j + 1] == node[:, j], run + 1, 0)
            local = np.maximum(local, run + 1)
        off = np.where(same_comp, (n - 1) / n * S / bw, (n - local) / n * S / nic)
        on = np.where(same_comp, 0.0, (local - 1) / n * S / np.where(intra > 0, intra, np.inf))
        t = alpha + np.maximum(off, on)
    elif ph.algorithm == "direct":
        t = alpha + (n - 1) / n * S / bw * (2 if kind == "all_reduce" else 1)
    else:
        # A ring across m HBD components runs C channels, C the group's fewest ranks in one component
        # (fabric.sim.nccl.channel_count), each leaving and entering a component through a NIC of its own:
        # a NIC hop carries S / (n C) a step, a GPU's HBD egress C of them.  Each channel's ring has m network
        # hops and n - m HBD hops; k steps cost the latency along k consecutive hops (NCCL streams the data
        # along the ring), the most network hops such a stretch can hold: the simulator's chain.  When every
        # component holds exactly C ranks, each rank is one channel's exit (the rings are rotated), so its HBD
        # egress carries C - 1 chunks a step, not C (16 + 16 ranks of two NVL-72 racks: NIC-bound, not NVLink-bound).
        C, most, m = _component_runs(comp[g])
        C = np.minimum(C, nccl_max_channels())  # NCCL's MAXCHANNELS, as fabric.sim.nccl.channel_count
        hop = np.where(hbd_bw > 0, hbd_bw, np.inf)
        exits = most == C  # with one rank per component (C = 1) the ring never takes an HBD hop
        hop = np.where(exits & (C > 1), hop * C / np.maximum(C - 1, 1), np.where(exits, np.inf, hop))
        bw = np.where(same_comp, bw, np.minimum(C * nic, hop))
        k = 2 * (n - 1) if kind == "all_reduce" else n - 1
        laps, rest = divmod(k, n)
        net_hops = np.where(same_comp, 0, laps * m + np.minimum(rest, m))
        t = np.where(same_comp, k * alpha, net_hops * a_net + (k - net_hops) * a_hbd) + k / n * S / bw
    return float(np.max(t))


def _component_runs(comp: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row of component ids (G, n): the fewest and the most of the row's ranks that share one component, and
    how many components the row spans, each shape (G,)."""
    G, n = comp.shape
    s = np.sort(comp, axis=1)
    edge = np.ones((G, n + 1), dtype=bool)
    edge[:, 1:n] = s[:, 1:] != s[:, :-1]
    idx = np.flatnonzero(edge.ravel())          # run starts, and each row's end (position n of the row)
    row = idx // (n + 1)
    keep = row[1:] == row[:-1]                  # a run lies between consecutive edges of one row
    runs, run_row = np.diff(idx)[keep], row[:-1][keep]
    fewest, most = np.full(G, n), np.zeros(G, dtype=np.int64)
    np.minimum.at(fewest, run_row, runs)
    np.maximum.at(most, run_row, runs)
    return fewest, most, np.bincount(run_row, minlength=G)


analytic_comm_time.name = "analytic"  # type: ignore[attr-defined]
analytic_comm_time.schedules = True  # type: ignore[attr-defined]  # takes schedule= (CommCache fits each)


@lru_cache(maxsize=None)
def _shipped_values(*entries: tuple[str, str]) -> tuple[float, ...]:
    """Values of the shipped catalog, one per (entry, field), read once."""
    from fabric.catalog import load_catalog

    cat = load_catalog()
    return tuple(cat.value(entry, field) for entry, field in entries)


def nccl_path_efficiencies() -> tuple[float, float]:
    """Share of the line rate NCCL's Simple protocol reaches on an NVLink / HBD path and on a NIC (catalog)."""
    return _shipped_values(("nccl_path_efficiency", "nvlink_factor"), ("nccl_path_efficiency", "network_factor"))


def nccl_max_channels() -> int:
    """The most channels NCCL runs a collective on (catalog ``nccl_max_channels``)."""
    return int(_shipped_values(("nccl_max_channels", "channels"))[0])


def nccl_step_latencies() -> tuple[float, float]:
    """NCCL's per-step latency (Simple protocol) of an NVLink/HBD step and of a network step, seconds (catalog)."""
    return _shipped_values(("nccl_ring_step_nvlink", "simple_latency"), ("nccl_ring_step_network", "simple_latency"))


# --------------------------------------------------------------------------- simulator backend


def fold_order(m: int) -> np.ndarray:
    """Ring order over ``m`` nodes of a line whose every hop is at most 2 apart: 0, 2, 4, ..., 5, 3, 1.

    On a k-hop line the ring 0, 1, ..., m-1 would close with an (m-1)-hop
    path; this folded ring uses every line link once in each direction (the
    InfiniteHBD "folded" ring), so shortest-path routing never detours.

    Examples
    --------
    >>> fold_order(6).tolist()
    [0, 2, 4, 5, 3, 1]
    """
    even = np.arange(0, m, 2)
    odd = np.arange(1, m, 2)[::-1]
    return np.concatenate([even, odd])


@dataclass(frozen=True)
class Phase:
    """One simulated phase: concurrent collectives of one kind and algorithm, each on a row of ``groups``."""

    kind: str
    algorithm: str
    groups: np.ndarray  # device ids
    nbytes: float


def plan_direct(kind: str, groups: np.ndarray, nbytes: float) -> list[Phase]:
    """Direct reduce-scatter / all-gather; an all-reduce as the two (inside a node or switched domain)."""
    if kind == "all_reduce":
        return [Phase("reduce_scatter", "direct", groups, nbytes), Phase("all_gather", "direct", groups, nbytes)]
    return [Phase(kind, "direct", groups, nbytes)]


def plan(fabric: Fabric, kind: str, groups: np.ndarray, nbytes: float, schedule: str | None = None) -> list[Phase]:
    """The phases of one schedule of :func:`plans` (``schedule``; by default the first: the flat ring)."""
    return _pick(plans(fabric, kind, groups, nbytes), schedule)


def _pick(options: dict[str, list[Phase]], schedule: str | None) -> list[Phase]:
    """The phases of ``schedule`` among ``options`` (the first if None)."""
    if schedule is None:
        return next(iter(options.values()))
    if schedule not in options:
        # a caller's slip, not user input: no command takes a schedule
        raise ValueError(f"schedule: {schedule!r} is not a schedule of these groups; allowed: {', '.join(options)}")
    return options[schedule]


def plans(fabric: Fabric, kind: str, groups: np.ndarray, nbytes: float) -> dict[str, list[Phase]]:
    """Every way a set of concurrent groups may run ``kind``, by schedule name: the phases the simulator times.

    * all-to-all: direct (every pair at once); send/recv: one flow per pair.
    * A group inside one node or one switched HBD domain (DGX node, NVL
      rack): ``direct`` reduce-scatter / all-gather (each GPU sends ``S/n`` to
      every peer at once: the full egress through a switch, every link of a
      mesh, one step of latency as NVLink SHARP); an all-reduce is a
      reduce-scatter then an all-gather.
    * Otherwise the group is cut by *unit*: the switched HBD domain (NVL
      rack, DGX node) or, on other HBDs, the node.  One rank per unit: a
      ``ring`` (on a k-hop line in :func:`fold_order`).  ``L > 1`` ranks in
      every unit, two schedules, and the caller takes the faster at each size
      (:class:`CommCache`, as NCCL's tuner picks among its algorithms):

      - ``ring``: one flat ring over all ``n`` ranks, each unit's ranks in a
        row (on a k-hop line the units folded), which is what NCCL runs for a
        reduce-scatter or all-gather, and its Ring all-reduce: ``L`` channels,
        each leaving and entering a unit through a NIC of its own
        (:func:`fabric.sim.nccl.ring_channel_count`), so the network carries
        the whole ``(n-1)/n S`` on ``L`` NICs while the HBD hops run at once;
      - ``hierarchical``: reduce-scatter inside the unit, a ring across units
        among the ranks with the same local index on ``S / L``, all-gather
        inside the unit, one after the other: fewer steps of network latency
        (it wins on small buffers, as NCCL's Tree and NVLS-Tree do), and the
        way XLA reduces over a TPU torus of multi-chip hosts.  Units holding
        unequal numbers of the group's ranks are cut into sub-units of their
        greatest common divisor (18 and 14 ranks: pairs), see
        :func:`_split_by_unit`.

      Before both were timed, only the hierarchical schedule was: on the
      NVL-72 default study's DP groups (16 ranks in each of 64 racks) it took
      0.181 s for a 70 GB gradient where NCCL's flat ring takes 0.103 s.
    """
    if kind in ("all_to_all", "send_recv"):
        return {"direct": [Phase(kind, "direct", groups, nbytes)]}
    node = fabric.group("node")[groups]
    if np.all(node == node[:, :1]):
        return {"direct": plan_direct(kind, groups, nbytes)}
    switched = fabric.hbd.kind == "switch_domain"
    dom = fabric.group("domain")[groups]
    if switched and np.all(dom == dom[:, :1]) and np.all(dom >= 0):
        return {"direct": plan_direct(kind, groups, nbytes)}
    line = fabric.hbd.kind == "khop_line"
    units = [dom] if switched and np.all(dom >= 0) else []
    units.append(node)
    for unit in units:
        intra, inter, L = _split_by_unit(groups, unit)
        if L == 1 and unit is not node:
            continue  # one rank per domain: try nodes
        if line:
            inter = inter[:, fold_order(inter.shape[1])]
        if L == 1:
            return {"ring": [Phase(kind, "ring", inter, nbytes)]}
        phases: list[Phase] = []
        if kind in ("all_reduce", "reduce_scatter"):
            phases.append(Phase("reduce_scatter", "direct", intra, nbytes))
        phases.append(Phase(kind, "ring", inter, nbytes / L))
        if kind in ("all_reduce", "all_gather"):
            phases.append(Phase("all_gather", "direct", intra, nbytes))
        return {"ring": [Phase(kind, "ring", _unit_ring(groups, unit, line), nbytes)], "hierarchical": phases}
    return {"ring": [Phase(kind, "ring", groups, nbytes)]}


def _unit_ring(groups: np.ndarray, unit: np.ndarray, line: bool) -> np.ndarray:
    """Every group's ranks with each unit's ranks in a row, units by id (on a k-hop line in :func:`fold_order`).

    The simulator's rings enter every unit once per channel (``fabric.sim.nccl.ring_orders``); on a k-hop line
    they take the units in the order given, so the order folds them as the one-rank-per-unit ring does.
    """
    order = np.argsort(unit, axis=1, kind="stable")
    ring = np.take_along_axis(groups, order, 1)
    if not line:
        return ring
    u = np.take_along_axis(unit, order, 1)
    first = np.ones(u.shape, dtype=bool)
    first[:, 1:] = u[:, 1:] != u[:, :-1]
    idx = np.cumsum(first, axis=1) - 1                   # each rank's unit's place along the line, 0..m-1
    m = idx[:, -1] + 1
    out = np.empty_like(ring)
    for units in np.unique(m):  # rows spanning the same number of units fold alike (usually all of them)
        rows = np.flatnonzero(m == units)
        place = np.empty(units, dtype=np.int64)
        place[fold_order(int(units))] = np.arange(units)
        key = place[idx[rows]]
        out[rows] = np.take_along_axis(ring[rows], np.argsort(key, axis=1, kind="stable"), 1)
    return out


def _split_by_unit(groups: np.ndarray, unit: np.ndarray):
    """Cut every group into sub-units of ``L`` ranks that share a unit; None if ``L`` would be 1.

    ``L`` is the greatest common divisor of the number of ranks each unit
    holds (over all groups): with 16 ranks in every unit, ``L = 16``; with 18
    and 14 (a group straddling racks unevenly), ``L = 2``.  Returns the
    sub-units (intra rows, ``L`` ranks each), the rows of ranks with the same
    index across sub-units (inter rows), and ``L``.  Units are ordered by id
    (node ids run along a k-hop line), ranks inside a unit by rank order.
    """
    G, n = groups.shape
    order = np.argsort(unit, axis=1, kind="stable")
    unit_s = np.take_along_axis(unit, order, 1)
    grp_s = np.take_along_axis(groups, order, 1)
    # ranks per unit: lengths of the runs of equal ids in each sorted row
    edge = np.ones((G, n + 1), dtype=bool)
    edge[:, 1:n] = unit_s[:, 1:] != unit_s[:, :-1]
    idx = np.flatnonzero(edge.ravel())
    same_row = idx[1:] // (n + 1) == idx[:-1] // (n + 1)
    runs = np.diff(idx)[same_row]
    L = int(np.gcd.reduce(runs)) if runs.size else 1
    m = n // L
    if m == n:  # one rank per unit: no sub-units
        return None, grp_s, 1
    intra = grp_s.reshape(G * m, L)
    inter = grp_s.reshape(G, m, L).transpose(0, 2, 1).reshape(G * L, m)
    return intra, inter, L


def simulator_backend() -> CommBackend | None:
    """The flow simulator (:func:`fabric.sim.simulate_collectives`) as a backend, or None if unavailable."""
    try:
        from fabric.sim import Collective, CollectiveName, Protocol, simulator
    except ImportError:
        return None

    def sim_time(fabric: Fabric, kind: str, groups: np.ndarray, nbytes: float, protocol: str = "simple",
                 schedule: str | None = None) -> float:
        g = _check(kind, groups)
        if g.size == 0 or nbytes <= 0:
            return 0.0
        if schedule is None:  # the fastest schedule at this size
            return min(sim_time(fabric, kind, g, nbytes, protocol, name) for name in plans(fabric, kind, g, nbytes))
        gpu_ids = fabric.gpu_ids
        total = 0.0
        for ph in plan(fabric, kind, g, float(nbytes), schedule):
            idx = np.searchsorted(gpu_ids, ph.groups)
            name = CollectiveName.parse(ph.kind)
            # one NCCL protocol per call keeps the time affine in size (what the cache's fit needs); the
            # cache fits every protocol and takes the fastest, as NCCL's tuner does (CommCache.time)
            c0 = Collective(name, tuple(idx[0].tolist()), ph.nbytes, ph.algorithm, protocol=Protocol(protocol))
            # every row at once, as one batch of collectives that differ only in their ranks (what
            # simulate_collectives makes of one Collective per row, without building tens of thousands of them);
            # inter-node steps go through the GPU's own NIC: the simulator's routes never pass a GPU between
            # its NVLink and its NIC (fabric.sim.routing)
            total += float(simulator(fabric).batch_times(c0, idx).max())
        return total

    sim_time.name = "sim"  # type: ignore[attr-defined]
    sim_time.protocols = ("ll", "ll128", "simple")  # type: ignore[attr-defined]
    sim_time.schedules = True  # type: ignore[attr-defined]  # takes schedule= (CommCache fits each)
    return sim_time  # type: ignore[return-value]


def default_backend() -> CommBackend:
    """The simulator if available, else the analytic fallback."""
    return simulator_backend() or analytic_comm_time  # type: ignore[return-value]


# --------------------------------------------------------------------------- cache
def fabric_digest(fabric: Fabric) -> str:
    """A digest of everything that decides collective times: devices, links, configuration."""
    hit = recall(_DIGESTS, fabric)
    if hit is not None:
        return hit
    h = hashlib.blake2b(digest_size=16)
    h.update(fabric.architecture.encode())
    L = fabric.links
    for arr in (fabric.devices.kind, fabric.group("node"), fabric.group("domain"), L.src, L.dst, L.capacity,
                L.latency, L.layer, L.state, fabric.configuration.active_candidates, fabric.configuration.circuits):
        h.update(np.ascontiguousarray(arr).tobytes())
    d = h.hexdigest()
    return remember(_DIGESTS, fabric, d)


def backend_version(backend) -> str:
    """Identifies what a backend computes, so cached fits of an older model never serve a lookup.

    A digest of this module (the phase plan and the analytic formulas) and,
    for the simulator, of the ``fabric.sim`` sources; other backends by name.
    """
    name = getattr(backend, "name", "custom")
    if name not in ("sim", "analytic"):
        return name
    if name not in _VERSIONS:
        from importlib import resources

        h = hashlib.blake2b(digest_size=8)
        h.update((resources.files("workloads") / "comm.py").read_bytes())
        if name == "sim":
            root = resources.files("fabric") / "sim"
            for p in sorted(root.iterdir(), key=lambda x: x.name):
                if p.name.endswith(".py"):
                    h.update(p.name.encode())
                    h.update(p.read_bytes())
        _VERSIONS[name] = f"{name}-{h.hexdigest()}"
    return _VERSIONS[name]


_VERSIONS: dict[str, str] = {}
_DIGESTS: dict[int, tuple] = {}
_COMPONENTS: dict[int, tuple] = {}
_FITS: dict[str, tuple[float, float]] = {}
_SCHEDULES: dict[str, tuple] = {}


def clear_cache() -> None:
    """Forget every cached fit (tests, benchmarks)."""
    _FITS.clear()
    _SCHEDULES.clear()


def save_fits(path) -> int:
    """Write every cached fit to a JSON file; returns how many."""
    import json

    from fabric.files import write_text_atomic

    # atomic: an interrupted run leaves the previous cache, not a truncated file the next run refuses
    write_text_atomic(path, json.dumps({k: list(v) for k, v in sorted(_FITS.items())}, indent=0), "comm_cache")
    return len(_FITS)


def load_fits(path, *, as_current: bool = False) -> int:
    """Add the fits of a JSON file written by :func:`save_fits`; returns how many.

    Every entry is checked before any is added (a bad file adds nothing): the
    key is ``digest/backend/kind/GxN/layout[/schedule][/protocol]`` with a known kind,
    the value two finite numbers ``[intercept_s, slope_s_per_byte]`` >= 0
    (what :meth:`CommCache.time` stores: both clipped at 0) whose time at the
    larger fit size is at most :data:`MAX_FIT_SECONDS`.

    Parameters
    ----------
    as_current : bool
        Treat simulator fits made by another version of ``fabric.sim`` as if
        made by the current one (reference data in tests; a benchmark checks
        them against the live simulator).  Otherwise they are loaded under
        their own version and never match a lookup of the current simulator.

    Raises
    ------
    FabricError
        ``comm_cache``: the file is not JSON, not an object, or an entry is
        malformed or out of range (named, with what is allowed).
    """
    from pathlib import Path

    from fabric.files import parse_json, read_text

    name = Path(path).name
    text = read_text(path, "comm_cache")  # the one reader of input files: a folder, non-UTF-8, over 1 GiB
    try:
        # the shared parser: a key given twice is refused, not kept last in silence; nesting is bounded
        raw = parse_json(text, name, "comm_cache", constants=True)  # NaN: the entry check names the entry
    except FabricError as exc:
        raise FabricError("comm_cache", f"{name} is not JSON ({exc.message}); it must be a cache written by fabric "
                                        "mfu") from None
    if not isinstance(raw, dict):
        raise FabricError("comm_cache", f"{name} must hold a JSON object of fits, got {type(raw).__name__}")
    fits = {k: _checked_fit(name, k, v) for k, v in raw.items()}
    current = backend_version(simulator_backend()) if as_current and simulator_backend() else None
    for k, fit in fits.items():
        parts = k.split("/")
        if current and parts[1].startswith("sim"):
            parts[1] = current
        _FITS["/".join(parts)] = fit
    return len(raw)


# A cached fit whose collective takes longer than this (s) at the larger fit size is refused: about 30 years, the
# bound of the CLI's duration flags (fabric.checks.MAX_SECONDS), far beyond any real collective, far from overflow.
MAX_FIT_SECONDS = MAX_SECONDS
_FIT_KEY = re.compile(r"[0-9a-f]+/[^/]+/(?P<kind>[a-z_]+)/[1-9][0-9]*x[1-9][0-9]*/[0-9a-f]+(/[a-z0-9]+){0,2}")


def _checked_fit(name: str, key, value) -> tuple[float, float]:
    """One cache entry as ``(intercept_s, slope_s_per_byte)``, or a FabricError naming it."""
    shown = repr(key) if len(repr(key)) <= 160 else repr(key)[:150] + "...'"
    m = _FIT_KEY.fullmatch(key) if isinstance(key, str) else None
    if m is None or m.group("kind") not in KINDS:
        raise FabricError("comm_cache", f"{name}: key {shown} is not digest/backend/kind/GxN/layout[/schedule][/protocol] "
                                        f"with kind one of {', '.join(KINDS)}")
    ok = isinstance(value, list) and len(value) == 2 and all(is_number(x) for x in value)
    if ok:
        try:
            a, b = float(value[0]), float(value[1])
        except OverflowError:  # a JSON integer past float range (10**400) escaped as a traceback
            a = b = float("inf")
        ok = bool(np.isfinite(a) and np.isfinite(b) and a >= 0 and b >= 0)
    if not ok:
        raise FabricError("comm_cache", f"{name}: entry {shown}: {_json_text(value)} must be [intercept_s, "
                                        f"slope_s_per_byte], two finite numbers >= 0")
    if a + b * FIT_SIZES[1] > MAX_FIT_SECONDS:
        raise FabricError("comm_cache", f"{name}: entry {shown}: {_json_text(value)} gives "
                                        f"{a + b * FIT_SIZES[1]:.3g} s for {FIT_SIZES[1] / 2**20:g} MiB; at most "
                                        f"{MAX_FIT_SECONDS:g} s allowed")
    return a, b


def _json_text(value) -> str:
    """``value`` as short JSON for a message (a long one cut)."""
    import json

    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def hbd_components(fabric: Fabric) -> np.ndarray:
    """Connected component of every device over the active HBD links (cached per Fabric object)."""
    hit = recall(_COMPONENTS, fabric)
    if hit is not None:
        return hit
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    A = fabric.active_links()
    hbd = A.layer == Layer.HBD
    n = fabric.n_devices
    adj = sp.coo_matrix((np.ones(int(hbd.sum())), (A.src[hbd], A.dst[hbd])), shape=(n, n))
    _, comp = connected_components(adj, directed=False)
    return remember(_COMPONENTS, fabric, comp)


def independent_groups(fabric: Fabric, groups: np.ndarray) -> np.ndarray:
    """The groups that decide the completion time when the rest cannot interfere with them.

    Groups that each lie inside one connected HBD component (an NVLink
    domain, a DGX node, a lit k-hop ring) route over HBD links only (their
    HBD paths are shorter than any path through the DCN), and HBD components
    share no links; identical components run identically, so the answer is
    that of the component holding the most groups.  Groups that span
    components need the DCN and are all kept.
    """
    if groups.shape[0] <= 1:
        return groups
    comp = hbd_components(fabric)[groups]
    if not np.all(comp == comp[:, :1]):
        return groups
    ids, first, counts = np.unique(comp[:, 0], return_index=True, return_counts=True)
    best = ids[np.argmax(counts)]
    return groups[comp[:, 0] == best]


@dataclass
class CommStats:
    lookups: int = 0
    fits: int = 0
    backend_calls: int = 0


class CommCache:
    """Collective times on one Fabric, cached per (kind, group layout) as an affine fit in size.

    Parameters
    ----------
    fabric : Fabric
    backend : callable, optional
        ``backend(fabric, kind, groups, nbytes) -> seconds``; default
        :func:`default_backend` (the simulator when importable).
    exact : bool
        Call the backend for every size instead of interpolating.
    """

    def __init__(self, fabric: Fabric, backend: Callable | None = None, exact: bool = False):
        self.fabric = fabric
        self.backend = backend or default_backend()
        self.backend_name = getattr(self.backend, "name", getattr(self.backend, "__name__", "custom"))
        self.exact = exact
        self.stats = CommStats()
        self._prefix = fabric_digest(fabric) + "/" + backend_version(self.backend)

    def time(self, kind: str, groups: np.ndarray, nbytes: float) -> float:
        """Completion time (s) of ``groups`` running ``kind`` on ``nbytes`` at once."""
        self.stats.lookups += 1
        g = np.ascontiguousarray(groups, dtype=np.int64)
        if g.size == 0 or nbytes <= 0 or g.shape[1] < 2:
            return 0.0
        g = np.ascontiguousarray(independent_groups(self.fabric, g))
        # a backend with NCCL protocols is fitted per protocol, and per schedule (plans) where it takes one; the
        # fastest wins at each size, as NCCL's tuner picks protocol and algorithm
        protocols = getattr(self.backend, "protocols", (None,))
        layout = hashlib.blake2b(g.tobytes(), digest_size=12).hexdigest()
        base = f"{self._prefix}/{kind}/{g.shape[0]}x{g.shape[1]}/{layout}"
        schedules = self._schedules(base, kind, g)
        options = [(s, p) for s in schedules for p in protocols]
        if self.exact:
            self.stats.backend_calls += len(options)
            return min(float(self._call(kind, g, float(nbytes), p, s)) for s, p in options)
        best = np.inf
        for sched, p in options:
            key = base + "".join(f"/{x}" for x in (sched, p) if x is not None)
            fit = _FITS.get(key)
            if fit is None:
                s1, s2 = FIT_SIZES
                t1 = float(self._call(kind, g, s1, p, sched))
                t2 = float(self._call(kind, g, s2, p, sched))
                self.stats.backend_calls += 2
                self.stats.fits += 1
                slope = (t2 - t1) / (s2 - s1)
                fit = (max(t1 - slope * s1, 0.0), max(slope, 0.0))
                _FITS[key] = fit
            best = min(best, fit[0] + fit[1] * float(nbytes))
        return float(best)

    def _schedules(self, base: str, kind: str, g: np.ndarray) -> tuple:
        """The schedules of :func:`plans` this backend is fitted on (``(None,)``: it picks its own), once per layout."""
        if not getattr(self.backend, "schedules", False):
            return (None,)
        names = _SCHEDULES.get(base)
        if names is None:
            names = tuple(plans(self.fabric, kind, g, FIT_SIZES[0]))
            # a single schedule keeps the key it always had (a saved cache still serves it)
            names = _SCHEDULES[base] = names if len(names) > 1 else (None,)
        return names

    def _call(self, kind: str, g: np.ndarray, nbytes: float, protocol, schedule=None) -> float:
        extra = {k: v for k, v in (("protocol", protocol), ("schedule", schedule)) if v is not None}
        return self.backend(self.fabric, kind, g, nbytes, **extra)
