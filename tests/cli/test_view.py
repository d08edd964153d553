"""`fabric view`: the standalone page, composition of faults and TP groups, and bad input."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import numpy as np
import pytest

from cli.view import compose
from fabric.errors import FabricError
from fabric.viewer import build_scene, style
from fabric.viewer.server import ViewerApp


def test_view_writes_a_standalone_page(run_cli, tmp_path):
    out = tmp_path / "khop.html"
    rc, stdout, err = run_cli("view", "khop-ring", "--gpus", "64", "--node-fault-ratio", "0.1", "--seed", "3",
                              "--tp", "8", "--out", out, "--json")
    assert rc == 0, err
    data = json.loads(stdout)
    assert data["out"] == str(out) and data["gpus"] == 64 and data["glyphs"] == 65
    assert data["faulty_gpus"] == 8 and data["tp_groups"] == 7
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and "khop-ring: 64 GPUs" in html
    assert [p.name for p in tmp_path.iterdir()] == ["khop.html"]


def test_canvas_backend(run_cli, tmp_path):
    out = tmp_path / "v.html"
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--backend", "canvas", "--out", out)
    assert rc == 0, err
    assert '"output_backend":"webgl"' not in out.read_text().replace(" ", "")  # canvas is Bokeh's default
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--out", out)
    assert '"output_backend":"webgl"' in out.read_text().replace(" ", "")


def test_same_seed_same_faults_other_seed_other_faults():
    def faulty(seed):
        fab, overlay, _ = compose({"architecture": "dgx", "gpus": 512, "fault_ratio": 0.1, "seed": seed})
        return overlay.faulty_nodes.tolist()

    assert faulty(1) == faulty(1)
    assert faulty(1) != faulty(2)


def test_khop_rings_bypass_faulty_nodes():
    for seed in range(20):  # find a fault set whose rings must skip a node (deterministic search)
        fab, overlay, _ = compose({"architecture": "khop-ring", "gpus": 128, "k": 2, "tp": 12,
                                   "fault_ratio": 0.06, "seed": seed})
        scene = build_scene(fab, overlay)
        if (scene.edges["cls"] == style.SKIP).any():
            break
    else:
        pytest.fail("no seed gave a ring around a faulty node")
    faulty = set(overlay.faulty_nodes.tolist())
    node = fab.group("node")
    for group in overlay.tp_groups:
        assert not faulty & set(node[group].tolist())  # rings hold healthy GPUs only
    lit = fab.configuration.active_candidates
    assert lit.size > 0
    ends = set(node[fab.links.src[lit]].tolist()) | set(node[fab.links.dst[lit]].tolist())
    assert not faulty & ends  # lit paths skip faulty nodes


def test_link_loads_from_the_simulator(run_cli, tmp_path):
    sim = tmp_path / "sim.json"
    rc, stdout, err = run_cli("simulate", "fat-tree", "--collective", "all-to-all", "--size", "16MiB",
                              "--group-size", "128", "--links", "--json")
    assert rc == 0, err
    sim.write_text(stdout)
    out = tmp_path / "ft.html"
    rc, _, err = run_cli("view", "fat-tree", "--link-loads", sim, "--color-links-by", "load", "--out", out)
    assert rc == 0, err
    assert "busiest drawn link at" in out.read_text()


def test_circuit_loads_and_records_without_ends_reach_the_links(run_cli, tmp_path):
    """Since the src/dst check (74e596d) the loads were stored only under it: a circuit's record (`link: null`,
    TPUv4's OCS) and a record without src/dst were dropped, so `--color-links-by load` drew every OCS fibre idle."""
    from cli.link_loads import read_link_loads
    from topologies import build

    rc, stdout, err = run_cli("simulate", "tpuv4", "--gpus", "64", "--collective", "all-reduce", "--size", "1MiB",
                              "--group-size", "64", "--links", "--json")
    assert rc == 0, err
    sim = tmp_path / "sim.json"
    sim.write_text(stdout)
    records = json.loads(stdout)["links"]
    circuit = next(r for r in records if r["link"] is None)
    util, nbytes = read_link_loads(sim, len(build("tpuv4", 64).links))
    assert all(util[j] == circuit["utilisation"] > 0 for j in circuit["circuit_links"])
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"links": [{"link": 5, "utilisation": 0.5, "bytes_fwd": 10.0, "bytes_rev": 2.0}]}))
    util, nbytes = read_link_loads(bare, 96)
    assert (util[5], nbytes[5]) == (0.5, 12.0)


def test_link_loads_with_records_and_arrays_are_refused(run_cli, tmp_path):
    """`{"links": [], "utilisation": [...]}` drew every link idle: the records won and the arrays were dropped."""
    path = tmp_path / "loads.json"
    path.write_text(json.dumps({"links": [], "utilisation": [0.5] * 96}))
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--color-links-by", "load",
                         "--out", tmp_path / "v.html")
    assert rc == 2 and err.count("\n") == 1 and "--link-loads" in err and "one of the two" in err, err
    assert not (tmp_path / "v.html").exists()


def test_link_loads_from_a_file(run_cli, tmp_path):
    from topologies import build

    n = len(build("fat-tree", None, {}).links)
    loads = tmp_path / "loads.json"
    util = np.linspace(0, 1, n)
    loads.write_text(json.dumps({"utilisation": util.tolist(), "bytes": (util * 1e9).tolist()}))
    out = tmp_path / "ft.html"
    rc, _, err = run_cli("view", "fat-tree", "--link-loads", loads, "--color-links-by", "load", "--out", out)
    assert rc == 0, err
    assert "load &gt;= 80%" in out.read_text() or "load >= 80%" in out.read_text()

    loads.write_text(json.dumps({"utilisation": [0.5]}))
    rc, _, err = run_cli("view", "fat-tree", "--link-loads", loads, "--out", tmp_path / "bad.html")
    assert rc == 2 and "--link-loads" in err and "physical links" in err
    assert not (tmp_path / "bad.html").exists()


@pytest.mark.parametrize("doc, said", [
    ({"utilisation": None}, "loads.json:utilisation: must be a list"),  # was "'utilisation' has 1 values"
    ("nested", "loads.json:utilisation: must be a flat list"),  # was "has 96 values; the fabric has 96"
])
def test_link_loads_arrays_that_are_not_flat_lists(run_cli, tmp_path, doc, said):
    from topologies import build

    n = len(build("fat-tree", None, {}).links)
    loads = tmp_path / "loads.json"
    loads.write_text(json.dumps({"utilisation": [[0.5]] * n} if doc == "nested" else doc))
    rc, _, err = run_cli("view", "fat-tree", "--link-loads", loads, "--out", tmp_path / "bad.html")
    assert rc == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "bad.html").exists()


@pytest.mark.parametrize("args, field", [
    (["nvl-99"], "ARCH"),
    (["dgx", "--node-fault-ratio", "1.5"], "--node-fault-ratio"),
    (["dgx", "--node-fault-ratio", "-0.1"], "--node-fault-ratio"),
    (["khop-ring", "--tp", "6"], "--tp"),            # not whole 4-GPU nodes
    (["dgx", "--tp", "16"], "--tp"),                 # larger than an 8-GPU DGX
    (["dgx", "--color-links-by", "heat"], "--color-links-by"),
    (["dgx", "--level", "pod"], "level"),
    (["dgx", "--backend", "svg"], "--backend"),
    (["khop-ring", "-p", "k=0"], "-p k"),
    (["dgx", "--color-links-by", "load"], "--color-links-by"),  # no --link-loads: every link drawn idle
])
def test_bad_input_is_one_line_exit_2_and_writes_nothing(run_cli, tmp_path, args, field):
    out = tmp_path / "view.html"
    rc, stdout, err = run_cli("view", *args, "--out", out)
    assert rc == 2
    assert err.startswith("error: ") and err.count("\n") == 1 and field in err
    assert "Traceback" not in err and stdout == ""
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("out, message", [(None, "--out"), ("missing/view.html", "does not exist"),
                                          (".", "is a directory")])
def test_missing_or_unwritable_out(run_cli, tmp_path, out, message):
    args = ["view", "dgx"] + ([] if out is None else ["--out", tmp_path / out])
    rc, _, err = run_cli(*args)
    assert rc == 2 and message in err and err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_out_and_serve_together_are_refused(run_cli, tmp_path):
    rc, _, err = run_cli("view", "dgx", "--serve", "--out", tmp_path / "v.html")
    assert rc == 2 and "not both" in err


@pytest.mark.parametrize("args, words", [
    (["--out", "{out}", "--port", "8000"], "--port: is the port of --serve"),
    (["--serve", "--level", "rack"], "--level: forces the level of detail of the page of --out"),
    (["--serve", "--backend", "canvas"], "--backend: chooses how the page of --out draws"),
])
def test_an_option_of_the_other_mode_is_refused_not_ignored(run_cli, tmp_path, args, words):
    """--port with --out, --level or --backend with --serve: each was silently ignored (the page wrote, the app
    served), so a user who asked for a rack-level app or a canvas app did not get one and was not told."""
    out = tmp_path / "view.html"
    with socket.socket() as busy:  # were the option ignored again, the app would fail on this port, not hang
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = ["--port", str(busy.getsockname()[1])] if "--serve" in args else []
        rc, stdout, err = run_cli("view", "dgx", "--gpus", "16", *[a.format(out=out) for a in args], *port)
    assert rc == 2 and err.startswith(f"error: {words}") and err.count("\n") == 1 and stdout == ""
    assert list(tmp_path.iterdir()) == []


def test_an_existing_page_survives_a_failed_run(run_cli, tmp_path):
    out = tmp_path / "view.html"
    out.write_text("previous")
    rc, _, _ = run_cli("view", "dgx", "--tp", "16", "--out", out)
    assert rc == 2 and out.read_text() == "previous"


def test_served_app_with_the_real_composition_refuses_bad_k_and_tp():
    from topologies import ARCHITECTURES

    app = ViewerApp(compose, sorted(ARCHITECTURES), {"architecture": "khop-ring", "gpus": 64, "k": 2, "tp": 8,
                                                       "fault_ratio": 0.05, "seed": 1})
    view = app.view
    assert not app.update(tp=6)            # TP must be whole 4-GPU nodes
    assert "tp: 6" in app.error.text and app.view is view
    assert not app.update(tp=1024)         # larger than the ring
    assert app.view is view
    assert app.update(k=3, tp=12)
    assert app.error.text == "" and app.view is not view


def test_compose_rejects_a_bad_ratio():
    with pytest.raises(FabricError, match="node-fault-ratio"):
        compose({"architecture": "dgx", "fault_ratio": 3})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_runs_on_localhost_until_interrupted():
    port = _free_port()
    cmd = [sys.executable, "-c", "import sys; from cli.app import main; sys.exit(main(sys.argv[1:]))",
           "view", "khop-ring", "--gpus", "64", "--serve", "--port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=30) as resp:
                    assert resp.status == 200 and "bokeh" in resp.read().decode().lower()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read()
                assert time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = proc.stderr.read()
    assert f"http://127.0.0.1:{port}/" in err and "Traceback" not in err
    proc.stdout.close()
    proc.stderr.close()


def test_serve_on_a_busy_port_is_a_one_line_error(run_cli):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--serve", "--port", busy.getsockname()[1])
    assert rc == 2 and err.startswith("error: --port") and err.count("\n") == 1


def test_link_loads_of_another_fabric_are_refused(run_cli, tmp_path):
    """A 16-GPU DGX simulation's link ids are all in range on a 72-GPU NVL-72, but they name other devices: the
    record's src/dst are checked against the link (it was drawn as that fabric's load)."""
    sim = tmp_path / "sim.json"
    rc, stdout, err = run_cli("simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--size", "1MiB",
                              "--group-size", "16", "--links", "--json")
    assert rc == 0, err
    sim.write_text(stdout)
    out = tmp_path / "v.html"
    rc, _, err = run_cli("view", "nvl-72", "--gpus", "72", "--link-loads", sim, "--out", out)
    assert rc == 2 and err.count("\n") == 1 and "simulated on another" in err and not out.exists()
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", sim, "--out", out)
    assert rc == 0 and out.exists(), err


def test_serve_has_no_json_summary(run_cli):
    rc, stdout, err = run_cli("view", "dgx", "--serve", "--json")
    assert rc == 2 and "--json" in err and stdout == ""


def test_a_khop_line_read_from_a_topology_file_takes_tp_groups(run_cli, tmp_path):
    """An exported k-hop ring holds its lit links only (no candidate optical paths): `view --topology FILE --tp 8`
    stopped on `error: rings: hop 0->1 (gap 1) is not an optical path of a k=2 ring`, naming no flag.  It now draws
    the groups the architecture itself forms."""
    import networkx as nx

    from topologies import build

    path = tmp_path / "khop.json"
    path.write_text(json.dumps(nx.node_link_data(build("khop-ring", 32).to_networkx(active=True), edges="links")))
    argv = ("--out", tmp_path / "v.html", "--tp", "8", "--node-fault-ratio", "0.2", "--json")
    rc, out, err = run_cli("view", "--topology", path, *argv)
    assert rc == 0, err
    rc, ref, err = run_cli("view", "khop-ring", "--gpus", "32", *argv)
    assert rc == 0, err
    got, want = json.loads(out), json.loads(ref)
    assert (got["tp_groups"], got["faulty_gpus"]) == (want["tp_groups"], want["faulty_gpus"])


def test_max_glyphs_with_a_forced_level_is_refused(run_cli, tmp_path):
    """The budget only chooses the level: `--level node --max-glyphs 5` wrote the page of `--level node`, byte for
    byte."""
    out = tmp_path / "v.html"
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--level", "node", "--max-glyphs", "5", "--out", out)
    assert rc == 2 and err.count("\n") == 1 and err.startswith("error: --max-glyphs") and "--level" in err, err
    assert not out.exists()
