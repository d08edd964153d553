"""The names of what can fail and of how faults are drawn or replayed, as the CLI's flags spell them.

Kept apart from :mod:`fabric.faults` and :mod:`fabric.trace` (which import
numpy) so that the CLI's help and flag checks show and check them without
importing numpy (issue 18, start-up); both modules take them from here.
"""

from __future__ import annotations

from enum import Enum


class FaultComponent(str, Enum):
    """A component type that can fail (a ``str``: ``FaultComponent.NODE == "node"``).

    The declaration order is the order of the random streams (:mod:`fabric.faults`):
    changing it changes every fault sample.
    """

    GPU = "gpu"
    NODE = "node"
    SWITCH = "switch"
    RACK = "rack"
    TOR = "tor"
    OCS = "ocs"
    LINK = "link"
    TRANSCEIVER = "transceiver"

    __str__ = str.__str__
    __format__ = str.__format__


COMPONENTS = tuple(c.value for c in FaultComponent)
"""Component types that can fail, in the order their random streams are spawned."""

MODES = ("bernoulli", "exact")
"""How a fault ratio is drawn: each component on its own (``bernoulli``) or exactly that share of them."""

DEFAULT_SAMPLES = 1000
"""Monte Carlo samples of ``fabric faults`` and of the sweep's ``faults`` metric (here, not beside the evaluation in
:mod:`solvers.allocation.summary`, so that the CLI shows the default without importing the solvers)."""

TRACE_MAPPINGS = ("tile", "sample")
"""How a fault trace's servers map onto a fabric's nodes (:mod:`fabric.trace`)."""
