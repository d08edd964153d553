"""A published step-time set of ``tests/data``, read the same way by every validation test that uses one."""

from __future__ import annotations

import json
from pathlib import Path

from workloads.models import ModelSpec, load_model

DATA_DIR = Path(__file__).parent.parent / "data"


class PublishedSet:
    """A JSON set with ``models`` (a shipped model name, or a model spec) and ``points`` (each with an ``id``)."""

    def __init__(self, file: str):
        self.data = json.loads((DATA_DIR / file).read_text())
        self.points = {p["id"]: p for p in self.data["points"]}

    def model(self, name: str) -> ModelSpec:
        """The model of the set's entry ``name``."""
        spec = self.data["models"][name]
        return load_model(spec) if isinstance(spec, str) else ModelSpec.from_dict(spec)
