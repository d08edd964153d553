"""NVLink racks: closed-form counts (NVIDIA GB200 NVL-72 user guide; NVL-576 derived in topologies/nvl.py)."""

import math

import numpy as np
import pytest

from fabric.model import Layer
from topologies import build

CHIPS_PER_DOMAIN = {36: 9, 72: 18, 576: 8 * 36 + 144}  # L1 chips (+ L2 chips for 576)


@pytest.mark.parametrize("size, gpus", [(36, 36), (72, 100), (72, 144), (576, 576)])
def test_counts(size, gpus):
    f = build("nvl", gpus, {"size": size})
    d = math.ceil(gpus / size)  # whole domains
    c = f.counts()
    assert c["gpus"] == size * d and c["nodes"] == size * d // 4  # 4-GPU compute trays
    assert c["switch_chips"] == CHIPS_PER_DOMAIN[size] * d
    gpu_links = np.isin(f.links.src, f.gpu_ids) | np.isin(f.links.dst, f.gpu_ids)
    hbd_gpu = np.flatnonzero((f.links.layer == Layer.HBD) & gpu_links)
    # 18 NVLink5 links of 50 GB/s per GPU: one per chip (NVL-72/576 L1), or two bundled per chip (NVL-36: 9 chips)
    links_per_gpu = 9 if size == 36 else 18
    assert hbd_gpu.size == links_per_gpu * size * d
    assert np.isclose(f.links.capacity[hbd_gpu].sum(), 18 * 50e9 * size * d)
    assert f.hbd.max_tp == size and f.hbd.domain_gpus == size
