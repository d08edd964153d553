"""The standalone page: one HTML file with BokehJS inlined, written atomically.

Inline resources (not the CDN) because the page must open on machines without
internet access, e.g. inside a datacenter.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from bokeh.embed import file_html
from bokeh.resources import INLINE

from fabric.errors import FabricError
from fabric.files import check_output, write_text_atomic


_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
#: Where Bokeh puts the random ids (uuid4) of a page: the root's div, the document JSON's script tag, the doc id.
_RANDOM_IDS = re.compile(rf'<div id="({_UUID})"|<script type="application/json" id="({_UUID})"|"docid":"({_UUID})"')


def page_html(layout, title: str) -> str:
    """The full HTML of a page showing ``layout``, with inline BokehJS.

    Bokeh names the page's root div, document and JSON script with random
    UUIDs, so two writes of the same view differed; they are replaced by ids
    derived from the page's content (same inputs, same bytes).
    """
    return _stable_ids(file_html(layout, resources=INLINE, title=title))


def _stable_ids(text: str) -> str:
    ids = list(dict.fromkeys(g for m in _RANDOM_IDS.finditer(text) for g in m.groups() if g))
    if not ids:
        return text
    blanked = re.sub("|".join(map(re.escape, ids)), "", text)
    digest = hashlib.sha256(blanked.encode("utf-8")).hexdigest()[:16]
    names = {old: f"fabric-{digest}-{i}" for i, old in enumerate(ids)}  # starts with a letter: a CSS-safe id
    return re.sub("|".join(map(re.escape, ids)), lambda m: names[m.group()], text)


def write_html(layout, path: str | os.PathLike, title: str = "fabric view", field: str = "path") -> Path:
    """Write ``layout`` to ``path`` as a standalone page; nothing is left half-written.

    The page goes to a temporary file next to ``path`` and replaces it in one
    ``os.replace``, so a failure leaves any previous file intact.

    Raises
    ------
    FabricError
        If the directory does not exist or cannot be written, or ``path`` is a directory.
    """
    target = check_writable(Path(path), field)
    text = page_html(layout, title)
    write_text_atomic(target, text, field)
    return target


def check_writable(target: Path, field: str = "path", inputs: dict | None = None) -> Path:
    """Fail early (before any slow work) when ``target`` cannot be written; the path to write.

    ``inputs`` (``{"--topology": path}``) are files the command reads, which the page must not replace; a
    device, pipe or link loop is refused too (:func:`fabric.files.check_output`).
    """
    target = Path(target)
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise FabricError(field, f"{str(target)!r} is a directory; give a file name, e.g. "
                                 f"{str(target / 'page.html')!r}")
    if not parent.is_dir():  # a file where the directory should be was called missing
        raise FabricError(field, f"{str(parent)!r} is a file, not a directory" if parent.exists()
                          else f"directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise FabricError(field, f"directory {str(parent)!r} is not writable")
    return check_output(target, field, inputs)
