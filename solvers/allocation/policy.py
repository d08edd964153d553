"""Pick the allocation policy of a Fabric's HBD kind; form TP groups; count usable GPUs.

Two paths give the same numbers (tests check it):

* :func:`allocate`: one fault set -> an :class:`~solvers.allocation.base.Allocation`
  with the actual TP groups (GPU ids in rank order) and the HBD units they
  occupy (ring nodes, cube slices, torus lines), for the orchestrator and the
  viewer;
* :func:`count_usable`: a batch of fault sets -> usable GPUs per sample,
  vectorised (no Python loop over samples or nodes), for Monte Carlo.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from fabric.errors import FabricError
from fabric.faults import COMPONENTS, FaultSamples, NodeIndex
from fabric.model import Fabric, HBDKind, LinkState
from fabric.rings import ring_configuration
from solvers.allocation.base import Allocation, FaultBatch, Policy
from solvers.allocation.effects import EffectMapper
from solvers.allocation.khop import KHopPolicy
from solvers.allocation.ocs_cube import OCSCubePolicy
from solvers.allocation.switch_domain import SwitchDomainPolicy
from solvers.allocation.torus import TorusPolicy

POLICIES: dict[str, type[Policy]] = {
    "switch_domain": SwitchDomainPolicy,
    "none": SwitchDomainPolicy,
    "ocs_cube": OCSCubePolicy,
    "khop_line": KHopPolicy,
    "torus": TorusPolicy,
}
"""HBD kind -> allocation policy (one per kind)."""


def policy_for(fabric: Fabric, nodes: NodeIndex | None = None) -> Policy:
    """The allocation policy of ``fabric.hbd.kind``."""
    cls = POLICIES.get(fabric.hbd.kind)
    if cls is None:
        raise FabricError("hbd.kind", f"{fabric.hbd.kind!r} has no allocation policy; known: {', '.join(POLICIES)}")
    if fabric.n_gpus == 0:
        raise FabricError("fabric", "has no GPUs")
    return cls(fabric, nodes or NodeIndex.of(fabric))


def count_usable(fabric_or_policy, tp: int, batch: FaultBatch) -> np.ndarray:
    """Usable GPUs (in complete TP groups of ``tp``) for every row of ``batch``."""
    pol = fabric_or_policy if isinstance(fabric_or_policy, Policy) else policy_for(fabric_or_policy)
    return pol.count(pol.check_tp(tp), batch)


def _boundary_size(pol: Policy) -> int:
    if isinstance(pol, TorusPolicy):
        return pol.n_boundaries
    return pol.nodes.n_nodes


def allocate_row(pol: Policy, tp: int, batch: FaultBatch, i: int = 0) -> Allocation:
    """The :class:`Allocation` of row ``i`` of ``batch`` (exact path)."""
    tp = pol.check_tp(tp)
    nodes = pol.nodes
    avail = np.ones(nodes.n_gpus, dtype=bool)
    avail[nodes.gpus_of_nodes(batch.down_nodes.row(i))] = False
    if batch.down_gpus is not None:
        avail[batch.down_gpus.row(i)] = False
    bnd = np.zeros(_boundary_size(pol), dtype=bool)
    if batch.boundaries is not None:
        bnd[batch.boundaries.row(i)] = True
    groups, units, unit_kind = pol.allocate(tp, avail, bnd)
    groups = nodes.gpu_ids[groups].reshape(-1, tp)
    return Allocation(tp, f"{pol.kind}: {pol.rule}", groups, np.asarray(units, dtype=np.int64), unit_kind,
                      nodes.n_gpus, int(batch.healthy[i]))


def allocate(fabric: Fabric, tp: int, *, faulty_nodes: Sequence[int] = (), faulty_gpus: Sequence[int] = (),
             components: Mapping[str, Sequence[int]] | None = None) -> Allocation:
    """Form the TP groups of one fault set.

    Parameters
    ----------
    fabric : Fabric
    tp : int
        GPUs per TP group (checked against ``fabric.hbd``).
    faulty_nodes : sequence of int
        ``node`` group ids of failed nodes (servers, trays, hosts).
    faulty_gpus : sequence of int
        Device ids of failed GPUs (each drains its node).
    components : mapping, optional
        Other failed components by type (see :data:`fabric.faults.COMPONENTS`)
        as positions of :func:`fabric.faults.universe` (ToR / OCS device ids'
        positions, link positions, ...).

    Returns
    -------
    Allocation

    Examples
    --------
    One switch domain of two 4-GPU nodes; node 1 fails:

    >>> from fabric.model import DeviceKind, FabricBuilder, HBDSpec
    >>> b = FabricBuilder("demo", {})
    >>> _ = b.add_devices(DeviceKind.GPU, 8, node=[0, 0, 0, 0, 1, 1, 1, 1], domain=0)
    >>> f = b.build(HBDSpec(kind="switch_domain", gpus_per_node=4, domain_gpus=8, max_tp=8))
    >>> a = allocate(f, 3, faulty_nodes=[1])
    >>> a.groups.tolist(), a.healthy_gpus, a.waste_ratio
    ([[0, 1, 2]], 4, 0.25)
    """
    pol = policy_for(fabric)
    nodes = pol.nodes
    rows: dict[str, FaultSamples] = {}
    mapper = EffectMapper(pol)
    if len(faulty_nodes):
        rows["node"] = FaultSamples.from_rows([nodes.node_index(np.asarray(faulty_nodes))], nodes.n_nodes)
    if len(faulty_gpus):
        rows["gpu"] = FaultSamples.from_rows([nodes.gpu_index(np.asarray(faulty_gpus))], nodes.n_gpus)
    for comp, pos in (components or {}).items():
        if comp not in COMPONENTS:
            raise FabricError("components", f"{comp!r} not allowed; use one of {', '.join(COMPONENTS)}")
        n = mapper.universe(comp).size
        pos = np.asarray(list(pos), dtype=np.int64)
        if pos.size and (pos.min() < 0 or pos.max() >= n):
            raise FabricError(f"components.{comp}", f"positions must be in 0..{n - 1}")
        extra = FaultSamples.from_rows([pos], n)
        rows[comp] = rows[comp].union(extra) if comp in rows else extra
    batch = mapper.batch(rows) if rows else FaultBatch.from_nodes(nodes, FaultSamples.empty(1, nodes.n_nodes))
    return allocate_row(pol, tp, batch, 0)


def allocate_lit(fabric: Fabric, tp: int, faulty_nodes: Sequence[int] = ()) -> tuple[Fabric, Allocation]:
    """:func:`allocate`, and the Fabric with the allocation's rings lit (what ``fabric view`` draws).

    For a k-hop line the allocation's units are the rings' nodes in order;
    lighting the candidate paths between them (:func:`fabric.rings.ring_configuration`)
    shows each ring, including the hops that skip a faulty node.  Other HBD
    kinds, k-hop groups inside one node, and a line without candidate paths
    (read from a topology file) keep their configuration.

    Returns
    -------
    (Fabric, Allocation)
    """
    alloc = allocate(fabric, tp, faulty_nodes=faulty_nodes)
    # groups inside one node (TP below gpus_per_node) use the node's mesh and light no ring; a line read from a
    # topology file holds its lit links only, no candidate paths to light ("rings: hop 0->1 is not an optical
    # path" stopped `fabric view --topology FILE --tp 8`): its groups are drawn on the links as they are
    candidates = bool(np.any(fabric.links.state == LinkState.CANDIDATE))
    if fabric.hbd.kind == HBDKind.KHOP_LINE and alloc.unit_kind == "node" and tp >= fabric.hbd.gpus_per_node \
            and candidates:
        fabric = fabric.with_configuration(ring_configuration(fabric, alloc.units.tolist()))
    return fabric, alloc
