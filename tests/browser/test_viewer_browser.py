"""The viewer in a real (headless) browser: the standalone page and the served app.

Each test opens the page, waits until BokehJS reports the document idle, checks
that the console holds no error, finds the plot's canvas, and saves a
screenshot under ``test-artifacts/``.
"""

from __future__ import annotations

import socket
import time

import numpy as np
import pytest

from cli.view import compose
from fabric.viewer import Overlay, build_view, write_html
from fabric.viewer.server import ViewerApp, ViewerServer

# Count canvases through nested shadow roots (every Bokeh 3 view renders in one).
_CANVASES_JS = """
function count(root) {
  let n = root.querySelectorAll('canvas').length;
  root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) n += count(e.shadowRoot); });
  return n;
}
const ready = window.Bokeh !== undefined && Bokeh.documents.length > 0 && Bokeh.documents[0].is_idle;
return {ready: ready, canvases: count(document), errors: (window.__errors || []).slice()};
"""
# Injected after load: later errors (e.g. from a tap callback) are collected too.
_CATCH_JS = """
window.__errors = window.__errors || [];
window.addEventListener('error', e => window.__errors.push(String(e.message)));
window.addEventListener('unhandledrejection', e => window.__errors.push(String(e.reason)));
"""


def _open(driver, url: str, timeout: float = 180.0) -> tuple[dict, float]:
    driver.get_log("browser")  # drop what earlier pages logged
    t0 = time.perf_counter()
    driver.get(url)
    deadline = time.monotonic() + timeout
    while True:
        state = driver.execute_script(_CANVASES_JS)
        if state["ready"] and state["canvases"] > 0:
            break
        if time.monotonic() > deadline:
            pytest.fail(f"the plot did not render within {timeout:.0f} s: {state}")
        time.sleep(0.2)
    driver.execute_script(_CATCH_JS)
    return state, time.perf_counter() - t0


def _severe(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def _hot_uplink_loads(fab) -> np.ndarray:
    """Utilisation per physical link: light everywhere, one ToR uplink at 97 % (a hot spot to find)."""
    from fabric.model import DeviceKind

    util = np.random.default_rng(0).uniform(0.0, 0.5, len(fab.links))
    kind = fab.devices.kind
    uplinks = np.flatnonzero((kind[fab.links.src] == DeviceKind.TOR) & (kind[fab.links.dst] != DeviceKind.NIC))
    util[uplinks[0]] = 0.97
    return util


def _page(tmp_dir, name: str):
    """Build one page: (path, glyph count)."""
    if name == "khop":  # node faults and TP rings: arcs, skip hops around the faulty nodes, idle GPUs
        fab, overlay, title = compose({"architecture": "khop-ring", "gpus": 128, "k": 2, "tp": 12,
                                       "fault_ratio": 0.06, "seed": 0})
        color = "type"
    elif name == "tpuv4":  # one faulty host loses its whole cube
        fab, overlay, title = compose({"architecture": "tpuv4", "gpus": 1024, "tp": 64, "fault_ratio": 0.01,
                                       "seed": 1})
        color = "type"
    else:  # fat-tree coloured by link load, one hot uplink
        fab, _, title = compose({"architecture": "fat-tree"})
        overlay = Overlay(link_utilisation=_hot_uplink_loads(fab))
        color = "load"
    layout = build_view(fab, overlay, title=title, color_links_by=color)
    path = tmp_dir / f"{name}.html"
    write_html(layout, path, title=title)
    return path, len(layout.select_one({"name": "device_data"}).data["x"])


@pytest.fixture(scope="module")
def khop_page(tmp_path_factory):
    return _page(tmp_path_factory.mktemp("page"), "khop")


def test_standalone_page_renders_without_errors(browser, khop_page, artifacts):
    path, glyphs = khop_page
    state, seconds = _open(browser, path.as_uri())
    print(f"\nstandalone page idle after {seconds:.1f} s (software WebGL)")
    assert state["canvases"] > 0
    assert _severe(browser) == []
    # the plot in the browser carries every glyph the page was built with
    n = browser.execute_script("return Bokeh.documents[0].get_model_by_name('device_data').data.x.length")
    assert n == glyphs
    browser.save_screenshot(str(artifacts / "viewer_standalone_khop.png"))


@pytest.mark.parametrize("name", ["tpuv4", "fat-tree-load"])
def test_other_structures_render_without_errors(browser, tmp_path, artifacts, name):
    path, glyphs = _page(tmp_path, name)
    state, seconds = _open(browser, path.as_uri())
    assert state["canvases"] > 0 and _severe(browser) == []
    assert browser.execute_script("return Bokeh.documents[0].get_model_by_name('device_data').data.x.length") == glyphs
    browser.save_screenshot(str(artifacts / f"viewer_standalone_{name}.png"))


def _selected_links(driver, indices: list[int], timeout: float = 30.0) -> int:
    """Select device glyphs as a tap would and wait for the (asynchronous) CustomJS to fill the links."""
    driver.execute_script("Bokeh.documents[0].get_model_by_name('device_data').selected.indices = arguments[0];",
                          indices)
    deadline = time.monotonic() + timeout
    while True:
        n = driver.execute_script("return Bokeh.documents[0].get_model_by_name('selected_link_data').data.xs.length")
        if (n > 0) == bool(indices) or time.monotonic() > deadline:
            return n
        time.sleep(0.1)


def test_tapping_a_device_highlights_its_links(browser, khop_page, artifacts):
    _open(browser, khop_page[0].as_uri())
    assert _selected_links(browser, [5]) > 0
    ends = browser.execute_script("return Bokeh.documents[0].get_model_by_name('selected_link_data').data.ends")
    name = browser.execute_script("return Bokeh.documents[0].get_model_by_name('device_data').data.name[5]")
    assert all(name in e.split(" - ") for e in ends)
    time.sleep(0.5)  # let the highlight paint
    browser.save_screenshot(str(artifacts / "viewer_standalone_khop_selected.png"))
    assert _selected_links(browser, []) == 0
    assert browser.execute_script("return window.__errors") == []
    assert _severe(browser) == []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def served():
    from topologies import ARCHITECTURES

    server = ViewerServer(lambda: ViewerApp(compose, sorted(ARCHITECTURES), {"gpus": 128}), port=_free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_served_app_renders_without_errors(browser, served, artifacts):
    state, seconds = _open(browser, served.url)
    print(f"\nserved app idle after {seconds:.1f} s")
    assert state["canvases"] > 0
    assert _severe(browser) == []
    names = browser.execute_script("""
        const doc = Bokeh.documents[0];
        return ['viewer_root', 'error', 'fabric_plot', 'device_data']
            .filter(n => doc.get_model_by_name(n) !== null);""")
    assert names == ["viewer_root", "error", "fabric_plot", "device_data"]
    browser.save_screenshot(str(artifacts / "viewer_served_app.png"))
