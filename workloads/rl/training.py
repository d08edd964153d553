"""The training phase: the MFU step model (:mod:`workloads.step`) on the trainer pool.

The trainer pool is the first GPUs of the Fabric in HBD order, where
:class:`workloads.placement.RankPlacement` puts a job.  Each iteration takes
``train_steps`` optimizer steps over the ``samples`` responses (prompt +
generated tokens, at the mean length), so a step's global batch is
``samples / train_steps`` sequences, rounded up to a multiple of the
data-parallel size.  The step time, with every collective timed on the Fabric
(the flow simulator by default), comes from :class:`workloads.step.StepModel`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from fabric.catalog import Catalog
from fabric.errors import FabricError
from fabric.model import Fabric
from workloads.models import ModelSpec
from workloads.parallelism import Parallelism, divisors, validate
from workloads.placement import RankPlacement
from workloads.rl.config import RLConfig
from workloads.rl.generation import ACT_BYTES
from workloads.rl.traffic import Flows, all_pairs, ring_edges
from workloads.step import MEGATRON_CORE, Runtime, StepModel

_FLAG = {"tp": "params[train_tp]", "pp": "params[train_pp]", "ep": "params[train_ep]", "global_batch": "params[samples]",
         "gpus": "params[train_fraction]", "sequence_parallel": "params[train_tp]", "cp": "params[train_tp]",
         "micro_batch": "params[samples]", "recompute": "params[recompute]", "interleave": "params[train_pp]"}


@dataclass
class TrainingResult:
    """The training phase of one iteration.

    Attributes
    ----------
    time_s : float
        ``steps x step_time_s``.
    step_time_s : float
    steps : int
    parallelism : Parallelism
    seq_len : int
        Tokens per trained sequence (prompt + mean output).
    mfu : float
    fits : bool
    breakdown : dict
        Seconds per step by part (compute, tp, pp, dp, bubble, ...).
    comm_backend : str
    notes : list of str
    """

    time_s: float
    step_time_s: float
    steps: int
    parallelism: Parallelism
    seq_len: int
    mfu: float
    fits: bool
    breakdown: dict
    comm_backend: str
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"time_s": self.time_s, "step_time_s": self.step_time_s, "steps": self.steps,
                "parallelism": self.parallelism.label(), "seq_len": self.seq_len, "mfu": self.mfu,
                "fits": self.fits, "breakdown_s": dict(self.breakdown), "comm_backend": self.comm_backend,
                "notes": list(self.notes)}




def plan_training(fabric: Fabric, model: ModelSpec, cfg: RLConfig, train_gpus: int, mean_output: float,
                  catalog: Catalog, runtime: Runtime = MEGATRON_CORE) -> tuple[ModelSpec, Parallelism, list[str]]:
    """The trained model shape (sequence length) and the trainer's parallelism.

    ``train_pp = 0`` picks the fewest pipeline stages whose memory fits
    (:meth:`workloads.step.StepModel.memory`).

    Raises
    ------
    FabricError
        Naming the ``-p`` parameter when no valid configuration exists.
    """
    tp, ep = cfg.train_tp, cfg.train_ep
    seq = int(math.ceil(cfg.prompt_len + mean_output))
    if tp > 1:  # sequence parallelism needs TP to divide the sequence: pad it (workloads.parallelism.validate)
        seq = tp * math.ceil(seq / tp)
    m = model.with_seq_len(seq)
    notes: list[str] = []
    candidates = [cfg.train_pp] if cfg.train_pp else [p for p in divisors(m.layers) if train_gpus // (tp * p) >= 1]
    if not candidates:
        raise FabricError("params[train_tp]", f"tp={tp} needs more than the {train_gpus} GPUs of the training pool")
    sm = StepModel(fabric, m, catalog=catalog, runtime=runtime)
    last_err: FabricError | None = None
    valid_seen = False
    for pp in candidates:
        dp = train_gpus // (tp * pp)
        if dp < 1:
            raise FabricError("params[train_pp]", f"tp x pp = {tp * pp} exceeds the {train_gpus} GPUs of the training pool")
        per_step = math.ceil(cfg.samples / cfg.train_steps)
        gb = dp * math.ceil(per_step / dp)
        par = Parallelism(tp=tp, pp=pp, dp=dp, ep=ep, micro_batch=1, global_batch=gb,
                          sequence_parallel=tp > 1, recompute=cfg.recompute)
        try:
            validate(m, par, fabric.hbd, fabric.n_gpus)
        except FabricError as exc:
            last_err = FabricError(_FLAG.get(exc.field, exc.field), exc.message)
            if cfg.train_pp:
                raise last_err from None
            continue
        valid_seen = True
        if sm.memory(par).fits or cfg.train_pp:
            if gb != per_step:
                notes.append(f"global batch per step rounded up from {per_step} to {gb} (a multiple of dp={dp})")
            if tp * pp * dp < train_gpus:
                notes.append(f"{train_gpus - tp * pp * dp} GPUs of the training pool idle (tp x pp = {tp * pp})")
            return m, par, notes
    if not valid_seen and last_err is not None:
        raise last_err
    raise FabricError("params[train_pp]", f"no pipeline depth fits {m.name} in HBM on {train_gpus} GPUs at tp={tp} "
                                     f"(recompute={cfg.recompute}); give training more GPUs or -p recompute=full")


def training_phase(fabric: Fabric, model: ModelSpec, par: Parallelism, steps: int, catalog: Catalog,
                   backend=None, runtime: Runtime = MEGATRON_CORE) -> TrainingResult:
    """Time of ``steps`` optimizer steps of ``par`` on ``fabric`` (its OCS configuration as given)."""
    sm = StepModel(fabric, model, catalog=catalog, runtime=runtime, backend=backend)
    r = sm.evaluate(par)
    return TrainingResult(steps * r.step_time_s, r.step_time_s, steps, par, model.seq_len, r.mfu, r.fits,
                          dict(r.breakdown), r.comm_backend, list(r.notes))


def training_flows(fabric: Fabric, model: ModelSpec, par: Parallelism, steps: int,
                   runtime: Runtime = MEGATRON_CORE) -> Flows:
    """Bytes the training phase moves between GPUs over ``steps`` steps (see :mod:`workloads.rl.traffic`)."""
    pl = RankPlacement(fabric, par)
    total = float(model.params())
    experts = float(model.moe_layers * model.experts * model.mlp_params(model.expert_ffn_hidden)) if model.is_moe \
        else 0.0
    dense_local = (total - experts) / (par.tp * par.pp)
    expert_local = experts / (par.ep * par.pp)
    per_elem = runtime.grad_bytes + runtime.param_gather_bytes  # reduce-scatter + all-gather
    parts = []
    for local, groups in ((dense_local, pl.dp_groups), (expert_local, pl.edp_groups)):
        n = groups.shape[1]
        if local > 0 and n > 1:
            s, d = ring_edges(groups)
            parts.append(Flows.of(s, d, (n - 1) / n * local * per_elem))
    m = par.microbatches
    act_shard = ACT_BYTES * par.micro_batch * model.seq_len * model.hidden / par.tp
    if par.pp > 1:
        pairs = pl.pp_pairs
        fwd = Flows.of(pairs[:, 0], pairs[:, 1], m * act_shard)
        bwd = Flows.of(pairs[:, 1], pairs[:, 0], m * act_shard)  # gradients flow back
        parts += [fwd, bwd]
    if model.is_moe and par.ep > 1:
        tokens = m * par.micro_batch * model.seq_len / par.tp  # per GPU per step (sequence parallel)
        per_pair = tokens * model.top_k * model.hidden * ACT_BYTES / par.ep
        passes = 4 + (2 if par.recompute == "full" else 0)  # dispatch + combine, forward + backward (+ recompute)
        s, d = all_pairs(pl.ep_groups)
        parts.append(Flows.of(s, d, passes * model.moe_layers / par.pp * per_pair))
    return Flows.concat(parts).scaled(steps)


def pools(fabric: Fabric, train_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """Device ids of the training pool (the first whole nodes in HBD order) and of the generation pool (the rest)."""
    from workloads.placement import hbd_order

    order, _ = hbd_order(fabric)
    gpn = max(fabric.hbd.gpus_per_node, 1)
    nodes = order.size // gpn
    n_train = int(round(train_fraction * nodes))
    n_train = min(max(n_train, 1), nodes - 1) if nodes > 1 else 0
    if n_train <= 0 or n_train >= nodes:
        raise FabricError("gpus", f"{order.size} GPUs are too few for two pools of whole {gpn}-GPU nodes")
    return order[:n_train * gpn], order[n_train * gpn:nodes * gpn]
