"""Parallelism of a training job (TP, PP, DP, EP, CP, SP, batch, recomputation) and its validation.

Layout follows Megatron-Core: ranks are numbered ``tp`` fastest, then ``cp``,
``dp``, ``pp`` (its ``tp-cp-ep-dp-pp`` order).  Attention and dense layers use
TP x CP x DP x PP; MoE layers re-fold the same ``tp * cp * dp`` ranks of a
stage into expert-parallel groups of ``ep`` consecutive ranks ("parallel
folding", expert tensor parallel size 1), so ``ep`` must divide
``tp * cp * dp`` and the experts.  World size = ``tp * cp * dp * pp``.

Every check raises :class:`~fabric.errors.FabricError` naming the CLI flag it
is about (``--tp``, ``--pp``, ...), with the numbers and what is allowed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from fabric.errors import FabricError
from fabric.model import HBDSpec
from workloads.models import ModelSpec

RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class Parallelism:
    """How a job is split over GPUs.

    Attributes
    ----------
    tp, pp, dp, ep, cp : int
        Tensor, pipeline, data, expert and context parallel sizes.
    micro_batch : int
        Sequences per micro-batch (b).
    global_batch : int
        Sequences per step (B); ``B / (dp * b)`` micro-batches per pipeline.
    interleave : int
        Virtual pipeline chunks per stage (v; 1 = plain 1F1B).
    sequence_parallel : bool
        Shard norms/dropout activations over TP ranks (reduce-scatter +
        all-gather instead of all-reduce; Korthikanti et al. 2022).
    recompute : {'none', 'selective', 'full'}
    distributed_optimizer : bool
        Shard optimizer states over the DP group (ZeRO-1, Megatron's
        distributed optimizer): reduce-scatter gradients, all-gather parameters.
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    cp: int = 1
    micro_batch: int = 1
    global_batch: int = 1
    interleave: int = 1
    sequence_parallel: bool = False
    recompute: str = "none"
    distributed_optimizer: bool = True

    @property
    def world(self) -> int:
        """GPUs the job uses."""
        return self.tp * self.cp * self.dp * self.pp

    @property
    def microbatches(self) -> int:
        """Micro-batches per pipeline per step (m)."""
        return self.global_batch // (self.dp * self.micro_batch)

    @property
    def expert_dp(self) -> int:
        """Data-parallel size of expert weights (``tp * cp * dp / ep``)."""
        return self.tp * self.cp * self.dp // self.ep

    def replace(self, **changes: Any) -> "Parallelism":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def label(self) -> str:
        """Short text such as ``tp8 pp4 dp16 mb1 full``."""
        parts = [f"tp{self.tp}", f"pp{self.pp}"]
        if self.interleave > 1:
            parts.append(f"v{self.interleave}")
        parts.append(f"dp{self.dp}")
        if self.ep > 1:
            parts.append(f"ep{self.ep}")
        if self.cp > 1:
            parts.append(f"cp{self.cp}")
        parts.append(f"mb{self.micro_batch}")
        if self.sequence_parallel:
            parts.append("sp")
        parts.append(self.recompute)
        return " ".join(parts)


def _divides(a: int, b: int) -> bool:
    return a > 0 and b % a == 0


def validate(model: ModelSpec, par: Parallelism, hbd: HBDSpec | None = None, gpus: int | None = None) -> None:
    """Check that ``par`` can run ``model`` (on an HBD of ``hbd``, with ``gpus`` GPUs).

    Memory fit is checked separately (:func:`workloads.memory.check_fit`),
    because it needs the GPU.

    Raises
    ------
    FabricError
        For the first violated rule, naming the flag.

    Examples
    --------
    >>> from workloads.models import load_model
    >>> validate(load_model("gpt3-175b"), Parallelism(tp=64, pp=8, dp=1, global_batch=8))
    Traceback (most recent call last):
    ...
    fabric.errors.FabricError: tp: 64 does not divide heads=96 of gpt3-175b
    """
    ints = {"tp": par.tp, "pp": par.pp, "dp": par.dp, "ep": par.ep, "cp": par.cp,
            "micro_batch": par.micro_batch, "global_batch": par.global_batch, "interleave": par.interleave}
    for flag, value in ints.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise FabricError(flag, f"{value!r} must be a whole number >= 1")
    if par.recompute not in RECOMPUTE:
        raise FabricError("recompute", f"{par.recompute!r} not allowed; use one of {', '.join(RECOMPUTE)}")
    name = model.name
    if not _divides(par.tp, model.heads):
        raise FabricError("tp", f"{par.tp} does not divide heads={model.heads} of {name}")
    if model.kv_heads >= par.tp and not _divides(par.tp, model.kv_heads):
        raise FabricError("tp", f"{par.tp} does not divide kv_heads={model.kv_heads} of {name}")
    if not _divides(par.tp, model.ffn_hidden):
        raise FabricError("tp", f"{par.tp} does not divide ffn_hidden={model.ffn_hidden} of {name}")
    if not _divides(par.pp * par.interleave, model.layers):
        if par.interleave > 1:
            raise FabricError("interleave", f"pp x interleave = {par.pp} x {par.interleave} does not divide "
                                              f"layers={model.layers} of {name}")
        raise FabricError("pp", f"{par.pp} does not divide layers={model.layers} of {name}")
    if par.interleave > 1 and par.pp == 1:
        raise FabricError("interleave", f"{par.interleave} needs --pp > 1 (virtual stages interleave a pipeline)")
    if not _divides(par.cp, model.seq_len) or (par.cp > 1 and model.seq_len % (2 * par.cp)):
        raise FabricError("cp", f"{par.cp}: 2 x cp must divide seq_len={model.seq_len} (load-balanced ring "
                                  "attention splits each sequence into 2 cp chunks)")
    if par.ep > 1 and not model.is_moe:
        raise FabricError("ep", f"{par.ep} needs an MoE model; {name} is dense (use --ep 1)")
    if model.is_moe:
        if not _divides(par.ep, model.experts):
            raise FabricError("ep", f"{par.ep} does not divide experts={model.experts} of {name}")
        if not _divides(par.ep, par.tp * par.cp * par.dp):
            raise FabricError("ep", f"{par.ep} does not divide tp x cp x dp = {par.tp * par.cp * par.dp} "
                                      "(expert-parallel groups are folded from those ranks)")
        if par.tp > 1 and not par.sequence_parallel:
            raise FabricError("sequence_parallel", f"an MoE model with --tp {par.tp} needs sequence parallelism "
                                                     "(tokens are sharded over TP ranks before dispatch)")
    if par.sequence_parallel and par.tp == 1:
        raise FabricError("sequence_parallel", "needs --tp > 1")
    per_dp = par.dp * par.micro_batch
    if par.global_batch % per_dp:
        raise FabricError("global_batch", f"{par.global_batch} is not a multiple of dp x micro-batch = "
                                            f"{par.dp} x {par.micro_batch} = {per_dp}")
    m = par.microbatches
    if par.interleave > 1 and m % par.pp:
        raise FabricError("interleave", f"the interleaved schedule needs micro-batches ({m}) to be a multiple "
                                          f"of pp={par.pp}")
    if hbd is not None:
        _validate_hbd(par, hbd)
    if gpus is not None and par.world > gpus:
        raise FabricError("gpus", f"tp x cp x dp x pp = {par.tp} x {par.cp} x {par.dp} x {par.pp} = {par.world} "
                                    f"GPUs, but the fabric has {gpus}")


def _validate_hbd(par: Parallelism, hbd: HBDSpec) -> None:
    """TP groups must lie inside one HBD domain (TP traffic never leaves the HBD)."""
    max_tp = hbd.max_tp or hbd.domain_gpus
    if par.tp > max_tp:
        raise FabricError("tp", f"{par.tp} exceeds the HBD size: a TP group must fit one {hbd.kind} domain of "
                                  f"{max_tp} GPUs")
    unit = max(hbd.tp_multiple_of, 1)
    if par.tp % unit and unit % par.tp:
        raise FabricError("tp", f"{par.tp} must divide or be a multiple of {unit} on a {hbd.kind} HBD "
                                  "(TP rings across nodes are built from whole nodes)")
