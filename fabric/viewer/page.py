"""The standalone page: one HTML file with BokehJS inlined, written atomically.

Inline resources (not the CDN) because the page must open on machines without
internet access, e.g. inside a datacenter.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from pathlib import Path

from bokeh.embed import file_html
from bokeh.resources import INLINE

from fabric.errors import FabricError


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
    target = Path(path)
    check_writable(target, field)
    text = page_html(layout, title)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent or ".")
    except OSError as exc:  # a read-only or special folder that the access check let through
        raise FabricError(field, f"cannot write in {str(target.parent)!r}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)  # mkstemp makes it private (0600); a page is meant to be shared
        os.replace(tmp, target)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise FabricError(field, f"cannot write {str(target)!r}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def check_writable(target: Path, field: str = "path") -> None:
    """Fail early (before any slow work) when ``target`` cannot be written."""
    parent = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise FabricError(field, f"{str(target)!r} is a directory; give a file name ending in .html")
    if not parent.is_dir():
        raise FabricError(field, f"directory {str(parent)!r} does not exist")
    if not os.access(parent, os.W_OK):
        raise FabricError(field, f"directory {str(parent)!r} is not writable")
