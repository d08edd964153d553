"""OCS circuit assignment: ILP = brute force on small pod counts, closed forms, the re-wiring rule, realisation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fabric.errors import FabricError
from solvers.circuits import (Assignment, PodPorts, assign_circuits, assignment_of, brute_force_assignment, configuration_for,
                              fill_idle_ports, ocs_layout, pod_transfer_time, predicted_time, should_rewire)
from topologies import build


def _random_instance(rng, max_pods=4, max_ports=3, max_core=3):
    P = int(rng.integers(2, max_pods + 1))
    U = rng.integers(1, max_ports + 1, size=P)
    C = int(rng.integers(0, max_core + 1))
    D = rng.integers(0, 5, size=(P, P)).astype(float) * 1e9
    D[rng.random((P, P)) < 0.4] = 0.0
    np.fill_diagonal(D, 0.0)
    return D, PodPorts(U, C, 1, 1e9)


@pytest.mark.parametrize("seed", range(24))
def test_ilp_equals_brute_force(seed):
    D, ports = _random_instance(np.random.default_rng(seed))
    r = assign_circuits(D, ports, fill=False)
    _, t = brute_force_assignment(D, ports)
    if np.isinf(t):
        assert np.isinf(r.time_s)
    else:
        assert r.status in ("optimal", "trivial")
        assert r.time_s == pytest.approx(t, rel=1e-7)
        # the assignment respects the port budgets
        a = r.assignment
        assert np.array_equal(a.direct, a.direct.T) and np.all(np.diag(a.direct) == 0)
        assert np.all(a.direct.sum(axis=1) + a.core <= ports.ports)
        assert a.core.sum() <= ports.core_ports


@pytest.mark.parametrize("seed", range(10))
def test_fill_never_slower_and_keeps_budgets(seed):
    D, ports = _random_instance(np.random.default_rng(100 + seed))
    r = assign_circuits(D, ports, fill=False)
    a = fill_idle_ports(D, r.assignment, ports)
    assert predicted_time(D, a, ports) <= r.time_s * (1 + 1e-12)
    assert np.all(a.direct.sum(axis=1) + a.core <= ports.ports) and a.core.sum() <= ports.core_ports


def test_closed_forms():
    # 8 GB from pod 0 to pod 1 over 4 direct circuits of 1 GB/s in each of 2 planes: 8 / (4 x 2) = 1 s
    D = np.array([[0.0, 8e9], [0.0, 0.0]])
    ports = PodPorts(np.array([4, 4]), 0, 2, 1e9)
    r = assign_circuits(D, ports)
    assert r.status == "optimal" and r.time_s == pytest.approx(1.0)
    assert r.assignment.direct[0, 1] == 4
    # through a non-blocking core the pod's egress is the hose: 8 GB / (3 core circuits x 1 GB/s)
    a = Assignment(np.zeros((2, 2), dtype=int), np.array([3, 4]))
    assert predicted_time(D, a, PodPorts(np.array([4, 4]), 8, 1, 1e9)) == pytest.approx(8 / 3)
    # a pair with no direct circuit and no core circuit at one end has no route
    assert np.isinf(pod_transfer_time(D, np.zeros((2, 2)), np.array([1.0, 0.0])))
    assert pod_transfer_time(np.zeros((2, 2)), np.zeros((2, 2)), np.zeros(2)) == 0.0


def test_full_core_is_never_beaten():
    """With core ports for every uplink the hose dominates any direct assignment: the optimum is all-core."""
    rng = np.random.default_rng(7)
    D = rng.random((4, 4)) * 1e9
    ports = PodPorts(np.array([3, 3, 3, 3]), 12, 1, 1e9)
    r = assign_circuits(D, ports)
    hose = predicted_time(D, Assignment(np.zeros((4, 4), dtype=int), np.full(4, 3)), ports)
    assert r.time_s == pytest.approx(hose)


def test_no_core_and_too_many_partners_is_infeasible():
    D = np.ones((4, 4)) * 1e9
    r = assign_circuits(D, PodPorts(np.array([2, 2, 2, 2]), 0, 1, 1e9))
    assert r.status == "infeasible" and np.isinf(r.time_s) and "3 pods" in r.notes[0]


def test_trivial_and_bad_demand():
    r = assign_circuits(np.zeros((3, 3)), PodPorts(np.array([1, 1, 1]), 0, 1, 1e9))
    assert r.status == "trivial" and r.time_s == 0.0
    with pytest.raises(FabricError, match="demand"):
        assign_circuits(np.zeros((2, 2)), PodPorts(np.array([1, 1, 1]), 0, 1, 1e9))
    with pytest.raises(FabricError, match=">= 0"):
        assign_circuits(-np.ones((2, 2)), PodPorts(np.array([1, 1]), 0, 1, 1e9))


# ------------------------------------------------------------------------------------------- the rule
@settings(max_examples=100, deadline=None)
@given(t_new=st.floats(0, 100), extra=st.floats(0, 1), rt=st.floats(0, 1), settle=st.floats(0, 0.1))
def test_rule_never_rewires_when_gain_is_below_reconfiguration_time(t_new, extra, rt, settle):
    t_cur = t_new + extra
    gain = t_cur - t_new  # the gain as the rule sees it (after rounding)
    if gain <= rt:
        assert not should_rewire(t_cur, t_new, rt, settle)
    if gain > rt + settle + 1e-9 * max(t_cur, 1.0):
        assert should_rewire(t_cur, t_new, rt, settle)


def test_rule_edges():
    assert should_rewire(float("inf"), 1.0, 0.2)  # the circuits in place cannot carry the phase
    assert not should_rewire(float("inf"), float("inf"), 0.2)
    assert not should_rewire(1.0, 1.0, 0.0)  # no gain, no re-wiring even for a free OCS


# ------------------------------------------------------------------------------------------- on a Fabric
@pytest.mark.parametrize("core_ratio", [0.0, 0.5])
def test_realise_on_rfabric(core_ratio):
    f = build("rfabric", 256, {"k": 16, "core_ratio": core_ratio})
    layout = ocs_layout(f)
    ports = layout.ports
    assert ports.pods == 4 and ports.planes == 8 and np.all(ports.ports == 8)
    assert ports.core_ports == int(round(core_ratio * 8)) * 4
    # the default circuits: a round-robin mesh (and the core share), all ports used
    a0 = assignment_of(f)
    assert np.all(a0.direct.sum(axis=1) + a0.core == ports.ports)
    D = np.zeros((4, 4))
    D[0, 2] = D[1, 3] = 4e11
    r = assign_circuits(D, ports)
    cfg, realised = configuration_for(f, r.assignment, layout)
    assert realised == r.assignment
    f2 = f.with_configuration(cfg)  # validates: ports used once, circuits inside one OCS
    assert assignment_of(f2) == r.assignment


def test_layout_needs_ocs():
    with pytest.raises(FabricError, match="no OCS"):
        ocs_layout(build("dgx", 64, {"k": 16, "tiers": "3"}))
