"""Catalog parsing and the cost model.

Cost is checked against hand arithmetic on the BOM (exact: cost is a sum of
count x unit price), and the sensitivity against a rebuild with the changed
price (exact: cost is linear in each price).
"""

import textwrap

import pytest

from fabric.catalog import load_catalog
from fabric.cost import cost_of, price_sensitivity
from fabric.errors import FabricError
from topologies import build


def test_every_shipped_quantity_has_a_source(catalog):
    for comp in catalog.components.values():
        for name in comp.values:
            src = comp.sources[name]
            assert src, (comp.id, name)
            assert src.lower().startswith("assumed") or src[:2] in ("P:", "S:", "D:"), (comp.id, name, src)


def test_calibrated_prices_say_so(catalog):
    for item in ("ocs_transceiver_800g", "nvlink_switch_tray", "nvl_copper_spine"):
        assert "CALIBRATED" in catalog.source(item, "price_usd")


def test_user_catalog_overrides_field_by_field(tmp_path):
    p = tmp_path / "mine.yaml"
    p.write_text(textwrap.dedent("""
        components:
          transceiver_400g:
            price_usd: {value: "$500", source: "my quote"}
          my_widget:
            category: cable
            price_usd: {value: 10, source: "assumed"}
    """))
    cat = load_catalog(p)
    assert cat.value("transceiver_400g", "price_usd") == 500.0
    assert cat.value("transceiver_400g", "power_w") == 9.0  # untouched field kept
    assert cat.category("my_widget") == "cable"


@pytest.mark.parametrize("body, field", [
    ("components: {x: {category: gpu, price_usd: 5}}", "x.price_usd"),
    ("components: {x: {category: blimp}}", "x.category"),
    ("components: {x: {category: gpu, price_usd: {value: 5, source: ''}}}", "price_usd.source"),
    ("components: {x: {category: gpu, speed: {value: 5, source: assumed}}}", "x.speed"),
    ("nonsense: 1", "nonsense"),
    ("components: {x: {category: gpu, price_usd: {value: 'lots', source: assumed}}}", "price_usd.value"),
    ("[1, 2", "catalog"),
    # a misspelt field ends like a known one (``_usd``) and was parsed, stored and never read
    ("components: {gpu_h100: {pricee_usd: {value: 1, source: assumed}}}", "--catalog bad.yaml:gpu_h100.pricee_usd"),
    # quantities that divide or bound what is computed from them: 0 was accepted
    ("components: {gpu_h100: {hbm_bytes: {value: 0GB, source: assumed}}}",
     "--catalog bad.yaml:gpu_h100.hbm_bytes.value"),
    ("components: {ocs_palomar: {ports: {value: 0, source: assumed}}}", "--catalog bad.yaml:ocs_palomar.ports.value"),
    ("components: {nvlink_switch_tray: {chips: {value: 0, source: assumed}}}", "nvlink_switch_tray.chips.value"),
    # one port holds no circuit: `cost rfabric` raised IndexError wiring agg to core through it
    ("components: {ocs_palomar: {ports: {value: 1, source: assumed}}}", "--catalog bad.yaml:ocs_palomar.ports.value"),
])
def test_malformed_catalog_names_the_field(tmp_path, body, field):
    p = tmp_path / "bad.yaml"
    p.write_text(body)
    with pytest.raises(FabricError) as exc:
        load_catalog(p)
    assert field in str(exc.value)


@pytest.mark.parametrize("field, value", [
    ("nic_bandwidth", 1e-300), ("hbd_bandwidth", 1e-300), ("hbm_bandwidth", 0.5), ("peak_bf16_flops", 1e-300),
    ("hbm_bytes", 0.5)])
def test_rates_and_sizes_below_one_are_refused(tmp_path, field, value):
    """A rate of 1e-300 passed "> 0" and then overflowed what is divided by it: build raised OverflowError
    (radix = total // port bandwidth), mfu ZeroDivisionError or printed NaN step times."""
    p = tmp_path / "tiny.yaml"
    p.write_text(f"components: {{gpu_h100: {{{field}: {{value: {value:.3e}, source: assumed}}}}}}")
    with pytest.raises(FabricError) as exc:
        load_catalog(p)
    assert exc.value.field == f"--catalog tiny.yaml:gpu_h100.{field}.value" and ">= 1" in exc.value.message


def test_a_price_beyond_float_range_is_refused(tmp_path):
    p = tmp_path / "big.yaml"
    p.write_text("components: {gpu_h100: {price_usd: {value: " + "9" * 400 + ", source: assumed}}}")
    with pytest.raises(FabricError) as exc:
        load_catalog(p)
    assert exc.value.field == "--catalog big.yaml:gpu_h100.price_usd.value"


def test_a_key_given_twice_is_refused(tmp_path):
    """PyYAML keeps the last of two equal keys: a second gpu_h100 entry silently dropped the first one's price."""
    p = tmp_path / "twice.yaml"
    p.write_text("components:\n  gpu_h100:\n    price_usd: {value: 1, source: assumed}\n"
                 "  gpu_h100:\n    power_w: {value: 1, source: assumed}\n")
    with pytest.raises(FabricError) as exc:
        load_catalog(p)
    assert exc.value.field == "catalog" and "key 'gpu_h100' is given twice (line 4)" in exc.value.message


def test_yaml_merge_keys_may_still_be_overridden():
    """A merge (<<) is not a duplicate: the mapping's own key overrides it, as YAML says."""
    from fabric.files import parse_yaml

    assert parse_yaml("a: &a {x: 1, y: 1}\nb: {<<: *a, x: 2}\n", "m.yaml", "f")["b"] == {"x": 2, "y": 1}


def test_unknown_component_field_lists_the_allowed_ones(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("components: {gpu_h100: {pricee_usd: {value: 1, source: assumed}}}")
    with pytest.raises(FabricError, match="allowed: category, description, price_usd, power_w"):
        load_catalog(p)


def test_zero_price_and_power_are_still_allowed(tmp_path):
    """A free part (a donated cable, power counted elsewhere) is a legitimate input."""
    p = tmp_path / "free.yaml"
    p.write_text("components: {fiber: {price_usd: {value: 0, source: assumed}, power_w: {value: 0, source: assumed}}}")
    assert load_catalog(p).value("fiber", "price_usd") == 0.0


def test_cost_is_count_times_price(catalog):
    f = build("nvl-72", gpus=72, catalog=catalog)
    r = cost_of(f, catalog)
    inv = f.inventory()
    expected = sum(n * catalog.value(item, "price_usd") for item, n in inv.items())
    assert r.capex_usd == pytest.approx(expected, rel=1e-12)
    hbd = 9 * catalog.value("nvlink_switch_tray", "price_usd") + catalog.value("nvl_copper_spine", "price_usd")
    assert r.scope_capex("hbd") == pytest.approx(hbd, rel=1e-12)
    d = r.to_dict()
    assert d["by_scope"]["hbd"]["capex_per_gpu_usd"] == pytest.approx(hbd / 72)
    assert sum(s["capex_usd"] for s in d["by_scope"].values()) == pytest.approx(d["capex_usd"])


def test_khop_vs_nvl72_ratio_in_published_range(catalog):
    """InfiniteHBD abstract: k-hop HBD cost is 31 % of NVL-72 (prices calibrated to it; see catalog)."""
    nvl = cost_of(build("nvl-72", gpus=4608, catalog=catalog), catalog).metric("hbd_capex_per_gpu_usd")
    for k in (2, 3):
        kh = cost_of(build("khop-ring", gpus=4608, params={"k": k}, catalog=catalog), catalog)
        assert 0.28 <= kh.metric("hbd_capex_per_gpu_usd") / nvl <= 0.34


def test_sensitivity_matches_a_rebuild_with_the_moved_price(tmp_path, catalog):
    """Linear model: moving one price by +50 % must equal recomputing with that price."""
    a = cost_of(build("khop-ring", gpus=256, catalog=catalog), catalog)
    b = cost_of(build("nvl-72", gpus=256, catalog=catalog), catalog)
    rows = price_sensitivity(a, b, swing=0.5)
    row = next(r for r in rows if r["item"] == "ocs_transceiver_800g")
    p = tmp_path / "c.yaml"
    price = catalog.value("ocs_transceiver_800g", "price_usd") * 1.5
    p.write_text(f"components: {{ocs_transceiver_800g: {{price_usd: {{value: {price}, source: assumed}}}}}}")
    cat2 = load_catalog(p)
    a2 = cost_of(build("khop-ring", gpus=256, catalog=cat2), cat2)
    assert row["hbd_capex_per_gpu_usd"]["high"] == pytest.approx(a2.metric("hbd_capex_per_gpu_usd"), rel=1e-12)
    assert row["ratio"]["high"] == pytest.approx(a2.metric("hbd_capex_per_gpu_usd") / b.metric("hbd_capex_per_gpu_usd"))
    # the widest-swinging assumption for the ratio comes first
    spans = [abs(r["ratio"]["high"] - r["ratio"]["low"]) for r in rows]
    assert spans == sorted(spans, reverse=True)
    # only assumed prices are varied
    assert all(r["source"].lower().startswith("assumed") for r in rows)


@pytest.mark.parametrize("text, value", [("5e10", 5e10), ("1.5e9", 1.5e9), ("-2E5", -2e5), (".5e3", 500.0),
                                         ("1_000e3", 1e6), ("1.0e+10", 1e10), ("1e+3", 1e3)])
def test_yaml_reads_exponent_floats_as_yaml_1_2_does(text, value):
    """YAML 1.1 (PyYAML's resolver) leaves 5e10 a string; YAML 1.2's core schema and JSON read a float.

    Exact: the value is Python's float() of the same text, the reference both specs name.
    """
    from fabric.files import parse_yaml

    got = parse_yaml(f"a: {text}\n", "m.yaml", "f")["a"]
    assert isinstance(got, float) and got == value


@pytest.mark.parametrize("text", ["5e", "e10", "'5e10'", "5e10x", "1.2.3e4"])
def test_yaml_strings_that_only_look_like_numbers_stay_strings(text):
    from fabric.files import parse_yaml

    assert isinstance(parse_yaml(f"a: {text}\n", "m.yaml", "f")["a"], str)


def test_a_catalog_price_written_5e2_is_a_number(tmp_path):
    """A user catalog's ``value: 5e2`` was the string '5e2' and refused as not a number."""
    p = tmp_path / "c.yaml"
    p.write_text("components:\n  transceiver_400g:\n    price_usd: {value: 5e2, source: my quote}\n")
    assert load_catalog(p).value("transceiver_400g", "price_usd") == 500.0
