"""Bad arguments to the fabric layer's Python API (cost, checks, simulator): a FabricError naming the parameter.

Independent check: the expected outcome of each case follows from the documented contract of the argument
(a whole number >= 1, a finite number of bytes > 0, a position in ranks), and the accepted numpy scalars are
compared with the same call on Python numbers (identical results, since they hold the same value).
"""

import numpy as np
import pytest

from fabric.catalog import load_catalog
from fabric.checks import flag, is_whole, ratio, real, whole
from fabric.cost import cost_of, price_sensitivity
from fabric.errors import FabricError
from fabric.sim import Collective, Flow, bus_factor, simulator
from topologies import build

NOT_WHOLE = ["8", 8.5, None, True, np.bool_(True), np.array([8]), [8], float("nan"), float("inf"), float("-inf"),
             1e308, 2**63, "abc"]
NOT_REAL = ["0.5", None, True, np.array([0.5]), [0.5], float("nan"), float("inf"), float("-inf"), "abc"]


@pytest.mark.parametrize("value", NOT_WHOLE, ids=repr)
def test_whole_refuses_naming_the_field(value):
    with pytest.raises(FabricError) as exc:
        whole(value, "count")
    assert exc.value.field == "count"


@pytest.mark.parametrize("value", [8, np.int64(8), np.uint8(8), 8.0, np.float32(8.0)], ids=repr)
def test_whole_accepts_numbers_that_are_whole(value):
    assert whole(value, "count") == 8 and type(whole(value, "count")) is int and is_whole(value)


@pytest.mark.parametrize("value", NOT_REAL, ids=repr)
def test_real_and_ratio_refuse(value):
    with pytest.raises(FabricError):
        real(value, "x")
    with pytest.raises(FabricError):
        ratio(value, "x")


def test_flag_refuses_truthy_strings():
    assert flag(np.bool_(True), "f") is True
    with pytest.raises(FabricError):
        flag("no", "f")


@pytest.fixture(scope="module")
def report():
    return cost_of(build("khop-ring", 64), load_catalog())


@pytest.mark.parametrize("kw, field", [
    ({"swing": s}, "swing") for s in ("0.5", None, True, [0.5], float("nan"), float("inf"), 0.0, 1.0, -1.0, 1e308)
] + [({"metrics": ()}, "metrics"), ({"metrics": ("nope",)}, "metrics")])
def test_price_sensitivity_refuses(report, kw, field):
    with pytest.raises(FabricError) as exc:
        price_sensitivity(report, **kw)
    assert exc.value.field == field


def test_price_sensitivity_numpy_swing_equals_float(report):
    assert price_sensitivity(report, swing=np.float64(0.25)) == price_sensitivity(report, swing=0.25)


@pytest.mark.parametrize("args, field", [((None, load_catalog()), "fabric"), ("fab", "catalog")])
def test_cost_of_wrong_types(args, field):
    fab = build("dgx", 8)
    with pytest.raises(FabricError) as exc:
        cost_of(*((fab, None) if args == "fab" else args))
    assert exc.value.field == field


@pytest.fixture(scope="module")
def sim():
    return simulator(build("dgx", 16))


RANKS = tuple(range(8))


@pytest.mark.parametrize("kw, field", [({"size": v}, "size") for v in ("1", None, True, float("nan"), 1e308, 2**70)]
                         + [({"chunks": v}, "chunks") for v in ([8], float("nan"), float("inf"), "abc", 0)]
                         + [({"name": "broadcast", "root": v}, "root") for v in (None, True, float("nan"), "abc")]
                         + [({"channels": v}, "channels") for v in ([2], float("nan"), 8.5, 2**63)]
                         + [({"start_s": v}, "start_s") for v in ("0", None, [0.0], float("inf"))])
def test_collective_bad_fields(sim, kw, field):
    with pytest.raises(FabricError) as exc:
        sim.collectives([Collective(**{"name": "all-reduce", "ranks": RANKS, "size": 1e6, **kw})])
    assert exc.value.field == field


@pytest.mark.parametrize("kw", [{"channels": 2.0}, {"channels": np.int64(2)}, {"chunks": np.int64(4)},
                                {"size": np.int64(10**6)}])
def test_collective_numpy_fields_equal_python(sim, kw):
    plain = {k: int(v) for k, v in kw.items()}
    t = lambda k: sim.collectives([Collective(**{"name": "all-reduce", "ranks": RANKS, "size": 1e6, **k})]).time_s  # noqa: E731
    assert t(kw) == t(plain)


@pytest.mark.parametrize("count", [float("nan"), float("inf"), 1e308, 2**63])
def test_flow_count_out_of_range(sim, count):
    with pytest.raises(FabricError) as exc:
        sim.run([Flow(0, 1, 1e6, count=count)])
    assert exc.value.field == "flows[0].count"


def test_run_refuses_none(sim):
    with pytest.raises(FabricError) as exc:
        sim.run(None)
    assert exc.value.field == "flows"


@pytest.mark.parametrize("name, n, field", [("all-reduce", 0, "n"), ("all-reduce", -1, "n"), ("all-reduce", True, "n"),
                                            ("all-reduce", float("nan"), "n"), ("nope", 8, "collective")])
def test_bus_factor_refuses(name, n, field):
    with pytest.raises(FabricError) as exc:
        bus_factor(name, n)
    assert exc.value.field == field


def test_bus_factor_closed_form_with_numpy_n():
    # nccl-tests PERFORMANCE.md: all-reduce busbw = algbw x 2(n-1)/n
    assert bus_factor("all-reduce", np.int64(8)) == 2 * 7 / 8


def test_seed_is_one_check_for_every_entry_point():
    """fabric.checks.seed: a whole number >= 0 of any size (numpy seeds from any such int, so 2**70 stays
    allowed), the one message for -1, 0.5, True and "1" wherever a seed enters (fault draws, goodput timelines)."""
    from fabric.checks import seed
    from fabric.faultset import fault_set
    from fabric.faults import FaultModel

    assert seed(2**70) == 2**70 and seed(np.int64(3)) == 3 and seed(4.0) == 4
    for bad in (-1, 0.5, True, "1", None, float("nan")):
        with pytest.raises(FabricError, match=r"^seed: .* must be a whole number >= 0$"):
            seed(bad)
    fab = build("dgx", 16)
    assert fault_set(fab, FaultModel({"node": 0.5}), seed=2**70).nodes.size >= 0
    with pytest.raises(FabricError, match="^seed: "):
        fault_set(fab, FaultModel({"node": 0.5}), seed=-1)
