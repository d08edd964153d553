"""Build 100k-GPU clusters: target < 10 s and < 4 GB each (issue: foundation)."""

import time
import tracemalloc

import pytest

from topologies import build


@pytest.mark.bench
@pytest.mark.parametrize("name, params", [("dgx", {}), ("khop-ring", {"k": 3}), ("nvl-72", {}), ("tpuv4", {})])
def test_build_100k(name, params):
    tracemalloc.start()
    t0 = time.perf_counter()
    f = build(name, 100_000, params)
    elapsed = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    c = f.counts()
    print(f"\nbuild {name} {params}: {c['gpus']:,} GPUs, {f.n_devices:,} devices, {c['links']:,} links "
          f"in {elapsed:.2f} s, peak traced memory {peak / 2**30:.2f} GiB")
    assert elapsed < 10 and peak < 4 * 2**30
