"""`fabric rl`: disaggregated RL post-training on a static fat-tree vs an OCS-reconfigured rfabric.

A thin shell over :mod:`workloads.rl.compare`.  The static fabric is
``dgx`` (8-GPU nodes, one NIC per GPU) on a fat-tree with the ToR
oversubscription ``--oversubscription`` (3 tiers once the GPUs need more than
one pod; a single pod is a 2-tier leaf-spine unless ``-p tiers=3``); the
rfabric is the same ToRs and pods with the aggregation uplinks through OCS
(``-p core_ratio``: 0 here by default, the OCS joining pods directly; 1 keeps
a full electrical core behind it), whose circuits the solver assigns per
phase.  The radix ``-p k`` defaults to switch bandwidth / NIC bandwidth (128 x
400G on 51.2T: 4,096 GPUs per pod at 1:1); a smaller ``-p k`` gives several
pods at small GPU counts (then price the switch per port with ``--catalog``).

The comparison is fair by construction: both sides are built for the same
GPUs, on the same ToRs and pods at the same oversubscription, and the OCS is
placed between pods, where it can replace or re-wire a tier.  When the static
fat-tree reaches every GPU in one pod (a 2-tier leaf-spine: up to ``k x d``
GPUs at radix ``k`` with ``d`` ToR downlinks), no OCS design can pay, and the
rfabric object says so (``verdict``, ``reason``) instead of pricing an idle
OCS core.  ``--fabric both`` compares at equal lower tiers (neither equal cost
nor equal performance is imposed: ``per_dollar_vs_static``); ``--table`` picks
the rfabric at equal cost and at equal performance.

:func:`workloads.rl.compare.rl_summary` is the importable evaluation (one object per fabric with
``phases``, ``iteration_s``, ``samples_per_s``, ``capex_usd`` and
``samples_per_s_per_musd``); :func:`~workloads.rl.compare.rl_table` is the comparison behind
``--table``: static fat-trees at 1:1, 2:1 and 4:1 against the rfabric at equal
cost and at equal performance, and the rfabric's win as the OCS
reconfiguration time grows.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from cli.common import CATALOG_OPT, JSON_OPT, console, emit_json
from fabric.errors import FabricError


# ---------------------------------------------------------------------------------------------- command
def rl_command(
    gpus: int = typer.Option(256, "--gpus", help="GPUs of the cluster (both pools; whole 8-GPU nodes)"),
    param: list[str] = typer.Option([], "-p", "--param", help="name=value: an RL parameter (samples, train_fraction, "
                                    "gen_tp, sync, ...) or a fabric parameter (k, gpu, core_ratio, ...); repeatable"),
    model: str = typer.Option(..., "--model", help="model preset (e.g. llama3-8b, llama3-70b) or a .yaml/.json file"),
    fabric: Optional[str] = typer.Option(None, "--fabric", help="static | rfabric | both (default: both)"),
    oversubscription: Optional[float] = typer.Option(None, "--oversubscription",
                                                     help="ToR downlink:uplink ratio (>= 1; default: 1)"),
    reconfig_time: Optional[str] = typer.Option(None, "--reconfig-time", help="OCS reconfiguration time, e.g. 1.2ms "
                                                "or 200ms (default: the catalog's, Palomar 1.2 ms median)"),
    do_async: bool = typer.Option(False, "--async", help="one-step asynchronous pipeline (StreamRL style)"),
    comm: str = typer.Option("sim", "--comm", help="timing: sim (flow simulator) | analytic (bottleneck bound)"),
    table: bool = typer.Option(False, "--table", help="static 1:1/2:1/4:1 vs rfabric at equal cost and performance, "
                                                     "and the win vs reconfiguration time"),
    catalog: Optional[Path] = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Disaggregated RL (generation, weight sync, training) on a static fat-tree vs an OCS-reconfigured rfabric."""
    import topologies
    from fabric.catalog import load_catalog
    from fabric.units import parse_time
    from topologies.params import parse_assignments
    from workloads.rl.compare import rl_summary, rl_table  # lazily: 0.1 s of start-up (issue 18)

    if comm not in ("sim", "analytic"):
        raise FabricError("--comm", f"{comm!r} not allowed; use sim or analytic")
    if gpus <= 0:
        raise FabricError("--gpus", f"{gpus} must be a whole number > 0")
    _check_unused(table, fabric, oversubscription, reconfig_time)
    fabric = fabric or "both"
    oversubscription = 1.0 if oversubscription is None else oversubscription
    rt = parse_time(reconfig_time, "--reconfig-time") if reconfig_time is not None else None
    cat = load_catalog(catalog)
    params = parse_assignments(param)
    pipeline = "async" if do_async else "sync"
    if table:
        data = rl_table(topologies, gpus, model, pipeline=pipeline, params=params, catalog=cat, timing=comm)
        for r in data["rfabric"]:
            if "error" in r:  # a partial failure is said, one line each, never silent
                sys.stderr.write(f"warning: {r['label']} failed: {r['error']}\n")
        if as_json:
            emit_json({"table": data})
        else:
            print_table(data)
        return
    data = rl_summary(topologies, gpus, model, fabric=fabric, oversubscription=oversubscription, reconfig_time=rt,
                      pipeline=pipeline, params=params, catalog=cat, timing=comm)
    if as_json:
        emit_json(data)
        return
    _print(data)


def _check_unused(table: bool, fabric: str | None, oversubscription: float | None,
                  reconfig_time: str | None) -> None:
    """Refuse an option the run would ignore: the table fixes its own fabrics, ratios and OCS times."""
    if table:
        for flag, given in (("--fabric", fabric), ("--oversubscription", oversubscription),
                            ("--reconfig-time", reconfig_time)):
            if given is not None:
                raise FabricError(flag, "not used with --table (it compares static 1:1/2:1/4:1 with rfabric over "
                                        "a range of reconfiguration times itself)")
    if fabric == "static" and reconfig_time is not None:
        raise FabricError("--reconfig-time", "not used with --fabric static (a static fat-tree never reconfigures)")


def _print(data: dict) -> None:
    from rich.table import Table

    con = console()
    first = next((d for d in data.values() if "verdict" not in d), None)
    if first is None:
        for name, d in data.items():
            con.print(f"{name}: {d['verdict']}: {d['reason']}")
        return
    t = Table(title=f"RL iteration: {first['model']} on {first['gpus']:,} GPUs ({first['pipeline']}, "
                    f"timing {first['timing']})", title_justify="left")
    for col in ("fabric", "generation", "weight sync", "training", "iteration", "re-wirings", "samples/s",
                "capex", "samples/s per $M"):
        t.add_column(col, justify="left" if col == "fabric" else "right")
    for name, d in data.items():
        if "verdict" in d:
            t.add_row(name, *["-"] * 8)
            continue
        ph = d["phases"]
        t.add_row(name, f"{ph['generation']:.3f} s", f"{ph['weight_sync']:.3f} s", f"{ph['training']:.3f} s",
                  f"{d['iteration_s']:.3f} s", str(d["reconfigurations"]), f"{d['samples_per_s']:.2f}",
                  f"${d['capex_usd'] / 1e6:,.2f}M", f"{d['samples_per_s_per_musd']:.4f}")
    con.print(t)
    for name, d in data.items():
        if "verdict" in d:
            con.print(f"{name}: {d['verdict']}: {d['reason']}")
        if "per_dollar_vs_static" in d:
            con.print(f"{name}: {100 * (d['per_dollar_vs_static'] - 1):+.1f} % samples/s per $M vs static; "
                      f"{d['comparison']}")
        for n in d.get("notes", []):
            con.print(f"note ({name}): {n}")


def print_table(data: dict) -> None:
    from workloads.rl.compare import format_table

    sys.stdout.write("\n".join(format_table(data)) + "\n")



def register(app: typer.Typer) -> None:
    app.command("rl")(rl_command)
