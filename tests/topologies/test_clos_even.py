"""Every Clos tier is wired evenly: each lower switch has the same number of links to every upper one.

Why it matters: the flow simulator's per-port ECMP splits a switch's traffic equally over its
equal-cost next hops; if a ToR had two links to some spines and one to others (72 ToRs of 64
uplinks on ceil(72 x 64 / 128) = 36 spines), the single-link spines' downlinks would carry twice
their share and the healthy NVL-72 job at 4,608 GPUs would run slower than its re-placements.

The check is a count over the built links (the OCS circuits of the default configuration
included, so rfabric's aggregation-core tier is checked as traffic sees it), independent of the
builder's formulas: per tier (ToR-spine, ToR-agg, agg-core) a single multiplicity over every
connected pair, every lower switch with the same number of upper neighbours, every upper switch
with the same number of lower ones.  :func:`even_spine_count` is checked against brute force.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.model import DeviceKind
from topologies import ARCHITECTURES, build
from topologies.clos import even_spine_count

TIERS = [(DeviceKind.TOR, DeviceKind.CORE), (DeviceKind.TOR, DeviceKind.AGG), (DeviceKind.AGG, DeviceKind.CORE)]


def tier_pairs(fab, lower: DeviceKind, upper: DeviceKind) -> dict[tuple[int, int], int]:
    """Links (static or circuit) per (lower, upper) switch pair."""
    A = fab.active_links()
    kind = fab.devices.kind
    fwd = (kind[A.src] == lower) & (kind[A.dst] == upper)
    rev = (kind[A.src] == upper) & (kind[A.dst] == lower)
    lo = np.concatenate([A.src[fwd], A.dst[rev]])
    up = np.concatenate([A.dst[fwd], A.src[rev]])
    pairs, count = np.unique(np.stack([lo, up], axis=1), axis=0, return_counts=True)
    return {(int(a), int(b)): int(c) for (a, b), c in zip(pairs, count)}


def assert_even(fab) -> None:
    for lower, upper in TIERS:
        pairs = tier_pairs(fab, lower, upper)
        if not pairs:
            continue
        what = f"{fab.architecture} {fab.n_gpus} GPUs, {lower.label}-{upper.label}"
        assert len(set(pairs.values())) == 1, f"{what}: links per pair {sorted(set(pairs.values()))}"
        lo = np.array([a for a, _ in pairs])
        up = np.array([b for _, b in pairs])
        assert np.unique(np.unique(lo, return_counts=True)[1]).size == 1, f"{what}: uneven fan-out"
        assert np.unique(np.unique(up, return_counts=True)[1]).size == 1, f"{what}: uneven fan-in"
        if (lower, upper) == (DeviceKind.TOR, DeviceKind.CORE):  # a leaf-spine: every ToR reaches every spine
            assert len(pairs) == np.unique(lo).size * np.unique(up).size, f"{what}: a ToR misses a spine"


SIZES = [64, 576, 1000, 1152, 3000, 4608, 6144, 9216]


@pytest.mark.parametrize("gpus", SIZES)
@pytest.mark.parametrize("arch", ["dgx", "nvl-36", "nvl-72", "nvl-576", "tpuv4", "khop-ring", "torus", "rfabric"])
def test_every_architecture_wires_each_tier_evenly(arch, gpus):
    assert_even(build(arch, gpus))


def test_every_architecture_is_covered():
    covered = {"dgx", "nvl", "tpuv4", "khop-ring", "torus", "rfabric", "fat-tree"}
    assert covered == set(ARCHITECTURES)


def test_nvl72_at_4608_has_one_link_per_tor_spine_pair():
    """72 ToRs x 64 uplinks on radix 128: 36 spines would not divide 64; the smallest divisor with the ports is 64."""
    fab = build("nvl-72", 4608)
    pairs = tier_pairs(fab, DeviceKind.TOR, DeviceKind.CORE)
    assert fab.ids_of(DeviceKind.TOR).size == 72 and fab.ids_of(DeviceKind.CORE).size == 64
    assert set(pairs.values()) == {1} and len(pairs) == 72 * 64


@settings(max_examples=15, deadline=None)
@given(gpus=st.integers(2, 700), k=st.sampled_from([8, 12, 16, 20]), tiers=st.sampled_from(["2", "3"]),
       o=st.sampled_from([1.0, 2.0, 3.0]))
def test_fat_tree_tiers_even_for_any_size(gpus, k, tiers, o):
    """Small radices make every partial size (5 ToRs of 8 uplinks, 5 pods, ...) reachable cheaply."""
    d = round(k * o / (1 + o))
    limit = k * d if tiers == "2" else k * d * (k // 2)
    if gpus > limit:
        gpus = limit
    assert_even(build("fat-tree", gpus, {"k": k, "tiers": tiers, "oversubscription": o}))


@settings(max_examples=10, deadline=None)
@given(gpus=st.integers(8, 700), ratio=st.sampled_from([0.25, 0.5, 0.75, 1.0]))
def test_rfabric_core_tier_even(gpus, ratio):
    assert_even(build("rfabric", gpus, {"k": 16, "core_ratio": ratio}))


@given(lower=st.integers(1, 64), uplinks=st.integers(1, 64), k=st.integers(1, 64))
def test_even_spine_count_is_the_smallest_dividing_spine_count(lower, uplinks, k):
    """Brute force: the fewest spines S with S | uplinks and S k >= lower x uplinks."""
    k = max(k, lower)  # the builders call it with at most k lower switches
    fits = [s for s in range(1, uplinks + 1) if uplinks % s == 0 and s * k >= lower * uplinks]
    assert even_spine_count(lower, uplinks, k) == fits[0]


@pytest.mark.parametrize("k", [4, 8, 16, 128])
def test_full_trees_keep_their_closed_forms(k):
    """Al-Fares 2008: leaf-spine k^2/2 hosts, 3k/2 switches; fat-tree k^3/4 hosts, 5k^2/4 switches (both even)."""
    two = build("fat-tree", None, {"k": k, "tiers": "2"})
    assert (two.counts()["hosts"], two.counts()["packet_switches"]) == (k * k // 2, 3 * k // 2)
    assert_even(two)
    if k <= 16:
        three = build("fat-tree", None, {"k": k, "tiers": "3"})
        assert (three.counts()["hosts"], three.counts()["packet_switches"]) == (k ** 3 // 4, 5 * k * k // 4)
        assert_even(three)


def test_healthy_nvl72_dp_rings_do_not_slow_each_other():
    """The symptom itself: at 4,608 GPUs the healthy job's DP groups (tp4 cp2 dp512, 4 rings of 1,024 ranks, 16
    per rack) all at once take what one takes alone, and what the analytic closed form gives (a 1:1 leaf-spine
    shares nothing between the groups).  Measured 1.377x with 36 spines of one or two links per ToR."""
    from workloads.comm import analytic_comm_time, simulator_backend
    from workloads.parallelism import Parallelism
    from workloads.placement import RankPlacement

    sim = simulator_backend()
    if sim is None:
        pytest.skip("needs the flow simulator")
    fab = build("nvl-72", 4608)
    groups = RankPlacement(fab, Parallelism(tp=4, pp=1, dp=512, cp=2, micro_batch=1, global_batch=512)).dp_groups
    assert groups.shape == (4, 1024)
    together, alone = sim(fab, "all_reduce", groups, 1e9), sim(fab, "all_reduce", groups[:1], 1e9)
    assert together == pytest.approx(alone, rel=1e-6)
    assert together == pytest.approx(analytic_comm_time(fab, "all_reduce", groups, 1e9), rel=1e-3)


@settings(max_examples=15, deadline=None)
@given(gpus=st.integers(1, 160), k=st.sampled_from([8, 12, 16, 20]), o=st.sampled_from([1.0, 3.0]))
def test_a_single_pod_takes_the_fewest_aggs_and_every_tor_uplink(gpus, k, o):
    """A 3-tier Clos whose ToRs fit one pod: brute force over the built links, not the builder's formula.

    Each ToR keeps all its u uplinks, and the aggs are the fewest S with S | u and S x (agg downlinks) >= ToRs x u
    (one ToR under a radix-128 pod is one agg with 64 links; it was 64 aggs with one link each, 64 cores and 64
    OCS for `rfabric --gpus 64`).  Full pods keep the k-ary fat-tree's u aggs (test_full_trees_keep...)."""
    d = round(k * o / (1 + o))
    u = k - d
    da = k // 2  # agg_oversubscription 1
    gpus = min(gpus, d * da)  # one pod
    fab = build("fat-tree", gpus, {"k": k, "tiers": "3", "oversubscription": o})
    tors, aggs = fab.ids_of(DeviceKind.TOR), fab.ids_of(DeviceKind.AGG)
    pairs = tier_pairs(fab, DeviceKind.TOR, DeviceKind.AGG)
    per_tor = np.bincount(np.searchsorted(tors, [t for t, _ in pairs]), weights=list(pairs.values()),
                          minlength=tors.size)
    assert (per_tor == u).all()
    fewest = next(s for s in range(1, u + 1) if u % s == 0 and s * da >= tors.size * u)
    assert aggs.size == fewest
    assert_even(fab)
