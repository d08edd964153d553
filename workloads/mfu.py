"""One MFU question answered end to end: the object `fabric mfu` prints (also the sweep metric).

:func:`mfu_summary` loads the model, picks the runtime and collective backend,
then evaluates one configuration (unset dimensions at their defaults, the
largest data-parallel size that fits) or searches the best one; the CLI only
parses, calls it and prints.
"""

from __future__ import annotations

import math
from typing import Any, Optional

from fabric.catalog import Catalog, load_catalog
from fabric.checks import flag as check_switch, whole
from fabric.errors import FabricError

RUNTIMES = ("megatron-core", "megatron-core-fa2", "megatron-2021")
# Tokens per step when --global-batch is not given (assumed: Llama 3 405B began pre-training at 4M tokens
# per step, arXiv 2407.21783 Sec. 3.4; GPT-3 175B used 3.2M).
DEFAULT_TOKENS_PER_STEP = 4 * 2**20


def default_global_batch(seq_len: int) -> int:
    """Sequences per step when none is given: about 4 Mi tokens (assumed, see DEFAULT_TOKENS_PER_STEP)."""
    return max(1, round(DEFAULT_TOKENS_PER_STEP / seq_len))


def runtime_named(name: str, fp8: bool = False, memory_efficient_norm: bool = False):
    """The :class:`~workloads.step.Runtime` called ``name`` (``--runtime``), with fp8 weight GEMMs and
    memory-efficient norms if asked."""
    from workloads.step import MEGATRON_2021, MEGATRON_CORE

    if name not in RUNTIMES:
        raise FabricError("runtime", f"{name!r} not allowed; use one of {', '.join(RUNTIMES)}")
    rt = MEGATRON_2021 if name == "megatron-2021" else MEGATRON_CORE
    if name == "megatron-core-fa2":
        # the same framework with FlashAttention-2 kernels (Transformer Engine / NeMo on Hopper until mid-2024)
        from dataclasses import replace

        rt = replace(rt, name=name, flash_kernel="fa2")
    if fp8 and name == "megatron-2021":
        # the 2021 runtime trained in fp16/bf16; fp8 GEMMs came with Transformer Engine on Hopper (2022)
        raise FabricError("fp8", "not available with runtime megatron-2021 (it predates fp8 training); "
                                 "use runtime megatron-core")
    if fp8 or memory_efficient_norm:
        from dataclasses import replace

        rt = replace(rt, fp8=fp8 or rt.fp8, memory_efficient_norm=memory_efficient_norm or rt.memory_efficient_norm)
    return rt


def backend_named(name: str):
    """The collective-timing backend called ``name`` (``--comm``)."""
    from workloads.comm import analytic_comm_time, simulator_backend

    if name == "analytic":
        return analytic_comm_time
    if name == "sim":
        be = simulator_backend()
        if be is None:
            raise FabricError("comm", "the flow simulator (fabric.sim) is not available; use --comm analytic")
        return be
    raise FabricError("comm", f"{name!r} not allowed; use sim or analytic")


#: Memory per GPU of the job that a step model timed by the flow simulator holds beyond the Fabric's own,
#: nearly all of it the route matrices of the simulated DP rings and PP sends (measured, llama3-70b, from
#: 16,384 to 65,536 GPUs: ``mfu --search`` 0.43 -> 1.77 GB on dgx and 0.43 -> 2.37 GB on khop-ring, ``goodput``
#: on dgx 0.40 -> 1.79 GB: 27-40 KB per GPU).  The check takes less than the least of them, so that no run
#: that fits is refused; ``mfu dgx --gpus 524288 --search`` grew past 8 GB for 83 s before it was refused.
SIM_BYTES_PER_GPU = 24 << 10


def check_sim_memory(gpus: int, comm: str, field: str = "gpus") -> None:
    """Refuse, before any collective is simulated, a step model on ``gpus`` GPUs whose simulated timing would
    pass the ``memory`` limit (:data:`SIM_BYTES_PER_GPU`); analytic timing holds no routes and is not checked.
    """
    if comm != "sim":
        return
    from fabric.limits import check_memory_per

    check_memory_per(gpus, "GPUs", SIM_BYTES_PER_GPU, field,
                     "for collectives timed by the flow simulator; --comm analytic holds none")


def default_dp(sm, par_kwargs: dict, global_batch: int) -> int:
    """The largest DP size that the usable GPUs allow and that divides the global batch."""
    from workloads.parallelism import Parallelism, validate
    from workloads.placement import fault_free_tp_groups

    tp, cp, pp, mb = (par_kwargs[k] for k in ("tp", "cp", "pp", "micro_batch"))
    ep = par_kwargs.get("ep", 1)
    if tp < 1 or cp < 1 or pp < 1 or mb < 1 or not isinstance(ep, int) or ep < 1:
        return 1
    # expert-parallel groups are folded from the tp x cp x dp ranks: dp must be a multiple of this
    fold = ep // math.gcd(ep, tp * cp) if sm.model.is_moe else 1
    # the model and HBD rules first, so that their message (not "no dp fits") reaches the user
    # (pp micro-batches: the fewest an interleaved schedule accepts; the real count is checked with the real dp)
    validate(sm.model, Parallelism(**{**par_kwargs, "dp": fold, "global_batch": mb * pp * fold}),
             None if sm.tp_beyond_hbd else sm.fabric.hbd)
    most = fault_free_tp_groups(sm.fabric, tp).size // (tp * cp * pp)  # raises if the HBD cannot form tp
    v = par_kwargs.get("interleave", 1)
    for d in range(most - most % fold, 0, -fold):
        if global_batch % (d * mb) == 0 and (v == 1 or global_batch // (d * mb) % pp == 0):
            return d
    # no replica fits: name the largest model-parallel factor (the one to lower), not always tp
    flag = max((("tp", tp), ("cp", cp), ("pp", pp)), key=lambda kv: kv[1])[0] if most == 0 else \
        "micro_batch" if mb > global_batch else "global_batch"  # a micro-batch above the batch is the one to lower
    raise FabricError(flag, f"no data-parallel size fits: tp x cp x pp = {tp * cp * pp} on {sm.fabric.n_gpus} GPUs "
                            f"with global batch {global_batch} and micro-batch {mb}"
                            + (f" (dp a multiple of {fold} for ep {ep})" if fold > 1 else ""))


def mfu_summary(fabric, model: Any, *, catalog: Catalog | None = None, search: bool = True,
                global_batch: Optional[int] = None, seq_len: Optional[int] = None, runtime: str = "megatron-core",
                comm: str = "sim", confirm: int = 3, fp8: bool = False, flops_convention: str = "causal",
                memory_efficient_norm: bool = False, **fixed: Any) -> dict:
    """The JSON object of `fabric mfu` for a built Fabric (also the sweep metric).

    Parameters
    ----------
    fabric : Fabric
    model : str, Path or ModelSpec
        Preset name or model file.
    search : bool
        Search the best configuration (``fixed`` pins dimensions); else
        evaluate the configuration ``fixed`` describes (unset: tp = pp = cp =
        ep = micro_batch = 1, the largest fitting dp).
    global_batch, seq_len : int, optional
    runtime : {'megatron-core', 'megatron-core-fa2', 'megatron-2021'}
    comm : {'sim', 'analytic'}
    confirm : int
        Search: candidates re-timed by the simulator.
    flops_convention : {'causal', 'full'}
        How model FLOPs count attention (:mod:`workloads.flops`); stated in the result.
    memory_efficient_norm : bool
        Norms keep their output, not their input (``Runtime.memory_efficient_norm``).
    fixed : dict
        ``tp, pp, dp, ep, cp, micro_batch, interleave, recompute, sequence_parallel``
        and optionally ``zero_stage, distributed_optimizer, first_stage_layers,
        last_stage_layers, account_for_embedding, account_for_loss``.  The
        distributed optimizer defaults to the runtime's (off for megatron-2021).

    Raises
    ------
    FabricError
        Bad input, or (without search) a configuration that does not fit in memory.
    """
    from workloads.models import load_model
    from workloads.parallelism import Parallelism, check_fixed
    from workloads.search import search as run_search
    from workloads.step import RUNTIME_SOURCES, StepModel, check_fit, conventions

    fixed = check_fixed(fixed)
    search, fp8, memory_efficient_norm = (check_switch(v, k) for k, v in (
        ("search", search), ("fp8", fp8), ("memory_efficient_norm", memory_efficient_norm)))
    confirm = whole(confirm, "confirm", 1)
    if catalog is not None and not isinstance(catalog, Catalog):
        raise FabricError("catalog", f"must be a Catalog (fabric.catalog.load_catalog), not {type(catalog).__name__}")
    spec = load_model(model)
    if seq_len is not None:
        spec = spec.with_seq_len(seq_len)
    B = whole(global_batch, "global_batch", 1) if global_batch is not None else default_global_batch(spec.seq_len)
    sm = StepModel(fabric, spec, catalog=catalog or load_catalog(), runtime=runtime_named(runtime, fp8, memory_efficient_norm),
                   backend=backend_named(comm), flops_convention=flops_convention)
    head = {"architecture": fabric.architecture, "params": fabric.params, "gpus": fabric.n_gpus, "gpu": sm.gpu.item,
            "model_spec": spec.to_dict(), "model_params_billion": spec.params() / 1e9,
            "active_params_billion": spec.active_params() / 1e9, "global_batch": B, "runtime": sm.runtime.name,
            "gemm_model": sm.gemm.to_dict(), "gemm_model_on_gpu": sm.gemm.for_gpu(sm.gpu).to_dict(),
            "kernel_efficiency": _kernels_dict(sm.gpu), "comm_backend": sm.backend_name,
            "runtime_switches": sm.runtime.to_dict(), "runtime_sources": dict(RUNTIME_SOURCES),
            "attention_kernel": "flash" if sm.flash else "unfused",
            "flops_convention": flops_convention, "conventions": conventions(flops_convention, sm.precision)}
    fixed = {k: v for k, v in fixed.items() if v is not None}
    warnings = tp_beyond_hbd(sm, fixed.get("tp")) + kv_replicated(spec, fixed.get("tp"))
    if warnings:
        head["warnings"] = warnings
    if sm.runtime.distributed_optimizer is not None and "zero_stage" not in fixed:
        fixed.setdefault("distributed_optimizer", sm.runtime.distributed_optimizer)
    if search:
        check_sim_memory(fabric.n_gpus, comm)  # the search's candidates reach every GPU of the fabric
        res = run_search(sm, B, fixed=fixed, confirm=confirm)
        if res.best is None:
            pinned = [k for k in ("tp", "pp", "dp", "ep", "cp") if k in fixed]
            if not res.oom and pinned:  # no candidate at all: what was pinned rules every layout out, not memory
                shown = ", ".join(f"{k} {fixed[k]}" for k in pinned)
                raise FabricError(pinned[0], f"no layout of {spec.name} on {fabric.n_gpus} GPUs has {shown} (each "
                                             "must divide the GPUs and the model's shape)")
            raise FabricError("model", f"no configuration of {spec.name} fits in {sm.gpu.hbm_bytes / 1e9:.0f} GB on "
                                         f"{fabric.n_gpus} GPUs ({res.oom} candidates out of memory)")
        if res.raised:  # the best fits only with memory switches raised, as a pinned configuration would be
            head["memory_switches_raised"] = list(res.raised)
            head["runtime_switches"] = res.step_model.runtime.to_dict()
        return {**head, **res.best.to_dict(), "search": res.to_dict()}
    kw = {"tp": 1, "pp": 1, "ep": 1, "cp": 1, "micro_batch": 1, "interleave": 1, "recompute": "none"}
    kw.update(fixed)
    kw.setdefault("sequence_parallel", kw["tp"] > 1)
    if kw.get("dp") is None:
        kw["dp"] = default_dp(sm, kw, B)
    par = Parallelism(global_batch=B, **kw)
    check_sim_memory(par.world, comm)
    result = sm.evaluate(par)
    if not result.fits and not ("zero_stage" in fixed and memory_efficient_norm):
        fitted = _fit_by_memory_switches(sm, par, zero_fixed="zero_stage" in fixed)
        if fitted is not None:
            result, raised, step = fitted
            head["memory_switches_raised"] = raised
            head["runtime_switches"] = step.runtime.to_dict()
            head.setdefault("warnings", []).append(
                f"{par.label()} does not fit with the runtime's defaults ({sm.runtime.name}); raised "
                f"{', '.join(raised)} (give the ZeRO stage or the norm switch to choose)")
    check_fit(result)
    return {**head, **result.to_dict()}


def _fit_by_memory_switches(sm, par, zero_fixed: bool = False):
    """The first of the memory-only switches practice reaches for that makes ``par`` fit, and what was raised.

    When a configuration does not fit with the runtime's defaults and the caller left the ZeRO stage or the
    norm switch open, step up (only what is open) as large runs do (Llama 3 405B: gradients sharded as in
    ZeRO-2 / FSDP without re-sharding, tensors freed once used): the ladder of
    :func:`workloads.search.memory_ladder`, which the search climbs too; each result is timed as evaluated,
    so any cost the model gives the switch is kept.  Returns the fitting result, the switches raised and the
    StepModel that fitted, or None if nothing fits (the caller keeps the defaults' result).
    """
    from workloads.search import memory_ladder

    for p2, step, raised in memory_ladder(sm, par, zero_fixed=zero_fixed):
        result = step.evaluate(p2)
        if result.fits:
            return result, raised, step
    return None


def _kernels_dict(gpu) -> dict:
    """The GPU's kernel efficiencies with their sources (``workloads/presets/kernels/gpu-efficiency.yaml``)."""
    k = gpu.kernels
    if k is None:
        return {}
    fa2_fwd, fa2_bwd = k.flash("fa2")
    return {"matmul": k.matmul, "training": k.training, "flash_fwd": k.flash_fwd, "flash_bwd": k.flash_bwd,
            "fa2_fwd": fa2_fwd, "fa2_bwd": fa2_bwd, "sources": dict(k.sources)}


def kv_replicated(model, tp: Optional[int]) -> list[str]:
    """The warning for a pinned TP above the model's KV heads (query groups): modelled, but not Megatron's.

    Each KV head is then replicated on ``tp / kv_heads`` TP ranks (as inference engines do; the memory and
    FLOP models count it so); Megatron-core asserts that TP divides the query groups (attention.py,
    ``divide(num_query_groups, tp)``), so such a job does not run there.
    """
    if not tp or model.is_mla or tp <= model.kv_heads:
        return []
    return [f"TP {tp} exceeds the {model.kv_heads} KV heads of {model.name}: modelled with each KV head replicated "
            f"on {tp / model.kv_heads:g} TP ranks; Megatron-core refuses it (TP must divide the query groups)"]


def tp_beyond_hbd(sm, tp: Optional[int]) -> list[str]:
    """Let a pinned TP larger than the HBD domain run over the scale-out NICs; the warnings to show.

    TP beyond the HBD takes whole domains (``tp`` a multiple of the domain), and its collectives cross
    the DCN (timed by the simulator on that placement), as InfiniteHBD's comparison at TP 32 on DGX
    assumes. ``sm.tp_beyond_hbd`` tells :func:`~workloads.parallelism.validate` to allow it.

    Raises
    ------
    FabricError
        ``tp`` exceeds the HBD and is not a whole number of domains.
    """
    hbd = sm.fabric.hbd
    limit = hbd.max_tp or hbd.domain_gpus
    if not tp or not limit or tp <= limit:
        return []
    if tp % limit:
        raise FabricError("tp", f"{tp} exceeds the {hbd.kind} HBD of {limit} GPUs and is not a multiple of it "
                                "(TP beyond the HBD takes whole domains)")
    sm.tp_beyond_hbd = True
    return [f"TP {tp} exceeds the HBD ({limit} GPUs): each TP group spans {tp // limit} domains and its "
            "collectives cross the scale-out network (timed by the simulator)"]
