"""The Bokeh document the viewer builds: renderers, data sources, colours, tools, the page file."""

from __future__ import annotations

import os
import re

import numpy as np
import pytest
from bokeh.models import CustomJS, GlyphRenderer, HoverTool, Legend, TapTool

from fabric.errors import FabricError
from fabric.viewer import Overlay, build_view, style, write_html
from fabric.viewer.page import page_html
from topologies import build


@pytest.fixture(scope="module")
def khop():
    """8 nodes x 4 GPUs; node 2 faulty; two 12-GPU rings that skip it."""
    from topologies.khop import ring_configuration

    fab = build("khop-ring", 32, {"k": 2})
    fab = fab.with_configuration(ring_configuration(fab, [[0, 1, 3], [4, 5, 6]]))
    gpus = fab.gpu_ids
    node = fab.group("node")[gpus]
    groups = [np.concatenate([gpus[node == n] for n in ring]) for ring in ([0, 1, 3], [4, 5, 6])]
    return fab, Overlay(faulty_nodes=[2], tp_groups=groups, dp_groups=list(np.asarray(groups).T))


def _renderer(layout, name) -> GlyphRenderer:
    r = layout.select_one({"name": name})
    assert isinstance(r, GlyphRenderer), name
    return r


def test_layout_holds_a_header_and_a_webgl_plot(khop):
    layout = build_view(*khop, title="ring demo")
    header, plot = layout.children
    assert "ring demo" in header.text and "4 GPUs down" in header.text
    assert plot.output_backend == "webgl"
    for name in ("boxes", "links", "selected_links", "devices"):
        _renderer(layout, name)


def test_one_glyph_per_device_with_nics_folded(khop):
    fab, overlay = khop
    data = _renderer(build_view(fab, overlay), "devices").data_source.data
    # 32 GPUs, their 32 NICs folded in, plus one ToR
    assert len(data["x"]) == 33
    assert len(set(data["name"])) == 33
    assert sorted(set(data["kind"])) == ["GPU", "ToR"]


def test_faulty_gpus_are_red_and_others_are_not(khop):
    fab, overlay = khop
    data = _renderer(build_view(fab, overlay), "devices").data_source.data
    color = np.asarray(data["color"])
    node = np.asarray(data["node"])
    faulty = node == "2"
    assert faulty.sum() == 4
    assert np.all(color[faulty] == style.FAULT_COLOR)
    assert not np.any(color[~faulty] == style.FAULT_COLOR)
    assert set(np.asarray(data["fault"])[faulty]) == {"down"}
    assert set(np.asarray(data["legend"])[faulty]) == {"faulty GPU"}


def test_group_membership_is_in_the_data_source(khop):
    fab, overlay = khop
    data = _renderer(build_view(fab, overlay), "devices").data_source.data
    node = np.asarray(data["node"])
    tp = np.asarray(data["tp_group"])
    color = np.asarray(data["color"])
    for g, ring in enumerate(([0, 1, 3], [4, 5, 6])):
        members = np.isin(node, [str(n) for n in ring])
        assert np.all(tp[members] == g)
        assert np.all(color[members] == style.GROUP_PALETTE[g])
        assert sorted(np.asarray(data["tp"])[members & (node == str(ring[0]))]) == [
            f"{g} (rank {r})" for r in range(4)]
    idle = node == "7"
    assert np.all(tp[idle] == -1) and np.all(color[idle] == style.IDLE_COLOR)
    # DP groups: rank r of every ring
    assert np.asarray(data["dp"])[node == "0"].tolist() == ["0", "1", "2", "3"]


def test_links_are_bundled_per_style_with_a_legend(khop):
    layout = build_view(*khop)
    links = _renderer(layout, "links").data_source.data
    assert "skip hop (bypasses a node)" in links["label"]
    assert all(np.isnan(xs).sum() >= 0 for xs in links["xs"])
    legend = layout.select_one({"type": Legend})
    labels = [item.label["value"] for item in legend.items]
    for label in ("faulty GPU", "GPU in a TP group", "GPU in no TP group", "skip hop (bypasses a node)",
                  "OCS path (lit)", "faulty node"):
        assert label in labels
    assert len(labels) == len(set(labels))


def test_hover_and_tap_highlight_are_wired(khop):
    layout = build_view(*khop)
    plot = layout.children[1]
    hovers = {h.name: h for h in plot.select({"type": HoverTool})}
    fields = [f for _, f in hovers["device_hover"].tooltips]
    for f in ("@name", "@node", "@rack", "@tor", "@fault", "@tp", "@dp", "@load"):
        assert f in fields
    assert hovers["device_hover"].renderers == [_renderer(layout, "devices")]
    assert hovers["link_hover"].renderers == [_renderer(layout, "selected_links")]
    tap = plot.select_one({"type": TapTool})
    assert tap.renderers == [_renderer(layout, "devices")]
    src = _renderer(layout, "devices").data_source
    callbacks = src.selected.js_property_callbacks["change:indices"]
    assert len(callbacks) == 1 and isinstance(callbacks[0], CustomJS)
    args = callbacks[0].args
    assert args["out"] is _renderer(layout, "selected_links").data_source
    # the per-edge table the callback reads points into the drawn bundles
    edges = args["edges"].data
    assert args["links"] is _renderer(layout, "links").data_source
    assert int(np.sum(edges["npts"])) == sum(int(np.sum(~np.isnan(x))) for x in args["links"].data["xs"])


def test_large_fabric_is_aggregated_within_budget():
    fab = build("dgx", 512, {})
    layout = build_view(fab, max_glyphs=100)
    data = _renderer(layout, "devices").data_source.data
    assert len(data["x"]) <= 100 or "rack" in layout.children[0].text
    assert "one glyph per" in layout.children[0].text
    kinds = set(data["kind"])
    assert any(k.startswith("node") or k.startswith("rack") for k in kinds)


def test_load_colouring_without_loads_says_so():
    fab = build("fat-tree", None, {})
    links = _renderer(build_view(fab, color_links_by="load"), "links").data_source.data
    assert links["label"] == ["no load data"]


def test_bad_options_raise_fabric_errors(khop):
    fab, _ = khop
    with pytest.raises(FabricError):
        build_view(fab, color_links_by="heat")
    with pytest.raises(FabricError):
        build_view(fab, Overlay(faulty_nodes=[99]))


def test_page_is_standalone_and_written_atomically(khop, tmp_path, monkeypatch):
    layout = build_view(*khop)
    html = page_html(layout, "t")
    # BokehJS is inlined: no script is loaded from elsewhere, so the page opens offline
    assert re.search(r"<script[^>]*\bsrc=", html) is None
    assert "cdn.bokeh.org" not in html and len(html) > 500_000
    out = tmp_path / "view.html"
    write_html(layout, out, title="t")
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert oct(out.stat().st_mode & 0o777) == oct(0o644)

    # a failure while writing leaves the previous page and no temporary file
    before = out.read_text()

    def broken(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("fabric.viewer.page.page_html", lambda *a, **k: "x" * 10)
    monkeypatch.setattr(os, "replace", broken)
    with pytest.raises(FabricError, match="No space left"):
        write_html(layout, out)
    assert out.read_text() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["view.html"]


@pytest.mark.parametrize("target, message", [("missing/dir/view.html", "does not exist"), (".", "is a directory")])
def test_unwritable_targets_are_refused_before_any_work(tmp_path, target, message):
    fab = build("fat-tree", None, {})
    with pytest.raises(FabricError, match=message):
        write_html(build_view(fab), tmp_path / target)
