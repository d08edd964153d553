"""HBD allocation under faults: one policy per HBD kind, TP groups, waste ratio, blast radius.

Policies (each reads only ``fabric.hbd``, device groupings and kinds):

* ``switch_domain`` (DGX, NVL-36/72/576) and ``none``: :mod:`.switch_domain`
* ``ocs_cube`` (TPUv4): :mod:`.ocs_cube`
* ``khop_line`` (InfiniteHBD k-hop ring): :mod:`.khop` on :mod:`.segments`
* ``torus`` (GPU-centric torus): :mod:`.torus`

Entry points: :func:`allocate` (the groups of one fault set),
:func:`count_usable` (vectorised counts for a batch), :func:`blast_radius`,
:func:`evaluate_faults` and :func:`faults_summary` (what ``fabric faults`` and sweeps report),
:func:`waste_table` and :func:`blast_table` (``fabric faults-table``).
"""

from solvers.allocation.base import Allocation, FaultBatch, Policy
from solvers.allocation.blast import blast_radius
from solvers.allocation.effects import EffectMapper, identity_rows
from solvers.allocation.evaluate import evaluate_faults, fault_curve
from solvers.allocation.policy import POLICIES, allocate, allocate_lit, allocate_row, count_usable, policy_for
from solvers.allocation.summary import blast_table, faults_summary, waste_table

__all__ = [
    "Allocation", "FaultBatch", "Policy", "EffectMapper", "identity_rows", "POLICIES", "policy_for", "allocate", "allocate_lit",
    "allocate_row", "count_usable", "blast_radius", "evaluate_faults", "fault_curve",
    "faults_summary", "waste_table", "blast_table",
]
