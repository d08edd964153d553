"""Regression tests from the large-shape probe: the Clos radix and rail-optimised k-hop ToRs.

Each test says which independent fact it checks.
"""

from __future__ import annotations

import importlib

import pytest

from fabric.errors import FabricError
from topologies import build
from topologies.khop import size as khop_size


def _forbid_builder(monkeypatch, module: str) -> None:
    def builder_called(*_args):
        raise AssertionError("the builder ran before the Clos was found too small")

    monkeypatch.setattr(importlib.import_module(f"topologies.{module}"), "build", builder_called)


@pytest.mark.parametrize("name, module, gpus, params, field, radix", [
    # 2^20 GPUs need 256 pods of 64 x 64 endpoints; radix 128 holds 128 (k^3/4 = 524,288 endpoints)
    ("khop-ring", "khop", 2 ** 20, {}, "gpus", "dcn_k"),
    ("torus", "torus", 2 ** 20, {}, "gpus", "k"),
    # radix 8 at 3 tiers: k^3/4 = 128 hosts; 200 hosts need 13 pods of 16
    ("fat-tree", "fattree", 200, {"k": 8}, "gpus", "k"),
    # 2 tiers of radix 8 hold 8 ToRs; 4,096 NICs need 1,024 (radix 128 would hold them: -p dcn_k blamed)
    ("khop-ring", "khop", 4096, {"tiers": "2", "dcn_k": 8}, "params[dcn_k]", "dcn_k"),
])
def test_a_clos_its_radix_cannot_hold_is_refused_before_building(monkeypatch, name, module, gpus, params, field,
                                                                  radix):
    """The k-ary fat-tree's capacity (k^3/4 endpoints at 3 tiers, k ToRs at 2) is checked from the closed form.

    Before, the builder allocated every GPU and NIC (340 MB at 2^20 GPUs) and then refused, telling a
    k-hop user to raise ``-p k`` (the optical reach) instead of the DCN radix ``-p dcn_k``.
    """
    _forbid_builder(monkeypatch, module)
    with pytest.raises(FabricError) as exc:
        build(name, gpus, params)
    assert exc.value.field == field
    assert exc.value.message.endswith(f"a larger -p {radix}")


def test_the_largest_clos_a_radix_holds_is_still_built():
    """k = 8, 3 tiers: exactly k^3/4 = 128 hosts fit, with 5k^2/4 = 80 switches (Al-Fares et al. 2008)."""
    c = build("fat-tree", 128, {"k": 8, "tiers": "3"}).counts()
    assert (c["gpus"], c["packet_switches"]) == (128, 80)


def test_khop_ratio_error_names_dcn_k():
    """On a k-hop ring ``k`` is the optical reach: the radix bound of an oversubscription names ``dcn_k``."""
    with pytest.raises(FabricError) as exc:
        build("khop-ring", 64, {"oversubscription": 200.0})
    assert exc.value.field == "params[oversubscription]"
    assert "dcn_k-1 = 127" in exc.value.message


@pytest.mark.parametrize("gpus", [4096, 65536])
def test_rail_optimised_khop_fills_its_tors(gpus):
    """Rail optimisation only permutes which NIC meets which ToR: the switch count is the plain Clos's.

    Closed form at radix 128 (64 down, 64 up): 4,096 NICs are 64 full ToRs + 32 spines (2 tiers);
    65,536 are 16 pods x (64 ToRs + 64 aggs) + 64 planes x 8 cores = 2,560 switches.  The default used to
    put one rail of 16 nodes on each ToR (16 of 64 ports), 4x the ToRs.
    """
    rail = build("khop-ring", gpus, {"rail_optimized": True})
    plain = build("khop-ring", gpus, {})
    expected = {4096: 64 + 32, 65536: 16 * (64 + 64) + 64 * 8}[gpus]
    assert rail.counts()["packet_switches"] == plain.counts()["packet_switches"] == expected


def test_rail_optimised_khop_size_estimate_matches_the_build():
    """The resource check's closed form counts what the builder makes (devices and links, rail or not)."""
    from fabric.catalog import load_catalog
    from topologies import resolve

    cat = load_catalog()
    for given in ({"rail_optimized": True}, {"rail_optimized": True, "nodes_per_tor": 16}, {}):
        arch_params = importlib.import_module("topologies.khop").PARAMS
        params = resolve("khop-ring", arch_params, given)
        f = build("khop-ring", 4096, given)
        est = khop_size(params, 4096, cat)
        assert est.links == len(f.links)
        assert est.devices == f.counts()["gpus"] + f.counts()["nics"] + f.counts()["packet_switches"]


def test_single_node_khop_reach_message_is_true():
    """One node: nodes-1 = 0, so the old "k=2 must be at most nodes-1 = 1" was false; k=1 still builds."""
    with pytest.raises(FabricError) as exc:
        build("khop-ring", 1, {"k": 2})
    assert exc.value.field == "params[k]" and "nodes-1" not in exc.value.message
    assert "allowed: 1" in exc.value.message
    c = build("khop-ring", 1, {"k": 1}).counts()
    assert (c["gpus"], c["nodes"], c["optical_candidate_links"]) == (4, 1, 0)
