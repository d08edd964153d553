"""Recovery parameters of a training job: checkpointing, restart and re-placement, each with its source.

A fault that touches a job stops it; it restarts from its last checkpoint on
a new placement.  What that costs is described by a :class:`Recovery`:

* ``checkpoint_interval_s``: time between checkpoints while training;
* ``checkpoint_stall_s``: training stopped per checkpoint (an asynchronous
  checkpoint stalls only for the snapshot to host memory);
* ``restart_s``: from the decision to restart to the first step (relaunch,
  communicator set-up, checkpoint load);
* ``replace_s``: re-placement by the orchestrator, which depends on the HBD
  kind (:data:`REPLACE_SOURCE`): drain the tray / node and reschedule (NVL,
  DGX), set up an OCS slice (TPUv4), re-wire OCS transceivers (k-hop).

Every default is a published figure or the word ``assumed``; ``fabric goodput
--recovery name=value`` overrides any of them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

from fabric.catalog import Catalog
from fabric.checks import is_number
from fabric.errors import FabricError
from fabric.units import parse_time

# Published large-run figures these defaults are read from (FIGURES-style tags: P primary, S secondary).
# Searched for each (Llama 3, MegaScale, Gemini SOSP'23, Meta "Revisiting Reliability" HPCA'25, Unicron,
# ByteCheckpoint, FlashRecovery, TierCheck, TPUv4 ISCA'23, InfiniteHBD): the papers publish interruption
# rates, ETTR and speed-ups, and a few end-to-end times of optimised systems; none publishes the interval,
# stall and restart time of a conventional production run as numbers, so those three stay `assumed`,
# bracketed by the published figures below.
LLAMA3_INTERRUPTIONS = ("P: Llama 3 (arXiv 2407.21783) Sec. 3.3.4: 466 job interruptions in 54 days on 16,384 H100, "
                        "419 unexpected; > 90 % effective training time with automated recovery; checkpoints of "
                        "1 MB-4 GB per GPU whose bursty writes saturated the storage fabric")
CHECKPOINT_STALL_REFS = ("S: TierCheck (2026, arXiv summary) end-to-end checkpointing under 10 s for models up to "
                         "40 B; "
                         "ByteCheckpoint (arXiv 2407.20143) and MegaScale (NSDI 2024, arXiv 2402.15627) save in two "
                         "stages (GPU to host memory, blocking; then to storage, asynchronous)")
RESTART_REFS = ("S: FlashRecovery (arXiv 2509.03047): restoration of training on 4,800 devices in 150 s with "
                "scale-independent restart and checkpoint-free recovery (an optimised lower end); TrainMover "
                "(arXiv 2024) second-level downtime with standby machines; Gemini (SOSP 2023) 13x faster recovery "
                "than remote-storage checkpoints")
DEFAULT_SOURCES = {
    "checkpoint_interval_s": "assumed: 30 min (not published); Young's optimum sqrt(2 x stall x MTBF) for a 10 s stall "
                             "and the Llama 3 run's ~2.8 h mean time between interruptions is ~ 8 min, production "
                             "runs checkpoint less often to bound storage traffic; see " + LLAMA3_INTERRUPTIONS,
    "checkpoint_stall_s": "assumed: 10 s, an asynchronous checkpoint that blocks training only for the device-to-host "
                          "snapshot; " + CHECKPOINT_STALL_REFS,
    "restart_s": "assumed: 10 min to relaunch, re-initialise communicators and load the checkpoint at thousands of "
                 "GPUs with a conventional launcher (not published as a number for Llama 3 or MegaScale); "
                 + RESTART_REFS + "; try --recovery restart=150s for the optimised case",
}
# Re-placement time per HBD kind: software (drain, reschedule) plus the HBD's own reconfiguration.
SCHEDULER_S = 120.0
SCHEDULER_SOURCE = ("assumed: 2 min for the scheduler to drain the faulty server / tray and hand out the new "
                    "placement (no published drain time for DGX or NVL-72)")
REPLACE_SOURCE = {
    "switch_domain": "drain the tray / node and reschedule: " + SCHEDULER_SOURCE,
    "none": "reschedule: " + SCHEDULER_SOURCE,
    "ocs_cube": "reschedule plus one OCS reconfiguration to set up the slice (catalog ocs_palomar "
                "reconfiguration_time: S, Palomar median 1.2 ms; TPUv4, Jouppi et al. ISCA 2023, sets slices up "
                "from whole cubes by OCS but publishes no end-to-end slice set-up time): " + SCHEDULER_SOURCE,
    "khop_line": "reschedule plus one OCS-transceiver path switch to re-wire the rings around the fault (catalog "
                 "ocs_transceiver_switching: S, 60-80 us, InfiniteHBD first author's SIGCOMM 2025 talk): "
                 + SCHEDULER_SOURCE,
    "torus": "reschedule: " + SCHEDULER_SOURCE,
}


@dataclass(frozen=True)
class Recovery:
    """What stopping and restarting a job costs (seconds).

    Attributes
    ----------
    checkpoint_interval_s : float
        Training time between checkpoints, > 0 (a checkpoint at every step
        is an interval of one step time, and stalls ``checkpoint_stall_s``
        each time; 0 would be checkpoints that cost nothing).
    checkpoint_stall_s : float
        Training stopped per checkpoint.
    restart_s : float
        Restart from the last checkpoint.
    replace_s : float
        Re-placement of the job's TP and DP groups (depends on the HBD kind).
    sources : dict
        Source (or ``assumed``) of each value.
    """

    checkpoint_interval_s: float = 1800.0
    checkpoint_stall_s: float = 10.0
    restart_s: float = 600.0
    replace_s: float = SCHEDULER_S
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        for f in ("checkpoint_interval_s", "checkpoint_stall_s", "restart_s", "replace_s"):
            v = getattr(self, f)
            name = f.removesuffix("_s")
            positive = f in POSITIVE_FIELDS
            if (isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0 if positive else v >= 0)
                    or v == float("inf")):
                # keyed by the field, so that the CLI names `--recovery checkpoint_interval`
                raise FabricError(f"recovery[{name}]", f"{name}={v!r} must be a finite time "
                                                       f"{'> 0' if positive else '>= 0'}")

    def to_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items() if k != "sources"}
        d["sources"] = dict(self.sources)
        return d


RECOVERY_FIELDS = ("checkpoint_interval", "checkpoint_stall", "restart", "replace")
# Durations that must be > 0: an interval of 0 would checkpoint continuously at no stall (the job's model charges
# a stall per interval, so 0 made checkpoints free and goodput higher than at any interval > 0).  The others may
# be 0: an ideal asynchronous checkpoint, an instant restart or re-placement cost nothing and gain nothing.
POSITIVE_FIELDS = ("checkpoint_interval_s",)


def replace_time(hbd_kind: str, catalog: Catalog) -> tuple[float, str]:
    """Re-placement time (s) and its source for an HBD kind (scheduler plus the HBD's reconfiguration)."""
    if hbd_kind == "ocs_cube":
        return SCHEDULER_S + catalog.value("ocs_palomar", "reconfiguration_time"), REPLACE_SOURCE[hbd_kind]
    if hbd_kind == "khop_line":
        return SCHEDULER_S + catalog.value("ocs_transceiver_switching", "latency"), REPLACE_SOURCE[hbd_kind]
    return SCHEDULER_S, REPLACE_SOURCE.get(hbd_kind, "reschedule: " + SCHEDULER_SOURCE)


def default_recovery(hbd_kind: str, catalog: Catalog) -> Recovery:
    """The default :class:`Recovery` of an HBD kind, with the source of every value."""
    rep, rep_src = replace_time(hbd_kind, catalog)
    srcs = {**DEFAULT_SOURCES, "replace_s": rep_src}
    return Recovery(replace_s=rep, sources=tuple(sorted(srcs.items())))


def with_overrides(base: Recovery, overrides: dict[str, Any]) -> Recovery:
    """``base`` with some values replaced: keys are :data:`RECOVERY_FIELDS`, values seconds or ``30min``-style strings."""
    if not isinstance(overrides, Mapping):
        raise FabricError("recovery", f"must be a mapping of {', '.join(RECOVERY_FIELDS)} to seconds, "
                                      f"not {type(overrides).__name__}")
    known = {f.name for f in fields(Recovery)} - {"sources"}
    out, srcs = {}, dict(base.sources)
    for key, raw in overrides.items():
        if not isinstance(key, str):
            raise FabricError("recovery", f"{key!r} unknown; use one of {', '.join(RECOVERY_FIELDS)}")
        name = key if key.endswith("_s") else f"{key}_s"
        if name not in known:
            raise FabricError("recovery", f"{key!r} unknown; use one of {', '.join(RECOVERY_FIELDS)}")
        value = parse_time(raw, f"--recovery {key}") if isinstance(raw, str) else raw
        out[name] = float(value) if is_number(value) else value  # np.int64 from an array: the seconds it holds
        srcs[name] = "given by the user"
    return replace(base, **out, sources=tuple(sorted(srcs.items())))
