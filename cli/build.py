"""`fabric list` and `fabric build`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.common import CATALOG_OPT, GPUS_OPT, JSON_OPT, PARAM_OPT, TOPOLOGY_OPT, build_fabric, console, emit_json


def list_architectures(as_json: bool = JSON_OPT) -> None:
    """Architectures with their parameters, defaults and meaning."""
    from topologies import ALIASES, ARCHITECTURES

    data = {
        "architectures": [
            {"name": a.name, "summary": a.summary, "params": [p.to_dict() for p in a.params]}
            for a in ARCHITECTURES.values()
        ],
        "aliases": {k: {"architecture": v[0], "params": v[1]} for k, v in ALIASES.items()},
    }
    if as_json:
        emit_json(data)
        return
    from rich.table import Table

    con = console()
    for a in data["architectures"]:
        t = Table(title=f"{a['name']}: {a['summary']}", title_justify="left", show_edge=False)
        for col in ("param", "type", "default", "meaning"):
            t.add_column(col)
        for p in a["params"]:
            meaning = p["help"] + (f" [{', '.join(map(str, p['choices']))}]" if "choices" in p else "")
            t.add_row(p["name"], p["type"], str(p["default"]), meaning)
        con.print(t)
        con.print()
    con.print("aliases: " + ", ".join(f"{k} = {v['architecture']} {v['params']}" for k, v in data["aliases"].items()))


def build_command(
    arch: Optional[str] = typer.Argument(None, help="architecture (see `fabric list`)"),
    gpus: Optional[int] = GPUS_OPT,
    param: list[str] = PARAM_OPT,
    topology: Optional[Path] = TOPOLOGY_OPT,
    catalog: Optional[Path] = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Build an architecture and report what was built (counts and inventory)."""
    from fabric.catalog import load_catalog
    from topologies import build_summary

    fab = build_fabric(arch, gpus, param, load_catalog(catalog), topology)
    data = build_summary(fab)
    if as_json:
        emit_json(data)
        return
    from rich.table import Table

    con = console()
    t = Table(title=f"{fab.architecture} ({fab.n_gpus} GPUs)", title_justify="left")
    t.add_column("count")
    t.add_column("value", justify="right")
    for k, v in data["counts"].items():
        t.add_row(k, f"{v:,}")
    con.print(t)
    inv = Table(title="inventory", title_justify="left")
    inv.add_column("catalog id")
    inv.add_column("count", justify="right")
    for k, v in data["inventory"].items():
        inv.add_row(k, f"{v:,}")
    con.print(inv)
    for n in fab.notes:
        con.print(f"note: {n}")


def register(app: typer.Typer) -> None:
    app.command("list")(list_architectures)
    app.command("build")(build_command)
