"""k-hop ring allocation: the greedy segment rule is the true maximum (exhaustive check), k = 1 is a plain ring."""

from functools import lru_cache

import numpy as np
import pytest

from fabric.faults import FaultSamples
from solvers.allocation.segments import count_line_blocks, line_blocks
from topologies import build
from topologies.khop import ring_configuration


def _rings(L: int, k: int, m: int, closed: bool) -> dict[int, list[int]]:
    """Every ring placement as a bitmask, grouped by its lowest node.

    A ring is a sequence of m distinct nodes, each hop going forward by 1..k
    positions (modulo L when closed): the general model, where rings may
    interleave or even lap a short closed line.
    """
    by_low: dict[int, set[int]] = {}

    def extend(seq):
        if len(seq) == m:
            mask = sum(1 << v for v in seq)
            by_low.setdefault(min(seq), set()).add(mask)
            return
        for d in range(1, k + 1):
            nxt = seq[-1] + d
            if closed:
                nxt %= L
            elif nxt >= L:
                break
            if nxt not in seq:
                extend(seq + [nxt])

    for start in range(L):
        extend([start])
    return {low: sorted(masks) for low, masks in by_low.items()}


def _brute_force(L: int, k: int, m: int, closed: bool):
    """Max number of disjoint rings inside an availability mask, by exhaustive search (memoised)."""
    rings = _rings(L, k, m, closed)

    @lru_cache(maxsize=None)
    def best(mask: int) -> int:
        if mask == 0:
            return 0
        low = (mask & -mask).bit_length() - 1
        rest = mask & ~(1 << low)
        value = best(rest)  # the lowest available node is in no ring ...
        for r in rings.get(low, ()):  # ... or in a ring of which it is the lowest node
            if r & ~mask == 0:
                value = max(value, 1 + best(mask & ~r))
        return value

    return best


@pytest.mark.parametrize("closed", [False, True])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("m", [1, 2, 3, 4])
def test_segment_rule_is_the_maximum_on_every_small_line(k, m, closed):
    """Exact count: the segment rule (count path and exact path) equals exhaustive search.

    For every line of 1..12 nodes (closed: k < L, as a closed k-hop ring needs)
    and every one of its 2^L fault patterns, the maximum number of disjoint
    rings over *all* ring placements equals what the vectorised count path
    and the exact allocator give, and the allocator's rings are valid.
    """
    for L in range(1, 13):
        if closed and k >= L:
            continue
        best = _brute_force(L, k, m, closed)
        patterns = np.arange(2 ** L)
        faulty = ((patterns[:, None] >> np.arange(L)[None, :]) & 1).astype(bool)
        fs = FaultSamples.from_dense(faulty)
        counted = count_line_blocks(fs.row_of_entries(), fs.indices, fs.n_rows, L, k, m, closed)
        expect = np.array([best(int((2 ** L - 1) & ~p)) for p in patterns])
        np.testing.assert_array_equal(counted, expect, err_msg=f"L={L}")
        # the exact allocator forms that many valid rings (checked on a subsample to stay fast)
        for p in patterns[:: max(1, 2 ** L // 64)]:
            blocks = line_blocks(~faulty[p], k, m, closed)
            assert blocks.shape == (expect[p], m)
            assert not faulty[p][blocks].any()
            assert np.unique(blocks).size == blocks.size
            hops = np.diff(blocks, axis=1) % L if closed else np.diff(blocks, axis=1)
            assert np.all((hops >= 1) & (hops <= k))


def _plain_ring_segments(faulty: np.ndarray, m: int, closed: bool) -> int:
    """Rings of m nodes in the runs of healthy nodes between faults (what a plain k = 1 ring can do)."""
    L = faulty.size
    if closed and not faulty.any():
        return L // m
    if closed:
        shift = int(np.flatnonzero(faulty)[0])
        faulty = np.roll(faulty, -shift)
    total, run = 0, 0
    for f in faulty:
        if f:
            total += run // m
            run = 0
        else:
            run += 1
    return total + run // m


@pytest.mark.parametrize("closed", [False, True])
def test_k1_is_a_plain_ring(closed):
    """k = 1 behaves as a plain ring: rings fit only in the runs of healthy nodes between faults.

    Exact: with k = 1 every hop spans one position, so no ring can skip a
    faulty node; each run of healthy nodes between faults (circular when
    closed) holds floor(run / m) rings, checked here against a direct scan.
    """
    rng = np.random.default_rng(7)
    faulty = rng.random((400, 60)) < 0.15
    fs = FaultSamples.from_dense(faulty)
    for m in (1, 2, 4, 8):
        counted = count_line_blocks(fs.row_of_entries(), fs.indices, fs.n_rows, 60, 1, m, closed)
        expect = [_plain_ring_segments(row, m, closed) for row in faulty]
        np.testing.assert_array_equal(counted, expect)


def test_markers_split_segments_like_the_exact_path():
    """Boundaries (dead hops) cut the line the same way in the count path and in the exact path."""
    rng = np.random.default_rng(3)
    L = 30
    for closed in (False, True):
        for _ in range(300):
            faulty = rng.random(L) < 0.2
            bnd = rng.random(L) < 0.1
            k, m = int(rng.integers(1, 4)), int(rng.integers(1, 5))
            pos = np.flatnonzero(faulty)
            mk = np.flatnonzero(bnd)
            counted = count_line_blocks(np.zeros(pos.size, int), pos, 1, L, k, m, closed,
                                        np.zeros(mk.size, int), mk)[0]
            assert counted == line_blocks(~faulty, k, m, closed, bnd).shape[0]


def test_khop_rings_light_a_valid_configuration():
    """The allocator's rings are node lists that topologies.khop.ring_configuration accepts (hops <= k)."""
    from solvers.allocation import allocate

    for closed in ("false", "true"):
        fab = build("khop-ring", gpus=4 * 40, params={"k": 2, "closed": closed})
        a = allocate(fab, 16, faulty_nodes=[3, 4, 10, 17, 18, 39])
        assert a.unit_kind == "node" and a.units.shape[1] == 4
        ring_configuration(fab, a.units.tolist())  # raises on a hop longer than k
        node = fab.group("node")
        assert np.array_equal(node[a.groups].reshape(-1, 4, 4)[:, :, 0], a.units)


def test_groups_inside_a_node_light_no_ring():
    """TP 2 on 4-GPU nodes: two groups per healthy node on its mesh (faulty node 3 gives none), no OCS path lit."""
    from solvers.allocation import allocate_lit

    fab = build("khop-ring", 64, {"k": 2})
    lit, alloc = allocate_lit(fab, 2, faulty_nodes=[3])
    node = fab.group("node")
    assert alloc.n_groups == 2 * 15 and alloc.units.ravel().tolist() == \
        [n for n in range(16) if n != 3 for _ in range(2)]
    assert all(np.unique(node[g]).size == 1 for g in alloc.groups)
    assert np.array_equal(lit.configuration.active_candidates, fab.configuration.active_candidates)


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_tp_dividing_the_node_wastes_nothing(tp):
    """TP a divisor of g = 4: every GPU of every healthy node is usable, so (closed form) usable GPUs = g x
    healthy nodes in every sample, waste exactly 0, and one node failure costs exactly its own 4 GPUs (blast
    radius 4, stranded 0): exact because node-local groups never depend on another node."""
    from solvers.allocation import evaluate_faults

    fab = build("khop-ring", 256, {"k": 2})
    res = evaluate_faults(fab, tp, node_fault_ratio=0.1, samples=40, seed=3)
    assert res["waste_ratio"]["max"] == 0.0
    assert res["usable_gpus"]["mean"] == res["healthy_gpus"]["mean"] < 256
    node = res["blast_radius"]["node"]
    assert node["min"] == node["max"] == node["own"] == 4 and node["stranded"] == 0
