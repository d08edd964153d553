"""Model specs: presets with sources, parameter counts, user files and their errors."""

import csv
import json
from importlib import resources

import pytest

from fabric.errors import FabricError
from workloads.models import ModelSpec, load_model, preset_names

REQUIRED_PRESETS = {"gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b", "mixtral-8x7b", "mixtral-8x22b",
                    "deepseek-v3"}


def test_required_presets_exist_and_cite_sources():
    names = set(preset_names())
    assert REQUIRED_PRESETS <= names
    assert sum(n.startswith("megatron-") for n in names) == 11  # the ten weak-scaling rows + Korthikanti 22B
    for n in names:
        m = load_model(n)
        assert m.source.startswith(("P:", "S:")), n


@pytest.mark.parametrize("name, total, active", [
    ("gpt3-175b", 175e9, 175e9), ("llama3-8b", 8.03e9, 8.03e9), ("llama3-70b", 70.6e9, 70.6e9),
    ("llama3-405b", 405e9, 405e9), ("mixtral-8x7b", 46.7e9, 12.9e9), ("mixtral-8x22b", 141e9, 39e9),
    ("deepseek-v3", 671e9, 37e9),
])
def test_parameter_counts_match_the_published_sizes(name, total, active):
    m = load_model(name)
    assert m.params() == pytest.approx(total, rel=0.015)
    assert m.active_params() == pytest.approx(active, rel=0.02)


def test_megatron_family_is_the_csv():
    path = resources.files("workloads") / "presets" / "narayanan2021-table1.csv"
    for r in csv.DictReader(path.read_text().splitlines()):
        m = load_model("megatron-" + r["model"].lower())
        assert (m.hidden, m.layers, m.heads, m.seq_len, m.vocab) == (int(r["hidden"]), int(r["layers"]),
                                                                     int(r["heads"]), 2048, 51200)
        assert m.params() == pytest.approx(float(r["params_billion"]) * 1e9, rel=0.04)  # CSV rounds (1.7B)


def test_user_files_yaml_and_json(tmp_path):
    spec = {"name": "tiny", "hidden": 512, "layers": 4, "heads": 8, "kv_heads": 2, "vocab": 1000, "seq_len": 256,
            "swiglu": True, "ffn_hidden": 1536}
    y = tmp_path / "tiny.yaml"
    y.write_text("\n".join(f"{k}: {str(v).lower() if isinstance(v, bool) else v}" for k, v in spec.items()))
    j = tmp_path / "tiny.json"
    j.write_text(json.dumps(spec))
    a, b = load_model(y), load_model(str(j))
    assert a == b and a.kv_heads == 2 and a.head_dim == 64 and a.swiglu


@pytest.mark.parametrize("doc, field", [
    ({"hidden": 512, "layers": 4, "heads": 8, "vocab": 10}, "seq_len"),
    ({"hidden": 512, "layers": 4, "heads": 8, "vocab": 10, "seq_len": 8, "colour": 1}, "colour"),
    ({"hidden": "big", "layers": 4, "heads": 8, "vocab": 10, "seq_len": 8}, "hidden"),
    ({"hidden": 512, "layers": 4, "heads": 8, "kv_heads": 3, "vocab": 10, "seq_len": 8}, "kv_heads"),
    ({"hidden": 512, "layers": 4, "heads": 8, "vocab": 10, "seq_len": 8, "experts": 8}, "top_k"),
    ({"hidden": 512, "layers": 4, "heads": 8, "vocab": 10, "seq_len": 8, "top_k": 2}, "top_k"),
    ({"hidden": 500, "layers": 4, "heads": 8, "vocab": 10, "seq_len": 8}, "heads"),
    ([1, 2], "m.yaml"),
    # a shared-expert width without shared experts was accepted and silently dropped
    ({"hidden": 512, "layers": 4, "heads": 8, "vocab": 10, "seq_len": 8, "shared_ffn_hidden": 100},
     "m.yaml:shared_ffn_hidden"),
    ({"hidden": 512, "layers": 4, "heads": 8, "vocab": 10, "seq_len": 8, "experts": 8, "top_k": 2,
      "expert_ffn_hidden": 256, "shared_ffn_hidden": 100}, "m.yaml:shared_ffn_hidden"),
])
def test_malformed_specs_name_the_field(tmp_path, doc, field):
    p = tmp_path / "m.yaml"
    p.write_text(json.dumps(doc))
    with pytest.raises(FabricError) as exc:
        load_model(p)
    assert field in exc.value.field


def test_sizes_in_exponent_form_are_the_whole_numbers_they_write(tmp_path):
    """``vocab: 1.28256e5`` (a YAML float) is 128,256; it was refused as "not a whole number"."""
    p = tmp_path / "m.yaml"
    p.write_text("hidden: 4.096e3\nlayers: 32\nheads: 32\nvocab: 1.28256e5\nseq_len: 8192\n")
    spec = load_model(p)
    assert spec.vocab == 128256 and isinstance(spec.vocab, int) and spec.hidden == 4096
    p.write_text("hidden: 4096\nlayers: 32.5\nheads: 32\nvocab: 1000\nseq_len: 8192\n")
    with pytest.raises(FabricError, match="whole number"):
        load_model(p)


def test_a_model_key_given_twice_is_refused(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("hidden: 512\nlayers: 4\nheads: 8\nvocab: 10\nseq_len: 8\nhidden: 1024\n")
    with pytest.raises(FabricError, match="'hidden' is given twice"):
        load_model(p)


def test_bad_references(tmp_path):
    with pytest.raises(FabricError, match="unknown preset"):
        load_model("gpt-9")
    with pytest.raises(FabricError, match="no such file"):
        load_model(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.json"
    bad.write_text("{hidden: ")
    with pytest.raises(FabricError, match="not valid JSON"):
        load_model(bad)


def test_with_seq_len():
    m = load_model("llama3-8b").with_seq_len(32768)
    assert m.seq_len == 32768 and isinstance(m, ModelSpec)
    with pytest.raises(FabricError, match="seq_len"):
        m.with_seq_len(0)
