"""The parameters of one RL iteration, each with its default and the source of that default.

Every default is a workload or framework choice, not a hardware number
(hardware comes from the catalog); each names where it comes from, or says
``assumed``.  :func:`RLConfig.from_params` reads ``-p name=value`` strings and
rejects unknown names and bad values with a :class:`~fabric.errors.FabricError`
that names the field.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from fabric.checks import MAX_SECONDS, MAX_SEED
from fabric.errors import FabricError
from fabric.params import Param


def RLParam(name: str, type: type, default: Any, help: str, source: str, choices: tuple = (),
            check: Callable[[Any], str | None] | None = None) -> Param:
    """One RL parameter: type, default, meaning (with unit) and where the default comes from."""
    return Param(name, type, default, help, choices, check, source=source)


def _ge(lo: float) -> Callable[[Any], str | None]:
    return lambda v: None if v >= lo else f"must be >= {lo:g}"


def _seed(v) -> str | None:
    """Seeds are in [0, 2^32) like every --seed (4294967296 was taken and changed the sample)."""
    return None if 0 <= v <= MAX_SEED else f"must be a whole number in 0..{MAX_SEED}"


def _between(lo: float, hi: float) -> Callable[[Any], str | None]:
    return lambda v: None if lo <= v <= hi else f"must be in [{lo:g}, {hi:g}]"


# The longest duration an RL time parameter takes is fabric.checks.MAX_SECONDS, the bound of the CLI's duration
# flags: settle_time=1e300 made every reconfiguring iteration 1e300 s.
#: Memory of one sampled response (lengths, per-replica assignment, timings), measured: 4 M samples peaked at
#: 776 MB over the 78 MB of 1,024 (~180 B each); checked against the ``memory`` limit before any array.
BYTES_PER_SAMPLE = 192


def _frac(v) -> str | None:
    return None if 0.0 < v < 1.0 else "must be in (0, 1)"


PARAMS: tuple[Param, ...] = (
    RLParam("samples", int, 1024, "responses generated and trained on per iteration",
            "assumed: 128 prompts x 8 responses, a GRPO-style group", check=_ge(1)),
    RLParam("prompt_len", int, 512, "prompt tokens per response", "assumed", check=_ge(1)),
    RLParam("output_median", float, 1024.0, "median output tokens (lognormal)",
            "assumed: long reasoning rollouts; StreamRL (arXiv 2504.15930) reports long-tailed output lengths",
            check=_ge(1.0)),
    RLParam("output_sigma", float, 1.0, "lognormal shape of output lengths (0: all equal)",
            "assumed: a long tail (p99 ~ 10x the median at 1.0)", check=_between(0.0, 100.0)),
    RLParam("max_tokens", int, 16384, "cap on output tokens (longer rollouts are truncated)", "assumed",
            check=_ge(1)),
    RLParam("lengths_file", str, "", "file of output lengths (one integer per line, or a JSON list); "
            "sampled with replacement, seeded; overrides the lognormal", "none"),
    RLParam("train_fraction", float, 0.5, "share of the GPUs in the training pool (rounded to whole nodes)",
            "assumed: an even split; StreamRL balances the pools to the workload", check=_frac),
    RLParam("train_tp", int, 8, "tensor parallelism of training (inside the HBD)", "assumed: one 8-GPU node",
            check=_ge(1)),
    RLParam("train_pp", int, 0, "pipeline stages of training; 0 = the fewest that fit in HBM", "derived",
            check=_ge(0)),
    RLParam("train_ep", int, 1, "expert parallelism of training (MoE models)", "assumed", check=_ge(1)),
    RLParam("train_steps", int, 4, "optimizer steps per iteration (mini-batches of the samples)",
            "assumed: PPO/GRPO mini-batches", check=_ge(1)),
    RLParam("recompute", str, "selective", "activation recomputation in training", "assumed",
            choices=("none", "selective", "full")),
    RLParam("gen_tp", int, 8, "tensor parallelism of a rollout replica (inside the HBD)", "assumed: one 8-GPU node",
            check=_ge(1)),
    RLParam("gen_pp", int, 0, "pipeline stages of a rollout replica; 0 = the fewest whose weights fit",
            "derived", check=_ge(0)),
    RLParam("gen_dtype", str, "bf16", "weight dtype of the rollout engine (fp8: the trainer quantises before "
            "sending, so weight sync moves 1 byte per parameter)", "assumed", choices=("bf16", "fp8")),
    RLParam("kv_dtype", str, "bf16", "KV-cache dtype", "assumed", choices=("bf16", "fp8")),
    RLParam("gen_max_batch", int, 256, "most sequences a replica decodes at once",
            "S: vLLM engine default max_num_seqs = 256", check=_ge(1)),
    RLParam("gpu_memory_utilization", float, 0.9, "share of HBM the rollout engine uses for weights + KV cache",
            "S: vLLM engine default gpu_memory_utilization = 0.9", check=_frac),
    RLParam("sync", str, "p2p", "weight-sync schedule: p2p (every rollout GPU pulls its shard from the trainer "
            "GPUs that hold it) or broadcast (pipelined chain per shard through the rollout replicas)",
            "assumed", choices=("p2p", "broadcast")),
    RLParam("sync_chunks", int, 64, "pipeline pieces of the broadcast chain", "assumed", check=_ge(1)),
    RLParam("settle_time", float, 1e-3, "seconds after an OCS reconfiguration until links and routes carry traffic",
            "assumed: link re-training and route update; no public figure (the catalog's reconfiguration_time "
            "covers the mirrors only)", check=_between(0.0, MAX_SECONDS)),
    RLParam("circuit_time_limit", float, 10.0, "seconds the circuit ILP may run per phase", "assumed",
            check=_between(0.01, MAX_SECONDS)),
    RLParam("seed", int, 0, "seed of the output-length sample", "none", check=_seed),
)

PARAMS_BY_NAME = {p.name: p for p in PARAMS}


def rl_params() -> list[dict[str, Any]]:
    """The RL parameters as dicts (name, type, default, help, source), for ``--help`` and docs."""
    return [p.to_dict() for p in PARAMS]


@dataclass(frozen=True)
class RLConfig:
    """One RL iteration's workload and schedule (fields: :data:`PARAMS`).

    ``pipeline`` is ``sync`` (generate, sync weights, train, one after the
    other) or ``async`` (one-step asynchronous, StreamRL style: generation
    and weight sync overlap training of the previous batch).
    """

    samples: int = 1024
    prompt_len: int = 512
    output_median: float = 1024.0
    output_sigma: float = 1.0
    max_tokens: int = 16384
    lengths_file: str = ""
    train_fraction: float = 0.5
    train_tp: int = 8
    train_pp: int = 0
    train_ep: int = 1
    train_steps: int = 4
    recompute: str = "selective"
    gen_tp: int = 8
    gen_pp: int = 0
    gen_dtype: str = "bf16"
    kv_dtype: str = "bf16"
    gen_max_batch: int = 256
    gpu_memory_utilization: float = 0.9
    sync: str = "p2p"
    sync_chunks: int = 64
    settle_time: float = 1e-3
    circuit_time_limit: float = 10.0
    seed: int = 0
    pipeline: str = "sync"

    @classmethod
    def from_params(cls, given: dict[str, Any] | None = None, *, pipeline: str = "sync") -> "RLConfig":
        """An RLConfig from ``-p`` values (strings or typed), defaults for the rest.

        Raises
        ------
        FabricError
            Unknown name (listing the allowed ones) or a bad value.

        Examples
        --------
        >>> RLConfig.from_params({"samples": "64"}).samples
        64
        """
        given = dict(given or {})
        for name in given:
            if name not in PARAMS_BY_NAME:
                raise FabricError(f"params[{name}]", f"unknown RL parameter; allowed: {', '.join(sorted(PARAMS_BY_NAME))}")
        if pipeline not in ("sync", "async"):
            raise FabricError("pipeline", f"pipeline {pipeline!r} must be sync or async")
        values = {name: PARAMS_BY_NAME[name].parse(v) for name, v in given.items()}
        cfg = cls(**values, pipeline=pipeline)
        cfg._check_sizes()
        return cfg

    def _check_sizes(self) -> None:
        """Sizes that only together overflow: a training sequence past a model's longest, samples past memory."""
        from fabric.limits import check
        from workloads.models import MAX_MODEL_INT

        # training sequences are prompt_len + output tokens (at most max_tokens): past MAX_MODEL_INT the error
        # named `seq_len`, which no flag sets
        if self.prompt_len >= MAX_MODEL_INT:
            raise FabricError("params[prompt_len]", f"{self.prompt_len} must be < {MAX_MODEL_INT:,} (the longest "
                                                    "sequence a model takes)")
        if self.prompt_len + self.max_tokens > MAX_MODEL_INT:
            raise FabricError("params[max_tokens]", f"{self.max_tokens}: prompt_len + max_tokens = "
                                                    f"{self.prompt_len + self.max_tokens:,} must be <= "
                                                    f"{MAX_MODEL_INT:,} (the longest sequence a model takes)")
        # samples=1e9 ran out of memory and blamed --gpus
        check("memory", self.samples * BYTES_PER_SAMPLE, "params[samples]",
              f"{self.samples:,} responses x ~{BYTES_PER_SAMPLE} B")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def gen_bytes_per_param(self) -> float:
        """Bytes per weight in the rollout engine (and on the wire in weight sync)."""
        return DTYPE_BYTES[self.gen_dtype]

    @property
    def kv_bytes(self) -> float:
        return DTYPE_BYTES[self.kv_dtype]


DTYPE_BYTES = {"bf16": 2.0, "fp8": 1.0}
"""Bytes per element of the dtypes the RL model uses (by definition of the formats)."""
