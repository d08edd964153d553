"""Study specs: expansion, point ids, and one-line errors naming the key (cli/study/spec.py)."""

import pytest

from cli.study.spec import load_study, parse_study
from fabric.errors import FabricError

BASE = {"gpus": 256, "architectures": [{"name": "dgx"}], "metrics": ["cost"]}


def spec(**changes):
    doc = {**BASE, **changes}
    return {k: v for k, v in doc.items() if v is not None}


def error_of(doc) -> FabricError:
    with pytest.raises(FabricError) as info:
        parse_study(doc, "study.yaml")
    return info.value


def test_grid_is_a_product_and_zip_goes_side_by_side():
    s = parse_study(spec(architectures=[{
        "name": "khop-ring", "params": {"gpus_per_node": 4},
        "grid": {"k": [2, 3], "closed": [False, True]},
        "zip": {"trx_per_gpu": [2, 4], "nodes_per_rack": [8, 4]}}]))
    combos = [tuple(dict(p.given)[k] for k in ("k", "closed", "trx_per_gpu", "nodes_per_rack")) for p in s.points]
    assert len(combos) == 2 * 2 * 2
    assert {(c[2], c[3]) for c in combos} == {(2, 8), (4, 4)}  # zipped, never crossed
    assert all(dict(p.given)["gpus_per_node"] == 4 for p in s.points)
    assert s.points[0].label == "khop-ring k=2 closed=False trx_per_gpu=2 nodes_per_rack=8"


def test_points_sharing_a_fabric_are_neighbours():
    s = parse_study(spec(gpus=[256, 512], seeds=[0, 1, 2], faults={"ratios": [0.0, 0.03]},
                         architectures=[{"name": "dgx"}, {"name": "khop-ring", "grid": {"k": [2, 3]}}]))
    keys = [p.fabric_key for p in s.points]
    runs = [k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k]
    assert len(runs) == len(set(keys)) == 2 + 4  # each Fabric appears in one contiguous run
    assert [p.index for p in s.points] == list(range(len(s.points)))


def test_point_ids_are_stable_distinct_and_alias_aware():
    a = parse_study(spec(architectures=[{"name": "nvl-72"}], seeds=[0, 1]))
    b = parse_study(spec(architectures=[{"name": "nvl", "params": {"size": 72}}], seeds=[0, 1]))
    assert [p.point_id for p in a.points] == [p.point_id for p in b.points]  # same design, same id
    assert len({p.point_id for p in a.points}) == 2
    # pinned: the id hashes the inputs only (not the run, machine or Python); a change breaks --resume
    assert parse_study(BASE).points[0].point_id == "1c6d74435fd80d89"


def test_input_columns():
    s = parse_study(spec(workloads=[{"name": "llm", "tp": [8, 16], "params": {"model": "gpt3-175b"}}],
                         faults={"ratios": [0.03]}, seeds=[7], metrics=["cost", "mfu"]))
    row = s.points[-1].input_columns()
    assert row["architecture"] == "dgx" and row["gpus"] == 256 and row["p_gpu"] == "h100"
    assert (row["workload"], row["tp"], row["w_model"]) == ("llm", 16, "gpt3-175b")
    assert (row["fault_model"], row["fault_ratio"], row["fault_component"], row["seed"]) == ("random", 0.03, "node", 7)


def test_traces_are_relative_to_the_spec_and_hashed(tmp_path):
    import shutil

    trace = pytest.importorskip("fabric.trace")
    shutil.copy(trace.shipped_path("stepfun") / "fault_trace.json", tmp_path / "t.json")
    (tmp_path / "s.yaml").write_text("gpus: 256\narchitectures: [{name: dgx}]\nmetrics: [cost]\n"
                                     "faults: {traces: [t.json, stepfun]}\n")
    s = load_study(tmp_path / "s.yaml")
    own, shipped = (p.fault for p in s.points)
    assert (own.kind, own.trace, own.path) == ("trace", "t.json", str(tmp_path / "t.json"))
    assert (shipped.trace, shipped.path) == ("stepfun", "stepfun")
    assert own.sha256 == shipped.sha256 and len(own.sha256) == 64  # same content, same id part
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(FabricError, match=r"faults.traces\[0\]"):
        parse_study(spec(faults={"traces": ["bad.json"]}), base_dir=tmp_path)


@pytest.mark.parametrize("changes, field, words", [
    ({"foo": 1}, "study.yaml:foo", "unknown key; allowed: name"),
    ({"architectures": [{"name": "dgx"}, {"name": "khop-ring", "grid": {"k": []}}]},
     "study.yaml:architectures[1].grid.k", "empty list"),
    ({"architectures": [{"name": "dgx", "grid": {}}]}, "study.yaml:architectures[0].grid", "empty grid"),
    ({"architectures": [{"name": "khop-ring", "grid": {"k": [2, "x"]}}]},
     "study.yaml:architectures[0].grid.k[1]", "is not a whole number"),
    ({"architectures": [{"name": "khop-ring", "grid": {"kk": [2]}}]},
     "study.yaml:architectures[0].grid.kk", "unknown parameter for khop-ring; allowed:"),
    ({"architectures": [{"name": "khop-ring", "params": {"k": [2, 3]}}]},
     "study.yaml:architectures[0].params.k", "put lists of values under grid"),
    ({"architectures": [{"name": "khop-ring", "zip": {"k": [2, 3], "closed": [True]}}]},
     "study.yaml:architectures[0].zip", "equal lengths"),
    ({"architectures": [{"name": "khop-ring", "params": {"k": 2}, "grid": {"k": [3]}}]},
     "study.yaml:architectures[0].grid.k", "also given under params"),
    ({"architectures": [{"name": "nvl-72", "grid": {"size": [36]}}]},
     "study.yaml:architectures[0].grid.size", "set to 72 by the alias"),
    ({"architectures": [{"name": "dgx"}, {"name": "dgx", "params": {"gpu": "h100"}}]},
     "study.yaml:architectures[1]", "repeats a design of architectures[0]"),
    ({"architectures": [{"name": "warp-drive"}]}, "study.yaml:architectures[0].name", "unknown architecture"),
    ({"architectures": [{"label": "x"}]}, "study.yaml:architectures[0].name", "missing"),
    ({"architectures": []}, "study.yaml:architectures", "empty list"),
    ({"architectures": {"name": "dgx"}}, "study.yaml:architectures", "must be a list"),
    ({"gpus": None}, "study.yaml:architectures[0].gpus", "missing; give gpus here or at the top level"),
    ({"gpus": "4k"}, "study.yaml:gpus", "whole number >= 1"),
    ({"gpus": [256, True]}, "study.yaml:gpus[1]", "whole number >= 1"),
    ({"gpus": [256, 256]}, "study.yaml:gpus[1]", "repeats the value 256"),
    ({"seeds": 3}, "study.yaml:seeds", "must be a list of seeds"),
    ({"seeds": [0, -1]}, "study.yaml:seeds[1]", ">= 0"),
    ({"metrics": []}, "study.yaml:metrics", "empty list"),
    ({"metrics": ["cost", "speed"]}, "study.yaml:metrics[1]", "unknown metric 'speed'; available:"),
    ({"metrics": ["cost", "cost"]}, "study.yaml:metrics[1]", "listed twice"),
    ({"metrics": [{"noop": {"sleep": 1}}]}, "study.yaml:metrics[0].noop.sleep", "unknown key"),
    ({"metrics": [{"noop": {"sleep_s": -1}}]}, "study.yaml:metrics[0].noop.sleep_s", "must be >= 0"),
    ({"faults": {"ratios": [0.5, 1.5]}}, "study.yaml:faults.ratios[1]", "in [0, 1]"),
    ({"faults": {"ratios": [0.01], "component": "psu"}}, "study.yaml:faults.component", "not a component"),
    ({"faults": {}}, "study.yaml:faults", "empty"),
    ({"faults": {"traces": ["missing.json"]}}, "study.yaml:faults.traces[0]", "no such file"),
    ({"workloads": [{"tp": 8}]}, "study.yaml:workloads[0].name", "missing"),
    ({"workloads": [{"name": "a", "tp": 0}]}, "study.yaml:workloads[0].tp", ">= 1"),
    ({"workloads": [{"name": "a", "tpp": 8}]}, "study.yaml:workloads[0].tpp", "unknown key"),
    ({"batch_size": 0}, "study.yaml:batch_size", ">= 1"),
    ({"catalog": "nope.yaml"}, "study.yaml:catalog", "no such file"),
])
def test_bad_specs_name_the_key(changes, field, words):
    err = error_of(spec(**changes))
    assert err.field == field, str(err)
    assert words in err.message, str(err)
    assert "\n" not in str(err)


def test_metric_requirements_are_checked_before_work(monkeypatch):
    from cli.study import registry

    monkeypatch.setitem(registry.METRICS, "needs_tp",
                        registry.MetricSpec("needs_tp", lambda ctx: {}, "test", requires=("tp",)))
    err = error_of(spec(metrics=["needs_tp"]))
    assert err.field == "study.yaml:workloads" and "needs a TP size" in err.message
    err = error_of(spec(metrics=["needs_tp"], workloads=[{"name": "a", "tp": 8}, {"name": "b"}]))
    assert err.field == "study.yaml:workloads[1].tp"


def test_yaml_and_file_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("architectures: [{name: dgx}\nmetrics: [cost]\n")
    with pytest.raises(FabricError, match=r"bad.yaml: not valid YAML at line 2"):
        load_study(bad)
    with pytest.raises(FabricError, match="no such study file"):
        load_study(tmp_path / "none.yaml")
    (tmp_path / "list.yaml").write_text("- 1\n")
    with pytest.raises(FabricError, match="must be a YAML mapping"):
        load_study(tmp_path / "list.yaml")


def test_fingerprint_follows_metrics_and_catalog(tmp_path):
    a = parse_study(BASE)
    assert a.fingerprint() == parse_study(spec(seeds=[0, 1])).fingerprint()  # more points, same rows
    assert a.fingerprint() != parse_study(spec(metrics=["cost", "build"])).fingerprint()
    cat = tmp_path / "cat.yaml"
    cat.write_text("components: {}\n")
    assert a.fingerprint() != parse_study(spec(catalog="cat.yaml"), base_dir=tmp_path).fingerprint()


def test_an_architecture_may_override_the_workloads():
    s = parse_study(spec(architectures=[{"name": "dgx", "workloads": [{"name": "tp8", "tp": 8}]},
                                        {"name": "khop-ring"}],
                         workloads=[{"name": "big", "tp": [16, 32]}]))
    assert [(p.label, p.workload.tp) for p in s.points] == [("dgx", 8), ("khop-ring", 16), ("khop-ring", 32)]
    err = error_of(spec(architectures=[{"name": "dgx", "workloads": [{"name": "x", "tp": []}]}]))
    assert err.field == "study.yaml:architectures[0].workloads[0].tp" and "empty list" in err.message


def test_workload_params_are_metric_options_checked_before_work():
    """Issue 15: `model: bogus` used to run llama3-70b silently while the row said bogus."""
    bad = error_of(spec(workloads=[{"name": "llm", "params": {"model": "bogus"}}], metrics=["mfu"]))
    assert bad.field == "study.yaml:workloads[0].params.model" and "bogus" in bad.message
    unused = error_of(spec(workloads=[{"name": "llm", "params": {"model": "llama3-8b"}}], metrics=["cost"]))
    assert unused.field == "study.yaml:workloads[0].params.model" and "not an option" in unused.message
    wrong_type = error_of(spec(workloads=[{"name": "llm", "params": {"samples": "many"}}], metrics=["rl"]))
    assert wrong_type.field == "study.yaml:workloads[0].params.samples"
    option = error_of(spec(metrics=[{"mfu": {"model": "bogus"}}]))
    assert option.field == "study.yaml:metrics[0].mfu.model"


@pytest.mark.parametrize("changes, field, words", [
    # a falsy non-mapping was read as "no params"
    ({"workloads": [{"name": "w", "params": False}], "metrics": ["mfu"]}, "study.yaml:workloads[0].params",
     "must be a mapping"),
    # names of two types could not be sorted: TypeError and a traceback
    ({"workloads": [{"name": "w", "params": {1: 2, "model": "llama3-8b"}}], "metrics": ["mfu"]},
     "study.yaml:workloads[0].params.1", "must be named by a string"),
    # two designs under one label were averaged into one comparison row
    ({"architectures": [{"name": "khop-ring", "params": {"k": 2}}, {"name": "khop-ring", "params": {"k": 3}}]},
     "study.yaml:architectures[1]", "label 'khop-ring' at 256 GPUs also names another design"),
    ({"architectures": [{"name": "dgx", "label": "x"}, {"name": "tpuv4", "label": "x"}]},
     "study.yaml:architectures[1]", "give each design its own label"),
    ({"metrics": [{"mfu": {"model": ["a", "b"]}}]}, "study.yaml:metrics[0].mfu.model", "must be one str; got list"),
])
def test_more_bad_specs_name_the_key(changes, field, words):
    err = error_of(spec(**changes))
    assert err.field == field, str(err)
    assert words in err.message, str(err)


def test_one_label_may_name_one_design_at_several_sizes():
    s = parse_study(spec(architectures=[{"name": "dgx", "label": "x", "gpus": 64},
                                        {"name": "dgx", "label": "x", "gpus": 128}]))
    assert [(p.label, p.gpus) for p in s.points] == [("x", 64), ("x", 128)]


GOODPUT = {"faults": {"traces": ["stepfun"]}}


@pytest.mark.parametrize("metric_options, workload_params", [
    ({"sizing": "goodput"}, {"dp": 4}), ({"dp": 4}, {"sizing": "goodput"}), ({}, {"sizing": "goodput", "dp": 4})])
def test_goodput_sizing_with_dp_is_refused_wherever_each_is_given(metric_options, workload_params):
    """`sizing: goodput` chooses the DP size: with a pinned dp the spec is refused when read, also when one or both
    come from a workload's params (every point used to fail at run time, exit 1)."""
    doc = spec(**GOODPUT, workloads=[{"name": "w", "params": workload_params}],
               metrics=[{"goodput": {"comm": "analytic", **metric_options}}])
    err = error_of(doc)
    assert err.field == "study.yaml:workloads[0].params.sizing" and "goodput chooses the DP size" in err.message
    parse_study(spec(**GOODPUT, workloads=[{"name": "w", "params": {"sizing": "goodput"}}],
                     metrics=[{"goodput": {"comm": "analytic"}}]))  # alone: fine


def test_a_workload_param_reaches_the_metric_parsed(monkeypatch):
    """`search: "false"` passed the spec's check (parsed: False) but reached the metric as a truthy string, so the
    MFU search ran; the evaluator now applies the value the spec checked."""
    from cli.study import registry
    from cli.study.evaluator import evaluate_point

    seen = {}
    monkeypatch.setitem(registry.METRICS, "probe", registry.MetricSpec(
        "probe", lambda ctx: seen.update(ctx.options) or {}, "test",
        options={"search": registry.MetricOption(bool, True, "h"), "dp": registry.MetricOption(int, 0, "h")}))
    s = parse_study(spec(workloads=[{"name": "w", "params": {"search": "false", "dp": "4"}}], metrics=["probe"]))
    evaluate_point(s.points[0], s.metrics, s.catalog)
    assert seen == {"search": False, "dp": 4}


def test_a_yaml_alias_bomb_is_named_not_printed():
    """9 lists of 9 aliases, 10 deep (3.5e9 leaves): the error printed repr(value) and never returned."""
    level = ["x"] * 9
    for _ in range(9):
        level = [level] * 9
    err = error_of(spec(seeds={"k": level}))
    assert err.field == "study.yaml:seeds" and len(str(err)) < 300


def test_a_spec_too_large_to_expand_is_refused_before_expansion():
    """2,000 x 2,000 grid values: 4 M points, 8 GiB of points, over the 4 GiB memory limit (the grid's
    product alone is refused, before it is built; `fabric --limit memory=...` raises it)."""
    err = error_of(spec(architectures=[{"name": "khop-ring", "grid": {"nodes_per_tor": list(range(1, 2001)),
                                                                       "nodes_per_rack": list(range(1, 2001))}}]))
    assert err.field == "study.yaml:architectures[0]" and "4,000,000 design points" in err.message
    err = error_of(spec(seeds=list(range(3_000_000))))  # checked in linear time (a quadratic check: hours)
    assert err.field == "study.yaml" and "3,000,000 design points" in err.message


def test_the_designs_of_many_entries_add_up_to_the_limit():
    """Each entry under the limit, together over it: refused at the entry that passes it (with 500 kB of memory,
    250 points: 100 designs per entry, the third entry makes 300)."""
    from fabric import limits

    many = [{"name": "khop-ring", "label": f"k{k}", "params": {"k": k}, "grid": {"trx_per_gpu": list(range(2, 202, 2))}}
            for k in (2, 3, 4)]
    assert len(parse_study(spec(architectures=many, gpus=64)).points) == 300
    token = limits.set_limits(limits.parse_limits(["memory=500KB"], base=limits.current()))
    try:
        err = error_of(spec(architectures=many, gpus=64))
    finally:
        limits.reset(token)
    assert err.field == "study.yaml:architectures[2]" and "300 design points" in err.message




@pytest.mark.parametrize("text", ["gpus: " + "[" * 5000 + "]" * 5000 + "\n",
                                  "x:\n" + "".join("  " * (i + 1) + f"k{i}:\n" for i in range(2000))])
def test_deep_nesting_is_named_by_the_spec_file(tmp_path, text):
    """Read through fabric.files: nesting deeper than 64 levels is refused naming the file (it ended as a
    RecursionError blamed on --gpus)."""
    path = tmp_path / "deep.yaml"
    path.write_text(text)
    with pytest.raises(FabricError, match="nests deeper than 64 levels") as info:
        load_study(path)
    assert info.value.field == str(path)


def test_a_key_given_twice_is_refused_not_overridden(tmp_path):
    """PyYAML keeps the last of two equal keys in silence: a second `metrics:` line dropped the first."""
    path = tmp_path / "twice.yaml"
    path.write_text("gpus: 256\narchitectures:\n  - {name: dgx, label: a, label: b}\nmetrics: [cost]\n")
    with pytest.raises(FabricError, match=r"not valid YAML at line 3, column 27: found the key 'label' twice"):
        load_study(path)
    path.write_text("gpus: 256\narchitectures: [{name: dgx}]\nmetrics: [cost]\nmetrics: [build]\n")
    with pytest.raises(FabricError, match="line 4, column 1: found the key 'metrics' twice"):
        load_study(path)
    path.write_text("gpus: 256\narchitectures: [{<<: {name: dgx, label: a}, label: b}]\nmetrics: [cost]\n")
    assert [p.label for p in load_study(path).points] == ["b"]  # a merged key may be overridden, as YAML says


@pytest.mark.parametrize("metric_options, workload_params, field", [
    ({"solver": "greedy", "time_limit": 5}, None, "study.yaml:metrics[0].orchestrator.time_limit"),
    ({"solver": "fault-unaware", "gap": 0.1}, None, "study.yaml:metrics[0].orchestrator.gap"),
    ({"time_limit": 5}, {"solver": "greedy"}, "study.yaml:workloads[0].params.time_limit"),
])
def test_orchestrator_ilp_options_with_a_baseline_solver_are_refused(metric_options, workload_params, field):
    """The greedy and fault-unaware placements solve no ILP: a time_limit or gap with them ran and was dropped
    without a word (`fabric orchestrate --solver greedy --time-limit 5` is refused)."""
    doc = spec(workloads=[{"name": "w", "tp": 8, **({"params": workload_params} if workload_params else {})}],
               metrics=[{"orchestrator": {"dp": "2", **metric_options}}])
    err = error_of(doc)
    assert err.field == field and "solves none" in err.message
    parse_study(spec(workloads=[{"name": "w", "tp": 8}],
                     metrics=[{"orchestrator": {"dp": "2", "solver": "ilp", "time_limit": 5, "gap": 0.1}}]))


def test_orchestrator_time_limit_is_bounded_as_the_flag_is():
    """`time_limit: 1e300` was taken (`fabric orchestrate --time-limit` allows at most 1e9 s)."""
    err = error_of(spec(workloads=[{"name": "w", "tp": 8}],
                        metrics=[{"orchestrator": {"dp": "2", "time_limit": 1e300}}]))
    assert err.field == "study.yaml:metrics[0].orchestrator.time_limit" and "1e+09" in err.message


def test_a_tp_the_design_refuses_is_refused_for_the_orchestrator_alone_before_work():
    """With only the orchestrator metric, TP 6 on a 4-GPU-node k-hop ring ran and every point failed (exit 1);
    next to the faults metric the same spec was refused when read."""
    err = error_of(spec(architectures=[{"name": "khop-ring", "params": {"gpus_per_node": 4}}], gpus=64,
                        workloads=[{"name": "w", "tp": 6}], metrics=[{"orchestrator": {"dp": "2"}}]))
    assert err.field == "study.yaml:workloads[0].tp" and "multiple of 4" in err.message


def test_the_orchestrator_with_random_faults_of_another_component_is_refused_when_read():
    """`faults: {ratios: [...], component: gpu}` with the orchestrator ran, and every point failed on its first
    fault draw ("orchestrator: places on node faults only", exit 1)."""
    doc = spec(workloads=[{"name": "w", "tp": 8}], faults={"ratios": [0.0, 0.05], "component": "gpu"},
               metrics=[{"orchestrator": {"dp": "2"}}])
    err = error_of(doc)
    assert err.field == "study.yaml:faults.component" and "node faults only" in err.message
    parse_study({**doc, "faults": {"ratios": [0.0, 0.05], "component": "node"}})
    parse_study({**doc, "metrics": ["cost"]})  # another metric takes any component
