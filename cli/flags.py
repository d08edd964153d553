"""Library parameters -> the flags of each command: the one place a :class:`FabricError`'s field becomes a flag.

Library code (``fabric``, ``topologies``, ``solvers``, ``workloads``) names
the Python parameter that is wrong (``node_fault_ratio``, ``tp``,
``fault_ratios[tor]``); :func:`main <cli.app.main>` asks :func:`flag_for`
which flag of the running command sets it, so every message names a flag
that command really has.  A parameter that no flag of the command sets (a
value computed from other inputs, a file's content) keeps its Python name.
"""

from __future__ import annotations

import re

from fabric.errors import FabricError

RENAMED: dict[str, str] = {
    "n_servers": "--trace-servers",
    "horizon": "--trace",  # the trace's events outlast the window: the trace file is at fault
    "pipeline": "--async",
    "reconfiguration_time": "--reconfig-time",
    "fault_ratios": "--fault",
    "gap_rel": "--gap",
    "path": "--out",
    "zero_stage": "--zero",
    "params": "-p",  # params[k] -> -p k
    # the fabric's HBD description: the builders' is consistent by construction, a topology file's is the user's
    "hbd": "--topology",
}
"""Parameters whose flag is not ``--`` + the parameter's name with dashes."""

COMMAND_FLAGS: dict[str, dict[str, str]] = {
    # the GPU model is a topology parameter of these commands (-p gpu=h100), not a flag of its own
    # the simulator's "ranks" are the job's GPUs: unreachable ones are the topology file's fault
    # their collectives run on NCCL's default channels (no flag sets them): too many for memory is the
    # simulated timing's cost, which --comm analytic does not pay
    "mfu": {"gpu": "-p gpu", "ranks": "--topology", "channels": "--comm"},
    "goodput": {"ranks": "--topology", "channels": "--comm"},
    "rl": {"gpu": "-p gpu", "timing": "--comm", "chunks": "-p sync_chunks",  # the broadcast sync's pieces
           "channels": "--comm"},
}
"""Per command: parameters set by something other than their default flag."""

FIXED_ARCHITECTURES = ("compare", "faults-table", "orchestrate-table")
"""Commands that build the reference architectures with their own parameters (no ``-p``): a parameter that does not
fit (the k-hop ring's k=2 on 2 nodes) is the fault of their ``--gpus``."""

_KEYED = re.compile(r"^([a-z][a-z0-9_]*)\[([^\]]+)\]$")


def flag_for(field: str, command: str, options: set[str]) -> str:
    """The flag of ``command`` that sets library parameter ``field``, or ``field`` itself.

    Parameters
    ----------
    field : str
        A :class:`FabricError` field: a parameter (``node_fault_ratio``), a
        keyed parameter (``fault_ratios[tor]`` -> ``--fault tor``), or already
        an edge name (``--flag``, ``-p k``, ``study.yaml:key``, ``ARCH``), kept.
    command : str
        The command name (``faults``, ``orchestrate-table``).
    options : set of str
        The option strings that command accepts (``--tp``, ``-p``, ...).

    Examples
    --------
    >>> flag_for("node_fault_ratio", "faults", {"--node-fault-ratio"})
    '--node-fault-ratio'
    >>> flag_for("fault_ratios[tor]", "faults", {"--fault"})
    '--fault tor'
    >>> flag_for("horizon", "view", {"--out"})
    'horizon'
    >>> flag_for("params[k]", "compare", {"--gpus"})
    '--gpus'
    """
    keyed = _KEYED.match(field)
    name, key = (keyed.group(1), keyed.group(2)) if keyed else (field, None)
    if name == "params" and command in FIXED_ARCHITECTURES and "--gpus" in options:
        return "--gpus"
    if not re.fullmatch(r"[a-z][a-z0-9_]*", name):
        return field
    flag = COMMAND_FLAGS.get(command, {}).get(name) or RENAMED.get(name) or "--" + name.replace("_", "-")
    if flag.split()[0] not in options:
        return field
    return f"{flag} {key}" if key is not None else flag


def on_command(exc: FabricError, command: str, options: set[str]) -> FabricError:
    """``exc`` with its field named as ``command``'s flag (see :func:`flag_for`)."""
    field = flag_for(exc.field, command, options)
    if field == "--gpus" and exc.field.startswith("params") and command in FIXED_ARCHITECTURES:
        # the parameter's own range ('k=3 must be at most nodes-1 = 2 ...; allowed: 1..2') read as the range
        # of --gpus, and `compare --gpus 1` was refused with 'allowed: 1'
        why = exc.message.split("; allowed:")[0]
        return FabricError(field, f"too few GPUs to build every reference architecture ({why}); give a larger --gpus")
    return exc if field == exc.field else FabricError(field, exc.message)
