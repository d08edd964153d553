"""OCS circuit assignment per phase: which pods each OCS joins, chosen from the phase's pod-to-pod traffic.

The fabric (``rfabric``) is a fat-tree whose aggregation uplinks end in OCS
ports.  Each OCS serves one *plane* (aggregation switch ``j`` of every pod);
beside the aggregation ports it may hold ports of electrical core switches of
that plane.  A circuit joins two ports of one OCS, so per plane an assignment
is

* ``direct[p, q]``: circuits joining an aggregation switch of pod ``p`` to one
  of pod ``q`` (symmetric; a circuit is full duplex), and
* ``core[p]``: circuits joining pod ``p`` to a core switch.

All planes get the same assignment (ECMP spreads a pod's traffic evenly over
its aggregation switches, so the planes carry identical demand).

Capacity model (what the ILP optimises and :func:`predicted_time` evaluates)
------------------------------------------------------------------------------
Routing follows shortest paths, as the packet switches do: traffic ``p -> q``
takes the direct circuits when ``direct[p, q] > 0`` (one hop), otherwise it
goes through the core, which is non-blocking, so pod ``p`` may send and
receive up to ``core[p]`` circuits' worth (the *hose* model).  With ``B`` the
bandwidth of one circuit times the number of planes, the transfer of a demand
``D`` (bytes) finishes after

    T = max( max_{direct pairs} D_pq / (B x_pq),
             max_p sum_{core-routed q} D_pq / (B y_p),  max_q sum_{core-routed p} D_pq / (B y_q) )

which is the makespan of the optimal (proportional-rate) schedule on that
routing.  The ILP maximises ``lambda = 1 / T`` (normalised) subject to the
port budgets::

    sum_q x_pq + y_p <= U_p      (aggregation uplink ports of pod p per plane)
    sum_p y_p        <= C        (core-switch ports per plane)
    lambda d_pq <= x_pq + M_pq (1 - w_pq)          direct pairs (w_pq = 1)
    z_pq >= lambda d_pq - M_pq w_pq                 core-routed pairs
    sum_q z_pq <= y_p,  sum_q z_qp <= y_p          hose at the core
    w_pq <= x_pq <= min(U_p, U_q) w_pq             w_pq = [x_pq > 0]

with ``d = D / max D`` and ``M_pq = min(U_p, U_q)`` (no pair can exceed it).
Without core ports (``C = 0``) every demanded pair must be direct and the
problem is a plain integer program in ``x``.  :func:`brute_force_assignment` enumerates
every assignment of a small instance and is what the tests compare with.

Re-wiring rule
--------------
:func:`should_rewire`: re-wire only when the predicted time saved in the
coming phase exceeds the OCS reconfiguration time plus the settle time (links
re-training and routes updating after the mirrors move), because traffic
through the OCS stops for that long.

The ILP is solved through the project's PuLP adapter
(:func:`solvers.pulp_adapter.solve`), which reports what the solver proved
(optimal, or feasible with its gap when the time limit stops it).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from fabric.errors import ComputeError, FabricError
from fabric.model import Configuration, DeviceKind, Fabric, LinkState

STATUSES = ("optimal", "feasible", "infeasible", "trivial")


@dataclass(frozen=True)
class PodPorts:
    """OCS-facing ports of one plane (all planes alike).

    Attributes
    ----------
    ports : ndarray of int, shape (P,)
        Aggregation uplink ports of each pod in one plane (``U_p``).
    core_ports : int
        Core-switch ports in one plane (``C``).
    planes : int
        Number of identical planes.
    bandwidth : float
        Bytes/s per direction of one circuit.
    """

    ports: np.ndarray
    core_ports: int
    planes: int
    bandwidth: float

    @property
    def pods(self) -> int:
        return int(self.ports.size)

    @property
    def circuit_bandwidth(self) -> float:
        """Bytes/s per direction of one circuit in every plane together."""
        return self.bandwidth * self.planes


@dataclass(frozen=True)
class Assignment:
    """Circuits of one plane: ``direct`` (P x P, symmetric, zero diagonal) and ``core`` (P,)."""

    direct: np.ndarray
    core: np.ndarray

    def __eq__(self, other) -> bool:
        return (isinstance(other, Assignment) and np.array_equal(self.direct, other.direct)
                and np.array_equal(self.core, other.core))

    def __hash__(self) -> int:
        return hash((self.direct.tobytes(), self.core.tobytes()))


@dataclass(frozen=True)
class AssignmentResult:
    """An assignment with its predicted transfer time and how it was found.

    Attributes
    ----------
    assignment : Assignment
    time_s : float
        Predicted pod-level transfer time of the demand (:func:`predicted_time`), seconds.
    status : str
        ``optimal`` (proven); ``feasible`` (the best found when the time limit
        or the requested gap stopped the solver; ``gap`` says how far from
        proven); ``infeasible`` (some pod talks to more pods than it has
        ports and there is no core); ``trivial`` (no demand between pods:
        nothing to optimise).
    gap : float or None
        Relative gap between the assignment and the solver's bound.
    solve_s : float
        Wall time of the solve, seconds.
    termination : str or None
        Why the MIP solver stopped (:data:`solvers.pulp_adapter.TERMINATIONS`); None when no ILP ran.
    """

    assignment: Assignment
    time_s: float
    status: str
    gap: float | None = None
    solve_s: float = 0.0
    notes: tuple[str, ...] = field(default=())
    termination: str | None = None


# ---------------------------------------------------------------------------------------------- evaluation
def predicted_time(demand: np.ndarray, assignment: Assignment, ports: PodPorts) -> float:
    """Transfer time of ``demand`` on ``assignment`` under the shortest-path / hose model.

    Parameters
    ----------
    demand : ndarray, shape (P, P)
        Bytes from pod ``p`` to pod ``q`` (the diagonal is ignored).
    assignment : Assignment
    ports : PodPorts
        Only ``circuit_bandwidth`` is used.

    Returns
    -------
    float
        Seconds; ``inf`` when a demanded pair has no route (no direct circuit
        and no core circuit at one end); 0 without inter-pod demand.

    Examples
    --------
    >>> D = np.array([[0, 4e9], [0, 0]])
    >>> a = Assignment(np.array([[0, 2], [2, 0]]), np.zeros(2, dtype=int))
    >>> predicted_time(D, a, PodPorts(np.array([2, 2]), 0, 1, 1e9))
    2.0
    """
    B = ports.circuit_bandwidth
    return pod_transfer_time(demand, np.asarray(assignment.direct, dtype=np.float64) * B,
                             np.asarray(assignment.core, dtype=np.float64) * B)


def pod_transfer_time(demand: np.ndarray, direct: np.ndarray, core: np.ndarray) -> float:
    """Transfer time of ``demand`` given capacities: ``direct[p, q]`` between pods, ``core[p]`` into the core.

    The capacity form of :func:`predicted_time` (bytes/s per direction):
    pairs with direct capacity use it alone (shortest path), the others share
    their pods' core capacity (hose).
    """
    D = _offdiag(demand)
    x = np.asarray(direct, dtype=np.float64)
    y = np.asarray(core, dtype=np.float64)
    if not (D > 0).any():
        return 0.0
    direct_pairs = (x > 0) & (D > 0)
    via_core = (x <= 0) & (D > 0)
    t = 0.0
    if direct_pairs.any():
        t = max(t, float((D[direct_pairs] / x[direct_pairs]).max()))
    if via_core.any():
        Dc = np.where(via_core, D, 0.0)
        for load in (Dc.sum(axis=1), Dc.sum(axis=0)):
            need = load > 0
            if (y[need] <= 0).any():
                return float("inf")
            t = max(t, float((load[need] / y[need]).max()))
    return t


def should_rewire(time_current: float, time_new: float, reconfiguration_time: float,
                  settle_time: float = 0.0) -> bool:
    """The re-wiring rule: re-wire only when the predicted gain exceeds reconfiguration plus settle time.

    Parameters
    ----------
    time_current : float
        Predicted time of the coming phase on the circuits in place (``inf`` if
        they cannot carry it), seconds.
    time_new : float
        Predicted time on the circuits the phase would want, seconds.
    reconfiguration_time : float
        OCS reconfiguration time (catalog ``reconfiguration_time``), seconds.
    settle_time : float
        Time after the mirrors move until links and routes carry traffic, seconds.

    Returns
    -------
    bool

    Examples
    --------
    >>> should_rewire(1.0, 0.5, 1.2e-3)
    True
    >>> should_rewire(1.0, 0.9995, 1.2e-3)
    False
    """
    if not np.isfinite(time_new):
        return False
    gain = time_current - time_new
    return bool(gain > reconfiguration_time + settle_time)


# ---------------------------------------------------------------------------------------------- optimisation
def assign_circuits(demand: np.ndarray, ports: PodPorts, *, time_limit: float = 30.0, gap: float = 1e-6,
                    fill: bool = True) -> AssignmentResult:
    """Circuits of one plane that minimise the transfer time of ``demand`` (the ILP in the module docstring).

    Parameters
    ----------
    demand : ndarray, shape (P, P)
        Bytes from pod ``p`` to pod ``q`` in the phase.
    ports : PodPorts
    time_limit : float
        Solver seconds; when it runs out the best assignment found is
        returned with status ``feasible`` and its gap.
    gap : float
        Relative gap at which the solver may stop.
    fill : bool
        Give ports the optimum leaves idle to the direct pairs and pods that
        are busiest (never slower: only adds capacity on routes in use).

    Returns
    -------
    AssignmentResult

    Raises
    ------
    FabricError
        If ``demand`` does not match the number of pods or is negative.
    """
    D = _check_demand(demand, ports)
    P = ports.pods
    U = np.asarray(ports.ports, dtype=np.int64)
    t0 = time.perf_counter()
    if not (D > 0).any():
        empty = Assignment(np.zeros((P, P), dtype=np.int64), np.zeros(P, dtype=np.int64))
        return AssignmentResult(empty, 0.0, "trivial", None, time.perf_counter() - t0)
    pairs = [(p, q) for p in range(P) for q in range(p + 1, P) if D[p, q] > 0 or D[q, p] > 0]
    C = int(ports.core_ports)
    if C == 0:
        degree = np.zeros(P, dtype=np.int64)
        for p, q in pairs:
            degree[p] += 1
            degree[q] += 1
        if (degree > U).any():
            p = int(np.flatnonzero(degree > U)[0])
            return AssignmentResult(Assignment(np.zeros((P, P), dtype=np.int64), np.zeros(P, dtype=np.int64)),
                                    float("inf"), "infeasible", None, time.perf_counter() - t0,
                                    (f"pod {p} exchanges traffic with {int(degree[p])} pods but has "
                                     f"{int(U[p])} OCS ports per plane and there is no core",))
    x, y, status, mip_gap, termination = _solve_ilp(D, U, C, pairs, time_limit, gap)
    a = Assignment(x, y)
    if fill:
        a = fill_idle_ports(D, a, ports)
    return AssignmentResult(a, predicted_time(D, a, ports), status, mip_gap, time.perf_counter() - t0,
                            termination=termination)


def _solve_ilp(D, U, C, pairs, time_limit, gap):
    import pulp

    P = U.size
    d = D / D.max()
    bound = {}
    for p, q in pairs:
        bound[(p, q)] = int(min(U[p], U[q]))
    # lambda can never exceed what a pod's ports carry out or in (U_p / its total demand): the
    # tightest big-M, which keeps the relaxation strong
    out_d, in_d = d.sum(axis=1), d.sum(axis=0)
    lam_ub = float(min(np.min(U[out_d > 0] / out_d[out_d > 0]) if (out_d > 0).any() else np.inf,
                       np.min(U[in_d > 0] / in_d[in_d > 0]) if (in_d > 0).any() else np.inf))
    prob = pulp.LpProblem("ocs_circuits", pulp.LpMaximize)
    lam = pulp.LpVariable("lam", 0, lam_ub)
    x = {e: pulp.LpVariable(f"x_{e[0]}_{e[1]}", 0, bound[e], cat="Integer") for e in pairs}
    prob += lam
    use_core = C > 0
    if use_core:
        y = [pulp.LpVariable(f"y_{p}", 0, int(U[p]), cat="Integer") for p in range(P)]
        w = {e: pulp.LpVariable(f"w_{e[0]}_{e[1]}", cat="Binary") for e in pairs}
        z = {}
        for (p, q) in pairs:
            for (s, t) in ((p, q), (q, p)):
                if d[s, t] > 0:
                    M = min(bound[(p, q)], lam_ub * d[s, t])
                    # direct: lambda d <= x + M (1 - w); via core: z >= lambda d - M w
                    prob += lam * d[s, t] <= x[(p, q)] + M * (1 - w[(p, q)])
                    z[(s, t)] = pulp.LpVariable(f"z_{s}_{t}", 0)
                    prob += z[(s, t)] >= lam * d[s, t] - M * w[(p, q)]
            prob += x[(p, q)] >= w[(p, q)]
            prob += x[(p, q)] <= bound[(p, q)] * w[(p, q)]
        for p in range(P):
            out_z = [v for (s, _), v in z.items() if s == p]
            in_z = [v for (_, t), v in z.items() if t == p]
            if out_z:
                prob += pulp.lpSum(out_z) <= y[p]
            if in_z:
                prob += pulp.lpSum(in_z) <= y[p]
        prob += pulp.lpSum(y) <= C
        # valid cuts: whatever the routing, a pod's ports carry all its traffic out and in
        for p in range(P):
            mine = [x[e] for e in pairs if p in e]
            if out_d[p] > 0:
                prob += lam * out_d[p] <= pulp.lpSum(mine) + y[p]
            if in_d[p] > 0:
                prob += lam * in_d[p] <= pulp.lpSum(mine) + y[p]
    for p in range(P):
        mine = [x[e] for e in pairs if p in e]
        core_p = [y[p]] if use_core else []
        if mine or core_p:
            prob += pulp.lpSum(mine + core_p) <= int(U[p])
    if not use_core:
        for (p, q) in pairs:
            for (s, t) in ((p, q), (q, p)):
                if d[s, t] > 0:
                    prob += lam * d[s, t] <= x[(p, q)]
    start = None
    if use_core:
        # warm start from the better of two easy assignments, so a time-limited solve is never worse
        hx, hy = _heuristic_start(D, U, C, pairs, time_limit)
        t_h = pod_transfer_time(d, hx.astype(float), hy.astype(float))
        if np.isfinite(t_h) and t_h > 0:
            lam_h = (1.0 - 1e-9) / t_h
            start = {lam: lam_h, **{y[p]: float(hy[p]) for p in range(P)}}
            for (p, q) in pairs:
                start[x[(p, q)]] = float(hx[p, q])
                start[w[(p, q)]] = float(hx[p, q] > 0)
            for (s_, t_), v in z.items():
                start[v] = lam_h * d[s_, t_] if hx[min(s_, t_), max(s_, t_)] == 0 else 0.0
    status, mip_gap, termination = _solve(prob, time_limit, gap, start)
    xs = np.zeros((P, P), dtype=np.int64)
    for (p, q), v in x.items():
        xs[p, q] = xs[q, p] = int(round(v.value() or 0))
    ys = np.array([int(round(v.value() or 0)) for v in y], dtype=np.int64) if use_core else np.zeros(P, dtype=np.int64)
    return xs, ys, status, mip_gap, termination


def _heuristic_start(D: np.ndarray, U: np.ndarray, C: int, pairs, time_limit: float) -> tuple[np.ndarray, np.ndarray]:
    """The better of: everything through the core (core ports shared by load), or direct circuits only."""
    P = U.size
    load = np.maximum(D.sum(axis=1), D.sum(axis=0))
    y = np.zeros(P, dtype=np.int64)
    for _ in range(min(C, int(U.sum()))):
        room = y < U
        if not (room & (load > 0)).any():
            break
        p = int(np.argmax(np.where(room, load / (y + 1.0), -1.0)))
        y[p] += 1
    best = (np.zeros((P, P), dtype=np.int64), y)
    t_best = pod_transfer_time(D, best[0].astype(float), y.astype(float))
    degree = np.bincount(np.array(pairs, dtype=np.int64).ravel(), minlength=P) if pairs else np.zeros(P)
    if (degree <= U).all():
        ports = PodPorts(U, 0, 1, 1.0)
        r = assign_circuits(D, ports, time_limit=time_limit, fill=False)
        if r.status != "infeasible":
            ports_c = PodPorts(U, C, 1, 1.0)
            a = fill_idle_ports(D, r.assignment, ports_c)
            t = pod_transfer_time(D, a.direct.astype(float), a.core.astype(float))
            if t < t_best:
                best = (a.direct, a.core)
    return best


def _solve(prob, time_limit: float, gap: float, start=None) -> tuple[str, float | None, str]:
    """Solve through the project's PuLP adapter; return (status, gap, termination) as the solver proved them."""
    from solvers.pulp_adapter import SolveOptions, solve

    report = solve(prob, SolveOptions(time_limit=time_limit, gap_rel=gap, threads=1), start=start)
    if report.status in ("optimal", "feasible"):
        return report.status, report.gap, report.termination
    if report.status == "infeasible":
        return "infeasible", None, report.termination
    if report.status == "time_limit":
        raise FabricError("time_limit", f"no circuit assignment found within {time_limit:g} s; raise the limit")
    raise ComputeError("solver", f"the circuit ILP ended with status {report.status} "
                                 f"(termination {report.termination}: {report.raw_status})")


def fill_idle_ports(demand: np.ndarray, assignment: Assignment, ports: PodPorts) -> Assignment:
    """Hand ports an assignment leaves idle to the busiest routes in use (never slower).

    Repeatedly adds a circuit to the direct pair with the longest transfer
    time among pairs whose two pods both have an idle port, then gives idle
    ports of pods that route through the core to the core while core ports
    remain.  Pairs without direct circuits are not given one (that would move
    their traffic off the core, which may be slower).
    """
    D = _offdiag(demand)
    x = assignment.direct.astype(np.int64).copy()
    y = assignment.core.astype(np.int64).copy()
    U = np.asarray(ports.ports, dtype=np.int64)
    free = U - x.sum(axis=1) - y
    pair_load = np.maximum(D, D.T)
    iu, ju = np.triu_indices(U.size, 1)
    live = (x[iu, ju] > 0) & (pair_load[iu, ju] > 0)
    iu, ju = iu[live], ju[live]
    while iu.size:
        ok = (free[iu] > 0) & (free[ju] > 0)
        if not ok.any():
            break
        t = np.where(ok, pair_load[iu, ju] / np.maximum(x[iu, ju], 1), -1.0)
        k = int(np.argmax(t))
        p, q = int(iu[k]), int(ju[k])
        x[p, q] += 1
        x[q, p] += 1
        free[p] -= 1
        free[q] -= 1
    core_free = int(ports.core_ports) - int(y.sum())
    via_core = np.where((x == 0) & (D > 0), D, 0.0)
    load = np.maximum(via_core.sum(axis=1), via_core.sum(axis=0))
    while core_free > 0:
        cand = np.flatnonzero((free > 0) & (load > 0))
        if cand.size == 0:
            break
        p = int(cand[np.argmax(load[cand] / np.maximum(y[cand], 1e-9))])
        y[p] += 1
        free[p] -= 1
        core_free -= 1
    return Assignment(x, y)


def brute_force_assignment(demand: np.ndarray, ports: PodPorts) -> tuple[Assignment, float]:
    """The best assignment by enumerating all of them (small instances only: tests).

    Enumerates every symmetric integer ``direct`` over demanded pairs and
    every ``core`` vector within the port budgets, and returns one with the
    least :func:`predicted_time`.
    """
    D = _check_demand(demand, ports)
    P = ports.pods
    U = np.asarray(ports.ports, dtype=np.int64)
    pairs = [(p, q) for p in range(P) for q in range(p + 1, P) if D[p, q] > 0 or D[q, p] > 0]
    best_t, best = float("inf"), Assignment(np.zeros((P, P), dtype=np.int64), np.zeros(P, dtype=np.int64))
    core_range = range(0, int(U.max()) + 1) if ports.core_ports > 0 else range(1)
    for xs in itertools.product(*[range(0, int(min(U[p], U[q])) + 1) for p, q in pairs]):
        x = np.zeros((P, P), dtype=np.int64)
        for (p, q), v in zip(pairs, xs):
            x[p, q] = x[q, p] = v
        used = x.sum(axis=1)
        if (used > U).any():
            continue
        for ys in itertools.product(core_range, repeat=P):
            y = np.asarray(ys, dtype=np.int64)
            if (used + y > U).any() or y.sum() > ports.core_ports:
                continue
            a = Assignment(x, y)
            t = predicted_time(D, a, ports)
            if t < best_t:
                best_t, best = t, a
    return best, best_t


# ---------------------------------------------------------------------------------------------- fabric
@dataclass(frozen=True)
class OcsLayout:
    """Where the OCS ports of a Fabric lead: per OCS-port fibre, its OCS, plane, pod or core.

    Attributes
    ----------
    link : ndarray of int
        OCS-port link ids.
    ocs : ndarray of int
        The OCS device of each.
    plane : ndarray of int
        The plane (index of the aggregation switch within its pod) the OCS serves.
    pod : ndarray of int
        Pod of the aggregation switch at the far end, -1 for a core switch.
    far : ndarray of int
        The device at the far end (aggregation or core switch).
    ports : PodPorts
        The per-plane port budget the solver works with.
    """

    link: np.ndarray
    ocs: np.ndarray
    plane: np.ndarray
    pod: np.ndarray
    far: np.ndarray
    ports: PodPorts


def ocs_layout(fabric: Fabric) -> OcsLayout:
    """Read the OCS structure of an ``rfabric``-style Fabric (aggregation/core ports on OCS, one plane per OCS).

    Raises
    ------
    FabricError
        If the Fabric has no OCS ports between aggregation and core, or its
        planes differ in port counts (the solver assumes identical planes).
    """
    L = fabric.links
    kind = fabric.devices.kind
    links = np.flatnonzero(L.state == LinkState.OCS_PORT)
    if links.size == 0:
        raise FabricError("fabric", f"{fabric.architecture} has no OCS ports to assign circuits on")
    ocs = fabric.ocs_of_port_link(links)
    far = np.where(L.src[links] == ocs, L.dst[links], L.src[links])
    far_kind = kind[far]
    if not np.isin(far_kind, (DeviceKind.AGG, DeviceKind.CORE)).all():
        raise FabricError("fabric", "OCS ports must lead to aggregation or core switches (rfabric)")
    pod_group = fabric.group("pod")
    is_agg = far_kind == DeviceKind.AGG
    pod = np.where(is_agg, pod_group[far], -1)
    # plane of an aggregation switch: its rank among the aggregation switches of its pod
    aggs = fabric.ids_of(DeviceKind.AGG)
    agg_pod = pod_group[aggs]
    order = np.lexsort((aggs, agg_pod))
    rank = np.empty(aggs.size, dtype=np.int64)
    starts = np.searchsorted(agg_pod[order], agg_pod[order], side="left")
    rank[order] = np.arange(aggs.size) - starts
    plane_of_dev = np.full(fabric.n_devices, -1, dtype=np.int64)
    plane_of_dev[aggs] = rank
    plane_of_ocs = np.full(fabric.n_devices, -1, dtype=np.int64)
    plane_of_ocs[ocs[is_agg]] = plane_of_dev[far[is_agg]]
    plane = plane_of_ocs[ocs]
    n_planes = int(plane.max()) + 1
    n_pods = int(agg_pod.max()) + 1
    counts = np.zeros((n_planes, n_pods), dtype=np.int64)
    np.add.at(counts, (plane[is_agg], pod[is_agg]), 1)
    core_counts = np.bincount(plane[~is_agg], minlength=n_planes)
    if (counts != counts[0]).any() or (core_counts != core_counts[0]).any():
        raise FabricError("fabric", "OCS planes differ in port counts; the circuit solver needs identical planes")
    bw = float(L.capacity[links].min())
    ports = PodPorts(counts[0].copy(), int(core_counts[0]), n_planes, bw)
    return OcsLayout(links, ocs, plane, pod, far, ports)


def configuration_for(fabric: Fabric, assignment: Assignment, layout: OcsLayout | None = None
                      ) -> tuple[Configuration, Assignment]:
    """Circuits in every plane's OCS that realise ``assignment``; also the assignment actually realised.

    A direct circuit needs a free port of both pods on one OCS of the plane
    and a core circuit a free port of the pod and of a core switch; the OCS
    with the most free ports of both is used, and core circuits of a pod go
    round-robin over the plane's core switches (so the core stays a hose).  A
    circuit that finds no OCS is dropped, and the realised assignment says so
    (it is what the timing must use).
    """
    layout = layout or ocs_layout(fabric)
    x, y = assignment.direct, assignment.core
    P = layout.ports.pods
    circuits = []
    realised_x = np.zeros_like(x)
    realised_y = np.zeros_like(y)
    pairs = [(p, q) for p in range(P) for q in range(p + 1, P) if x[p, q] > 0]
    for j in range(layout.ports.planes):
        in_plane = layout.plane == j
        ocs_ids = np.unique(layout.ocs[in_plane])
        free: dict[int, dict[int, list[int]]] = {int(o): {} for o in ocs_ids}
        core_free: dict[int, list[tuple[int, int]]] = {int(o): [] for o in ocs_ids}
        for lk, o, p, far in zip(layout.link[in_plane].tolist(), layout.ocs[in_plane].tolist(),
                                 layout.pod[in_plane].tolist(), layout.far[in_plane].tolist()):
            if p >= 0:
                free[o].setdefault(p, []).append(lk)
            else:
                core_free[o].append((far, lk))
        for o in core_free:
            core_free[o].reverse()  # pop() from the front of the original order
        for o in free:
            for p in free[o]:
                free[o][p].reverse()
        rx = np.zeros_like(x)
        for p, q in pairs:
            for _ in range(int(x[p, q])):
                best, best_o = 0, -1
                for o in free:
                    m = min(len(free[o].get(p, ())), len(free[o].get(q, ())))
                    if m > best:
                        best, best_o = m, o
                if best_o < 0:
                    break
                circuits.append((free[best_o][p].pop(), free[best_o][q].pop()))
                rx[p, q] += 1
        ry = np.zeros_like(y)
        used_core: dict[int, dict[int, int]] = {}
        for p in range(P):
            for _ in range(int(y[p])):
                best, best_o = 0, -1
                for o in free:
                    m = min(len(free[o].get(p, ())), len(core_free[o]))
                    if m > best:
                        best, best_o = m, o
                if best_o < 0:
                    break
                # the core switch this pod uses least so far (round-robin over the cores)
                mine = used_core.setdefault(p, {})
                options = core_free[best_o]
                k = min(range(len(options)), key=lambda i: (mine.get(options[i][0], 0), -i))
                core_dev, lk = options.pop(k)
                mine[core_dev] = mine.get(core_dev, 0) + 1
                circuits.append((free[best_o][p].pop(), lk))
                ry[p] += 1
        if j == 0:
            realised_x = rx + rx.T
            realised_y = ry
        else:
            # planes are identical; report the least realised plane
            realised_x = np.minimum(realised_x, rx + rx.T)
            realised_y = np.minimum(realised_y, ry)
    arr = np.asarray(circuits, dtype=np.int64).reshape(-1, 2)
    return Configuration(circuits=arr), Assignment(realised_x, realised_y)


def assignment_of(fabric: Fabric, configuration: Configuration | None = None,
                  layout: OcsLayout | None = None) -> Assignment:
    """The per-plane assignment a configuration realises (plane 0; the planes are identical)."""
    layout = layout or ocs_layout(fabric)
    cfg = configuration or fabric.configuration
    P = layout.ports.pods
    x = np.zeros((P, P), dtype=np.int64)
    y = np.zeros(P, dtype=np.int64)
    c = np.asarray(cfg.circuits, dtype=np.int64).reshape(-1, 2)
    if c.size == 0:
        return Assignment(x, y)
    pos = {int(lk): i for i, lk in enumerate(layout.link.tolist())}
    ia = np.array([pos[int(v)] for v in c[:, 0]])
    ib = np.array([pos[int(v)] for v in c[:, 1]])
    in0 = layout.plane[ia] == 0
    pa, pb = layout.pod[ia[in0]], layout.pod[ib[in0]]
    both = (pa >= 0) & (pb >= 0) & (pa != pb)
    np.add.at(x, (pa[both], pb[both]), 1)
    np.add.at(x, (pb[both], pa[both]), 1)
    one = (pa >= 0) ^ (pb >= 0)
    np.add.at(y, np.where(pa >= 0, pa, pb)[one], 1)
    return Assignment(x, y)


# ---------------------------------------------------------------------------------------------- helpers
def _offdiag(demand: np.ndarray) -> np.ndarray:
    D = np.asarray(demand, dtype=np.float64).copy()
    np.fill_diagonal(D, 0.0)
    return D


def _check_demand(demand: np.ndarray, ports: PodPorts) -> np.ndarray:
    D = _offdiag(demand)
    P = ports.pods
    if D.shape != (P, P):
        raise FabricError("demand", f"shape {D.shape} must be ({P}, {P}), one row and column per pod")
    if not np.isfinite(D).all() or (D < 0).any():
        raise FabricError("demand", "bytes must be finite and >= 0")
    return D
