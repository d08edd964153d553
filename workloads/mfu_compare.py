"""Best-configuration MFU of models on several architectures: the seeds' comparison, as rows and a table.

``workloads`` does not import ``topologies`` (DESIGN's layers), so the caller
passes the builder::

    from topologies import build
    from workloads.mfu_compare import format_mfu_comparison, mfu_comparison

    print(format_mfu_comparison(mfu_comparison(build, ["llama3-70b"], [576], comm="analytic")))
"""

from __future__ import annotations

from typing import Callable, Optional

from fabric.catalog import Catalog, load_catalog
from fabric.model import Fabric
from workloads.mfu import mfu_summary

# The seeds' comparison: the same B200-class GPU (bf16 2.25 PFLOP/s, 180 GB, 400G NIC) behind three HBDs.
SEED_ARCHITECTURES = [
    ("dgx-b200 (HBD 8)", "dgx", {"gpu": "b200"}),
    ("nvl-72 (HBD 72)", "nvl", {"size": 72, "gpu": "gpu_b200"}),
    ("khop-ring k=2 (HBD line)", "khop-ring", {"k": 2, "gpu": "gpu_b200"}),
]


def mfu_comparison(build: Callable[..., Fabric], models, scales, entries=SEED_ARCHITECTURES, *,
                   catalog: Catalog | None = None, comm: str = "sim", seq_len: Optional[int] = None, global_batch: Optional[int] = None,
                   confirm: int = 3) -> list[dict]:
    """Best-configuration MFU of each model at each scale on each architecture (one row each).

    Every architecture is searched (:func:`workloads.search.search`), so each
    is compared at its own best parallelism, on the same GPU and global batch.

    Parameters
    ----------
    build : callable
        ``build(architecture, gpus, params, catalog) -> Fabric``: :func:`topologies.build`
        (passed in: workloads does not import topologies).
    models : sequence of str
        Model presets or files.
    scales : sequence of int
        GPU counts.
    entries : sequence of (label, architecture, params)
        The architectures to compare (default: :data:`SEED_ARCHITECTURES`).
    """
    cat = catalog or load_catalog()
    rows = []
    for model in models:
        for gpus in scales:
            for label, arch, params in entries:
                fab = build(arch, gpus, params, cat)
                d = mfu_summary(fab, model, catalog=cat, search=True, comm=comm, seq_len=seq_len,
                                global_batch=global_batch, confirm=confirm)
                rows.append({"model": d["model"], "seq_len": d["model_spec"]["seq_len"], "gpus": gpus,
                             "label": label, "architecture": arch, "config": d["config"], "mfu": d["mfu"],
                             "cluster_mfu": d["cluster_mfu"], "step_time_s": d["step_time_s"],
                             "gpus_used": d["gpus_used"], "memory_gb_per_gpu": d["memory_gb_per_gpu"],
                             "breakdown_s": d["breakdown_s"], "search_s": d["search"]["seconds"],
                             "comm_backend": d["comm_backend"]})
    for r in rows:  # MFU relative to the DGX row of the same model and scale
        ref = next((x for x in rows if x["model"] == r["model"] and x["gpus"] == r["gpus"]
                    and x["architecture"] == "dgx"), None)
        r["vs_dgx"] = r["cluster_mfu"] / ref["cluster_mfu"] if ref else None
    return rows


def format_mfu_comparison(rows: list[dict]) -> str:
    """Markdown table of :func:`mfu_comparison` rows, with the exposed-time shares."""
    out = ["| model | seq | GPUs | architecture | best configuration | MFU | MFU (all GPUs) | vs DGX | compute | "
           "TP | CP | EP | PP | bubble | DP |",
           "|---|---:|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        b, t = r["breakdown_s"], r["step_time_s"]
        share = [f"{100 * b.get(k, 0) / t:.0f} %" for k in ("compute", "tp", "cp", "ep", "pp", "bubble", "dp")]
        out.append(f"| {r['model']} | {r['seq_len']:,} | {r['gpus']:,} | {r['label']} | {r['config']} | "
                   f"{100 * r['mfu']:.1f} % | {100 * r['cluster_mfu']:.1f} % | {r['vs_dgx']:.2f}x | "
                   + " | ".join(share) + " |")
    return "\n".join(out)
