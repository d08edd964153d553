"""Topology generators, one module per architecture family.

Each family module exposes ``PARAMS`` (a list of :class:`topologies.params.Param`)
and ``build(params, gpus, catalog) -> Fabric``.  :func:`build` is the one entry
point: it resolves names and aliases (``nvl-72`` is ``nvl`` with ``size=72``),
validates parameters and GPU count, and calls the family.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fabric.catalog import Catalog, load_catalog
from fabric import limits
from fabric.checks import is_whole
from fabric.errors import FabricError
from fabric.model import Fabric
from topologies.clos import split_ports  # noqa: F401  (the port split the RL comparison reads)
from topologies.params import Param, resolve
from topologies.size import Size, check_size  # noqa: F401  (Size: the type of Architecture.size)


@dataclass(frozen=True)
class Architecture:
    name: str
    summary: str
    module: str

    def _mod(self):
        import importlib

        return importlib.import_module(f"topologies.{self.module}")

    @property
    def params(self) -> list[Param]:
        return list(self._mod().PARAMS)

    @property
    def size(self) -> Callable[[dict, int | None, Catalog], "Size"]:
        """Closed-form size of a build from its resolved parameters (see :mod:`topologies.size`)."""
        return self._mod().size

    @property
    def builder(self) -> Callable[[dict, int | None, Catalog], Fabric]:
        return self._mod().build


ARCHITECTURES: dict[str, Architecture] = {a.name: a for a in [
    Architecture("fat-tree", "k-ary fat-tree / leaf-spine of 1-GPU hosts (the DCN under every HBD)", "fattree"),
    Architecture("dgx", "8-GPU NVSwitch nodes (DGX/HGX A100, H100, H800, B200), one NIC per GPU", "dgx"),
    Architecture("nvl", "NVLink switch racks: NVL-36, NVL-72, NVL-576 (GB200)", "nvl"),
    Architecture("tpuv4", "TPUv4-style 4x4x4 cubes joined by OCS (48 OCS per 64 cubes)", "tpuv4"),
    Architecture("khop-ring", "InfiniteHBD k-hop ring of OCS transceivers on a line of nodes", "khop"),
    Architecture("torus", "GPU-centric 2D/3D torus or mesh (TPUv3-, Dojo-like)", "torus"),
    Architecture("rfabric", "fat-tree whose aggregation-core links pass through OCS (re-wirable)", "rfabric"),
]}

# The reference comparison (InfiniteHBD's set plus NVL variants and a torus): label -> (architecture, params).
REFERENCE_ARCHITECTURES: list[tuple[str, str, dict[str, Any]]] = [
    ("dgx-h100", "dgx", {"gpu": "h100"}),
    ("nvl-36", "nvl", {"size": 36}),
    ("nvl-72", "nvl", {"size": 72}),
    ("nvl-576", "nvl", {"size": 576}),
    ("tpuv4", "tpuv4", {}),
    ("khop-ring k=2", "khop-ring", {"k": 2}),
    ("khop-ring k=3", "khop-ring", {"k": 3}),
    ("torus 2D", "torus", {}),
]

ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "nvl-36": ("nvl", {"size": 36}),
    "nvl-72": ("nvl", {"size": 72}),
    "nvl-576": ("nvl", {"size": 576}),
    "khop": ("khop-ring", {}),
    "fattree": ("fat-tree", {}),
}


def resolve_architecture(name: str) -> tuple[Architecture, dict[str, Any]]:
    """Architecture and alias parameters for a user-given name."""
    base, preset = ALIASES.get(name, (name, {}))
    if base not in ARCHITECTURES:
        allowed = ", ".join(list(ARCHITECTURES) + list(ALIASES))
        raise FabricError("ARCH", f"unknown architecture {name!r}; allowed: {allowed}")
    return ARCHITECTURES[base], dict(preset)


def param_names(name: str) -> frozenset[str]:
    """The ``-p`` parameter names of architecture (or alias) ``name``.

    Examples
    --------
    >>> sorted(param_names("nvl-72"))[:3]
    ['agg_oversubscription', 'gpu', 'k']
    """
    return frozenset(p.name for p in resolve_architecture(name)[0].params)


def build(name: str, gpus: int | None = None, params: dict[str, Any] | None = None,
          catalog: Catalog | None = None) -> Fabric:
    """Build a Fabric for architecture ``name``.

    Parameters
    ----------
    name : str
        An architecture or alias (see ``fabric list``).
    gpus : int, optional
        GPU count; rounded up to whole units of the family (nodes, racks,
        cubes, pods), reported in ``Fabric.notes``.
    params : dict, optional
        ``-p`` parameters (strings or typed values).
    catalog : Catalog, optional
        Defaults to the shipped catalog.

    Examples
    --------
    >>> f = build("nvl-72", gpus=72)
    >>> f.counts()["switch_chips"]
    18
    """
    arch, resolved, catalog = check_build(name, gpus, params, catalog)
    return arch.builder(resolved, None if gpus is None else int(gpus), catalog)


def check_build(name: str, gpus: int | None = None, params: dict[str, Any] | None = None,
                catalog: Catalog | None = None) -> tuple[Architecture, dict[str, Any], Catalog]:
    """Everything :func:`build` refuses before it allocates anything, without building.

    The name, ``gpus``, the parameters, the catalog ids they name, and the closed-form size
    (:mod:`topologies.size`) against the resource limits; microseconds, so callers that only need to
    know whether a build would be refused for its size call this instead of building a probe.

    Returns
    -------
    (Architecture, dict, Catalog)
        The architecture, its resolved parameters and the catalog, as :func:`build` then uses them.
    """
    if not isinstance(name, str):
        raise FabricError("ARCH", f"{name!r} must be an architecture name (a string; see `fabric list`)")
    arch, preset = resolve_architecture(name)
    if gpus is not None and not (is_whole(gpus) and gpus > 0):
        raise FabricError("gpus", f"{gpus!r} must be a whole number > 0")
    if gpus is not None:
        limits.check("gpus", gpus, "gpus")  # 1e308 GPUs: refused here, before any size arithmetic overflows
        gpus = int(gpus)
    if params is not None and not isinstance(params, Mapping):
        raise FabricError("params", f"must be a mapping of parameter name to value, not {type(params).__name__}")
    if catalog is not None and not isinstance(catalog, Catalog):
        raise FabricError("catalog", f"must be a Catalog (fabric.catalog.load_catalog), not {type(catalog).__name__}")
    for key in preset:
        if key in (params or {}):  # `nvl-72 -p size=36` built an NVL-36 under the name nvl-72, as the study spec refuses
            raise FabricError(f"params[{key}]", f"set to {preset[key]!r} by the alias {name!r}; use {arch.name!r} "
                                                f"with -p {key}=... to vary it")
    given = {**preset, **(params or {})}
    resolved = resolve(arch.name, arch.params, given)
    catalog = catalog or load_catalog()
    _check_catalog_ids(arch, resolved, catalog)
    # before any array exists: a parameter that asks for billions of devices is refused at once, naming it
    check_size(lambda ps, n: arch.size(ps, n, catalog), resolved, {p.name: p.default for p in arch.params}, given,
               None if gpus is None else int(gpus))
    return arch, resolved, catalog


def build_summary(fab: Fabric) -> dict:
    """The JSON object of ``fabric build``: architecture, GPUs, params, HBD, counts, inventory, notes."""
    return {
        "architecture": fab.architecture,
        "gpus": fab.n_gpus,
        "params": fab.params,
        "hbd": fab.hbd.to_dict(),
        "counts": fab.counts(),
        "inventory": fab.inventory(),
        "notes": list(fab.notes),
    }


def _check_catalog_ids(arch: "Architecture", resolved: dict[str, Any], catalog: Catalog) -> None:
    """A parameter that names a catalog entry ("catalog id of ...") must name one of its default's category.

    Checked here so that the error names ``-p NAME`` (the builder's own lookup can only blame the catalog).
    """
    for p in arch.params:
        value = resolved.get(p.name)
        if not p.help.startswith("catalog id") or not isinstance(value, str) or p.default not in catalog:
            continue
        category = catalog.get(p.default).category
        if value not in catalog or catalog.get(value).category != category:
            same = sorted(k for k, c in catalog.components.items() if c.category == category)
            raise FabricError(f"params[{p.name}]", f"{value!r} is not among the catalog's {category} entries "
                                              f"(for {arch.name}); use one of {', '.join(same)}")
