"""One fault set per (Fabric, fault model, seed): `faults`, `orchestrate`, `view` and a sweep row agree.

The reference is :func:`fabric.faultset.fault_set`, and each command is checked through what it prints
(or, for the viewer, the overlay it draws), so a command that drew its own faults again would fail: with
~3 faulty nodes among 64, two independent draws give the same set with probability below 1e-4 per case.
"""

import json

import numpy as np
import pytest
import yaml

from cli.study.context import PointContext
from cli.study.metrics import point_faults
from cli.study.spec import load_study
from cli.study.store import read_results
from cli.view import compose
from fabric.faults import FaultModel
from fabric.faultset import draw_faults, fault_set
from solvers.allocation import allocate
from topologies import build

GPUS, RATIO, TP = 256, 0.05, 8
KHOP = ["khop-ring", "--gpus", str(GPUS), "-p", "k=2", "-p", "gpus_per_node=4", "-p", "nodes_per_tor=16"]
PARAMS = {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 16}


@pytest.fixture(scope="module")
def fab():
    return build("khop-ring", GPUS, PARAMS)


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_sample_zero_does_not_depend_on_the_sample_count(fab, seed):
    """Bernoulli failures are the first draws of the node stream: sample 0 is the same whatever `samples`."""
    one = fault_set(fab, FaultModel({"node": RATIO}), seed).nodes
    for samples in (1, 7, 256, 1000):
        assert draw_faults(fab, FaultModel({"node": RATIO}), seed, samples).fault_set().nodes.tolist() == one.tolist()


@pytest.mark.parametrize("seed", [0, 3, 11])
def test_faults_orchestrate_and_view_see_the_same_nodes(fab, run_cli, seed):
    nodes = fault_set(fab, FaultModel({"node": RATIO}), seed).nodes
    assert nodes.size > 0

    # view: the overlay's faulty nodes
    _, overlay, _ = compose({"architecture": "khop-ring", "gpus": GPUS, "fault_ratio": RATIO, "seed": seed},
                            params=[f"{k}={v}" for k, v in PARAMS.items()])
    assert overlay.faulty_nodes.tolist() == nodes.tolist()

    # orchestrate: as many faulty nodes, none of them in a TP ring of the placement
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", TP, "--dp", "max", "--node-fault-ratio", RATIO,
                           "--seed", seed, "--solver", "greedy", "--placement", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert d["faulty_nodes"] == nodes.size and d["fault_source"].endswith(f"seed {seed}")
    used = {n for ring in d["placement"]["tp_groups"] for n in ring}
    assert not used & set(nodes.tolist())

    # faults, one sample: its usable GPUs are those of the allocation around exactly these nodes
    rc, out, err = run_cli("faults", *KHOP, "--tp", TP, "--node-fault-ratio", RATIO, "--seed", seed,
                           "--samples", 1, "--no-blast", "--json")
    assert rc == 0, err
    f = json.loads(out)
    alloc = allocate(fab, TP, faulty_nodes=nodes)
    assert f["fault_model"]["down_nodes_mean"] == nodes.size
    assert f["usable_gpus"]["mean"] == alloc.groups.size
    assert f["healthy_gpus"]["mean"] == alloc.healthy_gpus


def test_a_sweep_row_shares_one_draw_between_its_metrics(fab, tmp_path, run_cli):
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump({
        "gpus": GPUS, "architectures": [{"name": "khop-ring", "params": PARAMS}],
        "workloads": [{"name": "tp8", "tp": TP}], "faults": {"ratios": [RATIO]}, "seeds": [3],
        "metrics": [{"faults": {"samples": 50, "blast": False}}, {"orchestrator": {"dp": "max", "solver": "greedy"}}],
    }, sort_keys=False))
    rc, out, err = run_cli("sweep", spec, "--out", tmp_path / "out", "--workers", 1, "--json")
    assert rc == 0 and json.loads(out)["failed"] == 0, err
    study = load_study(spec)
    point = study.points[0]
    row = read_results(tmp_path / "out").iloc[0]
    nodes = fault_set(fab, FaultModel({"node": RATIO}), 3).nodes

    # the point's draw: the 50 samples the faults metric evaluates, sample 0 the orchestrator's fault set
    ctx = PointContext(point, study.catalog, requests=study.metrics)
    draw = point_faults(ctx)
    assert draw.samples == 50 and point_faults(ctx) is draw  # drawn once per point
    assert draw.fault_set().nodes.tolist() == nodes.tolist()
    assert row["faults_fault_model_down_nodes_mean"] == pytest.approx(draw.components["node"].counts().mean())
    assert row["orchestrator_faulty_nodes"] == nodes.size
    assert row["orchestrator_fault_source"] == fault_set(fab, FaultModel({"node": RATIO}), 3).source

    # and the row's orchestrator columns equal `fabric orchestrate --json` for the same ratio and seed
    rc, out, err = run_cli("orchestrate", *KHOP, "--tp", TP, "--dp", "max", "--node-fault-ratio", RATIO,
                           "--seed", 3, "--solver", "greedy", "--json")
    d = json.loads(out)
    for key in ("faulty_nodes", "used_gpus", "healthy_gpus", "cross_tor_traffic_ratio", "fault_source"):
        got = row[f"orchestrator_{key}"]
        assert (got.item() if hasattr(got, "item") else got) == d[key], key


def test_a_trace_point_reads_the_trace_at_its_worst_moment(fab):
    draw = draw_faults(fab, FaultModel(trace="stepfun"), seed=2)
    fs = draw.fault_set()
    counts = draw.replay.down.counts()
    assert fs.nodes.size == counts[draw.replay.durations > 0].max()
    assert np.array_equal(fs.nodes, np.sort(draw.node_index.node_group[draw.replay.down_at(draw.trace_moment())]))
