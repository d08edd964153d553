"""Hierarchical all-reduce timed from one step of each phase (fabric.sim.hierarchical) against the full flow DAG.

The full simulation is the hierarchical flow DAG of :mod:`fabric.sim.collectives`
(reduce-scatter rings in every domain, an all-reduce ring across domains per
position, all-gather rings), run by the engine (``Simulator(lump=False)``).
Where one step of every phase fits the fabric with every flow at its free rate
and no two step flows share a route, every flow of the DAG runs at its free
rate, so the engine's DAG pass and the per-step longest-path recurrence are the
same sums and maxima: times must agree to 1e-9 (they agree to the last bit
here), and so must the flow counts and the bytes on every link, which do not
depend on timing.  Unequal hop rates and latencies (the uneven fabric below)
exercise the recurrence's ``max`` over a rank's own and its predecessor's
previous step, which uniform fabrics never do.
"""

import numpy as np
import pytest

from fabric.model import DeviceKind, FabricBuilder, HBDSpec
from fabric.sim import Collective, Simulator
from tests.fabric.test_sim_fabrics import two_level

S = 96 * 2**20
B = 40e9


def uneven(m: int, h: int, seed: int, tor_uplink: float | None = None):
    """``m`` HBD domains of ``h`` GPUs with unequal links: every GPU's NVLink, PCIe and NIC capacity and latency
    drawn at random, so that every ring hop has its own rate and latency.

    Inside a domain GPU -> chip -> GPU; across domains GPU -> NIC -> ToR of its domain -> spine -> ... .  With
    ``tor_uplink`` the ToR-spine link has that capacity (oversubscribed when below the domain's NIC total).
    """
    rng = np.random.default_rng(seed)
    n = m * h
    dom = np.arange(n) // h
    b = FabricBuilder("uneven", {})
    g = b.add_devices(DeviceKind.GPU, n, node=np.arange(n), domain=dom)
    chips = b.add_devices(DeviceKind.SWITCH_CHIP, m, domain=np.arange(m))
    nics = b.add_devices(DeviceKind.NIC, n, node=np.arange(n))
    tors = b.add_devices(DeviceKind.TOR, m, tor=np.arange(m))
    spine = b.add_devices(DeviceKind.CORE, 1)
    b.add_links(g, chips[dom], capacity=rng.uniform(100e9, 400e9, n), latency=rng.uniform(0.2e-6, 1e-6, n),
                medium="pcb", layer="hbd")
    b.add_links(g, nics, capacity=rng.uniform(60e9, 120e9, n), latency=0.0, medium="pcb", layer="dcn")
    b.add_links(nics, tors[dom], capacity=rng.uniform(20e9, 50e9, n), latency=rng.uniform(0.5e-6, 2e-6, n),
                medium="fiber", layer="dcn")
    up = h * 50e9 if tor_uplink is None else tor_uplink
    b.add_links(tors, np.repeat(spine, m), capacity=up, latency=1e-6, medium="fiber", layer="dcn")
    return b.build(HBDSpec(kind="switch_domain", gpus_per_node=h, domain_gpus=h, max_tp=h))


def _case(case: str):
    from topologies import build

    if case.startswith("two-level"):  # m domains of h: every split, including a phase of rings of one rank
        m, h = (int(x) for x in case.split()[1].split("x"))
        return two_level(m, h, 4 * B, 0.5e-6, B, 3e-6), [tuple(range(m * h))]
    if case.startswith("uneven ") and case != "uneven groups":  # one group over every GPU
        m, h = (int(x) for x in case.split()[1].split("x"))
        return uneven(m, h, seed=m * h), [tuple(range(m * h))]
    if case == "uneven groups":  # two groups of 2 domains x 3 ranks, interleaved positions
        return uneven(4, 6, seed=11), [tuple(np.r_[0:3, 6:9, 12:15, 18:21]), tuple(np.r_[3:6, 9:12, 15:18, 21:24])]
    if case == "dgx":
        return build("dgx", gpus=32), [tuple(range(32))]
    if case == "dgx groups":  # two groups of 4 domains x 4 ranks on DGX nodes
        return build("dgx", gpus=32), [tuple(np.r_[0:4, 8:12, 16:20, 24:28]), tuple(np.r_[4:8, 12:16, 20:24, 28:32])]
    if case == "nvl-72":  # two racks of 72: 2 rings of 72 inside, 72 rings of 2 across
        return build("nvl-72", gpus=144), [tuple(range(144))]
    if case == "fat-tree":  # no HBD domains: every GPU its own domain, one ring across all
        fab = build("fat-tree", gpus=64, params={"k": 8, "tiers": "3"})
        return fab, [tuple(range(g, 64, 4)) for g in range(4)]
    raise AssertionError(case)


def _run(fab, groups, protocol, lump, ecmp="ideal"):
    colls = [Collective("all-reduce", g, S, "hierarchical", protocol=protocol) for g in groups]
    return Simulator(fab, lump=lump).collectives(colls, ecmp=ecmp, seed=5)


def _assert_same(step, full):
    assert [c.time_s for c in step.collectives] == pytest.approx([c.time_s for c in full.collectives], rel=1e-9)
    assert [c.n_flows for c in step.collectives] == [c.n_flows for c in full.collectives]
    assert [(c.algorithm, c.protocol, c.channels) for c in step.collectives] == \
        [(c.algorithm, c.protocol, c.channels) for c in full.collectives]
    scale = max(full.sim.loads.bytes_fwd.max(), full.sim.loads.bytes_rev.max())
    assert np.allclose(step.sim.loads.bytes_fwd, full.sim.loads.bytes_fwd, rtol=1e-9, atol=1e-9 * scale)
    assert np.allclose(step.sim.loads.bytes_rev, full.sim.loads.bytes_rev, rtol=1e-9, atol=1e-9 * scale)


@pytest.mark.parametrize("protocol", ["none", "auto", "ll", "ll128", "simple"])
@pytest.mark.parametrize("case", ["two-level 3x4", "two-level 2x2", "two-level 4x1", "two-level 1x4",
                                  "uneven 3x4", "uneven 4x6", "uneven 6x3", "uneven groups",
                                  "dgx", "dgx groups", "nvl-72", "fat-tree"])
def test_hierarchical_by_step_equals_the_flow_dag(case, protocol):
    """Every phase split (m x h, with rings of one rank), DGX, NVL-72, fat-tree, unequal hops, several groups,
    the ideal model and every NCCL protocol: time, flows and link bytes of the full DAG."""
    fab, groups = _case(case)
    step, full = _run(fab, groups, protocol, True), _run(fab, groups, protocol, False)
    assert step.sim.method == "step+dag" and full.sim.method == "dag"
    _assert_same(step, full)


def test_hierarchical_by_step_on_hashed_ecmp():
    from topologies import build

    fab = build("dgx", gpus=32)
    groups = [tuple(np.r_[0:4, 8:12, 16:20, 24:28]), tuple(np.r_[4:8, 12:16, 20:24, 28:32])]
    step, full = _run(fab, groups, "auto", True, "hash"), _run(fab, groups, "auto", False, "hash")
    assert step.sim.method == "step+dag"
    _assert_same(step, full)


def test_uneven_hops_make_the_recurrence_matter():
    """On the uneven fabric the hops differ, and the chained phases finish before ``sum over phases of K x the
    slowest hop`` (the flat ring's form, exact for one ring from a common start): ranks enter a phase at different
    times, which only the recurrence (each rank waits on its own and its predecessor's previous step, and on its
    own exit from the previous phase) follows; the comparison with the full DAG above checks it step for step."""
    m, h = 3, 4
    fab, groups = _case(f"uneven {m}x{h}")
    step = _run(fab, groups, "none", True)
    w = step.sim.finish_s - step.sim.release_s  # one step's flows: the m rings of h, then the h rings of m
    assert np.ptp(w[:m * h]) > 0.1 * w[:m * h].max() and np.ptp(w[m * h:]) > 0.1 * w[m * h:].max()
    slowest = 2 * (h - 1) * w[:m * h].max() + 2 * (m - 1) * w[m * h:].max()
    assert step.collectives[0].time_s < slowest * (1 - 1e-6)


def test_hierarchical_by_step_declines_when_a_step_contends():
    """A 2:1 ToR uplink that the phase across domains overloads, or two collectives on the same GPUs: the full DAG
    runs (event loop: links are shared), and the answer is exactly the full simulation's."""
    fab = uneven(3, 4, seed=3, tor_uplink=40e9)  # 4 NICs of 20-50 GB/s behind 40 GB/s
    groups = [tuple(range(12))]
    step, full = _run(fab, groups, "none", True), _run(fab, groups, "none", False)
    assert step.sim.method == "event" and full.sim.method == "event"
    assert [c.time_s for c in step.collectives] == [c.time_s for c in full.collectives]
    fab2 = two_level(2, 3, 4 * B, 0.5e-6, B, 3e-6)
    same = [tuple(range(6))] * 2
    step2, full2 = _run(fab2, same, "ll128", True), _run(fab2, same, "ll128", False)
    assert step2.sim.method == "event" == full2.sim.method
    assert [c.time_s for c in step2.collectives] == [c.time_s for c in full2.collectives]


def test_small_hierarchical_runs_the_full_dag_by_default():
    """Below STEP_MIN_FLOWS flows the default simulator runs the DAG (every flow's times), by step with lump=True;
    the event method always runs the full DAG."""
    fab, groups = _case("dgx")
    assert _run(fab, groups, "auto", None).sim.method == "dag"
    colls = [Collective("all-reduce", groups[0], S, "hierarchical", protocol="ll")]
    assert Simulator(fab, lump=True).collectives(colls, method="event").sim.method == "event"
