"""`fabric rl` through the real entry point: JSON shape, the comparison table, one-line errors with exit 2."""

import json

import pytest

from cli.app import main

SMALL = ["-p", "k=16", "-p", "samples=64", "-p", "output_median=128", "-p", "max_tokens=512", "-p", "prompt_len=128"]
KEYS = {"phases", "iteration_s", "samples_per_s", "capex_usd", "samples_per_s_per_musd"}


def run(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_one_object_per_fabric(capsys):
    rc, out, err = run(capsys, "rl", "--gpus", 256, "--model", "llama3-8b", *SMALL, "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert set(d) == {"static", "rfabric"}
    for name, v in d.items():
        assert KEYS <= set(v)
        assert set(v["phases"]) == {"generation", "weight_sync", "training"}
        assert v["iteration_s"] > 0 and v["capex_usd"] > 0
        assert v["samples_per_s_per_musd"] == pytest.approx(v["samples_per_s"] / (v["capex_usd"] / 1e6))
    assert d["rfabric"]["architecture"] == "rfabric" and d["static"]["architecture"] == "dgx"


def test_static_only_async_and_reconfig_time(capsys):
    rc, out, err = run(capsys, "rl", "--gpus", 256, "--model", "llama3-8b", *SMALL, "--fabric", "static", "--async",
                       "--oversubscription", 2, "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert set(d) == {"static"} and d["static"]["pipeline"] == "async"
    assert d["static"]["params"]["oversubscription"] == 2.0
    rc, out, err = run(capsys, "rl", "--gpus", 256, "--model", "llama3-8b", *SMALL, "--fabric", "rfabric",
                       "--reconfig-time", "200ms", "--comm", "analytic", "--json")
    assert rc == 0, err
    d = json.loads(out)["rfabric"]
    assert d["reconfiguration_time_s"] == pytest.approx(0.2) and d["timing"] == "analytic"


def test_human_output(capsys):
    rc, out, err = run(capsys, "rl", "--gpus", 256, "--model", "llama3-8b", *SMALL, "--comm", "analytic")
    assert rc == 0, err
    assert "static" in out and "rfabric" in out and "samples/s per $M" in out


def test_table(capsys):
    rc, out, err = run(capsys, "rl", "--gpus", 256, "--model", "llama3-8b", *SMALL, "--comm", "analytic", "--table",
                       "--json")
    assert rc == 0, err
    t = json.loads(out)["table"]
    assert [r["static"] for r in t["rows"]] == ["static 1:1", "static 2:1", "static 4:1"]
    assert len(t["sweep"]) == 5 and t["sweep"][0]["reconfiguration_time_s"] == pytest.approx(1.2e-3)
    assert t["sweep"][-1]["reconfiguration_time_s"] == pytest.approx(0.2)
    rc, out, err = run(capsys, "rl", "--gpus", 256, "--model", "llama3-8b", *SMALL, "--comm", "analytic", "--table")
    assert rc == 0 and "| static 1:1 |" in out and "reconfiguration time" in out


@pytest.mark.parametrize("argv, field", [
    (["--model", "llama3-8b", "-p", "nonsense=1"], "-p nonsense"),
    (["--model", "llama3-8b", "-p", "samples=lots"], "-p samples"),
    (["--model", "llama3-8b", "--fabric", "ring"], "--fabric"),
    (["--model", "llama3-8b", "--oversubscription", "0.5"], "--oversubscription"),
    (["--model", "llama3-8b", "--reconfig-time", "soon"], "--reconfig-time"),
    (["--model", "llama3-8b", "--gpus", "0"], "--gpus"),
    (["--model", "llama3-8b", "--comm", "psychic"], "--comm"),
    (["--model", "no-such-model"], "--model"),
    (["--model", "llama3-8b", "-p", "lengths_file=/nonexistent/lengths.txt"], "lengths_file"),
    (["--model", "llama3-8b", "-p", "gen_tp=3"], "gen_tp"),
    (["--model", "llama3-8b", "-p", "core_ratio=2"], "core_ratio"),
    ([], "--model"),  # the runner gives --gpus 256: a second --gpus is now refused as given twice
    # given, then ignored: the table fixes its own fabrics, ratios and OCS times; a static fabric never reconfigures
    (["--model", "llama3-8b", "--table", "--fabric", "static"], "--fabric"),
    (["--model", "llama3-8b", "--table", "--oversubscription", "2"], "--oversubscription"),
    (["--model", "llama3-8b", "--table", "--reconfig-time", "5ms"], "--reconfig-time"),
    (["--model", "llama3-8b", "--fabric", "static", "--reconfig-time", "5ms"], "--reconfig-time"),
])
def test_bad_input_is_one_line_exit_2(capsys, argv, field):
    rc, out, err = run(capsys, "rl", "--gpus", 256, *SMALL, *argv)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and field in lines[0]
    assert out == ""


def test_table_whose_every_rfabric_candidate_fails_exits_1(capsys, monkeypatch):
    """Errors are never silent: an all-failed comparison is not an empty table with exit 0."""
    import workloads.rl
    from fabric.errors import ComputeError

    real = workloads.rl.evaluate_rl

    def failing(fab, *a, **kw):
        if fab.architecture == "rfabric":
            raise ComputeError("solver", "the circuit ILP ended with status error (Not Set)")
        return real(fab, *a, **kw)

    monkeypatch.setattr(workloads.rl, "evaluate_rl", failing)
    rc, out, err = run(capsys, "rl", "--gpus", 128, "--model", "llama3-8b", *SMALL, "--comm", "analytic", "--table")
    assert rc == 1 and out == ""
    assert err.startswith("error: rl table: every rfabric candidate failed") and "Not Set" in err


def test_no_ocs_design_pays_within_one_pod(capsys):
    """128 GPUs at radix 16 fit one 2-tier leaf-spine (16 ToRs x 8): the rfabric could only add a tier, so the
    command says so instead of pricing an idle OCS core; at 256 GPUs the static fabric needs 3 tiers and both
    sides are built on the same ToRs and pods."""
    rc, out, err = run(capsys, "rl", "--gpus", 128, "--model", "llama3-8b", *SMALL, "--comm", "analytic", "--json")
    assert rc == 0, err
    d = json.loads(out)
    assert KEYS <= set(d["static"]) and d["rfabric"]["verdict"] == "no OCS design pays at this size"
    assert "up to 128 GPUs at radix 16" in d["rfabric"]["reason"]
    rc, out, err = run(capsys, "rl", "--gpus", 256, "--model", "llama3-8b", *SMALL, "--comm", "analytic", "--json")
    d = json.loads(out)
    assert "3-tier" in d["static"]["notes"][-1] and "3-tier" in d["rfabric"]["notes"][-1]
    assert d["rfabric"]["per_dollar_vs_static"] == pytest.approx(
        d["rfabric"]["samples_per_s_per_musd"] / d["static"]["samples_per_s_per_musd"])
