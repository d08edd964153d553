"""Validation against measured Megatron-LM throughput (FIGURES: narayanan2021-table1.csv).

Each of the ten rows is predicted on DGX A100 nodes with a fat-tree DCN
(``topologies.build("dgx", gpus, {"gpu": "a100"})``, passed in by the caller:
workloads does not import topologies), with the row's TP, PP, DP and global
batch, full recomputation and the Megatron-LM 2021 runtime
(:data:`workloads.step.MEGATRON_2021`: unfused attention with dropout, fp16
gradients all-reduced after the pipeline flush, no distributed optimizer,
plain 1F1B).  Achieved TFLOP/s per GPU is the hardware-FLOPs formula
``96 B s l h^2 (1 + s/6h + V/16lh)`` over the predicted step time, as the
paper counts it.

Micro-batch size is not in the table; the rule used for every row is a
search over the allowed set {1, 2} (Megatron's paper used 1-2): the
predicted-fastest size that fits in 80 GB.

Calibration: only the GEMM-efficiency parameters ``eta_max`` and ``d0``
(:mod:`workloads.compute`) are fitted, by least squares on the relative
error of :data:`CALIBRATION_ROWS`; the other seven rows are held out and
judged.  :func:`leave_one_out` refits on nine rows and predicts the tenth,
for every row.  Everything else (NVLink and NIC bandwidths, latencies, HBM
bandwidth, memory-bound kernel byte counts) comes from the catalog or is
stated in the modules, not fitted.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from importlib import resources
from typing import Callable

from fabric.model import Fabric
from workloads.compute import DEFAULT_GEMM, GemmEfficiency
from workloads.models import load_model
from workloads.parallelism import Parallelism
from workloads.step import MEGATRON_2021, StepModel

CALIBRATION_ROWS = ("1.7B", "39B", "530B")
MICRO_BATCHES = (1, 2)


@dataclass(frozen=True)
class Row:
    """One row of the measured table."""

    model: str
    hidden: int
    layers: int
    heads: int
    tp: int
    pp: int
    gpus: int
    global_batch: int
    measured_tflops: float

    @property
    def preset(self) -> str:
        return "megatron-" + self.model.lower()

    @property
    def dp(self) -> int:
        return self.gpus // (self.tp * self.pp)


def rows() -> list[Row]:
    """The ten rows of ``narayanan2021-table1.csv`` (shipped beside the presets)."""
    path = resources.files("workloads") / "presets" / "narayanan2021-table1.csv"
    out = []
    for r in csv.DictReader(path.read_text().splitlines()):
        out.append(Row(r["model"], int(r["hidden"]), int(r["layers"]), int(r["heads"]), int(r["tensor_parallel"]),
                       int(r["pipeline_parallel"]), int(r["gpus"]), int(r["global_batch"]),
                       float(r["achieved_tflops_per_gpu"])))
    return out


@dataclass
class Prediction:
    row: Row
    micro_batch: int
    tflops: float
    error: float  # predicted / measured - 1
    memory_gb: float
    breakdown: dict


class Validator:
    """Step models for every row, built once (fabrics, placements and collective times are reused).

    Parameters
    ----------
    build_fabric : callable
        ``gpus -> Fabric``: DGX A100 nodes on a fat-tree DCN.
    backend : callable, optional
        Collective timing backend (default: the simulator).
    """

    def __init__(self, build_fabric: Callable[[int], Fabric], backend=None):
        self.rows = rows()
        self.models: dict[str, StepModel] = {}
        for r in self.rows:
            fab = build_fabric(r.gpus)
            self.models[r.model] = StepModel(fab, load_model(r.preset), runtime=MEGATRON_2021, backend=backend)

    def par(self, r: Row, micro_batch: int) -> Parallelism:
        return Parallelism(tp=r.tp, pp=r.pp, dp=r.dp, micro_batch=micro_batch, global_batch=r.global_batch,
                           recompute="full", distributed_optimizer=False)

    def predict(self, r: Row, gemm: GemmEfficiency = DEFAULT_GEMM) -> Prediction:
        """The row's prediction at the fastest fitting micro-batch size in {1, 2}."""
        sm = self.models[r.model].with_gemm(gemm)
        best = None
        for mb in MICRO_BATCHES:
            res = sm.evaluate(self.par(r, mb))
            if res.fits and (best is None or res.tflops_per_gpu > best.tflops_per_gpu):
                best = res
        if best is None:  # nothing fits: report micro-batch 1 anyway (flagged by memory_gb)
            best = sm.evaluate(self.par(r, 1))
        return Prediction(r, best.parallelism.micro_batch, best.tflops_per_gpu,
                          best.tflops_per_gpu / r.measured_tflops - 1, best.memory_gb_per_gpu, best.breakdown)

    def predict_all(self, gemm: GemmEfficiency = DEFAULT_GEMM) -> list[Prediction]:
        return [self.predict(r, gemm) for r in self.rows]

    def calibrate(self, names=CALIBRATION_ROWS, start: GemmEfficiency = DEFAULT_GEMM) -> GemmEfficiency:
        """Least-squares fit of ``eta_max`` and ``d0`` on the relative errors of rows ``names``."""
        from scipy.optimize import least_squares

        chosen = [r for r in self.rows if r.model in names]

        def resid(x):
            g = start.with_values(eta_max=float(x[0]), d0=float(x[1]))
            return [self.predict(r, g).error for r in chosen]

        fit = least_squares(resid, x0=[start.eta_max, start.d0], bounds=([0.2, 0.0], [1.0, 2048.0]),
                            x_scale=[0.1, 64.0], diff_step=1e-3)
        return start.with_values(eta_max=round(float(fit.x[0]), 4), d0=round(float(fit.x[1]), 1),
                                 source=f"calibrated: least squares on rows {', '.join(names)} of "
                                        "narayanan2021-table1.csv (FIGURES)")

    def leave_one_out(self) -> list[Prediction]:
        """Out-of-sample prediction of every row, calibrated on the other nine."""
        out = []
        for r in self.rows:
            g = self.calibrate(tuple(x.model for x in self.rows if x.model != r.model))
            out.append(self.predict(r, g))
        return out


def summary(preds: list[Prediction]) -> dict:
    """Mean and max absolute relative error (held-out rows only when calibration rows are present)."""
    held = [p for p in preds if p.row.model not in CALIBRATION_ROWS]
    errs = [abs(p.error) for p in held]
    return {"held_out_rows": [p.row.model for p in held], "mean_abs_error": sum(errs) / len(errs),
            "max_abs_error": max(errs)}


def table(preds: list[Prediction], loo: list[Prediction] | None = None) -> str:
    """Markdown table of the predictions (the README's validation table)."""
    cols = ["model", "TP", "PP", "GPUs", "batch", "micro-batch", "measured TFLOP/s", "predicted", "error"]
    if loo:
        cols += ["leave-one-out", "LOO error"]
    cols.append("role")
    head = "| " + " | ".join(cols) + " |"
    sep = "|---|" + "---:|" * (len(cols) - 2) + "---|"
    lines = [head, sep]
    for i, p in enumerate(preds):
        r = p.row
        role = "calibration" if r.model in CALIBRATION_ROWS else "held out"
        cells = [r.model, r.tp, r.pp, f"{r.gpus:,}", f"{r.global_batch:,}", p.micro_batch, f"{r.measured_tflops:.0f}",
                 f"{p.tflops:.1f}", f"{100 * p.error:+.1f} %"]
        if loo:
            cells += [f"{loo[i].tflops:.1f}", f"{100 * loo[i].error:+.1f} %"]
        cells.append(role)
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines)
