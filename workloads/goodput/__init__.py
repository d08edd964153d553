"""Training goodput over a production fault trace: how much useful training a fabric delivers per dollar.

One module per job: :mod:`.params` (checkpoint, restart and re-placement
costs with sources), :mod:`.events` (the trace replayed on the cluster, with
what the HBD can still form), :mod:`.job` (the job's state machine and the
GPU-seconds by cause), :mod:`.model` (throughput per placement shape, from the
MFU step model, cached), :mod:`.result` (the report and its time series).
"""

from workloads.goodput.events import FaultTimeline, fault_timeline, no_fault_timeline
from workloads.goodput.job import CAUSES, JOB_POLICIES, JobShape, Ledger, simulate
from workloads.goodput.params import RECOVERY_FIELDS, Recovery, default_recovery, with_overrides
from workloads.goodput.result import SCALAR_KEYS, summarise

__all__ = ["FaultTimeline", "fault_timeline", "no_fault_timeline", "CAUSES", "JOB_POLICIES", "JobShape", "Ledger",
           "simulate", "RECOVERY_FIELDS", "Recovery", "default_recovery", "with_overrides", "SCALAR_KEYS",
           "summarise"]
