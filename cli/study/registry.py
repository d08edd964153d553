"""The metric registry: what a study may ask for, and how a metric is added.

Each metric a study can ask for is one entry of :data:`METRICS`: a function of a
:class:`~cli.study.context.PointContext` that returns a dict of scalars (nested
dicts are flattened with ``_``).  The shipped metrics register themselves in
:mod:`cli.study.metrics`; this module holds only the registry, so that the spec
parser, the evaluator and the metrics import it without importing each other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from cli.study.context import PointContext


@dataclass(frozen=True)
class MetricOption:
    """One option a metric accepts in the study spec (``metrics: [{noop: {sleep_s: 0.01}}]``).

    Attributes
    ----------
    type : type
        ``int``, ``float``, ``bool`` or ``str``; an int is accepted for a float.
    default : Any
    help : str
    check : callable, optional
        ``value -> error message or None``.
    """

    type: type
    default: Any
    help: str
    check: Callable[[Any], str | None] | None = None

    def parse(self, name: str, raw: Any, what: str) -> Any:
        """``raw`` (a spec value: ``"false"``, ``"4"``, ``4``) as this option's type, or a FabricError naming ``name``.

        The spec checks an option with it and the evaluator applies the same parsed value: a workload's
        ``search: "false"`` must reach the metric as ``False``, not as a truthy string.
        """
        from topologies.params import Param

        return Param(name, self.type, self.default, self.help, check=self.check).parse(raw, what)


@dataclass(frozen=True)
class MetricSpec:
    """A registered metric.

    Attributes
    ----------
    name : str
        Key in the study spec and prefix of the metric's columns.
    fn : callable
        ``PointContext -> dict`` of scalar columns (a nested dict is flattened
        with ``_``).
    help : str
    requires : tuple of str
        Inputs every point must carry, checked when the spec is validated
        (``"tp"``: the workload's tensor-parallel size; ``"node_faults"``:
        random faults, if any, fail whole nodes).
    options : dict of str to MetricOption
    fabric_only : bool
        The result depends only on the built Fabric (not on faults, seed or
        workload), so it is computed once per Fabric in a batch.
    check : callable, optional
        ``(design, workload, field) -> None``: raises
        :class:`~fabric.errors.FabricError` naming ``field`` when the metric
        cannot evaluate that workload on that design (e.g. a TP size its HBD
        refuses); called when the spec is validated, before any work.
        ``design`` is the spec's record (``architecture``, ``gpus``, ``given``, ``label``).
    options_check : callable, optional
        ``(options, field) -> None``: raises :class:`~fabric.errors.FabricError`
        naming ``field.option`` when a combination of the metric's options is
        refused (each option alone passed its own check); called when the spec is read.
    """

    name: str
    fn: Callable[["PointContext"], dict[str, Any]]
    help: str
    requires: tuple[str, ...] = ()
    options: dict[str, MetricOption] = field(default_factory=dict)
    fabric_only: bool = False
    check: Callable[[dict[str, Any], Any, str], None] | None = None
    options_check: Callable[[dict[str, Any], str], None] | None = None


@dataclass(frozen=True)
class MetricRequest:
    """A metric as a study asks for it: its name and validated options (sorted pairs)."""

    name: str
    options: tuple[tuple[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "options": dict(self.options)}


METRICS: dict[str, MetricSpec] = {}
"""Metric name -> :class:`MetricSpec`; fill it with :func:`register_metric`."""

def register_metric(name: str, *, help: str, requires: tuple[str, ...] = (),
                    options: dict[str, MetricOption] | None = None, fabric_only: bool = False,
                    check: Callable[[dict[str, Any], Any, str], None] | None = None,
                    options_check: Callable[[dict[str, Any], str], None] | None = None):
    """Decorator that adds a metric function to :data:`METRICS`.

    Parameters
    ----------
    name : str
        Metric name (lower case, ``[a-z0-9_]``); also the column prefix.
    help : str
        One line shown in errors and docs.
    requires : tuple of str
        Point inputs the metric needs (``"tp"``, ``"node_faults"``).
    options : dict of str to MetricOption, optional
        Options a study may set for this metric.
    fabric_only : bool
        Result depends only on the Fabric; computed once per Fabric per batch.
    check : callable, optional
        Validates each design x workload when the spec is read (:attr:`MetricSpec.check`).
    options_check : callable, optional
        Validates a combination of options when the spec is read (:attr:`MetricSpec.options_check`).

    Returns
    -------
    callable
        The decorator; it returns the function unchanged.

    Examples
    --------
    >>> @register_metric("doctest_gpus", help="GPU count", fabric_only=True)
    ... def _gpus(ctx):
    ...     return {"n": ctx.fabric.n_gpus}
    >>> METRICS["doctest_gpus"].fabric_only
    True
    >>> del METRICS["doctest_gpus"]
    """
    if not name.replace("_", "").isalnum() or name != name.lower():
        raise ValueError(f"metric name {name!r} must be lower case letters, digits and _")

    def deco(fn):
        if name in METRICS:
            raise ValueError(f"metric {name!r} is registered twice")
        METRICS[name] = MetricSpec(name, fn, help, tuple(requires), dict(options or {}), fabric_only, check,
                                   options_check)
        return fn

    return deco

