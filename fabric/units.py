"""Parse and format human units at the edges; SI floats everywhere inside.

Inside the tool every quantity is a plain float in SI base units:
bytes, bytes/s (per direction), seconds, watts, US dollars.  This module is the
only place that knows about ``400Gbps``, ``1.8TB/s``, ``1GiB``, ``60us`` or
``$1,200``.

Conventions
-----------
* Decimal prefixes (k, M, G, T, P) are powers of 1000; binary prefixes (Ki, Mi,
  Gi, Ti) powers of 1024.
* ``b`` is a bit and ``B`` a byte: ``400Gbps`` = ``400Gb/s`` = 50e9 bytes/s.
* A bare number is taken to be already in SI base units.
"""

from __future__ import annotations

import math
import re

from fabric.errors import FabricError

# E and Ei: the byte-size flags are bounded at 1 EiB and say so ("at most 1.15e+18 (1 EiB)"); '1EiB' must read
_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0, "d": 86400.0}

# ASCII digits only, as every integer flag and file value: `\d` also matched other scripts' digits, so a
# topology capacity "٤٥٠GB/s" read as 450 GB/s and `--size ٣MiB` as 3 MiB, while `--gpus ٣` was refused
_NUMBER = r"([-+]?(?:[0-9][0-9,_]*\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)"
_QTY = re.compile(r"^\s*" + _NUMBER + r"\s*([A-Za-zµ/$]*)\s*$")


def _split(text: str, field: str, kind: str) -> tuple[float, str]:
    match = _QTY.match(text)
    if not match:
        raise FabricError(field, f"cannot read {text!r} as {kind}")
    number = float(match.group(1).replace(",", "").replace("_", ""))
    return number, match.group(2)


def _prefix(unit: str, base_units: tuple[str, ...]) -> tuple[float, str] | None:
    """Split ``unit`` into a multiplier and one of ``base_units``."""
    for base in sorted(base_units, key=len, reverse=True):
        if unit.endswith(base):
            head = unit[: -len(base)] if base else unit
            if head in _BINARY:
                return _BINARY[head], base
            if head in _DECIMAL:
                return _DECIMAL[head], base
    return None


def _shown(text) -> str:
    """``text`` as an error message quotes it: its repr, cut to 40 characters (a 400-digit integer is one line)."""
    r = repr(text)
    return r if len(r) <= 40 else r[:37] + "..."


def _finite_nonneg(value: float, field: str, text) -> float:
    if not math.isfinite(value) or value < 0:
        raise FabricError(field, f"{_shown(text)} must be a finite number >= 0")
    return value + 0.0  # -0.0 (a file's `-0.0`) passes `>= 0` and was printed as "$-0" and "release_s": -0.0


def _number(value: int | float, field: str) -> float:
    """A plain number (already in SI units) as a float; an integer beyond float range is refused, not raised."""
    try:
        as_float = float(value)
    except OverflowError:  # YAML and JSON integers are unbounded: 10**400 has no float
        raise FabricError(field, f"{_shown(value)} must be a finite number >= 0") from None
    return _finite_nonneg(as_float, field, value)


def parse_bandwidth(text: str | float | int, field: str = "bandwidth") -> float:
    """Parse a bandwidth to bytes/s.

    Parameters
    ----------
    text : str or float
        ``"400Gbps"``, ``"400Gb/s"``, ``"1.8TB/s"``, ``"900GBps"``, or a
        number already in bytes/s.
    field : str
        Name used in the error message.

    Returns
    -------
    float
        Bytes per second.

    Examples
    --------
    >>> parse_bandwidth("400Gbps")
    50000000000.0
    >>> parse_bandwidth("1.8TB/s")
    1800000000000.0
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(text, field)
    number, unit = _split(str(text), field, "a bandwidth (e.g. 400Gbps, 1.8TB/s)")
    unit = unit.replace("/s", "ps")
    split = _prefix(unit, ("bps", "Bps"))
    if split is None:
        raise FabricError(field, f"unknown bandwidth unit in {text!r}; use bps, b/s, Bps or B/s with k/M/G/T")
    mult, base = split
    per_byte = 1.0 / 8.0 if base == "bps" else 1.0
    return _finite_nonneg(number * mult * per_byte, field, text)


def parse_bytes(text: str | float | int, field: str = "size") -> float:
    """Parse a size to bytes (``1GiB``, ``512MB``, ``4KiB``, ``100``).

    Examples
    --------
    >>> parse_bytes("1GiB")
    1073741824.0
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(text, field)
    number, unit = _split(str(text), field, "a size (e.g. 1GiB, 512MB)")
    if unit == "":
        return _finite_nonneg(number, field, text)
    split = _prefix(unit, ("B",))
    if split is None:
        raise FabricError(field, f"unknown size unit in {text!r}; use B with k/M/G/T/P/E or Ki/Mi/Gi/Ti/Pi/Ei")
    return _finite_nonneg(number * split[0], field, text)


def parse_time(text: str | float | int, field: str = "time") -> float:
    """Parse a duration to seconds (``60us``, ``1.2ms``, ``3s``, ``0.5``).

    Examples
    --------
    >>> parse_time("60us")
    6e-05
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(text, field)
    number, unit = _split(str(text), field, "a duration (e.g. 60us, 1.2ms)")
    if unit == "":
        return _finite_nonneg(number, field, text)
    if unit not in _TIME:
        raise FabricError(field, f"unknown time unit in {text!r}; use one of {', '.join(_TIME)}")
    scale = _TIME[unit]
    # Divide by the inverse for sub-second units so that 60us is exactly 6e-05.
    value = number / round(1.0 / scale) if scale < 1 else number * scale
    return _finite_nonneg(value, field, text)


def parse_money(text: str | float | int, field: str = "price") -> float:
    """Parse a price in US dollars (``$1,200``, ``1.2k``, ``$2M``, ``950``).

    Examples
    --------
    >>> parse_money("$1,200")
    1200.0
    """
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(text, field)
    raw = str(text).strip()
    if raw.startswith("$"):
        raw = raw[1:]
    raw = raw.removesuffix("USD").strip()
    number, unit = _split(raw, field, "a price (e.g. $1,200)")
    if unit not in ("", "k", "K", "M"):
        raise FabricError(field, f"unknown price suffix in {text!r}; use $, k or M")
    return _finite_nonneg(number * _DECIMAL[unit], field, text)


def parse_power(text: str | float | int, field: str = "power") -> float:
    """Parse a power to watts (``9W``, ``1.2kW``, ``450``)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(text, field)
    number, unit = _split(str(text), field, "a power (e.g. 9W, 1.2kW)")
    if unit == "":
        return _finite_nonneg(number, field, text)
    split = _prefix(unit, ("W",))
    if split is None:
        raise FabricError(field, f"unknown power unit in {text!r}; use W or kW")
    return _finite_nonneg(number * split[0], field, text)


def parse_flops(text: str | float | int, field: str = "flops") -> float:
    """Parse a compute rate to FLOP/s (``989TFLOPS``, ``312e12``)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        return _number(text, field)
    number, unit = _split(str(text), field, "a FLOP rate (e.g. 989TFLOPS)")
    unit = unit.replace("FLOP/s", "FLOPS")
    split = _prefix(unit, ("FLOPS",)) if unit else (1.0, "")
    if split is None:
        raise FabricError(field, f"unknown FLOP-rate unit in {text!r}; use FLOPS with k/M/G/T/P")
    return _finite_nonneg(number * split[0], field, text)


def _scaled(value: float, steps: list[tuple[float, str]], unit: str, digits: int) -> str:
    for scale, prefix in steps:
        if abs(value) >= scale:
            return f"{value / scale:.{digits}g}{prefix}{unit}"
    return f"{value:.{digits}g}{unit}"


_DEC_STEPS = [(1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")]


def format_bandwidth(bytes_per_s: float, bits: bool = False, digits: int = 4) -> str:
    """Format bytes/s as ``1.8TB/s`` (or ``400Gbps`` with ``bits=True``)."""
    if bits:
        return _scaled(bytes_per_s * 8.0, _DEC_STEPS, "bps", digits)
    return _scaled(bytes_per_s, _DEC_STEPS, "B/s", digits)


def format_bytes(n: float, digits: int = 4) -> str:
    """Format bytes with binary prefixes (``1GiB``)."""
    steps = [(2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki")]
    return _scaled(n, steps, "B", digits)


def format_time(seconds: float, digits: int = 4) -> str:
    """Format seconds as ``60us``, ``1.2ms``, ``3s``."""
    if seconds == 0:
        return "0s"
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns")):
        if abs(seconds) >= scale:
            return f"{seconds / scale:.{digits}g}{unit}"
    return f"{seconds / 1e-9:.{digits}g}ns"


def format_money(usd: float) -> str:
    """Format dollars as ``$1,200``."""
    return f"${usd:,.0f}"
