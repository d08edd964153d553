"""Jobs to place and the bytes each parallelism dimension moves per training step.

A :class:`Job` asks for ``count`` *instances* of a TP x DP x PP layout.  One
instance is ``dp * pp`` TP groups (rings): ``pp`` *DP groups* (one per
pipeline stage, ``dp`` rings each: the rings that all-reduce gradients
together) and ``dp`` pipelines (one ring per stage).

Bytes per step (explicit inputs; the defaults below are a model, say so when
you use them):

``dp_bytes``
    The gradient buffer each GPU all-reduces with its DP peers per step:
    parameters per stage per TP rank x 2 bytes (bf16 gradients).  The ring
    all-reduce moves ``2 (D - 1) / D`` of it out of every member
    (:mod:`solvers.orchestrator.traffic`), i.e. about 2 x the buffer.
``pp_bytes``
    What one TP rank exchanges with the same TP rank of the next stage per
    step: forward activations plus backward activation gradients,
    ``2 x microbatches x micro_batch x seq_len x hidden x 2 bytes / TP``
    (Megatron's scatter/gather: each TP rank sends 1/TP of the activation;
    Narayanan et al. 2021, arXiv 2104.04473, section 4.1).

The default model is GPT-3 175B (hidden 12,288, sequence 2,048; Narayanan
2021 Table 1) with micro-batch 1 and ``4 x PP`` micro-batches per step
(assumed: enough to keep the 1F1B bubble (p - 1) / m under 25 %).  Only the
ratio of DP to PP bytes matters for the cross-ToR *ratio*, and with PP = 1
not even that.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from fabric.checks import MAX_WHOLE, is_number, is_whole
from fabric.errors import FabricError

DEFAULT_MODEL = {
    "name": "gpt3-175b",
    "params": 175e9,
    "hidden": 12288,
    "seq_len": 2048,
    "micro_batch": 1,
    "microbatches_per_stage": 4,  # micro-batches per step = 4 x PP (assumed)
    "bytes_per_value": 2,  # bf16
    "source": "GPT-3 175B shape: Narayanan et al. 2021 Table 1; micro-batch count assumed",
}


def default_dp_bytes(tp: int, pp: int, model: dict = DEFAULT_MODEL) -> float:
    """Gradient bytes per GPU per step: params / (TP x PP) x bytes per value."""
    return float(model["params"]) / (tp * pp) * model["bytes_per_value"]


def default_pp_bytes(tp: int, pp: int, model: dict = DEFAULT_MODEL) -> float:
    """Activation bytes one TP rank exchanges with its next-stage peer per step (forward + backward)."""
    micro = model["microbatches_per_stage"] * pp
    act = model["micro_batch"] * model["seq_len"] * model["hidden"] * model["bytes_per_value"]
    return 2.0 * micro * act / tp


@dataclass(frozen=True)
class Job:
    """One layout to place.

    Attributes
    ----------
    tp : int
        GPUs per TP group (a ring of ``tp / gpus_per_node`` nodes on a k-hop line).
    dp : int or None
        Rings per DP group; ``None`` means "max": one instance with as many
        DP replicas as fit (``count`` must then be 1 or None).
    pp : int
        Pipeline stages.
    count : int or None
        Instances wanted; ``None``: as many as fit.
    dp_bytes, pp_bytes : float or None
        Bytes per step (module docstring); ``None``: the default model.
    name : str
    """

    tp: int
    dp: int | None
    pp: int = 1
    count: int | None = None
    dp_bytes: float | None = None
    pp_bytes: float | None = None
    name: str = "job"

    def __post_init__(self):
        for field, v in (("tp", self.tp), ("pp", self.pp), ("dp", self.dp), ("count", self.count)):
            if v is None and field in ("dp", "count"):
                continue
            if not (is_whole(v) and 1 <= v <= MAX_WHOLE):  # numpy integers (from an array) are accepted
                raise FabricError(field, f"{v!r} must be a whole number >= 1" + (" or 'max'" if field == "dp" else ""))
            object.__setattr__(self, field, int(v))
        if self.dp is None and self.count not in (None, 1):
            raise FabricError("count", "with dp=max there is exactly one instance; drop count or give it as 1")
        for field, v in (("dp_bytes", self.dp_bytes), ("pp_bytes", self.pp_bytes)):
            if v is not None and not (is_number(v) and 0 <= v < float("inf")):  # inf bytes made NaN ratios
                raise FabricError(field, f"{v!r} must be a finite number of bytes >= 0")

    @property
    def bytes_dp(self) -> float:
        return default_dp_bytes(self.tp, self.pp) if self.dp_bytes is None else float(self.dp_bytes)

    @property
    def bytes_pp(self) -> float:
        return default_pp_bytes(self.tp, self.pp) if self.pp_bytes is None else float(self.pp_bytes)

    def with_layout(self, dp: int, count: int) -> "Job":
        """The job with DP size and instance count fixed (after the max-GPU stage; the count may be 0 there)."""
        out = replace(self, dp=int(dp), count=None)
        object.__setattr__(out, "count", int(count))  # resolved, not user input: 0 instances is a valid answer
        return out

    def to_dict(self) -> dict:
        return {"name": self.name, "tp": self.tp, "dp": self.dp, "pp": self.pp, "count": self.count,
                "dp_bytes": self.bytes_dp, "pp_bytes": self.bytes_pp,
                "bytes_model": None if (self.dp_bytes is not None and self.pp_bytes is not None)
                else DEFAULT_MODEL["source"]}
