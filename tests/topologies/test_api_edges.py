"""Bad arguments to the Python API of the topology layer: a FabricError naming the parameter, never another exception.

Independent check: each case's expected outcome is fixed by the documented contract (a count is a whole
number > 0; numpy scalars from arrays are the numbers they hold; bool is not a count), not by the code.
"""

import numpy as np
import pytest

from fabric.catalog import load_catalog
from fabric.errors import FabricError
from topologies import build, check_build

BAD_GPUS = ["8", 8.5, True, np.array([8]), [8], float("nan"), float("inf"), float("-inf"), 0, -1, 1e308, 2**63, "abc"]


@pytest.mark.parametrize("gpus", BAD_GPUS, ids=repr)
def test_bad_gpus_is_refused_naming_gpus(gpus):
    with pytest.raises(FabricError) as exc:
        check_build("nvl-72", gpus)
    assert exc.value.field == "gpus"


@pytest.mark.parametrize("gpus", [np.int64(16), np.int32(16), np.float64(16.0), 16.0])
def test_numpy_and_integral_gpus_build_the_same_fabric(gpus):
    assert build("dgx", gpus).counts() == build("dgx", 16).counts()


@pytest.mark.parametrize("args, field", [
    ((None, 8), "ARCH"), ((3, 8), "ARCH"), (("dgx", 8, ["k=8"]), "params"), (("dgx", 8, "k=8"), "params"),
    (("dgx", 8, None, "catalog.yaml"), "catalog"),
])
def test_wrong_types_name_the_parameter(args, field):
    with pytest.raises(FabricError) as exc:
        build(*args)
    assert exc.value.field == field


@pytest.mark.parametrize("params", [{"k": np.int64(16)}, {"oversubscription": np.int64(2)},
                                    {"oversubscription": np.float64(2.0)}, {"rail_optimized": np.bool_(False)}])
def test_numpy_scalars_are_accepted_as_parameters(params):
    plain = {k: (bool(v) if isinstance(v, np.bool_) else v.item()) for k, v in params.items()}
    if "oversubscription" in plain:
        plain["oversubscription"] = float(plain["oversubscription"])
    assert build("dgx", 64, params).counts() == build("dgx", 64, plain).counts()


@pytest.mark.parametrize("arch, params, field", [
    ("khop-ring", {"oversubscription": 1e308}, "params[oversubscription]"),  # overflowed the port split
    ("dgx", {"nodes_per_rack": 2**63}, "params[nodes_per_rack]"),            # overflowed numpy's int64
    ("dgx", {"k": True}, "params[k]"),
    ("dgx", {"rail_optimized": 1}, "params[rail_optimized]"),
])
def test_out_of_range_parameters_are_refused(arch, params, field):
    with pytest.raises(FabricError) as exc:
        build(arch, 64, params, load_catalog())
    assert exc.value.field == field
