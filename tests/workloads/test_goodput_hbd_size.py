"""TP larger than the HBD (issue 19's regime of the 3.37x claim): DGX runs TP 16 over its scale-out NICs.

Independent checks: the placement puts each TP group on tp / 8 whole DGX nodes (counted from the Fabric's
node groups); its exposed TP time exceeds that of TP 8 inside one node, because the same per-layer
all-reduce volume then crosses 400G NICs instead of NVLink; the command warns and a TP that is not a whole
number of nodes is refused with a one-line error.
"""

import json

from topologies import build
from workloads.comm import analytic_comm_time
from workloads.models import load_model
from workloads.parallelism import Parallelism
from workloads.placement import tp_blocks
from workloads.step import StepModel


def test_tp_blocks_beyond_the_domain_take_whole_nodes():
    fab = build("dgx", 64, {})
    blocks = tp_blocks(fab, 16)
    node = fab.group("node")
    assert blocks.shape == (4, 16)
    assert all(len(set(node[b].tolist())) == 2 for b in blocks)
    assert tp_blocks(fab, 8).shape == (8, 8)  # inside the HBD: unchanged


def test_step_model_times_tp_over_the_nics():
    fab = build("dgx", 64, {"gpu": "b200"})
    sm = StepModel(fab, load_model("llama3-8b"), backend=analytic_comm_time)
    sm.tp_beyond_hbd = True
    wide = sm.evaluate(Parallelism(tp=16, dp=4, global_batch=64, sequence_parallel=True))
    local = sm.evaluate(Parallelism(tp=8, dp=8, global_batch=64, sequence_parallel=True))
    assert wide.placement["tp_group_nodes"] == 2 and local.placement["tp_group_nodes"] == 1
    assert wide.breakdown["tp"] > 2 * local.breakdown["tp"]
    assert wide.mfu < local.mfu


def test_cli_warns_and_refuses_a_partial_node(run_cli):
    rc, out, err = run_cli("mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--tp", 16, "--pp", 1,
                           "--comm", "analytic", "--json")
    assert rc == 0, err
    assert "warning: TP 16 exceeds the HBD" in err
    d = json.loads(out)
    assert d["placement"]["tp_group_nodes"] == 2 and d["warnings"]
    rc, out, err = run_cli("mfu", "dgx", "--gpus", 64, "--model", "llama3-8b", "--tp", 12, "--comm", "analytic")
    assert rc == 2 and out == "" and err.startswith("error: --tp") and len(err.strip().splitlines()) == 1
