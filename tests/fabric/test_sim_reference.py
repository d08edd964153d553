"""A plain reference simulator, and the fast engine checked against it on random cases.

The reference is deliberately naive: Python dicts, every shortest path
enumerated explicitly (ECMP ideal split: a path's share is the product of
1/(ports toward the destination) at each node it leaves), and max-min rates
recomputed from scratch by progressive filling at every event.  It shares no
code with ``fabric.sim``: only the Fabric's active links go in.  A GPU
forwards only from an HBD link to an HBD link (no GPU passes traffic between
its NVLink and its NIC): the reference's distances are those of such walks,
found by plain relaxation to a fixed point.
"""

from __future__ import annotations

import math
from collections import defaultdict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.model import DeviceKind, FabricBuilder, Layer
from fabric.sim import Flow, Simulator
from tests.fabric.test_sim_fabrics import HBD_NONE

TIME_TOL = 1e-12


# ------------------------------------------------------------------------ reference
class Ports(defaultdict):
    """node -> list of (neighbour, arc, capacity, latency); ``gpus`` (device ids) and ``hbd`` (arcs on HBD links)."""

    gpus: frozenset = frozenset()
    hbd: frozenset = frozenset()


def reference_ports(fabric):
    """Ports of every node (:class:`Ports`) and capacity per arc; arc = (active link, direction)."""
    links = fabric.active_links()
    ports = Ports(list)
    cap = {}
    hbd = set()
    for j in range(len(links)):
        s, d = int(links.src[j]), int(links.dst[j])
        c, lat = float(links.capacity[j]), float(links.latency[j])
        if c <= 0 or s == d:
            continue
        ports[s].append((d, (j, 0), c, lat))
        ports[d].append((s, (j, 1), c, lat))
        cap[(j, 0)] = cap[(j, 1)] = c
        if int(links.layer[j]) == int(Layer.HBD):
            hbd |= {(j, 0), (j, 1)}
    ports.gpus = frozenset(int(x) for x in np.flatnonzero(fabric.devices.kind == DeviceKind.GPU))
    ports.hbd = frozenset(hbd)
    return ports, cap


def _hops(ports, v, dst, transit):
    """Ports of ``v`` a walk toward ``dst`` may take: into a GPU other than ``dst`` only over HBD, and out of a
    GPU it passes through (``transit``) only over HBD."""
    for u, arc, c, lt in ports[v]:
        if (u == dst or u not in ports.gpus or arc in ports.hbd) and \
                not (transit and v in ports.gpus and arc not in ports.hbd):
            yield u, arc, c, lt


def bfs_distance(ports, dst):
    """Hops to ``dst`` of every node that forwards (relaxation to a fixed point), and of every node as a source."""
    through = {dst: 0}
    changed = True
    while changed:
        changed = False
        for v in list(ports):
            best = min((through[u] + 1 for u, *_ in _hops(ports, v, dst, True) if u in through), default=None)
            if v != dst and best is not None and best < through.get(v, math.inf):
                through[v] = best
                changed = True
    dist = {v: min((through[u] + 1 for u, *_ in _hops(ports, v, dst, False) if u in through), default=math.inf)
            for v in ports}
    dist[dst] = 0
    return {v: d for v, d in dist.items() if d < math.inf}, through


def all_shortest_paths(ports, src, dst):
    """Every shortest path as (list of arcs, share of the flow, latency)."""
    dist, through = bfs_distance(ports, dst)
    if src not in dist:
        raise ValueError("disconnected")
    out = []

    def walk(v, arcs, share, lat, d):
        if v == dst:
            out.append((arcs, share, lat))
            return
        hops = [(u, arc, lt) for u, arc, _, lt in _hops(ports, v, dst, bool(arcs)) if through.get(u) == d - 1]
        for u, arc, lt in hops:
            walk(u, arcs + [arc], share / len(hops), lat + lt, d - 1)

    walk(src, [], 1.0, 0.0, dist[src])
    return out


def ideal_route(ports, src, dst):
    """Arc -> fraction, and latency (max over paths)."""
    frac = defaultdict(float)
    paths = all_shortest_paths(ports, src, dst)
    for arcs, share, _ in paths:
        for arc in arcs:
            frac[arc] += share
    return dict(frac), max(lat for _, _, lat in paths)


def progressive_filling(active, routes, count, cap):
    """Max-min fair rates of the ``active`` flows, from scratch."""
    rate = {}
    unfrozen = {f for f in active if routes[f][0]}
    for f in active:
        if not routes[f][0]:
            rate[f] = math.inf
    left = dict(cap)
    level = 0.0
    while unfrozen:
        weight = defaultdict(float)
        for f in unfrozen:
            for arc, x in routes[f][0].items():
                weight[arc] += x * count[f]
        delta = min(left[a] / w for a, w in weight.items())
        level += delta
        for a, w in weight.items():
            left[a] -= delta * w
        full = {a for a, w in weight.items() if left[a] <= 1e-9 * cap[a]}
        frozen = {f for f in unfrozen if any(a in full for a in routes[f][0])}
        for f in frozen:
            rate[f] = level
        unfrozen -= frozen
    return rate


def reference_simulate(flows, routes, cap):
    """Finish time of every flow.

    ``flows``: list of dicts (bytes, start, after (indices), count);
    ``routes[i]``: (arc -> fraction, latency).  Same timing convention as the
    engine: release = max(start, finish of what it waits on), finish = last
    byte sent + latency.
    """
    n = len(flows)
    finish = [None] * n
    remaining = [float(f["bytes"]) for f in flows]
    count = [f["count"] for f in flows]
    active: set[int] = set()
    released = [False] * n
    t = 0.0
    while any(x is None for x in finish):
        # release everything whose time has come
        changed = True
        while changed:
            changed = False
            for i, f in enumerate(flows):
                if released[i] or any(finish[j] is None for j in f["after"]):
                    continue
                rel = max([f["start"]] + [finish[j] for j in f["after"]])
                if rel <= t * (1 + TIME_TOL) + 1e-300:
                    released[i] = True
                    if f["bytes"] == 0 or not routes[i][0]:
                        finish[i] = rel + routes[i][1]
                        changed = True
                    else:
                        active.add(i)
        if all(x is not None for x in finish):
            break
        rate = progressive_filling(active, routes, count, cap)
        candidates = [t + remaining[i] / rate[i] for i in active]
        for i, f in enumerate(flows):
            if not released[i] and all(finish[j] is not None for j in f["after"]):
                candidates.append(max([f["start"]] + [finish[j] for j in f["after"]]))
        if not candidates:
            raise RuntimeError("stuck: dependency cycle")
        t_next = min(candidates)
        done = []
        for i in active:
            end = t + remaining[i] / rate[i]
            if end <= t_next * (1 + TIME_TOL):
                done.append((i, end))
            else:
                remaining[i] -= rate[i] * (t_next - t)
        for i, end in done:
            active.discard(i)
            remaining[i] = 0.0
            finish[i] = end + routes[i][1]
        t = t_next
    return np.array(finish)


# ------------------------------------------------------------------ random cases
@st.composite
def random_fabric(draw):
    """A small random connected multigraph of GPUs and switches, or a leaf-spine with interchangeable spines."""
    b = FabricBuilder("random", {})
    caps = st.sampled_from([1e9, 2e9, 4e9])
    lats = st.sampled_from([0.0, 1e-6, 3e-6])
    if draw(st.booleans()):
        n_gpu, n_sw = draw(st.integers(2, 5)), draw(st.integers(0, 4))
        b.add_devices(DeviceKind.GPU, n_gpu, node=np.arange(n_gpu))
        if n_sw:
            b.add_devices(DeviceKind.TOR, n_sw)
        n = n_gpu + n_sw
        order = draw(st.permutations(list(range(n))))
        edges = [(order[i], order[draw(st.integers(0, i - 1))]) for i in range(1, n)]  # spanning tree
        extra = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=6))
        edges += [(x, y) for x, y in extra if x != y]
    else:
        racks, per_rack, spines = draw(st.integers(2, 3)), draw(st.integers(1, 3)), draw(st.integers(1, 3))
        n_gpu = racks * per_rack
        b.add_devices(DeviceKind.GPU, n_gpu, node=np.arange(n_gpu))
        b.add_devices(DeviceKind.TOR, racks)
        b.add_devices(DeviceKind.CORE, spines)
        edges = [(g, n_gpu + g // per_rack) for g in range(n_gpu)]
        edges += [(n_gpu + r, n_gpu + racks + s) for r in range(racks) for s in range(spines)]
        if draw(st.booleans()):  # a parallel uplink
            edges.append((n_gpu, n_gpu + racks))
        # spine links share one capacity and latency so that the spines are interchangeable
        up_cap, up_lat = draw(caps), draw(lats)
        n_host = n_gpu
        c = [draw(caps) if i < n_host else up_cap for i in range(len(edges))]
        l_ = [draw(lats) if i < n_host else up_lat for i in range(len(edges))]
        src, dst = zip(*edges)
        b.add_links(list(src), list(dst), capacity=c, latency=l_, medium="fiber", layer="dcn")
        return b.build(HBD_NONE)
    # the spanning tree on HBD links (connected with GPUs forwarding), the extra links on either layer: a
    # non-HBD link next to a GPU is a shortcut only a walk that does not pass through that GPU may take
    layers = ["hbd"] * (n - 1) + [draw(st.sampled_from(["hbd", "dcn"])) for _ in edges[n - 1:]]
    for layer in ("hbd", "dcn"):
        pick = [e for e, lay in zip(edges, layers) if lay == layer]
        if pick:
            src, dst = zip(*pick)
            b.add_links(list(src), list(dst), capacity=[draw(caps) for _ in pick],
                        latency=[draw(lats) for _ in pick], medium="fiber", layer=layer)
    return b.build(HBD_NONE)


@st.composite
def random_flows(draw, n_gpu):
    n = draw(st.integers(1, 8))
    flows = []
    for i in range(n):
        s = draw(st.integers(0, n_gpu - 1))
        d = draw(st.integers(0, n_gpu - 1))
        after = sorted(set(draw(st.lists(st.integers(0, i - 1), max_size=2)))) if i else []
        flows.append({"src": s, "dst": d, "bytes": draw(st.sampled_from([0.0, 1e6, 2e6, 5e6, 3.3e6])),
                      "start": draw(st.sampled_from([0.0, 0.0, 1e-4, 7e-4])), "after": after,
                      "count": draw(st.sampled_from([1, 1, 1, 2]))})
    return flows


def as_flows(fabric, flows):
    g = fabric.gpu_ids
    return [Flow(int(g[f["src"]]), int(g[f["dst"]]), f["bytes"], f["start"], tuple(f["after"]), count=f["count"])
            for f in flows]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_engine_matches_reference_ideal_ecmp(data):
    """Ideal ECMP: the engine (folded and unfolded graph, both schedulers) = the reference."""
    fab = data.draw(random_fabric())
    flows = data.draw(random_flows(fab.n_gpus))
    ports, cap = reference_ports(fab)
    g = fab.gpu_ids
    routes = [ideal_route(ports, int(g[f["src"]]), int(g[f["dst"]])) for f in flows]
    expect = reference_simulate(flows, routes, cap)
    for fold in (True, False):
        sim = Simulator(fab, fold=fold)
        for method in ("auto", "event"):
            got = sim.run(as_flows(fab, flows), method=method).finish_s
            assert np.allclose(got, expect, rtol=1e-9, atol=1e-15), (fold, method, got, expect)


@settings(max_examples=25, deadline=None)
@given(data=st.data(), seed=st.integers(0, 2**31 - 1))
def test_engine_matches_reference_hashed_paths(data, seed):
    """Hashed ECMP: every hashed route is one shortest path, and timing matches the reference on those paths."""
    fab = data.draw(random_fabric())
    flows = data.draw(random_flows(fab.n_gpus))
    ports, cap = reference_ports(fab)
    sim = Simulator(fab)
    g = fab.gpu_ids
    latency = {arc: lt for v in ports for _, arc, _, lt in ports[v]}
    routes = []
    for f in flows:
        s, d = int(g[f["src"]]), int(g[f["dst"]])
        r = sim.route(s, d, ecmp="hash", seed=seed)
        arcs = [(j, 0 if fw else 1) for j, fw in zip(r["links"], r["forward"])]
        assert all(x == 1.0 for x in r["fraction"])
        # the arcs chain from s to d and are as many as the hop distance
        nxt = {}
        links = fab.active_links()
        for j, dr in arcs:
            a, b_ = (int(links.src[j]), int(links.dst[j]))
            u, v = (a, b_) if dr == 0 else (b_, a)
            assert u not in nxt
            nxt[u] = v
        v, hops = s, 0
        while v != d:
            v, hops = nxt[v], hops + 1
        assert hops == len(arcs) == bfs_distance(ports, d)[0][s]
        assert r["latency_s"] == pytest.approx(sum(latency[a] for a in arcs), rel=1e-12, abs=1e-18)
        routes.append(({a: 1.0 for a in arcs}, sum(latency[a] for a in arcs)))
    expect = reference_simulate(flows, routes, cap)
    for method in ("auto", "event"):
        got = sim.run(as_flows(fab, flows), ecmp="hash", seed=seed, method=method).finish_s
        assert np.allclose(got, expect, rtol=1e-9, atol=1e-15)


def test_reference_on_the_textbook_case():
    """The reference itself reproduces flows S, 2S, 3S on one link (3S/B, 5S/B, 6S/B)."""
    b = FabricBuilder("one", {})
    g = b.add_devices(DeviceKind.GPU, 2, node=[0, 1])
    b.add_links(g[:1], g[1:], capacity=1e9, latency=0.0, medium="copper", layer="hbd")
    fab = b.build(HBD_NONE)
    ports, cap = reference_ports(fab)
    flows = [{"bytes": k * 1e6, "start": 0.0, "after": [], "count": 1} for k in (1, 2, 3)]
    routes = [ideal_route(ports, 0, 1)] * 3
    assert np.allclose(reference_simulate(flows, routes, cap), [3e-3, 5e-3, 6e-3], rtol=1e-12)


@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_component_resolve_matches_reference(data):
    """The event loop re-solving only the components an event touched (forced on for small cases) = reference."""
    from fabric.sim import engine

    fab = data.draw(random_fabric())
    flows = data.draw(random_flows(fab.n_gpus))
    ports, cap = reference_ports(fab)
    g = fab.gpu_ids
    expect = reference_simulate(flows, [ideal_route(ports, int(g[f["src"]]), int(g[f["dst"]])) for f in flows], cap)
    old = engine.COMPONENT_MIN_FLOWS
    engine.COMPONENT_MIN_FLOWS = 1
    try:
        got = Simulator(fab).run(as_flows(fab, flows), method="event").finish_s
    finally:
        engine.COMPONENT_MIN_FLOWS = old
    assert np.allclose(got, expect, rtol=1e-9, atol=1e-15)
