"""The public entry points: :class:`Simulator` and the ``simulate_*`` functions.

A :class:`Simulator` holds everything that depends only on the Fabric (its
directed arcs, folded graph, BFS distances and a route cache per ECMP mode),
so repeated simulations on one Fabric only pay for their own flows.
:func:`simulator` returns the cached Simulator of a Fabric object; the
module-level functions use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from fabric import limits
from fabric.errors import FabricError
from fabric.model import Configuration, Fabric
from fabric.sim.collectives import (Algorithm, Collective, CollectiveName, Protocol, _rank_matrix, bus_factor,
                                    check_ranks, collective_flows, default_algorithm, hierarchical_domains)
from fabric.sim.engine import Problem, Schedule, schedule
from fabric.sim.flows import Flow, FlowTable, table_from_flows
from fabric.sim.graph import ArcGraph, build_arc_graph, endpoint_devices
from fabric.sim.hierarchical import hierarchical_flow_count, hierarchical_step, time_hierarchical
from fabric.sim.lumping import LUMP_MIN_FLOWS, Lumped, lump, unique_ints
from fabric.sim.maxmin import max_min_rates_csr
from fabric.sim.nccl import NCCL_PROTOCOLS, candidates, channel_count, nccl_model, ring_channel_count, nvls_factor, nvls_tree_factor, \
    sharp_factor, time_broadcast, time_nvls, time_nvls_tree, time_ring, time_sharp, time_tree, tuner_prefers_tree, \
    with_protocol
from fabric.sim.results import CollectiveResult, CollectivesResult, LinkLoads, SimResult
from fabric.sim.routing import ECMP_MODES, NoRoute, RouteTable, compute_routes
from fabric.sim.steps import STEP_MIN_FLOWS, ideal_ring_by_step, ideal_ring_step_count

#: Bytes per (route, arc) entry of a flows simulation, from routing to the last event: the route table's
#: parts and CSR, the problem's copy and the event loop's rows (measured: 86 B at 30,000 random flows on
#: ``dgx --gpus 16384`` under ideal ECMP, 6.8 M entries and 684 MB peak; 1 M such flows, 227 M entries,
#: used to exhaust 5 GB after a minute and end in a MemoryError).
BYTES_PER_ROUTE_ARC = 80
#: Peak bytes per flow of a ring, broadcast or tree step (:mod:`fabric.sim.nccl`), the fabric and the other
#: candidates included (measured: ``simulate dgx --gpus 131072 --collective all-reduce``, whose tree step of
#: 4.2 M flows peaked at 3.7 GB; 570 B on ``nvl-72 --gpus 16384``, 2.6 M tree flows, 1.5 GB).  Longer routes
#: cost more (1.8 KB a flow on ``nvl-576 --gpus 16384``, its NVLink switches two tiers deep): that part is the
#: routes', which :meth:`Simulator._check_route_memory` bounds before they are built.
BYTES_PER_STEP_FLOW = 800
#: Pairs routed to estimate the route length of all of them (evenly spaced over the distinct pairs).
ROUTE_SAMPLE = 64


class Simulator:
    """Flow-level simulator bound to one Fabric.

    Parameters
    ----------
    fabric : Fabric
    configuration : Configuration, optional
        OCS configuration to route over (default the Fabric's own).
    fold : bool
        Fold interchangeable switches and parallel links for ideal ECMP
        (exact; see :mod:`fabric.sim.graph`).  False routes on every arc
        (slower on large fabrics; used to test the folding).
    lump : bool, optional
        Simulate flows that do not wait on each other by equivalence classes
        (:mod:`fabric.sim.lumping`; ideal ECMP with folding only), ideal
        rings from one step (:mod:`fabric.sim.steps`) and hierarchical
        all-reduce from one step of each phase (:mod:`fabric.sim.hierarchical`),
        where that is exact.
        None (default): from :data:`~fabric.sim.lumping.LUMP_MIN_FLOWS` /
        :data:`~fabric.sim.steps.STEP_MIN_FLOWS` flows up; True: whenever
        exact; False: never (the full simulation, which the tests compare
        them with).

    Examples
    --------
    Two GPUs on one 1 GB/s link with 1 us latency: one flow of 1 MB takes
    1 ms + 1 us.

    >>> from fabric.model import FabricBuilder, DeviceKind, HBDSpec
    >>> b = FabricBuilder("demo", {})
    >>> g = b.add_devices(DeviceKind.GPU, 2, node=[0, 1])
    >>> _ = b.add_links(g[:1], g[1:], capacity=1e9, latency=1e-6, medium="copper", layer="hbd")
    >>> fab = b.build(HBDSpec(kind="none", gpus_per_node=1, domain_gpus=1))
    >>> sim = Simulator(fab)
    >>> round(sim.run([Flow(0, 1, 1e6)]).makespan_s, 9)
    0.001001
    >>> r = sim.collective(Collective("all-reduce", (0, 1), 2e6, protocol="none"))
    >>> round(r.time_s, 9), round(r.busbw_Bps / 1e9, 6)
    (0.002002, 0.999001)
    """

    def __init__(self, fabric: Fabric, configuration: Configuration | None = None, *, fold: bool = True,
                 lump: bool | None = None):
        self.fabric = fabric
        self.links = fabric.active_links(configuration)
        self.fold = bool(fold)
        self.lump = lump
        self._graphs: dict[tuple, ArcGraph] = {}
        self._tables: dict[tuple, RouteTable] = {}
        self._name_index: dict[str, int] | None = None
        self._names: np.ndarray | None = None

    # ------------------------------------------------------------------ graph and routes
    def graph(self, ecmp: str = "ideal", protect: tuple = ()) -> ArcGraph:
        """The routing graph for an ECMP mode (cached)."""
        _check_ecmp(ecmp)
        key = ("ideal", protect) if ecmp == "ideal" else ("hash",)
        if key not in self._graphs:
            if ecmp == "ideal":
                prot = np.union1d(endpoint_devices(self.fabric), np.asarray(protect, dtype=np.int64))
                g = build_arc_graph(self.fabric, self.links, fold=self.fold, bundle=self.fold, protected=prot)
            else:
                g = build_arc_graph(self.fabric, self.links, fold=False, bundle=False)
            self._graphs[key] = g
        return self._graphs[key]

    def _route_table(self, ecmp: str, seed: int, ends: np.ndarray) -> tuple[ArcGraph, RouteTable]:
        protect: tuple = ()
        g = self.graph(ecmp)
        if ecmp == "ideal" and self.fold:
            folded = ends[g.class_size[g.node_of_device[ends]] > 1]
            if folded.size:  # endpoints that are folded switches: route on a graph that keeps them apart
                protect = tuple(np.unique(folded).tolist())
                g = self.graph(ecmp, protect)
        gkey = ("ideal", protect) if ecmp == "ideal" else ("hash",)
        key = (gkey, ecmp, int(seed) if ecmp == "hash" else 0)
        if key not in self._tables:
            self._tables[key] = RouteTable(g, ecmp, int(seed))
        return g, self._tables[key]

    def route(self, src: int | str, dst: int | str, *, ecmp: str = "ideal", seed: int = 0) -> dict:
        """The route between two devices: the active links it uses and the share of bytes on each.

        Returns
        -------
        dict
            ``links`` (active-link indices), ``forward`` (True where the
            route crosses the link ``src -> dst``), ``fraction`` (share of
            the flow's bytes per link direction) and ``latency_s``.
        """
        s, d = self.device(src, "src"), self.device(dst, "dst")
        g, rt = self._route_table(ecmp, seed, np.array([s, d]))
        rid = int(self._ids(g, rt, np.array([s]), np.array([d]), "route")[0])
        row = rt.matrix()[rid]
        base, share = _to_base_arcs(g, row.indices, row.data)
        return {"links": (base // 2).tolist(), "forward": (base % 2 == 0).tolist(), "fraction": share.tolist(),
                "latency_s": float(rt.latency[rid])}

    def _ids(self, g: ArcGraph, rt: RouteTable, src: np.ndarray, dst: np.ndarray, field: str) -> np.ndarray:
        try:
            return rt.ids(g.node_of_device[src], g.node_of_device[dst])
        except NoRoute as exc:
            names = self.names
            raise FabricError(field, f"{names[exc.src_device]} cannot reach {names[exc.dst_device]} "
                                     "(disconnected under the active configuration)") from None

    def problem(self, flows: FlowTable, *, ecmp: str = "ideal", seed: int = 0,
                field: str = "flows") -> tuple[Problem, ArcGraph, np.ndarray]:
        """Route ``flows`` and assemble the engine's :class:`~fabric.sim.engine.Problem`.

        Returns the problem, the graph, and the graph arc of every problem arc.
        """
        _check_ecmp(ecmp)
        flows.validate(self.fabric.n_devices, field)
        pair_of, ps, pd = flows.pairs()
        g, rt = self._route_table(ecmp, seed, np.concatenate([ps, pd]))
        # a collective's routes outgrow memory with the GPUs that take part: its size is at fault, not its ranks
        # (a "ranks" error is otherwise an unreachable rank, which `mfu` blames on the topology file)
        self._check_route_memory(g, rt, ps, pd, "gpus" if field == "ranks" else field)
        ids = self._ids(g, rt, ps, pd, field)
        # ids and arcs are bounded ints: unique by counting, not by sorting (millions of arc entries at 64k GPUs)
        uroutes, local = unique_ints(ids, len(rt))
        R = rt.matrix()[uroutes]
        # keep only the arcs these routes use
        arcs, col = unique_ints(R.indices, g.n_arcs)
        R = type(R)((R.data, col, R.indptr), shape=(R.shape[0], arcs.size))
        prob = Problem(R, g.capacity[arcs], rt.latency[uroutes], local[pair_of].astype(np.int64), flows.size,
                       flows.start, flows.count, flows.dep_ptr, flows.dep_idx, flows.latency)
        return prob, g, arcs

    def _check_route_memory(self, g: ArcGraph, rt: RouteTable, ps: np.ndarray, pd: np.ndarray, field: str) -> None:
        """Refuse flows whose routes would not fit the memory limit, before routing them all.

        Under ideal ECMP a route spreads over every shortest path (about 230 arcs between pods of a
        16,384-GPU fat-tree), so memory grows with distinct pairs x route length, not with the flow count
        alone that the ``flows`` limit bounds.  The length is the mean of :data:`ROUTE_SAMPLE` pairs evenly
        spaced over the distinct ones (routed apart from the cache, so nothing is kept).
        """
        from fabric import limits

        n = int(ps.size)
        if n <= ROUTE_SAMPLE:
            return
        pick = np.unique(np.linspace(0, n - 1, ROUTE_SAMPLE).astype(np.int64))
        sn, dn = g.node_of_device[ps[pick]], g.node_of_device[pd[pick]]
        try:
            ptr = compute_routes(g, sn, dn, rt.mode, rt.seed)[0]
        except NoRoute:
            return  # the full routing names the pair
        per_route = float(ptr[-1]) / pick.size
        limits.check("memory", n * per_route * BYTES_PER_ROUTE_ARC, field,
                     f"{n:,} distinct (src, dst) pairs x ~{per_route:,.0f} route arcs each x {BYTES_PER_ROUTE_ARC} B")

    # ----------------------------------------------------------------------- simulation
    def run(self, flows: FlowTable | Sequence[Flow], *, ecmp: str = "ideal", seed: int = 0,
            method: str = "auto") -> SimResult:
        """Simulate flows.

        Parameters
        ----------
        flows : FlowTable or sequence of Flow
        ecmp : {'ideal', 'hash'}
            Fluid split per next hop, or one hashed path per (src, dst)
            (see :mod:`fabric.sim.routing`).
        seed : int
            Hash seed for ``ecmp='hash'``.
        method : {'auto', 'dag', 'event'}
            Scheduler (see :mod:`fabric.sim.engine`).

        Returns
        -------
        SimResult
        """
        ids = None
        if not isinstance(flows, FlowTable):
            if isinstance(flows, (str, bytes)) or not hasattr(flows, "__iter__"):
                raise FabricError("flows", f"must be a FlowTable or a sequence of Flow, not {type(flows).__name__}")
            flows, ids = table_from_flows(list(flows), self.device)
        sched, g, arcs, arc_bytes = self._schedule_table(flows, ecmp, seed, method, "flows")
        makespan = float(sched.finish.max()) if len(flows) else 0.0
        loads = self._loads(g, arcs, arc_bytes, makespan)
        return SimResult(sched.release, sched.tx_end, sched.finish, makespan, sched.method, sched.events, loads, ids)

    def _schedule_table(self, flows: FlowTable, ecmp: str, seed: int, method: str,
                        field: str) -> tuple[Schedule, ArcGraph, np.ndarray, np.ndarray]:
        """Route and schedule a flow table, by equivalence classes where exact (:mod:`fabric.sim.lumping`).

        Returns the per-flow schedule, the graph, and graph arcs with the bytes each carries.
        """
        lumped = self._lumped(flows, ecmp, seed, field)
        if lumped is not None:
            g, lp = lumped
            prob = lp.problem
            sched = schedule(prob, method)
            c = lp.class_of_flow
            sched = Schedule(sched.release[c], sched.tx_end[c], sched.finish[c], "classes+" + sched.method,
                             sched.events)
            route_bytes = np.bincount(prob.route, weights=prob.size * prob.count, minlength=prob.R.shape[0])
            arcs, arc_bytes = lp.arc_values(prob.R.T @ route_bytes)
            return sched, g, arcs, arc_bytes
        prob, g, arcs = self.problem(flows, ecmp=ecmp, seed=seed, field=field)
        sched = schedule(prob, method)
        # bytes per arc do not depend on timing: route fractions x bytes
        route_bytes = np.bincount(prob.route, weights=flows.size * flows.count, minlength=prob.R.shape[0])
        return sched, g, arcs, prob.R.T @ route_bytes

    def _lumped(self, flows: FlowTable, ecmp: str, seed: int, field: str) -> tuple[ArcGraph, Lumped] | None:
        """The flow classes of ``flows`` when asked for (``lump``) and exact, else None."""
        if (self.lump is False or ecmp != "ideal" or not self.fold
                or (self.lump is None and len(flows) < LUMP_MIN_FLOWS)):
            return None
        _check_ecmp(ecmp)
        flows.validate(self.fabric.n_devices, field)
        _, ps, pd = flows.pairs()
        g, rt = self._route_table(ecmp, seed, np.concatenate([ps, pd]))
        # no route-memory check here: classes route one representative pair each (4.2 M all-to-all flows among
        # 2,048 GPUs of a 3-tier fat-tree: under 1 GiB), and when they do not apply problem() checks the full set
        try:
            lp = lump(g, rt, flows, g.node_of_device[flows.src], g.node_of_device[flows.dst])
        except NoRoute:
            return None  # the full simulation names the pair
        return None if lp is None else (g, lp)

    def rates(self, flows: FlowTable | Sequence[Flow], *, ecmp: str = "ideal", seed: int = 0) -> np.ndarray:
        """Max-min fair rate of every flow (bytes/s) if all were active at once (starts and waits ignored)."""
        if not isinstance(flows, FlowTable):
            flows, _ = table_from_flows(list(flows), self.device)
        prob, _, _ = self.problem(flows, ecmp=ecmp, seed=seed)
        R = prob.R
        cnt = R.indptr[prob.route + 1] - R.indptr[prob.route]
        pos = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt - R.indptr[prob.route], cnt)
        return max_min_rates_csr(np.concatenate([[0], np.cumsum(cnt)]), R.indices[pos], R.data[pos], prob.capacity,
                                 prob.count)

    def collective(self, coll: Collective, *, ecmp: str = "ideal", seed: int = 0,
                   method: str = "auto") -> CollectiveResult:
        """Simulate one collective alone."""
        return self.collectives([coll], ecmp=ecmp, seed=seed, method=method).collectives[0]

    def collectives(self, colls: Iterable[Collective], *, ecmp: str = "ideal", seed: int = 0,
                    method: str = "auto") -> CollectivesResult:
        """Simulate collectives that run at the same time and contend for links.

        Collectives of the ideal model (``protocol='none'``, one channel) run
        as one flow DAG and contend with each other.  Collectives as NCCL runs
        them (:mod:`fabric.sim.nccl`) are timed per batch (collectives that
        differ only in their ranks, e.g. every DP group of a job): the groups
        of a batch contend; separate batches are timed apart.
        """
        colls = list(colls)
        if not colls:
            raise FabricError("collectives", "need at least one collective")
        _check_ecmp(ecmp)
        batches: dict[tuple, list[int]] = {}
        for k, c in enumerate(colls):
            if not isinstance(c, Collective):
                raise FabricError("collectives", f"item {k} is not a Collective")
            c.validate_params()
            batches.setdefault(c.batch_key(), []).append(k)
        gpu_ids = self.fabric.gpu_ids
        rank_rows = {}
        for key, members in batches.items():
            ranks = _rank_matrix([colls[k].ranks for k in members])
            check_ranks(ranks, gpu_ids.size)
            rank_rows[key] = gpu_ids[ranks]
        if all(colls[m[0]].ideal for m in batches.values()):
            if len(batches) == 1 and method != "event":
                (key, members), = batches.items()
                run = self._ideal_step_run(colls[members[0]], rank_rows[key], np.asarray(members), len(colls),
                                           ecmp, seed)
                if run is not None:
                    return self._collect(colls, [run], run.finish_of_tag, run.flows_of_tag,
                                         {k: run.algorithm for k in members}, {k: Protocol.NONE for k in members},
                                         {k: 1 for k in members})
            tables = [collective_flows(colls[m[0]], rank_rows[key], self.fabric.group("domain"), tags=m)
                      for key, m in batches.items()]
            run = self._run_table(FlowTable.concat(tables), len(colls), ecmp, seed, method)
            algos = {k: default_algorithm(colls[k].name) if colls[k].resolved_algorithm == Algorithm.AUTO
                     else colls[k].resolved_algorithm for k in range(len(colls))}
            return self._collect(colls, [run], run.finish_of_tag, run.flows_of_tag, algos,
                                 {k: Protocol.NONE for k in algos}, {k: 1 for k in algos})
        runs, finish, n_flows = [], np.full(len(colls), -np.inf), np.zeros(len(colls), dtype=np.int64)
        algos, protos, chans = {}, {}, {}
        for key, members in batches.items():
            best = self._nccl_batch(colls[members[0]], rank_rows[key], np.asarray(members), ecmp, seed, method)
            runs.append(best)
            finish[members] = best.finish_of_tag[members]
            n_flows[members] = best.flows_of_tag[members]
            for k in members:
                algos[k], protos[k], chans[k] = best.algorithm, best.protocol, best.channels
        return self._collect(colls, runs, finish, n_flows, algos, protos, chans)

    def batch_times(self, c0: Collective, ranks: np.ndarray, *, ecmp: str = "ideal", seed: int = 0,
                    method: str = "auto") -> np.ndarray:
        """Completion time (s) of each of many collectives like ``c0`` that differ only in their ranks, run at once.

        The same as :meth:`collectives` on one :class:`Collective` per row of
        ``ranks`` (one batch: the groups contend), without building them: the
        step model asks for tens of thousands of send/recv pairs at a time,
        whose objects, checks and per-collective results cost more than the
        simulation.

        Parameters
        ----------
        c0 : Collective
            Everything but the ranks (its own ranks give the group size).
        ranks : ndarray of int, shape (G, len(c0.ranks))
            GPU indices of every group.

        Returns
        -------
        ndarray, shape (G,)
        """
        c0.validate_params()
        _check_ecmp(ecmp)
        ranks = np.asarray(ranks)
        if ranks.ndim != 2 or ranks.shape[1] != len(c0.ranks) or ranks.dtype.kind not in "iu":
            raise FabricError("ranks", f"must be GPU indices of shape (groups, {len(c0.ranks)}), got {ranks.shape}")
        ranks = ranks.astype(np.int64)
        check_ranks(ranks, self.fabric.gpu_ids.size)
        devices = self.fabric.gpu_ids[ranks]
        members = np.arange(ranks.shape[0])
        if c0.ideal:
            run = self._ideal_step_run(c0, devices, members, members.size, ecmp, seed) if method != "event" else None
            if run is None:
                table = collective_flows(c0, devices, self.fabric.group("domain"), tags=members)
                run = self._run_table(table, members.size, ecmp, seed, method)
        else:
            run = self._nccl_batch(c0, devices, members, ecmp, seed, method)
        start = float(c0.start_s)
        return np.maximum(run.finish_of_tag[members], start) - start

    def _collect(self, colls, runs, finish, n_flows, algos, protos, chans) -> CollectivesResult:
        out = []
        for k, c in enumerate(colls):
            fin = max(float(finish[k]), float(c.start_s))
            t = fin - float(c.start_s)
            n = len(c.ranks)
            algbw = float(c.size) / t if t > 0 else float("inf")
            out.append(CollectiveResult(str(c.name), str(algos[k]), n, float(c.size), float(c.start_s), fin, t,
                                        algbw, algbw * bus_factor(c.name, n), int(n_flows[k]), str(protos[k]),
                                        int(chans[k])))
        makespan = max(float(finish.max()), 0.0)
        cat = np.concatenate
        fwd = sum(r.loads.bytes_fwd for r in runs)
        rev = sum(r.loads.bytes_rev for r in runs)
        loads = LinkLoads(self.links, fwd, rev, makespan, self.names)
        sim = SimResult(cat([r.release for r in runs]), cat([r.tx_end for r in runs]), cat([r.finish for r in runs]),
                        makespan, "+".join(sorted({r.method for r in runs})), sum(r.events for r in runs), loads)
        return CollectivesResult(out, sim)

    def _run_table(self, flows: FlowTable, n_tags: int, ecmp: str, seed: int, method: str,
                   scale: float = 1.0) -> "_Run":
        """Route and schedule a flow DAG; finish time and flow count per tag, link loads."""
        sched, g, arcs, arc_bytes = self._schedule_table(flows, ecmp, seed, method, "ranks")
        finish = np.full(n_tags, -np.inf)
        if len(flows):
            np.maximum.at(finish, flows.tag, sched.finish)
        n_flows = np.bincount(flows.tag, minlength=n_tags) if len(flows) else np.zeros(n_tags, dtype=np.int64)
        makespan = float(sched.finish.max()) if len(flows) else 0.0
        loads = self._loads(g, arcs, arc_bytes * scale, makespan)
        return _Run(finish, n_flows, sched.release, sched.tx_end, sched.finish, sched.method, sched.events, loads)

    def _ideal_step_run(self, c0: Collective, devices: np.ndarray, members: np.ndarray, n_tags: int, ecmp: str,
                        seed: int) -> "_Run | None":
        """The ideal ring or hierarchical all-reduce of every group timed from steps, when asked for and exact."""
        if c0.resolved_algorithm == Algorithm.HIERARCHICAL:
            runs = self._hierarchical_runs(c0, devices, members, n_tags, (Protocol.NONE,), None, ecmp, seed)
            return None if runs is None else runs[0]
        return self._ideal_ring_run(c0, devices, members, n_tags, ecmp, seed)

    def _ideal_ring_run(self, c0: Collective, devices: np.ndarray, members: np.ndarray, n_tags: int, ecmp: str,
                        seed: int) -> "_Run | None":
        """The ideal ring of every group timed from one step (:mod:`fabric.sim.steps`), when asked for
        (``lump``; by default only for DAGs of :data:`STEP_MIN_FLOWS` flows and more) and exact, else None."""
        rings = (CollectiveName.ALL_REDUCE, CollectiveName.REDUCE_SCATTER, CollectiveName.ALL_GATHER)
        G, n = devices.shape
        if (self.lump is False or c0.name not in rings or c0.resolved_algorithm not in (Algorithm.AUTO, Algorithm.RING)
                or n < 2 or (self.lump is None and G * n * ideal_ring_step_count(c0.name, n) < STEP_MIN_FLOWS)):
            return None
        st = ideal_ring_by_step(self, c0.name, devices, float(c0.size), float(c0.start_s), members, ecmp, seed)
        if st is None:
            return None
        finish = np.full(n_tags, -np.inf)
        finish[members] = float(c0.start_s) + st.time_s
        n_flows = np.zeros(n_tags, dtype=np.int64)
        n_flows[members] = n * st.steps
        prob = st.problem
        route_bytes = np.bincount(prob.route, weights=prob.size * prob.count, minlength=prob.R.shape[0])
        loads = self._loads(st.graph, st.arcs, (prob.R.T @ route_bytes) * st.steps, float(finish[members].max()))
        sched = st.schedule
        return _Run(finish, n_flows, sched.release, sched.tx_end, sched.finish, "step+dag", 0,
                    loads)._named(Algorithm.RING, Protocol.NONE, 1)

    def _hierarchical_runs(self, c0: Collective, devices: np.ndarray, members: np.ndarray, n_tags: int,
                           protocols: Sequence[str], model, ecmp: str, seed: int) -> "list[_Run] | None":
        """Hierarchical all-reduce of every group timed from one step of each phase
        (:mod:`fabric.sim.hierarchical`), one run per protocol, when asked for (``lump``; by default only for DAGs
        of :data:`STEP_MIN_FLOWS` flows and more) and exact, else None."""
        G, n = devices.shape
        if self.lump is False or c0.name != CollectiveName.ALL_REDUCE or n < 2:
            return None
        domains = hierarchical_domains(devices, self.fabric.group("domain"))
        if self.lump is None and G * hierarchical_flow_count(*domains.shape) < STEP_MIN_FLOWS:
            return None
        step = hierarchical_step(self, devices, domains, float(c0.size), float(c0.start_s), members, ecmp, seed)
        if step is None:
            return None
        prob, runs = step.problem, []
        n_flows = np.zeros(n_tags, dtype=np.int64)
        n_flows[members] = step.flows_per_group
        for p in protocols:
            flows = step.flows if p == Protocol.NONE else with_protocol(self.fabric, step.flows, model, p, False)
            fin, sched = time_hierarchical(step, flows.size, flows.start, flows.latency)
            finish = np.full(n_tags, -np.inf)
            finish[members] = fin
            # bytes per arc do not depend on timing: every step flow stands for `copies` flows of the DAG
            route_bytes = np.bincount(prob.route, weights=flows.size * flows.count * step.copies,
                                      minlength=prob.R.shape[0])
            loads = self._loads(step.graph, step.arcs, prob.R.T @ route_bytes, float(fin.max()))
            runs.append(_Run(finish, n_flows, sched.release, sched.tx_end, sched.finish, "step+dag", 0,
                             loads)._named(Algorithm.HIERARCHICAL, p, 1))
        return runs

    def _nccl_batch(self, c0: Collective, devices: np.ndarray, members: np.ndarray, ecmp: str, seed: int,
                    method: str) -> "_Run":
        """Time one batch as NCCL would run it: every candidate algorithm (and protocol), the fastest wins."""
        n_tags = int(members.max()) + 1
        G, n = devices.shape
        ar = c0.name == CollectiveName.ALL_REDUCE
        nvls = nvls_factor(self.fabric, devices) if ar else None
        sharp = sharp_factor(self.fabric) if ar else None
        nvls_tree = nvls_tree_factor(self.fabric, devices) if ar else None
        model = nccl_model()
        proto = c0.resolved_protocol
        best = None
        algos = list(candidates(c0.name, c0.resolved_algorithm, nvls, n, sharp, nvls_tree, proto))
        self._check_step_flows(c0, algos, devices)
        # ring or tree: NCCL's tuner decides between them by its own model, not by which is faster on the
        # graph (a tree over two nodes moves half the ring's network bytes, yet NCCL runs the ring there)
        tuned = (c0.resolved_algorithm == Algorithm.AUTO and not c0.ideal and Algorithm.RING in algos
                 and Algorithm.TREE in algos)
        loser = None
        for algo in algos:
            if algo == loser:
                continue
            for run in self._nccl_runs(c0, algo, proto, devices, members, n_tags, (nvls, sharp, nvls_tree), model,
                                       ecmp, seed, method):
                if tuned and algo == Algorithm.RING and run.method.startswith("step"):
                    tree = self._tuner_prefers_tree(c0, devices, run, model)
                    loser = Algorithm.RING if tree else Algorithm.TREE
                    if tree:
                        continue
                if best is None or run.finish_of_tag[members].max() < best.finish_of_tag[members].max():
                    best = run
        if best is None:
            raise FabricError("algorithm", f"{c0.resolved_algorithm} cannot run on these ranks (nvls needs every "
                                           "group inside one NVLink switch domain whose chips reduce, nvls-tree "
                                           "several such domains with equal ranks in each; sharp needs several HBD "
                                           "domains on DCN switches that reduce)")
        return best

    def _tuner_prefers_tree(self, c0: Collective, devices: np.ndarray, ring: "_Run", model) -> bool:
        """NCCL's tuner's choice of a tree over the ``ring`` just timed (:func:`fabric.sim.nccl.tuner_prefers_tree`),
        with the ring's Simple bus bandwidth from its step: each step moves ``S / (n C)`` per channel flow in
        ``tx`` seconds, so the bus bandwidth is ``S / (n tx)``."""
        n = devices.shape[1]
        tx = float((ring.tx_end - ring.release).max())
        if not tx > 0:
            return False
        busbw = float(c0.size) / (n * tx)
        protocols = NCCL_PROTOCOLS if c0.resolved_protocol == Protocol.AUTO else (c0.resolved_protocol,)
        return tuner_prefers_tree(model, self.fabric, devices[0], float(c0.size), busbw, ring.channels, protocols)

    def _check_step_flows(self, c0, algos, devices: np.ndarray) -> None:
        """:meth:`_step_channels` of every candidate that :meth:`_nccl_runs` times from a ring or tree step, before
        any is timed: under ``auto`` the tree's 4 flows per rank and channel were refused after the ring had
        run (16 s on ``nvl-72 --gpus 65536``)."""
        n = devices.shape[1]
        rings = (CollectiveName.ALL_REDUCE, CollectiveName.REDUCE_SCATTER, CollectiveName.ALL_GATHER)
        broadcast = c0.name == CollectiveName.BROADCAST and c0.chunks is None and not c0.ideal
        if n > 1 and Algorithm.RING in algos and (c0.name in rings or broadcast):
            self._step_channels(c0, devices, ring_channel_count, 1, "rings")
        if n > 1 and Algorithm.TREE in algos and c0.name == CollectiveName.ALL_REDUCE and not c0.ideal:
            self._step_channels(c0, devices, channel_count, 4, "trees")

    def _step_channels(self, c0, devices: np.ndarray, count, per_rank: int, what: str) -> int:
        """The channels of a ring, broadcast or tree step (``c0.channels``, else NCCL's ``count``), refused
        before any array when the step's flows (groups x ranks x channels x ``per_rank``) would not fit the
        ``memory`` limit at :data:`BYTES_PER_STEP_FLOW` each.

        NCCL's default is one channel per rank of an HBD domain the group spans, at most MAXCHANNELS (64); before
        that cap, 4,096 on two TPUv4 pods, where 8,192 ranks built 33.5 M step flows and grew past 23 GB before
        anything was refused (the CLI's per-rank estimate was measured on DGX, 8 channels).
        """
        channels = c0.channels or count(self.fabric, devices[0])
        G, n = devices.shape
        each = f" x {per_rank} flows each" if per_rank > 1 else ""
        default = "" if c0.channels else (f"; NCCL's default channels, one per rank of an HBD domain, at most "
                                          f"{nccl_model().max_channels}")
        limits.check("memory", float(G) * n * channels * per_rank * BYTES_PER_STEP_FLOW, "channels",
                     f"{G:,} group{'s' * (G != 1)} x {n:,} ranks x {channels:,} {what}{each} x "
                     f"~{BYTES_PER_STEP_FLOW} B per step flow{default}")
        return channels

    def _nccl_runs(self, c0, algo, proto, devices, members, n_tags, reducing, model, ecmp, seed, method):
        """The runs of one algorithm under the protocols to try (a generator)."""
        nvls, sharp, nvls_tree = reducing
        G, n = devices.shape
        domain = self.fabric.group("domain")
        rings = (CollectiveName.ALL_REDUCE, CollectiveName.REDUCE_SCATTER, CollectiveName.ALL_GATHER)
        if algo == Algorithm.NVLS:
            rt = None if nvls is None else time_nvls(self, self.fabric, devices, float(c0.size), nvls, model, method,
                                                     ecmp, seed, float(c0.start_s))
            if rt is not None:
                yield self._ring_run(rt, c0, members, n_tags, model)._named(algo, rt.protocol, 1)
            return
        if algo == Algorithm.NVLS_TREE:
            rt = None if nvls_tree is None else time_nvls_tree(self, self.fabric, devices, float(c0.size), nvls_tree,
                                                               model, method, ecmp, seed, float(c0.start_s))
            if rt is not None:
                yield self._ring_run(rt, c0, members, n_tags, model)._named(algo, rt.protocol, rt.channels)
            return
        if algo == Algorithm.SHARP:
            rt = None if sharp is None else time_sharp(self, self.fabric, devices, float(c0.size), sharp, model,
                                                       method, ecmp, seed, float(c0.start_s))
            if rt is not None:
                yield self._ring_run(rt, c0, members, n_tags, model)._named(algo, rt.protocol, 1)
            return
        if algo == Algorithm.RING and c0.name in rings and n > 1:
            channels = self._step_channels(c0, devices, ring_channel_count, 1, "rings")
            if not (c0.ideal and channels == 1):
                rt = time_ring(self, self.fabric, c0.name, devices, float(c0.size), proto, channels, model, method,
                               ecmp, seed, float(c0.start_s))
                yield self._ring_run(rt, c0, members, n_tags, model)._named(algo, rt.protocol, rt.channels)
                return
        if algo == Algorithm.RING and c0.name == CollectiveName.BROADCAST and c0.chunks is None and n > 1 \
                and not c0.ideal:  # NCCL's pieces (one protocol step each); given chunks keep the flow DAG's
            channels = self._step_channels(c0, devices, ring_channel_count, 1, "rings")
            rt = time_broadcast(self, self.fabric, devices, float(c0.size), int(c0.root), proto, channels, model,
                                method, ecmp, seed, float(c0.start_s))
            yield self._ring_run(rt, c0, members, n_tags, model)._named(algo, rt.protocol, rt.channels)
            return
        if algo == Algorithm.TREE and c0.name == CollectiveName.ALL_REDUCE and not c0.ideal and n > 1:
            channels = self._step_channels(c0, devices, channel_count, 4, "trees")
            rt = time_tree(self, self.fabric, devices, float(c0.size), proto, channels, model, method, ecmp, seed,
                           float(c0.start_s))
            yield self._ring_run(rt, c0, members, n_tags, model)._named(algo, rt.protocol, rt.channels)
            return
        if algo == Algorithm.HIERARCHICAL and method != "event":
            protos = (Protocol.NONE,) if proto == Protocol.NONE else NCCL_PROTOCOLS if proto == Protocol.AUTO \
                else (proto,)
            runs = self._hierarchical_runs(c0, devices, members, n_tags, protos, model, ecmp, seed)
            if runs is not None:
                yield from runs
                return
        table = collective_flows(c0, devices, domain, tags=members, algorithm=algo)
        if c0.resolved_protocol == Protocol.NONE:
            yield self._run_table(table, n_tags, ecmp, seed, method)._named(algo, Protocol.NONE, 1)
            return
        tree = algo == Algorithm.TREE
        for p in (NCCL_PROTOCOLS if proto == Protocol.AUTO else (proto,)):
            run = self._run_table(with_protocol(self.fabric, table, model, p, tree), n_tags, ecmp, seed, method)
            yield run._named(algo, p, 1)

    def _ring_run(self, rt, c0: Collective, members: np.ndarray, n_tags: int, model) -> "_Run":
        flows, prob, sched = rt.step_flows, rt.step_problem, rt.step_schedule
        finish = np.full(n_tags, -np.inf)
        finish[members] = float(c0.start_s) + rt.time_s
        n_flows = np.zeros(n_tags, dtype=np.int64)
        n_flows[members] = int(flows.count.sum()) // len(members) * rt.steps * rt.pieces
        scale = rt.steps / (model.payload[rt.protocol] if rt.protocol != Protocol.NONE else 1.0)
        route_bytes = np.bincount(prob.route, weights=flows.size * flows.count, minlength=prob.R.shape[0])
        makespan = float(finish[members].max())
        loads = self._loads(rt.step_graph, rt.step_arcs, (prob.R.T @ route_bytes) * scale, makespan)
        return _Run(finish, n_flows, sched.release, sched.tx_end, sched.finish, "step+" + sched.method,
                    sched.events, loads)

    # -------------------------------------------------------------------------- helpers
    @property
    def names(self) -> np.ndarray:
        if self._names is None:
            self._names = self.fabric.device_names()
        return self._names

    def device(self, value, field: str = "device") -> int:
        """Device id of an id or a name."""
        if isinstance(value, (str, np.str_)):
            if self._name_index is None:
                self._name_index = {str(n): i for i, n in enumerate(self.names)}
            if value not in self._name_index:
                raise FabricError(field, f"no device named {value!r}")
            return self._name_index[str(value)]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise FabricError(field, f"{value!r} must be a device id or name")
        if not 0 <= int(value) < self.fabric.n_devices:
            raise FabricError(field, f"device {value} is not in the topology (0..{self.fabric.n_devices - 1})")
        return int(value)

    def _loads(self, g: ArcGraph, arcs: np.ndarray, arc_bytes: np.ndarray, makespan: float) -> LinkLoads:
        base, share = _to_base_arcs(g, arcs, arc_bytes)
        n = len(self.links)
        fwd = np.zeros(n)
        rev = np.zeros(n)
        is_fwd = base % 2 == 0
        np.add.at(fwd, base[is_fwd] // 2, share[is_fwd])
        np.add.at(rev, base[~is_fwd] // 2, share[~is_fwd])
        return LinkLoads(self.links, fwd, rev, makespan, self.names)


@dataclass
class _Run:
    """One scheduled batch: finish time and flows per tag, per-flow times, link loads, and what ran."""

    finish_of_tag: np.ndarray
    flows_of_tag: np.ndarray
    release: np.ndarray
    tx_end: np.ndarray
    finish: np.ndarray
    method: str
    events: int
    loads: LinkLoads
    algorithm: str = ""
    protocol: str = ""
    channels: int = 1

    def _named(self, algorithm: str, protocol: str, channels: int) -> "_Run":
        self.algorithm, self.protocol, self.channels = str(algorithm), str(protocol), int(channels)
        return self


def _to_base_arcs(g: ArcGraph, arcs: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Spread per-arc values evenly over each bundle's member base arcs."""
    cnt = g.member_ptr[arcs + 1] - g.member_ptr[arcs]
    total = int(cnt.sum())
    offsets = np.cumsum(cnt) - cnt
    pos = np.arange(total, dtype=np.int64) - np.repeat(offsets - g.member_ptr[arcs], cnt)
    return g.member_arc[pos], np.repeat(np.asarray(values, dtype=np.float64) / cnt, cnt)


def _check_ecmp(ecmp: str) -> None:
    if ecmp not in ECMP_MODES:
        raise FabricError("ecmp", f"{ecmp!r} is not one of {', '.join(ECMP_MODES)}")


# --------------------------------------------------------------------- module-level API
_SIMULATOR_ATTR = "_simulator"


def simulator(fabric: Fabric) -> Simulator:
    """The cached :class:`Simulator` of a Fabric object (built on first use, freed with the Fabric).

    It is kept on the Fabric itself: a module-level cache keyed by the Fabric's id held the Simulator,
    and the Simulator its Fabric, so no simulated Fabric (a sweep's points, ``rl --table``'s candidates
    and their per-epoch circuit configurations) was ever freed, nor its routing graphs and tables.  The
    Fabric -> Simulator -> Fabric cycle is collected with the Fabric; the attribute is not a dataclass
    field, so it takes no part in equality, ``repr`` or :meth:`~fabric.model.Fabric.with_configuration`.
    """
    sim = vars(fabric).get(_SIMULATOR_ATTR)
    if sim is None:
        sim = Simulator(fabric)
        object.__setattr__(fabric, _SIMULATOR_ATTR, sim)  # a cache, not a change of the (frozen) Fabric
    return sim


def simulate_flows(fabric: Fabric, flows: FlowTable | Sequence[Flow], *, ecmp: str = "ideal", seed: int = 0,
                   method: str = "auto") -> SimResult:
    """Simulate flows on a Fabric (see :meth:`Simulator.run`)."""
    return simulator(fabric).run(flows, ecmp=ecmp, seed=seed, method=method)


def simulate_collective(fabric: Fabric, collective: Collective | str, ranks: Sequence[int] | None = None,
                        size: float | None = None, *, algorithm: str | None = None, chunks: int | None = None,
                        root: int = 0, protocol: str | None = None, channels: int | None = None,
                        ecmp: str = "ideal", seed: int = 0, method: str = "auto") -> CollectiveResult:
    """Simulate one collective.

    Parameters
    ----------
    fabric : Fabric
    collective : Collective or str
        A :class:`Collective`, or its name (then give ``ranks`` and ``size``).
    ranks : sequence of int
        GPU indices.
    size : float
        Per-rank buffer, bytes.
    algorithm, chunks, root, protocol, channels
        See :class:`Collective` (``protocol='none', channels=1``: the ideal
        flow model of the closed forms).
    ecmp, seed, method
        See :meth:`Simulator.run`.

    Returns
    -------
    CollectiveResult
        ``time_s``, ``algbw_Bps``, ``busbw_Bps``, ...
    """
    coll = _as_collective(collective, ranks, size, algorithm, chunks, root, protocol, channels)
    return simulator(fabric).collective(coll, ecmp=ecmp, seed=seed, method=method)


def simulate_collectives(fabric: Fabric, collectives: Iterable[Collective], *, ecmp: str = "ideal", seed: int = 0,
                         method: str = "auto") -> CollectivesResult:
    """Simulate collectives running at once (e.g. every DP group of a job), contending for links."""
    return simulator(fabric).collectives(collectives, ecmp=ecmp, seed=seed, method=method)


def _as_collective(collective, ranks, size, algorithm, chunks, root, protocol=None, channels=None) -> Collective:
    if isinstance(collective, Collective):
        return collective
    if ranks is None or size is None:
        raise FabricError("ranks", "give ranks and size with a collective name")
    return Collective(str(collective), tuple(ranks), size, algorithm, chunks, root, protocol=protocol,
                      channels=channels)
