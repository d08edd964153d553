"""The block ILP for several jobs of different DP sizes (one TP size, PP = 1), and its extraction.

:mod:`~solvers.orchestrator.model_blocks` is exact for one job because a
DP group's cost is the sum of its items' weights (or an alone group's
price) and everything but the packing of items into groups is local to a
ToR.  Neither argument uses that all groups have one size: with several
jobs every group still belongs to one job ``j``, of ``D_j`` rings, costing
``w_j`` bytes per slot crossing.  So the same model with

* each ToR's options those of every job (:func:`~solvers.orchestrator.
  model_blocks.tor_options` at ``D_j``), their boundary states tagged with
  ``j`` (a straddle item or an alone group is one job's; "no straddle" is
  shared), costs scaled by ``w_j``;
* pure groups ``p[t, j]`` and pieces ``e[t, j, v]`` per job, one capacity row
  per ToR over all of them;
* one arc-flow packing per job over ``0 .. D_j`` and its group count ``C_j``

is exact for the request on exact ToR blocks (no ring spans three), with a
closed line needing more ToRs than the largest ``D_j`` (as one job).  Tests:
against brute force over every ring set and every dealing of rings into the
jobs' groups (``tests/solvers/test_orchestrator_several_jobs.py``).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import pulp

from solvers.orchestrator.built import BuiltModel
from solvers.orchestrator.extract import chosen_options, mixed_groups, ring_store_and_taker, walk_groups
from solvers.orchestrator.model_blocks import con, lin, pool_rows, tor_choice_rows, tor_options
from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.rings import Blocks

NONE = ("N",)


def usable(blocks: Blocks | None, dps: list[int], allow_short: bool = False) -> bool:
    """Whether the model is exact for these DP sizes on ``blocks`` (module docstring); with ``allow_short``,
    whether it is a restriction with a three-block view to bound it (short blocks, :mod:`~solvers.orchestrator.
    jobs_run`)."""
    return (blocks is not None and (blocks.exact or allow_short) and blocks.T > 1
            and not (blocks.closed and blocks.T <= max(dps)))


def _tag(state, j: int):
    return state if state is None or state == NONE else tuple(state) + (j,)


def job_options(blocks: Blocks, t: int, dps: list[int], keep: set | None = None, options_of=tor_options):
    """ToR ``t``'s options for every job, states tagged by job; "no straddle" options once. (options, job of each)

    ``keep`` (tagged options), when given, keeps only those and the "no straddle" ones: a restricted model.
    ``options_of(blocks, t, D)`` lists one job's options (the three-block view's for a bound on short blocks).
    """
    out, of = [], []
    for j, D in enumerate(dps):
        for o in options_of(blocks, t, D):
            shared = (o.sin == NONE or o.sout == NONE) and o.part != "joint"
            if j and shared:
                continue  # the shared "no straddle" side: listed with job 0 only
            o = replace(o, sin=_tag(o.sin, j), sout=_tag(o.sout, j))
            if keep is None or shared or o in keep:
                out.append(o)
                of.append(j)
    return out, of


def used_options(model: BuiltModel, start: dict) -> list[set]:
    """Per ToR, the tagged options a start (:func:`~solvers.orchestrator.encode.encode_blocks`) picks."""
    opts = model.meta["options"]
    return [{opts[t][i] for i in range(len(opts[t])) if start.get(model.var["opt"][(t, i)], 0) > 0.5}
            for t in range(len(opts))]


def path_options(paths_of_job: list[list], T: int) -> list[set]:
    """Per ToR, the tagged options of each job's line-DP paths (:class:`~solvers.orchestrator.line_bound.LineBound`)."""
    keep: list[set] = [set() for _ in range(T)]
    for j, paths in enumerate(paths_of_job):
        for p in paths:
            for t, idx in enumerate(p.choice):
                keep[t].update(replace(o, sin=_tag(o.sin, j), sout=_tag(o.sout, j))
                               for o in (p.options[t][i] for i in idx))
    return keep


def build_jobs_model(blocks: Blocks, dps: list[int], counts: list[int], weights: list[float], unit_bytes: float,
                     budget=None, keep: list[set] | None = None, options_of=tor_options) -> BuiltModel:
    """The model of the module docstring: jobs of ``dps`` rings per group, ``counts`` groups, ``weights`` per crossing.

    ``keep``: per ToR, the tagged options to keep (:func:`used_options`, :func:`path_options`): a restricted
    model, whose solutions are placements (its optimum and bound are not the request's).  ``options_of``:
    :func:`job_options`'s; on the three-block view of short blocks (:func:`~solvers.orchestrator.three_blocks.
    bounding_view`) the model holds every placement, so its optimum (and its LP's) is a lower bound, but its
    solutions are not placements (a pass-through is no ring of the block extraction).
    """
    # long: the block model's rows (model_blocks.build_blocks_model) with a job index on every group-side family
    m, T, J = blocks.m, blocks.T, len(dps)
    prob = pulp.LpProblem("orchestrate_jobs_blocks", pulp.LpMinimize)
    V: dict[str, dict] = {k: {} for k in ("pair", "opt", "p", "e", "F")}
    emitted: dict[tuple, list] = defaultdict(list)
    alone, cost = defaultdict(list), []
    sout_of, sin_of, opts, jobs_of = [], [], [], []
    for t in range(T):
        if budget is not None:
            budget.check()
        ops, of = job_options(blocks, t, dps, None if keep is None else keep[t], options_of)
        opts.append(ops)
        jobs_of.append(of)
        ov = tor_choice_rows(prob, V, blocks, t, ops)
        for op, v, j in zip(ops, ov, of):
            if op.emit:
                emitted[j, op.emit].append((v, 1))
            if op.alone:
                alone[j].append((v, op.alone))
            if op.cost:
                cost.append((v, op.cost * weights[j]))
        free = ov.free
        sout_of.append(ov.sout)
        sin_of.append(ov.sin)
        fmax = blocks.cap[t].get((0, 0), 0)
        use = []
        for j, D in enumerate(dps):
            p = V["p"][(t, j)] = pulp.LpVariable(f"p_{t}_{j}", 0, fmax // D, pulp.LpInteger)
            use.append((p, D))
            con(prob, [(p, 1)] + [(v, -(r // D)) for r, v in free], "<=", 0, f"whole_groups_{t}_{j}")
            for s in range(1, D):
                e = V["e"][(t, j, s)] = pulp.LpVariable(f"e_{t}_{j}_{s}", 0, fmax // s, pulp.LpInteger)
                use.append((e, s))
                emitted[j, s].append((e, 1))
                cost.append((e, m * weights[j]))
        con(prob, use + [(v, -r) for r, v in free], "<=", 0, f"cap_{t}")
    for b in range(blocks.n_boundaries):
        if budget is not None:  # every family is checked: at 4,096 nodes these rows ran 3.7 s past a 58 s limit
            budget.check()
        tl, tr = b, (b + 1) % T
        for st in sorted(set(sout_of[tl]) | set(sin_of[tr])):
            if st == NONE:
                continue
            terms = sout_of[tl].get(st, []) + [(v, -1) for v, _ in sin_of[tr].get(st, [])]
            con(prob, terms, "==", 0, f"state_{b}_{'_'.join(map(str, st))}")
    for j, (D, C) in enumerate(zip(dps, counts)):
        if budget is not None:
            budget.check()
        mixed = pool_rows(prob, V, D, C, {v: emitted[j, v] for v in range(1, D)}, job=j)
        con(prob, [(V["p"][(t, j)], 1) for t in range(T)] + mixed + alone[j], "==", C, f"groups_{j}")
    if budget is not None:
        budget.check()
    prob.setObjective(lin(cost))
    step = 1.0 if len(set(weights)) == 1 and float(weights[0]).is_integer() else None
    return BuiltModel("blocks-jobs", prob, V, unit_bytes, step, blocks,
                      {"dps": dps, "counts": counts, "options": opts, "jobs_of": jobs_of})


def extract_jobs(model: BuiltModel) -> Placement:
    """Placement of a solved :func:`build_jobs_model` (:func:`~solvers.orchestrator.extract.walk_groups`, each
    group sized and numbered by the job its states carry; its mixed groups packed job by job)."""
    blocks, dps = model.data, model.meta["dps"]
    choices = chosen_options(model)
    splits = {blocks.right[t]: a.xr for t, a in enumerate(choices) if a.xr}
    rings, straddle_idx, pop = ring_store_and_taker(blocks, splits)

    # a tagged state's last element is its job
    groups, by_size = walk_groups(blocks, choices, straddle_idx, pop, dps, lambda state: state[-1],
                                  lambda t, j: model.ivalue("p", (t, j)), lambda t, j, v: model.ivalue("e", (t, j, v)))
    for j, D in enumerate(dps):
        flow = {(a0, v): model.ivalue("F", (jj, a0, v)) for (jj, a0, v) in model.var["F"] if jj == j}
        items = {v: by_size[j, v] for v in range(1, D)}
        groups += [(j, members) for members in mixed_groups(flow, items, D)]
    if any(by_size.values()):
        raise RuntimeError("items formed but not packed")
    used = {r for _, g in groups for r in g}
    inst = tuple(PlacedInstance(j, (tuple(g),)) for j, g in groups)
    return Placement(tuple(rings), inst, tuple(r for r in range(len(rings)) if r not in used))
