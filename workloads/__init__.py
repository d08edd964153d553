"""Training workloads on a Fabric: model specs, parallelism, FLOPs, memory, step time, MFU, search.

Modules, one job each (imports point down: workloads -> solvers -> fabric):

``models``       :class:`~workloads.models.ModelSpec`, presets (``workloads/presets/*.yaml``) and model files
``flops``        per-layer matmuls; model FLOPs (MFU) and hardware FLOPs (with recomputation)
``parallelism``  :class:`~workloads.parallelism.Parallelism` and :func:`~workloads.parallelism.validate`
``memory``       peak HBM per GPU (weights, gradients, optimizer, activations)
``compute``      achieved-GEMM-efficiency model (calibrated), memory-bound kernels, layer times
``comm``         collective times: the flow simulator (or an analytic fallback), cached per layout
``placement``    ranks onto GPUs; TP/CP/DP/EP/PP groups; k-hop rings lit per TP group
``step``         :class:`~workloads.step.StepModel`: step time, MFU, HFU, memory, breakdown
``search``       the best parallelism of a model on a Fabric
``validation``   predictions of the Megatron-LM weak-scaling table (narayanan2021-table1.csv)

Typical use::

    from topologies import build
    from workloads.models import load_model
    from workloads.parallelism import Parallelism
    from workloads.step import StepModel

    sm = StepModel(build("nvl-72", 576, {"gpu": "gpu_b200"}), load_model("llama3-70b"))
    r = sm.evaluate(Parallelism(tp=8, pp=1, dp=72, micro_batch=1, global_batch=576, sequence_parallel=True))
    r.step_time_s, r.mfu, r.breakdown
"""
