"""Properties every generator must satisfy, for random parameters (hypothesis).

GPU count covers the request (rounded up to whole units), every link is a
full-duplex link between two different devices with positive capacity, the
active graph connects all GPUs, and ports are unique per device.
"""

import numpy as np
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.sparse.csgraph import connected_components

from topologies import build


def check_fabric(f, gpus_asked):
    assert f.n_gpus >= gpus_asked
    L = f.links
    assert np.all(L.src != L.dst)
    assert np.all(L.capacity > 0) and np.all(L.latency >= 0)
    # ports: unique per device, 0..deg-1
    ends = np.concatenate([L.src, L.dst])
    ports = np.concatenate([L.src_port, L.dst_port])
    key = ends * (ports.max() + 1 if ports.size else 1) + ports
    assert np.unique(key).size == key.size
    deg = np.bincount(ends, minlength=f.n_devices)
    assert np.all(np.bincount(ends, weights=ports, minlength=f.n_devices) == deg * (deg - 1) / 2)
    # the active graph connects every GPU (links are duplex: an undirected graph)
    A = f.active_links()
    n = f.n_devices
    adj = sp.coo_matrix((np.ones(len(A)), (A.src, A.dst)), shape=(n, n))
    _, label = connected_components(adj, directed=False)
    assert np.unique(label[f.gpu_ids]).size == 1
    # groupings: every GPU has a node and a ToR
    assert np.all(f.group("node")[f.gpu_ids] >= 0)
    if f.architecture != "custom":
        assert np.all(f.group("tor")[f.gpu_ids] >= 0)


settings_ = settings(max_examples=12, deadline=None)


@settings_
@given(gpus=st.integers(1, 3000), gpu=st.sampled_from(["a100", "h100", "b200"]), rail=st.booleans(),
       o=st.sampled_from([1.0, 2.0, 3.0]))
def test_dgx(gpus, gpu, rail, o):
    check_fabric(build("dgx", gpus, {"gpu": gpu, "rail_optimized": rail, "oversubscription": o}), gpus)


@settings_
@given(gpus=st.integers(1, 2000), size=st.sampled_from([36, 72, 576]))
def test_nvl(gpus, size):
    check_fabric(build("nvl", gpus, {"size": size}), gpus)


@settings_
@given(gpus=st.integers(1, 9000))
def test_tpuv4(gpus):
    check_fabric(build("tpuv4", gpus), gpus)


@settings_
@given(gpus=st.integers(2, 3000), k=st.integers(1, 4), g=st.sampled_from([1, 2, 4, 8]), closed=st.booleans(),
       wiring=st.sampled_from(["contiguous", "interleaved"]), trx=st.sampled_from([2, 4]))
def test_khop(gpus, k, g, closed, wiring, trx):
    n_nodes = -(-gpus // g)
    k = min(k, max(1, n_nodes - 1))  # the reach ends at the last node (nodes-1 at most)
    if closed and n_nodes < 2:
        closed = False
    check_fabric(build("khop-ring", gpus, {"k": k, "gpus_per_node": g, "closed": closed, "tor_wiring": wiring,
                                           "trx_per_gpu": trx}), gpus)


@settings_
@given(gpus=st.integers(8, 3000), wrap=st.booleans())
def test_torus(gpus, wrap):
    check_fabric(build("torus", gpus, {"wrap": wrap}), gpus)


@settings_
@given(gpus=st.integers(1, 5000), k=st.sampled_from([8, 16, 32]), tiers=st.sampled_from(["auto", "3"]))
def test_fat_tree(gpus, k, tiers):
    if gpus > k ** 3 // 4:
        gpus = k ** 3 // 4
    check_fabric(build("fat-tree", gpus, {"k": k, "tiers": tiers}), gpus)


@settings_
@given(gpus=st.integers(8, 3000), k=st.sampled_from([8, 16, 32]))
def test_rfabric(gpus, k):
    gpus = min(gpus, k ** 3 // 4)
    check_fabric(build("rfabric", gpus, {"k": k}), gpus)
