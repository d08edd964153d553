"""Collectives as flow DAGs: structure, byte accounting, contention between groups, validation."""

from __future__ import annotations

import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.sim import Collective, Flow, FlowTable, Simulator, bus_factor, collective_flows, simulate_collective
from fabric.sim.collectives import inorder_tree
from tests.fabric.test_sim_fabrics import ocs_pair, star, two_level, two_tier

B = 10e9
S = 6 * 2**20


def flows_of(coll, n_devices=None):
    return collective_flows(coll, np.asarray(coll.ranks), np.full(64, -1))


@pytest.mark.parametrize("n", [2, 3, 6])
def test_flow_counts_and_bytes_per_rank(n):
    """Every algorithm moves what its definition says, per rank (independent of timing)."""
    ranks = tuple(range(n))
    cases = {
        ("all-reduce", "ring"): (2 * (n - 1) * n, 2 * (n - 1) * S / n),
        ("reduce-scatter", "ring"): ((n - 1) * n, (n - 1) * S / n),
        ("all-gather", "ring"): ((n - 1) * n, (n - 1) * S / n),
        ("all-to-all", "direct"): (n * (n - 1), (n - 1) * S / n),
        ("all-reduce", "direct"): (n * (n - 1), (n - 1) * S),
        ("reduce-scatter", "direct"): (n * (n - 1), (n - 1) * S / n),
    }
    for (name, algo), (count, per_rank) in cases.items():
        t = flows_of(Collective(name, ranks, S, algo, protocol="none"))
        assert len(t) == count
        sent = np.bincount(t.src, weights=t.size, minlength=n)
        got = np.bincount(t.dst, weights=t.size, minlength=n)
        assert np.allclose(sent, per_rank) and np.allclose(got, per_rank), (name, algo)


@pytest.mark.parametrize("n, k", [(2, 1), (5, 3), (8, 2)])
def test_tree_all_reduce_moves_half_per_tree_edge_each_way(n, k):
    """Double binary tree: each tree edge carries S/2 up and S/2 down; 2 trees x 2 phases x (n-1) edges x k pieces."""
    t = flows_of(Collective("all-reduce", tuple(range(n)), S, "tree", chunks=k, protocol="none"))
    assert len(t) == 2 * 2 * (n - 1) * k
    bytes_ = {}
    for s, d, z in zip(t.src, t.dst, t.size):
        bytes_[(s, d)] = bytes_.get((s, d), 0.0) + z
    parent = inorder_tree(n)
    expect = {}
    for shift in (0, 1):
        node = (np.arange(n) + shift) % n
        for p in range(n):
            if parent[p] >= 0:
                for e in ((node[p], node[parent[p]]), (node[parent[p]], node[p])):
                    expect[e] = expect.get(e, 0.0) + S / 2
    assert bytes_.keys() == expect.keys()
    assert all(bytes_[e] == pytest.approx(expect[e]) for e in expect)


def test_inorder_tree_and_its_shift_differ_in_leaves():
    """Most ranks are a leaf in one of the two trees (what the double binary tree is for)."""
    n = 16
    parent = inorder_tree(n)
    assert np.count_nonzero(parent < 0) == 1
    interior = set(parent[parent >= 0].tolist())
    interior2 = {(p + 1) % n for p in interior}
    assert len(interior & interior2) <= 2


def test_chain_broadcast_dependencies():
    """Piece c leaves rank j after it arrived there and after piece c-1 left."""
    n, k = 4, 3
    t = flows_of(Collective("broadcast", tuple(range(n)), S, chunks=k, root=1, protocol="none"))
    order = [1, 2, 3, 0]
    for c in range(k):
        for j in range(n - 1):
            f = c * (n - 1) + j
            assert (t.src[f], t.dst[f]) == (order[j], order[j + 1])
            deps = set(t.dep_idx[t.dep_ptr[f]:t.dep_ptr[f + 1]].tolist())
            expect = ({c * (n - 1) + j - 1} if j else set()) | ({(c - 1) * (n - 1) + j} if c else set())
            assert deps == expect


def test_groups_generated_together_equal_groups_generated_apart():
    """Batching G groups into one table (step-major layout) gives the same schedule as separate tables."""
    fab = two_tier(2, 4, 2, 2.0, B, 1e-6)
    sim = Simulator(fab)
    for name, algo in (("all-reduce", "ring"), ("all-reduce", "tree"), ("broadcast", "ring"), ("all-to-all", None)):
        coll = Collective(name, (0, 1, 2, 3), S, algo, chunks=3, protocol="none")
        rows = np.array([[0, 1, 2, 3], [4, 5, 6, 7], [1, 5, 2, 6]])
        together = collective_flows(coll, fab.gpu_ids[rows], fab.group("domain"), tags=[0, 1, 2])
        apart = FlowTable.concat([collective_flows(coll, fab.gpu_ids[r], fab.group("domain"), tags=i)
                                  for i, r in enumerate(rows)])
        a, b = sim.run(together), sim.run(apart)
        for g in range(3):
            assert a.finish_s[together.tag == g].max() == pytest.approx(b.finish_s[apart.tag == g].max(), rel=1e-12)
        assert np.allclose(np.sort(a.finish_s), np.sort(b.finish_s), rtol=1e-12)


def test_groups_contend_only_where_they_share_links():
    """Two rings on one switch do not interact; two rings whose flows cross the same uplinks slow each other."""
    sim = Simulator(star(8, B))
    alone = sim.collective(Collective("all-reduce", (0, 1, 2, 3), S, protocol="none")).time_s
    both = sim.collectives([Collective("all-reduce", (0, 1, 2, 3), S, protocol="none"),
                            Collective("all-reduce", (4, 5, 6, 7), S, protocol="none")])
    assert [c.time_s for c in both.collectives] == pytest.approx([alone, alone], rel=1e-12)
    # two racks, uplinks of one host's bandwidth: rings that alternate racks all cross the cut
    sim = Simulator(two_tier(2, 4, 1, 4.0, B))
    alone = sim.collective(Collective("all-reduce", (0, 4, 1, 5), S, protocol="none")).time_s
    both = sim.collectives([Collective("all-reduce", (0, 4, 1, 5), S, protocol="none"),
                            Collective("all-reduce", (2, 6, 3, 7), S, protocol="none")])
    assert all(c.time_s > alone * 1.5 for c in both.collectives)
    assert both.time_s == pytest.approx(max(c.time_s for c in both.collectives))


def test_hierarchical_needs_equal_domains():
    fab = two_level(2, 4, B, 0.0, B, 0.0)
    with pytest.raises(FabricError, match="same number of ranks"):
        Simulator(fab).collective(Collective("all-reduce", (0, 1, 2, 4), S, "hierarchical", protocol="none"))


def test_bus_factors():
    assert bus_factor("all-reduce", 8) == pytest.approx(14 / 8)
    for name in ("all-gather", "reduce-scatter", "all-to-all"):
        assert bus_factor(name, 8) == pytest.approx(7 / 8)
    assert bus_factor("broadcast", 8) == bus_factor("send-recv", 8) == 1.0


def test_single_rank_collective_takes_no_time():
    r = Simulator(star(2, B)).collective(Collective("all-reduce", (1,), S, protocol="none"))
    assert r.time_s == 0.0 and r.n_flows == 0


@pytest.mark.parametrize("kwargs, field", [
    ({"collective": "allreduce"}, "collective"),
    ({"algorithm": "tree", "collective": "all-gather"}, "algorithm"),
    ({"algorithm": "ring", "collective": "all-to-all"}, "algorithm"),
    ({"size": 0}, "size"),
    ({"size": -5.0}, "size"),
    ({"size": float("nan")}, "size"),
    ({"ranks": (0, 9)}, "ranks"),
    ({"ranks": (0, 0)}, "ranks"),
    ({"ranks": ()}, "ranks"),
    ({"ranks": (0.5, 1)}, "ranks"),
    ({"chunks": 0, "collective": "broadcast"}, "chunks"),
    ({"root": 5, "collective": "broadcast"}, "root"),
])
def test_bad_collectives_raise_fabric_errors(kwargs, field):
    args = {"collective": "all-reduce", "ranks": (0, 1, 2), "size": S, **kwargs}
    fab = star(4, B)
    with pytest.raises(FabricError) as exc:
        simulate_collective(fab, args.pop("collective"), args.pop("ranks"), args.pop("size"), **args)
    assert exc.value.field == field


def test_bad_flows_raise_fabric_errors():
    fab = star(3, B)
    sim = Simulator(fab)
    g = [int(x) for x in fab.gpu_ids]
    with pytest.raises(FabricError, match="cycle"):
        sim.run([Flow(g[0], g[1], 1.0, after=(1,)), Flow(g[1], g[2], 1.0, after=(0,))])
    with pytest.raises(FabricError, match="unknown flow id"):
        sim.run([Flow(g[0], g[1], 1.0, after=("x",))])
    with pytest.raises(FabricError, match="no device named"):
        sim.run([Flow("gpu0", "nope", 1.0)])
    with pytest.raises(FabricError, match=">= 0"):
        sim.run([Flow(g[0], g[1], -1.0)])
    with pytest.raises(FabricError, match="not in the topology"):
        sim.run([Flow(g[0], 99, 1.0)])
    with pytest.raises(FabricError, match="ecmp"):
        sim.run([Flow(g[0], g[1], 1.0)], ecmp="random")
    # names work as endpoints
    assert sim.run([Flow("gpu0", "gpu2", 1e6)]).makespan_s == pytest.approx(1e6 / B)


def test_dag_method_refuses_contention():
    fab = star(3, B)
    g = [int(x) for x in fab.gpu_ids]
    flows = [Flow(g[0], g[2], 1e6), Flow(g[1], g[2], 1e6)]
    with pytest.raises(FabricError, match="contend"):
        Simulator(fab).run(flows, method="dag")
    assert Simulator(fab).run(flows, method="auto").method == "event"


def test_disconnected_ranks():
    with pytest.raises(FabricError, match="cannot reach"):
        simulate_collective(ocs_pair(B, 0.0, with_circuit=False), "all-to-all", (0, 1), S, protocol="none")


def test_link_report():
    """Bytes per link are route fractions x bytes; utilisation is bytes / (capacity x makespan)."""
    fab = star(4, B)
    res = Simulator(fab).collectives([Collective("all-to-all", (0, 1, 2, 3), S, protocol="none")])
    recs = res.sim.loads.records()
    assert len(recs) == 4
    for r in recs:
        assert r["bytes_fwd"] == pytest.approx(3 * S / 4) and r["bytes_rev"] == pytest.approx(3 * S / 4)
        assert r["utilisation"] == pytest.approx(1.0)  # every link is busy the whole time
    assert res.sim.bottlenecks(2) == recs[:2]


@pytest.mark.parametrize("name, groups, protocol", [
    ("send_recv", [(0, 9), (1, 17), (2, 26), (3, 40)], "simple"),
    ("send_recv", [(0, 9), (1, 17), (2, 26), (3, 40)], "ll"),
    ("all_reduce", [tuple(range(0, 64, 8)), tuple(range(1, 64, 8))], "ll128"),
    ("all_gather", [tuple(range(0, 64, 8)), tuple(range(1, 64, 8))], "none"),
])
def test_batch_times_equal_one_collective_per_group(name, groups, protocol):
    """Simulator.batch_times (what the step model calls, without building a Collective per group) gives exactly
    the times of Simulator.collectives on one Collective per group; bad ranks are one error naming ranks."""
    from topologies import build

    fab = build("dgx", gpus=64)
    colls = [Collective(name, g, 2.0**24, protocol=protocol) for g in groups]
    want = [c.time_s for c in Simulator(fab).collectives(colls).collectives]
    got = Simulator(fab).batch_times(colls[0], np.array(groups))
    assert got.tolist() == want
    with pytest.raises(FabricError, match="^ranks: "):
        Simulator(fab).batch_times(colls[0], np.array(groups)[:, :1])
    with pytest.raises(FabricError, match="^ranks: "):
        Simulator(fab).batch_times(colls[0], np.array(groups) + 64)
