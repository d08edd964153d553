"""The traffic accounting, checked by hand on tiny placements."""

import numpy as np
import pytest

from solvers.orchestrator import Job, PlacedInstance, Placement, placement_traffic
from solvers.orchestrator.brute import line_from_arrays
from solvers.orchestrator.jobs import default_dp_bytes, default_pp_bytes
from solvers.orchestrator.traffic import phi


def space(tors, g=1):
    return line_from_arrays(np.ones(len(tors), bool), tors, k=2, g=g).space


def test_phi():
    assert phi(np.array([1, 2, 3, 5])).tolist() == [0, 2, 3, 5]


def test_dp_group_inside_one_tor_crosses_nothing():
    sp = space([0, 0, 0, 0])
    pl = Placement(((0, 1), (2, 3)), (PlacedInstance(0, ((0, 1),)),))
    r = placement_traffic(pl, sp, [Job(tp=2, dp=2, dp_bytes=100.0)])
    # 2 TP ranks, each an all-reduce of D = 2 members moving 2 (D - 1) S = 200 bytes
    assert r.dp_bytes == 400 and r.cross_bytes == 0 and r.ratio == 0
    assert r.tors_per_dp_group == (1,)


def test_dp_group_over_two_tors():
    sp = space([0, 0, 1, 1])
    pl = Placement(((0, 1), (2, 3)), (PlacedInstance(0, ((0, 1),)),))
    r = placement_traffic(pl, sp, [Job(tp=2, dp=2, dp_bytes=100.0)])
    # per rank: T = 2 ToRs -> 2 hops of 2 (D - 1) / D S = 100 bytes each cross
    assert r.dp_bytes == 400 and r.dp_cross_bytes == 400 and r.ratio == 1.0


def test_straddling_ring_crosses_only_on_its_mismatched_ranks():
    sp = space([0, 0, 0, 1, 1, 1], g=2)  # slot = node of 2 GPUs
    # ring (0, 1) lies under ToR 0; ring (2, 3) straddles: its ranks 0-1 under ToR 0, ranks 2-3 under ToR 1
    pl = Placement(((0, 1), (2, 3)), (PlacedInstance(0, ((0, 1),)),))
    r = placement_traffic(pl, sp, [Job(tp=4, dp=2, dp_bytes=10.0)])
    # ranks 0,1: ToRs {0, 0} -> 0; ranks 2,3: ToRs {0, 1} -> 2 hops x 10 bytes
    assert r.dp_bytes == 4 * 2 * 10 and r.dp_cross_bytes == 2 * 2 * 10
    assert r.ratio == pytest.approx(0.5)


def test_ring_order_of_a_dp_all_reduce_visits_each_tor_once():
    sp = space([0, 1, 2, 0, 1, 2])
    pl = Placement(tuple((u,) for u in range(6)), (PlacedInstance(0, ((0, 1, 2, 3, 4, 5),)),))
    r = placement_traffic(pl, sp, [Job(tp=1, dp=6, dp_bytes=6.0)])
    # D = 6 members on 3 ToRs: 3 crossing hops of 2 * 5 / 6 * 6 = 10 bytes; total 2 * 5 * 6 = 60
    assert r.dp_bytes == 60 and r.dp_cross_bytes == 30


def test_pipeline_send_recv():
    sp = space([0, 0, 1, 1])
    # 2 stages x 2 replicas; replica 0: ring 0 -> ring 2 (ToR 0 -> 1), replica 1: ring 1 -> ring 3
    pl = Placement(((0,), (1,), (2,), (3,)), (PlacedInstance(0, ((0, 1), (2, 3))),))
    r = placement_traffic(pl, sp, [Job(tp=1, dp=2, pp=2, dp_bytes=0.0, pp_bytes=7.0)])
    assert r.pp_bytes == 14 and r.pp_cross_bytes == 14
    pl = Placement(((0,), (1,), (2,), (3,)), (PlacedInstance(0, ((0, 2), (1, 3))),))
    r = placement_traffic(pl, sp, [Job(tp=1, dp=2, pp=2, dp_bytes=0.0, pp_bytes=7.0)])
    assert r.pp_cross_bytes == 0


def test_no_dcn_bytes_means_ratio_zero():
    sp = space([0, 1])
    pl = Placement(((0,), (1,)), (PlacedInstance(0, ((0,),)), PlacedInstance(0, ((1,),))))
    r = placement_traffic(pl, sp, [Job(tp=1, dp=1)])
    assert r.dcn_bytes == 0 and r.ratio == 0.0


def test_default_bytes_model():
    # GPT-3 175B: params / (TP PP) x 2 bytes; activations 2 x 4 PP micro-batches x 2048 x 12288 x 2 / TP
    assert default_dp_bytes(8, 1) == pytest.approx(175e9 / 8 * 2)
    assert default_pp_bytes(8, 2) == pytest.approx(2 * 8 * 2048 * 12288 * 2 / 8)
    j = Job(tp=8, dp=2)
    assert j.bytes_dp == default_dp_bytes(8, 1) and j.to_dict()["bytes_model"]
