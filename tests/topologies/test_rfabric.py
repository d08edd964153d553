"""RFabric: the OCS core holds every aggregation uplink; default circuits reproduce the static fat-tree."""

import numpy as np
import pytest

from fabric.model import DeviceKind, Layer, LinkState
from topologies import build


@pytest.mark.parametrize("gpus", [64, 256])
def test_ocs_ports_and_circuits(gpus):
    f = build("rfabric", gpus)
    c = f.counts()
    assert c["nodes"] == gpus // 8 and c["nics"] == gpus
    port = np.flatnonzero(f.links.state == LinkState.OCS_PORT)
    kind = f.devices.kind
    far = np.where(kind[f.links.src[port]] == DeviceKind.OCS, f.links.dst[port], f.links.src[port])
    n_agg = int(np.count_nonzero(kind[far] == DeviceKind.AGG))
    n_core = int(np.count_nonzero(kind[far] == DeviceKind.CORE))
    assert n_agg == n_core == len(f.configuration.circuits)  # core_ratio 1: one core port per uplink
    assert c["ocs_ports"] == 2 * n_agg
    assert f.has_ocs_ports(Layer.DCN) and not f.has_ocs_ports(Layer.HBD)


def test_tpuv4_has_an_hbd_ocs_not_a_dcn_one():
    f = build("tpuv4", 128)
    assert f.has_ocs_ports(Layer.HBD) and not f.has_ocs_ports(Layer.DCN)
