"""Cost relations, recomputed from the Fabric's bill of materials and the catalog entries themselves.

* capex = sum over BOM lines of count x catalog price; power likewise (a linear model: exact up to float sums);
* per GPU = total / GPUs, and the scopes (compute, HBD, DCN) add up to the total;
* sensitivity is linear in each price: high - base = base - low = swing x (that item's capex) / GPUs, on the
  metrics whose scope holds the item and 0 elsewhere; the printed table rounds the JSON's numbers;
* ``fabric compare`` rows equal ``fabric cost`` of the same architecture and GPU count.
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from fabric.catalog import load_catalog
from fabric.cost import cost_of, price_sensitivity
from topologies import REFERENCE_ARCHITECTURES, build

CAT = load_catalog()


@pytest.mark.parametrize("label,arch,params", REFERENCE_ARCHITECTURES + [
    ("khop-closed", "khop-ring", {"closed": True, "k": 3}), ("dgx-3tier", "dgx", {"tiers": 3}),
    ("fat-tree", "fat-tree", {"k": 16}), ("rfabric", "rfabric", {})])
def test_capex_and_power_are_the_bom_priced_by_the_catalog(label, arch, params):
    fab = build(arch, gpus=512, params=params, catalog=CAT)
    capex, power = defaultdict(float), defaultdict(float)
    for line in fab.bom:
        comp = CAT.get(line.item)
        capex[line.scope] += line.count * comp.values.get("price_usd", 0.0)
        power[line.scope] += line.count * comp.values.get("power_w", 0.0)
    d = cost_of(fab, CAT).to_dict()
    assert d["capex_usd"] == pytest.approx(sum(capex.values()), rel=1e-12)
    assert d["power_w"] == pytest.approx(sum(power.values()), rel=1e-12)
    assert d["capex_per_gpu_usd"] == pytest.approx(d["capex_usd"] / fab.n_gpus, rel=1e-15)
    assert d["power_per_gpu_w"] == pytest.approx(d["power_w"] / fab.n_gpus, rel=1e-15)
    for scope, v in d["by_scope"].items():
        assert v["capex_usd"] == pytest.approx(capex[scope], rel=1e-12, abs=1e-9)
        assert v["power_w"] == pytest.approx(power[scope], rel=1e-12, abs=1e-9)
    assert sum(v["capex_usd"] for v in d["by_scope"].values()) == pytest.approx(d["capex_usd"], rel=1e-12)
    assert sum(r["capex_usd"] for r in d["breakdown"]) == pytest.approx(d["capex_usd"], rel=1e-12)


@pytest.mark.parametrize("swing", [0.1, 0.5, 0.9])
def test_sensitivity_is_linear_in_each_price(swing):
    fab = build("khop-ring", gpus=1024, catalog=CAT)
    rep = cost_of(fab, CAT)
    g = fab.n_gpus
    for row in price_sensitivity(rep, swing=swing):
        item = row["item"]
        for metric, v in row.items():
            if not isinstance(v, dict):
                continue
            scope = metric.split("_")[0]
            share = sum(r.capex_usd for r in rep.rows if r.item == item and
                        (metric == "capex_per_gpu_usd" or r.scope == scope)) / g
            assert v["base"] == pytest.approx(rep.metric(metric), rel=1e-15)
            assert v["high"] - v["base"] == pytest.approx(swing * share, rel=1e-9, abs=1e-9)
            assert v["base"] - v["low"] == pytest.approx(swing * share, rel=1e-9, abs=1e-9)


def test_cost_table_rounds_the_json_numbers(run_cli):
    rc, out, err = run_cli("cost", "nvl-72", "--gpus", 576, "--json")
    assert rc == 0, err
    d = json.loads(out)
    rc, table, err = run_cli("cost", "nvl-72", "--gpus", 576)
    assert rc == 0, err
    assert f"${d['capex_usd']:,.0f}" in table and f"${d['capex_per_gpu_usd']:,.0f}" in table
    for scope, v in d["by_scope"].items():
        assert f"${v['capex_usd']:,.0f}" in table and f"{v['power_w'] / 1e3:,.1f} kW" in table


def test_compare_rows_equal_fabric_cost(run_cli):
    rc, out, err = run_cli("compare", "--gpus", 600, "--json")
    assert rc == 0, err
    for row in json.loads(out)["rows"]:
        args = [a for k, v in row["params"].items() for a in ("-p", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]
        rc, one, err = run_cli("cost", row["architecture"], "--gpus", 600, *args, "--json")
        assert rc == 0, err
        c = json.loads(one)
        assert (row["gpus"], row["capex_per_gpu_usd"], row["power_per_gpu_w"]) == \
            (c["gpus"], c["capex_per_gpu_usd"], c["power_per_gpu_w"])
        assert row["hbd_capex_per_gpu_usd"] == c["by_scope"]["hbd"]["capex_per_gpu_usd"]
