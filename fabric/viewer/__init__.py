"""Interactive Bokeh viewer of a Fabric: layout, faults, TP groups, link loads.

:func:`build_view` builds the Bokeh layout that both front ends share: a
standalone HTML page (:func:`write_html`) and the ``bokeh serve`` app of
:mod:`fabric.viewer.server`.  Overlays come in as plain data
(:class:`Overlay`), so the viewer depends on no solver or simulator.

Modules: :mod:`~fabric.viewer.levels` (aggregation), :mod:`~fabric.viewer.layout`
(positions), :mod:`~fabric.viewer.edges` (links as drawn),
:mod:`~fabric.viewer.scene` (the document model as plain columns),
:mod:`~fabric.viewer.document` (Bokeh), :mod:`~fabric.viewer.page`,
:mod:`~fabric.viewer.server`.  :mod:`~fabric.viewer.report` builds a design
study's report page (Pareto fronts, waste curves, cost breakdown, tornado) from
plain data.
"""

from fabric.viewer import style
from fabric.viewer.document import build_view
from fabric.viewer.levels import DEFAULT_MAX_GLYPHS, LEVELS
from fabric.viewer.overlay import Overlay
from fabric.viewer.page import write_html
from fabric.viewer.scene import Scene, build_scene

__all__ = ["DEFAULT_MAX_GLYPHS", "LEVELS", "Overlay", "Scene", "build_scene", "build_view", "style", "write_html"]
