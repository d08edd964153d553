"""`fabric view`: the topology, its faults, TP groups and link loads in a Bokeh page or app.

This module composes what the viewer draws: it builds the architecture,
draws the node faults (:func:`fabric.faultset.fault_set`, the fault set
``fabric orchestrate`` sees for the same ratio and seed), forms TP groups on
the healthy GPUs and, for a k-hop ring, lights the rings that bypass faulty
nodes (:func:`solvers.allocation.allocate_lit`); then
:func:`fabric.viewer.build_view` draws it.  ``--out`` writes one standalone
page (BokehJS inlined: it opens offline); ``--serve`` runs the app with
widgets on 127.0.0.1.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from cli.common import CATALOG_OPT, GPUS_OPT, JSON_OPT, PARAM_OPT, TOPOLOGY_OPT, build_fabric, emit_json, given
from fabric.errors import FabricError

if TYPE_CHECKING:
    from fabric.catalog import Catalog

# ------------------------------------------------------------------- compose
def compose(settings: dict[str, Any], catalog: Catalog | None = None, params: list[str] | tuple = (),
            topology: Optional[Path] = None, link_loads: Optional[Path] = None):
    """Fabric, overlay and title for viewer ``settings`` (see ``fabric.viewer.server.DEFAULTS``).

    ``settings["k"]`` sets the k-hop reach (``-p k``) of a khop-ring; it is
    ignored by other architectures.  ``tp`` 0 or None forms no TP groups.
    """
    from fabric.faults import FaultModel
    from fabric.faultset import fault_set
    from fabric.viewer import Overlay
    from cli.link_loads import read_link_loads
    from fabric.catalog import load_catalog
    from solvers.allocation import allocate_lit  # lazily, as the rest: start-up (issue 18)
    from topologies import resolve_architecture

    arch = settings.get("architecture")
    params = list(params)
    if arch is not None and topology is None and settings.get("k") is not None:
        if resolve_architecture(arch)[0].name == "khop-ring" and not any(p.startswith("k=") for p in params):
            params.append(f"k={int(settings['k'])}")
    fab = build_fabric(arch if topology is None else None, settings.get("gpus"), params,
                       catalog or load_catalog(), topology)
    ratio = float(settings.get("fault_ratio") or 0.0)
    if not 0.0 <= ratio <= 1.0:
        raise FabricError("--node-fault-ratio", f"{ratio} must be in [0, 1]")
    seed = int(settings.get("seed") or 0)
    faulty = fault_set(fab, FaultModel({"node": ratio}), seed).nodes
    tp = settings.get("tp")
    groups = dp = None
    if tp:
        fab, alloc = allocate_lit(fab, int(tp), faulty)
        groups = alloc.groups
        # pure TP x DP: the GPUs with the same rank in every TP group all-reduce gradients together
        dp = groups.T
    util = nbytes = None
    if link_loads is not None:
        names = fab.device_names()
        util, nbytes = read_link_loads(link_loads, len(fab.links),
                                       lambda j: (str(names[fab.links.src[j]]), str(names[fab.links.dst[j]])))
    label = f"node fault ratio {ratio:g}, seed {seed}" if ratio > 0 else ""
    overlay = Overlay(faulty_nodes=faulty if ratio > 0 else None, tp_groups=groups, dp_groups=dp,
                      link_utilisation=util, link_bytes=nbytes, label=label)
    title = f"{fab.architecture}: {fab.n_gpus:,} GPUs" + (f", {label}" if label else "") + \
        (f", TP {tp}" if tp else "")
    return fab, overlay, title


# ----------------------------------------------------------------------- CLI
DEFAULT_PORT = 5006
"""Port of ``fabric view --serve`` (Bokeh's own default)."""
DEFAULT_BACKEND = "webgl"
"""How the page draws: WebGL, unless ``--backend canvas`` for browsers whose WebGL is CPU-emulated."""


def _check_mode(serve: bool, out: Optional[Path], port: Optional[int], level: Optional[str], max_glyphs: int,
                backend: Optional[str], as_json: bool) -> None:
    """A page (``--out``) or the app (``--serve``), and no option the chosen mode does not use."""
    if serve and out is not None:
        raise FabricError("--out", "give --out FILE.html for a page, or --serve for the app, not both")
    if not serve and out is None:
        raise FabricError("--out", "missing: give --out FILE.html for a page, or --serve for the app")
    # an option the chosen mode does not use is refused, not ignored (as everywhere in the CLI)
    if port is not None and not serve:
        raise FabricError("--port", "is the port of --serve; a page written with --out needs none")
    if serve and level is not None:
        raise FabricError("--level", "forces the level of detail of the page of --out; the app of --serve chooses "
                                     "it by its glyph budget (--max-glyphs)")
    if level is not None and max_glyphs:  # the budget only chooses a level: the page was the same without it
        raise FabricError("--max-glyphs", "chooses the level of detail by its budget; --level forces one (give one "
                                          "of the two)")
    if serve and backend is not None:
        raise FabricError("--backend", "chooses how the page of --out draws; the app of --serve draws with WebGL")
    if serve and as_json:  # the summary describes the page written; the app writes none
        raise FabricError("--json", "describes the page of --out; the app of --serve prints its address instead")


def view_command(
    arch: Optional[str] = typer.Argument(None, help="architecture (see `fabric list`); with --serve the initial one"),
    gpus: Optional[int] = GPUS_OPT,
    param: list[str] = PARAM_OPT,
    topology: Optional[Path] = TOPOLOGY_OPT,
    catalog: Optional[Path] = CATALOG_OPT,
    node_fault_ratio: float = typer.Option(0.0, "--node-fault-ratio", help="i.i.d. node failure ratio in [0, 1]"),
    seed: int = typer.Option(0, "--seed", help="seed of the fault sample"),
    tp: Optional[int] = typer.Option(None, "--tp", help="form TP groups of this many GPUs on healthy GPUs"),
    link_loads: Optional[Path] = typer.Option(None, "--link-loads",
                                              help="`fabric simulate --links --json` output, or JSON/NPZ "
                                                   "'utilisation'/'bytes' per physical link"),
    color_links_by: str = typer.Option("type", "--color-links-by", help="type, medium or load"),
    max_glyphs: int = typer.Option(0, "--max-glyphs", help="glyph budget before aggregating (0: default)"),
    level: Optional[str] = typer.Option(None, "--level", help="force device, node or rack level of detail"),
    backend: Optional[str] = typer.Option(None, "--backend", show_default=False,
                                          help="webgl (GPU browsers; the default) or canvas (browsers whose WebGL "
                                               "is CPU-emulated)"),
    out: Optional[Path] = typer.Option(None, "--out", help="write a standalone HTML page here"),
    serve: bool = typer.Option(False, "--serve", help="run the interactive app on 127.0.0.1"),
    port: Optional[int] = typer.Option(None, "--port", show_default=False, help="port of --serve (default 5006)"),
    as_json: bool = JSON_OPT,
) -> None:
    """See the topology: faulty nodes, the rings and TP groups formed around them, ToRs, link load."""
    import numpy as np

    from fabric.catalog import load_catalog
    from fabric.viewer import DEFAULT_MAX_GLYPHS, build_view, style, write_html
    from fabric.viewer.document import BACKENDS
    from fabric.viewer.page import check_writable

    if not 0.0 <= node_fault_ratio <= 1.0:
        raise FabricError("--node-fault-ratio", f"{node_fault_ratio} must be in [0, 1]")
    if seed < 0:
        raise FabricError("--seed", f"{seed} must be >= 0")
    if given("seed") and node_fault_ratio == 0 and not serve:  # no fault is drawn on the page: it was ignored
        raise FabricError("--seed", "seeds the faults of --node-fault-ratio; give a ratio > 0, or leave --seed out")
    if color_links_by not in style.LINK_COLORINGS:
        raise FabricError("--color-links-by", f"{color_links_by!r}; allowed: {', '.join(style.LINK_COLORINGS)}")
    if max_glyphs < 0:
        raise FabricError("--max-glyphs", f"{max_glyphs} must be >= 0")
    if backend is not None and backend not in BACKENDS:
        raise FabricError("--backend", f"{backend!r}; allowed: {', '.join(BACKENDS)}")
    _check_mode(serve, out, port, level, max_glyphs, backend, as_json)
    if color_links_by == "load" and link_loads is None and not serve:  # every link would show idle
        raise FabricError("--color-links-by", "load needs --link-loads FILE (`fabric simulate --links --json`)")
    budget = max_glyphs or DEFAULT_MAX_GLYPHS
    cat = load_catalog(catalog)
    settings = {"architecture": arch, "gpus": gpus, "tp": tp, "fault_ratio": node_fault_ratio, "seed": seed,
                "color_links_by": color_links_by, "k": None}
    if serve:
        if topology is not None or link_loads is not None:
            raise FabricError("--serve", "the app builds architectures by name; --topology and --link-loads "
                                         "work with --out")
        _serve(settings, cat, param, DEFAULT_PORT if port is None else port, budget)
        return
    # the page must not replace a file the view reads (`--out topo.json` overwrote the topology it drew)
    check_writable(out, inputs={"--topology": topology, "--catalog": catalog, "--link-loads": link_loads})
    fab, overlay, title = compose(settings, cat, param, topology, link_loads)
    layout = build_view(fab, overlay, color_links_by=color_links_by, max_glyphs=budget, level=level, title=title,
                        backend=backend or DEFAULT_BACKEND)
    write_html(layout, out, title=title)
    glyphs = len(layout.select_one({"name": "device_data"}).data["x"])
    faulty = 0 if overlay.faulty_nodes is None else int(np.isin(fab.group("node")[fab.gpu_ids],
                                                                overlay.faulty_nodes).sum())
    summary = {"out": str(out), "architecture": fab.architecture, "gpus": fab.n_gpus, "devices": fab.n_devices,
               "glyphs": glyphs, "faulty_gpus": faulty,
               "tp_groups": 0 if overlay.tp_groups is None else len(overlay.tp_groups)}
    if as_json:
        emit_json(summary)
    else:
        sys.stderr.write(f"wrote {out} ({summary['glyphs']:,} glyphs for {fab.n_devices:,} devices)\n")


def _serve(settings: dict, cat: Catalog, params: list[str], port: int, max_glyphs: int) -> None:
    """Run the app until Ctrl-C; every browser session gets its own widgets and view."""
    from fabric.viewer.server import DEFAULTS, ViewerApp, ViewerServer
    from topologies import ALIASES, ARCHITECTURES

    choices = sorted(set(ARCHITECTURES) | set(ALIASES))
    if settings["architecture"] is None:
        # no ARCH: the demo (a k-hop ring with faults and TP rings), changed by what was given
        given = {k: v for k, v in settings.items() if v not in (None, 0, 0.0, "type")}
        initial = {**DEFAULTS, **given}
    else:
        initial = {**DEFAULTS, **{k: v for k, v in settings.items() if k != "k"}, "tp": settings["tp"] or 0}
    if initial["architecture"] not in choices:
        raise FabricError("ARCH", f"unknown architecture {initial['architecture']!r}; allowed: {', '.join(choices)}")

    def make_app() -> ViewerApp:
        return ViewerApp(lambda s: compose(s, cat, params), choices, initial, max_glyphs)

    make_app()  # bad initial settings fail here, with the usual one-line error, before listening
    server = ViewerServer(make_app, port=port)
    server.run(on_ready=lambda url: sys.stderr.write(f"serving the fabric viewer at {url} (Ctrl-C stops)\n"))


def register(app: typer.Typer) -> None:
    app.command("view")(view_command)
