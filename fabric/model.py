"""The Fabric model: devices, full-duplex links, groupings, HBD kind, OCS state, bill of materials.

Storage is columnar (numpy arrays per attribute) rather than a dict per edge:
a 100k-GPU cluster has ~10^6 links, and the simulator, the fault samplers and
the cost model all want vectors anyway.  :meth:`Fabric.to_networkx` gives the
networkx view (one node per device, one edge per link, all attributes) for
anything that wants graph algorithms or a file export.

Links are full-duplex; ``capacity`` is bytes/s *per direction*.  Every link has
explicit port numbers at both ends, unique per device (cabling plans need
them); they are assigned in link order when the Fabric is built.

Optical links come in three states:

* ``static``: always lit (a fibre between two packet switches, a copper cable);
* ``candidate``: a physical optical path that an OCS transceiver may light or
  not (the k-hop ring's paths to nodes i+-1..i+-k);
* ``ocs_port``: a fibre from a device into a port of an OCS; it carries traffic
  only when a *circuit* inside the OCS joins it to another port.

A :class:`Configuration` chooses the lit candidates and the circuits;
:meth:`Fabric.active_links` turns it into the graph that traffic sees.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum, IntEnum
from typing import Any

import numpy as np

from fabric.limits import check_fabric_size
from fabric.errors import FabricError


class DeviceKind(IntEnum):
    """What a device is.  ``switch_chip`` is an HBD switch ASIC (NVSwitch)."""

    GPU = 0
    NIC = 1
    SWITCH_CHIP = 2
    TOR = 3
    AGG = 4
    CORE = 5
    OCS = 6

    @property
    def label(self) -> str:
        return _KIND_LABELS[self]


_KIND_LABELS = {
    DeviceKind.GPU: "gpu",
    DeviceKind.NIC: "nic",
    DeviceKind.SWITCH_CHIP: "switch_chip",
    DeviceKind.TOR: "tor",
    DeviceKind.AGG: "agg",
    DeviceKind.CORE: "core",
    DeviceKind.OCS: "ocs",
}
KIND_BY_LABEL = {v: k for k, v in _KIND_LABELS.items()}
PACKET_SWITCH_KINDS = (DeviceKind.TOR, DeviceKind.AGG, DeviceKind.CORE)


class Medium(IntEnum):
    PCB = 0
    COPPER = 1
    FIBER = 2


class Layer(IntEnum):
    HBD = 0
    DCN = 1


class LinkState(IntEnum):
    STATIC = 0
    CANDIDATE = 1
    OCS_PORT = 2


MEDIUM_BY_LABEL = {"pcb": Medium.PCB, "copper": Medium.COPPER, "fiber": Medium.FIBER}
LAYER_BY_LABEL = {"hbd": Layer.HBD, "dcn": Layer.DCN}
STATE_BY_LABEL = {"static": LinkState.STATIC, "candidate": LinkState.CANDIDATE, "ocs_port": LinkState.OCS_PORT}

GROUPS = ("node", "rack", "tor", "pod", "cube", "domain", "position")
"""Groupings every device carries (-1 where it does not apply).

node: server / compute tray / host; rack; tor: the ToR a GPU's NIC attaches to;
pod; cube (TPU); domain: the HBD domain (NVLink domain, TPU cube, k-hop line,
torus); position: the node's index along a k-hop line.
"""

SCOPES = ("compute", "hbd", "dcn")


class HBDKind(str, Enum):
    """What a fabric's high-bandwidth domain is (a ``str``: ``HBDKind.TORUS == "torus"``).

    Solvers pick their allocation policy by it; code asks it, never the architecture's name.
    """

    SWITCH_DOMAIN = "switch_domain"  # DGX, NVL: a switch joins every GPU of a domain
    OCS_CUBE = "ocs_cube"            # TPUv4: cubes joined into slices by OCS
    KHOP_LINE = "khop_line"          # InfiniteHBD: a line of nodes, optical paths up to k nodes apart
    TORUS = "torus"                  # GPU-centric torus
    NONE = "none"                    # no scale-up fabric

    __str__ = str.__str__
    __format__ = str.__format__


@dataclass(frozen=True)
class HBDSpec:
    """Plain-data description of a fabric's high-bandwidth domain, read by solvers.

    Attributes
    ----------
    kind : HBDKind
        ``switch_domain`` (DGX, NVL), ``ocs_cube`` (TPUv4), ``khop_line``
        (InfiniteHBD k-hop ring), ``torus`` (GPU-centric torus), ``none``;
        a plain string is converted.
    gpus_per_node : int
        GPUs per node/server/tray: the unit a node fault takes down.
    domain_gpus : int
        GPUs per HBD domain (switch domain, the whole OCS pod, the whole line,
        the whole torus).
    tp_multiple_of : int
        A TP group size must be a multiple of this (the node size for
        k-hop, 1 for switch domains).
    max_tp : int
        Largest TP group that fits one domain.
    k : int
        k-hop reach (``khop_line`` only).
    closed : bool
        The line of nodes closes into a ring / the torus wraps around.
    dims : tuple of int
        Torus dimensions in GPUs, or cube shape for ``ocs_cube``.
    cube_gpus : int
        GPUs per cube (``ocs_cube``).
    """

    kind: HBDKind
    gpus_per_node: int
    domain_gpus: int
    tp_multiple_of: int = 1
    max_tp: int = 0
    k: int = 0
    closed: bool = False
    dims: tuple[int, ...] = ()
    cube_gpus: int = 0

    def __post_init__(self):
        try:
            object.__setattr__(self, "kind", HBDKind(self.kind))
        except ValueError:
            raise FabricError("hbd.kind", f"{self.kind!r} not allowed; use one of "
                                          f"{', '.join(k.value for k in HBDKind)}") from None

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "kind": self.kind.value}


@dataclass(frozen=True)
class BomLine:
    """One line of the bill of materials: ``count`` of catalog ``item`` in ``scope``."""

    item: str
    scope: str
    count: int
    category: str
    note: str = ""


@dataclass(frozen=True)
class Configuration:
    """The active optical state: lit candidate links and OCS circuits.

    Attributes
    ----------
    active_candidates : ndarray of int
        Link ids (state ``candidate``) that are lit.
    circuits : ndarray of int, shape (m, 2)
        Pairs of ``ocs_port`` link ids joined by a circuit inside their OCS.
    """

    active_candidates: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    circuits: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))


@dataclass(frozen=True)
class ActiveLinks:
    """The links traffic can use under a configuration (an OCS circuit is one link).

    ``origin`` is the physical link id, or -1 for a circuit, whose two fibres
    are ``circuit_links[i]``.
    """

    src: np.ndarray
    dst: np.ndarray
    capacity: np.ndarray
    latency: np.ndarray
    layer: np.ndarray
    origin: np.ndarray
    circuit_links: np.ndarray

    def __len__(self) -> int:
        return int(self.src.shape[0])


@dataclass(frozen=True)
class Devices:
    kind: np.ndarray
    groups: dict[str, np.ndarray]
    names: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.kind.shape[0])


@dataclass(frozen=True)
class Links:
    src: np.ndarray
    dst: np.ndarray
    src_port: np.ndarray
    dst_port: np.ndarray
    capacity: np.ndarray
    latency: np.ndarray
    medium: np.ndarray
    layer: np.ndarray
    state: np.ndarray

    def __len__(self) -> int:
        return int(self.src.shape[0])


@dataclass(frozen=True)
class Fabric:
    """A built cluster interconnect.

    Build one with a generator in ``topologies`` (or :class:`FabricBuilder`);
    it is immutable, and :meth:`with_configuration` returns a copy with other
    OCS circuits.
    """

    architecture: str
    params: dict[str, Any]
    hbd: HBDSpec
    devices: Devices
    links: Links
    bom: tuple[BomLine, ...]
    configuration: Configuration
    notes: tuple[str, ...] = ()

    def __getstate__(self) -> dict:
        # the fields only: caches kept on the object (fabric.sim.simulator's Simulator) are rebuilt on use, and
        # pickling them made a simulated DGX of 16 GPUs 6x larger for a Dask worker or a deepcopy
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    # ----------------------------------------------------------------- devices
    @property
    def n_devices(self) -> int:
        return len(self.devices)

    def ids_of(self, kind: DeviceKind) -> np.ndarray:
        """Device ids of one kind, ascending."""
        return np.flatnonzero(self.devices.kind == kind)

    @property
    def gpu_ids(self) -> np.ndarray:
        return self.ids_of(DeviceKind.GPU)

    @property
    def n_gpus(self) -> int:
        return int(np.count_nonzero(self.devices.kind == DeviceKind.GPU))

    # ------------------------------------------------------------ structure
    def has_ocs_ports(self, layer: Layer) -> bool:
        """Whether OCS-port fibres exist in ``layer``: its circuits can be re-assigned.

        ``Layer.DCN``: an OCS core between aggregation and core (RFabric);
        ``Layer.HBD``: OCS-joined cubes (TPUv4).  Code asks this, not the architecture's name.
        """
        return bool(np.any((self.links.state == LinkState.OCS_PORT) & (self.links.layer == layer)))

    def group(self, name: str) -> np.ndarray:
        """Group id per device for grouping ``name`` (see :data:`GROUPS`)."""
        return self.devices.groups[name]

    def device_name(self, i: int) -> str:
        if self.devices.names is not None:
            return str(self.devices.names[i])
        kind = DeviceKind(int(self.devices.kind[i]))
        local = int(np.count_nonzero(self.devices.kind[:i] == kind))
        return f"{kind.label}{local}"

    def device_names(self) -> np.ndarray:
        """Names for all devices (``gpu0``, ``tor3``, ... unless given)."""
        if self.devices.names is not None:
            return self.devices.names
        kinds = self.devices.kind
        names = np.empty(len(kinds), dtype=object)
        for kind in DeviceKind:
            ids = np.flatnonzero(kinds == kind)
            names[ids] = [f"{kind.label}{j}" for j in range(len(ids))]
        return names

    # ------------------------------------------------------------------- links
    def active_links(self, configuration: Configuration | None = None) -> ActiveLinks:
        """The links traffic sees: static links, lit candidates, and one link per OCS circuit.

        A circuit joins the far ends of its two OCS-port fibres; its capacity is
        the smaller of the two and its latency their sum (an OCS mirror adds no
        measurable delay).
        """
        cfg = configuration or self.configuration
        L = self.links
        static = np.flatnonzero(L.state == LinkState.STATIC)
        lit = np.asarray(cfg.active_candidates, dtype=np.int64)
        phys = np.concatenate([static, lit])
        circuits = np.asarray(cfg.circuits, dtype=np.int64).reshape(-1, 2)
        a, b = circuits[:, 0], circuits[:, 1]
        ocs_a = self._far_end_from_ocs(a)
        ocs_b = self._far_end_from_ocs(b)
        src = np.concatenate([L.src[phys], ocs_a])
        dst = np.concatenate([L.dst[phys], ocs_b])
        cap = np.concatenate([L.capacity[phys], np.minimum(L.capacity[a], L.capacity[b])])
        lat = np.concatenate([L.latency[phys], L.latency[a] + L.latency[b]])
        layer = np.concatenate([L.layer[phys], L.layer[a]])
        origin = np.concatenate([phys, np.full(len(a), -1, dtype=np.int64)])
        return ActiveLinks(src, dst, cap, lat, layer, origin, circuits)

    def _far_end_from_ocs(self, link_ids: np.ndarray) -> np.ndarray:
        """For OCS-port fibres, the device at the end that is not the OCS."""
        L = self.links
        src, dst = L.src[link_ids], L.dst[link_ids]
        src_is_ocs = self.devices.kind[src] == DeviceKind.OCS
        return np.where(src_is_ocs, dst, src)

    def ocs_of_port_link(self, link_ids: np.ndarray) -> np.ndarray:
        """For OCS-port fibres, the OCS device they plug into."""
        L = self.links
        src, dst = L.src[link_ids], L.dst[link_ids]
        return np.where(self.devices.kind[src] == DeviceKind.OCS, src, dst)

    def with_configuration(self, configuration: Configuration) -> "Fabric":
        """A copy of this Fabric with another OCS configuration (validated)."""
        self.validate_configuration(configuration)
        return dataclasses.replace(self, configuration=configuration)

    def validate_configuration(self, cfg: Configuration) -> None:
        """Check that lit links are candidates and circuits pair free ports of one OCS."""
        L = self.links
        lit = np.asarray(cfg.active_candidates, dtype=np.int64)
        if lit.size:
            if lit.min() < 0 or lit.max() >= len(L) or np.any(L.state[lit] != LinkState.CANDIDATE):
                raise FabricError("configuration.active_candidates", "must be ids of candidate links")
            if np.unique(lit).size != lit.size:
                raise FabricError("configuration.active_candidates", "a candidate link is lit twice")
        circuits = np.asarray(cfg.circuits, dtype=np.int64).reshape(-1, 2)
        if circuits.size:
            flat = circuits.ravel()
            if flat.min() < 0 or flat.max() >= len(L) or np.any(L.state[flat] != LinkState.OCS_PORT):
                raise FabricError("configuration.circuits", "must pair ids of OCS-port links")
            if np.unique(flat).size != flat.size:
                raise FabricError("configuration.circuits", "an OCS port is used by two circuits")
            if np.any(self.ocs_of_port_link(circuits[:, 0]) != self.ocs_of_port_link(circuits[:, 1])):
                raise FabricError("configuration.circuits", "a circuit must join two ports of the same OCS")

    # ----------------------------------------------------------------- summary
    def inventory(self) -> dict[str, int]:
        """Catalog id -> count, summed over scopes."""
        inv: dict[str, int] = {}
        for line in self.bom:
            inv[line.item] = inv.get(line.item, 0) + int(line.count)
        return dict(sorted(inv.items()))

    def counts(self) -> dict[str, int]:
        """Headline counts of what was built (``fabric build`` prints these)."""
        kind = self.devices.kind
        L = self.links
        node = self.devices.groups["node"]
        gpu_nodes = node[kind == DeviceKind.GPU]
        hosts = int(np.unique(gpu_nodes[gpu_nodes >= 0]).size)
        ocs_ids = np.flatnonzero(kind == DeviceKind.OCS)
        ocs_port_links = L.state == LinkState.OCS_PORT
        by_category: dict[str, int] = {}
        for line in self.bom:
            by_category[line.category] = by_category.get(line.category, 0) + int(line.count)
        return {
            "gpus": int(np.count_nonzero(kind == DeviceKind.GPU)),
            "hosts": hosts,
            "nodes": hosts,
            "nics": int(np.count_nonzero(kind == DeviceKind.NIC)),
            "packet_switches": int(np.isin(kind, PACKET_SWITCH_KINDS).sum()),
            "switch_chips": int(np.count_nonzero(kind == DeviceKind.SWITCH_CHIP)),
            "ocs": int(ocs_ids.size),
            "ocs_ports": int(np.count_nonzero(ocs_port_links)),
            "links": int(len(L)),
            "optical_links": int(np.count_nonzero(L.medium == Medium.FIBER)),
            "optical_candidate_links": int(np.count_nonzero(L.state == LinkState.CANDIDATE)),
            "electrical_links": int(np.count_nonzero(L.medium != Medium.FIBER)),
            "transceivers": by_category.get("transceiver", 0) + by_category.get("ocs_transceiver", 0),
            "ocs_transceivers": by_category.get("ocs_transceiver", 0),
        }

    def to_networkx(self, active: bool = False):
        """The Fabric as a ``networkx.MultiGraph``.

        The graph carries the HBD spec (``hbd``) and the bill of materials (``bom``: item, scope, count) as
        graph attributes, in the form :mod:`topologies.custom` reads: ``networkx.node_link_data`` of the
        ``active=True`` view loads back (``fabric simulate --topology``) as the same fabric for traffic,
        cost and NVLS.  Without them a re-loaded DGX had no HBD (TP 1), cost 0 and no NVLS.

        Parameters
        ----------
        active : bool
            False: every physical link (OCS-port fibres end at the OCS device).
            True: the links traffic sees under the current configuration
            (circuits become direct edges; OCS devices stay as isolated nodes).
        """
        import networkx as nx

        hbd = {k: list(v) if k == "dims" else v for k, v in self.hbd.to_dict().items()}
        bom = [{"item": line.item, "scope": line.scope, "count": int(line.count)} for line in self.bom]
        g = nx.MultiGraph(architecture=self.architecture, hbd=hbd, bom=bom)
        names = self.device_names()
        groups = self.devices.groups
        for i in range(self.n_devices):
            attrs = {"kind": DeviceKind(int(self.devices.kind[i])).label}
            for gname in GROUPS:
                v = int(groups[gname][i])
                if v >= 0:
                    attrs[gname] = v
            g.add_node(names[i], **attrs)
        if active:
            A = self.active_links()
            for j in range(len(A)):
                g.add_edge(names[A.src[j]], names[A.dst[j]], key=j, capacity=float(A.capacity[j]),
                           latency=float(A.latency[j]), layer=Layer(int(A.layer[j])).name.lower(),
                           link=int(A.origin[j]))
        else:
            L = self.links
            for j in range(len(L)):
                g.add_edge(names[L.src[j]], names[L.dst[j]], key=j, capacity=float(L.capacity[j]),
                           latency=float(L.latency[j]), medium=Medium(int(L.medium[j])).name.lower(),
                           layer=Layer(int(L.layer[j])).name.lower(),
                           state=LinkState(int(L.state[j])).name.lower(),
                           src_port=int(L.src_port[j]), dst_port=int(L.dst_port[j]))
        return g


#: The inputs that size a fabric, blamed when a build outgrows the limits.
LIMIT_FIELD = "--gpus/-p"


class FabricBuilder:
    """Accumulates devices, links and BOM lines in vectorised batches, then builds a :class:`Fabric`.

    Parameters
    ----------
    architecture : str
        Name of the family that builds it (``dgx``, ``nvl``, ...).
    params : dict
        The resolved parameters, reported back to the user.
    categories : callable, optional
        Catalog id -> category, for the BOM lines (e.g. ``catalog.category``).

    Examples
    --------
    >>> b = FabricBuilder("demo", {})
    >>> gpus = b.add_devices(DeviceKind.GPU, 2, node=[0, 0])
    >>> _ = b.add_links(gpus[:1], gpus[1:], capacity=1e9, latency=1e-6, medium="copper", layer="hbd")
    >>> f = b.build(HBDSpec(kind="none", gpus_per_node=2, domain_gpus=2))
    >>> f.links.src_port.tolist(), f.links.dst_port.tolist()
    ([0], [0])
    """

    def __init__(self, architecture: str, params: dict[str, Any], categories=None):
        self.architecture = architecture
        self.params = dict(params)
        self._categories = categories
        self._n = 0
        self._kinds: list[np.ndarray] = []
        self._groups: dict[str, list[tuple[int, np.ndarray]]] = {g: [] for g in GROUPS}
        self._names: list[np.ndarray] | None = None
        self._links: dict[str, list[np.ndarray]] = {k: [] for k in
                                                    ("src", "dst", "capacity", "latency", "medium", "layer", "state")}
        self._n_links = 0
        self._bom: list[BomLine] = []
        self._notes: list[str] = []

    @property
    def n_devices(self) -> int:
        return self._n

    @property
    def n_links(self) -> int:
        return self._n_links

    def add_devices(self, kind: DeviceKind, count: int, names=None, **groups) -> np.ndarray:
        """Add ``count`` devices of ``kind``; keyword groups give per-device group ids.

        Returns the new device ids.
        """
        count = int(count)
        # backstop of the resource guard: the CLI estimates first, this stops a family that grows past it
        check_fabric_size(self._n + count, self._n_links, LIMIT_FIELD, "devices being built")
        ids = np.arange(self._n, self._n + count, dtype=np.int64)
        if names is not None and self._names is None:
            # name the devices added so far before this batch joins them
            self._names = [self._default_names_so_far()]
        self._kinds.append(np.full(count, int(kind), dtype=np.int8))
        for gname, values in groups.items():
            if gname not in self._groups:
                raise KeyError(f"unknown group {gname!r}")
            arr = np.broadcast_to(np.asarray(values, dtype=np.int64), (count,))
            self._groups[gname].append((self._n, arr))
        if names is not None:
            if len(names) != count:
                raise ValueError(f"{len(names)} names for {count} devices")
            self._names.append(np.asarray(names, dtype=object))
        elif self._names is not None:
            self._names.append(np.array([f"{DeviceKind(kind).label}@{i}" for i in ids], dtype=object))
        self._n += count
        return ids

    def _default_names_so_far(self) -> np.ndarray:
        kinds = np.concatenate(self._kinds) if self._kinds else np.zeros(0, dtype=np.int8)
        return np.array([f"{DeviceKind(int(k)).label}@{i}" for i, k in enumerate(kinds)], dtype=object)

    def set_group(self, ids, gname: str, values) -> None:
        """Set grouping ``gname`` for existing devices ``ids``."""
        ids = np.asarray(ids, dtype=np.int64)
        vals = np.broadcast_to(np.asarray(values, dtype=np.int64), ids.shape)
        # stored as (offset, values) blocks; a scattered update is a block of its own
        self._groups[gname].append((-1, np.stack([ids, vals])))

    def add_links(self, src, dst, *, capacity, latency, medium: str, layer: str,
                  state: str = "static") -> np.ndarray:
        """Add full-duplex links ``src[i] <-> dst[i]``.

        Parameters
        ----------
        src, dst : array_like of int
            Device ids (same length, or one of them a scalar).
        capacity : float or array_like
            Bytes/s per direction.
        latency : float or array_like
            Seconds, one way.
        medium : {'pcb', 'copper', 'fiber'}
        layer : {'hbd', 'dcn'}
        state : {'static', 'candidate', 'ocs_port'}

        Returns
        -------
        ndarray of int
            The new link ids.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        src, dst = np.broadcast_arrays(src, dst)
        n = src.size
        check_fabric_size(self._n, self._n_links + n, LIMIT_FIELD, "links being built")
        src, dst = src.ravel(), dst.ravel()
        cols = self._links
        cols["src"].append(src.copy())
        cols["dst"].append(dst.copy())
        cols["capacity"].append(np.broadcast_to(np.asarray(capacity, dtype=np.float64), (n,)).copy())
        cols["latency"].append(np.broadcast_to(np.asarray(latency, dtype=np.float64), (n,)).copy())
        cols["medium"].append(np.full(n, int(MEDIUM_BY_LABEL[medium]), dtype=np.int8))
        cols["layer"].append(np.full(n, int(LAYER_BY_LABEL[layer]), dtype=np.int8))
        cols["state"].append(np.full(n, int(STATE_BY_LABEL[state]), dtype=np.int8))
        ids = np.arange(self._n_links, self._n_links + n, dtype=np.int64)
        self._n_links += n
        return ids

    def add_bom(self, item: str, scope: str, count: int | float, note: str = "") -> None:
        """Add ``count`` of catalog ``item`` to the bill of materials under ``scope``."""
        if scope not in SCOPES:
            raise ValueError(f"scope {scope!r} not in {SCOPES}")
        count = int(round(count))
        if count <= 0:
            return
        category = self._categories(item) if self._categories else ""
        self._bom.append(BomLine(item, scope, count, category, note))

    def note(self, text: str) -> None:
        """Record what was built (rounding up, derived sizes) for the user."""
        self._notes.append(text)

    def build(self, hbd: HBDSpec, configuration: Configuration | None = None) -> Fabric:
        """Freeze everything into a :class:`Fabric` and number the ports."""
        n = self._n
        kinds = np.concatenate(self._kinds) if self._kinds else np.zeros(0, dtype=np.int8)
        groups = {}
        for gname, blocks in self._groups.items():
            arr = np.full(n, -1, dtype=np.int64)
            for offset, vals in blocks:
                if offset >= 0:
                    arr[offset:offset + vals.shape[0]] = vals
                else:
                    arr[vals[0]] = vals[1]
            groups[gname] = arr
        names = np.concatenate(self._names) if self._names is not None else None
        cols = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in self._links.items()}
        src = cols["src"].astype(np.int64)
        dst = cols["dst"].astype(np.int64)
        if src.size and (src.min() < 0 or dst.min() < 0 or max(src.max(), dst.max()) >= n):
            raise ValueError("link endpoint is not a device")
        src_port, dst_port = _number_ports(src, dst, n)
        links = Links(src, dst, src_port, dst_port,
                      cols["capacity"].astype(np.float64), cols["latency"].astype(np.float64),
                      cols["medium"].astype(np.int8), cols["layer"].astype(np.int8),
                      cols["state"].astype(np.int8))
        fab = Fabric(self.architecture, self.params, hbd, Devices(kinds, groups, names), links,
                     tuple(self._bom), configuration or Configuration(), tuple(self._notes))
        fab.validate_configuration(fab.configuration)
        return fab


def _number_ports(src: np.ndarray, dst: np.ndarray, n_devices: int) -> tuple[np.ndarray, np.ndarray]:
    """Port numbers 0.. per device, in link order (src end before dst end of the same link)."""
    m = src.size
    ends = np.concatenate([src, dst])
    # order of endpoints: by device, then by link id, src end first
    order_key = np.concatenate([np.arange(m) * 2, np.arange(m) * 2 + 1])
    order = np.lexsort((order_key, ends))
    sorted_dev = ends[order]
    starts = np.searchsorted(sorted_dev, sorted_dev, side="left")
    rank = np.arange(2 * m) - starts
    ports = np.empty(2 * m, dtype=np.int64)
    ports[order] = rank
    return ports[:m], ports[m:]
