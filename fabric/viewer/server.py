"""The served viewer: widgets that rebuild the view, and a Bokeh server on 127.0.0.1.

The viewer cannot build architectures or sample faults itself (``fabric``
imports nothing above it), so :class:`ViewerApp` takes a ``compose``
callback: settings in, ``(Fabric, Overlay, title)`` out.  ``cli.view``
provides it.

A bad widget value (a ``k`` beyond the ring, a TP size the HBD cannot form,
``abc`` as a GPU count, a fabric over the resource limits) never takes the
session down: :meth:`ViewerApp.update` shows the error in a Div, keeps the
previous view and settings, and puts every widget back to the value in force.
"""

from __future__ import annotations

import asyncio
import math
import signal
import threading
from typing import Any, Callable

from bokeh.application import Application
from bokeh.application.handlers.function import FunctionHandler
from bokeh.document import Document
from bokeh.layouts import column, row
from bokeh.models import Button, Div, Select, Slider, Spinner

from fabric import limits
from fabric.errors import FabricError
from fabric.model import Fabric
from fabric.viewer import style
from fabric.viewer.document import build_view
from fabric.viewer.levels import DEFAULT_MAX_GLYPHS
from fabric.viewer.overlay import Overlay

Compose = Callable[[dict[str, Any]], tuple[Fabric, Overlay, str]]

DEFAULTS: dict[str, Any] = {
    "architecture": "khop-ring", "gpus": 256, "k": 2, "tp": 16, "fault_ratio": 0.05, "seed": 0,
    "color_links_by": "type",
}
MAX_RATIO = 0.5  # the slider's range; the CLI accepts up to 1


def check_settings(settings: dict[str, Any], architectures: list[str]) -> dict[str, Any]:
    """Settings with their types checked; raises FabricError naming the widget.

    Range checks that depend on the fabric (k against the node count, TP
    against the HBD) are left to ``compose``.
    """
    out = dict(settings)
    if out["architecture"] not in architectures:
        raise FabricError("architecture", f"{out['architecture']!r}; allowed: {', '.join(architectures)}")
    for name, lo in (("gpus", 1), ("k", 1), ("tp", 0), ("seed", 0)):
        v = out[name]
        if v is None and name == "gpus":
            continue  # the architecture's default size
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or int(v) != v or v < lo:
            raise FabricError(name, f"{v!r} must be a whole number >= {lo}")
        out[name] = int(v)
    if out["gpus"] is not None:
        limits.check("gpus", out["gpus"], "gpus")  # before the fabric's own estimate, which builds a probe
    r = out["fault_ratio"]
    if isinstance(r, bool) or not isinstance(r, (int, float)) or not 0.0 <= r <= 1.0:
        raise FabricError("fault ratio", f"{r!r} must be in [0, 1]")
    if out["color_links_by"] not in style.LINK_COLORINGS:
        raise FabricError("colour links by", f"{out['color_links_by']!r}; allowed: {', '.join(style.LINK_COLORINGS)}")
    return out


class ViewerApp:
    """One session of the served viewer: widgets, an error Div and the current view.

    Parameters
    ----------
    compose : callable
        ``settings -> (fabric, overlay, title)``; raises FabricError on bad settings.
    architectures : list of str
        Choices of the architecture widget.
    settings : dict, optional
        Initial settings (see :data:`DEFAULTS`).
    max_glyphs : int
        Glyph budget of the view.
    height : int
        Plot height in pixels (the widgets take the rest of a laptop screen).
    """

    def __init__(self, compose: Compose, architectures: list[str], settings: dict[str, Any] | None = None,
                 max_glyphs: int = DEFAULT_MAX_GLYPHS, height: int = 600):
        self.compose = compose
        self.architectures = list(architectures)
        self.settings = check_settings({**DEFAULTS, **(settings or {})}, self.architectures)
        self.max_glyphs = max_glyphs
        self.height = height
        self.error = Div(text="", name="error", styles={"color": "#b00020", "font-weight": "bold"})
        self.view = self._build(self.settings)
        self.widgets = self._widgets()
        self._syncing = False
        controls = row(*self.widgets.values(), sizing_mode="stretch_width")
        self.root = column(controls, self.error, self.view, sizing_mode="stretch_width", name="viewer_root")

    def _build(self, settings: dict[str, Any]):
        fab, overlay, title = self.compose(settings)
        return build_view(fab, overlay, color_links_by=settings["color_links_by"], max_glyphs=self.max_glyphs,
                          title=title, height=self.height)

    def _widgets(self) -> dict[str, Any]:
        s = self.settings
        w = {
            "architecture": Select(title="architecture", value=s["architecture"], options=self.architectures,
                                   width=140),
            "gpus": Spinner(title="GPUs", value=s["gpus"], low=1, step=64, width=100),
            "k": Spinner(title="k (k-hop reach)", value=s["k"], low=1, step=1, width=110),
            "tp": Spinner(title="TP size (0: none)", value=s["tp"], low=0, step=4, width=120),
            "fault_ratio": Slider(title="node fault ratio", value=min(s["fault_ratio"], MAX_RATIO), start=0.0,
                                  end=MAX_RATIO, step=0.005, width=180),
            "seed": Spinner(title="seed", value=s["seed"], low=0, step=1, width=80),
            "color_links_by": Select(title="colour links by", value=s["color_links_by"],
                                     options=list(style.LINK_COLORINGS), width=110),
        }
        for name, widget in w.items():
            # the slider rebuilds when released, not on every pixel of a drag
            attr = "value_throttled" if isinstance(widget, Slider) else "value"
            widget.on_change(attr, self._on_widget(name))
        reset = Button(label="re-sample faults", width=130)
        reset.on_click(lambda: self.update(seed=self.settings["seed"] + 1))
        w["resample"] = reset
        return w

    def _on_widget(self, name: str):
        def callback(attr, old, new):
            if not self._syncing:
                self.update(**{name: new})
        return callback

    def update(self, **changes: Any) -> bool:
        """Apply ``changes`` and rebuild; on bad input show the error and keep the previous view.

        Returns
        -------
        bool
            True if the view was rebuilt.
        """
        try:
            if "gpus" in changes and changes["gpus"] is None:  # an empty or unreadable spinner, not "the default"
                raise FabricError("gpus", "give a whole number >= 1")
            settings = check_settings({**self.settings, **changes}, self.architectures)
            view = self._build(settings)
        except (FabricError, MemoryError) as exc:
            why = str(exc) if isinstance(exc, FabricError) else "out of memory; try fewer GPUs"
            self.error.text = f"Not applied: {_html_escape(why)}"
            self._sync_widgets()  # every widget shows the value in force again
            return False
        self.settings = settings
        self.error.text = ""
        self.view = view
        self.root.children = [*self.root.children[:2], view]
        self._sync_widgets()
        return True

    def _sync_widgets(self) -> None:
        """Show the applied settings in the widgets (e.g. after an update from Python)."""
        self._syncing = True
        try:
            for name, widget in self.widgets.items():
                if name in self.settings and widget.value != self.settings[name]:
                    widget.value = self.settings[name]
        finally:
            self._syncing = False

    def attach(self, doc: Document) -> None:
        """Put this session's layout into ``doc``."""
        doc.title = "fabric view"
        doc.add_root(self.root)


def _html_escape(text: str) -> str:
    import html

    return html.escape(text, quote=False)


def application(make_app: Callable[[], ViewerApp]) -> Application:
    """A Bokeh Application that gives every browser session its own :class:`ViewerApp`."""
    def session(doc: Document) -> None:
        make_app().attach(doc)
    return Application(FunctionHandler(session))


class ViewerServer:
    """A Bokeh server for the viewer on ``address:port`` (127.0.0.1 by default).

    :meth:`run` blocks (the CLI); :meth:`start` runs it in a background thread
    and :meth:`stop` shuts it down (tests).
    """

    def __init__(self, make_app: Callable[[], ViewerApp], port: int = 5006, address: str = "127.0.0.1"):
        if not 0 < int(port) < 65536:
            raise FabricError("port", f"{port} must be in 1..65535")
        self.port = int(port)
        self.address = address
        self._make_app = make_app
        self._server = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._failure: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://{self.address}:{self.port}/"

    def _create(self):
        from bokeh.server.server import Server

        origins = [f"localhost:{self.port}", f"127.0.0.1:{self.port}"]
        return Server({"/": application(self._make_app)}, address=self.address, port=self.port,
                      allow_websocket_origin=origins, num_procs=1)

    def run(self, on_ready: Callable[[str], None] | None = None) -> None:
        """Serve until interrupted (Ctrl-C); ``on_ready(url)`` once the port is listening."""
        try:
            self._server = self._create()
        except OSError as exc:
            raise FabricError("port", f"cannot listen on {self.address}:{self.port}: {exc.strerror or exc}") from None
        self._server.start()
        loop = self._server.io_loop
        # Ctrl-C stops the loop through asyncio's signal handler, which wakes the loop whichever thread the
        # signal lands on; the plain KeyboardInterrupt waits for the main thread to leave its select(), and a
        # loaded test run saw the server outlive SIGINT by more than 60 s that way
        try:
            loop.asyncio_loop.add_signal_handler(signal.SIGINT, loop.stop)
            handled = True
        except (NotImplementedError, RuntimeError, ValueError):  # no Unix signals (Windows): KeyboardInterrupt below
            handled = False
        if on_ready is not None:
            on_ready(self.url)
        try:
            loop.start()
        except KeyboardInterrupt:
            pass
        finally:
            if handled:
                loop.asyncio_loop.remove_signal_handler(signal.SIGINT)
            self._server.stop()

    def start(self, timeout: float = 30.0) -> "ViewerServer":
        """Serve from a background thread; returns once the port is listening."""
        self._thread = threading.Thread(target=self._serve_in_thread, name="fabric-viewer", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("viewer server did not start")
        if self._failure is not None:
            raise self._failure
        return self

    def _serve_in_thread(self) -> None:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            self._server = self._create()
            self._server.start()
        except BaseException as exc:  # reported to start()
            self._failure = exc
            self._ready.set()
            loop.close()
            return
        self._ready.set()
        self._server.io_loop.start()
        self._server.io_loop.close(all_fds=True)
        loop.close()

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the background server and wait for its thread."""
        if self._server is None or self._thread is None:
            return
        server = self._server

        def shutdown():
            server.stop()
            server.io_loop.stop()

        server.io_loop.add_callback(shutdown)
        self._thread.join(timeout)
        self._thread = None
        self._server = None
