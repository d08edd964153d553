"""Evaluate design points: one row of metrics per point, and batches of points (the task a worker runs).

A *design point* is an architecture with parameters, a GPU count, a workload,
a fault model and a seed (:class:`cli.study.point.DesignPoint`).  The evaluator
asks each requested metric of the registry (:data:`cli.study.registry.METRICS`)
for its columns and prefixes every column with the metric name (``cost`` ->
``cost_capex_usd``), so metrics never collide with each other or with the input
columns.  Rows are deterministic apart from :data:`TIMING_COLUMNS`.
"""

from __future__ import annotations

import datetime as _dt
import time
from dataclasses import dataclass
from typing import Any

import fabric
from cli.study import metrics as _metrics  # noqa: F401  (registers the shipped metrics)
from cli.study.context import FabricCache, PointContext, TopologyError, one_line
from cli.study.point import DesignPoint
from cli.study.registry import METRICS, MetricRequest
from cli.study.store import SCHEMA_VERSION
from fabric.catalog import Catalog

TIMING_COLUMNS = ("evaluated_at", "eval_s")
"""The only columns that differ between two runs of the same point."""

SCALARS = (str, int, float, bool, type(None))


def _flatten(prefix: str, values: dict[str, Any], out: dict[str, Any]) -> None:
    for k, v in values.items():
        name = f"{prefix}_{k}"
        if isinstance(v, dict):
            _flatten(name, v, out)
        elif isinstance(v, SCALARS):
            out[name] = v
        elif hasattr(v, "item") and getattr(v, "ndim", 1) == 0:  # numpy scalar
            out[name] = v.item()
        else:
            raise TypeError(f"metric column {name!r} is a {type(v).__name__}, not a scalar")



def evaluate_point(point: DesignPoint, metrics: tuple[MetricRequest, ...], catalog: Catalog,
                   cache: FabricCache | None = None) -> dict[str, Any]:
    """One row: the point's input columns, each metric's columns, status and provenance.

    A metric that raises does not stop the study, nor the point's other
    metrics: its columns stay blank, the row gets ``status = "failed"`` and
    ``error = "<metric>: <message>"`` (joined by ``; `` when several failed).
    A topology that cannot be built fails every metric at once.

    Parameters
    ----------
    point : DesignPoint
    metrics : tuple of MetricRequest
    catalog : Catalog
    cache : FabricCache, optional
        Shared by the points of a batch.

    Returns
    -------
    dict
        Column name -> scalar.
    """
    t0 = time.perf_counter()
    cache = cache or FabricCache(catalog)
    ctx = PointContext(point, catalog, cache, metrics)
    row = point.input_columns()
    status, errors = "ok", []
    for req in metrics:
        spec = METRICS[req.name]
        # a workload's params set the options of the metrics that have them (validated with the spec)
        # parsed as the spec checked them: a raw "false" would be a truthy string here
        from_workload = {k: spec.options[k].parse(k, v, "workload") for k, v in point.workload.params
                         if k in spec.options}
        ctx.options = {**{k: o.default for k, o in spec.options.items()}, **dict(req.options), **from_workload}
        try:
            if spec.fabric_only:
                done = cache.entry(point)["metrics"]
                key = (req, tuple(sorted(from_workload.items())))
                if key not in done:
                    values: dict[str, Any] = {}
                    _flatten(req.name, spec.fn(ctx), values)
                    done[key] = values
                row.update(done[key])
            else:
                values = {}
                _flatten(req.name, spec.fn(ctx), values)
                row.update(values)
        except TopologyError as exc:
            status, errors = "failed", [f"topology: {exc}"]
            break
        except Exception as exc:  # one bad metric must end neither a long study nor the point's other metrics
            status = "failed"
            errors.append(f"{req.name}: {one_line(exc)}")
    row["status"] = status
    row["error"] = "; ".join(errors) if errors else None
    row["tool_version"] = fabric.__version__
    row["schema_version"] = SCHEMA_VERSION
    row["evaluated_at"] = _dt.datetime.now(_dt.timezone.utc)
    row["eval_s"] = time.perf_counter() - t0
    return row


@dataclass(frozen=True)
class Batch:
    """A unit of work sent to a process or a Dask worker: points of one architecture.

    Attributes
    ----------
    number : int
        Names the output file ``batch-<number>.parquet``.
    architecture : str
        The partition the rows go to.
    points : tuple of DesignPoint
    metrics : tuple of MetricRequest
    catalog : Catalog
        Sent along so remote workers need no catalog file.
    """

    number: int
    architecture: str
    points: tuple
    metrics: tuple[MetricRequest, ...]
    catalog: Any


def evaluate_batch(batch: Batch) -> list[dict[str, Any]]:
    """Rows for every point of ``batch``, in order (the task a worker runs)."""
    cache = FabricCache(batch.catalog)
    return [evaluate_point(p, batch.metrics, batch.catalog, cache) for p in batch.points]

