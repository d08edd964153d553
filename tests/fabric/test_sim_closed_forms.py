"""Closed forms the flow simulator must reproduce to 1e-9 relative error.

Notation: ``n`` ranks, per-rank buffer ``S`` bytes, per-direction link
bandwidth ``B`` bytes/s, per-step latency ``a`` seconds (the latency of the
path a step's flow takes).  Timing convention (fabric.sim.engine): a flow's
transfer starts at its release, it finishes when its last byte has been sent
plus its path latency, and flows waiting on it are released at that finish.

Each case is run with both schedulers (``dag``: contention-free longest-path
pass, used when its premise is verified; ``event``: the event loop with
progressive filling) wherever both apply; they must agree with the formula.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric.sim import Collective, Flow, Simulator
from tests.fabric.test_sim_fabrics import line, ring, star, two_level, two_tier

RTOL = 1e-9
B = 25e9
S = 3 * 2**20
A = 1.5e-6


def close(x: float, y: float, rtol: float = RTOL) -> bool:
    return abs(x - y) <= rtol * abs(y)


@pytest.mark.parametrize("method", ["auto", "event"])
@pytest.mark.parametrize("fabric_of", [lambda: star(2, B, A), lambda: line(2, B, A)], ids=["switch", "link"])
def test_one_flow(method, fabric_of):
    """1. One flow of S bytes: ``a + S/B``.

    Alone, the flow's max-min rate is its bottleneck capacity B for its whole
    transfer, which ends at S/B; it finishes one path latency a later.  Exact:
    one event, no contention.
    """
    fab = fabric_of()
    res = Simulator(fab).run([Flow(int(fab.gpu_ids[0]), int(fab.gpu_ids[1]), S)], method=method)
    assert close(res.makespan_s, A + S / B)


@pytest.mark.parametrize("method", ["auto", "event"])
@pytest.mark.parametrize("n", [2, 3, 5, 8])
def test_ring_all_reduce_on_a_switch(n, method):
    """2. Ring all-reduce on one non-blocking switch: ``2(n-1) a + 2(n-1)/n S/B``.

    2(n-1) steps; in each, every rank sends S/n to its successor.  A step's
    flow uses only its sender's uplink and its receiver's downlink, which no
    other flow of the step uses, and it waits on the previous step's flows
    into and out of its sender, so steps do not overlap: each flow runs at B
    and takes S/(nB) plus the path latency a.  The 2(n-1) steps are a
    dependency chain of identical durations, hence the sum.
    """
    r = Simulator(star(n, B, A)).collective(Collective("all-reduce", tuple(range(n)), S, protocol="none"),
                                            method=method)
    assert close(r.time_s, 2 * (n - 1) * A + 2 * (n - 1) / n * S / B)
    assert close(r.busbw_Bps, (2 * (n - 1) / n * S / r.time_s))


@pytest.mark.parametrize("method", ["auto", "event"])
@pytest.mark.parametrize("n", [3, 4, 7])
def test_ring_all_reduce_on_a_ring(n, method):
    """2. Ring all-reduce on a ring of links: ``2(n-1) a + 2(n-1)/n S/B``.

    Each rank's successor is its neighbour; the flow uses the one direct link
    (the shortest path), and that direction of that link carries only this
    rank's flows, one at a time.  Same chain as on a switch with per-step
    latency a = the link latency.  (n >= 3: with 2 ranks the "ring" would be
    two parallel links, which ECMP splits.)
    """
    r = Simulator(ring(n, B, A)).collective(Collective("all-reduce", tuple(range(n)), S, protocol="none"),
                                            method=method)
    assert close(r.time_s, 2 * (n - 1) * A + 2 * (n - 1) / n * S / B)


@pytest.mark.parametrize("method", ["auto", "event"])
@pytest.mark.parametrize("name", ["reduce-scatter", "all-gather"])
@pytest.mark.parametrize("n", [2, 5])
def test_ring_reduce_scatter_all_gather(name, n, method):
    """3. Ring reduce-scatter / all-gather: ``(n-1) a + (n-1)/n S/B``.

    The same chain as all-reduce with n-1 steps of S/n per rank.
    """
    r = Simulator(star(n, B, A)).collective(Collective(name, tuple(range(n)), S, protocol="none"), method=method)
    assert close(r.time_s, (n - 1) * A + (n - 1) / n * S / B)
    assert close(r.busbw_Bps, (n - 1) / n * S / r.time_s)


@pytest.mark.parametrize("method", ["auto", "event"])
@pytest.mark.parametrize("n", [2, 4, 9])
def test_all_to_all_on_a_switch(n, method):
    """4. All-to-all on one non-blocking switch (zero latency): ``(n-1)/n S/B``.

    Every rank sends S/n to each of n-1 peers at once.  Every uplink and
    every downlink carries exactly n-1 flows, so max-min gives each flow
    B/(n-1), constant until all end together at (S/n)/(B/(n-1)).
    """
    r = Simulator(star(n, B)).collective(Collective("all-to-all", tuple(range(n)), S, protocol="none"), method=method)
    assert close(r.time_s, (n - 1) / n * S / B)


@pytest.mark.parametrize("fold", [True, False])
@pytest.mark.parametrize("r_, k, u, o", [(2, 4, 2, 1.0), (3, 4, 2, 2.0), (4, 2, 4, 4.0), (2, 3, 1, 3.0),
                                         (3, 2, 2, 1.25)])
def test_all_to_all_on_a_two_tier_tree(r_, k, u, o, fold):
    """5. All-to-all on r racks x k hosts, ToR uplinks totalling ``kB/o``: ``max((n-1)/n, o(n-k)/n) S/B``.

    n = rk.  Each host has k-1 flows inside its rack and n-k across; a ToR's
    uplinks carry k(n-k) flows (split evenly over its u spine links, as do
    the spine downlinks into every ToR).  Progressive filling: the uplinks
    saturate at level B/(o(n-k)), the host links at B/(n-1).  If
    o(n-k) <= n-1 the host links bind first and every flow gets B/(n-1) to
    the end: time (n-1)/n S/B.  Otherwise the cross-rack flows freeze at
    B/(o(n-k)) and keep that rate (their uplinks stay full) while the in-rack
    flows, faster, end earlier: time o(n-k)/n S/B.  Exact for ideal ECMP; run
    with the spines folded into one bundle and without.
    """
    n = r_ * k
    sim = Simulator(two_tier(r_, k, u, o, B), fold=fold)
    res = sim.collective(Collective("all-to-all", tuple(range(n)), S, protocol="none"))
    assert close(res.time_s, max((n - 1) / n, o * (n - k) / n) * S / B)


@pytest.mark.parametrize("m", [1, 2, 7])
def test_incast(m):
    """6. Incast m -> 1 (zero latency): ``m S/B``.

    The receiver's downlink carries all m flows: each gets B/m until all end
    together at S/(B/m).
    """
    fab = star(m + 1, B)
    res = Simulator(fab).run([Flow(int(fab.gpu_ids[i]), int(fab.gpu_ids[m]), S) for i in range(m)])
    assert close(res.makespan_s, m * S / B)
    assert np.allclose(res.finish_s, m * S / B, rtol=RTOL)


@pytest.mark.parametrize("L", [1, 2, 5])
def test_parking_lot(L):
    """7. Parking lot: one flow across L links plus one cross flow per link -> every flow gets B/2.

    Every link carries the long flow and its own cross flow; all links
    saturate at the same level B/2, which freezes every flow.  With equal
    sizes S they all end together at 2S/B (zero latency).
    """
    fab = line(L + 1, B)
    g = fab.gpu_ids
    flows = [Flow(int(g[0]), int(g[L]), S)] + [Flow(int(g[i]), int(g[i + 1]), S) for i in range(L)]
    sim = Simulator(fab)
    assert np.allclose(sim.rates(flows), B / 2, rtol=RTOL)
    assert np.allclose(sim.run(flows).finish_s, 2 * S / B, rtol=RTOL)


def test_one_link_three_sizes():
    """8. One link, flows of S, 2S, 3S starting together: finish at 3S/B, 5S/B, 6S/B.

    Three flows share B: S is done at 3S/B; the other two have S and 2S left
    and share B: the second is done S/(B/2) = 2S/B later (5S/B); the last has
    S left alone at B: 6S/B.
    """
    fab = line(2, B)
    g = fab.gpu_ids
    res = Simulator(fab).run([Flow(int(g[0]), int(g[1]), k * S) for k in (1, 2, 3)])
    assert np.allclose(res.finish_s, np.array([3, 5, 6]) * S / B, rtol=RTOL, atol=0)
    assert res.method == "event" and res.events >= 3


@pytest.mark.parametrize("method", ["auto", "event"])
@pytest.mark.parametrize("n, k", [(2, 1), (2, 5), (5, 1), (6, 4), (9, 16)])
def test_pipelined_chain_broadcast(n, k, method):
    """9. Pipelined chain broadcast with k chunks: ``(n-1+k-1)(a + S/(kB))``.

    Piece c leaves rank j once it has arrived there and piece c-1 has left, so
    with d = a + S/(kB) per hop (each hop's flow is alone on its links), the
    last piece reaches the last rank after (n-1) + (k-1) hop times: the
    classic pipeline recurrence finish(c, j) = max(finish(c, j-1),
    finish(c-1, j)) + d.
    """
    r = Simulator(star(n, B, A)).collective(Collective("broadcast", tuple(range(n)), S, chunks=k, protocol="none"),
                                            method=method)
    assert close(r.time_s, (n - 1 + k - 1) * (A + S / (k * B)))
    assert close(r.busbw_Bps, S / r.time_s)


@pytest.mark.parametrize("method", ["auto", "event"])
def test_send_recv(method):
    """Send/recv along a pipeline: every stage sends S to the next at once, on its own links: ``a + S/B``."""
    r = Simulator(star(4, B, A)).collective(Collective("send-recv", (0, 1, 2, 3), S, protocol="none"), method=method)
    assert close(r.time_s, A + S / B)


@pytest.mark.parametrize("lump", [None, True])
@pytest.mark.parametrize("m, h", [(2, 4), (3, 2), (4, 1), (1, 4)])
def test_hierarchical_all_reduce(m, h, lump):
    """Hierarchical all-reduce on m domains of h GPUs:
    ``2 (h-1)(a_in + S/(h b_in)) + 2(m-1)(a_out + S/(h m b_out))``.

    Reduce-scatter inside each domain is a ring of h ranks over the domain
    switch (h-1 steps of S/h); the all-reduce of S/h across domains is a ring
    of m ranks per local index over their own NICs (2(m-1) steps of S/(hm));
    the all-gather repeats the first phase.  No two concurrent flows share a
    link (domain switches, NICs and ranks are disjoint per ring), every phase
    is lockstep, and a phase starts when the previous one ends at each rank.
    Both the full DAG (small: the default) and the timing from one step of
    each phase (``lump=True``, :mod:`fabric.sim.hierarchical`) must give it.
    """
    b_in, a_in, b_out, a_out = 4 * B, 0.5e-6, B, 3e-6
    fab = two_level(m, h, b_in, a_in, b_out, a_out)
    ranks = tuple(range(m * h))
    res = Simulator(fab, lump=lump).collectives([Collective("all-reduce", ranks, S, algorithm="hierarchical",
                                                            protocol="none")])
    assert res.sim.method == ("step+dag" if lump else "dag")
    r = res.collectives[0]
    t_in = (h - 1) * (a_in + S / (h * b_in))
    t_out = 2 * (m - 1) * (a_out + S / (h * m * b_out))
    assert close(r.time_s, 2 * t_in + t_out)


def test_direct_one_shot_all_reduce_on_a_switch():
    """One-shot all-reduce on a switch (zero latency): ``(n-1) S/B``.

    Every rank sends its whole buffer to each of n-1 peers at once: n-1 flows
    of S per uplink and per downlink, each at B/(n-1).
    """
    n = 5
    r = Simulator(star(n, B)).collective(Collective("all-reduce", tuple(range(n)), S, algorithm="direct",
                                                    protocol="none"))
    assert close(r.time_s, (n - 1) * S / B)


# ------------------------------------------------------------------- bounds (10, 11)
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=30, deadline=None)
@given(flows=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 7), st.integers(1, 8)), min_size=1, max_size=25),
       o=st.sampled_from([1.0, 2.0, 3.5]), ecmp=st.sampled_from(["ideal", "hash"]))
def test_no_schedule_beats_the_bisection_bound(flows, o, ecmp):
    """10. Makespan >= bytes crossing a cut (one direction) / the cut's capacity (that direction).

    Two racks of 4 GPUs; the cut between them is the two ToRs' uplinks,
    ``kB/o`` per direction.  Everything crossing from rack 0 to rack 1 must
    pass through rack 0's uplinks, which move at most kB/o bytes/s, whatever
    the rates; all flows start at 0, so no schedule ends before the bound.
    """
    k = 4
    fab = two_tier(2, k, 2, o, B)
    g = fab.gpu_ids
    pairs = [(s, d, z * S / 8) for s, d, z in flows if s != d]
    if not pairs:
        return
    res = Simulator(fab).run([Flow(int(g[s]), int(g[d]), z) for s, d, z in pairs], ecmp=ecmp, seed=3)
    cut = k * B / o
    fwd = sum(z for s, d, z in pairs if s < k <= d)
    rev = sum(z for s, d, z in pairs if d < k <= s)
    assert res.makespan_s >= max(fwd, rev) / cut * (1 - RTOL)
    # each host's link is a cut too
    for h in range(2 * k):
        assert res.makespan_s >= sum(z for s, d, z in pairs if s == h) / B * (1 - RTOL)
        assert res.makespan_s >= sum(z for s, d, z in pairs if d == h) / B * (1 - RTOL)


def test_hashing_is_never_faster_than_ideal_split():
    """11. Per-flow ECMP hashing is never faster than the ideal split (40 seeds).

    A permutation between two racks of 4 hosts under a full-bisection
    leaf-spine (4 spines, links of B): the ideal split spreads every flow
    over all 4 uplinks, so all run at B (host links bind) and end at S/B,
    the lower bound set by the host links.  A hashed flow takes one spine;
    two flows hashed onto one uplink (or one spine downlink) share it, and
    such collisions are likely (4 flows on 4 links collide with probability
    1 - 4!/4^4).  So every seed is >= S/B, and the mean is strictly larger.
    """
    k = 4
    fab = two_tier(2, k, k, 1.0, B)
    g = fab.gpu_ids
    perm = [(i, k + (i + 1) % k) for i in range(k)] + [(k + i, (i + 2) % k) for i in range(k)]
    flows = [Flow(int(g[s]), int(g[d]), S) for s, d in perm]
    sim = Simulator(fab)
    ideal = sim.run(flows).makespan_s
    assert close(ideal, S / B)
    hashed = np.array([sim.run(flows, ecmp="hash", seed=seed).makespan_s for seed in range(40)])
    assert np.all(hashed >= ideal * (1 - RTOL))
    assert hashed.mean() > ideal * 1.05
    # a seed fixes the outcome bit for bit
    assert sim.run(flows, ecmp="hash", seed=7).makespan_s == Simulator(fab).run(flows, ecmp="hash", seed=7).makespan_s
