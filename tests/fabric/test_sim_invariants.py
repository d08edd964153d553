"""Metamorphic relations of the flow simulator: how a result must move when its input moves.

Each is exact in the fluid model, so each is asserted to 1e-9 relative:

* **bandwidth scaling**: with zero link latency and no protocol (``protocol='none'``: no software latency), every
  rate of a max-min fair allocation scales with the capacities and every byte count with the size, so doubling
  every link halves the time and doubling the size doubles it; busbw is then independent of the size;
* **latency**: an ideal ring (one channel, no protocol) of ``n`` ranks on one switch runs ``2 (n - 1)``
  dependent steps of a 2-link path, so adding ``a`` to every link adds exactly ``4 (n - 1) a`` to an
  all-reduce and ``2 (n - 1) a`` to a reduce-scatter or all-gather (the closed form ``k (alpha + S / (n B))``);
* **the protocol asked is the protocol run**: NVLS, NVLS tree and SHARP exist only under NCCL's Simple protocol,
  so a pinned LL / LL128 / none never returns one of them (it did: ``--protocol ll`` on 16 H100 returned an
  NVLS-tree run labelled ``simple``), and asking for one with another protocol is refused, naming the protocol.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.errors import FabricError
from fabric.sim import Collective, simulator
from topologies import build

FABRICS = {
    "dgx-16": ("dgx", 16, {}),
    "fat-tree-k4": ("fat-tree", 16, {"k": 4}),
    "khop-32": ("khop-ring", 32, {}),
    "nvl-72": ("nvl", 72, {"size": 72}),
    "torus-4x4": ("torus", 16, {"dims": "4x4"}),
}
_BUILT: dict = {}


def fabric(name: str, capacity: float = 1.0, latency: float | None = None):
    """The named fabric with every link's capacity scaled and its latency set (0 by default)."""
    if name not in _BUILT:
        arch, gpus, params = FABRICS[name]
        _BUILT[name] = build(arch, gpus=gpus, params=params)
    fab = _BUILT[name]
    L = fab.links
    lat = L.latency * 0.0 if latency is None else L.latency * 0.0 + latency
    return dataclasses.replace(fab, links=dataclasses.replace(L, capacity=L.capacity * capacity, latency=lat))


def time_of(fab, coll: Collective) -> float:
    return simulator(fab).collectives([coll]).time_s


@settings(max_examples=25, deadline=None)
@given(name=st.sampled_from(sorted(FABRICS)),
       case=st.sampled_from([("all-reduce", "ring"), ("all-reduce", "tree"), ("all-reduce", "hierarchical"),
                             ("all-reduce", "direct"), ("all-gather", "ring"), ("reduce-scatter", "ring"),
                             ("all-to-all", "direct"), ("broadcast", "ring"), ("broadcast", "tree"),
                             ("send-recv", "auto")]),
       stride=st.sampled_from([1, 2, 3]), size=st.floats(1e4, 1e9), channels=st.sampled_from([None, 1, 2]))
def test_time_scales_inversely_with_bandwidth_and_linearly_with_size(name, case, stride, size, channels):
    base = fabric(name)
    ranks = tuple(range(0, base.n_gpus, stride))
    coll = Collective(case[0], ranks, size, case[1], protocol="none", channels=channels)
    t = time_of(base, coll)
    assert t > 0
    assert time_of(fabric(name, capacity=2.0), coll) == pytest.approx(t / 2, rel=1e-9)
    assert time_of(base, dataclasses.replace(coll, size=2 * size)) == pytest.approx(2 * t, rel=1e-9)


@pytest.mark.parametrize("name,gpus", [("all-reduce", 8), ("reduce-scatter", 8), ("all-gather", 8),
                                       ("all-reduce", 5)])
def test_latency_adds_one_path_per_ring_step(name, gpus):
    """DGX H100, one node: GPU - NVSwitch - GPU is 2 links; the ring has 2 (n-1) steps (all-reduce) or n - 1."""
    alpha = 1e-6
    steps = (2 if name == "all-reduce" else 1) * (gpus - 1)
    coll = Collective(name, tuple(range(gpus)), 2**26, "ring", protocol="none", channels=1)
    t0 = time_of(fabric("dgx-16"), coll)
    t1 = time_of(fabric("dgx-16", latency=alpha), coll)
    assert t1 - t0 == pytest.approx(steps * 2 * alpha, rel=1e-9)


@settings(max_examples=15, deadline=None)
@given(protocol=st.sampled_from(["ll", "ll128", "none", "simple"]), size=st.sampled_from([2**13, 2**20, 2**30]),
       channels=st.sampled_from([None, 8]), name=st.sampled_from(["dgx-16", "nvl-72"]))
def test_the_protocol_asked_is_the_protocol_run(protocol, size, channels, name):
    fab = build(*FABRICS[name][:2], params=FABRICS[name][2])
    res = simulator(fab).collectives([Collective("all-reduce", tuple(range(fab.n_gpus)), size, "auto",
                                                 protocol=protocol, channels=channels)])
    first = res.collectives[0]
    assert first.protocol == protocol
    if protocol != "simple":
        assert first.algorithm not in ("nvls", "nvls-tree", "sharp")


@pytest.mark.parametrize("algorithm", ["nvls", "nvls-tree", "sharp"])
@pytest.mark.parametrize("protocol", ["ll", "ll128", "none"])
def test_in_switch_reduction_under_another_protocol_is_refused(algorithm, protocol):
    fab = build("dgx", gpus=16)
    with pytest.raises(FabricError) as exc:
        simulator(fab).collectives([Collective("all-reduce", tuple(range(16)), 2**20, algorithm, protocol=protocol)])
    assert exc.value.field == "protocol" and "Simple" in exc.value.message


def test_cli_names_the_protocol(run_cli):
    rc, out, err = run_cli("simulate", "dgx", "--gpus", 8, "--collective", "all-reduce", "--size", "1MiB",
                           "--group-size", 8, "--algorithm", "nvls", "--protocol", "ll", "--json")
    assert rc == 2 and out == "" and err.startswith("error: --protocol:") and err.count("\n") == 1
