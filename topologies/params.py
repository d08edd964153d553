"""Typed, documented parameters for topology generators (``-p name=value``).

Each family declares its parameters as :class:`Param` entries; :func:`resolve`
turns the user's strings into typed values, fills defaults and rejects unknown
names or bad values with a :class:`~fabric.errors.FabricError` naming the field.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from fabric.errors import FabricError
from fabric.params import Param

__all__ = ["Param", "at_least", "positive", "even_at_least", "parse_assignments", "resolve"]


def at_least(lo: float, what: str = "") -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"must be >= {lo:g}{what}"


def positive(v) -> str | None:
    return None if v > 0 else "must be > 0"


def even_at_least(lo: int) -> Callable[[Any], str | None]:
    return lambda v: None if (v >= lo and v % 2 == 0) else f"must be an even number >= {lo}"


def parse_assignments(pairs: Sequence[str]) -> dict[str, str]:
    """Split ``["k=8", "tiers=3"]`` into a dict; reject malformed items and a name given twice.

    A repeated name is refused rather than "last wins": ``-p k=128 -p k=64`` is
    more likely a mistake than a deliberate override.
    """
    out: dict[str, str] = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise FabricError("params", f"{item!r} must look like name=value")
        if name in out:
            raise FabricError(f"params[{name}]", f"given twice ({out[name]!r} and {value.strip()!r}); give it once")
        out[name] = value.strip()
    return out


def resolve(arch: str, specs: Sequence[Param], given: dict[str, Any]) -> dict[str, Any]:
    """Typed parameters: defaults overridden by ``given`` (strings or values)."""
    by_name = {p.name: p for p in specs}
    for name in given:
        if name not in by_name:
            allowed = ", ".join(sorted(by_name)) or "none"
            raise FabricError(f"params[{name}]", f"unknown parameter for {arch}; allowed: {allowed}")
    out = {}
    for p in specs:
        out[p.name] = p.parse(given[p.name], arch) if p.name in given else p.default
    return out
