"""Fuzz every command and every input file format (issue 15).

The rule held, for any input: exit status 0 or 2, never a traceback, and on
exit 2 exactly one line on stderr, starting ``error:``, that names a flag of
the command or the file (and field) at fault.

Strategies start from a valid command line or a valid file and mutate one
thing: a flag's value becomes huge, negative, zero, NaN, infinite, a word,
empty, a list with blanks or repeats; a file is truncated, nested deeply, has
a value replaced by a wrong type or an absurd number, a key dropped, or its
top level wrapped in a list.  The normal suite runs a fixed, derandomised
example budget; ``-m slow`` runs a longer random search.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cli.app import main

FAST = settings(max_examples=12, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=300, deadline=None, database=None, suppress_health_check=list(HealthCheck))

# Values that broke some flag of some command when the issue was written, and their neighbours.
BAD_VALUES = ["99999999999999999999", "4000000000", "99999999999", "-1", "-8", "0", "nan", "inf", "-inf", "NaN",
              "1e400", "abc", "", " ", "1.5", "0x10", "1,,2", ",", "1,1", "0-99999999999", "3-1", "-", "1e12",
              "٣", "\x00", "x" * 300, "0,1,99999", "1e-300", "0:1:0", "0:1:1e-9", "=", "k=", "k=nan"]

_INT = re.compile(r"^-?\d+$")


#: Working folder of the fuzzed commands (a mutated --out like ``inf`` is written there, not in the repository).
_CWD: list[Path] = []


def run(argv: list[str]) -> tuple[int, str, str]:
    """The CLI in this process, in a scratch folder; (status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    cwd = contextlib.chdir(_CWD[-1]) if _CWD else contextlib.nullcontext()
    with cwd, contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as exc:  # pragma: no cover - main returns; a SystemExit is a failure of the rule
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException as exc:  # noqa: BLE001 - the rule under test is that nothing escapes
            import traceback

            err.write("Traceback (escaped main)\n" + "".join(traceback.format_exception(exc)))
            rc = 99
    return rc, out.getvalue(), err.getvalue()


def assert_rule(argv: list[str], names: set[str]) -> None:
    """Exit 0 or 2; no traceback; on 2 one ``error:`` line naming one of ``names``."""
    rc, _, err = run(argv)
    shown = f"fabric {' '.join(map(repr, argv))}\n{err[-2000:]}"
    assert "Traceback" not in err, shown
    assert rc in (0, 2), f"exit {rc}: {shown}"
    if rc == 2:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("error: "), shown
        if "unexpected extra argument" in lines[0]:  # click's own: it names the stray token, quoted
            names = names | {repr(a) for a in argv} | {repr(" ".join(argv[i:])) for i in range(len(argv))}
        assert any(n in lines[0] for n in names), f"names none of {sorted(names)}: {shown}"


@pytest.fixture
def long_run(request):
    """The long search runs only when asked for (`-m slow`): `make test` selects every marker but bench."""
    if "slow" not in (request.config.getoption("markexpr") or "") or "not slow" in request.config.getoption("markexpr"):
        pytest.skip("the long fuzz runs with -m slow")


# ------------------------------------------------------------------------------------------ command lines
@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    """One valid file of every format the tool reads, and a finished sweep folder."""
    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "cwd").mkdir()
    _CWD.append(tmp / "cwd")
    out: dict[str, Path] = {}
    topo = {"graph": {"hbd": {"kind": "switch_domain", "gpus_per_node": 2, "domain_gpus": 2},
                      "bom": [{"item": "gpu_h100", "scope": "compute", "count": 2}]},
            "nodes": [{"id": "g0", "kind": "gpu", "node": 0}, {"id": "g1", "kind": "gpu", "node": 0},
                      {"id": "t0", "kind": "tor"}],
            "links": [{"source": "g0", "target": "t0", "capacity": "400Gbps", "latency": "1us"},
                      {"source": "g1", "target": "t0", "capacity": 5e10, "medium": "fiber", "layer": "dcn"},
                      {"source": "g0", "target": "g1", "capacity": "450GB/s", "medium": "copper", "layer": "hbd"}]}
    out["topology"] = tmp / "topo.json"
    out["topology"].write_text(json.dumps(topo))
    out["flows"] = tmp / "flows.json"
    out["flows"].write_text(json.dumps([{"id": "a", "src": 0, "dst": 1, "bytes": 1e6},
                                        {"id": "b", "src": 1, "dst": 2, "bytes": "1MB", "after": ["a"]}]))
    out["catalog"] = tmp / "catalog.yaml"
    out["catalog"].write_text(yaml.safe_dump({"schema": 1, "components": {
        "gpu_h100": {"price_usd": {"value": "$20,000", "source": "assumed"},
                     "nic_bandwidth": {"value": "400Gbps", "source": "assumed"}}}}))
    out["model"] = tmp / "model.yaml"
    out["model"].write_text(yaml.safe_dump({"name": "m", "source": "assumed", "hidden": 1024, "layers": 4,
                                            "heads": 8, "kv_heads": 8, "ffn_hidden": 4096, "vocab": 32000,
                                            "seq_len": 2048, "swiglu": True}))
    out["trace"] = tmp / "trace.json"
    out["trace"].write_text(json.dumps([
        {"node_id": "a", "event_time": 0.5, "event_type": "fault_start",
         "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "x"}},
        {"node_id": "b", "event_time": 1.0, "event_type": "fault_start",
         "fault_type": {"Level": "Hardware Failure", "Class": "NIC", "Desc": "y"}},
        {"node_id": "a", "event_time": 1.5, "event_type": "fault_end",
         "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "x"}}]))
    out["study"] = tmp / "study.yaml"
    out["study"].write_text(yaml.safe_dump({"name": "fz", "gpus": 64, "architectures": [{"name": "dgx"}],
                                            "faults": {"ratios": [0.0, 0.1]}, "seeds": [0, 1],
                                            "workloads": [{"name": "llm", "tp": 8}],
                                            "metrics": ["cost", {"faults": {"samples": 10}}]}))
    rc, stdout, err = run(["simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MB",
                           "--group-size", "8", "--links", "--json"])
    assert rc == 0, err
    out["link_loads"] = tmp / "loads.json"
    out["link_loads"].write_text(stdout)
    out["results"] = tmp / "results"
    rc, _, err = run(["sweep", str(out["study"]), "--out", str(out["results"]), "--workers", "1", "--json"])
    assert rc == 0, err
    out["tmp"] = tmp
    return out


def base_commands(f: dict[str, Path]) -> dict[str, list[str]]:
    """A valid, fast command line for every command (each exits 0 as given)."""
    t = f["tmp"]
    return {
        "list": ["list"],
        "build": ["build", "dgx", "--gpus", "16", "-p", "gpu=h100", "--catalog", str(f["catalog"])],
        "build-topology": ["build", "--topology", str(f["topology"])],
        "cost": ["cost", "nvl", "--gpus", "72", "-p", "size=72", "--versus", "dgx:gpu=h100", "--sensitivity", "--swing",
                 "0.5"],
        "compare": ["compare", "--gpus", "64"],
        "faults": ["faults", "dgx", "--gpus", "64", "--tp", "8", "--node-fault-ratio", "0.1", "--samples", "20",
                   "--seed", "1", "--mode", "bernoulli", "--fault", "gpu=0.01", "--no-blast"],
        "faults-trace": ["faults", "dgx", "--gpus", "64", "--tp", "8", "--trace", str(f["trace"]),
                         "--trace-mapping", "tile", "--trace-servers", "4", "--no-blast"],
        "faults-table": ["faults-table", "--gpus", "64", "--samples", "5", "--tp", "8"],
        "simulate": ["simulate", "dgx", "--gpus", "16", "--collective", "broadcast", "--size", "1MB",
                     "--ranks", "0-7", "--algorithm", "ring", "--ecmp", "hash", "--seed", "3", "--chunks", "4"],
        "simulate-flows": ["simulate", "dgx", "--gpus", "16", "--flows", str(f["flows"]), "--method", "event"],
        "mfu": ["mfu", "dgx", "--gpus", "64", "--model", str(f["model"]), "--tp", "8", "--pp", "1",
                "--micro-batch", "1", "--global-batch", "64", "--seq-len", "2048", "--comm", "analytic"],
        "rl": ["rl", "--model", "llama3-8b", "--gpus", "64", "--comm", "analytic", "--oversubscription", "2",
               "--reconfig-time", "1.2ms", "-p", "samples=64"],
        "orchestrate": ["orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "2", "--solver", "greedy",
                        "--faulty-nodes", "1,3", "--dp-bytes", "1GB"],
        "orchestrate-ilp": ["orchestrate", "khop-ring", "--gpus", "64", "--tp", "8", "--dp", "max",
                            "--node-fault-ratio", "0.1", "--time-limit", "5", "--gap", "0.01"],
        "orchestrate-table": ["orchestrate-table", "--gpus", "64", "--tp", "8", "--dp", "2", "--samples", "1",
                              "--max-ratio", "0.02", "--step", "0.01", "--trace", "", "--time-limit", "5"],
        "view": ["view", "dgx", "--gpus", "16", "--tp", "8", "--node-fault-ratio", "0.1", "--seed", "1",
                 "--link-loads", str(f["link_loads"]), "--color-links-by", "load", "--out", str(t / "v.html"),
                 "--json"],
        "view-topology": ["view", "--topology", str(f["topology"]), "--out", str(t / "w.html")],
        "sweep": ["sweep", str(f["study"]), "--out", str(t / "sweep-out"), "--workers", "1", "--overwrite",
                  "--json"],
        "results": ["results", str(f["results"]), "--rows", "--columns", "tp,seed", "--query", "seed == 1"],
    }


def names_of(argv: list[str]) -> set[str]:
    """What an error about ``argv`` may name: its flags, positional names, file names, -p and the limits flag."""
    names = {a.split("=", 1)[0] for a in argv if a.startswith("-") and not _INT.match(a)}
    names |= {"ARCH", "SPEC", "DIR", "'arch'", "'spec'", "'DIR'", "-p", "--limit"}  # positionals, as click names them
    names |= {Path(a).name for a in argv if "/" in a}
    names |= {"--gpus/-p"}  # the builder's own backstop names both
    return names


def mutate_argv(draw, argv: list[str], named: set[str]) -> list[str]:
    """One mutation of ``argv``; adds to ``named`` the tokens an error may name besides flags."""
    argv = list(argv)
    values = [i for i in range(1, len(argv)) if argv[i - 1].startswith("-") and not argv[i].startswith("-")
              and argv[i - 1] not in ("--json",)]
    kind = draw(st.sampled_from(["value", "value", "value", "drop", "repeat", "unknown", "positional"]))
    if kind == "value" and values:
        i = draw(st.sampled_from(values))
        argv[i] = draw(st.sampled_from(BAD_VALUES))
    elif kind == "drop" and len(argv) > 1:
        i = draw(st.integers(1, len(argv) - 1))
        named.update(argv[i: i + 1])  # a missing required flag is named as such
        del argv[i: i + (2 if i in [v - 1 for v in values] else 1)]
    elif kind == "repeat" and values:
        i = draw(st.sampled_from(values))
        argv += [argv[i - 1], draw(st.sampled_from(BAD_VALUES + [argv[i]]))]
    elif kind == "unknown":
        token = draw(st.sampled_from(["--bogus", "--gpus", "-p", "--json=3", "--", "extra"]))
        argv.append(token)
        named.add(token)
    else:  # an extra or wrong positional argument: the error may name the token itself
        token = draw(st.sampled_from(["nvl-9", "dgx", "", "../x", "khop"]))
        argv.insert(1, token)
        named.add(token or "''")
        named.update(a for a in argv[2:3] if not a.startswith("-"))  # the positional it displaced
    return argv


COMMANDS = ["list", "build", "build-topology", "cost", "compare", "faults", "faults-trace", "faults-table",
            "simulate", "simulate-flows", "mfu", "rl", "orchestrate", "orchestrate-ilp", "orchestrate-table",
            "view", "view-topology", "sweep", "results"]


def test_every_base_command_is_valid(files):
    """The fuzz starts from valid inputs: each base command line exits 0 as given."""
    for name, argv in base_commands(files).items():
        rc, _, err = run(argv)
        assert rc == 0, f"{name}: {err[-1500:]}"


def _fuzz_command(files, name, data):
    named: set[str] = set()
    mutated = mutate_argv(data.draw, base_commands(files)[name], named)
    assert_rule(mutated, names_of(mutated) | {n for n in named if n})


@pytest.mark.parametrize("name", COMMANDS)
@FAST
@given(data=st.data())
def test_mutated_command_lines(files, name, data):
    _fuzz_command(files, name, data)


@pytest.mark.slow
@pytest.mark.parametrize("name", COMMANDS)
@LONG
@given(data=st.data())
def test_mutated_command_lines_long(long_run, files, name, data):
    _fuzz_command(files, name, data)


# ------------------------------------------------------------------------------------------------- files
def _leaves(doc: Any, path: tuple = ()) -> list[tuple]:
    if isinstance(doc, dict):
        return [path] + [p for k, v in doc.items() for p in _leaves(v, path + (k,))]
    if isinstance(doc, list):
        return [path] + [p for i, v in enumerate(doc) for p in _leaves(v, path + (i,))]
    return [path]


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    parent[path[-1]] = value
    return doc


def _drop(doc: Any, path: tuple) -> Any:
    if not path:
        return doc
    parent = doc
    for k in path[:-1]:
        parent = parent[k]
    del parent[path[-1]]
    return doc


ODD_VALUES = [None, True, -1, 0, 10**12, 1e12, -1e300, 1e308, "nan", "inf", "-5", "abc", "", [], {}, [1, 1],
              {"a": {"b": {"c": 1}}}, "99999999999999999999", 2**63, "1e400", "0Gbps", "-1us"]


@st.composite
def mutated_text(draw, text: str, fmt: str) -> str:
    """A mutation of a valid JSON/YAML document's text."""
    kind = draw(st.sampled_from(["leaf", "leaf", "leaf", "drop", "truncate", "nest", "wrap", "garbage"]))
    if kind == "truncate":
        return text[: draw(st.integers(0, max(len(text) - 1, 0)))]
    if kind == "nest":
        depth = draw(st.sampled_from([100, 5000, 100_000]))
        return "[" * depth + "]" * depth if fmt == "json" else "- " * 2 + "[" * depth + "]" * depth
    if kind == "garbage":
        return draw(st.sampled_from(["", "\x00\xff", "null", "42", "{", "[1,2", "a: [", "\t\n", "NaN"]))
    doc = json.loads(text) if fmt == "json" else yaml.safe_load(text)
    if kind == "wrap":
        doc = [doc]
    else:
        paths = _leaves(doc)[1:] or [()]
        path = draw(st.sampled_from(paths))
        doc = _drop(doc, path) if kind == "drop" else _set(doc, path, draw(st.sampled_from(ODD_VALUES)))
    if fmt == "json":
        return json.dumps(doc)
    return yaml.safe_dump(doc)


# file key -> (format, command using it with FILE in place of the path)
FILE_COMMANDS = {
    "topology": ("json", ["cost", "--topology", "FILE"]),
    "flows": ("json", ["simulate", "dgx", "--gpus", "16", "--flows", "FILE"]),
    "catalog": ("yaml", ["cost", "dgx", "--gpus", "16", "--catalog", "FILE"]),
    "model": ("yaml", ["mfu", "dgx", "--gpus", "16", "--model", "FILE", "--tp", "8", "--comm", "analytic"]),
    "trace": ("json", ["faults", "dgx", "--gpus", "32", "--tp", "8", "--trace", "FILE", "--no-blast"]),
    "study": ("yaml", ["sweep", "FILE", "--out", "OUT", "--workers", "1", "--overwrite"]),
    "link_loads": ("json", ["view", "dgx", "--gpus", "16", "--link-loads", "FILE", "--out", "HTML"]),
}


def _fuzz_file(files, key, data, tmp_path_factory):
    fmt, template = FILE_COMMANDS[key]
    text = files[key].read_text()
    mutated = data.draw(mutated_text(text, fmt))
    tmp = tmp_path_factory.mktemp(f"fz-{key}")
    path = tmp / files[key].name
    path.write_bytes(mutated.encode("utf-8", "surrogatepass"))
    argv = [str(path) if a == "FILE" else str(tmp / "out") if a == "OUT" else str(tmp / "v.html") if a == "HTML"
            else a for a in template]
    names = names_of(argv) | {path.name, str(path)}
    assert_rule(argv, names)


@pytest.mark.parametrize("key", list(FILE_COMMANDS))
@FAST
@given(data=st.data())
def test_mutated_files(files, key, data, tmp_path_factory):
    _fuzz_file(files, key, data, tmp_path_factory)


@pytest.mark.slow
@pytest.mark.parametrize("key", list(FILE_COMMANDS))
@LONG
@given(data=st.data())
def test_mutated_files_long(long_run, files, key, data, tmp_path_factory):
    _fuzz_file(files, key, data, tmp_path_factory)


# ----------------------------------------------------------------------------------- the issue's own cases
ISSUE_CASES = [
    ["build", "dgx", "--gpus", "99999999999999999999"], ["cost", "dgx", "--gpus", "99999999999999999999"],
    ["compare", "--gpus", "99999999999999"], ["build", "dgx", "--gpus", "4000000000"],
    ["orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "1", "--seed", "-1"],
    ["simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MB", "--ranks", "0-99999999999"],
    ["rl", "--model", "llama3-8b", "--oversubscription", "inf"],
    ["orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "1", "--faulty-nodes", ""],
    ["orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "1", "--faulty-nodes", ","],
    ["orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "1", "--faulty-nodes", "1,,2"],
    ["orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "1", "--faulty-nodes", "1,1"],
    ["simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MB", "--ranks", "0,,1"],
    ["simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MB", "--group-size", "8",
     "--ecmp", "hash", "--seed", "-1"],
    ["view", "dgx", "--gpus", "16", "--tp", "0", "--out", "/tmp/fabric-fuzz-never.html"],
    ["orchestrate-table", "--samples", "0"],
    ["faults", "dgx", "--gpus", "64", "--tp", "8", "--node-fault-ratio", "0.1", "--samples", "99999999999"],
]


@pytest.mark.parametrize("argv", ISSUE_CASES, ids=lambda a: " ".join(a)[:60])
def test_the_issue_cases_exit_2_naming_the_flag(argv):
    rc, _, err = run(argv)
    assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    flag = next(a for a in reversed(argv) if a.startswith("--") and a != "--json")
    wanted = {"--size": "--ranks", "--group-size": "--seed", "--out": "--tp",
              "--node-fault-ratio": "--samples"}.get(flag, flag)
    if argv[0] in ("build", "cost", "compare"):
        wanted = "--gpus"
    assert err.startswith(f"error: {wanted}"), err
