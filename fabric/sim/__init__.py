"""Flow-level collective simulator.

Fluid flows on shortest-path ECMP routes over a Fabric's active graph (OCS
circuits included), with max-min fair rates recomputed at every event,
per-link latency, start times and dependencies; collectives (all-reduce,
reduce-scatter, all-gather, all-to-all, broadcast, send/recv) as flow DAGs;
completion times, algbw/busbw and bytes and utilisation per link.

Modules, one job each:

``graph``        directed arcs of the active links; folding of interchangeable switches; pendant trees
``routing``      breadth-first shortest-path DAGs, ideal / hashed ECMP routes, route cache
``maxmin``       max-min fair rates by progressive filling
``engine``       contention-free DAG pass and event loop (the timing convention is in its docstring)
``lumping``      equivalence classes of flows that wait on nothing (exact where the fabric is symmetric)
``steps``        the ideal ring timed from one step, where exact
``hierarchical`` hierarchical all-reduce timed from one step of each phase, where exact
``flows``        :class:`Flow` and the columnar :class:`FlowTable`
``collectives``  the vocabulary (collective, algorithm, protocol), collectives as flow DAGs, bus factors
``nccl``         collectives as NCCL runs them: protocols, per-step latency, channels, algorithm choice
``results``      per-flow, per-collective and per-link results
``api``          :class:`Simulator` (per-Fabric caches) and the ``simulate_*`` functions

How symmetry keeps large cases cheap (all exact):

* equal-cost paths through interchangeable switches (spines, the cores of a
  plane, the NVSwitch chips of a node) are one path with a multiplicity
  weight: the switches are folded into one node and their links into one
  bundle (:mod:`fabric.sim.graph`), so a 1,024-GPU all-to-all routes over a
  few arcs per flow instead of hundreds;
* a :class:`FlowTable` row with ``count`` > 1 is a class of identical flows;
* every group of a collective is generated at once, step by step, so the
  engine sees one block of flows per step however many groups run;
* when no link is ever over-subscribed (rings, chains, pipelines), the
  engine verifies that and computes the schedule in one pass over the
  dependency DAG instead of event by event (:mod:`fabric.sim.engine`);
* flows that wait on nothing (all-to-all, direct collectives) between hosts
  that hang off one switch by equal private paths, and that send and receive
  alike, run as one row per equivalence class over bundled host links
  (:mod:`fabric.sim.lumping`): a 2,048-host all-to-all is a few thousand
  rows instead of 4.2M flows;
* multi-channel rings, trees, NVLS and SHARP are timed from one step
  (:mod:`fabric.sim.nccl`), in memory linear in the ranks.
* large ideal rings (:mod:`fabric.sim.steps`) and hierarchical all-reduce,
  ideal or under a protocol (:mod:`fabric.sim.hierarchical`), are timed from
  one step (of each phase) when those steps fit their links with every flow
  at its free rate: every flow of the DAG then runs at that rate, and the
  finish is a per-step longest path, in memory linear in the ranks.

Examples
--------
Ring all-reduce of 1 GiB among 4 GPUs on one switch (links of 100 GB/s):
the bus bandwidth is the link bandwidth (no latency here).

>>> from fabric.model import DeviceKind, FabricBuilder, HBDSpec
>>> from fabric.sim import simulate_collective
>>> b = FabricBuilder("star", {})
>>> gpus = b.add_devices(DeviceKind.GPU, 4, node=range(4))
>>> sw = b.add_devices(DeviceKind.TOR, 1)
>>> _ = b.add_links(gpus, sw[0], capacity=100e9, latency=0.0, medium="copper", layer="dcn")
>>> fab = b.build(HBDSpec(kind="none", gpus_per_node=1, domain_gpus=1))
>>> r = simulate_collective(fab, "all-reduce", ranks=range(4), size=2**30, protocol="none", channels=1)
>>> round(r.busbw_Bps / 1e9, 6)
100.0
"""

from fabric.sim.api import Simulator, simulate_collective, simulate_collectives, simulate_flows, simulator
from fabric.sim.collectives import (ALGORITHMS, COLLECTIVES, PROTOCOLS, Algorithm, Collective, CollectiveName, Protocol,
                                    bus_factor, collective_flows)
from fabric.sim.flows import Flow, FlowTable
from fabric.sim.maxmin import max_min_rates
from fabric.sim.results import CollectiveResult, CollectivesResult, LinkLoads, SimResult

__all__ = [
    "ALGORITHMS", "COLLECTIVES", "PROTOCOLS", "Algorithm", "Collective", "CollectiveName", "Protocol",
    "CollectiveResult", "CollectivesResult", "Flow", "FlowTable",
    "LinkLoads", "SimResult", "Simulator", "bus_factor", "collective_flows", "max_min_rates", "simulate_collective",
    "simulate_collectives", "simulate_flows", "simulator",
]
