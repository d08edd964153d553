"""Per-object caches keyed by ``id``: an entry lives exactly as long as its object.

A cache keyed by ``id(obj)`` and checked with a weak reference answers correctly after the
object dies (a new object with the same id misses), but without eviction its value stays in
memory until the process ends: every Fabric a sweep or ``fabric rl --table`` evaluated kept
its arrays (and, where the value referred to the Fabric itself, the whole Fabric).  Here the
weak reference's callback removes the entry when the object is freed.  A value must not hold
its object strongly, or the object is never freed.
"""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

V = TypeVar("V")


def recall(cache: dict[int, tuple[weakref.ref, Any]], obj: object) -> Any | None:
    """The value cached for ``obj``, or None."""
    hit = cache.get(id(obj))
    return hit[1] if hit is not None and hit[0]() is obj else None


def remember(cache: dict[int, tuple[weakref.ref, Any]], obj: object, value: V) -> V:
    """Cache ``value`` for ``obj`` until ``obj`` is freed; returns ``value``."""
    key = id(obj)

    def evict(ref: weakref.ref, key: int = key, cache: dict = cache) -> None:
        if cache.get(key, (None,))[0] is ref:  # not an entry of a newer object with the same id
            cache.pop(key, None)

    cache[key] = (weakref.ref(obj, evict), value)
    return value
