"""GPU-centric torus / mesh: links per dimension counted against the closed forms G*len(dims), sum G(1-1/d)."""

import numpy as np
import pytest

from fabric.model import Layer
from topologies import build


@pytest.mark.parametrize("dims", ["8x8", "4x4x4", "16x4"])
@pytest.mark.parametrize("wrap", [True, False])
def test_links(dims, wrap):
    shape = [int(d) for d in dims.split("x")]
    f = build("torus", None, {"dims": dims, "wrap": wrap})
    G = int(np.prod(shape))
    hbd = int((f.links.layer == Layer.HBD).sum())
    expected = G * len(shape) if wrap else sum(G - G // d for d in shape)
    assert f.n_gpus == G and hbd == expected
    assert f.hbd.domain_gpus == G and f.hbd.closed == wrap
