"""Extract step: a solved model's variable values -> a :class:`~solvers.orchestrator.placement.Placement`.

The placement is rebuilt from the model's aggregate decisions (which
straddles, how many pure rings of each ToR go where, which item sizes share
a group) and then accounted exactly by :mod:`solvers.orchestrator.traffic`,
so a reported ratio never depends on the model being right: tests compare
the two.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from solvers.orchestrator.built import BuiltModel
from solvers.orchestrator.placement import PlacedInstance, Placement


def _on(v) -> bool:
    return v.varValue is not None and round(v.varValue) == 1


def _ring_store(blocks, splits):
    """All rings the decision forms: straddles, then pure rings block by block (line order)."""
    rings: list[tuple[int, ...]] = []
    straddle_idx = {}
    for b in sorted(splits):
        straddle_idx[b] = len(rings)
        rings.append(blocks.straddle[b][splits[b]])
    pure_idx: dict[int, list[int]] = {}
    for t in range(blocks.T):
        lb, rb = blocks.left[t], blocks.right[t]
        xl = splits.get(lb, 0) if lb is not None else 0
        xr = splits.get(rb, 0) if rb is not None else 0
        pr = blocks.pure_rings(t, xl, xr)
        pure_idx[t] = list(range(len(rings), len(rings) + len(pr)))
        rings.extend(pr)
    return rings, straddle_idx, pure_idx


def ring_store_and_taker(blocks, splits):
    """(rings, straddle index per boundary, ``pop(t, n)``: the next ``n`` pure rings of ToR ``t``)."""
    rings, straddle_idx, pure_idx = _ring_store(blocks, splits)
    take = {t: list(pure_idx[t]) for t in range(blocks.T)}

    def pop(t, n):
        out, take[t] = take[t][:n], take[t][n:]
        if len(out) < n:
            raise RuntimeError(f"model asks for {n} pure rings of ToR {t}, only {len(out)} fit")
        return out

    return rings, straddle_idx, pop


def walk_groups(blocks, choices, straddle_idx, pop, dps: list[int], job_of, pure, emitted):
    """The groups and pooled items a solved block model forms, ToR by ToR along the line.

    Parameters
    ----------
    choices : list of _Choice
        :func:`chosen_options` of the model.
    straddle_idx, pop
        :func:`ring_store_and_taker` of the model's splits.
    dps : list of int
        Rings per DP group of each job (one job: ``[D]``).
    job_of : callable
        Boundary state -> the job its group belongs to (one job: always 0).
    pure, emitted : callable
        ``pure(t, j)``: whole groups of job ``j`` in ToR ``t``; ``emitted(t, j, v)``: its items of ``v`` rings.

    Returns
    -------
    groups : list of (job, list of ring index)
    by_size : dict
        (job, v) -> the items of ``v`` rings, for :func:`mixed_groups`.
    """
    T = blocks.T
    groups: list[tuple[int, list[int]]] = []
    by_size: dict[tuple[int, int], list[list[int]]] = defaultdict(list)
    open_item: dict[int, list[int]] = {}  # boundary -> rings of the straddle item crossing it
    order = list(range(T))
    pre = None  # a ToR whose outgoing item is opened before the walk (closed lines with an item at every boundary)
    if blocks.closed:  # start after a ToR whose right state is not an open item: chains never wrap fully
        first = next((t for t, a in enumerate(choices) if a.sout[0] != "G"), None)
        if first is None:
            # every boundary carries a group item (each ToR closes one and opens the next: found by brute force on
            # a 5-ToR circle): open one that is not a chain first; its rings are its own ToR's, so nothing it
            # needs comes from the walk (an item never chains round all T > D boundaries)
            first = pre = next(t for t, a in enumerate(choices) if not a.chain)
            rb = blocks.right[pre]
            open_item[rb] = [straddle_idx[rb]] + pop(pre, choices[pre].att_out)
        order = [(first + 1 + i) % T for i in range(T)]
    for t in order:
        a = choices[t]
        lb, rb = blocks.left[t], blocks.right[t]
        ji, jo = job_of(a.sin), job_of(a.sout)
        if a.sin[0] == "R":
            groups.append((ji, [straddle_idx[lb]] + pop(t, dps[ji] - 1)))
        if a.sin[0] == "A":
            groups.append((ji, [straddle_idx[lb], straddle_idx[rb]] + pop(t, dps[ji] - 2)))
        if a.sout[0] == "L":
            groups.append((jo, [straddle_idx[rb]] + pop(t, dps[jo] - 1)))
        if a.sin[0] == "G":
            item = open_item.pop(lb) + pop(t, a.att_in)
            if a.chain:
                open_item[rb] = item + [straddle_idx[rb]]
            elif len(item) == dps[ji]:
                groups.append((ji, item))
            else:
                by_size[ji, len(item)].append(item)
        if a.sout[0] == "G" and not a.chain and t != pre:
            open_item[rb] = [straddle_idx[rb]] + pop(t, a.att_out)
        for j, D in enumerate(dps):
            for _ in range(pure(t, j)):
                groups.append((j, pop(t, D)))
            for v in range(1, D):
                for _ in range(emitted(t, j, v)):
                    by_size[j, v].append(pop(t, v))
    if open_item:
        raise RuntimeError(f"straddle items left open at boundaries {sorted(open_item)}")
    return groups, by_size


def mixed_groups(flow: dict, by_size: dict, D: int) -> list[list[int]]:
    """The arc-flow decomposition: each path 0 -> ``D`` of ``flow[(a0, v)]`` arcs is one mixed group.

    ``by_size[v]``: the items of ``v`` rings formed (consumed).
    """
    groups = []
    flow = dict(flow)
    while any(f > 0 for (u, _), f in flow.items() if u == 0):
        a0, members = 0, []
        while a0 < D:
            arc = next(((u, v) for (u, v), f in flow.items() if u == a0 and f > 0), None)
            if arc is None:
                raise RuntimeError("arc flow does not reach D")
            flow[arc] -= 1
            if not by_size[arc[1]]:
                raise RuntimeError(f"arc flow wants an item of {arc[1]} rings that the model did not form")
            members += by_size[arc[1]].pop(0)
            a0 += arc[1]
        groups.append(members)
    return groups


@dataclass(frozen=True)
class _Choice:
    """What one ToR decided: the state on each side, attachments, chain."""

    sin: tuple
    sout: tuple
    att_in: int
    att_out: int
    chain: bool
    xr: int


def chosen_options(model: BuiltModel) -> list[_Choice]:
    """Per ToR, its chosen left and right options merged into one :class:`_Choice`."""
    opts = model.meta["options"]
    out = []
    for t in range(len(opts)):
        pick = [op for i, op in enumerate(opts[t]) if _on(model.var["opt"][(t, i)])]
        left = [op for op in pick if op.part != "out"]
        right = [op for op in pick if op.part != "in"]
        if len(left) != 1 or len(right) != 1:
            raise RuntimeError(f"ToR {t}: {len(left)} left and {len(right)} right choices")
        lo, ro = left[0], right[0]
        out.append(_Choice(lo.sin, ro.sout, lo.att_in, ro.att_out, lo.chain, ro.xr or 0))
    return out


def extract_blocks(model: BuiltModel) -> Placement:
    """Placement of a solved ``blocks`` or ``blocks-single`` model (one job, PP = 1)."""
    blocks = model.data
    D = model.meta["D"]
    T = blocks.T
    if model.kind == "blocks-single":
        splits = {b: x for (b, x), v in model.var["s"].items() if _on(v)}
    else:
        choices = chosen_options(model)
        splits = {blocks.right[t]: a.xr for t, a in enumerate(choices) if a.xr}
    rings, straddle_idx, pop = ring_store_and_taker(blocks, splits)

    if model.kind == "blocks-single":
        members = [straddle_idx[b] for b in sorted(straddle_idx)]
        for t in range(T):
            members += pop(t, model.ivalue("r", t))
        return _placement(rings, [[members]])

    tagged, items = walk_groups(blocks, choices, straddle_idx, pop, [D], lambda state: 0,
                                lambda t, j: model.ivalue("p", t), lambda t, j, v: model.ivalue("e", (t, v)))
    groups = [g for _, g in tagged]
    by_size = {v: items[0, v] for v in range(1, D)}
    groups += mixed_groups({k: model.ivalue("F", k) for k in model.var["F"]}, by_size, D)
    left = sum(len(x) for x in by_size.values())
    if left:
        raise RuntimeError(f"{left} items formed but not packed")
    return _placement(rings, [[g] for g in groups])


def _placement(rings, instances_stages) -> Placement:
    used = {r for st in instances_stages for stage in st for r in stage}
    inst = tuple(PlacedInstance(0, tuple(tuple(stage) for stage in st)) for st in instances_stages)
    return Placement(tuple(rings), inst, tuple(r for r in range(len(rings)) if r not in used))


def extract_explicit(model: BuiltModel) -> Placement:
    """Placement of a solved ``explicit`` model (any ToR map, any jobs, PP >= 1)."""
    cands = model.data["candidates"]
    jobs = model.data["jobs"]
    chosen = [i for i, v in model.var["x"].items() if v.varValue is not None and round(v.varValue) == 1]
    rings = [cands[i].slots for i in chosen]
    pool: dict[tuple, list[int]] = defaultdict(list)
    for r, i in enumerate(chosen):
        pool[cands[i].sig].append(r)
    sigs = model.data["sigs"]
    instances = []
    for (j, sig), h in model.var["h"].items():
        for _ in range(int(round(h.varValue or 0))):
            D, P = jobs[j].dp, jobs[j].pp
            take = [pool[sigs[sig]].pop(0) for _ in range(D * P)]
            instances.append(PlacedInstance(j, tuple(tuple(take[p * D:(p + 1) * D]) for p in range(P))))
    for (j, i) in sorted(model.var["y"]):
        if round(model.var["y"][(j, i)].varValue or 0) != 1:
            continue
        D, P = jobs[j].dp, jobs[j].pp
        stage_rings: list[dict[int, list[int]]] = []
        for p in range(P):
            got: dict[int, list[int]] = defaultdict(list)
            for q in range(len(sigs)):
                v = model.var["n"].get((j, i, p, q))
                for _ in range(int(round(v.varValue or 0)) if v is not None else 0):
                    got[q].append(pool[sigs[q]].pop(0))
            stage_rings.append(got)
        stages = _pair_stages(model, j, i, P, D, stage_rings)
        instances.append(PlacedInstance(j, stages))
    used = {r for inst in instances for r in inst.rings}
    return Placement(tuple(rings), tuple(instances), tuple(r for r in range(len(rings)) if r not in used))


def _pair_stages(model: BuiltModel, j: int, i: int, P: int, D: int, stage_rings) -> tuple:
    """Order each stage's rings so that replica r of stage p feeds replica r of stage p + 1 as the PP flows say."""
    if P == 1:
        return (tuple(r for q in sorted(stage_rings[0]) for r in stage_rings[0][q]),)
    # follow the pair flows stage by stage: pipelines are chains of (signature) pairs
    pipes = [[r] for q in sorted(stage_rings[0]) for r in stage_rings[0][q]]
    for p in range(P - 1):
        nxt = {q: list(rs) for q, rs in stage_rings[p + 1].items()}
        flows = {(a, b): int(round(v.varValue or 0)) for (jj, ii, pp, a, b), v in model.var["q"].items()
                 if (jj, ii, pp) == (j, i, p)}
        sig_of_ring = {r: q for q, rs in stage_rings[p].items() for r in rs}
        rest = []
        for pipe in pipes:
            a = sig_of_ring[pipe[-1]]
            partner = next((b for (aa, b), f in flows.items() if aa == a and f > 0 and nxt.get(b)), None)
            if partner is None:
                rest.append(pipe)
                continue
            flows[(a, partner)] -= 1
            pipe.append(nxt[partner].pop(0))
        leftovers = [r for q in sorted(nxt) for r in nxt[q]]
        for pipe, r in zip(rest, leftovers):
            pipe.append(r)
    return tuple(tuple(pipe[p] for pipe in pipes) for p in range(P))
