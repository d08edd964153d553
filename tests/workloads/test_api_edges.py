"""Bad arguments to the workload API (mfu_summary, goodput_summary, rl_summary): a FabricError naming the parameter.

Independent check: each expected outcome follows from the documented contract of the argument (counts are
whole numbers >= 1, switches are True/False, a configuration key is one of Parallelism's); accepted numpy
scalars must give exactly the result of the same Python numbers.
"""

import numpy as np
import pytest

import topologies
from fabric.errors import FabricError
from topologies import build
from workloads.goodput.summary import goodput_summary
from workloads.mfu import mfu_summary
from workloads.rl.compare import rl_summary

MODEL = "llama3-8b"
BASE = dict(comm="analytic", search=False, tp=8, pp=1, global_batch=512)


@pytest.fixture(scope="module")
def fab():
    return build("dgx", 64)


@pytest.mark.parametrize("kw, field", [({k: v}, k) for k in ("tp", "pp", "micro_batch", "cp")
                                       for v in ("8", [8], np.array([8]))]
                         + [({"seq_len": v}, "seq_len") for v in ("8", 8.5, float("nan"), float("inf"), 1e308)]
                         + [({"pp": 2**62}, "pp"), ({"pp": 2, "interleave": 10**9}, "interleave"),
                            ({"bogus": 3}, "bogus"), ({"sequence_parallel": "no"}, "sequence_parallel"),
                            ({"fp8": "no"}, "fp8"), ({"zero_stage": True}, "zero_stage"),
                            ({"catalog": "catalog.yaml"}, "catalog")])
def test_mfu_summary_refuses(fab, kw, field):
    with pytest.raises(FabricError) as exc:
        mfu_summary(fab, MODEL, **{**BASE, **kw})
    assert exc.value.field == field


@pytest.mark.parametrize("confirm", ["3", 0, -1, 2.5, None, float("nan"), float("inf"), [3]])
def test_search_confirm_refused(fab, confirm):
    with pytest.raises(FabricError) as exc:
        mfu_summary(fab, MODEL, comm="analytic", confirm=confirm)
    assert exc.value.field == "confirm"


def test_mfu_numpy_configuration_equals_python(fab):
    a = mfu_summary(fab, MODEL, **{**BASE, "tp": np.int64(8), "pp": np.int64(2), "global_batch": np.int64(512),
                                   "seq_len": np.int64(4096), "sequence_parallel": np.bool_(True)})
    b = mfu_summary(fab, MODEL, **{**BASE, "pp": 2, "seq_len": 4096, "sequence_parallel": True})
    assert a["mfu"] == b["mfu"] and a["step_time_s"] == b["step_time_s"]


@pytest.mark.parametrize("kw, field", [({"recovery": [1]}, "recovery"), ({"recovery": {1: 2}}, "recovery")]
                         + [({"trace_servers": v}, "n_servers") for v in (float("nan"), 2**63, 1e308, "abc")])
def test_goodput_summary_refuses(kw, field):
    fab = build("khop-ring", 64)
    with pytest.raises(FabricError) as exc:
        goodput_summary(fab, MODEL, **{**BASE, "series": False, **kw})
    assert exc.value.field == field


def test_goodput_numpy_recovery_equals_python():
    fab = build("khop-ring", 64)
    kw = {**BASE, "series": False}
    a = goodput_summary(fab, MODEL, recovery={"restart": np.int64(300)}, seed=np.int64(1), **kw)
    b = goodput_summary(fab, MODEL, recovery={"restart": 300}, seed=1, **kw)
    assert a == b


@pytest.mark.parametrize("kw, field", [({"gpus": v}, "gpus") for v in (None, [64], float("nan"), float("inf"), "abc")]
                         + [({"oversubscription": v}, "oversubscription") for v in (None, "2", [2.0])]
                         + [({"fabric": "both", "reconfig_time": v}, "reconfiguration_time")
                            for v in ("1ms", [0.001], True)]
                         + [({"params": ["k=4"]}, "params")])
def test_rl_summary_refuses(kw, field):
    base = dict(timing="analytic", fabric="static")
    gpus = kw.pop("gpus", 64)
    with pytest.raises(FabricError) as exc:
        rl_summary(topologies, gpus, MODEL, **{**base, **kw})
    assert exc.value.field == field


def test_rl_numpy_inputs_equal_python():
    kw = dict(timing="analytic", fabric="static")
    a = rl_summary(topologies, np.int64(64), MODEL, oversubscription=np.int64(2), params={"k": np.int64(16)}, **kw)
    b = rl_summary(topologies, 64, MODEL, oversubscription=2.0, params={"k": 16}, **kw)
    assert a["static"]["iteration_s"] == b["static"]["iteration_s"]
