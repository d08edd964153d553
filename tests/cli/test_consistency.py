"""Relations between the outputs of different commands for the same inputs (metamorphic checks).

Each relation is exact by construction, so each is asserted with ``==`` on the JSON numbers:

* a sweep point's Parquet row, the ``fabric results --json`` text of it and the single command run on that
  point (``fabric cost`` / ``faults`` / ``orchestrate`` with the same parameters, fault ratio, samples and seed)
  hold the same doubles: the sweep calls the same library functions on the same fault draw, and JSON carries a
  double exactly when it is written with Python's shortest round-trip text;
* the same command is byte-identical across equivalent spellings of its input (``--size 1GiB`` and
  ``1073741824``, ``-p`` flags in either order, a recovery time as ``30min``, ``1800`` or ``0.5h``): the edges
  parse them to the same SI float before anything is computed.
"""

from __future__ import annotations

import json
import math

import pytest

from cli.study.store import read_results
from tests.cli.study_fixture import run_small_study

GPUS = 256
PARAMS = ["-p", "nodes_per_tor=8"]
SPEC = {
    "name": "consistency",
    "gpus": GPUS,
    "architectures": [{"name": "khop-ring", "params": {"nodes_per_tor": 8}}],
    "workloads": [{"name": "tp16", "tp": 16}],
    "faults": {"ratios": [0.0, 0.05, 0.1]},
    "seeds": [1],
    "metrics": ["cost", {"faults": {"samples": 60}}, {"orchestrator": {"dp": "2", "solver": "greedy"}}],
}


@pytest.fixture(scope="module")
def study(tmp_path_factory):
    return run_small_study(tmp_path_factory.mktemp("consistency"), SPEC)


def _floats(row: dict) -> dict:
    return {k: v for k, v in row.items() if isinstance(v, float) and math.isfinite(v)}


def test_results_json_holds_the_parquet_doubles_exactly(study, run_cli):
    """`results --rows --json` wrote 15 significant digits (pandas' encoder): 0.029917436528296 for the
    0.029917436528296273 that the Parquet and `fabric faults --json` hold."""
    rc, out, err = run_cli("results", study, "--rows", "--json")
    assert rc == 0, err
    rows = sorted(json.loads(out)["rows"], key=lambda r: r["point_index"])
    df = read_results(study).sort_values("point_index")
    assert len(rows) == len(df) == 3
    for got, want in zip(rows, df.to_dict("records")):
        floats = _floats(want)
        assert floats and {k: got[k] for k in floats} == floats
    rc, out, err = run_cli("results", study, "--sql", "SELECT faults_waste_ratio_mean AS w, 1/3 AS third FROM results "
                                                     "ORDER BY point_index", "--json")
    assert rc == 0, err
    sql_rows = json.loads(out)["rows"]
    assert [r["w"] for r in sql_rows] == df["faults_waste_ratio_mean"].tolist()
    assert all(r["third"] == 1 / 3 for r in sql_rows)


def test_sweep_point_equals_the_single_commands(study, run_cli):
    """Each point's cost, waste and placement numbers equal `fabric cost / faults / orchestrate --json` run on the
    same architecture, parameters, fault ratio, samples and seed (the sweep shares one fault draw per point)."""
    rc, out, err = run_cli("results", study, "--rows", "--json")
    assert rc == 0, err
    rows = json.loads(out)["rows"]
    rc, out, err = run_cli("cost", "khop-ring", "--gpus", GPUS, *PARAMS, "--json")
    assert rc == 0, err
    cost = json.loads(out)
    for row in rows:
        assert [row[f"cost_{k}"] for k in ("capex_usd", "capex_per_gpu_usd", "power_w", "power_per_gpu_w")] == \
            [cost[k] for k in ("capex_usd", "capex_per_gpu_usd", "power_w", "power_per_gpu_w")]
        ratio, seed = row["fault_ratio"], row["seed"]
        rc, out, err = run_cli("faults", "khop-ring", "--gpus", GPUS, *PARAMS, "--tp", 16, "--node-fault-ratio",
                               ratio, "--samples", 60, "--seed", seed, "--json")
        assert rc == 0, err
        faults = json.loads(out)
        for stat in ("mean", "p50", "p99", "min", "max", "pooled"):
            assert row[f"faults_waste_ratio_{stat}"] == faults["waste_ratio"][stat]
        assert row["faults_usable_gpus_mean"] == faults["usable_gpus"]["mean"]
        assert row["faults_blast_radius_node_mean"] == faults["blast_radius"]["node"]["mean"]
        rc, out, err = run_cli("orchestrate", "khop-ring", "--gpus", GPUS, *PARAMS, "--tp", 16, "--dp", 2,
                               "--node-fault-ratio", ratio, "--seed", seed, "--solver", "greedy", "--json")
        assert rc == 0, err
        orch = json.loads(out)
        for k in ("used_gpus", "gpu_utilization", "cross_tor_bytes", "cross_tor_traffic_ratio", "tp_groups",
                  "faulty_nodes"):
            assert row[f"orchestrator_{k}"] == orch[k], k


# ------------------------------------------------------------------------------------- equivalent spellings
@pytest.mark.parametrize("command,variants", [
    (["simulate", "dgx", "--gpus", "16", "--collective", "all-reduce", "--group-size", "16"],
     [["--size", "1GiB"], ["--size", "1073741824"], ["--size", "1024MiB"]]),
    (["cost", "khop-ring", "--gpus", "512"],
     [["-p", "k=3", "-p", "nodes_per_tor=8"], ["-p", "nodes_per_tor=8", "-p", "k=3"]]),
    (["cost", "dgx", "--gpus", "512"], [["-p", "oversubscription=2"], ["-p", "oversubscription=2.0"]]),
    (["goodput", "dgx", "--gpus", "128", "--model", "llama3-8b", "--no-series"],
     [["--recovery", "checkpoint_interval=30min", "--recovery", "restart=10min"],
      ["--recovery", "restart=600", "--recovery", "checkpoint_interval=1800"],
      ["--recovery", "checkpoint_interval=0.5h", "--recovery", "restart=600s"]]),
])
def test_equivalent_spellings_give_byte_identical_json(run_cli, command, variants):
    outs = []
    for extra in variants:
        rc, out, err = run_cli(*command, *extra, "--json")
        assert rc == 0, err
        outs.append(out)
    assert all(o == outs[0] for o in outs[1:])


def test_a_whole_number_for_a_text_parameter_is_its_text(tmp_path, run_cli, capsys):
    """`tiers: 3` in a spec (or the API) was refused ('3 is not a str') where `-p tiers=3` builds: one design point,
    two spellings.  Both now give the same Fabric, and the sweep's row the CLI's cost."""
    from fabric.catalog import load_catalog
    from fabric.cost import cost_of
    from topologies import build

    cat = load_catalog()
    as_int, as_text = (build("dgx", gpus=128, params={"tiers": t}, catalog=cat) for t in (3, "3"))
    assert as_int.params == as_text.params and cost_of(as_int, cat) == cost_of(as_text, cat)
    out = run_small_study(tmp_path, {"name": "tiers", "gpus": 128, "architectures": [
        {"name": "dgx", "params": {"tiers": 3}}], "metrics": ["cost"]})
    capsys.readouterr()  # the sweep's own JSON
    rc, rows, err = run_cli("results", out, "--rows", "--json")
    assert rc == 0, err
    rc, one, err = run_cli("cost", "dgx", "--gpus", 128, "-p", "tiers=3", "--json")
    assert rc == 0, err
    assert json.loads(rows)["rows"][0]["cost_capex_usd"] == json.loads(one)["capex_usd"]


def test_a_curve_point_is_the_single_ratio_run(run_cli):
    """`--node-fault-ratio 0:0.1:0.01` draws each ratio as `--node-fault-ratio R` alone does (its own seeded
    draw per ratio), so every point of the curve is that run's JSON, number for number."""
    base = ["faults", "khop-ring", "--gpus", 256, "--tp", 16, "--samples", 40, "--seed", 2, "--json"]
    rc, out, err = run_cli(*base, "--node-fault-ratio", "0:0.1:0.01")
    assert rc == 0, err
    curve = {c["node_fault_ratio"]: c for c in json.loads(out)["curve"]}
    for ratio in (0.03, 0.07, 0.1):
        rc, one, err = run_cli(*base, "--node-fault-ratio", ratio)
        assert rc == 0, err
        single = json.loads(one)
        for key in ("waste_ratio", "usable_gpus", "healthy_gpus"):
            assert curve[ratio][key] == single[key], (ratio, key)
