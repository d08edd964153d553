"""One published all_reduce_perf curve (one DGX H100, 128 KiB-16 GiB) against the NCCL model, point by point.

``tests/data/nccl_allreduce_curve.json`` (NVIDIA's DGX Cloud benchmarking
recipe, the same table as the latency points of ``nccl_latency.json``).
Nothing was fitted on it.  The bandwidth end (>= 1 GiB) is held out and
asserted within 5 %: there the time is size / bus bandwidth and the NVLS
efficiency was set on a different statement (nccl-tests #212).  The
transition (128 KiB-512 MiB) is printed, not asserted: the model's
latency + size / bandwidth reaches the peak too early (README, Validation:
known gaps); the test pins the direction and size of that gap so that a
change to it is seen.
"""

import json
from pathlib import Path

from fabric.catalog import load_catalog
from fabric.sim import simulate_collective
from fabric.units import parse_bytes
from topologies import build

POINTS = json.loads((Path(__file__).parent.parent / "data" / "nccl_allreduce_curve.json").read_text())["points"]


def test_h100_allreduce_curve():
    fab = build("dgx", 8, {"gpu": "h100"}, load_catalog())
    rows, errs = [], {}
    for p in POINTS:
        size = parse_bytes(p["size"], "size")
        r = simulate_collective(fab, p["collective"], range(p["gpus"]), size, algorithm=p["algorithm"])
        e = r.time_s * 1e6 / p["time_us"] - 1
        errs[size] = e
        rows.append(f"| {int(size):,} | {p['time_us']:g} | {r.time_s * 1e6:.1f} ({r.algorithm}/{r.protocol}) | "
                    f"{100 * e:+.1f} % | {p['role']} |")
        if p["role"] == "held-out":
            assert abs(e) <= 0.05, (p["id"], e)
        else:
            assert p["role"] == "reported" and p["reason"], p["id"]
    print("\n| bytes | published us | simulated us | error | role |\n|---:|---:|---:|---:|---|\n" + "\n".join(rows))
    # the known gap: 2 MiB-512 MiB predicted fast, by at most a third, shrinking toward the bandwidth end
    mid = [errs[2**k] for k in range(21, 30)]
    assert all(-0.35 < e < 0 for e in mid) and abs(errs[2**29]) < abs(errs[2**23])
    assert sum(1 for p in POINTS if p["role"] == "held-out") == 5
    assert all(p["source"].startswith("P:") and "github.com" in p["source"] for p in POINTS)
