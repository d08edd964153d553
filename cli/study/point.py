"""A design point of a study: architecture, parameters, GPUs, workload, fault scenario and seed.

The study spec (:mod:`cli.study.spec`) expands into these; the evaluator
(:mod:`cli.study.evaluator`) turns each into one row.  Both import this module,
and it imports neither: the point is the one noun they share.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from fabric.faults import FaultModel


# ---------------------------------------------------------------------------------------------- inputs
@dataclass(frozen=True)
class Workload:
    """What runs on the cluster.  ``tp`` is the tensor-parallel size (faults needs it).

    ``params`` (sorted pairs) set the options of the study's metrics that have
    them (``model`` of MFU and RL, ...), over the metric's own options; each
    must be an option of a requested metric, checked like one.
    """

    name: str = "none"
    tp: int | None = None
    params: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class FaultScenario:
    """Which devices are down: ``none``, ``random`` or ``trace`` (replayed).

    ``random``: each ``component`` (``node``, ``gpu``, ... see
    ``fabric.faults.COMPONENTS``) fails i.i.d. with probability ``ratio``, drawn from the point's seed.

    ``trace`` is the name or path as written in the spec (shown in results),
    ``path`` what the trace loader gets (a shipped name or an absolute path),
    ``sha256`` the file's content (part of the point id).
    """

    kind: str = "none"
    ratio: float | None = None
    component: str | None = None
    trace: str | None = None
    path: str | None = None
    sha256: str | None = None

    def fault_model(self, *, mode: str = "bernoulli", trace_mapping: str = "tile") -> FaultModel:
        """The :class:`fabric.faults.FaultModel` of this scenario (``none``: nothing fails)."""
        if self.kind == "trace":
            return FaultModel(trace=self.path, trace_mapping=trace_mapping)
        if self.kind == "random":
            return FaultModel({self.component or "node": self.ratio}, mode)
        return FaultModel()


@dataclass(frozen=True)
class DesignPoint:
    """One design point: architecture + parameters + GPU count + workload + fault model + seed.

    Attributes
    ----------
    point_id : str
        Stable hash of the inputs (family, resolved parameters, GPUs, workload,
        fault model, seed); equal inputs give equal ids on any machine.
    architecture : str
        The name as written in the spec (an alias like ``nvl-72`` stays).
    label : str
        Row label: the entry's label plus its grid/zip values (``khop-ring k=2``).
    gpus : int
        Requested GPU count (the Fabric may round up; see ``cost_gpus``).
    given : tuple of (str, Any)
        Parameters passed to the generator (fixed + grid + zip).
    params : tuple of (str, Any)
        All parameters with defaults filled (the ``p_`` columns).
    index : int
        Position in the study's expansion (orders tables; not part of the id).
    """

    point_id: str
    study: str
    architecture: str
    family: str
    label: str
    gpus: int
    given: tuple[tuple[str, Any], ...]
    params: tuple[tuple[str, Any], ...]
    workload: Workload = field(default_factory=Workload)
    fault: FaultScenario = field(default_factory=FaultScenario)
    seed: int = 0
    index: int = 0

    @property
    def fabric_key(self) -> tuple:
        """Inputs that decide the Fabric: points equal here share one build."""
        return (self.architecture, self.gpus, self.given)

    def input_columns(self) -> dict[str, Any]:
        """The row's input columns (``p_`` params, ``w_`` workload params)."""
        row: dict[str, Any] = {"point_id": self.point_id, "point_index": self.index, "study": self.study,
                               "architecture": self.architecture, "label": self.label, "gpus": self.gpus}
        row.update({f"p_{k}": v for k, v in self.params})
        row["workload"] = self.workload.name
        row["tp"] = self.workload.tp
        row.update({f"w_{k}": v for k, v in self.workload.params})
        row["fault_model"] = self.fault.kind
        row["fault_ratio"] = self.fault.ratio
        row["fault_component"] = self.fault.component
        row["fault_trace"] = self.fault.trace
        row["seed"] = self.seed
        return row


def point_id(family: str, params: dict[str, Any], gpus: int, workload: Workload, fault: FaultScenario,
             seed: int) -> str:
    """Stable id of a design point: 16 hex digits of SHA-256 over canonical JSON of its inputs.

    Examples
    --------
    >>> point_id("dgx", {"gpu": "h100"}, 256, Workload(), FaultScenario(), 0)
    '...'
    >>> len(point_id("dgx", {}, 256, Workload(), FaultScenario(), 0))
    16
    """
    doc = {"architecture": family, "params": params, "gpus": gpus,
           "workload": {"name": workload.name, "tp": workload.tp, "params": dict(workload.params)},
           "fault": {"model": fault.kind, "ratio": fault.ratio, "component": fault.component,
                     "trace_sha256": fault.sha256}, "seed": seed}
    text = json.dumps(doc, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
