"""DGX / HGX nodes: closed-form counts of the HBD (chips per node from the NVIDIA platform descriptions)."""

import math

import numpy as np
import pytest

from fabric.model import DeviceKind, Layer
from topologies import build

CHIPS = {"a100": 6, "h100": 4, "b200": 2}  # NVSwitch chips per 8-GPU node (topologies/dgx.py VARIANTS, sourced)


@pytest.mark.parametrize("gpu", sorted(CHIPS))
@pytest.mark.parametrize("gpus", [8, 20, 64])
def test_counts(gpu, gpus):
    f = build("dgx", gpus, {"gpu": gpu})
    n = math.ceil(gpus / 8)  # whole nodes
    c = f.counts()
    assert (c["gpus"], c["nodes"], c["nics"]) == (8 * n, n, 8 * n)
    assert c["switch_chips"] == CHIPS[gpu] * n
    # one aggregated NVLink link per GPU-chip pair, all inside the node
    hbd = np.flatnonzero(f.links.layer == Layer.HBD)
    assert hbd.size == 8 * CHIPS[gpu] * n
    node = f.group("node")
    assert np.array_equal(node[f.links.src[hbd]], node[f.links.dst[hbd]])
    assert f.hbd.kind == "switch_domain" and f.hbd.max_tp == 8 and f.hbd.domain_gpus == 8
    assert int(np.count_nonzero(f.devices.kind == DeviceKind.SWITCH_CHIP)) == c["switch_chips"]
