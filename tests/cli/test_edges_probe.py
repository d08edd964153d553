"""Bad and unusual inputs found by the fresh-eyes edge probe (branch probe-edges).

Each case: exit status 2, one ``error:`` line naming the flag or file field and
what is allowed, no traceback, nothing written -- or, for a valid input, the
command works.  The docstring of each test says what it checks and what the
tool did before.
"""

from __future__ import annotations

import json

import pytest

from tests.cli.test_edges import _topology, one_error


# ------------------------------------------------------------------------------------- repeated fault ratios
def test_a_node_ratio_given_as_fault_and_node_fault_ratio_is_refused(run_cli):
    """`--node-fault-ratio 0.1 --fault node=0.2` ran at 0.1: the --fault value was dropped without a word."""
    rc, _, err = run_cli("faults", "khop-ring", "--gpus", "64", "--tp", "8", "--samples", "3",
                         "--node-fault-ratio", "0.1", "--fault", "node=0.2", "--json")
    one_error(rc, err, "--fault node", "once")


def test_the_library_refuses_the_node_ratio_twice():
    """The root check is in the library: fault_model names its parameter, the CLI maps it to --fault node."""
    from fabric.errors import FabricError
    from solvers.allocation.evaluate import fault_model

    with pytest.raises(FabricError) as exc:
        fault_model(0.1, {"node": 0.2})
    assert exc.value.field == "fault_ratios[node]"
    assert fault_model(None, {"node": 0.2}).ratios == {"node": 0.2}  # alone, --fault node=R is the node ratio


@pytest.mark.parametrize("args,flag", [
    (("faults", "khop-ring", "--gpus", "64", "--tp", "8", "--samples", "3", "--node-fault-ratio", "0.1",
      "--fault", "ocs=0.2", "--fault", "ocs=0"), "--fault ocs"),
    (("goodput", "dgx", "--gpus", "16", "--model", "llama3-8b", "--comm", "analytic", "--no-series",
      "--recovery", "restart=1s", "--recovery", "restart=2s"), "--recovery restart"),
])
def test_a_repeated_name_value_flag_is_refused_like_p(run_cli, args, flag):
    """`--fault ocs=0.2 --fault ocs=0` ran at 0 (the last won); `-p k=2 -p k=3` is refused, so are these."""
    rc, _, err = run_cli(*args, "--json")
    one_error(rc, err, flag, "given twice")


# ------------------------------------------------------------------------------------------------ catalogs
@pytest.mark.parametrize("text,field", [
    ("schema: true\ncomponents: {}\n", "cat.yaml:schema"),  # True == 1: read as schema 1, exit 0
    ("components: {gpu_h100: {category: switch}}\n", "cat.yaml:gpu_h100.category"),
    ("components: {gpu_h100: {description: 5}}\n", "cat.yaml:gpu_h100.description"),  # str(5) kept
])
def test_a_catalog_of_the_wrong_shape_is_refused(run_cli, tmp_path, text, field):
    """A shipped GPU re-filed as a switch was accepted; `fabric mfu` then blamed `-p gpu` (no GPU in the BOM)."""
    path = tmp_path / "cat.yaml"
    path.write_text(text)
    rc, _, err = run_cli("cost", "dgx", "--gpus", "16", "--catalog", path, "--json")
    one_error(rc, err, field)


def test_a_catalog_override_of_the_same_category_and_a_new_id_still_load(tmp_path):
    """The check is in the library's catalog reader: a same-category override and a new id are valid."""
    from fabric.catalog import load_catalog

    path = tmp_path / "cat.yaml"
    path.write_text("schema: 1\ncomponents:\n  gpu_h100: {category: gpu, price_usd: {value: 1, source: assumed}}\n"
                    "  my_switch: {category: switch, price_usd: {value: 2, source: assumed}}\n")
    cat = load_catalog(path)
    assert cat.get("gpu_h100").values["price_usd"] == 1.0 and cat.category("my_switch") == "switch"


# ---------------------------------------------------------------------------------------- topology files
@pytest.mark.parametrize("mutate,field", [
    (lambda d: d.update(graph=[]), "topo.json:graph"),  # an empty list was read as "no graph data": no HBD, TP 1
    (lambda d: d.update(graph=""), "topo.json:graph"),
    (lambda d: d["graph"].update(bom={}), "topo.json:graph.bom"),  # an empty mapping was read as no BOM
    (lambda d: d["graph"].update(hbd=[]), "topo.json:graph.hbd"),  # read as no HBD (TP 1) without a word
    (lambda d: d["graph"].update(hbd={}), "topo.json:graph.hbd"),
    (lambda d: d.update(edges=d["links"]), "topo.json:edges"),  # both keys: 'edges' was ignored
])
def test_a_topology_part_of_the_wrong_shape_is_refused(run_cli, tmp_path, mutate, field):
    """Falsy wrong shapes (`[]`, `""`, `{}`) of graph, bom and hbd were taken for "absent"."""
    rc, _, err = run_cli("build", "--topology", _topology(tmp_path, mutate), "--json")
    one_error(rc, err, field)


@pytest.mark.parametrize("mutate", [lambda d: d.update(graph=None), lambda d: d["graph"].update(bom=None),
                                    lambda d: d["graph"].update(hbd=None), lambda d: d.update(edges=d.pop("links"))])
def test_a_topology_part_null_or_edges_alone_still_builds(run_cli, tmp_path, mutate):
    """null stays "absent" (a fabric without a BOM / HBD), and `edges` alone is networkx's other spelling."""
    rc, out, err = run_cli("build", "--topology", _topology(tmp_path, mutate), "--json")
    assert rc == 0, err
    assert json.loads(out)["counts"]["gpus"] == 2


# -------------------------------------------------------------------------------------------------- --tor-map
_KHOP = ("orchestrate", "khop-ring", "--gpus", "64", "--tp", "8", "--dp", "1", "--solver", "greedy", "--json")


def test_a_tor_map_list_with_a_fraction_is_named_as_a_value_not_a_file(run_cli):
    """`--tor-map 0,...,3,1.5` has the path suffix ".5": it was refused as "no such file: 0,0,...,1.5"."""
    rc, _, err = run_cli(*_KHOP, "--tor-map", ",".join(["0"] * 15 + ["1.5"]))
    one_error(rc, err, "--tor-map", "'1.5' is not a ToR id")


def test_a_tor_map_file_holding_a_json_object_says_it_must_be_a_list(run_cli, tmp_path):
    """A JSON object was split as comma text: "'{"a":1}' is not a ToR id"."""
    path = tmp_path / "tors.json"
    path.write_text('{"a": 1}')
    rc, _, err = run_cli(*_KHOP, "--tor-map", path)
    one_error(rc, err, "--tor-map", "must be a JSON list")


def test_a_tor_map_text_file_and_a_list_still_place(run_cli, tmp_path):
    """Valid spellings: a whitespace-separated text file and a comma list (16 line positions, 4 ToRs)."""
    path = tmp_path / "tors map.txt"
    path.write_text("0 0 0 0\n1 1 1 1\n2 2 2 2\n3 3 3 3\n")
    outs = []
    for value in (path, ",".join(str(i // 4) for i in range(16))):
        rc, out, err = run_cli(*_KHOP, "--tor-map", value)
        assert rc == 0, err
        doc = json.loads(out)
        doc.pop("total_seconds")  # wall time, the one field that differs between two runs
        outs.append(doc)
    assert outs[0] == outs[1]


# ------------------------------------------------------------------------------------------ sweep --overwrite
def test_overwrite_deletes_the_report_of_the_rows_it_deletes(run_cli, tmp_path):
    """README: `DIR/_report.html`, which `--overwrite` deletes with the rows it showed.  It was kept, so the
    folder of the new study held a page of the old one's numbers."""
    spec = tmp_path / "one point.yaml"  # a study of one point, in a path with a space
    spec.write_text("name: one\ngpus: 72\narchitectures: [{name: nvl-72}]\nmetrics: [cost]\n")
    out = tmp_path / "out dir"
    assert run_cli("sweep", spec, "--out", out, "--workers", "1")[0] == 0
    assert run_cli("report", out)[0] == 0 and (out / "_report.html").is_file()
    rc, _, err = run_cli("sweep", spec, "--out", out, "--workers", "1", "--overwrite", "--json")
    assert rc == 0, err
    assert not (out / "_report.html").exists()


# ----------------------------------------------------------------------------------- pages: same in, same out
def test_a_view_page_written_twice_is_byte_identical(tmp_path):
    """Bokeh names the root div, the document and its JSON script with random UUIDs (uuid4): two runs of the
    same `fabric view` (same flags, same seed) differed in 3 ids.  The ids now derive from the page's content.
    Two processes, as a user runs it (in one process Bokeh's model-id counter goes on between pages)."""
    import subprocess
    import sys

    pages = []
    for name in ("a.html", "b.html"):
        cmd = [sys.executable, "-c", "from cli.app import entry; entry()", "view", "khop-ring", "--gpus", "64",
               "--tp", "8", "--node-fault-ratio", "0.1", "--out", str(tmp_path / name), "--json"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        pages.append((tmp_path / name).read_bytes())
    assert pages[0] == pages[1]
    text = pages[0].decode()
    # the ids still tie the page together: the root div is the render item's root, the JSON script is read by id
    from fabric.viewer.page import _RANDOM_IDS

    assert _RANDOM_IDS.search(text) is None
    import re

    div = re.search(r'<div id="(fabric-[0-9a-f]{16}-\d)"', text).group(1)
    script = re.search(r'<script type="application/json" id="(fabric-[0-9a-f]{16}-\d)"', text).group(1)
    assert f'"roots":{{"p' in text and f'"{div}"}}' in text and f"getElementById('{script}')" in text


# ------------------------------------------------------------------------------------ input probe (round 2)
@pytest.mark.parametrize("value", [".inf", ".nan", "1e309", "9" * 400])
def test_a_catalog_count_that_is_not_finite_is_refused(run_cli, tmp_path, value):
    """`ports: {value: .inf}` raised OverflowError (`int(inf)`), `.nan` ValueError, a 400-digit integer
    OverflowError (`float(10**400)`): three tracebacks.  Now checks.whole refuses them, the number cut short."""
    path = tmp_path / "cat.yaml"
    path.write_text(f"components: {{sw: {{category: switch, ports: {{value: {value}, source: assumed}}}}}}\n")
    rc, _, err = run_cli("cost", "dgx", "--gpus", "16", "--catalog", path, "--json")
    line = one_error(rc, err, "cat.yaml:sw.ports.value", "whole number")
    assert len(line) < 200


@pytest.mark.parametrize("ids", ["1: {category: switch}, '1': {category: switch}", "~: {category: switch}"])
def test_a_catalog_id_that_is_not_a_string_is_refused(run_cli, tmp_path, ids):
    """`1:` and `'1':` were both filed as "1" (the later replaced the earlier in silence), `~:` as "None"."""
    path = tmp_path / "cat.yaml"
    path.write_text(f"components: {{{ids}}}\n")
    rc, _, err = run_cli("cost", "dgx", "--gpus", "16", "--catalog", path, "--json")
    one_error(rc, err, "cat.yaml:components", "not a string")


@pytest.mark.parametrize("argv,flag", [
    (("build", "dgx", "--gpus", "8", "--gpus=16"), "--gpus"),  # built 16 GPUs: the last won in silence
    (("mfu", "dgx", "--gpus", "16", "--model", "llama3-8b", "--model", "llama3-70b", "--tp", "8",
      "--comm", "analytic"), "--model"),
    (("goodput", "dgx", "--gpus", "16", "--model", "llama3-8b", "--search", "--no-search"), "--search"),
    (("cost", "dgx", "--gpus", "16", "--catalog", "a.yaml", "--catalog", "b.yaml"), "--catalog"),
])
def test_an_option_of_one_value_given_twice_is_refused(run_cli, argv, flag):
    """Click keeps the last value of a repeated option: `--gpus 8 --gpus=16` built 16 GPUs, `--model A --model B`
    ran B; `-p k=2 -p k=3`, `--fault C` and `--recovery NAME` twice are refused, and so now is this, before any
    file is read or fabric built."""
    rc, out, err = run_cli(*argv, "--json")
    one_error(rc, err, flag, "given twice")
    assert out == ""


@pytest.mark.parametrize("argv", [
    ("build", "dgx", "--gpus", "16", "--gpus=16", "--json"),  # the same value in two spellings
    ("build", "dgx", "--gpus", "16", "--json", "--json"),  # a script that appends --json to a line with it
    ("goodput", "dgx", "--gpus", "16", "--model", "llama3-8b", "--tp", "8", "--no-search", "--no-search", "--json"),
])
def test_an_option_given_twice_with_the_same_value_stays_valid(run_cli, argv):
    """A repeat is refused only when its values differ: the same value again is no conflict, and the output is
    the same as with the option once."""
    rc, out, err = run_cli(*argv)
    assert rc == 0, err
    once = list(dict.fromkeys(a for a in argv if a != "--gpus=16"))
    rc1, out1, err1 = run_cli(*once)
    assert rc1 == 0, err1
    assert json.loads(out) == json.loads(out1)


def test_list_options_still_repeat(run_cli):
    """-p, --fault, --recovery take one value per use: repeating them with different names stays valid."""
    rc, out, err = run_cli("faults", "dgx", "--gpus", "16", "--tp", "8", "--samples", "3", "--fault", "gpu=0.01",
                           "--fault", "tor=0.01", "-p", "gpu=h100", "-p", "oversubscription=2", "--json")
    assert rc == 0, err
    json.loads(out)


def test_a_limit_given_twice_is_refused_on_the_line_and_in_the_environment(run_cli, monkeypatch):
    """`--limit gpus=10 --limit gpus=20` (and FABRIC_LIMITS=gpus=10,gpus=20) ran under the last in silence.
    A --limit over FABRIC_LIMITS is an override, not a repeat: it stays valid."""
    rc, _, err = run_cli("--limit", "gpus=10", "--limit", "gpus=20", "build", "dgx", "--gpus", "16", "--json")
    one_error(rc, err, "--limit", "gpus given twice")
    monkeypatch.setenv("FABRIC_LIMITS", "gpus=10,gpus=20")
    rc, _, err = run_cli("build", "dgx", "--gpus", "16", "--json")
    one_error(rc, err, "FABRIC_LIMITS", "gpus given twice")
    monkeypatch.setenv("FABRIC_LIMITS", "gpus=10")
    rc, out, err = run_cli("--limit", "gpus=20", "build", "dgx", "--gpus", "16", "--json")
    assert rc == 0, err


_RL = ("rl", "--gpus", "32", "--model", "llama3-8b", "--comm", "analytic", "--fabric", "static", "--json")


@pytest.mark.parametrize("content,named", [
    ("[[1, 2], [3]]", "[0]"),  # ValueError (inhomogeneous array) traceback
    ('[{"a": 1}]', "[0]"),  # TypeError traceback
    ("[" + "9" * 400 + "]", "past float range"),  # OverflowError traceback
    (b"\xff\xfe100\n", "not UTF-8"),  # UnicodeDecodeError traceback
    ("[" * 100_000, "nests deeper"),  # RecursionError, blamed on --gpus
    ("[true, true]", "[0]"),  # read as lengths of 1 token
    ('["100"]', "[0]"),  # a string read as 100
    ("[[100]]", "[0]"),  # a nested list flattened
])
def test_rl_lengths_file_refuses_what_is_not_a_flat_list_of_whole_numbers(run_cli, tmp_path, content, named):
    """The lengths file now goes through the one reader of input files (fabric.files) and each JSON item must be
    a whole number >= 1: four of these were tracebacks, one blamed --gpus, three were read as numbers."""
    path = tmp_path / "lengths.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    rc, _, err = run_cli(*_RL, "-p", f"lengths_file={path}")
    one_error(rc, err, "-p lengths_file", named)


def test_rl_lengths_file_lines_and_json_list_give_the_same_iteration(run_cli, tmp_path):
    """Valid spellings of one sample: whitespace-separated lines (CRLF too) and a flat JSON list."""
    lines, listed = tmp_path / "a.txt", tmp_path / "b.json"
    lines.write_bytes(b"100\r\n200 300\r\n")
    listed.write_text("[100, 200, 300.0]")
    docs = []
    for path in (lines, listed):
        rc, out, err = run_cli(*_RL, "-p", f"lengths_file={path}")
        assert rc == 0, err
        docs.append(json.loads(out))
    assert docs[0]["static"] == docs[1]["static"]


@pytest.mark.parametrize("name,text", [
    ("topo.json", None),  # "not valid JSON (Unexpected UTF-8 BOM)"
    ("flows.json", '[{"id": 0, "src": 0, "dst": 1, "bytes": "1MB"}]'),
    ("model.json", '{"hidden": 4096, "layers": 32, "heads": 32, "vocab": 32000, "seq_len": 2048}'),
])
def test_a_json_file_with_a_utf8_byte_order_mark_is_read(run_cli, tmp_path, name, text):
    """The one reader of input files drops a leading BOM (as Notepad writes), for JSON as YAML already did."""
    if text is None:
        path = tmp_path / name
        path.write_text("\ufeff" + open(_topology(tmp_path, lambda d: None)).read(), encoding="utf-8")
        argv = ("build", "--topology", path)
    else:
        path = tmp_path / name
        path.write_text("\ufeff" + text, encoding="utf-8")
        argv = (("simulate", "dgx", "--gpus", "16", "--flows", path) if name == "flows.json" else
                ("mfu", "dgx", "--gpus", "16", "--tp", "8", "--comm", "analytic", "--model", path))
    rc, out, err = run_cli(*argv, "--json")
    assert rc == 0, err
    json.loads(out)


def test_topology_node_ids_equal_as_text_are_refused(run_cli, tmp_path):
    """Ids 1 and "1" were two devices both named "1"; a flows file's `"src": "1"` went to the later in silence."""
    def clash(doc):
        doc["nodes"] += [{"id": 1, "kind": "gpu", "node": 1}, {"id": "1", "kind": "gpu", "node": 1}]
        doc["links"].append({"source": 1, "target": "1", "capacity": 1e9})
    rc, _, err = run_cli("build", "--topology", _topology(tmp_path, clash), "--json")
    one_error(rc, err, "topo.json:nodes[3].id", "same device as 1")


def test_broadcast_chunks_are_bounded_by_the_flows_limit(run_cli):
    """`--chunks 1048576` (the flag's ceiling) on an 8-rank broadcast built 7.3 M flows and ran for minutes; the
    chain has exactly ranks - 1 = 7 flows per piece, so the estimate is checked before any flow is built.  Each
    counts 4x (a pipelined flow is an event of its own): at a limit of 400 flows, 14 pieces (98 flows) run and 15
    (105) are refused; the default limit (8 M, raised from 4 M) still refuses the flag's ceiling."""
    argv = ("--limit", "flows=400", "simulate", "dgx", "--gpus", "16", "--collective", "broadcast", "--size", "1MB",
            "--group-size", "8", "--algorithm", "ring", "--json", "--chunks")
    rc, out, err = run_cli(*argv, "14")
    assert rc == 0, err
    assert json.loads(out)["flows"] == 98
    rc, _, err = run_cli(*argv, "15")
    one_error(rc, err, "--chunks", "420 flows (15 chunks x 7 flows of the chain, each counted 4x", "--limit flows")
    rc, _, err = run_cli(*argv[2:], "1048576")
    one_error(rc, err, "--chunks", "29,360,128 flows")


@pytest.mark.parametrize("extra,flag", [
    (("--flows", "FLOWS", "--groups", "2"), "--groups"),  # ignored without a word
    (("--flows", "FLOWS", "--chunks", "4"), "--chunks"),
    (("--flows", "FLOWS", "--root", "3"), "--root"),
    (("--collective", "all-reduce", "--size", "1MB", "--group-size", "8", "--root", "5"), "--root"),
])
def test_simulate_refuses_a_flag_that_would_be_ignored(run_cli, tmp_path, extra, flag):
    """A flows file has no groups, pieces or root, and only a broadcast has a root: these ran and dropped the flag.
    `--chunks` and `--root` have defaults, so "given" is read from the command line, not from the value."""
    flows = tmp_path / "flows.json"
    flows.write_text('[{"id": 0, "src": 0, "dst": 1, "bytes": "1MB"}]')
    argv = [str(flows) if a == "FLOWS" else a for a in extra]
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", *argv, "--json")
    one_error(rc, err, flag, "only with --collective")


def test_simulate_root_of_a_broadcast_still_runs(run_cli):
    rc, out, err = run_cli("simulate", "dgx", "--gpus", "16", "--collective", "broadcast", "--size", "1MB",
                           "--group-size", "8", "--root", "0", "--json")
    assert rc == 0, err
    json.loads(out)


@pytest.mark.parametrize("extra,flag", [
    (("--trace-servers", "500"), "--trace-servers"),  # faults ran the i.i.d. ratio and dropped it
    (("--trace-mapping", "sample"), "--trace-mapping"),
])
def test_faults_trace_options_without_a_trace_are_refused(run_cli, extra, flag):
    """`fabric orchestrate` refused --trace-servers without --trace; `fabric faults` ignored it, and
    --trace-mapping.  The check is now one (fabric.trace.with_servers) for faults, orchestrate and the table."""
    rc, _, err = run_cli("faults", "dgx", "--gpus", "64", "--tp", "8", "--samples", "5", "--node-fault-ratio",
                         "0.1", *extra, "--json")
    one_error(rc, err, flag, "--trace")


def test_faults_summary_refuses_a_server_count_without_a_trace():
    from fabric.catalog import load_catalog
    from fabric.errors import FabricError
    from solvers.allocation.summary import faults_summary
    from topologies import build

    fab = build("dgx", 16, {}, load_catalog())
    with pytest.raises(FabricError) as exc:
        faults_summary(fab, 8, node_fault_ratio=0.1, trace_servers=500, samples=3)
    assert exc.value.field == "trace_servers"


def test_a_huge_integer_in_any_input_is_cut_short_in_the_error_line(run_cli, tmp_path):
    """A 400-digit event time was printed whole (a 450-character line); every error line now cuts a digit run
    over 40 characters, whichever message quoted it, and the trace names it through checks.shown."""
    path = tmp_path / "tr.json"
    path.write_text('[{"node_id": "a", "event_time": %s, "event_type": "fault_start", '
                    '"fault_type": {"Level": "a", "Class": "b", "Desc": "c"}}]' % ("1" + "0" * 400))
    rc, _, err = run_cli("faults", "dgx", "--gpus", "64", "--tp", "8", "--trace", path, "--json")
    line = one_error(rc, err, "tr.json:events[0].event_time", "number of days")
    assert len(line) < 200
    rc, _, err = run_cli("build", "dgx", "-p", "gpu=" + "9" * 300, "--json")
    line = one_error(rc, err, "-p gpu", "9999...")
    assert len(line) < 200


# ----------------------------------------------------------------------------------------------------- outputs
def test_view_out_naming_an_input_file_is_refused_and_the_input_kept(run_cli, tmp_path):
    """`fabric view --topology topo.json --out topo.json` replaced the topology it drew with the page (exit 0);
    so did `--out` naming the --catalog file.  Both inputs are now compared by file identity (samefile), so
    another spelling of the path (`dir/../dir/topo.json`) is caught too."""
    topo = _topology(tmp_path, lambda d: None)
    before = open(topo).read()
    other = str(tmp_path / ".." / tmp_path.name / "topo.json")
    for out in (topo, other):
        rc, out_, err = run_cli("view", "--topology", topo, "--out", out, "--json")
        one_error(rc, err, "--out", "is the file of --topology")
    assert open(topo).read() == before
    cat = tmp_path / "cat.yaml"
    cat.write_text("schema: 1\ncomponents: {}\n")
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--catalog", cat, "--out", cat, "--json")
    one_error(rc, err, "--out", "is the file of --catalog")
    assert cat.read_text() == "schema: 1\ncomponents: {}\n"


def test_comm_cache_naming_the_model_file_is_refused(run_cli, tmp_path):
    """`fabric mfu --model m.json --comm-cache m.json` read the model, then replaced it with the cache."""
    model = tmp_path / "m.json"
    text = '{"hidden": 4096, "layers": 32, "heads": 32, "vocab": 32000, "seq_len": 2048}'
    model.write_text(text)
    rc, _, err = run_cli("mfu", "dgx", "--gpus", "16", "--tp", "8", "--comm", "analytic", "--model", model,
                         "--comm-cache", model, "--json")
    one_error(rc, err, "--comm-cache", "is the file of --model")
    assert model.read_text() == text


def test_an_output_that_is_a_pipe_or_a_link_loop_is_refused(run_cli, tmp_path):
    """As root, `fabric view --out /dev/full` replaced the device node with a regular file (the page is written
    to a temporary file and moved over the path): a device, pipe or socket is now refused, and a link loop is
    named, before any work.  (A FIFO stands in for the device: tests must not touch /dev.)"""
    import os

    fifo = tmp_path / "fifo.html"
    os.mkfifo(fifo)
    loop = tmp_path / "loop.html"
    loop.symlink_to(loop)
    for out, said in ((fifo, "not a regular file"), (loop, "cannot use")):
        for argv in (("view", "dgx", "--gpus", "16", "--out", out),
                     ("mfu", "dgx", "--gpus", "16", "--tp", "8", "--comm", "analytic", "--model", "llama3-8b",
                      "--comm-cache", out)):
            rc, _, err = run_cli(*argv, "--json")
            one_error(rc, err, "--out" if argv[0] == "view" else "--comm-cache", said)
    assert fifo.is_fifo() and loop.is_symlink()


def test_a_page_written_through_a_link_keeps_the_link(run_cli, tmp_path):
    """A link to a page is followed: its file is replaced, the link stays a link."""
    real = tmp_path / "real.html"
    real.write_text("old")
    link = tmp_path / "link.html"
    link.symlink_to(real)
    rc, out, err = run_cli("view", "dgx", "--gpus", "16", "--out", link, "--json")
    assert rc == 0, err
    assert link.is_symlink() and real.read_text().startswith("<!DOCTYPE html>")


def test_report_out_inside_the_study_must_be_a_page(run_cli, tmp_path):
    """`fabric report DIR --out DIR/architecture=.../batch-000000.parquet` would replace a batch of the rows it
    reads; an --out inside DIR must be a .html file.  A page elsewhere, or the default, is written."""
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: one\ngpus: 72\narchitectures: [{name: nvl-72}]\nmetrics: [cost]\n")
    out = tmp_path / "out"
    assert run_cli("sweep", spec, "--out", out, "--workers", "1")[0] == 0
    batch = next(out.glob("architecture=*/batch-*.parquet"))
    before = batch.read_bytes()
    for target in (batch, out / "_sweep.json", out / "notes.txt"):
        rc, _, err = run_cli("report", out, "--out", target, "--json")
        one_error(rc, err, "--out", "inside DIR")
    assert batch.read_bytes() == before
    rc, got, err = run_cli("report", out, "--out", out / "page.html", "--json")
    assert rc == 0, err
    assert json.loads(got)["out"].endswith("page.html")


# ------------------------------------------------------------------------------------------ ints given as floats
@pytest.mark.parametrize("spelling", ["2.0", "1e0"])
def test_a_whole_number_parameter_given_as_an_integral_float_is_read(run_cli, spelling):
    """`-p k=2.0` was refused as "'2.0' is not a int"; model files already read 1.28256e5 as 128,256.  An integral
    float is the whole number it writes; 2.5, nan and inf are still refused."""
    rc, out, err = run_cli("build", "khop-ring", "--gpus", "64", "-p", f"k={spelling}", "--json")
    assert rc == 0, err
    assert json.loads(out)["params"]["k"] == int(float(spelling))
    for bad in ("2.5", "nan", "inf", "1e400"):
        rc, _, err = run_cli("build", "khop-ring", "--gpus", "64", "-p", f"k={bad}", "--json")
        one_error(rc, err, "-p k", "is not a whole number")


def test_a_study_with_integral_floats_has_the_points_of_its_integers(tmp_path):
    """`gpus: 72.0`, `tp: 8.0` and `seeds: [1.0]` were refused with "must be a whole number; got float 72.0"; they
    now expand to the same points, with the same ids, as 72, 8 and 1."""
    from cli.study.spec import load_study

    ids = []
    for g, tp, seed in (("72", "8", "1"), ("72.0", "8.0", "1.0"), ("7.2e1", "8", "1")):
        path = tmp_path / f"s{len(ids)}.yaml"
        path.write_text(f"name: one\ngpus: {g}\narchitectures: [{{name: nvl-72}}]\nworkloads: [{{name: w, tp: {tp}}}]\n"
                        f"seeds: [{seed}]\nmetrics: [cost]\n")
        ids.append([p.point_id for p in load_study(path).points])
    assert ids[0] == ids[1] == ids[2] and len(ids[0]) == 1


def test_topology_sizes_given_as_integral_floats_are_read(run_cli, tmp_path):
    """`node: 0.0`, `graph.hbd.gpus_per_node: 2.0` and a BOM `count: 2.0` (as pandas writes integers) were refused."""
    def floats(doc):
        for n in doc["nodes"]:
            n["node"] = 0.0
        doc["graph"]["hbd"].update(gpus_per_node=2.0, domain_gpus=2.0)
        doc["graph"]["bom"][0]["count"] = 2.0
    rc, out, err = run_cli("faults", "--topology", _topology(tmp_path, floats), "--tp", "2", "--samples", "3",
                           "--node-fault-ratio", "0.1", "--json")
    assert rc == 0, err
    rc2, out2, err2 = run_cli("faults", "--topology", _topology(tmp_path, lambda d: None), "--tp", "2", "--samples",
                              "3", "--node-fault-ratio", "0.1", "--json")
    assert json.loads(out)["waste_ratio"] == json.loads(out2)["waste_ratio"]


@pytest.mark.parametrize("argv,flag", [
    (("build", "nvl-72", "-p", "size=36"), "-p size"),  # built a 36-GPU NVL under the name nvl-72
    (("cost", "dgx", "--gpus", "72", "--versus", "nvl-72:size=36"), "--versus size"),
])
def test_an_alias_parameter_given_again_is_refused(run_cli, argv, flag):
    """An alias fixes its parameter (nvl-72 is nvl with size=72); the study spec refused overriding it, the CLI
    built the other size.  Checked once, where every build starts (topologies.check_build)."""
    rc, _, err = run_cli(*argv, "--json")
    one_error(rc, err, flag, "by the alias 'nvl-72'", "'nvl'")


# ------------------------------------------------------------------------------- given, then ignored: refused
@pytest.mark.parametrize("argv,flag,said", [
    (("cost", "dgx", "--gpus", "16", "--swing", "0.3"), "--swing", "add --sensitivity"),
    (("mfu", "dgx", "--gpus", "64", "--model", "llama3-8b", "--comm", "analytic", "--tp", "8", "--confirm", "5"),
     "--confirm", "add --search"),
    (("faults", "dgx", "--gpus", "64", "--tp", "8", "--trace", "stepfun", "--samples", "7"), "--samples",
     "replays its own"),
    (("orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "1", "--faulty-nodes", "1", "--seed", "3"),
     "--seed", "--node-fault-ratio or the replay of --trace"),
    (("view", "dgx", "--gpus", "16", "--out", "OUT", "--seed", "3"), "--seed", "ratio > 0"),
])
def test_a_flag_its_mode_does_not_use_is_refused(run_cli, tmp_path, argv, flag, said):
    """Each of these ran and gave the same output as without the flag (found by comparing every flag's JSON
    against the command's without it): the swing of a tornado not drawn, the re-timing of a search not run, a
    sample count for a trace replay, a seed with nothing drawn.  "Given" is read from the command line, so the
    defaults still apply in silence."""
    rc, out, err = run_cli(*[str(tmp_path / "v.html") if a == "OUT" else a for a in argv], "--json")
    one_error(rc, err, flag, said)
    assert not (tmp_path / "v.html").exists()


@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_tor_map_says_no_ids_not_a_folder(run_cli, value):
    """`--tor-map ''` was read as the path '.', the working folder: "'.' is a folder; give a file"."""
    rc, _, err = run_cli(*_KHOP, "--tor-map", value)
    one_error(rc, err, "--tor-map", "no ToR ids given")


@pytest.mark.parametrize("argv,flag", [
    (("simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MB", "--ranks", "\u0663,1",
      "--json"), "--ranks"),
    (_KHOP + ("--tor-map", ",".join(["\u0661"] * 16)), "--tor-map"),  # _KHOP has --json
])
def test_integer_lists_take_ascii_digits_only(run_cli, argv, flag):
    """'\u0663' (Arabic-Indic three) matched \\d and was read as GPU 3 in --ranks and --tor-map, while --gpus refuses
    it: the lists now read ASCII digits only."""
    rc, _, err = run_cli(*argv)
    one_error(rc, err, flag)


@pytest.mark.parametrize("doc,named", [
    ('{"K": [%s, 0]}' % ("9" * 400), "two finite numbers >= 0"),  # OverflowError traceback (float(10**400))
    ('{"K": [0.1, 0.1], "K": [0.2, 0.2]}', "given twice"),  # the later entry was kept in silence
    ("[" * 100_000, "nests deeper"),
])
def test_comm_cache_refuses_a_huge_integer_and_a_key_given_twice(run_cli, tmp_path, doc, named):
    """The comm cache is now parsed by the shared JSON reader (a key given twice refused, nesting bounded), and an
    integer past float range is an entry 'not two finite numbers', not a traceback; the file is left as it was."""
    from tests.cli.test_mfu_cli import KEY

    path = tmp_path / "cc.json"
    path.write_text(doc.replace("K", KEY))
    rc, out, err = run_cli("mfu", "dgx", "--gpus", "64", "--model", "llama3-8b", "--comm", "analytic",
                           "--comm-cache", path, "--json")
    one_error(rc, err, "--comm-cache", named)
    assert path.read_text() == doc.replace("K", KEY) and out == ""


@pytest.mark.parametrize("param,named", [
    ("samples=1000000000", "-p samples"),  # MemoryError, blamed on --gpus
    ("max_tokens=1000000000000", "-p max_tokens"),  # "seq_len: ... must be in 1..16,777,216": no flag sets seq_len
    ("prompt_len=1000000000", "-p prompt_len"),
    ("output_sigma=1e300", "-p output_sigma"),  # exp overflow: a RuntimeWarning on stderr, exit 0
    ("settle_time=1e300", "-p settle_time"),  # every reconfiguring iteration took 1e300 s
    ("circuit_time_limit=1e300", "-p circuit_time_limit"),
])
def test_rl_parameters_are_bounded_before_any_work(run_cli, param, named):
    rc, out, err = run_cli(*_RL, "-p", param)
    one_error(rc, err, named)
    assert out == ""


def test_rl_broadcast_sync_chunks_are_bounded_by_the_flows_limit(run_cli):
    """`-p sync_chunks=1000000000 -p sync=broadcast` with the simulator would build 16 G flows; the chain check
    of the simulator refuses it, named as the RL parameter that sets the pieces."""
    rc, _, err = run_cli("rl", "--gpus", "32", "--model", "llama3-8b", "--fabric", "static", "-p", "sync=broadcast",
                         "-p", "sync_chunks=1000000000", "--json")
    one_error(rc, err, "-p sync_chunks", "flows")


def test_rl_wide_lognormal_is_clipped_without_overflow():
    """Lengths are clipped in log space: a huge sigma gives lengths in [1, max_tokens] and no overflow warning
    (warnings are errors in the tests), and a zero sigma still gives the median exactly."""
    from workloads.rl.lengths import lognormal_lengths

    wide = lognormal_lengths(10_000, 1024, 100.0, 4096, seed=0)
    assert wide.min() == 1 and wide.max() == 4096
    assert lognormal_lengths(4, 100, 0.0, 1000, seed=0).tolist() == [100, 100, 100, 100]


def _alias_bomb() -> str:
    """Nine anchors of nine aliases each: 400 bytes that load as 9**9 = 387 M values."""
    items = ["&a0 [1, 1, 1, 1, 1, 1, 1, 1, 1]"] + [f"&a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    return "[" + ", ".join(items) + "]"


@pytest.mark.parametrize("name,text,argv,flag", [
    ("cat.yaml", "components: {x: {category: switch, description: BOMB}}\n",
     ("cost", "dgx", "--gpus", "16", "--catalog"), "--catalog"),
    ("m.yaml", "hidden: 4096\nlayers: 32\nheads: 32\nvocab: 32000\nseq_len: 2048\nnotes: BOMB\n",
     ("mfu", "dgx", "--gpus", "16", "--tp", "8", "--comm", "analytic", "--model"), "--model"),
    ("s.yaml", "name: one\ngpus: 72\narchitectures: [{name: nvl-72}]\nmetrics: [cost]\nseeds: BOMB\n",
     ("sweep",), "s.yaml"),
])
def test_a_yaml_alias_bomb_is_refused_as_it_is_composed(run_cli, tmp_path, name, text, argv, flag):
    """A catalog description or model note holding an alias bomb loaded at once (PyYAML shares aliased nodes)
    and then the error message's repr of it ran for a minute and wrote a line of gigabytes.  The shared YAML
    loader counts each collection's expanded size as it composes and refuses past the text's length + 10 M."""
    path = tmp_path / name
    path.write_text(text.replace("BOMB", _alias_bomb()))
    out = tmp_path / "out"
    rc, _, err = run_cli(*argv, path, *(("--out", out) if argv == ("sweep",) else ()), "--json")
    line = one_error(rc, err, flag, "aliases expand it to over 10,000")
    assert len(line) < 300 and not out.exists()


def test_yaml_anchors_and_merge_keys_still_load(tmp_path):
    """A few aliases (a merge of shared defaults) are far below the bound and load as before."""
    from fabric.catalog import load_catalog

    path = tmp_path / "cat.yaml"
    path.write_text("components:\n  a: &base {category: switch, ports: {value: 64, source: assumed}}\n"
                    "  b: {<<: *base, description: same ports}\n")
    cat = load_catalog(path)
    assert cat.value("a", "ports") == cat.value("b", "ports") == 64


def test_a_long_list_in_the_wrong_place_is_quoted_short(run_cli, tmp_path):
    """A model file's `notes:` holding 100,000 numbers was quoted whole ("[0, 1, 2, ...] must be a string": a
    600 kB line); file values are now quoted through checks.shown, which abbreviates a list before writing it."""
    path = tmp_path / "m.yaml"
    path.write_text("hidden: 4096\nlayers: 32\nheads: 32\nvocab: 32000\nseq_len: 2048\nnotes: "
                    + json.dumps(list(range(100_000))) + "\n")
    rc, _, err = run_cli("mfu", "dgx", "--gpus", "16", "--tp", "8", "--comm", "analytic", "--model", path, "--json")
    line = one_error(rc, err, "m.yaml:notes", "must be a string")
    assert len(line) < 200


def test_an_error_line_is_one_bounded_line_whatever_it_quotes(run_cli, tmp_path):
    """A 100,000-character -p value was quoted whole, and a path with a line break in it split the error over two
    lines; every error line is now one line of at most 4,000 characters, keeping its start and its end."""
    rc, _, err = run_cli("build", "dgx", "-p", "gpu=" + "x" * 100_000, "--json")
    line = one_error(rc, err, "-p gpu", "use one of a100")
    assert len(line) <= 4000 + len("error: ") + 5
    rc, _, err = run_cli("cost", "dgx", "--gpus", "16", "--catalog", tmp_path / "no\nsuch.yaml", "--json")
    one_error(rc, err, "--catalog", "no such file")


def test_stdout_on_a_full_disk_is_one_line_exit_1(monkeypatch, capsys):
    """`fabric build dgx --json > /dev/full` ended in an OSError traceback (ENOSPC from the JSON write); the
    output, not an input, failed: one line and exit 1.  (In-process, stdout is an object whose writes fail.)"""
    import errno
    import sys

    from cli.app import main

    class Full:
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

        def flush(self):
            pass

    monkeypatch.setattr(sys, "stdout", Full())
    rc = main(["build", "dgx", "--gpus", "16", "--json"])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    assert err.strip().splitlines() == ["error: cannot write the output: No space left on device"]


def test_rl_oversubscription_past_the_radix_names_its_flag(run_cli):
    """`fabric rl --oversubscription 1e6` was blamed on `-p oversubscription`, a parameter rl refuses."""
    rc, _, err = run_cli(*_RL, "--oversubscription", "1e6")
    one_error(rc, err, "--oversubscription", "k-1 = 127")


def test_the_one_exbibyte_bound_can_be_written_as_it_is_named(run_cli):
    """Byte-size flags are refused past "1.15e+18 (1 EiB)", but '1EiB' itself was "unknown size unit": the units
    stopped at P/Pi.  1EiB is now 2**60 bytes exactly (the bound, accepted) and 1.5EiB past it."""
    from fabric.units import parse_bytes

    assert parse_bytes("1EiB") == 2.0**60 and parse_bytes("2EB") == 2e18
    base = ("simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--group-size", "16", "--json")
    rc, out, err = run_cli(*base, "--size", "1EiB")
    assert rc == 0, err
    assert json.loads(out)["size_bytes"] == 2.0**60
    rc, _, err = run_cli(*base, "--size", "1.5EiB")
    one_error(rc, err, "--size", "at most")


@pytest.mark.parametrize("text,value", [
    ("010000", 10000),  # YAML 1.1: octal 4096, in silence
    ("0100", 100),  # YAML 1.1: 64
    ("0o10", 8), ("0x10", 16), ("4_096", 4096), ("+5", 5),
    ("1:00", "1:00"),  # YAML 1.1: sexagesimal 60; a price of `1:00` was $60
    ("0b101", "0b101"),
])
def test_yaml_integers_are_read_as_yaml_1_2(text, value):
    """Every user YAML (catalog, model, study) goes through fabric.files.yaml_loader, which reads integers as YAML
    1.2 does (and JSON): a leading zero is decimal; 0o and 0x spell octal and hex; no sexagesimal or binary."""
    import yaml

    from fabric.files import yaml_loader

    assert yaml.load(f"v: {text}", Loader=yaml_loader())["v"] == value


def test_a_leading_zero_size_in_a_study_is_decimal(tmp_path):
    """`gpus: 0144` was the octal 100 GPUs; it is 144, the number written."""
    from cli.study.spec import load_study

    path = tmp_path / "s.yaml"
    path.write_text("name: one\ngpus: 0144\narchitectures: [{name: nvl-72}]\nmetrics: [cost]\n")
    assert {p.gpus for p in load_study(path).points} == {144}


def test_interleave_past_the_layers_is_refused_as_the_search_bounds_it(run_cli):
    """`--pp 4 --interleave 16` on llama3-8b's 32 layers ran with 64 virtual stages, 32 of them empty, and a
    pipeline bubble divided by 16; the search itself only tries pp x v <= layers + 2.  32 virtual stages run."""
    base = ("mfu", "dgx", "--gpus", "16", "--model", "llama3-8b", "--comm", "analytic", "--tp", "4", "--pp", "4",
            "--json", "--interleave")
    rc, _, err = run_cli(*base, "16")
    one_error(rc, err, "--interleave", "64 virtual stages", "at most 34")
    rc, out, err = run_cli(*base, "8")
    assert rc == 0, err
    assert json.loads(out)["config"].startswith("tp4 pp4 v8")


# ------------------------------------------------------------------------------------------ simulate names
def test_simulate_reads_algorithm_and_collective_case_blind_as_it_reads_protocol(run_cli):
    """`--protocol LL` was read as ll but `--algorithm RING` and `--collective All-Reduce` were refused.

    Checked against the lower-case run: the same collective, so the same time to the last digit.
    """
    base = ("simulate", "dgx", "--gpus", "16", "--size", "1MiB", "--group-size", "16", "--json")
    rc, out, _ = run_cli(*base, "--collective", "all-reduce", "--algorithm", "ring", "--protocol", "ll")
    assert rc == 0
    rc2, out2, err2 = run_cli(*base, "--collective", "All-Reduce", "--algorithm", "RING", "--protocol", "LL")
    assert rc2 == 0, err2
    lower, upper = json.loads(out), json.loads(out2)
    assert (upper["collective"], upper["algorithm"], upper["protocol"]) == ("all-reduce", "ring", "ll")
    assert upper["time_s"] == lower["time_s"]


# ----------------------------------------------------------------------------- orchestrate-table ratio grid
def test_orchestrate_table_ratios_stop_at_max_ratio(run_cli):
    """`--max-ratio 0.1 --step 0.06` rounded 1.67 steps up to 2 and solved a 0.12 column past the maximum (and
    `--max-ratio 1 --step 0.6` died on ratio 1.2 with an error naming the internal `node_fault_ratio`)."""
    rc, out, err = run_cli("orchestrate-table", "--gpus", "64", "--trace", "", "--max-ratio", "0.1", "--step", "0.06",
                           "--samples", "1", "--time-limit", "5", "--json")
    assert rc == 0, err
    assert sorted({r["node_fault_ratio"] for r in json.loads(out)["rows"]}) == [0.0, 0.06]


def test_orchestrate_table_step_finer_than_the_kept_decimals_is_refused(run_cli):
    """The ratios are rounded to 6 decimals: `--max-ratio 1e-9 --step 1e-9` solved ratio 0 twice into one column."""
    rc, _, err = run_cli("orchestrate-table", "--gpus", "64", "--trace", "", "--max-ratio", "1e-9", "--step", "1e-9")
    one_error(rc, err, "--step", ">= 1e-06")


def test_orchestrate_table_column_heads_keep_half_percents_apart():
    """`{:.0%}` wrote the heads of ratios 0, 0.005 and 0.01 as `0% | 0% | 1%`."""
    from solvers.orchestrator.table import table_markdown

    rows = [{"architecture": "a", "source": "iid", "node_fault_ratio": x, "solver": "ilp", "samples": 1,
             "cross_tor_traffic_ratio": 0.0, "gpu_utilization": 1.0, "infeasible": 0} for x in (0.0, 0.005, 0.01)]
    assert "| architecture | solver | 0% | 0.5% | 1% |" in table_markdown(rows)


# ------------------------------------------------------------------------------------- simulate: channels
@pytest.mark.parametrize("extra,flag", [
    (("all-reduce", "--algorithm", "nvls-tree", "--channels", "1"), "--channels"),  # ran 8 channels, said 8
    (("all-reduce", "--algorithm", "hierarchical", "--channels", "4"), "--channels"),
    (("all-gather", "--algorithm", "direct", "--channels", "4"), "--channels"),
    (("all-to-all", "--channels", "4"), "--channels"),
    (("broadcast", "--chunks", "4", "--channels", "4"), "--channels"),  # the flow DAG of 4 pieces has no rings
    (("broadcast", "--algorithm", "tree", "--channels", "4"), "--channels"),
])
def test_simulate_refuses_channels_the_collective_never_reads(run_cli, extra, flag):
    """Each ran to the same time as without the flag (its JSON even said `channels: 8` after `--channels 1`).
    (`--chunks` where nothing is pipelined in pieces is refused by its own check.)"""
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", "--size", "1MiB", "--group-size", "16", "--json",
                         "--collective", *extra)
    one_error(rc, err, flag, "would ignore it")


@pytest.mark.parametrize("extra", [
    ("all-reduce", "--algorithm", "tree", "--protocol", "none", "--chunks", "4"),
    ("broadcast", "--algorithm", "tree", "--chunks", "4"),
    ("all-gather", "--channels", "4"),
    ("all-reduce", "--algorithm", "tree", "--channels", "4"),
    ("broadcast", "--channels", "4"),  # NCCL's ring broadcast: one chain per channel
])
def test_simulate_channels_and_chunks_still_change_the_runs_that_read_them(run_cli, extra):
    base = ("simulate", "dgx", "--gpus", "16", "--size", "64MiB", "--group-size", "16", "--json", "--collective")
    rc, out, err = run_cli(*base, *extra)
    assert rc == 0, err
    flag = extra.index("--chunks") if "--chunks" in extra else extra.index("--channels")
    rc, out2, err = run_cli(*base, *extra[:flag], *extra[flag + 2:])
    assert rc == 0, err
    assert json.loads(out)["time_s"] != json.loads(out2)["time_s"]


# ------------------------------------------------------------------------------------------ flows file ids
@pytest.mark.parametrize("ids,said", [
    ((1, "1"), "'1' reads as the same id as 1"),  # two flows, both printed as 1 in the table
    ((0, 0), "duplicate flow id 0"),
])
def test_flow_ids_equal_as_text_are_refused_naming_the_flow(run_cli, tmp_path, ids, said):
    """Ids 1 and "1" ran as two flows that the table printed alike as `1`; a duplicate was named as `f.json:id`
    without its place (and found by a quadratic scan: 18 s for a duplicate at the end of 40,000 flows)."""
    path = tmp_path / "f.json"
    path.write_text(json.dumps([{"id": ids[0], "src": 0, "dst": 1, "bytes": 1e6},
                                {"id": ids[1], "src": 1, "dst": 2, "bytes": 1e6}]))
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", "--flows", str(path), "--json")
    one_error(rc, err, "f.json:[1].id", said)


# ------------------------------------------------------------------------------------------ topology files
@pytest.mark.parametrize("directed,said", [(True, "is true"), ("yes", "must be true or false")])
def test_a_directed_topology_is_refused_not_read_at_twice_the_bandwidth(run_cli, tmp_path, directed, said):
    """networkx writes a DiGraph with `"directed": true` and one edge per direction; each edge was read as a
    link with its capacity both ways, so a send between the two GPUs ran in half the time (0.53 s, not 1.06 s)."""
    def digraph(doc):
        doc["directed"] = directed
        doc["links"].append({"source": "g1", "target": "g0", "capacity": "450GB/s", "layer": "hbd"})
    rc, _, err = run_cli("simulate", "--topology", _topology(tmp_path, digraph), "--collective", "send-recv",
                         "--size", "1GB", "--ranks", "0,1", "--json")
    one_error(rc, err, "topo.json:directed", said)


def test_an_undirected_topology_written_by_networkx_still_loads(run_cli, tmp_path):
    def undirected(doc):
        doc.update(directed=False, multigraph=True)
    rc, out, err = run_cli("simulate", "--topology", _topology(tmp_path, undirected), "--collective", "send-recv",
                           "--size", "1GB", "--ranks", "0,1", "--json")
    assert rc == 0, err
    assert json.loads(out)["time_s"] > 0


# ------------------------------------------------------------------------------------------ orchestrate --dp
@pytest.mark.parametrize("dp", ["\u0662", "1_0"])
def test_dp_takes_ascii_digits_only(run_cli, dp):
    """int() read '\u0662' (Arabic-Indic two) as DP 2 and '1_0' as DP 10; --gpus and the integer lists refuse both."""
    rc, _, err = run_cli(*_KHOP[:6], "--dp", dp, "--solver", "greedy", "--json")  # _KHOP up to its --dp 1
    one_error(rc, err, "--dp", "whole number >= 1 or 'max'")


def test_dp_bytes_with_dp_1_is_refused_as_pp_bytes_with_pp_1(run_cli):
    """DP 1 has no all-reduce: `--dp 1 --dp-bytes 10GB` ran, echoed dp_bytes_per_gpu and placed 0 DP bytes."""
    rc, _, err = run_cli(*_KHOP, "--dp-bytes", "10GB")
    one_error(rc, err, "--dp-bytes", "with --dp 1 there is none")
    rc, out, err = run_cli(*[("2" if a == "1" else a) for a in _KHOP], "--dp-bytes", "10GB")
    assert rc == 0, err
    assert json.loads(out)["dp_bytes_per_gpu"] == 10e9


# ------------------------------------------------------------------------------------- simulate: seed, groups
@pytest.mark.parametrize("mode", [("--collective", "all-to-all", "--size", "1MiB", "--group-size", "8"),
                                  ("--flows", "FLOWS")])
def test_simulate_seed_without_hash_ecmp_is_refused(run_cli, tmp_path, mode):
    """The ideal split draws nothing: `--seed 5` ran to the same output as `--seed 0`, but for its echo."""
    flows = tmp_path / "flows.json"
    flows.write_text('[{"src": 0, "dst": 9, "bytes": "1MB"}]')
    argv = [str(flows) if a == "FLOWS" else a for a in mode]
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", *argv, "--seed", "5", "--json")
    one_error(rc, err, "--seed", "--ecmp hash")
    rc, out, err = run_cli("simulate", "dgx", "--gpus", "16", *argv, "--ecmp", "hash", "--seed", "5", "--json")
    assert rc == 0, err
    assert json.loads(out)["seed"] == 5


def test_a_group_larger_than_the_fabric_names_group_size_when_groups_is_not_given(run_cli):
    """It said `--groups: 1 groups of 16 GPUs need 16 GPUs` when only --group-size was on the line."""
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "8", "--collective", "all-reduce", "--size", "1MiB",
                         "--group-size", "16", "--json")
    assert "--groups" not in one_error(rc, err, "--group-size", "the topology has 8")


@pytest.mark.parametrize("argv,flag", [(("--ranks", "3"), "--ranks"), (("--group-size", "1", "--groups", "4"),
                                                                       "--group-size")])
def test_a_collective_of_one_rank_is_refused(run_cli, argv, flag):
    """One rank has no flow: it ran in 0 s and the table printed `algbw infPB/s`, `busbw nanB/s` (JSON: null)."""
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MiB", *argv)
    one_error(rc, err, flag, "at least 2 ranks")


def test_placement_without_json_is_refused(run_cli):
    """The table shows no placement: `--placement` without --json printed the same page as without it."""
    rc, _, err = run_cli(*_KHOP[:-1], "--placement")  # _KHOP without its --json
    one_error(rc, err, "--placement", "add --json")


def test_method_dag_on_contending_flows_says_what_to_use(run_cli):
    """It said the DAG pass does not apply, but not what does.  The tree's up and down flows contend; ``auto``
    no longer times a tree here (NCCL's tuner runs the ring at 1 MiB on one node), so the tree is asked for."""
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MiB",
                         "--group-size", "8", "--algorithm", "tree", "--method", "dag", "--json")
    one_error(rc, err, "--method", "use auto or event")


@pytest.mark.parametrize("args, ok", [
    (("--collective", "all-reduce", "--chunks", "4"), False),                      # NCCL ring or tree: ignored
    (("--collective", "all-reduce", "--algorithm", "tree", "--chunks", "4"), False),  # NCCL's tree: ignored
    (("--collective", "all-gather", "--protocol", "none", "--chunks", "4"), False),
    (("--collective", "all-reduce", "--algorithm", "tree", "--protocol", "none", "--chunks", "4"), True),
    (("--collective", "broadcast", "--chunks", "4"), True),
    (("--collective", "broadcast", "--protocol", "none", "--chunks", "4"), True),
])
def test_simulate_chunks_only_where_they_pipeline_something(run_cli, args, ok):
    """`--chunks 4` with an NCCL ring or tree all-reduce ran unchanged (NCCL pipelines by its protocol steps);
    it is refused there and kept where it sets the pieces: a broadcast, a tree all-reduce in the flow model."""
    rc, out, err = run_cli("simulate", "dgx", "--gpus", "16", "--size", "1MiB", "--group-size", "16", *args, "--json")
    if ok:
        assert rc == 0, err
        json.loads(out)
    else:
        one_error(rc, err, "--chunks", "only with --collective broadcast")


@pytest.mark.parametrize("after", [[True], [1.0], [False]])
def test_flow_after_takes_ids_not_values_equal_to_them(run_cli, tmp_path, after):
    """An id must be a string or an integer, but `after: [true]` waited for flow 1 (true == 1), `[1.0]` too and
    `[false]` for flow 0, in silence."""
    path = tmp_path / "f.json"
    path.write_text(json.dumps([{"id": 1, "src": 0, "dst": 1, "bytes": 1e6}, {"id": 0, "src": 2, "dst": 3,
                                                                               "bytes": 1e6},
                                {"id": "x", "src": 1, "dst": 2, "bytes": 1e6, "after": after}]))
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", "--flows", str(path), "--json")
    one_error(rc, err, "f.json:[2].after", "is not a flow id")


def test_a_topology_link_end_of_true_or_false_is_refused(run_cli, tmp_path):
    """A node id refuses true and false, but a link's `"source": false, "target": true` joined nodes 0 and 1 in
    silence (they equal 0 and 1 in the id map)."""
    path = tmp_path / "topo.json"
    path.write_text(json.dumps({"nodes": [{"id": 0, "kind": "gpu", "node": 0}, {"id": 1, "kind": "gpu", "node": 1}],
                                "links": [{"source": False, "target": True, "capacity": 1e9}]}))
    rc, _, err = run_cli("simulate", "--topology", str(path), "--collective", "send-recv", "--size", "1GB",
                         "--ranks", "0,1", "--json")
    one_error(rc, err, "topo.json:links[0].source", "is not a node id")
