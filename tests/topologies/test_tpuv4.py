"""TPUv4 pods: closed-form counts (TPU v4 paper, arXiv 2304.01433: 64-chip cubes, 48 OCS per pod)."""

import math

import numpy as np
import pytest

from fabric.model import Layer, LinkState
from topologies import build


@pytest.mark.parametrize("cubes", [1, 2, 8, 65])
def test_counts(cubes):
    f = build("tpuv4", cubes * 64)
    pods = math.ceil(cubes / 64)
    c = f.counts()
    assert (c["gpus"], c["hosts"]) == (64 * cubes, 16 * cubes)
    assert c["ocs"] == 48 * pods
    hbd = f.links.layer == Layer.HBD
    optical = hbd & (f.links.state == LinkState.OCS_PORT)
    assert int(optical.sum()) == 96 * cubes == c["ocs_ports"]  # one fibre per face chip: 6 faces x 16
    assert int((hbd & ~optical).sum()) == 144 * cubes  # 3 dims x (4 x 4) lines x 3 links in a 4x4x4 mesh
    assert f.hbd.cube_gpus == 64


def test_full_pod_matches_the_paper():
    f = build("tpuv4", 4096)
    assert f.counts()["ocs"] == 48 and int((f.links.state == LinkState.OCS_PORT).sum()) == 6144
