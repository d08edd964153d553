"""Bad arguments to the fault-study API (faults_summary, waste_table): a FabricError naming the parameter.

Independent check: the contract of each argument (a ratio in [0, 1], a whole number of samples >= 1, a seed
>= 0, a trace covering at least its own servers); numpy inputs are compared with the same Python values.
"""

import numpy as np
import pytest

from fabric.errors import FabricError
from solvers.allocation.summary import faults_summary, waste_table
from topologies import build

BASE = dict(node_fault_ratio=0.05, samples=10, blast=False)


@pytest.fixture(scope="module")
def fab():
    return build("khop-ring", 64)


@pytest.mark.parametrize("kw, field", [({"node_fault_ratio": v}, "node_fault_ratio")
                                       for v in ("0.5", True, np.array([[0.1]]), "abc", [0.1, None])]
                         + [({"samples": v}, "samples") for v in (None, [8], float("nan"), float("inf"), "abc")]
                         + [({"seed": v}, "seed") for v in (None, [1], float("nan"), float("-inf"), "abc")])
def test_faults_summary_refuses(fab, kw, field):
    with pytest.raises(FabricError) as exc:
        faults_summary(fab, 8, **{**BASE, **kw})
    assert exc.value.field == field


@pytest.mark.parametrize("servers", [[300], float("nan"), float("inf"), 1e308, 2**63, "abc", np.array([300])])
def test_trace_servers_refused_before_any_array(fab, servers):
    with pytest.raises(FabricError) as exc:
        faults_summary(fab, 8, trace="stepfun", trace_servers=servers, blast=False)
    assert exc.value.field == "n_servers"  # the CLI names it --trace-servers (cli.flags.RENAMED)


def test_numpy_inputs_give_the_python_result(fab):
    a = faults_summary(fab, np.int64(8), node_fault_ratio=np.float64(0.05), samples=np.int64(10), seed=np.int64(3),
                       blast=False)
    b = faults_summary(fab, 8, node_fault_ratio=0.05, samples=10, seed=3, blast=False)
    assert a["waste_ratio"] == b["waste_ratio"]
    curve = faults_summary(fab, 8, node_fault_ratio=np.array([0.0, 0.05]), samples=10, blast=False)["curve"]
    assert [r["node_fault_ratio"] for r in curve] == [0.0, 0.05]


@pytest.mark.parametrize("ratios", [0.1, "0.1", [None], [np.array([0.1])], ["abc"]], ids=repr)
def test_waste_table_refuses_bad_ratios(fab, ratios):
    with pytest.raises(FabricError) as exc:
        waste_table([("a", fab, (8,))], ratios, samples=5, trace=None)
    assert exc.value.field in ("ratios", "node_fault_ratio")


@pytest.mark.parametrize("samples", [None, [8], float("nan"), "abc"])
def test_waste_table_refuses_bad_samples(fab, samples):
    with pytest.raises(FabricError) as exc:
        waste_table([("a", fab, (8,))], [0.01], samples=samples, trace=None)
    assert exc.value.field == "samples"
