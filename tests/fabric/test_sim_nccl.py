"""Collectives as NCCL runs them (fabric.sim.nccl): closed forms of the NCCL model on hand-built fabrics.

Every expected value below is NCCL's alpha-beta form written out by hand from
the catalog constants (base latency + steps x step transfer + latency along the
steps), on fabrics where the step transfer has a closed form: each flow's
bottleneck is one link that no other flow of its step shares.
"""

import numpy as np
import pytest

from fabric.catalog import load_catalog
from fabric.errors import FabricError
from fabric.sim import Collective, CollectiveName, Protocol, Simulator, simulate_collective
from fabric.sim.engine import schedule
from fabric.sim.flows import FlowTable
from fabric.sim.nccl import (channel_count, nccl_model, path_codes, ring_orders, time_ring, time_tree, tree_edges,
                             tuner_prefers_tree, tuner_times)
from tests.fabric.test_sim_fabrics import star, two_level

S = 96 * 2**20
CAT = load_catalog()
M = nccl_model()


def test_vocabulary_compares_as_strings():
    assert CollectiveName.ALL_REDUCE == "all-reduce" and f"{CollectiveName.ALL_GATHER}" == "all-gather"
    assert CollectiveName.parse("all_reduce") is CollectiveName.ALL_REDUCE
    assert Collective("all_to_all", (0, 1), 1.0).name is CollectiveName.ALL_TO_ALL
    with pytest.raises(FabricError) as exc:
        CollectiveName.parse("all-sum")
    assert exc.value.field == "collective"


def test_catalog_constants_are_ncclS_tuning_table():
    """The model reads NCCL's tuning.cc numbers from the catalog (FIGURES: 8.4 us base, 3.4 / 14 us per step)."""
    assert M.base_latency[Protocol.SIMPLE] == pytest.approx(8.4e-6)
    assert M.ring_step[Protocol.SIMPLE].tolist() == pytest.approx([3.4e-6, 5.7e-6, 14e-6])
    assert M.payload[Protocol.LL] == 0.25 and M.payload[Protocol.LL128] == pytest.approx(0.92)
    for item in ("nccl_base_latency", "nccl_ring_step_network", "nccl_protocol", "nccl_path_efficiency"):
        assert all(CAT.source(item, k) for k in CAT.get(item).values)


def test_snake_rings_enter_and_leave_every_domain_on_one_rail():
    """Channel c leaves domain j and enters domain j+1 on the same local index; every rank sends once per channel."""
    fab = two_level(4, 4, 1e12, 0.0, 1e10, 0.0)
    orders = ring_orders(fab, fab.gpu_ids, 4)
    assert channel_count(fab, fab.gpu_ids) == 4
    for order in orders:
        assert sorted(order.tolist()) == list(range(16))
        local = order % 4
        exits, entries = local[3::4], np.roll(local[0::4], -1)
        assert np.array_equal(exits, entries)  # the wrap closes on the same rail too (4 domains, even)
    # over the channels every local index leaves each domain exactly once
    assert all(sorted((orders[:, 4 * j + 3] % 4).tolist()) == [0, 1, 2, 3] for j in range(4))


@pytest.mark.parametrize("protocol", [Protocol.LL, Protocol.LL128, Protocol.SIMPLE])
def test_multichannel_ring_closed_form(protocol):
    """m=2 domains of h=4 GPUs, one NIC each; C = 4 snake channels, all-reduce of S.

    Every step, every channel crosses each domain boundary on its own NIC
    (one flow per NIC and direction), so the step transfer is
    ``S / (n C) / (payload x network efficiency x b_out)``; inside a domain
    the links are 100x faster.  A channel's ring has 6 NVLink hops and 2
    network hops; 14 consecutive steps cover it once plus the 6 hops holding
    both network hops: ``10 I + 4 N`` of latency, ``I``, ``N`` = the larger of
    the physical latency and NCCL's per-step latency of the hop's type (an
    NVLink step of a ring that spans nodes costs at least NCCL's network
    post overhead).
    """
    b_in, a_in, b_out, a_out = 1e12, 1e-6, 25e9, 3e-6
    fab = two_level(2, 4, b_in, a_in, b_out, a_out)
    n, C = 8, 4
    r = simulate_collective(fab, "all-reduce", range(n), S, algorithm="ring", protocol=protocol)
    assert (r.algorithm, r.protocol, r.channels) == ("ring", str(protocol), C)
    eff = M.efficiency[2] * M.payload[protocol]
    tx = S / (n * C) / eff / b_out
    I = max(a_in, M.ring_step[protocol][0], M.net_overhead[protocol])
    N = max(a_out, M.ring_step[protocol][2])
    expect = M.base_latency[protocol] + 2 * (n - 1) * tx + 10 * I + 4 * N
    assert r.time_s == pytest.approx(expect, rel=1e-9)


def test_one_step_ring_equals_the_flow_dag_on_a_uniform_ring():
    """Ideal model, one channel: the one-step timing (memory linear in n) = the full flow DAG (2n(n-1) flows).

    Exact on a ring whose hops are all alike (every step the same duration
    and latency: both give 2(n-1)(a + S/(nB))).
    """
    fab = star(6, 40e9, 2e-6)
    sim = Simulator(fab)
    dag = sim.collective(Collective("all-reduce", tuple(range(6)), S, "ring", protocol="none", channels=1))
    rt = time_ring(sim, fab, CollectiveName.ALL_REDUCE, fab.gpu_ids[None, :], S, Protocol.NONE, 1, M, "auto",
                   "ideal", 0, 0.0)
    assert rt.time_s[0] == pytest.approx(dag.time_s, rel=1e-12)
    assert dag.time_s == pytest.approx(2 * 5 * (2e-6 + S / 6 / 40e9), rel=1e-12)


def test_one_step_ring_bounds_the_flow_dag_on_mixed_hops():
    """With fast and slow hops they differ by the slow hops' latency only: the flow DAG makes a rank's next
    send wait for its previous send's *latency* too (so each step costs the slow hop's latency), NCCL streams
    into buffer slots and pays latency only along the data's path.  One-step <= DAG, within 1 % here."""
    fab = two_level(2, 4, 1e12, 1e-6, 25e9, 3e-6)
    sim = Simulator(fab)
    dag = sim.collective(Collective("all-reduce", tuple(range(8)), S, "ring", protocol="none", channels=1))
    rt = time_ring(sim, fab, CollectiveName.ALL_REDUCE, fab.gpu_ids[None, :], S, Protocol.NONE, 1, M, "auto",
                   "ideal", 0, 0.0)
    assert rt.time_s[0] <= dag.time_s * (1 + 1e-12)
    assert dag.time_s <= rt.time_s[0] * 1.01


def test_protocol_by_size_goes_ll_then_simple():
    """Small buffers pay latency (LL wins), large ones bandwidth (Simple wins); the choice never goes back."""
    fab = two_level(2, 4, 1e12, 1e-6, 25e9, 3e-6)
    order = [str(p) for p in (Protocol.LL, Protocol.LL128, Protocol.SIMPLE)]
    picked = [simulate_collective(fab, "all-reduce", range(8), s, algorithm="ring").protocol
              for s in (8, 2**12, 2**16, 2**20, 2**24, 2**30)]
    assert picked[0] == "ll" and picked[-1] == "simple"
    assert [order.index(p) for p in picked] == sorted(order.index(p) for p in picked)


def test_auto_runs_the_ring_or_tree_ncclS_tuner_picks():
    """Between ring and tree, ``auto`` runs the one NCCL's tuner predicts faster (:func:`tuner_prefers_tree`, from
    the ring's simulated bus bandwidth), timed on the graph: here, 4 domains, the tuner and the graph agree."""
    fab = two_level(4, 4, 300e9, 1e-6, 25e9, 3e-6)
    for size in (8, 2**20, 2**30):
        auto = simulate_collective(fab, "all-reduce", range(16), size)
        each = {a: simulate_collective(fab, "all-reduce", range(16), size, algorithm=a) for a in ("ring", "tree")}
        assert auto.time_s == pytest.approx(each[auto.algorithm].time_s, rel=1e-12)
        assert auto.time_s == pytest.approx(min(r.time_s for r in each.values()), rel=1e-12)
    assert simulate_collective(fab, "all-reduce", range(16), 8).algorithm == "tree"
    assert simulate_collective(fab, "all-reduce", range(16), 2**30).algorithm == "ring"


US = 1e-6


def test_tuner_times_are_ncclS_formulas():
    """:func:`tuner_times` against NCCL 2.28's ``ncclTopoTuneModel`` / ``ncclTopoGetAlgoTime`` written out by hand
    (exact: the same arithmetic on the catalog's tuning-table latencies): 16 ranks on 2 nodes of 8, ring bus
    bandwidth X.  Ring: base + (2(n-1) - 2(nodes-1)) intra + 2(nodes-1) inter, intra at least the network post
    overhead, Simple latency x 1.4 (plateau), algBw = busBw n / 2(n-1), LL busBw = min(llMaxBw, X/2).  Tree:
    base + 2((n/nodes - 1) intra + log2(nodes) inter), busBw = 0.92 X (LL: / 3.8, at most llMaxBw), algBw =
    busBw / 2, times the correction factor of the size below 256 MiB."""
    X, n = 100e9, 16
    for S, corr, corr_ll in ((2.0**32, 1.0, 1.0), (2.0**20, 0.5, 0.5)):  # treeCorrectionFactor[p][log2(S / 64)]
        t = tuner_times(M, S, n, 2, X, channels=8)
        ring_simple = (8.4 + 28 * 3.4 + 2 * 14) * US * 1.4 + S / (X * 16 / 30)
        ring_ll = (6.6 + 28 * 1.0 + 2 * 2.7) * US + S / (min(39e9, X / 2) * 16 / 30)
        tree_simple = (8.4 + 2 * (7 * 4.0 + 1 * 14)) * US + S / (0.92 * X * 0.5 * corr)
        tree_ll = (6.8 + 2 * (7 * 0.6 + 1 * 5.0)) * US + S / (min(0.92 * X / 3.8, 39e9) * 0.5 * corr_ll)
        assert t[("ring", "simple")] == pytest.approx(ring_simple, rel=1e-12)
        assert t[("ring", "ll")] == pytest.approx(ring_ll, rel=1e-12)
        assert t[("tree", "simple")] == pytest.approx(tree_simple, rel=1e-12)
        assert t[("tree", "ll")] == pytest.approx(tree_ll, rel=1e-12)


@pytest.mark.parametrize("n, nodes", [(8, 1), (16, 2), (32, 4), (64, 8)])
def test_ncclS_tuner_runs_the_ring_for_large_buffers(n, nodes):
    """The tuner's tree algBw is 0.92 / 2 = 0.46 of the ring's bus bandwidth, the ring's n / 2(n-1) > 0.5: once
    bandwidth dominates (16 GiB on a few nodes), NCCL runs the ring whatever the graph's bandwidth; at 8 B the
    tree's log-depth latency wins from 2 nodes up."""
    for X in (10e9, 100e9, 1e12):
        assert not tuner_prefers_tree(M, *_line_of_nodes(n, nodes), 2.0**34, X, 8)
        assert tuner_prefers_tree(M, *_line_of_nodes(n, nodes), 8.0, X, 8) == (nodes > 1)


def test_ncclS_tuner_runs_the_tree_at_scale():
    """At 1,024 ranks on 128 nodes the ring's 2,046 step latencies (x 1.4, NCCL's plateau) cost more than the
    tree's 8 % less bandwidth for a 1 GiB buffer: NCCL runs the tree there (README: DGX A100 at 1,024 GPUs)."""
    assert tuner_prefers_tree(M, *_line_of_nodes(1024, 128), 2.0**30, 187e9, 8)


def _line_of_nodes(n, nodes):
    """A two-level fabric of ``nodes`` domains of ``n / nodes`` GPUs, and its ranks."""
    fab = two_level(nodes, n // nodes, 300e9, 1e-6, 25e9, 3e-6)
    return fab, np.arange(n)


def test_auto_runs_the_ring_on_two_dgx_a100_nodes_as_nccl_does():
    """Held out (tests/data/nccl_busbw.json a100-2n-allreduce-ring: 8 HDR NICs x 24 GB/s = 192 GB/s, NCCL
    maintainer, nccl#412): on two DGX A100 nodes NCCL runs a 4 GiB all-reduce on its ring.  The simulated tree is
    faster on the graph (two nodes: it moves half the ring's network bytes), so ``auto`` picking the fastest on
    the graph ran the tree at 263 GB/s (+37 %); it now runs what NCCL's tuner picks: the ring, within 5 %."""
    from topologies import build

    fab = build("dgx", 16, {"gpu": "a100"}, CAT)
    auto = simulate_collective(fab, "all-reduce", range(16), 2**32)
    tree = simulate_collective(fab, "all-reduce", range(16), 2**32, algorithm="tree")
    assert auto.algorithm == "ring" and tree.time_s < auto.time_s
    assert auto.busbw_Bps == pytest.approx(192e9, rel=0.05)
    assert simulate_collective(fab, "all-reduce", range(16), 16).algorithm == "tree"  # latency end: NCCL's tree/LL


def test_tree_latency_is_ncclS_tree_formula():
    """A tiny all-reduce on NCCL's tree: base + 2 ((h-1) I + depth N) (+ a negligible transfer).

    m = 4 domains: the balanced binary tree over 4 domains has depth 2; h = 2
    ranks per domain chain to their endpoint.
    """
    a_in, a_out = 1e-6, 3e-6
    fab = two_level(4, 2, 1e12, a_in, 25e9, a_out)
    r = simulate_collective(fab, "all-reduce", range(8), 8, algorithm="tree", protocol="ll")
    I = max(a_in, M.tree_step[Protocol.LL][0])
    N = max(a_out, M.tree_step[Protocol.LL][2])
    assert r.time_s == pytest.approx(M.tree_base_latency[Protocol.LL] + 2 * (1 * I + 2 * N), rel=1e-3)


@pytest.mark.parametrize("a_in,a_out", [(0.05e-6, 0.2e-6), (2e-6, 30e-6)])
def test_step_latency_is_the_larger_of_ncclS_and_the_physical_path(a_in, a_out):
    """NCCL's per-step latencies were measured on real machines, so they already hold a step's hardware path:
    a step costs max(NCCL step, physical path), not their sum.  Short paths (machine room) pay NCCL's
    constants; a path longer than them (here 30 us, ~6 km of fibre) pays its own latency.

    8 B on one domain of 8 ranks (ring LL, 14 steps, no network post overhead: the ring stays in the node)
    and on 4 domains of 2 (tree LL, depth 2): the transfer of 8 B is below 1e-3 of the total.
    """
    one = simulate_collective(two_level(1, 8, 1e12, a_in, 25e9, a_out), "all-reduce", range(8), 8,
                              algorithm="ring", protocol="ll")
    assert one.time_s == pytest.approx(M.base_latency[Protocol.LL] + 14 * max(a_in, M.ring_step[Protocol.LL][0]),
                                       rel=1e-3)
    four = simulate_collective(two_level(4, 2, 1e12, a_in, 25e9, a_out), "all-reduce", range(8), 8,
                               algorithm="tree", protocol="ll")
    I, N = max(a_in, M.tree_step[Protocol.LL][0]), max(a_out, M.tree_step[Protocol.LL][2])
    assert four.time_s == pytest.approx(M.tree_base_latency[Protocol.LL] + 2 * (I + 2 * N), rel=1e-3)


def test_nvls_halves_the_bytes_each_gpu_sends():
    """NVLS: each GPU sends S (wire S / nvls_factor) into the switch; a ring sends 2(n-1)/n S / efficiency."""
    from topologies import build

    fab = build("dgx", 8, {"gpu": "h100"})
    f = CAT.value("nvswitch_gen3", "nvls_factor")
    gpus = set(fab.gpu_ids.tolist())

    def gpu_egress_hbd(res):
        L = res.sim.loads.links
        hbd = np.array([s in gpus for s in L.src.tolist()]) & (L.layer == 0)
        return res.sim.loads.bytes_fwd[hbd].sum() / 8

    sim = Simulator(fab)
    nvls = sim.collectives([Collective("all-reduce", tuple(range(8)), S, "nvls")])
    ring = sim.collectives([Collective("all-reduce", tuple(range(8)), S, "ring", protocol="simple")])
    assert nvls.collectives[0].algorithm == "nvls"
    assert gpu_egress_hbd(nvls) == pytest.approx(S / f, rel=1e-9)
    assert gpu_egress_hbd(ring) == pytest.approx(2 * 7 / 8 * S / M.efficiency[0], rel=1e-9)


def test_nvls_needs_a_reducing_switch_domain():
    fab = two_level(2, 4, 1e12, 1e-6, 25e9, 3e-6)  # its catalog-less switch chips do not reduce
    with pytest.raises(FabricError) as exc:
        simulate_collective(fab, "all-reduce", range(4), S, algorithm="nvls")
    assert exc.value.field == "algorithm"


@pytest.mark.parametrize("kwargs,field", [({"protocol": "fast"}, "protocol"), ({"channels": 0}, "channels"),
                                          ({"channels": 1.5}, "channels"), ({"algorithm": "nvls",
                                                                             "collective": "all-gather"}, "algorithm")])
def test_bad_nccl_parameters(kwargs, field):
    args = {"collective": "all-reduce", **kwargs}
    with pytest.raises(FabricError) as exc:
        simulate_collective(star(4, 1e9), args.pop("collective"), range(4), S, **args)
    assert exc.value.field == field


def test_sharp_sends_one_shard_per_nic_each_way():
    """SHARP (catalog sharp_factor on the DCN switch): each GPU's NIC carries its shard S/h once each way
    (wire / sharp_factor), against a ring's 2(m-1)/m S/h; unavailable on switches without the flag."""
    from topologies import build

    fab = build("dgx", 16, {"switch": "switch_ib_ndr"})
    f = CAT.value("switch_ib_ndr", "sharp_factor")
    r = Simulator(fab).collectives([Collective("all-reduce", tuple(range(16)), S, "sharp")])
    assert r.collectives[0].algorithm == "sharp"
    L, loads = r.sim.loads.links, r.sim.loads
    kind = fab.devices.kind
    gpu_nic = (kind[L.src] == 0) & (kind[L.dst] == 1)  # GPU -> NIC links
    assert np.allclose(loads.bytes_fwd[gpu_nic], S / 8 / f) and np.allclose(loads.bytes_rev[gpu_nic], S / 8 / f)
    with pytest.raises(FabricError) as exc:
        simulate_collective(build("dgx", 16), "all-reduce", range(16), S, algorithm="sharp")
    assert exc.value.field == "algorithm"


@pytest.mark.parametrize("gpus", [16, 1024])
def test_latency_end_at_scale_is_ncclS_tree_formula(gpus):
    """8 B all-reduce on DGX H100 nodes, default algorithm: NCCL's tree with LL, whose time is NCCL's own tuning
    formula (tuning.cc): ``baseLat + 2 ((ppn-1) intraLat + log2(nodes) interLat)`` = 25.2 us on 2 nodes and
    85.2 us on 128 nodes.  Exact here because every physical path of a DGX fabric is shorter than NCCL's step
    latency of its type (so each step costs NCCL's constant) and 8 B move in well under 1e-3 of the time."""
    from topologies import build

    fab = build("dgx", gpus, {"gpu": "h100"})
    r = simulate_collective(fab, "all-reduce", range(gpus), 8)
    nodes = gpus // 8
    expect = M.tree_base_latency[Protocol.LL] + 2 * (7 * M.tree_step[Protocol.LL][0]
                                                     + np.log2(nodes) * M.tree_step[Protocol.LL][2])
    assert (r.algorithm, r.protocol) == ("tree", "ll")
    assert r.time_s == pytest.approx(expect, rel=1e-3)


def test_nvls_tree_bytes_are_nvls_inside_and_a_tree_shard_across():
    """NVLS tree on two DGX H100 nodes: each GPU writes S into the NVLink switches (wire S / nvls_factor) as in
    NVLS, and each NIC (rail c) carries its channel's tree share S / (2C) on each of the two trees, so S / C each
    way (wire / network efficiency), C = 8 rails; a ring would put 2 (m-1)/m S / h = S / 8 on each NIC too,
    but also 2 (n-1)/n S on NVLink."""
    from topologies import build

    fab = build("dgx", 16, {"gpu": "h100"})
    f = CAT.value("nvswitch_gen3", "nvls_factor")
    r = Simulator(fab).collectives([Collective("all-reduce", tuple(range(16)), S, "nvls-tree")])
    assert (r.collectives[0].algorithm, r.collectives[0].channels) == ("nvls-tree", 8)
    L, loads = r.sim.loads.links, r.sim.loads
    kind = fab.devices.kind
    gpu_nic = (kind[L.src] == 0) & (kind[L.dst] == 1)
    assert np.allclose(loads.bytes_fwd[gpu_nic], S / 8 / M.efficiency[2])
    assert np.allclose(loads.bytes_rev[gpu_nic], S / 8 / M.efficiency[2])
    gpus = set(fab.gpu_ids.tolist())
    hbd = np.array([s in gpus for s in L.src.tolist()]) & (L.layer == 0)
    assert loads.bytes_fwd[hbd].sum() / 16 == pytest.approx(S / f, rel=1e-9)
    with pytest.raises(FabricError) as exc:  # one domain: NVLS, not an NVLS tree
        simulate_collective(fab, "all-reduce", range(8), S, algorithm="nvls-tree")
    assert exc.value.field == "algorithm"


def test_nvls_tree_latency_is_ncclS_formula():
    """NCCL's NVLS tree latency (tuning.cc): NVLS latency + 2 log2(nodes) x network level latency; 8 B on 8 nodes
    (the transfer of 8 B is negligible; DGX paths are shorter than NCCL's latencies)."""
    from topologies import build

    r = simulate_collective(build("dgx", 64, {"gpu": "h100"}), "all-reduce", range(64), 8, algorithm="nvls-tree")
    assert r.time_s == pytest.approx(M.nvls_latency + 2 * 3 * M.nvls_tree_step, rel=1e-3)


@pytest.mark.parametrize("gpus,ll_max", [(8, 0), (16, 1), (32, 2)])
def test_ll_bus_bandwidth_is_capped_as_ncclS_llMaxBw(gpus, ll_max):
    """64 KiB all-reduce on 1, 2 and 4 DGX H100 nodes, LL: the transfer term is the bus bytes over NCCL's LL
    ceiling for that node count (tuning.cc llMaxBws: 87.7 / 39 / 20.4 GB/s), not the fabric's LL rate (a quarter
    of NVLink or of 8 NICs, far higher).  Ring on one node moves 2 (n-1)/n S of bus bytes; NCCL's tree 2 S."""
    from topologies import build

    size = 2**16
    r = simulate_collective(build("dgx", gpus, {"gpu": "h100"}), "all-reduce", range(gpus), size, protocol="ll")
    cap = M.ll_max_busbw[ll_max]
    if gpus == 8:
        assert r.algorithm == "ring"
        expect = M.base_latency[Protocol.LL] + 14 * M.ring_step[Protocol.LL][0] + size * 14 / 8 / cap
    else:
        assert r.algorithm == "tree"
        depth = np.log2(gpus // 8)
        expect = (M.tree_base_latency[Protocol.LL] + 2 * (7 * M.tree_step[Protocol.LL][0]
                                                         + depth * M.tree_step[Protocol.LL][2]) + 2 * size / cap)
    assert r.time_s == pytest.approx(expect, rel=1e-9)
    assert cap == pytest.approx([87.7e9, 39e9, 20.4e9][ll_max])


@pytest.mark.parametrize("h", [4, 12, 16])
def test_ring_across_two_nvl72_racks_runs_one_channel_per_nic(h):
    """NVL-72, 2 racks, h ranks in each, h snake channels (protocol none): every step each channel crosses each
    rack boundary on a NIC of its own, so the step transfer is ``S / (n C)`` at the NIC rate ``B`` (400G NIC
    and its ToR port, the PCIe link is faster; each GPU's 18 NVLinks carry at most C flows: 900 / C >= B).
    Time is affine in S with slope ``2 (n-1) / (n C B)`` exactly: busbw -> C x B, up to 800 GB/s at C = 16 (it
    was capped at 900 x 15 / 32 GB/s for C >= 9 while GPUs forwarded NIC traffic over NVLink).  Four disjoint
    such groups at once take the same time: the leaf-spine is 1:1, nothing is shared.
    """
    from topologies import build

    from fabric.model import DeviceKind

    fab = build("nvl-72", 144, {})
    L = fab.active_links()
    kind = fab.devices.kind
    nic_tor = (kind[L.src] == DeviceKind.NIC) & (kind[L.dst] == DeviceKind.TOR)
    gpu_nic = (kind[L.src] == DeviceKind.GPU) & (kind[L.dst] == DeviceKind.NIC)
    B = min(L.capacity[nic_tor].min(), L.capacity[gpu_nic].min())
    n, C = 2 * h, h
    groups = [tuple(range(k * h, (k + 1) * h)) + tuple(range(72 + k * h, 72 + (k + 1) * h)) for k in range(4)]

    def t(size, g):
        r = Simulator(fab).collectives([Collective("all-reduce", x, size, "ring", protocol="none", channels=C)
                                        for x in g])
        return max(c.time_s for c in r.collectives)

    slope = (t(2 * S, groups[:1]) - t(S, groups[:1])) / S
    assert slope == pytest.approx(2 * (n - 1) / (n * C * B), rel=1e-9)
    assert t(S, groups) == pytest.approx(t(S, groups[:1]), rel=1e-9)



@pytest.mark.parametrize("fabric, gpus, channels", [("two-level", 16, 4), ("dgx", 32, 8), ("dgx", 16, 3)])
def test_tree_channels_sharing_an_edge_run_as_one_row_exactly(fabric, gpus, channels):
    """The pipelined tree runs the flows of the channels that share a tree edge as one row with their count.

    Checked against the full flow table (one row per edge, tree and channel) scheduled by the same engine:
    every flow's transfer time equals its row's, and every arc carries the same bytes.  Exact: the flows
    of a row have the same ends, bytes and start, so one route (routing reads only the two ends) and, max-min
    filling being symmetric in them, one rate at every instant.
    """
    from topologies import build

    fab = two_level(4, 4, 1e12, 1e-6, 25e9, 3e-6) if fabric == "two-level" else build(fabric, 32)
    sim = Simulator(fab)
    devices = fab.gpu_ids[None, :gpus]
    rt = time_tree(sim, fab, devices, S, Protocol.SIMPLE, channels, M, "auto", "ideal", 0, 0.0)
    child, parent, _, _ = tree_edges(fab, devices[0], channels)
    src, dst = devices[0, np.concatenate([child, parent])], devices[0, np.concatenate([parent, child])]
    wire = S / (2 * channels) / M.efficiency[path_codes(fab, src, dst)]
    full = FlowTable.build(src, dst, wire, 0.0, None, 1, 0)
    prob, graph, arcs = sim.problem(full, field="ranks")
    sched = schedule(prob, "auto")
    rows = rt.step_flows
    assert len(rows) < len(full) and int(rows.count.sum()) == len(full)  # the channels do share edges here
    row_of = {(int(a), int(b)): i for i, (a, b) in enumerate(zip(rows.src, rows.dst))}
    row = np.array([row_of[int(a), int(b)] for a, b in zip(src, dst)])
    row_tx = rt.step_schedule.tx_end - rt.step_schedule.release
    assert np.allclose(sched.tx_end - sched.release, row_tx[row], rtol=1e-12, atol=0)

    def arc_bytes(p, graph_arcs):
        out = np.zeros(graph.n_arcs)
        out[graph_arcs] = p.R.T @ np.bincount(p.route, weights=p.size * p.count, minlength=p.R.shape[0])
        return out

    assert rt.step_graph.n_arcs == graph.n_arcs
    assert np.allclose(arc_bytes(prob, arcs), arc_bytes(rt.step_problem, rt.step_arcs), rtol=1e-12, atol=0)
