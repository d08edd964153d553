"""The served viewer: widgets rebuild the view, bad values are refused, the server starts and stops."""

from __future__ import annotations

import socket
import urllib.error
import urllib.request

import pytest
from bokeh.document import Document

from fabric.errors import FabricError
from fabric.viewer import Overlay
from fabric.viewer.server import DEFAULTS, ViewerApp, ViewerServer, check_settings
from topologies import build

ARCHS = ["khop-ring", "dgx"]


def compose(settings):
    """A small stand-in for cli.view.compose: a closed 8-node k-hop ring (it refuses k >= 8)."""
    params = {"k": settings["k"], "closed": True} if settings["architecture"] == "khop-ring" else {}
    fab = build(settings["architecture"], 32, params)
    if settings["tp"] and settings["tp"] % fab.hbd.gpus_per_node:
        raise FabricError("tp", f"{settings['tp']} must be a multiple of {fab.hbd.gpus_per_node}")
    return fab, Overlay(), f"{settings['architecture']} k={settings['k']}"


@pytest.fixture
def app():
    a = ViewerApp(compose, ARCHS, {"tp": 0, "fault_ratio": 0.0})
    a.attach(Document())
    return a


def _title(app) -> str:
    return app.view.children[0].text


def test_initial_view_and_widgets(app):
    assert "khop-ring k=2" in _title(app)
    assert app.error.text == ""
    assert app.root.children[2] is app.view
    assert set(app.widgets) >= {"architecture", "gpus", "k", "tp", "fault_ratio", "seed", "color_links_by"}


def test_a_good_update_rebuilds_and_syncs_widgets(app):
    old = app.view
    assert app.update(k=3)
    assert app.view is not old and app.root.children[2] is app.view
    assert "k=3" in _title(app) and app.widgets["k"].value == 3
    assert app.update(architecture="dgx", color_links_by="medium")
    assert app.settings["architecture"] == "dgx"


@pytest.mark.parametrize("changes, field", [
    ({"k": 0}, "k"),            # out of range for the widget
    ({"k": 40}, "params[k]"),   # beyond the 8 nodes of the ring (the topology refuses it)
    ({"tp": 6}, "tp"),        # not whole 4-GPU nodes (compose refuses it)
    ({"fault_ratio": 1.5}, "fault ratio"),
    ({"architecture": "nvl-9"}, "architecture"),
    ({"seed": -1}, "seed"),
    ({"color_links_by": "rainbow"}, "colour links by"),
])
def test_bad_values_show_an_error_and_keep_the_previous_view(app, changes, field):
    old_view, old_settings = app.view, dict(app.settings)
    assert app.update(**changes) is False
    assert field in app.error.text and app.error.text.startswith("Not applied")
    assert app.view is old_view and app.root.children[2] is old_view
    assert app.settings == old_settings
    # the next good value clears the error
    assert app.update(seed=old_settings["seed"] + 1)
    assert app.error.text == ""


def test_widgets_drive_updates(app):
    app.widgets["k"].value = 3
    assert app.settings["k"] == 3 and "k=3" in _title(app)
    app.widgets["tp"].value = 6
    assert "tp" in app.error.text and app.settings["tp"] == 0


def test_check_settings_types():
    ok = check_settings(DEFAULTS, ["khop-ring"])
    assert ok["gpus"] == DEFAULTS["gpus"]
    assert check_settings({**DEFAULTS, "gpus": None}, ["khop-ring"])["gpus"] is None
    with pytest.raises(FabricError, match="whole number"):
        check_settings({**DEFAULTS, "tp": 2.5}, ["khop-ring"])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_server_starts_on_localhost_and_stops_cleanly():
    port = _free_port()
    server = ViewerServer(lambda: ViewerApp(compose, ARCHS, {"tp": 0, "fault_ratio": 0.0}), port=port)
    assert server.url == f"http://127.0.0.1:{port}/"
    server.start()
    try:
        with urllib.request.urlopen(server.url, timeout=60) as resp:
            page = resp.read().decode()
        assert resp.status == 200 and "bokeh" in page.lower()
    finally:
        server.stop()
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(server.url, timeout=5)
    with socket.socket() as s:  # no listener remains: a new server can take the port again
        # SO_REUSEADDR as any server sets it: the test's own request may leave a TIME_WAIT
        # connection on the port, but binding and listening still fail while a listener is alive
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


def test_server_refuses_a_bad_port():
    with pytest.raises(FabricError, match="port"):
        ViewerServer(lambda: None, port=70000)


def test_a_rejected_widget_value_reverts_the_widget_and_says_why(app):
    """Issue 15: choosing dgx while TP was 4 used to leave `dgx` in the box over a k-hop plot."""
    assert app.update(tp=4)                     # whole 4-GPU k-hop nodes
    app.widgets["architecture"].value = "dgx"   # 4 is not whole 8-GPU DGX nodes: compose refuses it
    assert "tp: 4 must be a multiple of 8" in app.error.text  # names the TP widget (library parameter tp)
    assert app.settings["architecture"] == "khop-ring" and app.widgets["architecture"].value == "khop-ring"
    app.widgets["tp"].value = 6
    assert app.widgets["tp"].value == 4 and app.settings["tp"] == 4


def test_an_unreadable_gpu_count_is_refused_not_read_as_the_default(app):
    """Typing `abc` in the GPU spinner sends None: it used to mean the default size silently."""
    app.widgets["gpus"].value = None
    assert "gpus" in app.error.text and app.widgets["gpus"].value == app.settings["gpus"] == DEFAULTS["gpus"]


def test_a_huge_request_is_refused_before_any_allocation(app):
    """100,000 GPUs x k=1000 used to grow the server to 14 GB; the limit refuses it with the estimate."""
    assert app.update(gpus=10**12) is False
    assert "gpus" in app.error.text and "limit" in app.error.text
    assert app.widgets["gpus"].value == app.settings["gpus"]
