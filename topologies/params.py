"""Typed, documented parameters for topology generators (``-p name=value``).

Each family declares its parameters as :class:`Param` entries; :func:`resolve`
turns the user's strings into typed values, fills defaults and rejects unknown
names or bad values with a :class:`~fabric.errors.FabricError` naming the field.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from fabric.errors import FabricError


@dataclass(frozen=True)
class Param:
    """One generator parameter.

    Attributes
    ----------
    name : str
    type : type
        ``int``, ``float``, ``bool`` or ``str``.
    default : Any
        ``None`` means "derived from other inputs" (said in ``help``).
    help : str
        Meaning and unit; ``assumed`` where the default has no public source.
    choices : tuple, optional
        Allowed values.
    check : callable, optional
        ``value -> error message or None`` for range checks.
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple = ()
    check: Callable[[Any], str | None] | None = None

    def parse(self, raw: Any, arch: str) -> Any:
        field = f"-p {self.name}"
        value = raw
        if isinstance(raw, str):
            text = raw.strip()
            try:
                if self.type is bool:
                    low = text.lower()
                    if low not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError
                    value = low in ("true", "1", "yes")
                elif self.type is int:
                    value = int(text)
                elif self.type is float:
                    value = float(text)
                else:
                    value = text
            except ValueError:
                raise FabricError(field, f"{raw!r} is not a {self.type.__name__} (for {arch})") from None
        elif self.type is float and isinstance(raw, int) and not isinstance(raw, bool):
            value = float(raw)
        elif not isinstance(raw, self.type) or (self.type is int and isinstance(raw, bool)):
            raise FabricError(field, f"{raw!r} is not a {self.type.__name__} (for {arch})")
        if self.choices and value not in self.choices:
            raise FabricError(field, f"{value!r} not allowed for {arch}; use one of {', '.join(map(str, self.choices))}")
        if self.check is not None:
            msg = self.check(value)
            if msg:
                raise FabricError(field, msg)
        return value

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "type": self.type.__name__, "default": self.default, "help": self.help}
        if self.choices:
            out["choices"] = list(self.choices)
        return out


def at_least(lo: float, what: str = "") -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"must be >= {lo:g}{what}"


def positive(v) -> str | None:
    return None if v > 0 else "must be > 0"


def even_at_least(lo: int) -> Callable[[Any], str | None]:
    return lambda v: None if (v >= lo and v % 2 == 0) else f"must be an even number >= {lo}"


def parse_assignments(pairs: Sequence[str]) -> dict[str, str]:
    """Split ``["k=8", "tiers=3"]`` into a dict; reject malformed items."""
    out: dict[str, str] = {}
    for item in pairs:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise FabricError("-p", f"{item!r} must look like name=value")
        out[name.strip()] = value.strip()
    return out


def resolve(arch: str, specs: Sequence[Param], given: dict[str, Any]) -> dict[str, Any]:
    """Typed parameters: defaults overridden by ``given`` (strings or values)."""
    by_name = {p.name: p for p in specs}
    for name in given:
        if name not in by_name:
            allowed = ", ".join(sorted(by_name)) or "none"
            raise FabricError(f"-p {name}", f"unknown parameter for {arch}; allowed: {allowed}")
    out = {}
    for p in specs:
        out[p.name] = p.parse(given[p.name], arch) if p.name in given else p.default
    return out
