"""Collectives as NCCL runs them: protocols, per-step latency, channels, algorithm choice.

The flow DAGs of :mod:`fabric.sim.collectives` are the *ideal* model (``protocol
'none'``): every step costs its bytes over the max-min rate plus the physical
latency of its path.  NCCL adds, per its tuning model (``src/graph/tuning.cc``,
constants in the catalog with their source):

* a **base latency** per collective launch (``baseLat``), by protocol;
* a **per-step latency** by protocol and by the *path type* of the step
  (``hwLat``: NVLink / HBD, PCIe, network), charged once per step of the
  data's path, not per link hop.  NCCL measured these on real systems, so
  they hold the hardware path of a step: a step costs ``max(step latency,
  physical latency of its path)`` (the physical one only wins on paths far
  longer than a machine room's);
* once a ring leaves its node, every intra-node step costs at least NCCL's
  **network post overhead** (``netOverhead``, 1 us; 3 us with Simple);
* a **protocol** that trades latency for bandwidth, with NCCL's bandwidth
  factors relative to Simple: LL 1/4 (8-byte stores, half of them flags, and
  polling; and at most NCCL's ``llMaxBw`` of bus bandwidth, by node count),
  LL128 0.92 (120 of 128 bytes), Simple 1, times a declared **path
  efficiency** of the transport (the share of the line rate NCCL's Simple
  protocol reaches on NVLink and on a NIC).  Wire bytes are payload /
  (protocol factor x path efficiency).

Channels
--------
A ring that spans several HBD domains runs as ``C`` parallel rings
(channels), each carrying ``S / C``.  Channel ``c`` visits the ranks of every
domain in order rotated by ``c``, and alternates direction from one domain to
the next (a "snake"), so that it leaves a domain and enters the next on the
same rail: with one NIC per GPU, every NIC sends one channel's data and
receives one channel's, as NCCL's rings on rail-optimised fabrics do.  The
default ``C`` is the number of the group's ranks in each domain (one channel
per NIC rail, :func:`channel_count`); a single domain has one ring (more
channels over the same NVLink paths change nothing in a fluid model).  A
k-hop line is one domain without a switch: there channels go by node
(:func:`ring_channel_count`), and a ring over a TP group's lit optics goes
down the line and back (:func:`ring_order_candidates`), since no optical
path closes a ring from the last node to the first.

How a multi-channel ring is timed (exactly the alpha-beta form of NCCL's own
model, with the bandwidth from the simulator): every ring step moves the same
flows, so the simulator runs **one step** of every channel of every group at
once (max-min sharing of NVLink and NIC), and a ring of ``k`` steps takes

    base latency + k x (step transfer time) + (latency along k hops of the ring),

where the step transfer time is the slowest flow's transfer in that step and
the latency along the ring is the largest sum, over ``k`` consecutive hops of a
channel, of each hop's step latency (above).  On a ring whose
hops are all alike (one channel, no protocol) this is the closed form
``k (a + S / (n B))`` of the flow DAG; the tests check it against the full flow
DAG.  Memory is linear in the ranks (one step, not ``2 n (n-1)`` flows).

Broadcast
---------
NCCL broadcasts on its rings only: every channel's ring, read from the root, is
a chain of ``n - 1`` hops carrying ``S / C`` in pieces of one protocol step
(:func:`time_broadcast`); one step of every hop is simulated, and the pipeline
form (the buffer through the slowest hop, one piece through every other, the
chain's step latencies once) gives the time.

Algorithm and protocol choice (``auto``)
----------------------------------------
NCCL's tuner predicts every (algorithm, protocol) time and takes the fastest.
Between ring and tree the simulator asks NCCL's own model
(:func:`tuner_prefers_tree`, fed the ring's simulated bus bandwidth): NCCL
runs the ring for large buffers on a few nodes even where the tree would be
faster on the graph (two nodes), and the tree for small buffers and at scale.
The rest it times on the real graph and takes the
fastest: all-reduce tries that ring or tree and, on an NVLink
switch domain whose switch chips do in-network reduction (catalog
``nvls_factor``), NVLS, or across several such domains NCCL's NVLS tree;
SHARP on DCN switches that reduce; each with LL, LL128 and Simple (NVLS,
NVLS tree and SHARP: Simple).  NVLS: every GPU sends its buffer into the
switch chips and reads the reduced result back, so each GPU moves ``S`` each
way instead of the ring's ``2 (n-1)/n S``.

Not modelled in the simulated times: NCCL runs small messages on fewer
channels and threads (enqueue.cc) and corrects its tree bandwidth by size
(tuning.cc ``treeCorrectionFactor``, which only the ring-or-tree choice
reads); both make measured 1-64 KiB times longer than this model's (README,
validation table).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from fabric.catalog import Catalog, load_catalog
from fabric.errors import FabricError
from fabric.model import DeviceKind, Fabric, HBDKind
from fabric.sim.collectives import DEFAULT_CHUNKS, Algorithm, CollectiveName, Protocol, domain_matrix
from fabric.sim.collectives import domain_rows as _domain_rows  # by domain group; here by Fabric
from fabric.sim.flows import FlowTable

NCCL_PROTOCOLS = (Protocol.LL, Protocol.LL128, Protocol.SIMPLE)
PATH_TYPES = ("nvlink", "pcie", "network")  # index = path code
HBD, PCIE, NETWORK = 0, 1, 2


@dataclass(frozen=True)
class NcclModel:
    """NCCL's tuning constants, SI units (read from the catalog by :func:`nccl_model`).

    Attributes
    ----------
    base_latency, tree_base_latency : dict
        Protocol -> seconds per ring / tree collective.
    net_overhead : dict
        Protocol -> least seconds of a ring's intra-node step once the ring spans nodes.
    ll_max_busbw : ndarray of 3
        Most bus bandwidth of the LL protocol, bytes/s, on 1, 2 and more nodes.
    ring_step, tree_step : dict
        Protocol -> array of 3 seconds (by path code: nvlink, pcie, network).
    payload : dict
        Protocol -> bandwidth factor relative to Simple (payload share of the wire bytes).
    efficiency : ndarray of 3
        Share of the line rate the transport reaches, by path code.
    nvls_latency, sharp_latency : float
        Seconds per NVLS / SHARP all-reduce (in-switch reduction).
    nvls_tree_step : float
        Seconds per network level of an NVLS tree.
    broadcast_chunk : dict
        Protocol -> payload bytes of one pipeline piece of a ring broadcast.
    max_channels : int
        Most channels NCCL runs a collective on (``MAXCHANNELS``).
    """

    base_latency: dict
    tree_base_latency: dict
    net_overhead: dict
    ll_max_busbw: np.ndarray
    ring_step: dict
    tree_step: dict
    payload: dict
    efficiency: np.ndarray
    nvls_latency: float
    nvls_tree_step: float
    sharp_latency: float
    broadcast_chunk: dict
    max_channels: int

    @staticmethod
    def from_catalog(catalog: Catalog) -> "NcclModel":
        def by_path(prefix: str, proto: str) -> np.ndarray:
            return np.array([catalog.value(f"{prefix}_{p}", f"{proto}_latency") for p in PATH_TYPES])

        protos = {Protocol.LL: "ll", Protocol.LL128: "ll128", Protocol.SIMPLE: "simple"}
        return NcclModel(
            base_latency={p: catalog.value("nccl_base_latency", f"{k}_latency") for p, k in protos.items()},
            tree_base_latency={p: catalog.value("nccl_tree_base_latency", f"{k}_latency") for p, k in protos.items()},
            net_overhead={p: catalog.value("nccl_net_overhead", f"{k}_latency") for p, k in protos.items()},
            ll_max_busbw=np.array([catalog.value("nccl_ll_max_busbw", f"{k}_bandwidth")
                                   for k in ("one_node", "two_nodes", "more_nodes")]),
            ring_step={p: by_path("nccl_ring_step", k) for p, k in protos.items()},
            tree_step={p: by_path("nccl_tree_step", k) for p, k in protos.items()},
            payload={p: catalog.value("nccl_protocol", f"{k}_factor") for p, k in protos.items()},
            efficiency=np.array([catalog.value("nccl_path_efficiency", f"{p}_factor") for p in PATH_TYPES]),
            nvls_latency=catalog.value("nccl_nvls", "latency"),
            nvls_tree_step=catalog.value("nccl_nvls_tree", "latency"),
            sharp_latency=catalog.value("nccl_sharp", "latency"),
            broadcast_chunk={p: catalog.value("nccl_broadcast_chunk", f"{k}_bytes") for p, k in protos.items()},
            max_channels=int(catalog.value("nccl_max_channels", "channels")),
        )


@lru_cache(maxsize=1)
def _shipped_model() -> NcclModel:
    return NcclModel.from_catalog(load_catalog())


def nccl_model(catalog: Catalog | None = None) -> NcclModel:
    """The NCCL constants of ``catalog`` (default the shipped catalog)."""
    return _shipped_model() if catalog is None else NcclModel.from_catalog(catalog)


def path_codes(fabric: Fabric, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Path type of every (src, dst) device pair: 0 HBD (same HBD domain), 1 PCIe (same node), 2 network."""
    dom = fabric.group("domain")
    node = fabric.group("node")
    same_dom = (dom[src] == dom[dst]) & (dom[src] >= 0)
    same_node = (node[src] == node[dst]) & (node[src] >= 0)
    return np.where(same_dom, HBD, np.where(same_node, PCIE, NETWORK)).astype(np.int64)


def domain_rows(fabric: Fabric, devices: np.ndarray) -> list[np.ndarray]:
    """Rank positions of ``devices`` per HBD domain (:func:`fabric.sim.collectives.domain_rows`)."""
    return _domain_rows(devices, fabric.group("domain"))


def channel_count(fabric: Fabric, devices: np.ndarray) -> int:
    """NCCL's channel count for a ring over ``devices`` (one group): ranks per HBD domain if it spans domains.

    One channel per rail (each of the group's ranks in a domain has its own
    NIC); when domains hold unequal numbers of ranks, the smallest number
    (every channel still leaves and enters each domain through a NIC of its
    own, as NCCL's per-node ring search connects the same channel count on
    every node); 1 if the group sits in one domain; at most NCCL's
    ``MAXCHANNELS`` (catalog ``nccl_max_channels``: a TPUv4 pod is one domain
    of 4,096 chips, whose rails would otherwise give 4,096 rings).
    """
    return _rail_channels(domain_rows(fabric, devices))


def ring_channel_count(fabric: Fabric, devices: np.ndarray) -> int:
    """NCCL's channel count for a ring: :func:`channel_count`, by node on a k-hop line.

    A k-hop line is one HBD domain, but no switch joins its nodes: a ring
    leaves a node over a GPU's own optics or NIC, so, as across HBD domains,
    one channel per rank of the group in each node (its rail), and 1 if the
    group sits in one node.
    """
    if fabric.hbd.kind != HBDKind.KHOP_LINE:
        return channel_count(fabric, devices)
    return _rail_channels(_node_rows(fabric, devices))


def _rail_channels(rows: list[np.ndarray]) -> int:
    """One channel per rail: the fewest ranks of any unit in ``rows``, at most NCCL's MAXCHANNELS; 1 for one unit."""
    return min(min(r.size for r in rows), nccl_model().max_channels) if len(rows) > 1 else 1


def _node_rows(fabric: Fabric, devices: np.ndarray) -> list[np.ndarray]:
    """Rank positions of ``devices`` per node, nodes in order of first appearance.

    The caller's order stands: the step model hands over rings across nodes
    already folded (:func:`workloads.comm.fold_order`), whose every hop is
    two nodes at most.
    """
    return _domain_rows(devices, fabric.group("node"))


def ring_order_candidates(fabric: Fabric, devices: np.ndarray, channels: int) -> list[np.ndarray]:
    """Every ring layout NCCL's topology search could settle on, each ``(channels, n)`` rank positions.

    Beside switch domains, one layout: :func:`ring_orders`.  On a k-hop line
    a group spanning nodes has two, and the faster is NCCL's:

    * the **snake** of :func:`ring_orders` by node: one crossing between
      neighbouring nodes per channel, and a closing hop from the last node
      to the first, which only a NIC can carry (the lit optics of a TP
      group join neighbouring nodes only, :func:`fabric.rings.group_configuration`);
    * **there and back**: the channel goes down the line on the first half of
      every node's ranks and comes back on the second half (each half a snake,
      so every crossing stays on one rail), so every hop joins neighbouring
      nodes or stays in a node: the ring a TP group runs on its own optics,
      at the price of crossing every node boundary twice.  Needs two ranks
      in every node.
    """
    if fabric.hbd.kind != HBDKind.KHOP_LINE:
        return [ring_orders(fabric, devices, channels)]
    rows = _node_rows(fabric, devices)
    if len(rows) == 1:
        return [ring_orders(fabric, devices, channels)]
    snake = _snake_rings(rows, channels)
    if min(r.size for r in rows) < 2:
        return [snake]
    back = np.empty_like(snake)
    for c in range(channels):
        rot = _rotated(rows, c)
        back[c] = np.concatenate([_snake([x[:x.size // 2] for x in rot]),            # down the line
                                  _snake([x[x.size // 2:] for x in rot][::-1])])     # and back
    return [snake, back]


def _rotated(rows: list[np.ndarray], c: int) -> list[np.ndarray]:
    """Every row's ranks rotated by ``c`` (modulo the row's count): channel ``c``'s entry rank per row."""
    return [r[(np.arange(r.size) + c) % r.size] for r in rows]


def _snake(parts: list[np.ndarray]) -> np.ndarray:
    """The parts in order, every odd one backwards: a ring leaves one part and enters the next on one rail."""
    return np.concatenate([x[::-1] if i % 2 else x for i, x in enumerate(parts)])


def _snake_rings(rows: list[np.ndarray], channels: int) -> np.ndarray:
    """Rank positions of every channel's snake ring over ``rows``, shape (channels, n)."""
    return np.stack([_snake(_rotated(rows, c)) for c in range(channels)]).astype(np.int64, copy=False)


def _domain_matrix_or_one(fabric: Fabric, devices: np.ndarray) -> np.ndarray:
    """Ranks by HBD domain (:func:`domain_matrix`), or all in one row when they do not tile domains evenly."""
    try:
        return domain_matrix(devices, fabric.group("domain"))
    except FabricError:
        return np.arange(devices.size)[None, :]


def ring_orders(fabric: Fabric, devices: np.ndarray, channels: int) -> np.ndarray:
    """Rank positions of every channel's ring, shape (channels, n) (see the module docstring: snake rings).

    Channel ``c`` visits each domain's ranks rotated by ``c`` (modulo that
    domain's count), odd domains backwards, so that with ``c`` below every
    domain's count each channel enters and leaves a domain on a rank of its own.
    """
    return _snake_rings(domain_rows(fabric, devices), channels)


def nvls_factor(fabric: Fabric, devices: np.ndarray, catalog: Catalog | None = None) -> float | None:
    """The NVLS efficiency if every rank of ``devices`` (G, n) shares one switched HBD domain per group whose
    switch chips do in-network reduction (catalog ``nvls_factor``), else None."""
    if fabric.hbd.kind != "switch_domain":
        return None
    dom = fabric.group("domain")[devices]
    if np.any(dom < 0) or np.any(dom != dom[:, :1]):
        return None
    return _hbd_reduction_factor(fabric, catalog)


def nvls_tree_factor(fabric: Fabric, devices: np.ndarray, catalog: Catalog | None = None) -> float | None:
    """The NVLS efficiency if every group of ``devices`` (G, n) spans several NVLink switch domains whose chips
    reduce, with the same number of ranks in each (NCCL's NVLS tree), else None."""
    if fabric.hbd.kind != "switch_domain" or devices.shape[1] < 2:
        return None
    dom = fabric.group("domain")
    try:
        if np.any(dom[devices] < 0) or domain_matrix(devices[0], dom).shape[0] < 2:
            return None
    except FabricError:
        return None
    return _hbd_reduction_factor(fabric, catalog)


def _hbd_reduction_factor(fabric: Fabric, catalog: Catalog | None) -> float | None:
    """The least ``nvls_factor`` of the Fabric's HBD switch chips in the catalog (None if none reduces)."""
    cat = catalog or load_catalog()
    factors = [cat.get(line.item).values.get("nvls_factor") for line in fabric.bom
               if line.scope == "hbd" and line.item in cat]
    factors = [f for f in factors if f is not None]
    return min(factors) if factors else None


def time_nvls(sim, fabric: Fabric, devices: np.ndarray, size: float, factor: float, model: NcclModel,
              method: str, ecmp: str, seed: int, start: float) -> "RingTiming | None":
    """Time NVLS all-reduce (in-switch reduction) of every group, one row of ``devices`` per HBD domain.

    Every GPU writes its buffer into the domain's ``K`` switch chips
    (``S / K`` each, wire ``/ factor``) and reads the reduced buffer back; the
    two directions stream at once (NCCL pipelines them in small chunks), so
    the simulator runs all up and down flows together and the slowest sets
    the bandwidth term: ``max(NVLS latency, path latency up and down) +
    transfer``.  Each GPU moves ``S`` each way, against ``2 (n-1)/n S`` for a
    ring.  None if a domain has no switch chip.
    """
    from fabric.sim.engine import schedule

    dom = fabric.group("domain")
    chips_all = fabric.ids_of(DeviceKind.SWITCH_CHIP)
    G, n = devices.shape
    src, dst, tag, per = [], [], [], []
    for g in range(G):
        chips = chips_all[dom[chips_all] == dom[devices[g, 0]]]
        if chips.size == 0:
            return None
        gpu = np.repeat(devices[g], chips.size)
        chip = np.tile(chips, n)
        src += [gpu, chip]
        dst += [chip, gpu]
        tag.append(np.full(2 * gpu.size, g))
        per.append(np.full(2 * gpu.size, size / chips.size / factor))
    flows = FlowTable.build(np.concatenate(src), np.concatenate(dst), np.concatenate(per), start, None, 1,
                            np.concatenate(tag))
    prob, graph, arcs = sim.problem(flows, ecmp=ecmp, seed=seed, field="ranks")
    sched = schedule(prob, method)
    t = np.zeros(G)
    lat = prob.route_latency[prob.route]
    np.maximum.at(t, flows.tag, sched.tx_end - sched.release)
    up_down = np.zeros(G)
    np.maximum.at(up_down, flows.tag, lat)
    return RingTiming(np.maximum(model.nvls_latency, 2 * up_down) + t, Protocol.SIMPLE, 1, 1, flows, prob, sched,
                      graph, arcs)


def time_nvls_tree(sim, fabric: Fabric, devices: np.ndarray, size: float, factor: float, model: NcclModel,
                   method: str, ecmp: str, seed: int, start: float) -> "RingTiming | None":
    """Time NCCL's NVLS tree all-reduce: NVLS inside every HBD domain, NCCL's trees across the domains.

    Inside each domain every GPU writes its buffer into the switch chips and
    reads the reduced result back, as :func:`time_nvls`; across domains the
    shard of rail ``c`` (``S / C``, ``C`` channels, one per rank of a domain)
    goes up and down NCCL's double binary tree over the domains between the
    rank-``c`` GPUs (:func:`tree_edges`), ``S / (2 C)`` on each tree edge each
    way.  Pipelined, every flow streams at once; the slowest sets the
    bandwidth term.  Latency as NCCL's tuner: ``max(NVLS latency, path up and
    down) + 2 depth x (network level latency)``.  None if a domain has no
    switch chip.
    """
    from fabric.sim.engine import schedule

    G, n = devices.shape
    dom = fabric.group("domain")
    chips_all = fabric.ids_of(DeviceKind.SWITCH_CHIP)
    channels = channel_count(fabric, devices[0])
    child, parent, _, depth = tree_edges(fabric, devices[0], channels)
    across = dom[devices[0][child]] != dom[devices[0][parent]]
    child, parent = child[across], parent[across]
    # every GPU <-> every switch chip of its domain (NVLS), all groups at once
    chip_dom = dom[chips_all]
    has = chip_dom >= 0
    order = np.argsort(chip_dom[has], kind="stable")
    chips_sorted = chips_all[has][order]
    counts = np.bincount(chip_dom[has], minlength=int(dom.max()) + 1)
    need = counts[dom[devices]]
    if np.any(need == 0) or np.any(need != need.flat[0]):
        return None  # a domain without switch chips, or domains with unlike switch counts
    K = int(need.flat[0])
    first = np.concatenate([[0], np.cumsum(counts)[:-1]])
    gpu = np.repeat(devices.ravel(), K)
    chip = chips_sorted[(first[dom[devices.ravel()]][:, None] + np.arange(K)).ravel()]
    up, down = devices[:, child].ravel(), devices[:, parent].ravel()  # tree edges across domains, every group
    src = np.concatenate([gpu, chip, up, down])
    dst = np.concatenate([chip, gpu, down, up])
    sz = np.concatenate([np.full(2 * gpu.size, size / K / factor),
                         np.full(2 * up.size, size / (2 * channels) / model.efficiency[NETWORK])])
    tag = np.concatenate([np.tile(np.repeat(np.arange(G), n * K), 2), np.tile(np.repeat(np.arange(G), child.size), 2)])
    flows = FlowTable.build(src, dst, sz, start, None, 1, tag)
    prob, graph, arcs = sim.problem(flows, ecmp=ecmp, seed=seed, field="ranks")
    sched = schedule(prob, method)
    t = np.zeros(G)
    np.maximum.at(t, flows.tag, sched.tx_end - sched.release)
    lat = prob.route_latency[prob.route]
    net = path_codes(fabric, flows.src, flows.dst) == NETWORK
    up_down, level = np.zeros(G), np.zeros(G)
    np.maximum.at(up_down, flows.tag[~net], lat[~net])
    np.maximum.at(level, flows.tag[net], lat[net])
    latency = np.maximum(model.nvls_latency, 2 * up_down) + 2 * depth * np.maximum(model.nvls_tree_step, level)
    return RingTiming(latency + t, Protocol.SIMPLE, 1, channels, flows, prob, sched, graph, arcs)


def with_protocol(fabric: Fabric, table: FlowTable, model: NcclModel, protocol: str, tree: bool) -> FlowTable:
    """A flow DAG run under an NCCL protocol: wire bytes, per-step latency by path type, base latency."""
    if len(table) == 0:
        return table
    path = path_codes(fabric, table.src, table.dst)
    wire = np.asarray(table.size, dtype=np.float64) / (model.payload[protocol] * model.efficiency[path])
    step = (model.tree_step if tree else model.ring_step)[protocol][path]
    start = np.asarray(table.start, dtype=np.float64) + model.base_latency[protocol]
    return dataclasses.replace(table, size=wire, latency=step, start=start)


def ring_steps(name: str) -> int:
    """Steps of a ring collective per rank count ``n``: a function n -> steps."""
    return 2 if name == CollectiveName.ALL_REDUCE else 1


@dataclass(frozen=True)
class RingTiming:
    """One-step simulation of a multi-channel ring, timed for every protocol.

    Attributes
    ----------
    time_s : ndarray, shape (G,)
        Collective time of every group, seconds.
    protocol : str
    steps, channels : int
    step_flows, step_problem, step_schedule, step_graph, step_arcs
        The flows of one step, as routed and scheduled.
    pieces : int
        Pipeline pieces each step flow stands for (a broadcast's; 1 for rings, whose steps are counted).
    """

    time_s: np.ndarray
    protocol: str
    steps: int
    channels: int
    step_flows: FlowTable
    step_problem: object
    step_schedule: object
    step_graph: object
    step_arcs: object
    pieces: int = 1


def time_ring(sim, fabric: Fabric, name: str, devices: np.ndarray, size: float, protocol: str, channels: int,
              model: NcclModel, method: str, ecmp: str, seed: int, start: float) -> RingTiming:
    """Time a ring reduce-scatter / all-gather / all-reduce on ``channels`` snake rings (module docstring).

    Where NCCL could lay the rings out in more than one way
    (:func:`ring_order_candidates`), each is timed and the fastest kept.
    """
    best = None
    for orders in ring_order_candidates(fabric, devices[0], channels):
        rt = _time_ring_layout(sim, fabric, name, devices, size, protocol, orders, model, method, ecmp, seed, start)
        if best is None or rt.time_s.max() < best.time_s.max():
            best = rt
    return best


def _time_ring_layout(sim, fabric: Fabric, name: str, devices: np.ndarray, size: float, protocol: str,
                      orders: np.ndarray, model: NcclModel, method: str, ecmp: str, seed: int,
                      start: float) -> RingTiming:
    """:func:`time_ring` on one layout: ``orders`` (C, n), the rank positions of every channel's ring."""
    from fabric.sim.engine import schedule

    G, n = devices.shape
    k = ring_steps(name) * (n - 1)
    C = orders.shape[0]
    pos_src = orders
    pos_dst = np.roll(orders, -1, axis=1)
    src = devices[:, pos_src]                                     # (G, C, n)
    dst = devices[:, pos_dst]
    chunk = size / (n * C)
    path = path_codes(fabric, src.ravel(), dst.ravel())
    ideal = protocol == Protocol.NONE
    wire = np.full(src.size, chunk) if ideal else chunk / model.efficiency[path]
    tag = np.repeat(np.arange(G), C * n)
    flows = FlowTable.build(src.ravel(), dst.ravel(), wire, start, None, 1, tag)
    prob, graph, arcs = sim.problem(flows, ecmp=ecmp, seed=seed, field="ranks")
    sched = schedule(prob, method)
    tx = (sched.tx_end - sched.release).reshape(G, C * n).max(axis=1)   # Simple (or ideal) step time per group
    hop = prob.route_latency[prob.route].reshape(G, C, n)
    candidates = [Protocol.NONE] if ideal else (NCCL_PROTOCOLS if protocol == Protocol.AUTO else [protocol])
    best_t, best_p = None, None
    path = path.reshape(G, C, n)
    for p in candidates:
        lat = hop if ideal else ring_step_latency(hop, path, model, p)
        chain = _max_window(lat, k)                                           # (G,)
        base = 0.0 if ideal else model.base_latency[p]
        scale = 1.0 if ideal else 1.0 / model.payload[p]
        transfer = k * tx * scale
        if p == Protocol.LL:  # the ring moves k/n of the buffer per rank: its bus bytes
            transfer = np.maximum(transfer, size * k / n / ll_max_busbw(fabric, devices[0], model))
        t = base + transfer + chain
        if best_t is None or t.max() < best_t.max():
            best_t, best_p = t, p
    return RingTiming(best_t, best_p, k, C, flows, prob, sched, graph, arcs)


def time_broadcast(sim, fabric: Fabric, devices: np.ndarray, size: float, root: int, protocol: str, channels: int,
                   model: NcclModel, method: str, ecmp: str, seed: int, start: float) -> RingTiming:
    """Time a ring broadcast as NCCL pipelines it: every channel's ring, cut at the root, is a chain.

    NCCL runs broadcast on its rings only (no tree).  Channel ``c`` carries ``S / C``, cut into pieces of one
    protocol step (:attr:`NcclModel.broadcast_chunk`: 512 KiB with Simple); a piece leaves a rank once it has
    arrived, so with ``n`` ranks and ``K`` pieces of ``P`` bytes the last rank holds everything after

        base latency + sum over hops of d_h + (K - 1) max_h d_h + (latency along the chain's n - 1 hops),

    the pipeline form, ``d_h`` a piece's transfer time over hop ``h``, simulated as every hop of every channel
    sends at once (the steady state; max-min sharing of NVLink and NICs), as :func:`time_ring` times a ring
    step.  As ``K P = S / C``, that is the buffer through the slowest hop plus ``P / (S / C)`` of it through
    every other hop: the pipeline fill, which a fixed number of pieces of ``S / chunks`` made ``(n - 2) /
    chunks`` of the whole transfer on a uniform chain (a 1 GiB broadcast over 16,384 GPUs in 8 pieces took
    11 s).  With the same pieces and hops that share no link this is the flow DAG's pipelined chain; the
    tests check it.  ``root`` is the root's position in ``devices``' rows; ``protocol`` ``none`` is the ideal model
    (no latency but the physical path's, no protocol overhead, the flow DAG's ``DEFAULT_CHUNKS`` pieces).
    """
    from fabric.sim.engine import schedule

    G, n = devices.shape
    best = None
    for orders in ring_order_candidates(fabric, devices[0], channels):
        C = orders.shape[0]
        # each channel's ring read from the root: its n - 1 hops, the hop back into the root left out
        at = np.argmax(orders == root, axis=1)
        chain = np.take_along_axis(orders, (at[:, None] + np.arange(n)[None, :]) % n, axis=1)
        src, dst = devices[:, chain[:, :-1]], devices[:, chain[:, 1:]]        # (G, C, n - 1)
        path = path_codes(fabric, src.ravel(), dst.ravel())
        ideal = protocol == Protocol.NONE
        body = size / C                                                       # bytes per channel
        wire = np.full(src.size, body) if ideal else body / model.efficiency[path]
        tag = np.repeat(np.arange(G), C * (n - 1))
        flows = FlowTable.build(src.ravel(), dst.ravel(), wire, start, None, 1, tag)
        prob, graph, arcs = sim.problem(flows, ecmp=ecmp, seed=seed, field="ranks")
        sched = schedule(prob, method)
        tx = (sched.tx_end - sched.release).reshape(G, C, n - 1)              # S / C through each hop
        slowest, others = tx.max(axis=2), tx.sum(axis=2) - tx.max(axis=2)
        hop = prob.route_latency[prob.route].reshape(G, C, n - 1)
        path = path.reshape(G, C, n - 1)
        for p in [Protocol.NONE] if ideal else (NCCL_PROTOCOLS if protocol == Protocol.AUTO else [protocol]):
            lat = hop if ideal else ring_step_latency(hop, path, model, p)
            # the ideal model pipelines the flow DAG's default pieces (collectives.DEFAULT_CHUNKS)
            piece = body / DEFAULT_CHUNKS if ideal else min(model.broadcast_chunk[p], body)
            scale = 1.0 if ideal else 1.0 / model.payload[p]
            # a pipeline of n - 1 stages: the first piece through every hop, then K - 1 more behind the slowest
            transfer = (scale * (slowest + piece / body * others)).max(axis=1)
            if p == Protocol.LL:  # a broadcast's bus bytes are the buffer
                transfer = np.maximum(transfer, size / ll_max_busbw(fabric, devices[0], model))
            t = (0.0 if ideal else model.base_latency[p]) + transfer + lat.sum(axis=2).max(axis=1)
            if best is None or t.max() < best.time_s.max():
                best = RingTiming(t, p, 1, C, flows, prob, sched, graph, arcs, int(np.ceil(body / piece)))
    return best


def ring_step_latency(physical: np.ndarray, path: np.ndarray, model: NcclModel, protocol: str) -> np.ndarray:
    """Latency of every ring step under ``protocol``: ``max(step latency, physical path latency)``.

    The step latency is NCCL's hwLat for the step's path type; once a ring
    crosses the network its intra-node steps cost at least the network post
    overhead (tuning.cc: ``intraLat = max(intraLat, netOverhead)``).  Seconds,
    the shape of ``physical``.
    """
    step = model.ring_step[protocol][path]
    if np.any(path == NETWORK):
        step = np.where(path == NETWORK, step, np.maximum(step, model.net_overhead[protocol]))
    return np.maximum(physical, step)


def ll_max_busbw(fabric: Fabric, devices: np.ndarray, model: NcclModel) -> float:
    """Most bus bandwidth of the LL protocol over one group's ``devices`` (bytes/s), by its number of nodes.

    LL sends 8-byte stores that carry their own flag, polled by the receiver;
    NCCL's tuner caps its bus bandwidth at a measured ceiling by node count
    (tuning.cc ``llMaxBws``), which binds from a few KiB up and sets how an
    LL collective grows with size.  Nodes are HBD domains here.
    """
    return ll_max_busbw_of(model, len(domain_rows(fabric, devices)))


def ll_max_busbw_of(model: NcclModel, nodes: int) -> float:
    """NCCL's ``llMaxBw`` (bytes/s) for a communicator over ``nodes`` nodes: one, two, or more."""
    return float(model.ll_max_busbw[min(nodes, 3) - 1])


def _max_window(lat: np.ndarray, k: int) -> np.ndarray:
    """Largest sum of ``k`` consecutive (cyclic) hop latencies per group: ``lat`` (G, C, n) -> (G,)."""
    G, C, n = lat.shape
    if k == 0:
        return np.zeros(G)
    reps = k // n + 2
    cs = np.concatenate([np.zeros((G, C, 1)), np.cumsum(np.tile(lat, (1, 1, reps)), axis=2)], axis=2)
    win = cs[:, :, k:k + n] - cs[:, :, :n]
    return win.max(axis=(1, 2))


# NCCL's tuner (src/graph/tuning.cc, v2.28: ncclTopoTuneModel, ncclTopoGetAlgoTime): the factors by which it
# turns a ring's bus bandwidth into its prediction for a tree, and ring into algorithm bandwidth.  These are
# NCCL's software model, not hardware figures; they decide which algorithm NCCL runs, not how fast it runs.
TUNER_TREE_BUS = 0.92          # tree busBw = 0.92 x the graph's (Simple)
TUNER_TREE_ALG = 0.5           # tree algBw = busBw / 2 (ring: nRanks / nsteps)
TUNER_TREE_LL = 1 / 3.8        # tree LL busBw x 1/3.8, at most llMaxBw
TUNER_TREE_LL128 = (7 / 9, 120 / 128)  # tree LL128 busBw factor on one node, on several
TUNER_RING_LL = 0.5            # ring LL busBw x 0.5, at most llMaxBw
TUNER_RING_LL128 = 0.92        # ring LL128 busBw x 0.92 (~120/128)
TUNER_RING_PLATEAU = 1.4       # ring Simple all-reduce over several nodes: latency x 1.4 (1.9 before sm80)
#: treeCorrectionFactor[protocol][log2(bytes / 64)] for 64 B to 256 MiB (LL, LL128, Simple); 1 above
TUNER_TREE_CORRECTION = {
    Protocol.LL: (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    Protocol.LL128: (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0,
                     1.0),
    Protocol.SIMPLE: (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
}


def tuner_times(model: NcclModel, size: float, n: int, nodes: int, ring_busbw: float, channels: int,
                intra_path: int = HBD, protocols=NCCL_PROTOCOLS) -> dict:
    """NCCL's own predicted time (seconds) of a ring and of a tree all-reduce, per protocol.

    This is the tuner's model (tuning.cc ``ncclTopoTuneModel`` and ``ncclTopoGetAlgoTime``): latency from its
    tables (the catalog's ``nccl_*`` entries), bandwidth from the ring's bus bandwidth ``ring_busbw`` (bytes/s,
    Simple; the simulator's, where NCCL uses its topology search's) scaled by NCCL's per-algorithm factors.
    NCCL runs the (algorithm, protocol) it predicts fastest; it predicts a tree's bus bandwidth at 0.92 of the
    ring's and halves it into algorithm bandwidth, so for large buffers it always prefers the ring, even where a
    tree would move fewer bytes over the network (two nodes).  Left out: the per-channel caps
    (``perChMax*Bw``, by GPU generation), which only lower the tree's prediction further.

    Parameters
    ----------
    size : float
        Bytes per rank.
    n, nodes : int
        Ranks, and the nodes (HBD domains) they span.
    ring_busbw : float
        The ring's bus bandwidth with the Simple protocol, bytes/s.
    channels : int
        The ring's channels (NCCL's plateau rule reads bytes per channel and rank).
    intra_path : int
        Path code of a step inside a node (:data:`HBD` or :data:`PCIE`).
    protocols : sequence of str

    Returns
    -------
    dict
        ``{(algorithm, protocol): seconds}`` for ring and tree.
    """
    out = {}
    nsteps = 2 * (n - 1)
    n_inter = 2 * (nodes - 1) if nodes > 1 else 0
    ppn = n / nodes
    levels = int(np.floor(np.log2(nodes))) if nodes > 1 else 0
    log_size = int(np.floor(np.log2(size / 64))) if size >= 64 else -1
    llmax = ll_max_busbw_of(model, nodes)
    # a ring step inside a node, and the network path that makes its floor apply (none on one node)
    ring_paths = np.array([intra_path, NETWORK if nodes > 1 else intra_path])
    for p in protocols:
        if p not in NCCL_PROTOCOLS:
            continue
        # ring
        intra = float(ring_step_latency(np.zeros(2), ring_paths, model, p)[0])
        inter = float((model.ring_step if ppn > 1 else model.tree_step)[p][NETWORK])
        lat = model.base_latency[p] + (nsteps - n_inter) * intra + n_inter * inter
        if p == Protocol.SIMPLE and nodes > 1 and size / (channels * n) >= 64:
            lat *= TUNER_RING_PLATEAU
        bus = ring_busbw if p == Protocol.SIMPLE else (
            min(llmax, ring_busbw * TUNER_RING_LL) if p == Protocol.LL else ring_busbw * TUNER_RING_LL128)
        out[(Algorithm.RING, p)] = lat + size / (bus * n / nsteps)
        # tree
        lat = model.tree_base_latency[p] + 2 * ((ppn - 1) * float(model.tree_step[p][intra_path])
                                                + levels * float(model.tree_step[p][NETWORK]))
        bus = ring_busbw * TUNER_TREE_BUS
        if p == Protocol.LL:
            bus = min(bus * TUNER_TREE_LL, llmax)
        elif p == Protocol.LL128:
            bus *= TUNER_TREE_LL128[nodes > 1]
        alg = bus * TUNER_TREE_ALG
        if 0 <= log_size < len(TUNER_TREE_CORRECTION[p]):
            alg *= TUNER_TREE_CORRECTION[p][log_size]
        out[(Algorithm.TREE, p)] = lat + size / alg
    return out


def tuner_prefers_tree(model: NcclModel, fabric: Fabric, devices: np.ndarray, size: float, ring_busbw: float,
                       channels: int, protocols=NCCL_PROTOCOLS) -> bool:
    """Whether NCCL's tuner runs a tree rather than a ring for this all-reduce (:func:`tuner_times`).

    ``devices``: one group's ranks; nodes are its HBD domains, and a step inside one is PCIe only where the
    group's intra-domain hops all are.
    """
    rows = domain_rows(fabric, devices)
    n = int(devices.size)
    intra_path = HBD
    pairs = [(devices[r[:-1]], devices[r[1:]]) for r in rows if r.size > 1]
    if pairs:
        codes = path_codes(fabric, np.concatenate([a for a, _ in pairs]), np.concatenate([b for _, b in pairs]))
        if np.all(codes == PCIE):
            intra_path = PCIE
    t = tuner_times(model, size, n, len(rows), ring_busbw, channels, intra_path, protocols)
    if not t:  # no NCCL protocol asked (the ideal flow model): no tuner
        return False
    ring = min(v for (a, _), v in t.items() if a == Algorithm.RING)
    tree = min(v for (a, _), v in t.items() if a == Algorithm.TREE)
    return tree < ring


SIMPLE_ONLY = (Algorithm.NVLS, Algorithm.NVLS_TREE, Algorithm.SHARP)
"""Algorithms NCCL runs only with its Simple protocol (in-switch and in-network reduction)."""


def candidates(name: str, algorithm: str, nvls: float | None, n: int, sharp: float | None = None,
               nvls_tree: float | None = None, protocol: str = Protocol.AUTO) -> list:
    """The algorithms ``auto`` tries (all-reduce: ring, tree, NVLS / NVLS tree / SHARP where switches reduce),
    else the one asked.

    NVLS, NVLS tree and SHARP run only with Simple, so a protocol pinned to another (``ll``, ``ll128``,
    ``none``) leaves them out: the run returned is then always one of the protocol asked for.
    """
    if algorithm != Algorithm.AUTO:
        return [algorithm]
    if name == CollectiveName.ALL_REDUCE:
        out = [Algorithm.RING]
        if n > 2:
            out.append(Algorithm.TREE)
        if protocol not in (Protocol.AUTO, Protocol.SIMPLE):
            return out
        if nvls is not None:
            out.append(Algorithm.NVLS)
        if nvls_tree is not None:
            out.append(Algorithm.NVLS_TREE)
        if sharp is not None:
            out.append(Algorithm.SHARP)
        return out
    from fabric.sim.collectives import default_algorithm

    return [default_algorithm(name)]


def tree_edges(fabric: Fabric, devices: np.ndarray, channels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Edges (child, parent rank positions) of NCCL's trees over one group, and the tree depth.

    Per channel ``c`` and per tree of a double binary tree: inside every HBD
    domain a chain over its ranks rotated by ``c`` toward the first (the
    domain's endpoint, on rail ``c``); across domains a balanced binary tree
    over the domains between the endpoints (:func:`double_binary_tree`).
    Returns child and parent positions, the channel of every edge, and the
    depth (network hops from the deepest domain to the root).
    """
    n = devices.size
    dm = _domain_matrix_or_one(fabric, devices)
    m, h = dm.shape
    child, parent, chan = [], [], []
    trees = double_binary_tree(m)
    for c in range(channels):
        rot = dm[:, (np.arange(h) + c) % h]
        for up in trees:
            child.append(rot[:, 1:].ravel()), parent.append(rot[:, :-1].ravel())  # chains, toward the endpoint
            nonroot = np.flatnonzero(up >= 0)
            child.append(rot[nonroot, 0]), parent.append(rot[up[nonroot], 0])
            chan.append(np.full((h - 1) * m + nonroot.size, c))
    depth = max(int(_depths(up).max()) for up in trees) if m else 0
    return np.concatenate(child), np.concatenate(parent), np.concatenate(chan), depth


def binary_tree(m: int) -> np.ndarray:
    """NCCL's binary tree over ``0..m-1`` (src/graph/trees.cc ncclGetBtree): parent of every rank, -1 for the root.

    Rank ``r > 0`` with lowest set bit ``b`` hangs under ``(r ^ b) | 2b`` (or
    ``r ^ b`` past the end); odd ranks are the leaves.

    Examples
    --------
    >>> binary_tree(8).tolist()
    [-1, 2, 4, 2, 0, 6, 4, 6]
    """
    up = np.full(m, -1, dtype=np.int64)
    for r in range(1, m):
        b = r & -r
        p = (r ^ b) | (b << 1)
        up[r] = p if p < m else r ^ b
    return up


def double_binary_tree(m: int) -> tuple[np.ndarray, np.ndarray]:
    """NCCL's two trees (trees.cc ncclGetDtree): the binary tree, and its mirror (even m) or shift by one (odd m),
    so that a rank that is a leaf in one tree is inside the other."""
    t1 = binary_tree(m)
    r = np.arange(m)
    if m % 2 == 0:
        img = m - 1 - r                       # rank r plays rank m-1-r of the first tree
        t2 = np.where(t1[img] >= 0, m - 1 - t1[img], -1)
    else:
        img = (r - 1) % m
        t2 = np.where(t1[img] >= 0, (t1[img] + 1) % m, -1)
    return t1, t2


def _depths(parent: np.ndarray) -> np.ndarray:
    out = np.zeros(parent.size, dtype=np.int64)
    for p in range(parent.size):
        q, k = p, 0
        while parent[q] >= 0:
            q, k = parent[q], k + 1
        out[p] = k
    return out


def time_tree(sim, fabric: Fabric, devices: np.ndarray, size: float, protocol: str, channels: int,
              model: NcclModel, method: str, ecmp: str, seed: int, start: float) -> RingTiming:
    """Time NCCL's pipelined tree all-reduce (:func:`tree_edges`) from its steady state.

    Pipelined over many pieces, every edge of both trees carries its share
    up (reduce) and down (broadcast) at once; the simulator runs all of them
    together (max-min sharing) and the slowest edge sets the bandwidth term.
    The latency term is NCCL's: tree base latency + ``2 ((h-1) intra +
    depth inter)`` step latencies, each ``max(NCCL step, physical path)``;
    ``depth`` is the double binary tree's depth over the domains (log2 of
    their number).
    """
    from fabric.sim.engine import schedule

    G, n = devices.shape
    child, parent, chan, depth = tree_edges(fabric, devices[0], channels)
    h = n // max(1, int(np.unique(fabric.group("domain")[devices[0]]).size)) if n else 1
    # Channels whose trees share an edge send identical flows over it (same ends, bytes and start: the
    # channels reuse one chain inside a domain).  Routing reads only the two ends (ideal ECMP splits, hashing
    # hashes the pair), so they share a route and, max-min being symmetric, one rate at every instant: one
    # row with their count stands for them exactly (two TPUv4 pods, 8,192 chips, 64 channels: 2,096,896 tree
    # flows over 16,512 distinct edges, 20 s and 1.3 GB before)
    src_pos, dst_pos, copies = _distinct_edges(np.concatenate([child, parent]), np.concatenate([parent, child]), n)
    src, dst = devices[:, src_pos], devices[:, dst_pos]
    share = size / (2 * channels)                       # each of 2 trees x C channels
    path = path_codes(fabric, src.ravel(), dst.ravel())
    ideal = protocol == Protocol.NONE
    wire = np.full(src.size, share) if ideal else share / model.efficiency[path]
    E = src_pos.size
    flows = FlowTable.build(src.ravel(), dst.ravel(), wire, start, None, np.tile(copies, G),
                            np.repeat(np.arange(G), E))
    prob, graph, arcs = sim.problem(flows, ecmp=ecmp, seed=seed, field="ranks")
    sched = schedule(prob, method)
    tx = (sched.tx_end - sched.release).reshape(G, E).max(axis=1)
    hop = prob.route_latency[prob.route].reshape(G, E)
    pth = path.reshape(G, E)
    candidates_p = [Protocol.NONE] if ideal else (NCCL_PROTOCOLS if protocol == Protocol.AUTO else [protocol])
    best_t, best_p = None, None
    for p in candidates_p:
        lat = hop if ideal else np.maximum(hop, model.tree_step[p][pth])
        intra = np.where(pth == HBD, lat, 0).max(axis=1) if (pth == HBD).any() else np.zeros(G)
        inter = np.where(pth != HBD, lat, 0).max(axis=1)
        chain = 2 * ((h - 1) * intra + depth * inter)
        base = 0.0 if ideal else model.tree_base_latency[p]
        transfer = tx * (1.0 if ideal else 1.0 / model.payload[p])
        if p == Protocol.LL:  # NCCL's tree moves 2 S of bus bytes (algbw = busbw / 2, tuning.cc)
            transfer = np.maximum(transfer, 2 * size / ll_max_busbw(fabric, devices[0], model))
        t = base + chain + transfer
        if best_t is None or t.max() < best_t.max():
            best_t, best_p = t, p
    return RingTiming(best_t, best_p, 1, channels, flows, prob, sched, graph, arcs)


def _distinct_edges(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct (src, dst) position pairs (positions < ``n``), in order, and how often each occurs.

    By a sort of one int64 key per pair: ``np.unique(..., axis=1)`` sorts a structured view, 3.2 s of a
    tree over 16,384 TPUv4 chips (4.2M pairs).

    Examples
    --------
    >>> [a.tolist() for a in _distinct_edges(np.array([1, 0, 1]), np.array([2, 1, 2]), 3)]
    [[0, 1], [1, 2], [1, 2]]
    """
    key = np.sort(src.astype(np.int64) * n + dst)
    first = np.flatnonzero(np.concatenate([[True], key[1:] != key[:-1]])) if key.size else np.zeros(0, np.int64)
    copies = np.diff(np.append(first, key.size))
    return key[first] // n, key[first] % n, copies


def sharp_factor(fabric: Fabric, catalog: Catalog | None = None) -> float | None:
    """The SHARP efficiency if the Fabric's DCN packet switches reduce in the network (catalog ``sharp_factor``)."""
    cat = catalog or load_catalog()
    factors = [cat.get(line.item).values.get("sharp_factor") for line in fabric.bom
               if line.scope == "dcn" and line.item in cat]
    factors = [f for f in factors if f is not None]
    return min(factors) if factors else None


def _switch_neighbours(fabric: Fabric) -> tuple[np.ndarray, np.ndarray]:
    """Active links between devices, both directions: (from, to)."""
    A = fabric.active_links()
    return np.concatenate([A.src, A.dst]), np.concatenate([A.dst, A.src])


def time_sharp(sim, fabric: Fabric, devices: np.ndarray, size: float, factor: float, model: NcclModel,
               method: str, ecmp: str, seed: int, start: float) -> "RingTiming | None":
    """Time SHARP all-reduce (reduction in the DCN switches, NCCL's CollNet) from its steady state.

    Inside every HBD domain the ``h`` ranks reduce-scatter and all-gather
    (``S / h`` to each peer each way); rank ``r`` of every domain sends its
    shard ``S / h`` (wire ``/ factor``) to its ToR, every ToR sends one reduced
    stream to a switch that all of them reach (the root), and the result
    comes back the same way: each NIC carries ``S / h`` each way instead of a
    ring's ``2 (m-1)/m S / h``.  All flows run at once (pipelined).  None if
    the group sits in one domain, its domains hold unequal numbers of ranks,
    or the ToRs of a rail share no switch.
    """
    from fabric.sim.engine import schedule

    G, n = devices.shape
    try:
        dm = domain_matrix(devices[0], fabric.group("domain"))
    except FabricError:
        return None
    m, h = dm.shape
    if m < 2:
        return None
    kind = fabric.devices.kind
    a, b = _switch_neighbours(fabric)
    switch_kinds = (DeviceKind.TOR, DeviceKind.AGG, DeviceKind.CORE)

    def first_switch(gpu: int) -> int:
        hop = b[(a == gpu) & (kind[b] == DeviceKind.NIC)]
        nxt = b[np.isin(a, hop if hop.size else [gpu]) & np.isin(kind[b], switch_kinds)]
        return int(nxt[0]) if nxt.size else -1

    src, dst, sz, tag = [], [], [], []
    for g in range(G):
        pos = dm
        for row in pos:  # reduce-scatter + all-gather inside the domain, streaming together
            i, j = np.meshgrid(row, row, indexing="ij")
            off = i != j
            src.append(devices[g, i[off]]), dst.append(devices[g, j[off]])
            k = int(off.sum())
            sz.append(np.full(k, 2 * size / h / model.efficiency[HBD])), tag.append(np.full(k, g))
        for r in range(h):
            gpus = devices[g, pos[:, r]]
            tors = np.array([first_switch(int(x)) for x in gpus])
            if np.any(tors < 0):
                return None
            uniq = np.unique(tors)
            if uniq.size == 1:
                root = int(uniq[0])
            else:
                common = None
                for t in uniq:
                    nb = set(b[(a == t) & np.isin(kind[b], switch_kinds)].tolist())
                    common = nb if common is None else common & nb
                if not common:
                    return None
                root = sorted(common)[r % len(common)]  # one aggregation root per rail, spread over the switches
            ups = [(int(x), int(t)) for x, t in zip(gpus, tors)] + [(int(t), root) for t in uniq if t != root]
            for s_, d_ in ups + [(d_, s_) for s_, d_ in ups]:
                src.append(np.array([s_])), dst.append(np.array([d_]))
                sz.append(np.array([size / h / factor])), tag.append(np.array([g]))
    flows = FlowTable.build(np.concatenate(src), np.concatenate(dst), np.concatenate(sz), start, None, 1,
                            np.concatenate(tag))
    prob, graph, arcs = sim.problem(flows, ecmp=ecmp, seed=seed, field="ranks")
    sched = schedule(prob, method)
    tx = np.zeros(G)
    np.maximum.at(tx, flows.tag, sched.tx_end - sched.release)
    lat = prob.route_latency[prob.route]
    path_lat = np.zeros(G)
    np.maximum.at(path_lat, flows.tag, lat)
    t = (model.base_latency[Protocol.SIMPLE]
         + np.maximum(2 * model.ring_step[Protocol.SIMPLE][HBD] + model.sharp_latency, 4 * path_lat) + tx)
    return RingTiming(t, Protocol.SIMPLE, 1, 1, flows, prob, sched, graph, arcs)
