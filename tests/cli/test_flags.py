"""Library errors name Python parameters; each command names them as flags it really has (cli/flags.py)."""

import ast
import pathlib

import pytest
import typer

from cli.app import app, command_options
from cli.flags import flag_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIBRARY = ["fabric", "topologies", "solvers", "workloads"]
NOT_OURS = {"fabric/sim", "solvers/pulp_adapter.py"}  # still name flags; their owners convert them


def _library_fields() -> dict[str, list[str]]:
    """Literal first arguments of every ``FabricError(...)`` in the library (f-strings: their leading text)."""
    out: dict[str, list[str]] = {}
    for pkg in LIBRARY:
        for path in (ROOT / pkg).rglob("*.py"):
            rel = path.relative_to(ROOT).as_posix()
            if any(rel.startswith(x) for x in NOT_OURS):
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "FabricError" and node.args:
                    arg = node.args[0]
                    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                        out.setdefault(arg.value, []).append(rel)
                    elif isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant):
                        out.setdefault(arg.values[0].value, []).append(rel)
    return out


def test_library_errors_name_parameters_not_flags():
    flags = {f: where for f, where in _library_fields().items() if f.startswith("--")}  # "-p k" is an edge name
    assert not flags, flags


# What each command can raise from the library, by parameter (found by reading the functions it calls).
RAISED = {
    "build": ["gpus", "catalog", "topology"],
    "cost": ["gpus", "catalog", "topology"],
    "view": ["gpus", "catalog", "topology", "tp", "node_fault_ratio", "port", "path"],
    "faults": ["gpus", "catalog", "topology", "tp", "node_fault_ratio", "fault_ratios[tor]", "mode", "samples", "seed",
               "trace", "trace_mapping", "n_servers", "horizon"],
    "faults-table": ["gpus", "samples", "tp", "params[k]"],
    "compare": ["gpus", "catalog", "params[k]"],
    "orchestrate": ["gpus", "catalog", "topology", "tp", "dp", "pp", "count", "faulty_nodes", "node_fault_ratio",
                    "trace", "trace_time", "solver", "time_limit", "tor_map", "dp_bytes", "pp_bytes"],
    "orchestrate-table": ["gpus", "tp", "dp", "samples", "trace", "time_limit", "params[k]"],
    "mfu": ["gpus", "catalog", "topology", "model", "tp", "pp", "dp", "ep", "cp", "micro_batch", "global_batch",
            "seq_len", "recompute", "sequence_parallel", "interleave", "gpu"],
    "rl": ["gpus", "catalog", "model", "pipeline", "reconfiguration_time", "timing", "fabric", "oversubscription",
           "params[k]"],
}


@pytest.mark.parametrize("command", sorted(RAISED))
def test_every_raised_parameter_maps_to_a_flag_the_command_has(command):
    group = typer.main.get_command(app)
    options = command_options(group, command)
    assert options, f"no command {command!r}"
    for field in RAISED[command]:
        flag = flag_for(field, command, options)
        assert flag.split()[0] in options, f"{command}: {field} -> {flag}"


DERIVED = {"architecture", "component", "components", "demand", "hbd", "jobs", "memory", "nodes", "rfabric", "rings",
           "time", "reconfig_times", "metrics", "ratio_metric", "ratios", "n"}
"""Library fields no flag sets: derived from other inputs (the HBD, the memory a configuration needs) or
arguments only the Python API passes (explicit rings, demand matrices); they keep their Python names."""


def test_every_library_parameter_is_known_to_some_command():
    """A new library field either maps for some command or is an edge name (file key, -p param, ARCH)."""
    group = typer.main.get_command(app)
    commands = {name: command_options(group, name) for name in group.commands}
    for field, where in _library_fields().items():
        field = field + "k]" if field.endswith("[") else field  # f"params[{name}]": any key
        name = field.split("[")[0]
        if not name.isidentifier() or not name.islower():
            continue  # file keys (FILE:events[i].field), -p parameters, ARCH, ...
        mapped = [c for c, opts in commands.items() if flag_for(field, c, opts) != field]
        assert mapped or name in DERIVED, (field, where)


@pytest.mark.parametrize("command", [["compare"], ["faults-table", "--tp", "1", "--samples", "2"],
                                     ["orchestrate-table", "--trace", "", "--tp", "1", "--dp", "1", "--samples", "1"]])
def test_a_gpu_count_too_small_for_a_reference_architecture_names_gpus(run_cli, command):
    """These commands set the architectures' parameters themselves: at --gpus 7 the k-hop ring's default k=2 on 2
    nodes was blamed on `params[k]`, a flag they do not have."""
    rc, stdout, err = run_cli(*command, "--gpus", "7")
    assert rc == 2 and err.startswith("error: --gpus: too few GPUs") and "(k=2" in err and err.count("\n") == 1
    assert stdout == ""


def test_a_parameter_no_flag_sets_keeps_its_name():
    group = typer.main.get_command(app)
    assert flag_for("horizon", "view", command_options(group, "view")) == "horizon"  # never a flag view lacks
    assert flag_for("fault_ratios[tor]", "faults", command_options(group, "faults")) == "--fault tor"


@pytest.mark.parametrize("args, flag", [
    (["faults", "nvl-72", "--gpus", "72", "--tp", "8", "--node-fault-ratio", "0.1", "--samples", "0"], "--samples"),
    (["faults", "khop-ring", "--gpus", "64", "--tp", "6", "--node-fault-ratio", "0.1"], "--tp"),
    (["faults", "nvl-72", "--gpus", "72", "--tp", "8", "--trace", "nope.json"], "--trace"),
    (["orchestrate", "khop-ring", "--gpus", "64", "--tp", "8", "--dp", "2", "--node-fault-ratio", "0.1",
      "--trace", "stepfun"], "--trace"),  # the second source given, as `fabric faults` names it
    (["orchestrate", "khop-ring", "--gpus", "64", "--tp", "8", "--dp", "2", "--node-fault-ratio", "1.5"],
     "--node-fault-ratio"),
    (["orchestrate-table", "--max-ratio", "0"], "--max-ratio"),
    (["orchestrate-table", "--max-ratio", "0.05", "--step", "0.1"], "--step"),
    (["mfu", "dgx", "--gpus", "64", "--model", "llama3-8b", "--tp", "3"], "--tp"),
])
def test_cli_messages_name_the_commands_flags(run_cli, args, flag):
    rc, out, err = run_cli(*args)
    assert rc == 2 and out == ""
    assert err.startswith(f"error: {flag}: "), err
    assert "\n" not in err.strip()
