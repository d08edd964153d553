"""The component catalog: price, power and bandwidth of each part, each with its source.

The catalog ships as ``fabric/data/catalog.yaml``.  A user's file passed with
``--catalog FILE`` is merged over it: a component id in the user's file
replaces the named fields of the shipped entry (or adds a new component).

Every quantity is ``{value, source}``; ``source`` cites FIGURES.md or starts
with ``assumed``.  Values are parsed to SI floats by :mod:`fabric.units` from the
field name: ``price_usd`` (USD), ``power_w`` (W), ``*bandwidth`` (bytes/s per
direction), ``*latency`` / ``*_time`` (s), ``*_flops`` (FLOP/s), ``*_bytes``
(bytes), ``ports`` / ``chips`` (counts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import yaml

from fabric.checks import shown, whole
from fabric.errors import FabricError
from fabric.units import parse_bandwidth, parse_bytes, parse_flops, parse_money, parse_power, parse_time

CATEGORIES = (
    "gpu", "server", "switch_chip", "switch_tray", "ocs", "transceiver", "ocs_transceiver",
    "fiber", "cable", "nic", "switch", "constant",
)


def _parse_count(value, field: str) -> float:
    # checks.whole refuses NaN, infinities (.inf, 1e309) and integers past float range before any int()/float()
    # conversion raises: those escaped as ValueError / OverflowError tracebacks
    return float(whole(value, field, lo=0))


def _parse_factor(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise FabricError(field, f"{shown(value)} must be a number in (0, 1]")
    return float(value)


#: The fields a component may have besides ``category`` and ``description``: those the shipped catalog
#: defines and the code reads.  A field outside this list is a misspelling (``pricee_usd``) that would
#: otherwise be ignored while the shipped value it meant to override stays in force.
FIELDS = (
    "price_usd", "power_w", "bandwidth", "hbd_bandwidth", "nic_bandwidth", "hbm_bandwidth", "hbm_bytes",
    "peak_bf16_flops", "peak_fp8_flops", "latency", "reconfiguration_time", "ports", "chips",
    "one_node_bandwidth", "two_nodes_bandwidth", "more_nodes_bandwidth", "simple_latency", "ll_latency",
    "ll128_latency", "simple_factor", "ll_factor", "ll128_factor", "network_factor", "nvlink_factor",
    "nvls_factor", "pcie_factor", "sharp_factor", "simple_bytes", "ll_bytes", "ll128_bytes", "channels",
)

#: The catalog format this version reads (the ``schema:`` key of a catalog file).
SCHEMA = 1
#: Largest value of any catalog field: far above any price, power, rate or size, far below float overflow
#: when multiplied by a bill of materials' counts.
MAX_VALUE = 1e30
#: Smallest rate, size or count a catalog may give (1 byte/s, 1 FLOP/s, 1 byte, 1 port): far below any part,
#: and far from the float underflow and overflow that times divided by a rate of 1e-300 reach.
MIN_RATE = 1.0


def _parser_for(name: str) -> Callable[[Any, str], float]:
    if name.endswith("_usd"):
        return parse_money
    if name.endswith("_w"):
        return parse_power
    if name.endswith("bandwidth"):
        return parse_bandwidth
    if name.endswith("latency") or name.endswith("_time"):
        return parse_time
    if name.endswith("_flops"):
        return parse_flops
    if name.endswith("_bytes"):
        return parse_bytes
    if name in ("ports", "chips", "channels"):
        return _parse_count
    if name.endswith("_factor"):
        return _parse_factor
    raise FabricError(name, "unknown catalog field; allowed: price_usd, power_w, *bandwidth, *latency, *_time, "
                            "*_flops, *_bytes, *_factor, ports, chips")


@dataclass(frozen=True)
class Component:
    """One catalog entry with SI values and a source string per value."""

    id: str
    category: str
    description: str
    values: dict[str, float] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


class Catalog:
    """Parsed catalog: components and constants by id.

    Use :func:`load_catalog` to get one.
    """

    def __init__(self, components: dict[str, Component], origin: str = "shipped"):
        self.components = components
        self.origin = origin

    def get(self, item: str) -> Component:
        try:
            return self.components[item]
        except KeyError:
            raise FabricError("catalog", f"no component {item!r}; known ids: {', '.join(sorted(self.components))}")

    def __contains__(self, item: str) -> bool:
        return item in self.components

    def value(self, item: str, name: str) -> float:
        """SI value of field ``name`` of component ``item``."""
        comp = self.get(item)
        if name not in comp.values:
            raise FabricError(f"catalog.{item}.{name}", "missing; the catalog entry must define it")
        return comp.values[name]

    def source(self, item: str, name: str) -> str:
        return self.get(item).sources.get(name, "")

    def category(self, item: str) -> str:
        return self.get(item).category

    def ids(self, category: str) -> list[str]:
        return sorted(i for i, c in self.components.items() if c.category == category)

    def find_by_bandwidth(self, category: str, bandwidth: float, field_name: str = "bandwidth") -> str:
        """The component of ``category`` whose ``bandwidth`` equals ``bandwidth`` (bytes/s)."""
        for item in self.ids(category):
            comp = self.components[item]
            if abs(comp.values.get(field_name, -1.0) - bandwidth) <= 1e-9 * bandwidth:
                return item
        raise FabricError("catalog", f"no {category} with {field_name} {bandwidth * 8 / 1e9:g} Gbps; "
                                       f"add one or change the {field_name} that asks for it")

    def to_dict(self) -> dict[str, Any]:
        return {
            i: {"category": c.category, "description": c.description,
                **{k: {"value": v, "source": c.sources[k]} for k, v in c.values.items()}}
            for i, c in sorted(self.components.items())
        }


def _parse_entry(item: str, raw: Any, where: str, base: Component | None) -> Component:
    if not isinstance(raw, dict):
        raise FabricError(f"{where}:{item}", "must be a mapping of fields")
    category = raw.get("category", base.category if base else None)
    if not isinstance(category, str) or category not in CATEGORIES:
        raise FabricError(f"{where}:{item}.category",
                          f"{shown(category)} not allowed; use one of {', '.join(CATEGORIES)}")
    if base is not None and category != base.category:
        # an override keeps the shipped fields (a GPU's FLOP/s on a "switch"), and the architectures that pick
        # the item by id then failed far away, blaming -p gpu: a part of another kind needs an id of its own
        raise FabricError(f"{where}:{item}.category", f"{shown(category)}: {item} is a {base.category}; an override "
                                                     f"keeps its category (give a new id for a {category})")
    description = raw.get("description", base.description if base else "")
    if not isinstance(description, str):
        raise FabricError(f"{where}:{item}.description", f"{shown(description)} must be a string")
    values = dict(base.values) if base else {}
    sources = dict(base.sources) if base else {}
    for name, q in raw.items():
        if name in ("category", "description"):
            continue
        fname = f"{where}:{item}.{name}"
        if name not in FIELDS:
            raise FabricError(fname, f"unknown component field; allowed: category, description, {', '.join(FIELDS)}")
        if not isinstance(q, dict) or set(q) != {"value", "source"}:
            raise FabricError(fname, "must be {value: ..., source: ...}")
        source = q["source"]
        if not isinstance(source, str) or not source.strip():
            raise FabricError(f"{fname}.source", "must cite FIGURES.md or start with 'assumed'")
        try:
            parser = _parser_for(name)
        except FabricError as exc:
            raise FabricError(fname, exc.message) from None
        values[name] = parser(q["value"], f"{fname}.value")
        if not values[name] <= MAX_VALUE:  # a sum over a BOM of 1e308-dollar parts overflows to inf
            raise FabricError(f"{fname}.value", f"{shown(q['value'])} must be at most {MAX_VALUE:g}")
        if _must_be_positive(name) and not values[name] >= MIN_RATE:
            # a rate, a memory size or a port count of zero divides what is computed from it (0 B of HBM
            # fits no model, an OCS of 0 ports holds no circuit), and one of 1e-300 overflows what is divided
            # by it (a time of 1e300 s, then inf and NaN); prices, power and latencies may be 0
            raise FabricError(f"{fname}.value", f"{shown(q['value'])} must be >= {MIN_RATE:g} "
                                                f"({_SI_UNIT.get(_unit_kind(name), 'a whole number')})")
        if category == "ocs" and name == "ports" and values[name] < 2:
            # a circuit joins two ports: an OCS of 1 port holds none (rfabric's agg-core wiring raised IndexError)
            raise FabricError(f"{fname}.value", f"{shown(q['value'])} must be >= 2 (an OCS circuit joins two ports)")
        sources[name] = source.strip()
    return Component(item, category, str(description), values, sources)


def _must_be_positive(name: str) -> bool:
    return name.endswith(("bandwidth", "_flops", "_bytes")) or name in ("ports", "chips")


def _unit_kind(name: str) -> str:
    return next((k for k in ("bandwidth", "_flops", "_bytes") if name.endswith(k)), "")


_SI_UNIT = {"bandwidth": "bytes/s, 8 bps", "_flops": "FLOP/s", "_bytes": "bytes"}


def _parse_document(doc: Any, where: str, base: dict[str, Component] | None) -> dict[str, Component]:
    if not isinstance(doc, dict):
        raise FabricError(where, "must be a YAML mapping with 'components' (and optionally 'constants')")
    unknown = set(doc) - {"schema", "components", "constants"}
    if unknown:
        raise FabricError(f"{where}:{sorted(unknown)[0]}", "unknown top-level key; allowed: schema, components, constants")
    schema = doc.get("schema", SCHEMA)
    if isinstance(schema, bool) or schema != SCHEMA:  # True == 1 in Python: `schema: true` was read as 1
        raise FabricError(f"{where}:schema", f"{shown(doc['schema'])} not allowed; this version reads schema {SCHEMA}")
    out = dict(base or {})
    for section in ("components", "constants"):
        entries = doc.get(section)
        entries = {} if entries is None else entries
        if not isinstance(entries, dict):
            raise FabricError(f"{where}:{section}", "must be a mapping of id -> entry")
        for item, raw in entries.items():
            if not isinstance(item, str):
                # `1:` and `'1':` were both filed as "1", the later replacing the earlier in silence; `~:` as "None"
                raise FabricError(f"{where}:{section}",
                                  f"id {item!r} is not a string; ids are names (quote a number: '1')")
            if section == "constants" and isinstance(raw, dict) and "category" not in raw:
                raw = {"category": "constant", **raw}
            out[item] = _parse_entry(item, raw, where, out.get(item))
    return out


_SHIPPED: dict[str, Component] | None = None


def shipped_catalog_path():
    return resources.files("fabric") / "data" / "catalog.yaml"


def load_catalog(path: str | Path | None = None, flag: str = "--catalog") -> Catalog:
    """Load the shipped catalog, merged with a user's file if given.

    Parameters
    ----------
    path : str or Path, optional
        A YAML file in the catalog format; its entries override the shipped ones
        field by field.
    flag : str
        The input that gave ``path``, named in errors before the file (empty: the file alone).

    Raises
    ------
    FabricError
        If the file is missing or malformed (the message names the entry and field).
    """
    global _SHIPPED
    if _SHIPPED is None:
        text = shipped_catalog_path().read_text()
        # libyaml's loader where PyYAML has it (the same documents, several times faster: start-up time)
        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        _SHIPPED = _parse_document(yaml.load(text, Loader=loader), "catalog.yaml", None)
    if path is None:
        return Catalog(dict(_SHIPPED))
    from fabric.files import load_yaml

    p = Path(path)
    doc = load_yaml(p, "catalog")
    # errors name the flag as well as the file: "--catalog mine.yaml:gpu_h100.hbm_bytes.value: ..."
    return Catalog(_parse_document(doc, f"{flag} {p.name}".strip(), _SHIPPED), origin=str(p))
