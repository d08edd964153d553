"""Disaggregated RL post-training on a Fabric: generation, weight sync and training phases.

One RL iteration (StreamRL, arXiv 2504.15930; OrchestrRL, arXiv 2601.01209)
runs on two pools of GPUs: a *generation* (rollout) pool that decodes
``samples`` responses, and a *training* pool that takes one or more optimizer
steps on them and then sends the new policy to the rollout pool (*weight
sync*).  Modules, one job each:

``config``      the RL parameters (pools, parallelism, batch, lengths), each default with its source
``lengths``     long-tailed output lengths (lognormal, seeded, or from a file)
``generation``  roofline decode and prefill per rollout replica, continuous batching
``weightsync``  trainer -> rollout transfer of the policy: bytes, broadcast and point-to-point schedules
``training``    the training phase: the MFU step model (:mod:`workloads.step`) on the trainer pool
``traffic``     flows of every phase and their pod-to-pod matrices
``network``     timing a set of flows: the flow simulator, or the labelled analytic bound
``pipeline``    synchronous vs one-step-asynchronous iteration, as epochs of concurrent phases
``iteration``   one design point: phase times, OCS circuits per epoch, samples/s, per dollar
"""

from workloads.rl.config import RLConfig, rl_params
from workloads.rl.iteration import RLResult, evaluate_rl

__all__ = ["RLConfig", "RLResult", "evaluate_rl", "rl_params"]
