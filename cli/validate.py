"""One rule per flag name, checked by click as it parses, for every command at once.

Typer gives each option a type (int, float, str) but no range: ``--seed -1``,
``--tp 0``, ``--samples 99999999999`` or ``--oversubscription inf`` would
otherwise reach the library.  :func:`install` attaches these rules to every
option of the click command tree, so a flag means the same thing in every
command that has it and its error names it.  Library-level checks stay where
they are; these are the edge's.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from fabric import checks, limits
from fabric.errors import FabricError

Rule = Callable[[Any], "str | None"]

#: Largest value of a plain count flag: beyond it numpy's int64 arithmetic is no longer safe.
MAX_COUNT = 1 << 40


def _int_in(lo: int, hi: int | None = None, what: str = "") -> Rule:
    def rule(v):
        if isinstance(v, bool) or not isinstance(v, int):
            return None
        top = MAX_COUNT if hi is None else hi
        if v < lo:
            return f"{v} must be >= {lo}{what}"
        if v > top:
            return f"{v} must be <= {top}{what}"
        return None
    return rule


def _limited(name: str, lo: int = 1) -> Rule:
    """A count bounded below by ``lo`` and above by resource limit ``name``."""
    def rule(v):
        if isinstance(v, bool) or not isinstance(v, int):
            return None
        if v < lo:
            return f"{v} must be >= {lo}"
        limits.check(name, v, "", "")  # raises with the flag filled in by the caller
        return None
    return rule


def _float_in(lo: float, hi: float, lo_open: bool = False, hi_open: bool = False) -> Rule:
    def rule(v):
        if not isinstance(v, float):
            return None
        ok = (lo < v if lo_open else lo <= v) and (v < hi if hi_open else v <= hi)
        if not ok:
            return f"{v} must be in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"
        return None
    return rule


#: Largest buffer a byte-size flag takes (1 EiB): beyond any collective or step, far from float overflow in times.
MAX_BYTES = float(1 << 60)


def _bytes_at_most(hi: float) -> Rule:
    """A size flag (``1GiB``, ``1e9``) of at most ``hi`` bytes; an unreadable one is left to the command's parser."""
    return _parsed_at_most("parse_bytes", hi,
                           lambda v, x: f"{v!r} is {x:.3g} bytes; at most {hi:.3g} (1 EiB) allowed")


#: Longest duration a time flag takes (s): :data:`fabric.checks.MAX_SECONDS`, as ``--time-limit``.
MAX_SECONDS = checks.MAX_SECONDS


def _time_at_most(hi: float) -> Rule:
    """A duration flag (``1.2ms``, ``5``) of at most ``hi`` seconds; an unreadable one is left to the command."""
    return _parsed_at_most("parse_time", hi, lambda v, x: f"{v!r} is {x:.3g} s; at most {hi:g} s allowed")


def _parsed_at_most(parser: str, hi: float, too_big) -> Rule:
    """A flag read by ``fabric.units.<parser>`` that must not exceed ``hi``; ``too_big(text, value)`` says why.

    The parser is imported when a value is checked, not at start-up; a value it cannot read is left to the
    command's own parser (its error names what is allowed).
    """
    def rule(v):
        if not isinstance(v, str):
            return None
        from fabric import units

        try:
            x = getattr(units, parser)(v, "")
        except FabricError:
            return None
        return too_big(v, x) if x > hi else None
    return rule


RULES: dict[str, Rule] = {
    "--seed": _int_in(0, checks.MAX_SEED),
    "--gpus": _limited("gpus"),
    "--samples": _limited("samples"),
    "--tp": _limited("gpus"),
    "--pp": _limited("gpus"),
    "--dp": _limited("gpus"),
    "--ep": _limited("gpus"),
    "--cp": _limited("gpus"),
    "--count": _limited("gpus"),
    "--groups": _limited("gpus"),
    "--group-size": _limited("gpus"),
    "--trace-servers": _limited("gpus"),
    "--trace-points": _int_in(1, 10_000),
    "--interleave": _int_in(1, 1 << 20),
    "--micro-batch": _int_in(1, 1 << 30),
    "--global-batch": _int_in(1, 1 << 30),
    "--seq-len": _int_in(1, 1 << 30),
    "--chunks": _int_in(1, 1 << 20),
    "--channels": _int_in(1, 1 << 10),
    "--size": _bytes_at_most(MAX_BYTES),
    "--dp-bytes": _bytes_at_most(MAX_BYTES),
    "--pp-bytes": _bytes_at_most(MAX_BYTES),
    "--reconfig-time": _time_at_most(MAX_SECONDS),
    "--confirm": _int_in(1, 10_000),
    "--workers": _int_in(1, 4096),
    "--root": _int_in(0, 1 << 30),
    "--max-glyphs": _int_in(0, 1 << 30),
    "--port": _int_in(0, 65535),
    "--node-fault-ratio": _float_in(0, 1),
    "--max-ratio": _float_in(0, 1),
    "--step": _float_in(0, 1, lo_open=True),
    "--load": _float_in(0, 1, lo_open=True),
    "--gap": _float_in(0, 1, hi_open=True),
    "--swing": _float_in(0, 1, lo_open=True, hi_open=True),
    "--oversubscription": _float_in(1, 1e6),
    "--time-limit": _float_in(0, 1e9, lo_open=True),
    "--trace-time": _float_in(0, 1e9),
}


def _flag(param) -> str:
    longs = [o for o in getattr(param, "opts", []) if o.startswith("--")]
    return longs[0] if longs else (param.name or "?").upper()


def check_value(flag: str, value: Any) -> Any:
    """Apply the rule of ``flag`` (and finiteness for every float) to ``value``; return it."""
    if value is None:
        return value
    for v in value if isinstance(value, (list, tuple)) else [value]:
        if isinstance(v, float) and not math.isfinite(v):
            raise FabricError(flag, f"{v} is not a finite number")
        rule = RULES.get(flag)
        if rule is None:
            continue
        try:
            msg = rule(v)
        except FabricError as exc:  # a resource limit: put the flag in front
            raise FabricError(flag, f"{v}: {exc.message}") from None
        if msg:
            raise FabricError(flag, msg)
    return value


def _wrap(param) -> None:
    inner = param.callback
    flag = _flag(param)

    def callback(ctx, p, value):
        if inner is not None:
            value = inner(ctx, p, value)
        return check_value(flag, value)

    param.callback = callback


def _once(param) -> bool:
    """True for an option that takes one value: a second one on the line would silently replace the first."""
    return (getattr(param, "param_type_name", "") == "option" and not getattr(param, "multiple", False)
            and not getattr(param, "count", False) and not getattr(param, "is_eager", False))


def refuse_repeats(order: list, params: list, args: list | None = None) -> None:
    """Refuse an option of one value given twice with two values (``--tp 8 --tp 16``, ``--search --no-search``).

    ``order`` is the click parser's list of parameters as they appear on the line (a parameter given twice
    is listed twice).  Click keeps the last value in silence, so ``--tp 8 ... --tp 16`` ran at TP 16;
    ``-p k=2 -p k=3``, ``--fault C`` and ``--recovery NAME`` twice are refused, and so is this.  The same
    value given again (``--json ... --json``, ``--gpus 8 --gpus=8``, as a script that appends its flags
    may) is no conflict and stays valid; ``args``, the raw tokens, tell the values apart (without them
    every repeat is refused).  A list option (``-p``, ``--fault``) may repeat: each value is kept.
    """
    seen: set[int] = set()
    for param in order:
        if param in params and _once(param):
            if id(param) in seen:
                if args is not None and len(set(_given_values(args, param))) == 1:
                    continue
                spellings = [*param.opts, *getattr(param, "secondary_opts", [])]
                also = f" (as {' or '.join(spellings)})" if len(spellings) > 1 else ""
                raise FabricError(_flag(param), f"given twice{also} with different values; give it once (the "
                                                "last would silently replace the first)")
            seen.add(id(param))


def _given_values(args: list, param) -> list:
    """The values ``param`` is given on the raw line ``args``: a flag's polarity, else the text after ``--x=``
    or the next token (tokens after ``--`` are arguments, not options)."""
    primary, secondary = list(param.opts), list(getattr(param, "secondary_opts", []))
    flag = getattr(param, "is_flag", False)
    out = []
    for i, tok in enumerate(args):
        if tok == "--":
            break
        if tok in primary or tok in secondary:
            out.append(tok in primary if flag else (args[i + 1] if i + 1 < len(args) else None))
        elif not flag:
            for opt in primary:
                if opt.startswith("--") and tok.startswith(opt + "="):
                    out.append(tok[len(opt) + 1:])
                elif not opt.startswith("--") and tok.startswith(opt) and len(tok) > len(opt):
                    out.append(tok[len(opt):])
    return out


def _check_repeats(command) -> None:
    make_parser = command.make_parser

    def checked_parser(ctx):
        parser = make_parser(ctx)
        parse_args = parser.parse_args

        def parse(args):
            raw = list(args)  # click's parser consumes the list it is given
            opts, largs, order = parse_args(args)
            refuse_repeats(order, command.get_params(ctx), raw)
            return opts, largs, order

        parser.parse_args = parse
        return parser

    command.make_parser = checked_parser


def install(command) -> None:
    """Attach the rules to every parameter of ``command`` and its sub-commands (a click command), and refuse an
    option of one value given twice (:func:`refuse_repeats`)."""
    for param in getattr(command, "params", []):
        if not getattr(param, "_fabric_rules", False):
            _wrap(param)
            param._fabric_rules = True
    if not getattr(command, "_fabric_repeats", False):
        _check_repeats(command)
        command._fabric_repeats = True
    for sub in getattr(command, "commands", {}).values():
        install(sub)
