"""Closed-form size of a fabric from its parameters, checked against the resource limits before building.

Every family exposes ``size(params, gpus, catalog) -> Size``: the GPUs,
devices and links its builder would make, counted with the same closed forms
its docstring gives (no array is allocated).  :func:`check_size` refuses a
request over :mod:`fabric.limits` and names the ``-p`` parameter (or
``--gpus``) that made it large, so that ``-p cubes=1000000000`` is refused at
once instead of after minutes of allocation and a ``MemoryError``.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from fabric import limits
from fabric.errors import FabricError
from topologies.clos import aggs_per_pod, clos_shape, split_ports


#: False while :func:`check_size` estimates a size for the resource limits: a Clos that its radix cannot
#: hold is then counted as asked (so that ``-p cubes=1e9`` meets the limits, naming ``-p cubes``), and
#: refused by the second, strict pass only when the limits let it through.
_STRICT_CLOS: contextvars.ContextVar[bool] = contextvars.ContextVar("strict_clos", default=True)


@contextlib.contextmanager
def _clos_strictness(strict: bool):
    """:data:`_STRICT_CLOS` set to ``strict`` for the ``with`` block."""
    token = _STRICT_CLOS.set(strict)
    try:
        yield
    finally:
        _STRICT_CLOS.reset(token)


@dataclass(frozen=True)
class Size:
    """Estimated size of a fabric (counts may be fractional: they are estimates).

    Attributes
    ----------
    gpus, devices, links : float
        GPUs, devices (GPUs included) and links (candidates included).
    drivers : tuple of str
        The ``-p`` parameters that set the size (``gpus`` for ``--gpus``), most direct first: the first
        one the user gave is blamed in errors.
    """

    gpus: float
    devices: float
    links: float
    drivers: tuple[str, ...] = ()


def clos_size(endpoints: float, k: int, params: dict, endpoints_per_tor: float | None = None,
              ocs_core: bool = False, ocs_ports: float = 136.0, radix_param: str = "k") -> tuple[float, float]:
    """Devices and links (switches and their links, endpoints excluded) of :func:`topologies.clos.attach_clos`.

    Parameters
    ----------
    endpoints : float
        NICs (or hosts) on the Clos.
    k : int
        Switch radix in ports.
    params : dict
        The resolved DCN parameters (``tiers``, ``oversubscription``, ``agg_oversubscription``).
    endpoints_per_tor : float, optional
        Endpoints per ToR (default: the ToR's downlinks).
    ocs_core, ocs_ports : bool, float
        Aggregation-core links through OCS of ``ocs_ports`` ports (``rfabric``).
    radix_param : str
        The family's name of the radix parameter, named when ``k`` cannot hold the endpoints
        (:func:`topologies.clos.clos_shape`, the builder's own check, refuses before anything is built).

    Returns
    -------
    devices, links : float
        Spine and core counts use the lower bound ``ceil(lower x uplinks / k)``
        of :func:`topologies.clos.even_spine_count` (the links are exact).
    """
    tors, tiers, pods = clos_shape(endpoints, k, params, endpoints_per_tor, ocs_core, radix_param,
                                   strict=_STRICT_CLOS.get())
    d, u = split_ports(k, params["oversubscription"])
    if tiers == 2:
        spines = math.ceil(tors * u / k) if tors > 1 else 0
        return tors + spines, endpoints + (tors * u if tors > 1 else 0)
    da, ua = split_ports(k, params["agg_oversubscription"])
    a = aggs_per_pod(tors, u, da)  # core planes too
    tors = pods * da if tors > da else tors
    agg_core = pods * a * ua
    devices = tors + pods * a + a * math.ceil(pods * ua / k)
    links = endpoints + tors * u + agg_core
    if ocs_core:
        devices += a * math.ceil(pods * ua / max(ocs_ports // 2, 1))  # per core plane, ports // 2 pairs an OCS
        links += agg_core
    return devices, links


def dcn_size(catalog, params: dict, endpoints: float, port_bandwidth: float, **clos_kw) -> tuple[float, float]:
    """:func:`clos_size` at the radix the builder uses: ``-p k``, else switch bandwidth / port bandwidth."""
    from topologies.clos import default_radix

    k = params["k"] or default_radix(catalog, params["switch"], port_bandwidth)
    return clos_size(endpoints, k, params, **clos_kw)


def servers_size(gpus: float, hbd_devices: float, hbd_links: float, drivers: Iterable[str]) -> Size:
    """GPUs with one NIC each (a PCIe link per pair) plus the HBD's and the DCN's devices and links.

    Parameters
    ----------
    gpus : float
    hbd_devices, hbd_links : float
        Everything else the family builds (switch chips, the Clos, ...) and its links.
    drivers : iterable of str
        See :class:`Size`.
    """
    return Size(gpus, 2 * gpus + hbd_devices, gpus + hbd_links, tuple(drivers))


def check_size(size_of: Callable[[dict, int | None], Size], resolved: dict[str, Any], defaults: dict[str, Any],
               given: dict[str, Any], gpus: int | None) -> None:
    """Refuse a build whose closed-form size is over the limits in force, naming the input that made it large.

    Parameters
    ----------
    size_of : callable
        ``(params, gpus) -> Size`` of the family.
    resolved : dict
        The resolved ``-p`` parameters.
    defaults : dict
        Each parameter's default (to find which given one made the fabric large).
    given : dict
        The ``-p`` parameters the user (or an alias) gave.
    gpus : int, optional
        ``--gpus``.
    """
    try:
        with _clos_strictness(False):
            _check(size_of(resolved, gpus))
    except FabricError as exc:
        field = _blame(size_of, resolved, defaults, given, gpus)
        raise FabricError(field, exc.message) from None
    try:  # within the limits: a Clos its radix cannot hold is refused now, not after the GPUs are allocated
        size_of(resolved, gpus)
    except FabricError as exc:
        field = _blame(size_of, resolved, defaults, given, gpus, strict=True) if exc.field == "gpus" else exc.field
        raise FabricError(field, exc.message) from None


def _check(size: Size) -> None:
    what = "estimated from the parameters before building"
    limits.check("gpus", size.gpus, "params", what)
    limits.check_fabric_size(size.devices, size.links, "params", what)


def _blame(size_of, resolved: dict, defaults: dict, given: dict, gpus: int | None, strict: bool = False) -> str:
    """The first driver the user gave whose default would fit (``-p k=1e9`` with ``--gpus 64``: ``-p k``).

    ``strict``: fit the Clos radix too (:func:`topologies.clos.clos_shape`), not only the limits.
    """
    with _clos_strictness(False):
        drivers = size_of(resolved, gpus).drivers
    asked = [n for n in drivers if (n == "gpus" and gpus is not None) or (n != "gpus" and n in given)]
    for name in asked:
        trial = (resolved, None) if name == "gpus" else ({**resolved, name: defaults.get(name)}, gpus)
        try:
            with _clos_strictness(strict):
                _check(size_of(*trial))
        except FabricError:
            continue
        return _field(name)
    # a size from defaults alone is still refused (a lowered --limit): blame the first input given
    return _field(asked[0]) if asked else "params"


def _field(name: str) -> str:
    return "gpus" if name == "gpus" else f"params[{name}]"
