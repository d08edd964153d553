"""Viewer speed: the standalone page of a 10,000+ device fabric in < 5 s (issue: viewer).

Run with ``pytest -m bench -s tests/benchmarks/test_bench_viewer.py``; every
case prints its figures.  The browser case prints the time until BokehJS reports the
document idle and the time of one repaint, in headless Chromium without WebGL
(canvas: what a browser without a GPU gets) and with software WebGL
(SwiftShader: slow, since every line fragment is shaded on the CPU; a GPU
makes WebGL the fast one); it skips without Chromium.
"""

from __future__ import annotations

import time

import pytest

from cli.view import compose
from fabric.viewer import build_view, write_html
from tests.browser.conftest import artifacts, browser, browser_canvas  # noqa: F401  (fixtures)

# (architecture, GPUs, parameters, TP): each has more than 10,000 devices (GPUs, NICs, switches, OCS)
CASES_10K = [
    ("khop-ring", 5120, [], 16),
    ("dgx", 4096, [], 8),
    ("nvl-72", 4608, [], 16),
    ("tpuv4", 8192, [], 64),
    ("fat-tree", 8192, ["k=32"], 1),
]


def _page(tmp_path, arch, gpus, params, tp, ratio=0.01):
    t0 = time.perf_counter()
    fab, overlay, title = compose({"architecture": arch, "gpus": gpus, "tp": tp, "fault_ratio": ratio, "seed": 1},
                                  params=params)
    t1 = time.perf_counter()
    layout = build_view(fab, overlay, title=title)
    t2 = time.perf_counter()
    out = tmp_path / f"{arch}.html"
    write_html(layout, out, title=title)
    t3 = time.perf_counter()
    glyphs = len(layout.select_one({"name": "device_data"}).data["x"])
    edges = len(layout.select_one({"name": "edge_table"}).data["a"])
    level = layout.children[0].text.split("Level of detail: ")[1].split(" (")[0].split(".")[0]
    print(f"\n{arch} {fab.n_gpus:,} GPUs / {fab.n_devices:,} devices / {len(fab.links):,} links -> {level}: "
          f"{glyphs:,} glyphs, {edges:,} edges; compose {t1 - t0:.2f} s, view {t2 - t1:.2f} s, "
          f"html {t3 - t2:.2f} s ({out.stat().st_size / 1e6:.1f} MB); page {t3 - t1:.2f} s, total {t3 - t0:.2f} s")
    return fab, out, t3 - t1, t3 - t0


@pytest.mark.bench
@pytest.mark.parametrize("arch, gpus, params, tp", CASES_10K)
def test_standalone_page_for_10k_devices(tmp_path, arch, gpus, params, tp):
    fab, _, page_s, total_s = _page(tmp_path, arch, gpus, params, tp)
    assert fab.n_devices >= 10_000
    assert total_s < 5.0  # faults, TP groups, layout, document and the HTML file


@pytest.mark.bench
def test_aggregated_page_for_100k_gpus(tmp_path):
    fab, _, page_s, total_s = _page(tmp_path, "khop-ring", 100_000, ["k=3"], 32)
    assert fab.n_devices > 200_000 and total_s < 30.0


def _render(driver, out, label, artifacts, name):
    """Open the page, print the time to BokehJS idle and to one repaint; screenshot."""
    from tests.browser.test_viewer_browser import _open, _severe

    _, seconds = _open(driver, out.as_uri(), timeout=300)
    driver.set_script_timeout(300)
    repaint_ms = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const view = Bokeh.index.get_one(Bokeh.documents[0].get_model_by_name('fabric_plot'));
        const t0 = performance.now();
        view.request_paint(); view.paint();
        done(performance.now() - t0);""")
    print(f"\nheadless Chromium, {label}: idle after {seconds:.1f} s, one repaint (pan/zoom frame) {repaint_ms:.0f} ms")
    assert _severe(driver) == []
    driver.save_screenshot(str(artifacts / name))


@pytest.mark.bench
def test_browser_renders_10k_devices(tmp_path, browser, browser_canvas, artifacts):  # noqa: F811
    fab, out, _, _ = _page(tmp_path, "khop-ring", 5120, [], 16)
    _render(browser_canvas, out, f"{fab.n_devices:,} devices, no WebGL (canvas fallback)", artifacts,
            "viewer_bench_khop_5120_canvas.png")
    _render(browser, out, f"{fab.n_devices:,} devices, software WebGL (SwiftShader)", artifacts,
            "viewer_bench_khop_5120_webgl.png")
