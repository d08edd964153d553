"""`fabric list / build / cost / compare` through the real entry point."""

import json

import pytest

BUILD_COUNTS = {"gpus", "hosts", "nodes", "packet_switches", "switch_chips", "ocs", "ocs_ports", "optical_links",
                "electrical_links", "transceivers"}


def test_list_json(run_cli):
    rc, out, _ = run_cli("list", "--json")
    data = json.loads(out)
    names = {a["name"] for a in data["architectures"]}
    assert {"fat-tree", "dgx", "nvl", "tpuv4", "khop-ring", "torus", "rfabric"} <= names
    khop = next(a for a in data["architectures"] if a["name"] == "khop-ring")
    assert any(p["name"] == "k" and p["default"] == 2 for p in khop["params"])


def test_build_json_has_the_promised_keys(run_cli):
    rc, out, err = run_cli("build", "fat-tree", "-p", "k=8", "-p", "tiers=3", "--json")
    assert rc == 0, err
    data = json.loads(out)
    assert {"architecture", "gpus", "params", "counts", "inventory"} <= set(data)
    assert BUILD_COUNTS <= set(data["counts"])
    assert data["counts"]["hosts"] == 128 and data["counts"]["packet_switches"] == 80


def test_cost_json(run_cli):
    rc, out, err = run_cli("cost", "nvl", "-p", "size=72", "--gpus", "144", "--json")
    assert rc == 0, err
    d = json.loads(out)
    for key in ("gpus", "capex_usd", "capex_per_gpu_usd", "power_w", "power_per_gpu_w", "by_scope", "breakdown"):
        assert key in d
    assert set(d["by_scope"]) == {"compute", "hbd", "dcn"}
    for s in d["by_scope"].values():
        assert {"capex_usd", "capex_per_gpu_usd", "power_w"} <= set(s)
    row = d["breakdown"][0]
    assert {"item", "count", "unit_price_usd", "capex_usd", "price_source"} <= set(row)


def test_cost_sensitivity_versus(run_cli):
    rc, out, err = run_cli("cost", "khop-ring", "--gpus", "512", "--sensitivity", "--versus", "nvl:size=72", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert 0.25 < d["hbd_capex_ratio"] < 0.4
    top = d["sensitivity"][0]
    assert top["ratio"]["low"] < top["ratio"]["base"] < top["ratio"]["high"] or \
        top["ratio"]["low"] > top["ratio"]["base"] > top["ratio"]["high"]


def test_human_tables(run_cli):
    rc, out, _ = run_cli("cost", "dgx", "--gpus", "64", "--sensitivity")
    assert rc == 0 and "breakdown" in out and "sensitivity" in out
    rc, out, _ = run_cli("compare", "--gpus", "576")
    assert rc == 0 and "khop-ring k=2" in out and "nvl-72" in out


def test_topology_file(run_cli, tmp_path):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({
        "nodes": [{"id": "a", "kind": "gpu", "node": 0}, {"id": "b", "kind": "gpu", "node": 1},
                  {"id": "s", "kind": "tor"}],
        "links": [{"source": "a", "target": "s", "capacity": "400Gbps"}, {"source": "b", "target": "s",
                                                                           "capacity": 5e10, "latency": "1us"}]}))
    rc, out, err = run_cli("build", "--topology", p, "--json")
    assert rc == 0, err
    assert json.loads(out)["counts"]["gpus"] == 2


@pytest.mark.parametrize("argv, needle", [
    (["build", "warpdrive"], "ARCH"),
    (["build", "fat-tree", "-p", "k=7"], "-p k"),
    (["build", "nvl", "-p", "size=64"], "-p size"),
    (["build", "khop-ring", "-p", "k=0"], "-p k"),
    (["build", "dgx", "--gpus", "0"], "--gpus"),
    (["build", "dgx", "-p", "colour=red"], "-p colour"),
    (["build", "dgx", "-p", "noequals"], "-p"),
    (["cost", "dgx", "--catalog", "/nonexistent.yaml"], "--catalog"),
    (["cost", "dgx", "--swing", "2"], "--swing"),
    (["build", "dgx", "--frobnicate"], "frobnicate"),
    (["build"], "ARCH"),
])
def test_bad_input_one_line_exit_2(run_cli, argv, needle):
    rc, out, err = run_cli(*argv)
    assert rc == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]


@pytest.mark.parametrize("content, needle", [
    ("{not json", "not valid JSON"),
    ('{"nodes": [{"id": "a", "kind": "gpu"}], "links": [{"source": "a", "target": "zz", "capacity": 1}]}',
     "links[0].target"),
    ('{"nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "tor"}], "links": [{"source": "a", "target": "b"}]}',
     "links[0].capacity"),
    ('{"nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "tor"}], '
     '"links": [{"source": "a", "target": "b", "capacity": "9 parsecs"}]}', "links[0].capacity"),
])
def test_bad_topology_file(run_cli, tmp_path, content, needle):
    p = tmp_path / "bad.json"
    p.write_text(content)
    rc, _, err = run_cli("build", "--topology", p)
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_bad_catalog_file(run_cli, tmp_path):
    p = tmp_path / "cat.yaml"
    p.write_text("components: {gpu_h100: {price_usd: 5}}")
    rc, _, err = run_cli("cost", "dgx", "--gpus", "8", "--catalog", p)
    assert rc == 2 and "gpu_h100.price_usd" in err
