"""One RL iteration end to end on small fabrics: static fat-tree vs rfabric, the re-wiring rule, determinism."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from fabric.catalog import load_catalog
from fabric.cost import cost_of
from fabric.errors import FabricError
from fabric.model import DeviceKind
from topologies import build
from workloads.models import load_model
from workloads.rl import RLConfig, evaluate_rl
from workloads.rl.traffic import pod_matrix
from workloads.rl.training import plan_training, pools, training_flows

CAT = load_catalog()
M = load_model("llama3-8b")
SMALL = {"samples": 64, "output_median": 128, "max_tokens": 512, "prompt_len": 128}


def cfg(**kw):
    return RLConfig.from_params({**SMALL, **kw})


@pytest.fixture(scope="module")
def fabrics():
    return {
        "static": build("dgx", 256, {"gpu": "h800", "k": 16, "tiers": "3"}),
        "rfabric1": build("rfabric", 256, {"k": 16}),
        "rfabric0": build("rfabric", 256, {"k": 16, "core_ratio": 0.0}),
    }


def test_rfabric_with_full_core_times_like_the_fat_tree_and_never_rewires(fabrics):
    c = cfg()
    s = evaluate_rl(fabrics["static"], M, c, CAT)
    r = evaluate_rl(fabrics["rfabric1"], M, c, CAT)
    assert r.reconfigurations == 0 and r.reconfiguration_overhead_s == 0.0
    for k in ("generation", "weight_sync", "training"):
        assert r.phases[k] == pytest.approx(s.phases[k], rel=1e-6)
    assert r.capex_usd > s.capex_usd  # the OCS comes on top of the same switches
    assert s.samples_per_s == pytest.approx(c.samples / s.iteration_s)
    assert s.samples_per_s_per_musd == pytest.approx(s.samples_per_s / (cost_of(fabrics["static"], CAT).capex_usd
                                                                        / 1e6))


def test_direct_connect_rfabric_rewires_per_phase_and_the_rule_holds(fabrics):
    f = fabrics["rfabric0"]
    c = cfg()
    r = evaluate_rl(f, M, c, CAT)
    assert r.reconfiguration_time_s == CAT.value("ocs_palomar", "reconfiguration_time")
    assert r.reconfigurations >= 1
    for e in r.details["epochs"]:
        if e["rewired"]:
            assert e["predicted_gain_s"] > r.reconfiguration_time_s + r.settle_time_s
    assert r.reconfiguration_overhead_s == pytest.approx(r.reconfigurations * (r.reconfiguration_time_s +
                                                                                 c.settle_time))
    assert r.iteration_s == pytest.approx(sum(r.phases.values()) + r.reconfiguration_overhead_s)
    # an OCS slower than any gain never re-wires: it holds the circuits of the whole iteration's traffic
    slow = evaluate_rl(f, M, c, CAT, reconfiguration_time=1e4)
    assert slow.reconfigurations == 0 and slow.reconfiguration_overhead_s == 0.0
    assert all(not e["rewired"] for e in slow.details["epochs"])
    assert slow.iteration_s == pytest.approx(sum(slow.phases.values()))
    # no cheaper than the core it replaces: the direct-connect rfabric costs less than the fat-tree
    assert r.capex_usd < cost_of(fabrics["static"], CAT).capex_usd


def test_deterministic_and_seeded(fabrics):
    a = evaluate_rl(fabrics["rfabric0"], M, cfg(), CAT).to_dict()
    b = evaluate_rl(fabrics["rfabric0"], M, cfg(), CAT).to_dict()
    assert a == b
    c = evaluate_rl(fabrics["rfabric0"], M, cfg(seed=5), CAT).to_dict()
    assert c["generation"]["max_output_tokens"] != a["generation"]["max_output_tokens"] or \
        c["phases"] != a["phases"]


def test_async_hides_training(fabrics):
    s = evaluate_rl(fabrics["static"], M, cfg(), CAT)
    a = evaluate_rl(fabrics["static"], M, RLConfig.from_params(SMALL, pipeline="async"), CAT)
    assert a.iteration_s == pytest.approx(max(a.phases["training"], a.phases["generation"] + a.phases["weight_sync"]))
    assert a.iteration_s < s.iteration_s
    # the async weight sync shares the links with the trainer's traffic of its window
    assert a.phases["weight_sync"] >= s.phases["weight_sync"] * (1 - 1e-9)
    assert any("concurrent training traffic" in n for n in a.notes)


def test_sim_and_analytic_agree_on_weight_sync(fabrics):
    s = evaluate_rl(fabrics["static"], M, cfg(), CAT, timing="sim")
    a = evaluate_rl(fabrics["static"], M, cfg(), CAT, timing="analytic")
    assert a.phases["weight_sync"] == pytest.approx(s.phases["weight_sync"], rel=0.05)
    assert a.timing == "analytic" and s.timing == "sim"


def test_traffic_follows_the_placement(fabrics):
    f = fabrics["static"]
    train, gen = pools(f, 0.5)
    assert train.size == gen.size == 128
    pod = f.group("pod")
    # trainer pool in pods 0-1, rollout pool in pods 2-3: weight sync crosses from one to the other
    assert set(pod[train]) == {0, 1} and set(pod[gen]) == {2, 3}
    m, par, _ = plan_training(f, M, cfg(), train.size, 128.0, CAT)
    flows = training_flows(f, m, par, steps=1)
    # ring reduce-scatter + all-gather: each edge carries (n-1)/n of the local parameters in 4 + 2 bytes
    n = par.dp
    assert np.allclose(flows.nbytes, (n - 1) / n * M.params() / par.tp * 6.0)
    D = pod_matrix(f, flows)
    assert D[0, 1] > 0 and D[1, 0] > 0 and D[:, 2:].sum() == 0


def test_trainer_pads_the_sequence_to_a_multiple_of_tp(fabrics):
    # prompt 128 + mean output 133.3 = 262 tokens: Megatron with sequence parallelism needs tp | seq, so the
    # trainer pads to 264 (tp 8); at tp 1 nothing is padded
    f = fabrics["static"]
    m, par, _ = plan_training(f, M, cfg(), 128, 133.3, CAT)
    assert par.tp == 8 and par.sequence_parallel and m.seq_len == 264
    m1, par1, _ = plan_training(f, M, cfg(train_tp=1), 128, 133.3, CAT)
    assert par1.tp == 1 and m1.seq_len == 262


def test_bad_inputs():
    with pytest.raises(FabricError, match=r"params\[samples\]"):
        RLConfig.from_params({"samples": "many"})
    with pytest.raises(FabricError, match="unknown RL parameter"):
        RLConfig.from_params({"sample": 3})
    with pytest.raises(FabricError, match=r"params\[sync\]"):
        RLConfig.from_params({"sync": "carrier-pigeon"})
    f = build("dgx", 16, {"gpu": "h800", "k": 16, "tiers": "3"})
    with pytest.raises(FabricError, match="gen_tp"):
        evaluate_rl(f, M, cfg(gen_tp=3), CAT)
    with pytest.raises(FabricError, match="reconfig"):
        evaluate_rl(f, M, cfg(), CAT, reconfiguration_time=-1.0)
    with pytest.raises(FabricError, match="too few"):
        evaluate_rl(build("dgx", 8, {"gpu": "h800", "k": 16}), M, cfg(), CAT)


# ------------------------------------------------------------------------------------------- rfabric builder
def _connected(f):
    A = f.active_links()
    n = f.n_devices
    _, label = connected_components(sp.coo_matrix((np.ones(len(A)), (A.src, A.dst)), shape=(n, n)), directed=False)
    return np.unique(label[f.gpu_ids]).size == 1


@pytest.mark.parametrize("gpus, core_ratio", [(64, 0.0), (200, 0.0), (512, 0.0), (512, 0.25), (512, 0.5)])
def test_rfabric_core_ratio_builds(gpus, core_ratio):
    f = build("rfabric", gpus, {"k": 16, "core_ratio": core_ratio})
    assert f.n_gpus >= gpus and _connected(f)
    cores = f.ids_of(DeviceKind.CORE).size
    full = build("rfabric", gpus, {"k": 16})
    assert (cores == 0) == (core_ratio == 0.0)
    assert cores < full.ids_of(DeviceKind.CORE).size or full.ids_of(DeviceKind.CORE).size == 0
    assert cost_of(f, CAT).capex_usd < cost_of(full, CAT).capex_usd or f.n_gpus <= 64
    # every transceiver counted once per OCS fibre: the OCS is passive
    inv = f.inventory()
    assert inv["ocs_palomar"] == f.counts()["ocs"]


def test_rfabric_too_many_pods_for_direct_connect():
    with pytest.raises(FabricError, match="pods do not fit"):
        build("rfabric", 2400, {"k": 8, "core_ratio": 0.0})  # 150 pods > 136 OCS ports


def test_slower_ocs_never_shortens_the_iteration(fabrics):
    """The plan is chosen for the whole iteration: a re-wire that pays for itself in its epoch but not
    once every re-wire's reconfiguration time is counted is dropped, so the iteration time can only grow
    (or stay) as the OCS gets slower, up to the never-re-wiring fabric."""
    f = fabrics["rfabric0"]
    times = [evaluate_rl(f, M, cfg(), CAT, reconfiguration_time=rt).iteration_s
             for rt in (1.2e-3, 5e-3, 1e-2, 2e-2, 3e-2, 5e-2, 0.1, 0.2, 1e4)]
    assert all(b >= a - 1e-12 for a, b in zip(times, times[1:])), times
