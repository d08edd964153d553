"""Typed, documented ``-p name=value`` parameters, shared by every layer that takes them.

A :class:`Param` parses the user's string into a typed value and rejects a bad
one with a :class:`~fabric.errors.FabricError` that names the flag and what is
allowed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from fabric.checks import MAX_WHOLE, is_number, is_whole, numpy_scalar_types
from fabric.errors import FabricError


@dataclass(frozen=True)
class Param:
    """One typed ``-p name=value`` parameter (of a topology family, an RL iteration, ...).

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
    source : str
        Where the default comes from (FIGURES.md, a paper) or ``assumed``;
        empty where the default is not a number anyone could look up.
    """

    name: str
    type: type
    default: Any
    help: str
    choices: tuple = ()
    check: Callable[[Any], str | None] | None = None
    source: str = ""

    def parse(self, raw: Any, context: str = "") -> Any:
        """Typed value of ``raw`` (a string from the command line, or a value); ``context`` names the owner."""
        where = f" (for {context})" if context else ""
        field = f"params[{self.name}]"
        value = raw
        if isinstance(raw, str):
            text = raw.strip()
            try:
                if self.type in (int, float) and not text.isascii():
                    # int() and float() read other scripts' digits: a spec's `nodes_per_rack: '\u0664'` and
                    # `-p nodes_per_rack=\u0664` built 4 per rack, while `--gpus \u0664` was refused
                    raise ValueError(text)
                if self.type is bool:
                    low = text.lower()
                    if low not in ("true", "false", "1", "0", "yes", "no"):
                        raise ValueError
                    value = low in ("true", "1", "yes")
                elif self.type is int:
                    value = _whole_text(text)
                elif self.type is float:
                    value = float(text)
                else:
                    value = text
            except ValueError:
                raise FabricError(field, f"{raw!r} is not a {_KIND[self.type]}{where}") from None
        elif self.type is bool and isinstance(raw, numpy_scalar_types()[0]):
            value = bool(raw)
        elif self.type is int and is_whole(raw):  # a value taken from an array, or an int given as a float (2.0)
            value = int(raw)
        elif self.type is float and is_number(raw):
            value = float(raw)
        elif self.type is str and is_whole(raw) and isinstance(raw, (int, *numpy_scalar_types()[1])):
            # a whole number for a text parameter (``tiers: 3`` in a YAML spec or the API) is the text the
            # command line's ``-p tiers=3`` gives: the same design point, however it is spelt
            value = str(int(raw))
        elif not isinstance(raw, self.type) or (self.type is int and isinstance(raw, bool)):
            raise FabricError(field, f"{raw!r} is not a {_KIND[self.type]}{where}")
        if self.type is int and abs(value) > MAX_WHOLE:  # numpy's int64 arrays sized or filled from it overflow
            raise FabricError(field, f"{raw!r} must be at most {MAX_WHOLE:,} in size{where}")
        if self.type is float and not math.isfinite(value):
            # inf and nan pass every ``v >= lo`` check written for finite numbers (nan fails none of ``v <= hi``)
            raise FabricError(field, f"{raw!r} must be a finite number{where}")
        if self.choices and value not in self.choices:
            raise FabricError(field, f"{value!r} not allowed{where}; use one of {', '.join(map(str, self.choices))}")
        if self.check is not None:
            msg = self.check(value)
            if msg:
                raise FabricError(field, msg)
        return value

    def to_dict(self) -> dict[str, Any]:
        out = {"name": self.name, "type": self.type.__name__, "default": self.default, "help": self.help}
        if self.source:
            out["source"] = self.source
        if self.choices:
            out["choices"] = list(self.choices)
        return out


#: How an error names the type a parameter wants ("2.5 is not a whole number", not "is not a int").
_KIND = {int: "whole number", float: "number", bool: "boolean", str: "string"}


def _whole_text(text: str) -> int:
    """A whole number from text: ``8``, or an integral float (``8.0``, ``1e3``) as YAML, JSON and the model files
    accept it; ``2.5``, ``nan`` and ``inf`` raise ValueError."""
    try:
        return int(text)
    except ValueError:
        value = float(text)  # raises ValueError for words
        if not is_whole(value):
            raise ValueError(text) from None
        return int(value)
