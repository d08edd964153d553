"""Resource limits: refuse a request whose cheap estimate would exhaust the machine.

Every edge (CLI, viewer server, sweep spec validation) checks its request
against these limits *before* allocating, and refuses with a
:class:`~fabric.errors.FabricError` that gives the estimate and how to raise
the limit (``fabric --limit NAME=N COMMAND ...`` or the ``FABRIC_LIMITS``
environment variable, e.g. ``FABRIC_LIMITS=links=50000000,memory=64GB``).

The defaults fit a laptop with 8 GB of RAM: a Fabric costs about 300 bytes per
device and per link (measured: ``dgx --gpus 131072``, 1.05 M links and
0.35 M devices, 310 MB resident), so 8 M links stay near 3 GB.
"""

from __future__ import annotations

import contextvars
import math
import os
from dataclasses import dataclass, fields, replace
from typing import Iterator

from fabric.errors import FabricError, LimitError

#: Bytes per device or link of a built Fabric (measured, see the module docstring).
BYTES_PER_ELEMENT = 300


@dataclass(frozen=True)
class Limits:
    """Largest request the tool accepts without ``--limit``.

    Attributes
    ----------
    gpus : int
        GPUs of one fabric.
    devices : int
        Devices of one fabric (GPUs, NICs, switches, OCS).
    links : int
        Links of one fabric, candidates included.
    flows : int
        Flows of one simulation: about 250 B each resident (an all-to-all among
        2,816 ranks, 7.9 M flows, 1.9 GB), so 8 M fit the laptop; at 4 M the
        issue's all-to-all among 2,048 ranks (4.19 M flows) was refused.
    samples : int
        Monte Carlo samples of one fault study.
    memory : int
        Bytes of the largest estimated array set (devices and links x 300 B,
        samples x (nodes + fault draws) x 8 B, :func:`fabric.faults.check_sampling_size`).
    """

    gpus: int = 1 << 20
    devices: int = 4_000_000
    links: int = 8_000_000
    flows: int = 8_000_000
    samples: int = 1_000_000
    memory: int = 4 << 30

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


_current: contextvars.ContextVar[Limits | None] = contextvars.ContextVar("fabric_limits", default=None)


def _parse_count(name: str, text: str, field: str = "--limit") -> int:
    """An integer count, or a size like ``64GB`` for ``memory``."""
    text = str(text).strip()
    if name == "memory":
        from fabric.units import parse_bytes

        try:
            value = parse_bytes(text, field)
        except FabricError as exc:  # its message names the text, not which limit it was for
            raise FabricError(field, f"memory: {exc.message}") from None
    else:
        try:  # ASCII only: float() reads other scripts' digits ('\u0661\u0660\u0660' was 100)
            value = float(text.replace("_", "")) if text.isascii() else float("nan")
        except ValueError:
            value = float("nan")
    if not math.isfinite(value) or value < 1 or value != int(value):
        raise FabricError(field, f"{name}={text!r} must be a whole number >= 1")
    return int(value)


def parse_limits(pairs: list[str] | str, base: Limits | None = None, field: str = "--limit") -> Limits:
    """``["links=5e7", "memory=64GB"]`` (or one comma-separated string) over ``base``."""
    if isinstance(pairs, str):
        pairs = pairs.split(",") if pairs.strip() else []
        if any(not p.strip() for p in pairs):  # "memory=1GB,," was read as one pair in silence; lists are strict
            raise FabricError(field, f"{','.join(pairs)!r} has an empty item; give NAME=N pairs separated by commas")
    out = base or Limits()
    given: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = str(pair).partition("=")
        name = name.strip()
        if not sep or name not in Limits.names():
            raise FabricError(field, f"{pair!r} must be NAME=N with NAME one of {', '.join(Limits.names())}")
        if name in given:  # the last one won in silence, as -p k=2 -p k=3 would have
            raise FabricError(field, f"{name} given twice ({given[name].strip()} and {value.strip()}); give it once")
        given[name] = value
        out = replace(out, **{name: _parse_count(name, value, field)})
    return out


def current() -> Limits:
    """The limits in force: ``use`` ones, else ``FABRIC_LIMITS`` over the defaults."""
    lim = _current.get()
    if lim is None:
        lim = parse_limits(os.environ.get("FABRIC_LIMITS", ""), field="FABRIC_LIMITS")
    return lim


def set_limits(limits: Limits) -> contextvars.Token:
    """Put ``limits`` in force (for this context); returns the token to reset."""
    return _current.set(limits)


def reset(token: contextvars.Token) -> None:
    _current.reset(token)


def check(name: str, estimate: float, field: str, what: str = "") -> None:
    """Refuse ``estimate`` of resource ``name`` above its limit, naming ``field``.

    Parameters
    ----------
    name : str
        A :class:`Limits` attribute.
    estimate : float
        The estimated amount (count, or bytes for ``memory``).
    field : str
        The input to blame (a CLI flag, ``file:field``).
    what : str
        How the estimate was made, shown in the message.
    """
    limit = getattr(current(), name)
    if not (estimate <= limit):  # also refuses NaN
        shown = _fmt(name, estimate)
        how = f" ({what})" if what else ""
        raise LimitError(field, f"needs about {shown} {name}{how}, over the limit of {_fmt(name, limit)}; "
                                f"raise it with `fabric --limit {name}=N ...` if the machine has room")


def check_memory_per(count: float, unit: str, per_bytes: int, field: str, what: str) -> None:
    """Refuse ``count`` ``unit`` (GPUs, ranks) at a measured ``per_bytes`` each above the ``memory`` limit.

    The message reads ``524,288 GPUs x ~24 KiB each`` followed by ``what`` (how the figure was measured, or
    what holds the memory), so every per-unit estimate is stated the same way.
    """
    check("memory", float(count) * per_bytes, field, f"{int(count):,} {unit} x ~{per_bytes >> 10} KiB each {what}")


def check_fabric_size(devices: float, links: float, field: str, what: str = "") -> None:
    """Check devices, links and their memory (``BYTES_PER_ELEMENT`` each)."""
    check("devices", devices, field, what)
    check("links", links, field, what)
    check("memory", (devices + links) * BYTES_PER_ELEMENT, field, what)


def _fmt(name: str, value: float) -> str:
    if name == "memory":
        return f"{value / 2**30:.3g} GiB"
    if not math.isfinite(value):
        return str(value)
    if value >= 1e15:  # 1e308 GPUs: a 309-digit count says less than its exponent
        return f"{value:.3g}"
    return f"{value:,.0f}"


def iter_limits() -> Iterator[tuple[str, int]]:
    lim = current()
    for name in Limits.names():
        yield name, getattr(lim, name)
