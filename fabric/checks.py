"""Checks of the numbers a caller passes to the Python API, each refusal a :class:`FabricError` naming the parameter.

The CLI hands over Python ints and floats; a notebook hands over whatever it
has: numpy scalars taken from arrays (accepted as the numbers they are),
``True`` (not a count), strings, None, arrays, NaN and infinities (refused
here, rather than as a ``TypeError`` or ``OverflowError`` from deep inside).
"""

from __future__ import annotations

import functools
import math
import sys
from typing import Any

from fabric.errors import FabricError

#: Largest whole number a count may be: numpy's int64 holds it (2**63 does not), so arrays sized or filled
#: from it cannot overflow; every resource limit (fabric.limits) is far below it.
MAX_WHOLE = 2**62
#: Largest seed any --seed or seed parameter takes: seeds are in [0, 2**32), as numpy's RandomState requires.
MAX_SEED = 2**32 - 1


def numpy_scalar_types() -> tuple[tuple, tuple, tuple]:
    """numpy's (bool, integer, floating) scalar types; empty while numpy is not imported.

    Exact: no value can be a numpy scalar before numpy is imported.  So the CLI checks its flags, and prints
    ``--help``, without importing numpy (issue 18, start-up: numpy is about 0.15 s of it).
    """
    np = sys.modules.get("numpy")
    if np is None or not hasattr(np, "floating"):  # absent, or half way through its own import
        return (), (), ()
    return (np.bool_,), (np.integer,), (np.floating,)


def is_number(value: Any) -> bool:
    """True for a real number: int, float, numpy integer or floating scalar; False for bool, str, None, arrays."""
    bools, ints, floats = numpy_scalar_types()
    if isinstance(value, (bool, *bools)):
        return False
    return isinstance(value, (int, float, *ints, *floats))


def is_whole(value: Any) -> bool:
    """True for a whole number (an int, numpy integer, or an integral finite float); never for bool.

    Examples
    --------
    >>> import numpy as np
    >>> is_whole(8), is_whole(np.int64(8)), is_whole(8.0), is_whole(8.5), is_whole(True), is_whole("8")
    (True, True, True, False, False, False)
    """
    if not is_number(value):
        return False
    if isinstance(value, (int, *numpy_scalar_types()[1])):
        return True
    return math.isfinite(value) and float(value).is_integer()


#: Longest duration any input takes (s): about 30 years; far beyond any run, far from float overflow.  The one bound
#: of the CLI's time flags (``--time-limit``, ``--reconfig-time``), a flows file's start times, a cached
#: collective fit and the RL time parameters.
MAX_SECONDS = 1e9


#: How close an unknown key must be to a known one to be taken for its misspelling (difflib's ratio): "capcity",
#: "latncy", "meduim", "grpah" are; a graph's own attributes ("weight", "pos", "name", "label") are not.
MISSPELT_RATIO = 0.8


def misspelt_key(mapping: dict, known: tuple[str, ...], prefix: str) -> None:
    """Refuse a key of ``mapping`` that is not in ``known`` but close to one of them, naming ``prefix + key``.

    For formats that keep keys of their own (a networkx graph's attributes) and so cannot refuse every unknown
    key: there a misspelt optional key ("latncy") was kept as an attribute while the key it meant took its
    default in silence.
    """
    for key in mapping:
        if isinstance(key, str) and key not in known:
            close = _close_key(key, known)
            if close is not None:
                raise FabricError(f"{prefix}{key}", f"unknown key; did you mean {close!r}? (known: {', '.join(known)})")


@functools.lru_cache(maxsize=4096)
def _close_key(key: str, known: tuple[str, ...]) -> str | None:
    """The key of ``known`` that ``key`` misspells, or None (cached: a file repeats its keys on every entry)."""
    import difflib

    close = difflib.get_close_matches(key, known, n=1, cutoff=MISSPELT_RATIO)
    return close[0] if close else None


def shown(value: Any) -> str:
    """``value`` as an error message quotes it: its repr, cut to 40 characters (a 400-digit integer is one line).

    A list or mapping is abbreviated before it is written out (reprlib), so a file's 10 M-item list in the wrong
    place costs no more to quote than a number.
    """
    r = _SHORT.repr(value) if isinstance(value, (list, tuple, dict, set)) else repr(value)
    return r if len(r) <= 40 else r[:37] + "..."


def _short_repr():
    import reprlib

    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxdict, short.maxtuple, short.maxstring, short.maxother = 3, 6, 4, 6, 40, 40
    return short


_SHORT = _short_repr()


def whole(value: Any, field: str, lo: int = 1, hi: int | None = None, what: str = "") -> int:
    """``value`` as a Python int in ``lo..hi``, or a :class:`FabricError` naming ``field``.

    Parameters
    ----------
    value : Any
        The caller's value: int, numpy integer, or an integral float.
    field : str
        The parameter, named in the error.
    lo, hi : int
        Allowed range (``hi`` defaults to :data:`MAX_WHOLE`).
    what : str
        Said after the range in the message (``" (the GPUs of the fabric)"``).
    """
    top = MAX_WHOLE if hi is None else hi
    if not (is_whole(value) and lo <= value <= top):
        allowed = (f"in {lo}..{hi}" if hi is not None else f"from {lo} to 2**62" if is_whole(value) and value > top
                   else f">= {lo}")
        raise FabricError(field, f"{shown(value)} must be a whole number {allowed}{what}")
    return int(value)


def optional_whole(value: Any, field: str, lo: int = 1, hi: int | None = None, what: str = "") -> int | None:
    """:func:`whole`, with None kept (an optional count)."""
    return None if value is None else whole(value, field, lo, hi, what)


def real(value: Any, field: str, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
         hi_open: bool = False, unit: str = "") -> float:
    """``value`` as a finite Python float in the range, or a :class:`FabricError` naming ``field``.

    Parameters
    ----------
    value : Any
        int, float or a numpy scalar; bool, str, None, arrays, NaN and infinities are refused.
    field : str
    lo, hi : float, optional
        Bounds; closed unless ``lo_open`` / ``hi_open``.
    unit : str
        Said in the message (``"seconds"``).
    """
    ok = is_number(value) and math.isfinite(value)
    if ok:
        v = float(value)
        ok = (lo is None or (v > lo if lo_open else v >= lo)) and (hi is None or (v < hi if hi_open else v <= hi))
    if not ok:
        raise FabricError(field, f"{shown(value)} must be a finite number{_range(lo, hi, lo_open, hi_open)}"
                                 + (f" ({unit})" if unit else ""))
    return float(value) + 0.0  # -0.0 is 0: it passed `>= 0` and was written out as -0.0


def ratio(value: Any, field: str) -> float:
    """A fraction in [0, 1] (a fault ratio, a share)."""
    if not (is_number(value) and 0.0 <= value <= 1.0):
        raise FabricError(field, f"{shown(value)} must be a number in [0, 1]")
    return float(value) + 0.0  # -0.0 is 0: it passed `>= 0` and was written out as a fault ratio of -0.0


def seed(value: Any, field: str = "seed") -> int:
    """A random seed: a whole number >= 0 of any size (numpy seeds from arbitrarily large ints), as a Python int.

    Checked before numpy's own seeding refuses it with a ``ValueError`` or ``TypeError`` (-1, 0.5, "1", None).
    """
    if not (is_whole(value) and value >= 0):
        raise FabricError(field, f"{shown(value)} must be a whole number >= 0")
    return int(value)


def flag(value: Any, field: str) -> bool:
    """A switch: True or False (numpy's bool too); a string such as ``"no"`` is refused, not read as true."""
    if not isinstance(value, (bool, *numpy_scalar_types()[0])):
        raise FabricError(field, f"{shown(value)} must be True or False")
    return bool(value)


def _range(lo, hi, lo_open, hi_open) -> str:
    if lo is not None and hi is not None:
        return f" in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
    if lo is not None:
        return f" {'>' if lo_open else '>='} {lo:g}"
    if hi is not None:
        return f" {'<' if hi_open else '<='} {hi:g}"
    return ""
