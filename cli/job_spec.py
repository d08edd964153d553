"""``fabric orchestrate --job``: one job of a several-job request, as ``key=value`` pairs.

``--tp 16 --job name=pretrain,dp=8,count=5 --job dp=4`` asks for five instances of TP 16 x DP 8 and as many of
TP 16 x DP 4 as fit in what is left.  The keys are the single-job flags without their dashes: ``dp`` (a whole
number or ``max``; required), ``pp``, ``count``, ``dp-bytes``, ``pp-bytes``, and ``name`` (default ``job<i>``).
Every job shares ``--tp``: the orchestrator places rings of one size
(:func:`solvers.orchestrator.stage1.check_jobs`).  Each value is checked by the rule of the flag of the same
name (:mod:`cli.validate`), and an error names ``--job``, the job and the key.
"""

from __future__ import annotations

import re

from fabric.errors import FabricError

#: Most ``--job`` flags in one request.  Each job adds a ring-count row per ToR block and a dimension to the
#: instance-count knapsack; 64 is far above any real mix (a handful of jobs) and keeps a typo'd loop from
#: building a model no machine can hold.
MAX_JOBS = 64

KEYS = ("name", "dp", "pp", "count", "dp-bytes", "pp-bytes")

#: A job name: what a report or a placement file can carry as it is.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def parse_jobs(specs: list[str], tp: int):
    """The :class:`~solvers.orchestrator.jobs.Job` of each ``--job`` (module docstring).

    Parameters
    ----------
    specs : list of str
        The ``--job`` values, in the order given (the order stage 1 serves ties in).
    tp : int
        GPUs per TP group, shared by every job (``--tp``).

    Raises
    ------
    FabricError
        Naming ``--job``: an unknown or repeated key, a missing ``dp``, a bad value, a repeated name, or more
        than :data:`MAX_JOBS` jobs.
    """
    from solvers.orchestrator.jobs import Job  # lazily: the solvers package imports PuLP

    if len(specs) > MAX_JOBS:
        raise FabricError("--job", f"{len(specs):,} jobs given; at most {MAX_JOBS}")
    jobs, names = [], set()
    for i, spec in enumerate(specs):
        fields = _fields(spec, i)
        name = fields.pop("name", f"job{i}")
        if name in names:
            raise FabricError("--job", f"job {i + 1} ({spec!r}): name {name!r} is taken by an earlier job; "
                                       "give each job its own name")
        names.add(name)
        try:
            jobs.append(Job(tp=tp, name=name, **fields))
        except FabricError as exc:  # e.g. count with dp=max: the Job's own check, said for this --job
            raise FabricError("--job", f"job {i + 1} ({spec!r}): {exc.field}: {exc.message}") from None
    return jobs


def _fields(spec: str, i: int) -> dict:
    """The keyword arguments of one job's :class:`Job` from its ``key=value,...`` text (checked)."""
    from cli.common import parse_dp
    from cli.validate import check_value
    from fabric.units import parse_bytes

    where = f"job {i + 1} ({spec!r})"
    raw: dict[str, str] = {}
    for part in spec.split(","):
        key, eq, value = (s.strip() for s in part.partition("="))
        if not eq or not key or not value:
            raise FabricError("--job", f"{where}: {part.strip()!r} is not key=value; keys: {', '.join(KEYS)}")
        key = key.lower().replace("_", "-")
        if key not in KEYS:
            raise FabricError("--job", f"{where}: {key!r} is not a job key; use {', '.join(KEYS)}")
        if key in raw:
            raise FabricError("--job", f"{where}: {key!r} is given twice")
        raw[key] = value
    if "dp" not in raw:
        raise FabricError("--job", f"{where}: dp=... is required (a whole number or 'max')")
    out: dict = {}
    try:
        for key, value in raw.items():
            flag = f"--{key}"
            if key == "name":
                if not _NAME.fullmatch(value):
                    raise FabricError(flag, f"{value!r} must be 1-64 letters, digits, '_', '.' or '-', "
                                            "starting with a letter or digit")
                out["name"] = value
            elif key == "dp":
                out["dp"] = parse_dp(value)
            elif key in ("pp", "count"):
                if not (value.isascii() and value.isdigit()):
                    raise FabricError(flag, f"{value!r} must be a whole number >= 1")
                out[key] = check_value(flag, int(value))
            else:
                check_value(flag, value)
                out[key.replace("-", "_")] = parse_bytes(value, flag)
    except FabricError as exc:  # the job's own key, in the flag the user typed
        raise FabricError("--job", f"{where}: {exc.field.lstrip('-')}: {exc.message}") from None
    return out
