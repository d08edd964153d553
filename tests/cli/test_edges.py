"""Regression tests for bad inputs found by the systematic edge probe (after issue 15).

Each case is the rule of the README: exit status 2, exactly one line on
stderr, starting ``error:`` and naming the flag (or file field) at fault, no
traceback, and no output file left behind.
"""

from __future__ import annotations

import json

import numpy as np
import pytest


def one_error(rc: int, err: str, *names: str) -> str:
    """Assert the bad-input rule and return the line."""
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, err
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for name in names:
        assert name in lines[0], f"{name!r} not named: {lines[0]}"
    return lines[0]


# --------------------------------------------------------------------------------------- view --link-loads
def _n_links() -> int:
    from fabric.catalog import load_catalog
    from topologies import build

    return len(build("dgx", 16, {}, load_catalog()).links)


@pytest.mark.parametrize("key,value", [("utilisation", np.nan), ("utilisation", -1.0), ("bytes", np.inf),
                                       ("bytes", 1e300), ("utilisation", -np.inf)])
def test_npz_link_loads_are_range_checked_like_json(run_cli, tmp_path, key, value):
    """An NPZ of loads gets the JSON branch's check: every value a number in [0, 1e30], NaN refused."""
    n = _n_links()
    arr = np.full(n, 0.25)
    arr[3] = value
    path = tmp_path / "loads.npz"
    np.savez(path, **{key: arr})
    out = tmp_path / "v.html"
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--out", out)
    line = one_error(rc, err, "--link-loads", f"loads.npz:{key}[3]")
    assert "[0, 1e+30]" in line
    assert not out.exists()


def test_npz_link_loads_in_range_are_drawn(run_cli, tmp_path):
    """The check does not refuse good loads: 0, 1 and bytes up to the cap are drawn."""
    n = _n_links()
    path = tmp_path / "loads.npz"
    np.savez(path, utilisation=np.linspace(0, 1, n), bytes=np.full(n, 1e30))
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--color-links-by", "load",
                         "--out", tmp_path / "v.html")
    assert rc == 0, err
    assert (tmp_path / "v.html").is_file()


def test_json_link_loads_name_the_first_bad_value(run_cli, tmp_path):
    n = _n_links()
    path = tmp_path / "loads.json"
    path.write_text(json.dumps({"bytes": [1.0] * (n - 1) + [-5.0]}))
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--out", tmp_path / "v.html")
    one_error(rc, err, "--link-loads", f"loads.json:bytes[{n - 1}]")


# --------------------------------------------------------------------------------------------- --limit
@pytest.mark.parametrize("tokens", [["--limit", "gpus=10"], ["--limit=gpus=10"]])
def test_limit_after_the_command_says_where_it_goes(run_cli, tokens):
    """`--limit` is an option of `fabric` itself: after the command, the error says to move it."""
    rc, _, err = run_cli("build", "dgx", "--gpus", "16", *tokens)
    line = one_error(rc, err, "--limit", "before the command")
    assert "fabric --limit NAME=N build" in line


@pytest.mark.parametrize("env", ["bogus", "gpus=nan", "gpus=-1", "memory=1XB", "memory=1GB,,", ",", "memory=1GB,"])
def test_malformed_fabric_limits_environment_is_one_line(run_cli, monkeypatch, env):
    """FABRIC_LIMITS is read before any command: a bad one was a traceback."""
    monkeypatch.setenv("FABRIC_LIMITS", env)
    rc, _, err = run_cli("build", "dgx", "--gpus", "16")
    one_error(rc, err, "FABRIC_LIMITS")


# ------------------------------------------------------------------------------------------- mfu --interleave
def test_mfu_interleave_without_dp_picks_a_dp_the_schedule_accepts(run_cli):
    """--interleave without --dp was refused for any input (the default DP was validated with 1 micro-batch).

    Exact: 64 GPUs / (tp 8 x pp 4) = dp 2, and 64 sequences / (2 x 1) = 32 micro-batches, a multiple of pp 4.
    """
    rc, out, err = run_cli("mfu", "dgx", "--gpus", "64", "--model", "llama3-8b", "--tp", "8", "--pp", "4",
                           "--interleave", "2", "--global-batch", "64", "--micro-batch", "1", "--comm", "analytic",
                           "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["config"].startswith("tp8 pp4 v2 dp2 ")


def test_mfu_interleave_default_dp_skips_a_dp_with_too_few_micro_batches(run_cli):
    """dp 2 would give 12 / 2 = 6 micro-batches, not a multiple of pp 4; dp 1 gives 12, which is."""
    rc, out, err = run_cli("mfu", "dgx", "--gpus", "64", "--model", "llama3-8b", "--tp", "8", "--pp", "4",
                           "--interleave", "2", "--global-batch", "12", "--micro-batch", "1", "--comm", "analytic",
                           "--json")
    assert rc == 0, err
    assert json.loads(out)["config"].startswith("tp8 pp4 v2 dp1 ")


@pytest.mark.parametrize("gpus, batch, tp, ep, config", [
    ("64", "64", "1", "2", "tp1 pp1 dp64 ep2 "), ("64", "64", "1", "8", "tp1 pp1 dp64 ep8 "),
    ("64", "64", "2", "8", "tp2 pp1 dp32 ep8 "),
    ("40", "60", "1", "4", "tp1 pp1 dp20 ep4 ")])  # dp 30 divides the batch but folds no ep-4 group
def test_mfu_ep_without_dp_takes_a_dp_that_folds_the_expert_groups(run_cli, tmp_path, gpus, batch, tp, ep, config):
    """--ep without --dp was refused ("2 does not divide tp x cp x dp = 1"): the rules were checked at dp 1.

    Exact: the largest dp <= GPUs / tp that divides the global batch and is a multiple of ep / gcd(ep, tp)
    (the fold rule), by hand: 64, 64, 32 and 20 (40, 36, 32, 28, 24 do not divide 60).
    """
    import yaml

    model = tmp_path / "moe.yaml"
    model.write_text(yaml.safe_dump({"hidden": 1024, "layers": 4, "heads": 8, "vocab": 32000, "seq_len": 2048,
                                     "swiglu": True, "experts": 8, "top_k": 2, "expert_ffn_hidden": 1024}))
    rc, out, err = run_cli("mfu", "dgx", "--gpus", gpus, "--model", model, "--tp", tp, "--ep", ep,
                           "--global-batch", batch, "--comm", "analytic", "--json")
    assert rc == 0, err
    assert json.loads(out)["config"].startswith(config)


# ----------------------------------------------------------------------------------------------- catalog
def _catalog(tmp_path, doc) -> str:
    import yaml

    path = tmp_path / "cat.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


@pytest.mark.parametrize("doc,field", [
    ({"schema": 1, "components": {"gpu_h100": {"price_usd": {"value": 1e308, "source": "assumed"}}}},
     "cat.yaml:gpu_h100.price_usd.value"),  # was capex null (inf) with exit 0
    ({"schema": 1, "components": {"gpu_h100": {"pricee_usd": {"value": 1, "source": "assumed"}}}},
     "--catalog cat.yaml:gpu_h100.pricee_usd"),  # a misspelt field was ignored: the shipped price stayed
    ({"schema": 1, "components": {"gpu_h100": {"hbm_bytes": {"value": "0GB", "source": "assumed"}}}},
     "--catalog cat.yaml:gpu_h100.hbm_bytes.value"),
    ({"schema": 2, "components": {}}, "cat.yaml:schema"),  # a format this version does not read
    ({"schema": 1, "components": []}, "cat.yaml:components"),  # an empty list was taken for "no entries"
])
def test_catalog_values_and_shape_are_checked(run_cli, tmp_path, doc, field):
    rc, _, err = run_cli("cost", "dgx", "--gpus", "16", "--catalog", _catalog(tmp_path, doc), "--json")
    one_error(rc, err, field)


@pytest.mark.parametrize("arch,param,value", [("nvl", "gpu", "bogus"), ("nvl", "gpu", "fiber"),
                                              ("tpuv4", "chip", "bogus"), ("khop-ring", "trx", "gpu_h100")])
def test_a_catalog_id_parameter_names_its_flag_not_the_catalog(run_cli, arch, param, value):
    """`-p gpu=bogus` blamed `--catalog`; `-p gpu=fiber` (a cable) blamed `catalog.fiber.nic_bandwidth`."""
    rc, _, err = run_cli("cost", arch, "-p", f"{param}={value}")
    line = one_error(rc, err, f"-p {param}", repr(value))
    assert "--catalog" not in line


def test_a_catalog_id_parameter_accepts_any_entry_of_its_category(run_cli):
    rc, out, err = run_cli("cost", "nvl", "--gpus", "72", "-p", "gpu=gpu_b200", "--json")
    assert rc == 0, err
    assert json.loads(out)["params"]["gpu"] == "gpu_b200"


# -------------------------------------------------------------------------------------------- trace files
def _event(t, kind="fault_start", node="a"):
    return {"node_id": node, "event_time": t, "event_type": kind,
            "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "x"}}


@pytest.mark.parametrize("events,field", [
    ([_event(1e308)], "t.json:events[0].event_time"),  # was exit 0 with an overflow warning on stderr
    ([_event(0.5), _event(2e6, "fault_end")], "t.json:events[1].event_time"),
    ([], "t.json"),  # was "--trace: 0.0 must be > 0 and >= the last event time"
    ([_event(0.0)], "t.json"),  # the same message, for a file whose events all fall on day 0
    ([_event(5e-324)], "t.json"),  # was exit 0, faults per node-day inf (null) and a RuntimeWarning on stderr
])
@pytest.mark.parametrize("command", [["faults", "dgx", "--gpus", "64", "--tp", "8", "--no-blast"],
                                     ["goodput", "dgx", "--gpus", "64", "--model", "llama3-8b", "--comm", "analytic",
                                      "--no-search", "--tp", "8", "--pp", "1"]])
def test_trace_times_are_bounded_and_a_trace_has_events(run_cli, tmp_path, events, field, command):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(events))
    rc, _, err = run_cli(*command, "--trace", path)
    one_error(rc, err, field)


def test_an_empty_event_list_with_a_horizon_is_a_fault_free_trace():
    """The library still takes an empty list when the caller gives the span (a fault-free baseline)."""
    from fabric.trace import trace_from_events

    tr = trace_from_events([], "none", n_servers=4, horizon=10.0)
    assert tr.n_servers == 4


# ---------------------------------------------------------------------------------- -p architecture parameters
@pytest.mark.parametrize("argv,names", [
    (["dgx", "--gpus", "64", "-p", "oversubscription=inf"], ["-p oversubscription", "finite"]),  # was a traceback
    (["dgx", "--gpus", "64", "-p", "oversubscription=1e400"], ["-p oversubscription", "finite"]),
    (["fat-tree", "-p", "oversubscription=nan"], ["-p oversubscription", "finite"]),
    (["dgx", "--gpus", "64", "-p", "agg_oversubscription=inf"], ["-p agg_oversubscription"]),  # was exit 0
    (["dgx", "--gpus", "64", "-p", "oversubscription=1e300"], ["-p oversubscription", "k-1 = 127"]),
    (["khop-ring", "--gpus", "64", "-p", "k=17"], ["-p k", "nodes-1 = 15"]),  # was accepted silently
    (["khop-ring", "--gpus", "64", "-p", "k=1000000000"], ["-p k", "1..15"]),  # hung over 60 s
    (["tpuv4", "-p", "cubes=1000000000"], ["-p cubes", "--limit gpus="]),  # 20 s, then "out of memory"
    (["torus", "-p", "dims=100000x100000"], ["-p dims", "--limit gpus="]),
    (["torus", "-p", "gpus_per_host=100000000"], ["-p gpus_per_host", "--limit gpus="]),  # named no flag
    (["rfabric", "--gpus", "64", "-p", "k=1000000000"], ["-p k", "--limit devices="]),  # 20 s before its error
    (["dgx", "--gpus", "64", "-p", "k=128", "-p", "k=64"], ["-p k", "twice"]),  # the last one won, exit 0
])
@pytest.mark.parametrize("command", ["build", "cost"])
def test_architecture_parameters_are_checked(run_cli, argv, names, command):
    rc, out, err = run_cli(command, *argv, "--json")
    one_error(rc, err, *names)
    assert out == ""


@pytest.mark.parametrize("extra,flag", [(["-p", "k=4"], "-p"), (["-p", "k=4", "-p", "foo=1"], "-p"),
                                        (["--gpus", "16"], "--gpus")])
@pytest.mark.parametrize("command", ["build", "cost"])
def test_topology_file_refuses_architecture_flags(run_cli, tmp_path, extra, flag, command):
    """With --topology the file is the fabric: -p and --gpus were ignored (exit 0 on another fabric than asked)."""
    rc, out, err = run_cli(command, "--topology", _topology(tmp_path, lambda d: None), *extra, "--json")
    one_error(rc, err, flag, "not used with --topology")
    assert out == ""


def test_topology_file_alone_still_builds(run_cli, tmp_path):
    rc, out, err = run_cli("build", "--topology", _topology(tmp_path, lambda d: None), "--json")
    assert rc == 0, err
    assert json.loads(out)["gpus"] == 2


# --------------------------------------------------------------------------------------------- --versus
@pytest.mark.parametrize("versus,named", [("", "--versus"), (":gpu=h100", "--versus"), ("bogus", "--versus"),
                                          ("nvl:", "--versus"), ("nvl:size=72,,gpu=gpu_gb200", "--versus"),
                                          ("dgx:k=64,k=128", "--versus k"),
                                          ("dgx:gpu", "--versus"), ("dgx:bogus=1", "--versus bogus"),
                                          ("nvl:size=0", "--versus size"), ("dgx:gpu=bogus", "--versus gpu")])
@pytest.mark.parametrize("command", [["cost", "nvl", "--gpus", "72"],
                                     ["mfu", "dgx", "--gpus", "64", "--model", "llama3-8b", "--tp", "8",
                                      "--comm", "analytic"]])
def test_versus_errors_name_versus(run_cli, versus, named, command):
    """The second architecture's errors named `-p k` or `ARCH` (flags of the first); an empty one was ignored."""
    rc, _, err = run_cli(*command, "--versus", versus)
    line = one_error(rc, err, named)
    assert "-p " not in line and "ARCH:" not in line.split("--versus")[0]


# ------------------------------------------------------------------------------------------ simulate, sizes
SIM = ["simulate", "dgx", "--gpus", "16"]


@pytest.mark.parametrize("argv,flag", [
    (["--collective", "all-reduce", "--ranks", "0-7", "--size", "1e308"], "--size"),  # was exit 0, overflow warning
    (["--collective", "all-reduce", "--ranks", "0-7", "--size", "99999999999999999999999"], "--size"),
    (["--collective", "all-reduce", "--ranks", "0-7", "--size", "1MB", "--channels", "99999999999999999999"],
     "--channels"),  # was a traceback (numpy: maximum allowed dimension exceeded)
])
def test_simulate_sizes_and_channels_are_bounded(run_cli, argv, flag):
    rc, _, err = run_cli(*SIM, *argv)
    one_error(rc, err, flag)


def test_orchestrate_byte_flags_are_bounded(run_cli):
    rc, _, err = run_cli("orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "2", "--solver", "greedy",
                         "--dp-bytes", "1e300")
    one_error(rc, err, "--dp-bytes", "1 EiB")


def test_one_exbibyte_is_still_simulated(run_cli):
    """The bound is 2**60 bytes, inclusive: the largest buffer accepted runs (and its time is finite)."""
    rc, out, err = run_cli(*SIM, "--collective", "all-reduce", "--ranks", "0-7", "--size", str(1 << 60), "--json")
    assert rc == 0, err
    assert 0 < json.loads(out)["time_s"] < float("inf")


@pytest.mark.parametrize("flows,field", [
    ([{"src": 0, "dst": 1, "bytes": 1e308}], "f.json:[0].bytes"),
    ([{"src": 0, "dst": 1, "bytes": 1, "start_s": 1e308}], "f.json:[0].start_s"),  # overflow warning, exit 0
    ([], "f.json"),  # an empty list ran nothing and exited 0
    ([{"src": 3, "dst": 3, "bytes": 1}], "f.json:[0].dst"),  # to itself: no path, it "finished" at once
])
def test_flows_file_values_are_bounded(run_cli, tmp_path, flows, field):
    path = tmp_path / "f.json"
    path.write_text(json.dumps(flows))
    rc, _, err = run_cli(*SIM, "--flows", path)
    one_error(rc, err, field)


@pytest.mark.parametrize("text,flag", [
    ('[{"src": 0, "dst": 1, "bytes": 1, "bytes": 2}]', "--flows"),  # the first size would be dropped in silence
    ('{"model": {"a": 1}, "model": {"b": 2}}', "--flows"),
])
def test_a_json_key_given_twice_is_refused_like_yaml(run_cli, tmp_path, text, flag):
    """``json`` keeps the last of two equal keys; every JSON input now refuses it, as the YAML loader does."""
    path = tmp_path / "f.json"
    path.write_text(text)
    rc, _, err = run_cli(*SIM, "--flows", path)
    line = one_error(rc, err, flag, "f.json")
    assert "is given twice" in line


def test_a_json_key_given_twice_is_refused_in_a_model_file(run_cli, tmp_path):
    path = tmp_path / "m.json"
    path.write_text('{"name": "x", "layers": 2, "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000, '
                    '"seq_len": 128}')
    rc, _, err = run_cli("mfu", "dgx", "--gpus", "8", "--model", path)
    assert "'layers' is given twice" in one_error(rc, err, "--model")


# ------------------------------------------------------------------------------------- orchestrate, rl
def test_orchestrate_table_subnormal_step_is_refused(run_cli):
    """--step 1e-320 passed the (0, 1] rule, then max_ratio / step = inf overflowed int(): a traceback."""
    rc, _, err = run_cli("orchestrate-table", "--gpus", "64", "--step", "1e-320")
    one_error(rc, err, "--step")


def test_orchestrate_table_refuses_a_run_without_bound(run_cli):
    """--samples 1000000 started 11 million ILP solves per architecture; now refused before any fabric is built
    (--trace-points has its own bound of 10,000)."""
    rc, out, err = run_cli("orchestrate-table", "--gpus", "64", "--samples", "1000000", "--json")
    assert "placements per architecture; at most 10,000" in one_error(rc, err, "--samples")
    assert out == ""


def test_orchestrate_infeasible_says_why_on_one_line(run_cli):
    """Exit 1 (infeasible, documented) printed the JSON but nothing on stderr; now one line with the reason."""
    rc, out, err = run_cli("orchestrate", "dgx", "--gpus", "64", "--tp", "8", "--dp", "4", "--count", "2",
                           "--solver", "greedy", "--faulty-nodes", "1,3", "--json")
    assert rc == 1
    assert json.loads(out)["status"] == "infeasible"
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: infeasible: "), err


def test_rl_reconfig_time_is_bounded(run_cli):
    """1e308 s was accepted and reported as the reconfiguration time."""
    rc, _, err = run_cli("rl", "--model", "llama3-8b", "--gpus", "64", "--comm", "analytic",
                         "--reconfig-time", "1e308")
    one_error(rc, err, "--reconfig-time")


@pytest.mark.parametrize("make,named", [
    (lambda p, n: np.savez(p, utilisation=np.full(n, 0.5 + 1j)), "loads.npz:utilisation"),  # a ComplexWarning
    (lambda p, n: np.savez(p, bytes=np.array(["a"] * n)), "loads.npz:bytes"),
    (lambda p, n: p.write_text("not a zip"), "loads.npz"),  # numpy called it pickled data
])
def test_npz_link_loads_of_the_wrong_kind(run_cli, tmp_path, make, named):
    path = tmp_path / "loads.npz"
    make(path, _n_links())
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--out", tmp_path / "v.html")
    one_error(rc, err, "--link-loads", named)
    assert not (tmp_path / "v.html").exists()


@pytest.mark.parametrize("key", ["bytes", "utilisation"])
def test_json_link_loads_past_a_floats_range_are_refused(run_cli, tmp_path, key):
    """An integer past a float's range (10**400) was an OverflowError traceback, exit 1; it is out of range."""
    path = tmp_path / "loads.json"
    path.write_text('{"%s": [0.5, %s]}' % (key, "1" + "0" * 400))
    out = tmp_path / "v.html"
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--out", out)
    one_error(rc, err, "--link-loads", f"loads.json:{key}[1]")
    assert not out.exists()


def test_json_link_loads_of_booleans_are_refused(run_cli, tmp_path):
    path = tmp_path / "loads.json"
    path.write_text(json.dumps({"utilisation": [True] * _n_links()}))
    rc, _, err = run_cli("view", "dgx", "--gpus", "16", "--link-loads", path, "--out", tmp_path / "v.html")
    one_error(rc, err, "loads.json:utilisation")


# ------------------------------------------------------------------------------------------------ goodput
@pytest.mark.parametrize("item", ["restart=1e308", "checkpoint_interval=1e308", "replace=99999999999d"])
def test_goodput_recovery_times_are_bounded(run_cli, item):
    """1e308 s was accepted (exit 0); the bound is MAX_SECONDS, checked before the fabric is built."""
    rc, _, err = run_cli("goodput", "dgx", "--gpus", "64", "--model", "llama3-8b", "--recovery", item)
    one_error(rc, err, "--recovery " + item.split("=")[0])


@pytest.mark.parametrize("item", ["checkpoint_interval=0", "checkpoint_interval=0s", "checkpoint_interval=0.0min"])
def test_goodput_checkpoint_interval_must_be_positive(run_cli, item):
    """checkpoint_interval=0 was accepted (exit 0) with goodput 28 %, above 1 s or 5 s: no stall was charged."""
    rc, out, err = run_cli("goodput", "dgx", "--gpus", "64", "--model", "llama3-8b", "--comm", "analytic",
                           "--recovery", item)
    line = one_error(rc, err, "--recovery checkpoint_interval", "> 0")
    assert out == "" and "Traceback" not in line


# ------------------------------------------------------------------------------------------ topology files
def _topology(tmp_path, mutate) -> str:
    doc = {"graph": {"hbd": {"kind": "switch_domain", "gpus_per_node": 2, "domain_gpus": 2},
                     "bom": [{"item": "gpu_h100", "scope": "compute", "count": 2}]},
           "nodes": [{"id": "g0", "kind": "gpu", "node": 0}, {"id": "g1", "kind": "gpu", "node": 0}],
           "links": [{"source": "g0", "target": "g1", "capacity": "450GB/s", "latency": "1us", "layer": "hbd"}]}
    mutate(doc)
    path = tmp_path / "topo.json"
    path.write_text(json.dumps(doc))
    return str(path)


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["links"][0].update(latency="1e308s"), "topo.json:links[0].latency"),  # time_s null, exit 0
    (lambda d: d["links"][0].update(capacity=1e-300), "topo.json:links[0].capacity"),  # time 1e306 s, overflow
    (lambda d: d["links"][0].update(capacity=1e308), "topo.json:links[0].capacity"),
    (lambda d: d["graph"]["bom"][0].update(count=10**30), "topo.json:graph.bom[0].count"),
    (lambda d: d["nodes"][0].update(node=10**30), "topo.json:nodes[0].node"),  # was an OverflowError traceback
    (lambda d: d["nodes"][1].update(rack=2**31), "topo.json:nodes[1].rack"),
])
def test_topology_link_values_are_bounded(run_cli, tmp_path, mutate, field):
    rc, _, err = run_cli("simulate", "--topology", _topology(tmp_path, mutate), "--collective", "all-reduce",
                         "--size", "1MB", "--ranks", "0-1")
    one_error(rc, err, field)


def test_a_topology_without_hbd_takes_faults_at_tp_1(run_cli, tmp_path):
    """No graph.hbd (kind none, TP 1) and a node of 2 GPUs: faults refused it as "hbd: a node's GPUs span two
    switch domains" (a field of no flag or file).  Exact: no faults, both GPUs form a group of 1."""
    path = _topology(tmp_path, lambda d: d.pop("graph"))
    rc, out, err = run_cli("faults", "--topology", path, "--tp", "1", "--node-fault-ratio", "0", "--samples", "2",
                           "--no-blast", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["baseline"]["usable_gpus"] == 2 and d["waste_ratio"]["mean"] == 0.0


@pytest.mark.parametrize("hbd", [{"kind": "khop_line", "gpus_per_node": 2, "domain_gpus": 2, "k": 2},
                                 {"kind": "khop_line", "gpus_per_node": 2, "domain_gpus": 2, "k": 0},
                                 {"kind": "ocs_cube", "gpus_per_node": 2, "domain_gpus": 2, "cube_gpus": 2}])
def test_a_topology_hbd_the_solvers_refuse_names_the_topology_flag(run_cli, tmp_path, hbd):
    """A k-hop line without positions, k 0, a cube without cube groups: the error named "hbd" (no flag)."""
    path = _topology(tmp_path, lambda d: d["graph"].update(hbd=hbd))
    rc, _, err = run_cli("faults", "--topology", path, "--tp", "2", "--node-fault-ratio", "0.1", "--samples", "2")
    one_error(rc, err, "--topology")


def test_a_topology_the_orchestrator_cannot_place_on_names_the_file_not_arch(run_cli, tmp_path):
    """GPUs without a ToR: the error named ARCH, which the command line did not give (the file is the fabric)."""
    path = _topology(tmp_path, lambda d: None)
    rc, _, err = run_cli("orchestrate", "--topology", path, "--tp", "2", "--dp", "1", "--solver", "greedy")
    assert one_error(rc, err, "--topology", "ToR").startswith("error: --topology:")


@pytest.mark.parametrize("command", [["mfu", "--model", "llama3-8b", "--comm", "analytic"],
                                     ["goodput", "--model", "llama3-8b", "--comm", "analytic"]])
def test_a_topology_without_a_gpu_item_names_its_bill_of_materials(run_cli, tmp_path, command):
    """No graph: the error was "gpu: cannot tell..." (goodput) or "-p gpu" (mfu), which --topology refuses."""
    path = _topology(tmp_path, lambda d: d.pop("graph"))
    rc, _, err = run_cli(*command, "--topology", path)
    assert one_error(rc, err, "gpu_h100").startswith("error: topo.json:graph.bom:")


def test_a_topology_without_hbd_is_tp_1_for_the_search_and_goodput_alike(run_cli, tmp_path):
    """No graph.hbd: the default domain was every GPU, so the search chose TP 2 and goodput's placement then
    refused it ("--tp: 2 exceeds the largest TP group", with no --tp given).  Now TP 1, as a fat-tree's."""
    import yaml

    path = _topology(tmp_path, lambda d: d["graph"].pop("hbd"))
    model = tmp_path / "tiny.yaml"
    model.write_text(yaml.safe_dump({"hidden": 1024, "layers": 4, "heads": 8, "vocab": 32000, "seq_len": 2048}))
    rc, out, err = run_cli("goodput", "--topology", path, "--model", model, "--comm", "analytic", "--no-series",
                           "--json")
    assert rc == 0, err
    assert json.loads(out)["config"].startswith("tp1 ")


def test_topology_link_at_the_bounds_is_simulated(run_cli, tmp_path):
    """1 B/s and 1,000 s are accepted: 1 MB over one link at 1 B/s takes about 1e6 s (finite)."""
    path = _topology(tmp_path, lambda d: d["links"][0].update(capacity=1.0, latency="1000s"))
    rc, out, err = run_cli("simulate", "--topology", path, "--collective", "all-reduce", "--size", "1MB",
                           "--ranks", "0-1", "--protocol", "none", "--json")
    assert rc == 0, err
    assert 1e5 < json.loads(out)["time_s"] < 1e7


@pytest.mark.parametrize("command", [["mfu", "--model", "llama3-8b", "--comm", "analytic"],
                                     ["mfu", "--model", "llama3-8b", "--comm", "sim"],
                                     ["goodput", "--model", "llama3-8b", "--comm", "analytic"]])
def test_a_topology_whose_gpus_cannot_reach_each_other(run_cli, tmp_path, command):
    """No links: the analytic timing divided by a zero bandwidth (RuntimeWarnings on stderr, goodput exit 0)."""
    path = _topology(tmp_path, lambda d: d.update(links=[]))
    rc, _, err = run_cli(*command, "--topology", path)
    one_error(rc, err, "--topology")


# ------------------------------------------------------------------------------------------------ sweep
def test_sweep_out_empty_is_refused_not_the_working_folder(run_cli, tmp_path, monkeypatch):
    """``--out ''`` would be Path('.') (the working folder): refused with one line, nothing written there."""
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "s.yaml"
    spec.write_text("gpus: 64\narchitectures: [{name: dgx}]\nmetrics: [cost]\n")
    rc, out, err = run_cli("sweep", spec, "--out", "")
    one_error(rc, err, "--out", "empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.yaml"]


def test_sweep_of_a_folder_says_it_is_a_folder(run_cli, tmp_path):
    rc, out, err = run_cli("sweep", tmp_path)
    one_error(rc, err, "SPEC", "is a folder")


@pytest.mark.parametrize("extra,flag", [(["--pp", 2, "--first-stage-layers", 0], "--first-stage-layers"),
                                        (["--pp", 2, "--last-stage-layers", 40], "--last-stage-layers"),
                                        (["--pp", 2, "--first-stage-layers", 40], "--first-stage-layers"),
                                        (["--pp", 1, "--last-stage-layers", 4], "--last-stage-layers")])
def test_uneven_stage_errors_name_the_flag_given(run_cli, extra, flag):
    """The stage-layer count the caller gave is named, not --pp or the other stage's flag."""
    rc, out, err = run_cli("mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--tp", 8, "--comm", "analytic", *extra)
    one_error(rc, err, flag)


def test_fp8_with_the_2021_runtime_is_refused(run_cli):
    rc, out, err = run_cli("mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--tp", 8, "--runtime", "megatron-2021",
                           "--fp8", "--comm", "analytic")
    one_error(rc, err, "--fp8", "megatron-2021")


@pytest.mark.parametrize("value", ["0", "-1"])
@pytest.mark.parametrize("command", ["build", "cost"])
def test_rfabric_nodes_per_rack_must_be_positive(run_cli, command, value):
    """0 was taken (a numpy divide-by-zero warning, exit 0), -1 silently; dgx and khop-ring refused both."""
    rc, _, err = run_cli(command, "rfabric", "--gpus", "64", "-p", f"nodes_per_rack={value}")
    one_error(rc, err, "-p nodes_per_rack", "> 0")


@pytest.mark.parametrize("value", ["4294967296", "-1"])
def test_rl_seed_is_in_the_range_of_every_seed(run_cli, value):
    """-p seed=4294967296 was taken (and changed the sample); every --seed is in [0, 2^32)."""
    rc, _, err = run_cli("rl", "--model", "llama3-8b", "--gpus", "32", "--comm", "analytic", "-p", f"seed={value}")
    one_error(rc, err, "-p seed", "4294967295")


@pytest.mark.parametrize("flag", ["--account-for-embedding", "--account-for-loss"])
def test_mfu_account_for_a_stage_needs_a_pipeline(run_cli, flag):
    """At pp 1 the one stage holds the embedding and the loss: the switch changed nothing and was taken in silence
    (as --first-stage-layers is refused there)."""
    rc, _, err = run_cli("mfu", "dgx", "--gpus", "64", "--model", "llama3-8b", "--comm", "analytic", "--tp", "8", flag)
    one_error(rc, err, flag, "--pp > 1")


def test_flow_after_names_each_flow_once(run_cli, tmp_path):
    """`after: [0, 0]` was taken (it waited once); lists are strict, as --faulty-nodes 1,1 is refused."""
    path = tmp_path / "f.json"
    path.write_text(json.dumps([{"id": 0, "src": 0, "dst": 1, "bytes": 1e6},
                                {"id": "x", "src": 1, "dst": 2, "bytes": 1e6, "after": [0, 0]}]))
    rc, _, err = run_cli("simulate", "dgx", "--gpus", "16", "--flows", str(path), "--json")
    one_error(rc, err, "f.json:[1].after", "twice")


def test_a_torus_of_zero_bandwidth_links_is_refused(run_cli):
    """0 Gbps links built a torus every load divided by: a numpy divide warning and exit 0."""
    rc, _, err = run_cli("simulate", "torus", "-p", "dims=4x4", "-p", "link_bandwidth=0Gbps", "--collective",
                         "all-reduce", "--size", "1MiB", "--group-size", "16")
    one_error(rc, err, "-p link_bandwidth", "more than 0")


def test_mfu_search_with_a_pinned_size_no_layout_has_names_it(run_cli):
    """--tp 1024 --search on 64 GPUs blamed --model and memory ("0 candidates out of memory"): it is --tp."""
    rc, _, err = run_cli("mfu", "dgx", "--gpus", "64", "--model", "llama3-8b", "--comm", "analytic", "--tp", "1024",
                         "--search")
    one_error(rc, err, "--tp", "tp 1024")


@pytest.mark.parametrize("sources, named", [(["--trace", "stepfun", "--node-fault-ratio", "0.1"], "--trace"),
                                            (["--faulty-nodes", "1", "--node-fault-ratio", "0.1"], "--node-fault-ratio"),
                                            (["--faulty-nodes", "1", "--trace", "stepfun"], "--trace")])
def test_orchestrate_two_fault_sources_name_one_given(run_cli, sources, named):
    """Two fault sources named --faulty-nodes even when it was not given; now the second of those given (in the
    order faulty nodes, ratio, trace), as `fabric faults` names --trace."""
    rc, _, err = run_cli("orchestrate", "khop-ring", "--gpus", "256", "--tp", "8", "--dp", "2", *sources)
    assert one_error(rc, err, "give one of").startswith(f"error: {named}: ")


@pytest.mark.parametrize("command", ["build", "cost"])
def test_khop_radix_too_small_for_one_node_names_dcn_k(run_cli, command):
    """dcn_k=4 leaves 2 ToR downlinks for a node of 4 NICs; the error named -p nodes_per_tor, which was not given."""
    rc, _, err = run_cli(command, "khop-ring", "--gpus", "64", "-p", "dcn_k=4")
    one_error(rc, err, "-p dcn_k", "2 ToR downlinks")
    rc, _, err = run_cli(command, "khop-ring", "--gpus", "64", "-p", "dcn_k=4", "-p", "nodes_per_tor=1")
    one_error(rc, err, "-p nodes_per_tor", "2 downlinks")
