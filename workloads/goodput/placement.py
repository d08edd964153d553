"""Where the job runs after a re-placement: the TP groups of the fault state, laid out as the healthy job is.

At every re-placement the orchestrator takes the TP groups that the HBD's
allocation policy forms on the healthy GPUs of the fault state
(:func:`solvers.allocation.allocate_row`; the ILP orchestrator is far too slow
to run at every event of a year) and hands them to the job's ranks by the rule
:func:`workloads.placement.tp_blocks` applies to the healthy fabric: when the
healthy job takes the same number of TP groups from each of the fewest HBD
domains (so that every DP group has as many ranks in each domain and
hierarchical collectives apply), the re-placed job does the same over the
domains that still hold that many groups; otherwise it takes the groups in
HBD order.  With no fault this is exactly the healthy placement (tests check
it for every reference architecture), so a fault-free year runs at the healthy
step time.  Ranks follow the Megatron-Core order on those groups
(:class:`workloads.placement.RankPlacement`), so a DP group that a fault
pushed across a ToR or an HBD domain boundary pays for it in the step model.
"""

from __future__ import annotations

import numpy as np

from fabric.model import Fabric
from workloads.parallelism import Parallelism
from workloads.placement import RankPlacement, domains_hold_equal, hbd_configuration, tp_blocks


def healthy_is_balanced(fabric: Fabric, tp: int) -> bool:
    """Whether the healthy job's placement takes groups evenly from the domains (all domains hold as many)."""
    return domains_hold_equal(fabric, tp_blocks(fabric, tp))


class GivenPlacement(RankPlacement):
    """A :class:`~workloads.placement.RankPlacement` on given TP groups instead of the healthy fabric's first blocks.

    Parameters
    ----------
    fabric : Fabric
    par : Parallelism
    gpus : ndarray of int, shape (par.world,)
        GPU device ids, TP group after TP group, in rank order.
    configured : dict, optional
        Cache of configured Fabrics (k-hop: the rings lit for the TP groups),
        keyed by the lit candidates, so equal configurations share one Fabric
        (and its collective-time cache).
    """

    def __init__(self, fabric: Fabric, par: Parallelism, gpus: np.ndarray, configured: dict | None = None):
        self.fabric = fabric
        self.par = par
        self.gpus = np.asarray(gpus, dtype=np.int64)
        cfg = hbd_configuration(fabric, self.gpus.reshape(-1, par.tp))
        if cfg is not None:
            key = np.sort(np.asarray(cfg.active_candidates, dtype=np.int64)).tobytes()
            hit = None if configured is None else configured.get(key)
            if hit is None:
                hit = fabric.with_configuration(cfg)
                if configured is not None:
                    configured[key] = hit
            self.fabric = hit
        self.grid = self.gpus.reshape(par.pp, par.dp, par.cp, par.tp)
