"""A placement: the rings (TP groups) formed and how they make up job instances.

Plain data shared by every solver (ILP, greedy, fault-unaware, brute force,
other architectures) and read by the traffic accounting and the viewer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from solvers.orchestrator.space import SlotSpace


@dataclass(frozen=True)
class PlacedInstance:
    """One instance of a job.

    Attributes
    ----------
    job : int
        Index of the job in the request.
    stages : tuple of tuple of int
        ``stages[p][r]``: ring index of DP replica ``r`` at pipeline stage
        ``p``.  ``stages[p]`` is one DP group; ``[stages[p][r] for p]`` is
        one pipeline.
    """

    job: int
    stages: tuple[tuple[int, ...], ...]

    @property
    def rings(self) -> list[int]:
        return [r for st in self.stages for r in st]


@dataclass(frozen=True)
class Placement:
    """Rings and instances.

    Attributes
    ----------
    rings : tuple of tuple of int
        Slot ids of every ring formed, in rank order.
    instances : tuple of PlacedInstance
    spare : tuple of int
        Rings formed but in no instance (hot spares).
    """

    rings: tuple[tuple[int, ...], ...]
    instances: tuple[PlacedInstance, ...]
    spare: tuple[int, ...] = field(default=())

    @property
    def used_rings(self) -> list[int]:
        return [r for inst in self.instances for r in inst.rings]

    def check(self, space: SlotSpace) -> None:
        """Raise ``ValueError`` if a slot is in two rings, a ring is used twice, or a slot is unhealthy."""
        seen: set[int] = set()
        for ring in self.rings:
            for u in ring:
                if u in seen:
                    raise ValueError(f"slot {u} is in two rings")
                if not space.healthy[u]:
                    raise ValueError(f"slot {u} is faulty but in a ring")
                seen.add(u)
        used = self.used_rings
        if len(used) != len(set(used)):
            raise ValueError("a ring is in two instances")

    def to_dict(self, space: SlotSpace, unit: str = "node") -> dict:
        """JSON form: rings as node ids (k-hop) or GPU ids, instances as ring indices."""
        if unit == "node":
            rings = [[int(space.node[u]) for u in ring] for ring in self.rings]
        else:
            rings = [[int(x) for x in space.ring_gpus(ring)] for ring in self.rings]
        return {
            "unit": unit,
            "tp_groups": rings,
            "tp_group_gpus": [[int(x) for x in space.ring_gpus(ring)] for ring in self.rings],
            "instances": [{"job": inst.job, "dp_groups": [list(st) for st in inst.stages]}
                          for inst in self.instances],
            "spare_tp_groups": list(self.spare),
        }
