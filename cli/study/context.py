"""What a metric sees of one design point: the point, its Fabric (built once per batch) and shared results.

The Fabric of a point is built lazily, on the first metric that asks for
``ctx.fabric``, and cached for the rest of the batch: points that differ only
in fault model, seed or workload reuse it (batches keep such points together).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

from cli.study.point import DesignPoint
from cli.study.registry import MetricRequest
from fabric.catalog import Catalog
from fabric.errors import FabricError
from fabric.model import Fabric
from topologies import build


class TopologyError(Exception):
    """The point's Fabric could not be built (its row says ``topology: <why>``)."""


class FabricCache:
    """Fabrics built so far in one batch, and results of ``fabric_only`` metrics, by fabric key.

    Holds at most ``size`` Fabrics (least recently used dropped first): batches
    keep the points of one Fabric together, so one or two suffice and memory
    stays bounded for 100k-GPU fabrics.
    """

    def __init__(self, catalog: Catalog, size: int = 2):
        self.catalog = catalog
        self.size = size
        self.builds = 0
        self._entries: OrderedDict[tuple, dict[str, Any]] = OrderedDict()

    def entry(self, point: DesignPoint) -> dict[str, Any]:
        key = point.fabric_key
        if key in self._entries:
            self._entries.move_to_end(key)
            return self._entries[key]
        entry: dict[str, Any] = {"fabric": None, "metrics": {}, "memo": {}}
        self._entries[key] = entry
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)
        return entry

    def fabric(self, point: DesignPoint) -> Fabric:
        entry = self.entry(point)
        if entry["fabric"] is None:
            self.builds += 1
            try:
                entry["fabric"] = build(point.architecture, point.gpus, dict(point.given), self.catalog)
            except Exception as exc:
                # the same inputs fail the same way: remember it rather than rebuild for every seed
                entry["fabric"] = TopologyError(one_line(exc))
        if isinstance(entry["fabric"], TopologyError):
            raise entry["fabric"]
        return entry["fabric"]


class PointContext:
    """What a metric function sees for one design point.

    Attributes
    ----------
    point : DesignPoint
        The inputs (architecture, params, gpus, workload, fault model, seed).
    catalog : Catalog
    options : dict
        The options the study set for the metric being evaluated (defaults filled).
    requests : tuple of MetricRequest
        Every metric the study asks for (a shared intermediate, like the fault
        draw, follows the options of the metric that owns it).
    """

    def __init__(self, point: DesignPoint, catalog: Catalog, cache: FabricCache | None = None,
                 requests: tuple[MetricRequest, ...] = ()):
        self.point = point
        self.catalog = catalog
        self.requests = tuple(requests)
        self.options: dict[str, Any] = {}
        self._cache = cache or FabricCache(catalog)
        self._memo: dict[Any, Any] = {}

    @property
    def fabric(self) -> Fabric:
        """The built Fabric (built on first use, shared by the points of a batch)."""
        return self._cache.fabric(self.point)

    def memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Compute an intermediate once per point and share it between metrics.

        ``faults`` and ``orchestrator`` share the point's fault draw this way
        (:func:`point_faults`).
        """
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def fabric_memo(self, key: Any, compute: Callable[[], Any]) -> Any:
        """Compute something that depends only on the Fabric (and ``key``) once per batch.

        ``key`` must hold every other input it depends on (e.g. the TP size).
        """
        memo = self._cache.entry(self.point)["memo"]
        if key not in memo:
            memo[key] = compute()
        return memo[key]



def one_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message; prefixed with its type unless it is a :class:`FabricError`."""
    text = str(exc).strip().splitlines()
    msg = text[0] if text else ""
    return msg if isinstance(exc, FabricError) else f"{type(exc).__name__}: {msg}"

