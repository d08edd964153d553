"""`fabric mfu`: LLM training step time, MFU and memory of a model on an architecture.

A thin shell over :mod:`workloads`: build the Fabric, load the model, then
either evaluate one parallel configuration (flags) or search the best one
(``--search``; given flags pin their dimension).  ``--versus ARCH:p=v,...``
evaluates the same question on a second architecture and prints both
breakdowns side by side, so a gain can be traced to compute, exposed
communication per dimension, or the pipeline bubble.
"""

from __future__ import annotations

import sys

from pathlib import Path
from typing import Optional

import typer

from cli.common import (CATALOG_OPT, check_writable_file, GPUS_OPT, JSON_OPT, PARAM_OPT, TOPOLOGY_OPT, build_fabric, console, emit_json,
                        build_versus, given)
from fabric.errors import FabricError


def mfu_command(
    arch: Optional[str] = typer.Argument(None, help="architecture (see `fabric list`)"),
    gpus: Optional[int] = GPUS_OPT,
    param: list[str] = PARAM_OPT,
    model: str = typer.Option(..., "--model", help="model preset (e.g. llama3-70b, gpt3-175b) or a .yaml/.json file"),
    tp: Optional[int] = typer.Option(None, "--tp", help="tensor-parallel size (inside the HBD)"),
    pp: Optional[int] = typer.Option(None, "--pp", help="pipeline-parallel size"),
    dp: Optional[int] = typer.Option(None, "--dp", help="data-parallel size (default: as many as fit)"),
    ep: Optional[int] = typer.Option(None, "--ep", help="expert-parallel size (MoE)"),
    cp: Optional[int] = typer.Option(None, "--cp", help="context-parallel size"),
    micro_batch: Optional[int] = typer.Option(None, "--micro-batch", help="sequences per micro-batch"),
    global_batch: Optional[int] = typer.Option(None, "--global-batch", help="sequences per step (default ~4M tokens)"),
    seq_len: Optional[int] = typer.Option(None, "--seq-len", help="sequence length (default: the model's)"),
    recompute: Optional[str] = typer.Option(None, "--recompute", help="activation recomputation: none|selective|full"),
    sequence_parallel: Optional[bool] = typer.Option(None, "--sequence-parallel/--no-sequence-parallel",
                                                     help="sequence parallelism (default: on when --tp > 1)"),
    interleave: Optional[int] = typer.Option(None, "--interleave", help="virtual pipeline chunks per stage (v)"),
    do_search: bool = typer.Option(False, "--search", help="search the best configuration (flags given pin theirs)"),
    confirm: int = typer.Option(3, "--confirm", help="--search: candidates re-timed with the simulator"),
    runtime: str = typer.Option("megatron-core", "--runtime",
                                help="megatron-core | megatron-core-fa2 (FlashAttention-2 kernels, as on Hopper "
                                     "until mid-2024) | megatron-2021 (unfused attention, fp16 gradients, no "
                                     "overlaps, no distributed optimizer)"),
    fp8: bool = typer.Option(False, "--fp8", help="weight GEMMs at the fp8 peak (MFU then relative to the fp8 peak)"),
    flops_convention: str = typer.Option("causal", "--flops-convention",
                                         help="attention FLOPs in MFU: causal (lower triangle) | full (PaLM/Megatron)"),
    zero: Optional[int] = typer.Option(None, "--zero", help="ZeRO stage 0-3 (3 = FSDP); default: the runtime's "
                                                           "distributed optimizer (ZeRO-1) or none"),
    first_stage_layers: Optional[int] = typer.Option(None, "--first-stage-layers",
                                                     help="layers on the first pipeline stage (default: spread)"),
    last_stage_layers: Optional[int] = typer.Option(None, "--last-stage-layers",
                                                    help="layers on the last pipeline stage (default: spread)"),
    account_for_embedding: bool = typer.Option(False, "--account-for-embedding",
                                               help="count the input embedding as a layer when splitting stages"),
    account_for_loss: bool = typer.Option(False, "--account-for-loss",
                                          help="count the output layer and loss as a layer when splitting stages"),
    memory_efficient_norm: bool = typer.Option(False, "--memory-efficient-norm",
                                               help="norms keep their output, not their input, for the backward "
                                                    "(Megatron --memory-efficient-layer-norm)"),
    comm: str = typer.Option("sim", "--comm", help="collective timing: sim (flow simulator) | analytic (fallback)"),
    comm_cache: Optional[Path] = typer.Option(None, "--comm-cache", help="JSON file of cached collective fits "
                                                                         "(read if present, written after)"),
    versus: Optional[str] = typer.Option(None, "--versus", help="second architecture, e.g. dgx:gpu=b200"),
    topology: Optional[Path] = TOPOLOGY_OPT,
    catalog: Optional[Path] = CATALOG_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Step time, MFU, TFLOP/s and memory per GPU of a model, with the time breakdown.

    Conventions: MFU = model FLOPs (forward + backward, no recomputation) per
    second per GPU over the dense peak of the precision in use (bf16; fp8 with
    --fp8), never above 100 %; HFU adds the recomputation the runtime executes.
    Attention FLOPs: --flops-convention causal (default: the lower triangle, as
    causal models and flash attention run) or full (PaLM / Megatron formula
    72 B s l h^2 (1 + s/6h + V/12lh)).  model_tflops_per_gpu and
    hardware_tflops_per_gpu are the two numerators per GPU; the JSON states
    the conventions under "conventions".  Layer counts that --pp does not
    divide are split with the first and last stages one layer lighter.
    Compute efficiency per GPU generation (maximum achievable matmul, in-training
    fraction, flash-attention kernels) comes from
    workloads/presets/kernels/gpu-efficiency.yaml, with sources, shown under
    "kernel_efficiency" and "gemm_model_on_gpu" in the JSON.
    """
    from fabric.catalog import load_catalog
    from workloads import comm as comm_mod
    from workloads.mfu import mfu_summary

    cat = load_catalog(catalog)
    _check_confirm_and_recompute(confirm, do_search, recompute)
    # the cache is read and rewritten; a model, catalog or topology file named as the cache would be replaced
    _load_comm_cache(comm_cache, {"--model": model, "--catalog": catalog, "--topology": topology})
    fixed = {"tp": tp, "pp": pp, "dp": dp, "ep": ep, "cp": cp, "micro_batch": micro_batch, "interleave": interleave,
             "recompute": recompute, "sequence_parallel": sequence_parallel, "zero_stage": zero,
             "first_stage_layers": first_stage_layers, "last_stage_layers": last_stage_layers,
             "account_for_embedding": account_for_embedding or None, "account_for_loss": account_for_loss or None}
    _stage_switches_need_a_pipeline(do_search, pp, account_for_embedding, account_for_loss)
    opts = dict(catalog=cat, search=do_search, global_batch=global_batch, seq_len=seq_len, runtime=runtime,
                comm=comm, confirm=confirm, fp8=fp8, flops_convention=flops_convention,
                memory_efficient_norm=memory_efficient_norm, **fixed)
    fab = build_fabric(arch, gpus, param, cat, topology)
    # a bad --versus is refused before the slow part
    vfab = build_versus(versus, fab.n_gpus, cat)[0] if versus is not None else None
    data = mfu_summary(fab, model, **opts)
    for w in data.get("warnings", []):  # e.g. TP beyond the HBD: said once the configuration is valid
        sys.stderr.write(f"warning: {w}\n")
    if versus is not None:
        _add_versus(data, mfu_summary(vfab, model, **opts))
    if comm_cache is not None:
        comm_mod.save_fits(comm_cache)
    if as_json:
        emit_json(data)
        return
    _print(data)


def _check_confirm_and_recompute(confirm: int, do_search: bool, recompute: Optional[str]) -> None:
    """``--confirm`` is a count of the search's candidates re-timed (without a search it was ignored, in silence);
    ``--recompute`` one of the three strategies."""
    if confirm < 1:
        raise FabricError("--confirm", f"{confirm} must be >= 1")
    if given("confirm") and not do_search:
        raise FabricError("--confirm", "re-times the candidates of --search; add --search")
    if recompute is not None and recompute not in ("none", "selective", "full"):
        raise FabricError("--recompute", f"{recompute!r} not allowed; use none, selective or full")


def _stage_switches_need_a_pipeline(do_search: bool, pp: Optional[int], embedding: bool, loss: bool) -> None:
    """One pipeline stage holds the embedding and the loss anyway: at pp 1 the switches changed nothing, in silence
    (as --first-stage-layers is refused there).  A search applies them to its pipelined candidates only."""
    if not do_search and (pp or 1) == 1 and (embedding or loss):
        flag = "--account-for-embedding" if embedding else "--account-for-loss"
        raise FabricError(flag, "counts a layer off the first or last pipeline stage: needs --pp > 1")


def _add_versus(data: dict, other: dict) -> None:
    """The second architecture's object and the MFU and throughput ratios, into ``data``."""
    data["versus"] = other
    data["mfu_ratio"] = data["mfu"] / other["mfu"]
    data["throughput_ratio"] = data["tokens_per_s"] / other["tokens_per_s"]


def _load_comm_cache(path: Optional[Path], inputs: dict) -> None:
    """``--comm-cache``: check it can be written (and is none of ``inputs``), and read the fits it holds already."""
    from workloads import comm as comm_mod

    if path is None:
        return
    check_writable_file(path, "--comm-cache", inputs)
    if path.is_file():
        comm_mod.load_fits(path)  # checks every entry; a bad file is refused before anything is written


def _print(data: dict) -> None:
    from rich.table import Table

    con = console()
    cols = [data] + ([data["versus"]] if "versus" in data else [])
    t = Table(title=f"{data['model']} ({data['model_params_billion']:.1f} B params), global batch "
                    f"{data['global_batch']:,} x {data['model_spec']['seq_len']:,} tokens", title_justify="left")
    t.add_column("")
    for d in cols:
        t.add_column(f"{d['architecture']} {d['gpu']} ({d['gpus']:,} GPUs)", justify="right")
    rows = [
        ("configuration", lambda d: d["config"]),
        ("GPUs used", lambda d: f"{d['gpus_used']:,} of {d['gpus_total']:,}"),
        ("step time", lambda d: f"{d['step_time_s']:.3f} s"),
        ("MFU", lambda d: f"{100 * d['mfu']:.1f} %"),
        ("MFU over all GPUs", lambda d: f"{100 * d['cluster_mfu']:.1f} %"),
        ("HFU", lambda d: f"{100 * d['hfu']:.1f} %"),
        ("TFLOP/s per GPU (model)", lambda d: f"{d['model_tflops_per_gpu']:.1f}"),
        ("TFLOP/s per GPU (hardware)", lambda d: f"{d['hardware_tflops_per_gpu']:.1f}"),
        ("pipeline stages (layers)", lambda d: _stages(d["stage_layers"])),
        ("tokens/s", lambda d: f"{d['tokens_per_s']:,.0f}"),
        ("memory per GPU", lambda d: f"{d['memory_gb_per_gpu']:.1f} GB of {d['memory']['hbm_gb']:.0f}"),
    ]
    for label, fn in rows:
        t.add_row(label, *[fn(d) for d in cols])
    t.add_section()
    for part in ("compute", "tp", "cp", "ep", "pp", "bubble", "dp", "optimizer"):
        if any(d["breakdown_s"].get(part, 0) > 0 for d in cols):
            label = {"compute": "compute", "bubble": "pipeline bubble", "optimizer": "optimizer step"}.get(
                part, f"exposed {part.upper()} comm")
            t.add_row(label, *[f"{d['breakdown_s'][part]:.3f} s ({100 * d['breakdown_s'][part] / d['step_time_s']:.1f} %)"
                               for d in cols])
    con.print(t)
    if "versus" in data:
        con.print(f"MFU ratio {data['mfu_ratio']:.2f}x, throughput ratio {data['throughput_ratio']:.2f}x")
    for d in cols:
        if "search" in d:
            s = d["search"]
            con.print(f"{d['architecture']}: searched {s['considered']:,} configurations ({s['invalid']:,} invalid, "
                      f"{s['oom']:,} out of memory) in {s['seconds']:.1f} s; {s['notes'][0] if s['notes'] else ''}")
    con.print(f"collectives timed by: {data['comm_backend']}; GEMM model: {data['gemm_model']['source']}")
    con.print(f"MFU over the dense {data['precision']} peak ({data['peak_tflops_per_gpu']:.0f} TFLOP/s); attention "
              f"FLOPs: {data['conventions']['attention_flops']}; attention kernel: {data['attention_kernel']}")


def _stages(layers: list[int]) -> str:
    """``7, 8 x 14, 7`` for a list of layer counts."""
    out: list[str] = []
    i = 0
    while i < len(layers):
        j = i
        while j < len(layers) and layers[j] == layers[i]:
            j += 1
        out.append(f"{layers[i]}" if j - i == 1 else f"{layers[i]} x {j - i}")
        i = j
    return ", ".join(out)


def register(app: typer.Typer) -> None:
    app.command("mfu")(mfu_command)
