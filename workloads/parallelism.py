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
import functools
import math
from dataclasses import dataclass
from typing import Any

from fabric.checks import flag as check_switch, is_whole, whole
from fabric.errors import FabricError
from fabric.model import HBDSpec
from workloads.models import ModelSpec

RECOMPUTE = ("none", "selective", "full")


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` >= 1, ascending (the sizes a dimension of ``n`` layers, heads or experts splits into).

    Pairs up to sqrt(n), so a model file's 2**24 experts takes 4,096 steps, not 16 M.

    >>> divisors(12), divisors(1), divisors(49)
    ([1, 2, 3, 4, 6, 12], [1], [1, 7, 49])
    """
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


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
    zero_stage : int, optional
        ZeRO stage 0-3 (3 = FSDP / fully sharded): what is sharded over the
        DP group (1: optimizer states, 2: + gradients, 3: + parameters).
        ``None`` (default) follows ``distributed_optimizer`` (1 if on, else 0).
    first_stage_layers, last_stage_layers : int, optional
        Transformer layers on the first / last pipeline stage (Megatron-Core
        ``--decoder-first-pipeline-num-layers`` / ``--decoder-last-...``); the
        rest are spread evenly over the middle stages.  ``None``: automatic
        (:func:`workloads.memory.layer_split`).
    account_for_embedding, account_for_loss : bool
        Count the input embedding / the output layer and loss as one layer
        when splitting (Megatron-Core ``--account-for-embedding-in-pipeline-split``
        / ``--account-for-loss-in-pipeline-split``).
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
    zero_stage: int | None = None
    first_stage_layers: int | None = None
    last_stage_layers: int | None = None
    account_for_embedding: bool = False
    account_for_loss: bool = False

    @property
    def zero(self) -> int:
        """The effective ZeRO stage (0-3)."""
        if self.zero_stage is not None:
            return self.zero_stage
        return 1 if self.distributed_optimizer else 0

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
        """Plain fields; ``zero_stage`` as the effective stage, unset stage-layer counts left out."""
        d = dataclasses.asdict(self)
        d["zero_stage"] = self.zero
        for k in ("first_stage_layers", "last_stage_layers"):
            if d[k] is None:
                del d[k]
        return d

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


def _spread(total: int, n: int) -> list[int]:
    """``total`` layers over ``n`` slots: ``ceil(total/n)`` each, the shortfall taken one layer at a time
    from the outermost slots inwards (first, last, second, second-to-last, ...), where the embedding and
    the output layer sit."""
    if n <= 0:
        return []
    q = -(-total // n)
    counts = [q] * n
    order = [i for pair in zip(range(n), range(n - 1, -1, -1)) for i in pair]
    seen: list[int] = []
    for i in order:
        if i not in seen:
            seen.append(i)
    for i in seen[: q * n - total]:
        counts[i] -= 1
    return counts


@functools.lru_cache(maxsize=8192)
def _layer_split(model: ModelSpec, par: Parallelism) -> tuple[int, ...]:
    return tuple(_compute_layer_split(model, par))


#: Keys of a pinned configuration (``mfu_summary(..., **fixed)``), by what each takes.
FIXED_COUNTS = ("tp", "pp", "dp", "ep", "cp", "micro_batch", "interleave")
FIXED_LAYERS = ("first_stage_layers", "last_stage_layers")
FIXED_SWITCHES = ("sequence_parallel", "distributed_optimizer", "account_for_embedding", "account_for_loss")
FIXED_KEYS = FIXED_COUNTS + FIXED_LAYERS + FIXED_SWITCHES + ("recompute", "zero_stage")


def check_fixed(fixed: dict[str, Any]) -> dict[str, Any]:
    """The pinned dimensions of a configuration, typed: counts as Python ints (numpy's accepted), switches as bools.

    None means "not pinned" and is kept.  The rules between dimensions (tp divides the heads, ...) are
    :func:`validate`'s; this refuses what no rule could read: an unknown key, a bool or a string for a count,
    a string for a switch (``"no"`` is not False).

    Raises
    ------
    FabricError
        Naming the key.
    """
    out: dict[str, Any] = {}
    for key, value in fixed.items():
        if key not in FIXED_KEYS:
            raise FabricError(key, f"unknown configuration key; allowed: {', '.join(FIXED_KEYS)}")
        if value is None:
            out[key] = None
        elif key in FIXED_COUNTS:
            out[key] = whole(value, key, 1)
        elif key in FIXED_LAYERS:
            out[key] = whole(value, key, 0)
        elif key in FIXED_SWITCHES:
            out[key] = check_switch(value, key)
        elif key == "zero_stage":
            if not (is_whole(value) and 0 <= value <= 3):
                raise FabricError(key, f"{value!r} not allowed; use 0, 1, 2 or 3 (3 = FSDP)")
            out[key] = int(value)
        elif not isinstance(value, str) or value not in RECOMPUTE:
            raise FabricError(key, f"{value!r} not allowed; use one of {', '.join(RECOMPUTE)}")
        else:
            out[key] = value
    return out


def layer_split(model: ModelSpec, par: Parallelism) -> list[int]:
    """Transformer layers of every virtual pipeline stage, in pipeline order.

    Virtual stage ``j = c * pp + s`` is chunk ``c`` of pipeline stage ``s``
    (``interleave`` chunks per stage; without interleaving, the stages).
    The rules, in Megatron-Core's terms:

    * ``first_stage_layers`` / ``last_stage_layers`` given: the first / last
      virtual stage holds that many, the rest spread over the others;
    * ``account_for_embedding`` / ``account_for_loss``: the embedding / the
      output layer and loss count as one layer of the first / last stage;
    * otherwise layers are spread evenly; when ``pp * interleave`` does not
      divide them, the first and last stages (which also hold the embedding
      and the output layer) get one layer fewer first (Llama 3 405B: 126
      layers on 16 stages as 7, 8 x 14, 7; arXiv 2407.21783 Sec. 3.3.2).

    Cached: the memory and step models ask for it per stage and per candidate.

    Raises
    ------
    FabricError
        If the numbers cannot be met (naming the flag).
    """
    return list(_layer_split(model, par))


def _compute_layer_split(model: ModelSpec, par: Parallelism) -> list[int]:
    """The split itself (rules in :func:`layer_split`)."""
    n, L = par.pp * par.interleave, model.layers
    if par.pp > L or par.interleave > L:  # before lists of pp x interleave entries are made (pp = 2**62)
        flag = "pp" if par.pp > L else "interleave"
        raise FabricError(flag, f"{L} layers of {model.name} leave a pipeline stage empty with pp={par.pp}, "
                                f"interleave={par.interleave}")
    if n > L + 2:
        # the search's own bound (workloads.search: at most the first and last virtual stage empty): --pp 4
        # --interleave 16 on 32 layers ran with 32 empty virtual stages, and the bubble, (pp - 1) / (v m), was
        # divided by 16 virtual stages that hold nothing
        raise FabricError("interleave", f"pp x interleave = {par.pp} x {par.interleave} = {n} virtual stages for "
                                        f"{L} layers of {model.name}; at most {L + 2} (each holds a layer, but "
                                        "the first and last may be empty)")
    first, last = par.first_stage_layers, par.last_stage_layers
    for flag, v in (("first_stage_layers", first), ("last_stage_layers", last)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise FabricError(flag, f"{v!r} must be a whole number >= 0")
    if first is not None or last is not None:
        given = "first_stage_layers" if first is not None else "last_stage_layers"  # the one to blame
        if n == 1:
            raise FabricError(given, "needs pp > 1")
        f, la = first, last
        fixed = (f or 0) + (la or 0)
        free = n - (f is not None) - (la is not None)
        if fixed > L or (free == 0 and fixed != L) or (free > 0 and L - fixed < free):
            bad = "last_stage_layers" if la is not None and (f is None or la >= f) else "first_stage_layers"
            raise FabricError(bad, f"first/last stage layers {f}/{la} cannot be met with "
                                   f"{L} layers on {n} virtual stages")
        mid = _spread(L - fixed, free)
        counts = ([f] if f is not None else [mid.pop(0)]) + mid[: n - 2] + ([la] if la is not None else mid[n - 2:])
        counts = counts[:n] if n > 1 else counts
    else:
        e, lo = int(par.account_for_embedding), int(par.account_for_loss)
        counts = _spread(L + e + lo, n)
        counts[0] -= e
        counts[-1] -= lo
    if min(counts) < 0 or len(counts) != n or sum(counts) != L:
        raise FabricError("pp", f"{L} layers of {model.name} cannot be split over pp x interleave = {n} stages "
                                  "with the options given")
    per_stage = [sum(counts[c * par.pp + s] for c in range(par.interleave)) for s in range(par.pp)]
    if min(per_stage) < 1:
        # an empty first or last stage the caller asked for is the caller's stage count, not pp's
        if per_stage[0] < 1 and first is not None:
            flag = "first_stage_layers"
        elif per_stage[-1] < 1 and last is not None:
            flag = "last_stage_layers"
        else:
            flag = "interleave" if par.interleave > 1 else "pp"
        raise FabricError(flag, f"{L} layers of {model.name} leave a pipeline stage empty with pp={par.pp}, "
                                f"interleave={par.interleave}")
    return counts


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
    if par.zero_stage is not None and (isinstance(par.zero_stage, bool) or par.zero_stage not in (0, 1, 2, 3)):
        raise FabricError("zero_stage", f"{par.zero_stage!r} not allowed; use 0, 1, 2 or 3 (3 = FSDP)")
    layer_split(model, par)  # raises on an impossible split
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
    if par.sequence_parallel and par.tp > 1 and (model.seq_len // par.cp) % par.tp:
        # Megatron scatters each CP rank's sequence over the TP ranks and asserts it divides
        # (core/tensor_parallel/mappings.py, _split_along_first_dim / _reduce_scatter_along_first_dim)
        raise FabricError("seq_len", f"{model.seq_len}: sequence parallelism splits the sequence of each CP rank "
                                       f"(seq_len / cp = {model.seq_len // par.cp}) over tp={par.tp} ranks, which "
                                       "must divide it")
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
