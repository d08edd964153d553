"""`fabric cost` (one architecture, with a sensitivity tornado) and `fabric compare` (all at one GPU count)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.common import (CATALOG_OPT, GPUS_OPT, JSON_OPT, PARAM_OPT, TOPOLOGY_OPT, build_fabric, build_versus,
                        console, emit_json, given)
from fabric.errors import FabricError


def cost_command(
    arch: Optional[str] = typer.Argument(None, help="architecture (see `fabric list`)"),
    gpus: Optional[int] = GPUS_OPT,
    param: list[str] = PARAM_OPT,
    topology: Optional[Path] = TOPOLOGY_OPT,
    catalog: Optional[Path] = CATALOG_OPT,
    sensitivity: bool = typer.Option(False, "--sensitivity", help="vary each assumed price +-50 % (tornado table)"),
    versus: Optional[str] = typer.Option(None, "--versus", help="second architecture for the ratio, e.g. nvl:size=72"),
    swing: float = typer.Option(0.5, "--swing", help="relative price swing for --sensitivity"),
    as_json: bool = JSON_OPT,
) -> None:
    """Capex and power, total and per GPU, by scope and per component."""
    if not 0 < swing < 1:
        raise FabricError("--swing", f"{swing} must be in (0, 1)")
    if given("swing") and not sensitivity:  # it sizes the tornado: without one it was ignored
        raise FabricError("--swing", "sets the price swing of --sensitivity; add --sensitivity")
    from fabric.catalog import load_catalog
    from fabric.cost import cost_of, cost_summary, price_sensitivity

    cat = load_catalog(catalog)
    fab = build_fabric(arch, gpus, param, cat, topology)
    vfab, vparams = build_versus(versus, fab.n_gpus, cat) if versus is not None else (None, {})
    report = cost_of(fab, cat)
    data = cost_summary(fab, cat, report)
    other = None
    if versus is not None:
        other = cost_of(vfab, cat)
        data["versus"] = {"architecture": versus, "params": vparams, **{k: v for k, v in other.to_dict().items()
                                                                          if k != "breakdown"}}
        if not other.metric("hbd_capex_per_gpu_usd") > 0:  # a catalog's $0 parts: ZeroDivisionError, exit 1
            raise FabricError("--versus", f"{versus}'s HBD costs $0 per GPU with this catalog, so the HBD capex "
                                          "ratio is undefined; compare with an architecture whose HBD has a price")
        data["hbd_capex_ratio"] = report.metric("hbd_capex_per_gpu_usd") / other.metric("hbd_capex_per_gpu_usd")
    if sensitivity:
        data["sensitivity"] = price_sensitivity(report, other, swing=swing)
    if as_json:
        emit_json(data)
        return
    _print_cost(data)


def _print_cost(data: dict) -> None:
    from rich.table import Table

    con = console()
    t = Table(title=f"{data['architecture']}: {data['gpus']:,} GPUs", title_justify="left")
    for col in ("scope", "capex", "capex/GPU", "power", "power/GPU"):
        t.add_column(col, justify="right" if col != "scope" else "left")
    for scope, v in data["by_scope"].items():
        t.add_row(scope, f"${v['capex_usd']:,.0f}", f"${v['capex_per_gpu_usd']:,.0f}", f"{v['power_w'] / 1e3:,.1f} kW",
                  f"{v['power_w'] / max(data['gpus'], 1):,.0f} W")
    t.add_row("total", f"${data['capex_usd']:,.0f}", f"${data['capex_per_gpu_usd']:,.0f}",
              f"{data['power_w'] / 1e3:,.1f} kW", f"{data['power_per_gpu_w']:,.0f} W")
    con.print(t)
    b = Table(title="breakdown", title_justify="left")
    for col in ("item", "scope", "count", "unit", "total", "price source"):
        b.add_column(col, justify="right" if col in ("count", "unit", "total") else "left")
    for r in data["breakdown"]:
        b.add_row(r["item"], r["scope"], f"{r['count']:,}", f"${r['unit_price_usd']:,.0f}", f"${r['capex_usd']:,.0f}",
                  r["price_source"][:70])
    con.print(b)
    if "hbd_capex_ratio" in data:
        con.print(f"HBD capex per GPU, {data['architecture']} / {data['versus']['architecture']}: "
                  f"{data['hbd_capex_ratio']:.3f}")
    if "sensitivity" in data:
        s = Table(title="sensitivity: each assumed price -/+ swing", title_justify="left")
        s.add_column("item")
        s.add_column("HBD $/GPU low..high", justify="right")
        s.add_column("total $/GPU low..high", justify="right")
        has_ratio = "hbd_capex_ratio" in data
        if has_ratio:
            s.add_column("ratio low..high", justify="right")
        for r in data["sensitivity"]:
            h, c = r["hbd_capex_per_gpu_usd"], r["capex_per_gpu_usd"]
            row = [r["item"], f"{h['low']:,.0f}..{h['high']:,.0f}", f"{c['low']:,.0f}..{c['high']:,.0f}"]
            if has_ratio:
                row.append(f"{r['ratio']['low']:.3f}..{r['ratio']['high']:.3f}")
            s.add_row(*row)
        con.print(s)
    for n in data.get("notes", []):
        con.print(f"note: {n}")


def compare_command(
    gpus: int = typer.Option(4608, "--gpus", help="GPU count for every architecture"),
    catalog: Optional[Path] = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Cost and power per GPU of every reference architecture at one GPU count."""
    if gpus <= 0:
        raise FabricError("--gpus", f"{gpus} must be a whole number > 0")
    from fabric.catalog import load_catalog
    from fabric.cost import cost_table
    from topologies import REFERENCE_ARCHITECTURES, build

    cat = load_catalog(catalog)
    rows = cost_table([(label, build(arch, gpus, params, cat)) for label, arch, params in REFERENCE_ARCHITECTURES], cat)
    if as_json:
        emit_json({"gpus": gpus, "rows": rows})
        return
    from rich.table import Table

    t = Table(title=f"HBD and cluster cost per GPU at ~{gpus:,} GPUs", title_justify="left")
    for col in ("architecture", "GPUs", "HBD $/GPU", "HBD W/GPU", "HBD vs NVL-72", "DCN $/GPU", "total $/GPU",
                "total W/GPU"):
        t.add_column(col, justify="left" if col == "architecture" else "right")
    for r in rows:
        t.add_row(r["label"], f"{r['gpus']:,}", f"${r['hbd_capex_per_gpu_usd']:,.0f}",
                  f"{r['hbd_power_per_gpu_w']:,.1f}",
                  "-" if r["hbd_capex_vs_nvl72"] is None else f"{r['hbd_capex_vs_nvl72']:.2f}",
                  f"${r['dcn_capex_per_gpu_usd']:,.0f}", f"${r['capex_per_gpu_usd']:,.0f}",
                  f"{r['power_per_gpu_w']:,.0f}")
    console().print(t)


def register(app: typer.Typer) -> None:
    app.command("cost")(cost_command)
    app.command("compare")(compare_command)
