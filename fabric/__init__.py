"""Core of the AI-cluster interconnect design tool.

The ``fabric`` package holds the Fabric model (devices, links, groupings, HBD
description, OCS configuration, bill of materials), units, the component
catalog and cost model.  It imports nothing else of the project: topologies,
solvers, workloads and the CLI all build on it.
"""

from fabric.errors import FabricError

__version__ = "0.1.0"

__all__ = ["FabricError", "__version__"]
