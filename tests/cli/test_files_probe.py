"""Regression tests for bad input files found by the input-file probe (every file kind, malformed content).

Each case is the rule of the README: exit status 2, one ``error:`` line naming the flag or the file field at
fault, no traceback, nothing half-written.
"""

from __future__ import annotations

import json

import pytest

from tests.cli.test_edges import _topology, one_error


def test_a_capacity_in_other_scripts_digits_is_refused(run_cli, tmp_path):
    """Before: "\u0664\u0665\u0660GB/s" (Arabic-Indic digits) in a topology file was read as 450 GB/s and built."""
    path = _topology(tmp_path, lambda d: d["links"][0].update(capacity="\u0664\u0665\u0660GB/s"))
    rc, _, err = run_cli("build", "--topology", path, "--json")
    one_error(rc, err, "topo.json:links[0].capacity")


def test_a_flow_size_in_other_scripts_digits_is_refused(run_cli, tmp_path):
    """Before: a flows file's "bytes": "\u0661\u0660\u0660\u0660" was read as 1000 bytes and simulated."""
    path = tmp_path / "flows.json"
    path.write_text(json.dumps([{"src": 0, "dst": 1, "bytes": "\u0661\u0660\u0660\u0660"}]))
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", "--flows", path, "--json")
    one_error(rc, err, "flows.json:[0].bytes")


SPEC = """name: t
gpus: 16
architectures:
  - name: dgx
    params: {nodes_per_rack: NPR}
workloads: [{name: tp8, tp: 8}]
faults: {ratios: [0.0]}
seeds: [0]
metrics: [cost]
"""


def test_a_spec_parameter_in_other_scripts_digits_is_refused(run_cli, tmp_path):
    """Before: ``params: {nodes_per_rack: '\u0664'}`` in a study spec ran the sweep with 4 nodes per rack."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("NPR", "'\u0664'"), encoding="utf-8")
    out = tmp_path / "res"
    rc, _, err = run_cli("sweep", spec, "--out", out, "--workers", "1")
    one_error(rc, err, "s.yaml:architectures[0].params.nodes_per_rack", "whole number")
    assert not out.exists()


def test_a_spec_parameter_in_ascii_digits_still_runs(run_cli, tmp_path):
    """The check does not refuse a number given as text: ``'4'`` is 4 nodes per rack, as on the command line."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("NPR", "'4'"))
    rc, _, err = run_cli("sweep", spec, "--out", tmp_path / "res", "--workers", "1")
    assert rc == 0, err


def _rename(where: str, old: str, new: str):
    """A mutation of the test topology: key ``old`` of part ``where`` (top, graph, node, link) renamed ``new``."""
    def mutate(doc):
        part = {"top": doc, "graph": doc["graph"], "node": doc["nodes"][0], "link": doc["links"][0]}[where]
        part[new] = part.pop(old)
    return mutate


@pytest.mark.parametrize("where,old,new,field", [
    ("link", "latency", "latncy", "topo.json:links[0].latncy"),  # built with latency 0
    ("link", "layer", "layr", "topo.json:links[0].layr"),  # built as a DCN link: no HBD bandwidth
    ("node", "node", "nod", "topo.json:nodes[0].nod"),  # the GPU belonged to no node
    ("graph", "hbd", "hbds", "topo.json:graph.hbds"),  # no HBD: TP 1
    ("top", "graph", "grpah", "topo.json:grpah"),  # no hbd and no bom: cost 0, TP 1
])
def test_a_misspelt_topology_key_is_refused(run_cli, tmp_path, where, old, new, field):
    """Before: a misspelt optional key was kept as a graph attribute and the key it meant took its default in
    silence (exit 0, another fabric than the file describes)."""
    rc, _, err = run_cli("build", "--topology", _topology(tmp_path, _rename(where, old, new)), "--json")
    line = one_error(rc, err, field)
    assert f"did you mean {old!r}" in line


def test_a_topology_with_attributes_of_its_own_still_builds(run_cli, tmp_path):
    """Keys far from every known one are a graph's own attributes (networkx keeps any), and still load."""
    def mutate(doc):
        doc["graph"]["name"] = "mine"
        doc["nodes"][0].update(pos=[0, 1], label="GPU 0", weight=2)
        doc["links"][0].update(weight=1.5, color="red", name="cable-7")
    rc, out, err = run_cli("build", "--topology", _topology(tmp_path, mutate), "--json")
    assert rc == 0, err
    assert json.loads(out)["counts"]["gpus"] == 2


def test_a_negative_zero_price_is_zero(run_cli, tmp_path):
    """Before: a catalog's ``price_usd: {value: -0.0}`` passed ``>= 0`` and the cost table printed "$-0"."""
    cat = tmp_path / "cat.yaml"
    cat.write_text("schema: 1\ncomponents:\n  gpu_h100:\n    price_usd: {value: -0.0, source: assumed}\n")
    rc, out, err = run_cli("cost", "dgx", "--gpus", "16", "--catalog", cat, "--json")
    assert rc == 0, err
    assert "-0" not in out
    rc, out, err = run_cli("cost", "dgx", "--gpus", "16", "--catalog", cat)
    assert rc == 0 and "$-0" not in out, out


def test_a_negative_zero_flow_start_is_zero(run_cli, tmp_path):
    """Before: a flow's ``"start_s": -0.0`` was written back as ``"release_s": -0.0``."""
    path = tmp_path / "flows.json"
    path.write_text('[{"src": 0, "dst": 1, "bytes": 1000, "start_s": -0.0}]')
    rc, out, err = run_cli("simulate", "dgx", "--gpus", "16", "--flows", path, "--json")
    assert rc == 0, err
    assert "-0.0" not in out


def test_a_negative_zero_fault_ratio_of_a_spec_is_zero(run_cli, tmp_path):
    """Before: ``ratios: [-0.0, ...]`` in a study spec was written in the rows as a fault ratio of -0.0."""
    import math

    from cli.study.store import read_results

    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("NPR", "4").replace("ratios: [0.0]", "ratios: [-0.0]"))
    rc, _, err = run_cli("sweep", spec, "--out", tmp_path / "res", "--workers", "1")
    assert rc == 0, err
    ratios = read_results(tmp_path / "res")["fault_ratio"].tolist()
    assert ratios == [0.0] and math.copysign(1, ratios[0]) == 1


@pytest.mark.parametrize("key", ["catalog", "traces"])
def test_a_spec_file_name_too_long_names_the_field(run_cli, tmp_path, key):
    """Before: a spec's ``catalog:`` or ``faults.traces`` name too long for the file system raised OSError from
    ``is_file()``: exit 1 and a 5,000-character line naming no field."""
    name = "x" * 5000 + (".yaml" if key == "catalog" else ".json")
    text = SPEC.replace("NPR", "4")
    text = text + f"catalog: {name}\n" if key == "catalog" else text.replace("ratios: [0.0]", f"traces: [{name}]")
    spec = tmp_path / "s.yaml"
    spec.write_text(text)
    rc, _, err = run_cli("sweep", spec, "--out", tmp_path / "res", "--workers", "1")
    field = "s.yaml:catalog" if key == "catalog" else "s.yaml:faults.traces[0]"
    line = one_error(rc, err, field, "File name too long")
    assert len(line) < 300
    assert not (tmp_path / "res").exists()


def test_an_input_that_is_a_pipe_is_named_as_such(run_cli, tmp_path):
    """Before: a FIFO (or /dev/null) given as an input file was refused as "no such file", though it exists."""
    import os

    fifo = tmp_path / "cat.yaml"
    os.mkfifo(fifo)
    rc, _, err = run_cli("cost", "dgx", "--gpus", "16", "--catalog", fifo)
    one_error(rc, err, "--catalog", "not a regular file")
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("NPR", "4") + f"catalog: {fifo}\n")
    rc, _, err = run_cli("sweep", spec, "--out", tmp_path / "res", "--workers", "1")
    one_error(rc, err, "s.yaml:catalog", "not a regular file")
    npz = tmp_path / "loads.npz"
    os.mkfifo(npz)
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", npz, "--out", tmp_path / "v.html")
    one_error(rc, err, "--link-loads", "not a regular file")
    assert not (tmp_path / "v.html").exists()


def _npz_member(path, name: str, header: dict, data: bytes) -> None:
    """An NPZ file of one member ``name`` with the .npy ``header`` and ``data`` given as they are."""
    import io
    import zipfile

    import numpy as np

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, header)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(name, buf.getvalue() + data)


def test_link_loads_npz_declaring_a_huge_array_is_refused_before_loading(run_cli, tmp_path):
    """Before: a 200-byte NPZ whose header declares 10**11 float64 values (800 GB) made numpy allocate them:
    "error: out of memory (MemoryError); try a smaller --gpus", naming no flag and blaming --gpus."""
    path = tmp_path / "loads.npz"
    _npz_member(path, "utilisation.npy", {"descr": "<f8", "fortran_order": False, "shape": (10**11,)}, bytes(64))
    out = tmp_path / "v.html"
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--out", out)
    one_error(rc, err, "--link-loads", "loads.npz:utilisation", "100,000,000,000 values")
    assert not out.exists()


def test_link_loads_npz_member_that_is_no_array_is_refused(run_cli, tmp_path):
    """Before: a member ``utilisation.npy`` that is no .npy array came back from numpy as bytes, refused as
    "'bytes' object has no attribute 'dtype'"."""
    import zipfile

    path = tmp_path / "loads.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("utilisation.npy", b"x")
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--out", tmp_path / "v.html")
    line = one_error(rc, err, "--link-loads", "loads.npz")
    assert "attribute" not in line


def test_a_yaml_input_is_refused_before_parsing_past_the_memory_limit(run_cli, tmp_path):
    """Before: YAML was parsed whatever its size (PyYAML keeps ~340 B per character of a flow list): a 20 MB spec
    ``seeds: [0, 0, ...]`` parsed for 8 minutes into 6.7 GB before any check; a 1 GiB one would need ~340 GiB.
    Here the limit is lowered so that a 10 kB spec stands for it."""
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC.replace("NPR", "4").replace("seeds: [0]", "seeds: [" + ", ".join(["0"] * 5000) + "]"))
    out = tmp_path / "res"
    rc, _, err = run_cli("--limit", "memory=1MB", "sweep", spec, "--out", out, "--workers", "1")
    one_error(rc, err, "s.yaml", "parsed YAML", "--limit memory=")
    assert not out.exists()
    cat = tmp_path / "cat.yaml"
    cat.write_text("schema: 1\ncomponents: {}\n# " + "x" * 10_000 + "\n")
    rc, _, err = run_cli("--limit", "memory=1MB", "cost", "dgx", "--gpus", "16", "--catalog", cat)
    one_error(rc, err, "--catalog", "parsed YAML")


def test_a_json_input_is_refused_before_parsing_past_the_memory_limit(run_cli, tmp_path):
    """Before: a JSON topology, trace or loads file was parsed whatever its size (up to 24 B per character: a
    1 GiB file of empty objects parses into ~24 GiB).  The limit is lowered so that a 100 kB file stands for it."""
    path = _topology(tmp_path, lambda d: d["graph"].update(name="x" * 100_000))
    rc, _, err = run_cli("--limit", "memory=1MB", "build", "--topology", path)
    one_error(rc, err, "--topology", "parsed JSON")
    rc, _, err = run_cli("build", "--topology", path, "--json")  # the default limit reads it
    assert rc == 0, err


@pytest.mark.parametrize("as_json", [True, False])
def test_a_tor_map_file_longer_than_the_gpu_limit_is_refused_by_its_length(run_cli, tmp_path, as_json):
    """Before: every item of a --tor-map file was scanned, joined and parsed before its length was compared with
    the line: a 40 MB file of 20,000,000 ids took minutes.  It is counted first, against the ``gpus`` limit (one
    ToR per line position); the limit is lowered so that 1,000 ids stand for it."""
    path = tmp_path / ("map.json" if as_json else "map.txt")
    path.write_text(json.dumps([0] * 1000) if as_json else " ".join(["0"] * 1000))
    rc, _, err = run_cli("--limit", "gpus=100", "orchestrate", "khop-ring", "--gpus", "64", "--tp", "8", "--dp", "1",
                         "--tor-map", path)
    one_error(rc, err, "--tor-map", "1,000", "--limit gpus=")


@pytest.mark.parametrize("value", ["yes", 1, [True]])
def test_a_topology_multigraph_of_the_wrong_type_is_refused(run_cli, tmp_path, value):
    """Before: ``"multigraph": "yes"`` was ignored in silence, while ``directed`` of the wrong type was refused."""
    rc, _, err = run_cli("build", "--topology", _topology(tmp_path, lambda d: d.update(multigraph=value)), "--json")
    one_error(rc, err, "topo.json:multigraph", "true or false")


@pytest.mark.parametrize("value", [True, False, None])
def test_a_topology_multigraph_flag_still_builds(run_cli, tmp_path, value):
    """networkx writes ``multigraph`` true or false (a Fabric's export is a MultiGraph); both load."""
    rc, _, err = run_cli("build", "--topology", _topology(tmp_path, lambda d: d.update(multigraph=value)), "--json")
    assert rc == 0, err


def test_flag_ratios_and_limits_in_other_scripts_digits_are_refused(run_cli):
    """Before: --node-fault-ratio '\u0660.\u0660\u0665' ran at 0.05 and --limit gpus=\u0661\u0660\u0660 set 100
    (float() reads other scripts' digits), while --gpus '\u0663' was refused."""
    rc, _, err = run_cli("faults", "dgx", "--gpus", "16", "--tp", "8", "--node-fault-ratio", "\u0660.\u0660\u0665",
                         "--json")
    one_error(rc, err, "--node-fault-ratio")
    rc, _, err = run_cli("--limit", "gpus=\u0661\u0660\u0660", "cost", "dgx", "--gpus", "16", "--json")
    one_error(rc, err, "--limit")
    rc, out, _ = run_cli("--limit", "gpus=100", "faults", "dgx", "--gpus", "16", "--tp", "8",
                         "--node-fault-ratio", "-0", "--json")
    assert rc == 0 and json.loads(out)  # the ASCII forms still run


def test_an_output_under_a_file_is_named_a_file_not_missing(run_cli, tmp_path):
    """Before: ``--out afile/x.html`` (``afile`` a file) said "directory 'afile' does not exist", which it does."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--out", afile / "x.html")
    one_error(rc, err, "--out", "is a file, not a directory")
    from cli.common import check_writable_file
    from fabric.errors import FabricError

    with pytest.raises(FabricError, match="is a file, not a folder"):
        check_writable_file(afile / "c.json", "--comm-cache")


@pytest.mark.parametrize("command", ["results", "report"])
def test_a_sweep_folder_that_is_a_file_is_named_a_file(run_cli, tmp_path, command):
    """Before: ``fabric results afile`` (a file) said "no such folder: afile"."""
    afile = tmp_path / "afile"
    afile.write_text("x")
    rc, _, err = run_cli(command, afile)
    one_error(rc, err, "DIR", "is a file, not a sweep folder")
