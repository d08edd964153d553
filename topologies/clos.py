"""Folded-Clos (fat-tree / leaf-spine) datacenter network, shared by every family.

Structure (radix ``k`` at the endpoint port speed):

* **ToR** (edge/leaf): ``d`` downlinks, ``u = k - d`` uplinks, ``d/u`` = the
  ToR oversubscription ``o`` (``d = round(k o / (1 + o))``).
* **2 tiers** (leaf-spine): ``S`` spines, the smallest divisor of ``u`` that
  has the ports for all ``T u`` uplinks (``S >= T u / k``, :func:`even_spine_count`;
  ``u`` when ``T = k``); ToR uplink ``t`` of ToR ``i`` goes to spine ``t mod S``,
  so every ToR has the same ``u / S`` links to every spine (equal-cost paths
  of equal capacity, as ECMP assumes); a spine uses ``T u / S`` of its ``k``
  ports, the rest stay unused.  At most ``k`` ToRs.  Radix k, o = 1: ``k^2/2``
  hosts, ``3k/2`` switches.
* **3 tiers** (k-ary fat-tree, Al-Fares et al. 2008, generalised): pods of
  ``u`` aggregation switches and ``da`` ToRs (every ToR linked once to every agg
  of its pod); agg ``j`` of every pod belongs to core *plane* ``j`` of ``c``
  cores, the smallest divisor of ``ua`` with ``c >= P ua / k``; agg uplink ``t``
  goes to core ``t mod c`` of its plane, so every agg has ``ua / c`` links to
  every core of its plane.  k-ary, o = 1, P = k: ``k^3/4`` hosts, ``5k^2/4``
  switches.
* Partial builds round up to whole ToRs (2 tiers) or whole pods' worth of
  ToRs (3 tiers); cores shrink with the pod count.

Every switch-facing link is a duplex fibre with a transceiver at each end at
the endpoint port speed (the transceiver item is looked up in the catalog by
bandwidth).  With ``ocs_core=True`` the agg-core links are instead fibres into
OCS ports, joined by circuits that reproduce the static wiring (``rfabric``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from fabric.catalog import Catalog
from fabric.errors import FabricError
from fabric.model import Configuration, DeviceKind, FabricBuilder
from topologies.params import Param, at_least, even_at_least


def dcn_params(default_k: int | None = None) -> list[Param]:
    """The DCN parameters every family shares."""
    return [
        Param("k", int, default_k, "switch radix at the endpoint port speed; must be even" +
              ("" if default_k else " (default: switch bandwidth / NIC bandwidth, e.g. 128 x 400G on 51.2T)"),
              check=even_at_least(4)),
        Param("tiers", str, "auto", "DCN tiers: 2 (leaf-spine), 3 (fat-tree) or auto (fewest that fit)",
              choices=("auto", "2", "3")),
        Param("oversubscription", float, 1.0, "ToR downlink:uplink bandwidth ratio, 1 to k-1 (one uplink)",
              check=at_least(1.0)),
        Param("agg_oversubscription", float, 1.0, "aggregation downlink:uplink ratio (3 tiers), 1 to k-1",
              check=at_least(1.0)),
        Param("rail_optimized", bool, False, "NIC r of every server in a group shares rail-r ToRs"),
        Param("switch", str, "switch_51t2", "catalog id of the packet switch"),
    ]


@dataclass(frozen=True)
class ClosInfo:
    tor_ids: np.ndarray
    agg_ids: np.ndarray
    core_ids: np.ndarray
    tor_of_endpoint: np.ndarray
    pod_of_endpoint: np.ndarray
    tiers: int
    endpoints_per_tor: int
    circuits: np.ndarray  # (m, 2) OCS-port link pairs when ocs_core


def default_radix(catalog: Catalog, switch: str, port_bandwidth: float) -> int:
    """Switch radix at ``port_bandwidth``: switch bandwidth / port bandwidth, rounded down to even."""
    total = catalog.value(switch, "bandwidth")
    k = int(total // port_bandwidth)
    return max(4, k - (k % 2))


#: The DCN parameters that set the size of the Clos (blamed by the resource check, see topologies.size).
DCN_DRIVERS = ("k", "oversubscription", "agg_oversubscription", "tiers")


def check_ratios(k: int, params: dict, radix_param: str = "k") -> None:
    """Refuse an oversubscription above ``k - 1``: a radix-``k`` switch cannot have fewer than one uplink.

    Larger ratios used to be clamped silently to ``k - 1`` (a ratio of 1e300 built the same fabric as 127).

    Parameters
    ----------
    k : int
        Switch radix in ports.
    params : dict
        Resolved DCN parameters (``oversubscription``, ``agg_oversubscription``).
    radix_param : str
        The family's name of the radix parameter (``dcn_k`` for ``khop-ring``), named in the message.
    """
    for name in ("oversubscription", "agg_oversubscription"):
        ratio = params.get(name)
        if ratio is not None and not 1.0 <= ratio <= k - 1:
            raise FabricError(f"params[{name}]", f"{ratio:g} must be between 1 and {radix_param}-1 = {k - 1} "
                                                 f"(radix {k}: at least one uplink)")


def clos_shape(endpoints: int, k: int, params: dict, endpoints_per_tor: int | None = None, ocs_core: bool = False,
               radix_param: str = "k", strict: bool = True) -> tuple[int, int, int]:
    """ToRs, tiers and pods of the Clos :func:`attach_clos` builds; refuses one that radix ``k`` cannot hold.

    Shared by the builder and the closed-form size (:mod:`topologies.size`), so that a request for more
    endpoints than the radix allows is refused before any array is allocated, naming the family's radix
    parameter (``-p dcn_k`` for ``khop-ring``, ``-p k`` elsewhere).

    Parameters
    ----------
    endpoints : int
        NICs (or hosts) on the Clos.
    k : int
        Switch radix in ports.
    params : dict
        Resolved DCN parameters (``tiers``, ``oversubscription``, ``agg_oversubscription``).
    endpoints_per_tor : int, optional
        Endpoints per ToR (default: the ToR's downlinks).
    ocs_core : bool
        Aggregation-core links through OCS (always 3 tiers; ``rfabric`` checks its own pod count).
    radix_param : str
        The family's name of the radix parameter.
    strict : bool
        Refuse more ToRs or pods than radix ``k`` holds (False: return them, for a size estimate that the
        resource limits judge first).

    Returns
    -------
    tors, tiers, pods : int
        ToRs before rounding to whole pods, 2 or 3, and pods (1 for 2 tiers).
    """
    check_ratios(k, params, radix_param)
    d, _ = split_ports(k, params["oversubscription"])
    ept = endpoints_per_tor or d
    if ept > d:
        raise FabricError("params[nodes_per_tor]", f"{ept} endpoints per ToR exceed its {d} downlinks "
                                                   f"({radix_param}={k})")
    T = max(1, math.ceil(endpoints / ept))
    tiers = params.get("tiers", "auto")
    tiers_n = 3 if ocs_core else 2 if tiers == "2" or (tiers == "auto" and T <= k) else 3
    if tiers_n == 2:
        if T > k and strict:
            raise FabricError("gpus", f"{endpoints} endpoints need {T} ToRs, more than a 2-tier Clos of radix {k} "
                                      f"allows ({k}); use -p tiers=3 or a larger -p {radix_param}")
        return T, 2, 1
    da, _ = split_ports(k, params["agg_oversubscription"])
    P = math.ceil(T / da)
    if P > k and strict and not ocs_core:  # rfabric's OCS joins pods its own way and checks its own ports
        raise FabricError("gpus", f"{endpoints} endpoints need {P} pods, more than a 3-tier Clos of radix {k} "
                                  f"allows ({k} pods, {k * da * ept} endpoints); use a larger -p {radix_param}")
    return T, 3, P


def split_ports(k: int, ratio: float) -> tuple[int, int]:
    """Down/up port split of a radix-k switch for oversubscription ``ratio`` (down:up)."""
    down = int(round(k * ratio / (1.0 + ratio)))
    down = min(max(down, 1), k - 1)
    return down, k - down


def even_spine_count(lower: int, uplinks: int, k: int) -> int:
    """Switches of the tier above ``lower`` switches of ``uplinks`` uplinks each, every pair wired alike.

    The smallest divisor ``S`` of ``uplinks`` whose ``S k`` ports take all ``lower x uplinks`` links,
    so that each lower switch has exactly ``uplinks / S`` links to each upper one (the usual leaf-spine
    rule: spines divide the leaf uplinks).  Uneven pairs (one link to some spines, two to others) would
    make equal-cost next hops of unequal capacity, which per-port ECMP overloads.  ``uplinks`` always
    qualifies when ``lower <= k``; a spine then uses ``lower x uplinks / S <= k`` ports.

    Parameters
    ----------
    lower : int
        ToRs (or aggregation switches of one plane), at most ``k``.
    uplinks : int
        Uplinks of each of them.
    k : int
        Radix of the upper switches.

    Returns
    -------
    int

    Examples
    --------
    >>> even_spine_count(72, 64, 128)  # ceil(72 x 64 / 128) = 36 does not divide 64
    64
    >>> even_spine_count(128, 64, 128), even_spine_count(2, 64, 128)
    (64, 1)
    """
    need = math.ceil(lower * uplinks / k)
    return next(s for s in range(max(need, 1), uplinks + 1) if uplinks % s == 0)


def rail_order(server: np.ndarray, rail: np.ndarray, servers_per_group: int) -> np.ndarray:
    """Permutation of endpoints so that consecutive ToR fills give rail-optimised ToRs.

    Endpoints are ordered by (server group, rail, server): a ToR filled with
    ``servers_per_group`` consecutive endpoints then holds NIC ``r`` of every
    server of one group.
    """
    group = server // max(servers_per_group, 1)
    return np.lexsort((server, rail, group))


def attach_clos(b: FabricBuilder, endpoints: np.ndarray, catalog: Catalog, *, port_bandwidth: float,
                params: dict, endpoints_per_tor: int | None = None, ocs_core: bool = False,
                ocs_item: str = "ocs_palomar", radix_param: str = "k") -> ClosInfo:
    """Build a folded Clos over ``endpoints`` (device ids, in ToR-filling order).

    Parameters
    ----------
    b : FabricBuilder
    endpoints : ndarray of int
        NIC (or host) device ids, in the order they fill ToRs.
    catalog : Catalog
    port_bandwidth : float
        Endpoint and switch port speed, bytes/s per direction.
    params : dict
        Resolved :func:`dcn_params` values (``k`` may be None: derived).
    endpoints_per_tor : int, optional
        Fill ToRs with fewer endpoints than their downlinks (e.g. whole nodes).
    ocs_core : bool
        Put the aggregation-core links through OCS (``rfabric``).
    radix_param : str
        Name under which the (possibly derived) radix is reported in the
        Fabric's parameters.

    Returns
    -------
    ClosInfo
    """
    switch = params["switch"]
    catalog.get(switch)
    # long: one folded Clos built tier by tier (ToRs, then aggregation and pods, then the core or its OCS),
    # each tier reading the counts of the one below; split, every step would pass the same dozen arrays
    k = params["k"] or default_radix(catalog, switch, port_bandwidth)
    b.params[radix_param] = k  # report the derived radix with the other parameters
    d, u = split_ports(k, params["oversubscription"])
    ept = endpoints_per_tor or d
    E = int(endpoints.size)
    T, tiers_n, P = clos_shape(E, k, params, endpoints_per_tor, ocs_core, radix_param)
    b.params["tiers"] = str(tiers_n)
    latency = catalog.value("network_latency", "latency")
    trx = catalog.find_by_bandwidth("transceiver", port_bandwidth)

    tor_of_ep = np.arange(E, dtype=np.int64) // ept  # not a repeat of T x ept: ept may be a huge radix
    empty = np.zeros(0, dtype=np.int64)
    circuits = np.zeros((0, 2), dtype=np.int64)

    if tiers_n == 2:
        pod_of_tor = np.zeros(T, dtype=np.int64)
        tors = b.add_devices(DeviceKind.TOR, T, tor=np.arange(T), pod=0)
        b.add_links(endpoints, tors[tor_of_ep], capacity=port_bandwidth, latency=latency, medium="fiber", layer="dcn")
        n_fiber = E
        spines = empty
        if T > 1:
            # S divides u (u when T = k): uplink t of every ToR -> spine t mod S, u / S links per pair
            S = even_spine_count(T, u, k)
            spines = b.add_devices(DeviceKind.CORE, S, pod=0)
            src = np.repeat(tors, u)
            dst = spines[np.tile(np.arange(u) % S, T)]
            b.add_links(src, dst, capacity=port_bandwidth, latency=latency, medium="fiber", layer="dcn")
            n_fiber += src.size
        aggs, cores, agg_end = empty, spines, empty
        S = max(spines.size, 1)
        b.note(f"DCN: 2-tier leaf-spine, radix {k}, {T} ToRs x {ept} endpoints, {spines.size} spines"
               + (f" ({u // S} link(s) per ToR-spine pair, {T * u // S} of {k} spine ports used)" if T > 1 else ""))
    else:
        da, ua = split_ports(k, params["agg_oversubscription"])
        a = aggs_per_pod(T, u, da)
        tors, aggs, pod_of_tor = pods_of_tors_and_aggs(b, endpoints, tor_of_ep, T, P, da, a, port_bandwidth, latency,
                                                       links_per_pair=u // a)
        tors_per_pod = min(da, tors.size)
        n_fiber = E + tors.size * u
        c = even_spine_count(P, ua, k)  # cores per plane, dividing ua: ua / c links per agg-core pair
        cores = b.add_devices(DeviceKind.CORE, a * c)
        p_idx, j_idx, t_idx = np.meshgrid(np.arange(P), np.arange(a), np.arange(ua), indexing="ij")
        agg_end = aggs[(p_idx * a + j_idx).ravel()]
        core_end = cores[(j_idx * c + t_idx % c).ravel()]
        if not ocs_core:
            b.add_links(agg_end, core_end, capacity=port_bandwidth, latency=latency, medium="fiber", layer="dcn")
            n_fiber += agg_end.size
        else:
            circuits = _through_ocs(b, catalog, agg_end, core_end, port_bandwidth, latency, ocs_item, j_idx.ravel())
            n_fiber += 2 * agg_end.size
        b.note(f"DCN: 3-tier fat-tree, radix {k}, {P} pods x {tors_per_pod} ToRs x {ept} endpoints, "
               f"{aggs.size} aggs, {cores.size} cores ({ua // c} link(s) per agg-core pair, {P * ua // c} of {k} "
               f"core ports used)" + (" (agg-core through OCS)" if ocs_core else ""))

    pod_of_ep = pod_of_tor[tor_of_ep]
    b.set_group(endpoints, "tor", tor_of_ep)
    b.set_group(endpoints, "pod", pod_of_ep)
    n_switches = tors.size + aggs.size + cores.size
    b.add_bom(switch, "dcn", n_switches)
    # a transceiver at both ends of every switch-facing path; an OCS is passive, so a
    # path through it still has two (one per fibre, at the agg and at the core)
    n_trx = 2 * n_fiber - (2 * agg_end.size if tiers_n == 3 and ocs_core else 0)
    b.add_bom(trx, "dcn", n_trx)
    b.add_bom("fiber", "dcn", n_fiber)
    return ClosInfo(tors, aggs, cores, tor_of_ep, pod_of_ep, tiers_n, ept, circuits)


def aggs_per_pod(n_tors: int, uplinks: int, agg_downlinks: int) -> int:
    """Aggregation switches per pod: every ToR's ``uplinks`` spread evenly over them, as spines over leaves.

    A full pod (``agg_downlinks`` ToRs) takes ``uplinks`` aggs, one link from every ToR to each (the
    k-ary fat-tree); a single pod of fewer ToRs takes the fewest that divide the uplinks and have ports
    for them all (:func:`even_spine_count`), so one ToR under a radix-128 pod is one agg with 64 links, not
    64 aggs with one link each.  With more than one pod the pods are full (the last one is rounded up).

    Examples
    --------
    >>> aggs_per_pod(64, 64, 64), aggs_per_pod(1, 64, 64), aggs_per_pod(40, 64, 64)
    (64, 1, 64)
    >>> aggs_per_pod(3, 4, 4)  # 12 ToR uplinks need 3 aggs of 4 downlinks; 4 divides the uplinks
    4
    """
    return even_spine_count(min(n_tors, agg_downlinks), uplinks, agg_downlinks)


def pods_of_tors_and_aggs(b: FabricBuilder, endpoints: np.ndarray, tor_of_ep: np.ndarray, n_tors: int, pods: int,
                          tors_per_pod: int, aggs_per_pod: int, bw: float, latency: float, links_per_pair: int = 1):
    """The lower two tiers of a 3-tier Clos: ToRs over the endpoints, pods of aggregation switches.

    More than one pod rounds the ToRs up to whole pods; every ToR links ``links_per_pair`` times to every
    aggregation switch of its pod (:func:`aggs_per_pod`), and endpoint ``i`` to ToR ``tor_of_ep[i]`` (all
    duplex fibres at ``bw``).

    Returns
    -------
    tors, aggs, pod_of_tor : ndarray of int
    """
    T = pods * tors_per_pod if n_tors > tors_per_pod else n_tors
    pod_of_tor = np.arange(T, dtype=np.int64) // min(tors_per_pod, T)
    tors = b.add_devices(DeviceKind.TOR, T, tor=np.arange(T), pod=pod_of_tor)
    b.add_links(endpoints, tors[tor_of_ep], capacity=bw, latency=latency, medium="fiber", layer="dcn")
    aggs = b.add_devices(DeviceKind.AGG, pods * aggs_per_pod, pod=np.repeat(np.arange(pods), aggs_per_pod))
    # ToR t of pod p -> every agg of pod p
    dst = aggs[(pod_of_tor[:, None] * aggs_per_pod + np.arange(aggs_per_pod)[None, :]).ravel()]
    b.add_links(np.repeat(np.repeat(tors, aggs_per_pod), links_per_pair), np.repeat(dst, links_per_pair),
                capacity=bw, latency=latency, medium="fiber", layer="dcn")
    return tors, aggs, pod_of_tor


def _through_ocs(b: FabricBuilder, catalog: Catalog, agg_end, core_end, bw, latency, ocs_item, plane):
    """Agg and core ends as fibres into OCS ports; circuits reproduce the static pairs.

    Each OCS takes up to ``ports // 2`` agg-core pairs of one plane, so every
    circuit the default wiring needs (and any re-pairing inside a plane) fits.
    """
    per_ocs = int(catalog.value(ocs_item, "ports")) // 2
    order = np.argsort(plane, kind="stable")
    agg_end, core_end, plane = agg_end[order], core_end[order], plane[order]
    # number the pairs within each plane, then chunk per OCS
    starts = np.searchsorted(plane, plane, side="left")
    idx_in_plane = np.arange(plane.size) - starts
    n_planes = int(plane.max()) + 1 if plane.size else 0
    per_plane = np.bincount(plane, minlength=n_planes)
    ocs_per_plane = np.ceil(per_plane / per_ocs).astype(np.int64)
    ocs_offset = np.concatenate([[0], np.cumsum(ocs_per_plane)[:-1]])
    ocs_local = ocs_offset[plane] + idx_in_plane // per_ocs
    ocs = b.add_devices(DeviceKind.OCS, int(ocs_per_plane.sum()))
    ocs_dev = ocs[ocs_local]
    la = b.add_links(agg_end, ocs_dev, capacity=bw, latency=latency / 2, medium="fiber", layer="dcn", state="ocs_port")
    lc = b.add_links(core_end, ocs_dev, capacity=bw, latency=latency / 2, medium="fiber", layer="dcn",
                     state="ocs_port")
    b.add_bom(ocs_item, "dcn", ocs.size)
    return np.stack([la, lc], axis=1)


def default_configuration(info: ClosInfo) -> Configuration:
    return Configuration(circuits=info.circuits)
