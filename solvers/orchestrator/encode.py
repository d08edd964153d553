"""A placement -> values of a built model's decision variables (the warm start, and a test of the model's costs).

Only the integer decisions are given; the solver completes the auxiliary
variables (weights, activities) itself (a *partial* start).
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pulp

from solvers.orchestrator.built import BuiltModel
from solvers.orchestrator.placement import Placement


def _block_of(blocks) -> dict[int, int]:
    return {int(p) % blocks.n: t for t in range(blocks.T) for p in blocks.healthy[t]}


def _classify(ring, blocks, where) -> tuple[str, int, int]:
    """('pure', t, 0) or ('straddle', boundary, slots left of it)."""
    ts = [where[u] for u in ring]
    if all(t == ts[0] for t in ts):
        return "pure", ts[0], 0
    left = ts[0]
    split = sum(1 for t in ts if t == left)
    return "straddle", left, split  # boundary b joins blocks b and b + 1: b == left block


def _components(stage, kinds, T):
    """Items of one DP group: connected components of "shares a ToR"."""
    parent = {r: r for r in stage}

    def find(r):
        while parent[r] != r:
            parent[r] = parent[parent[r]]
            r = parent[r]
        return r

    owner: dict[int, int] = {}
    for r in stage:
        kind, t, _ = kinds[r]
        for u in ({t} if kind == "pure" else {t, (t + 1) % T}):
            if u in owner:
                parent[find(r)] = find(owner[u])
            else:
                owner[u] = r
    comps = defaultdict(list)
    for r in stage:
        comps[find(r)].append(r)
    return list(comps.values())


def encode_blocks(model: BuiltModel, placement: Placement) -> dict[pulp.LpVariable, float]:
    """Decision values of a ``blocks`` / ``blocks-single`` model that reproduce ``placement`` (one job, PP = 1).

    Returns an empty dict when the placement is not one the model can express.
    """
    # long: one pass per variable family of the block model (s, pair, opt, p, e, F), each mirroring its
    # constraint in model_blocks.py in the same order, so the two can be read side by side
    blocks = model.data
    several = model.kind == "blocks-jobs"  # solvers/orchestrator/model_jobs.py: states and group families per job
    dps = model.meta["dps"] if several else [model.meta["D"]]
    T = blocks.T
    where = _block_of(blocks)
    V = model.var
    kinds = {r: _classify(placement.rings[r], blocks, where) for r in placement.used_rings}
    split = {b: x for kind, b, x in kinds.values() if kind == "straddle"}
    start: dict[pulp.LpVariable, float] = {}
    if model.kind == "blocks-single":
        for b, x in split.items():
            start[V["s"][(b, x)]] = 1
        cnt = Counter(b for kind, b, _ in kinds.values() if kind == "pure")
        for t in range(T):
            start[V["r"][t]] = cnt.get(t, 0)
            start[V["rho"][t]] = 1 if cnt.get(t, 0) else 0
        return start
    state = {b: ("N",) for b in range(blocks.n_boundaries)}
    att_in, att_out, chain = Counter(), Counter(), set()
    p, e, arcs_f = Counter(), Counter(), Counter()
    for inst in placement.instances:
        j = inst.job if several else 0
        tg = (lambda st, j=j: st + (j,)) if several else (lambda st: st)  # noqa: E731
        comps = _components(inst.stages[0], kinds, T)
        sizes = []
        for members in comps:
            strad = [kinds[r][1] for r in members if kinds[r][0] == "straddle"]
            pure = Counter(kinds[r][1] for r in members if kinds[r][0] == "pure")
            if not strad:
                t, v = next(iter(pure.items()))
                if len(comps) == 1:
                    p[t, j] += 1
                else:
                    e[(t, j, v)] += 1
                    sizes.append(v)
                continue
            sset = set(strad)
            first = next(b for b in strad if blocks.left[b] is None or blocks.left[b] not in sset)
            seq = [first]
            while blocks.right[(seq[-1] + 1) % T] in sset and len(seq) < len(sset):
                seq.append(blocks.right[(seq[-1] + 1) % T])
            alone = len(comps) == 1
            b0 = seq[0]
            if alone and len(seq) == 1 and len(pure) == 1:
                t = next(iter(pure))
                state[b0] = tg(("L", split[b0]) if t == b0 else ("R", split[b0]))
                continue
            if (alone and len(seq) == 2 and set(pure) <= {(b0 + 1) % T} and split[b0] < split[seq[1]]):
                state[b0], state[seq[1]] = tg(("A", split[b0])), tg(("B", split[seq[1]]))
                continue
            sigma = 1 + pure.get(b0, 0)  # the first straddle plus rings of its left ToR
            att_out[b0] += pure.get(b0, 0)
            state[b0] = tg(("G", split[b0], sigma))
            for prev, b in zip(seq, seq[1:]):
                mid = (prev + 1) % T
                sigma += pure.get(mid, 0) + 1
                att_in[mid] += pure.get(mid, 0)
                chain.add(mid)
                state[b] = tg(("G", split[b], sigma))
            end = (seq[-1] + 1) % T
            att_in[end] += pure.get(end, 0)
            if not alone:
                sizes.append(len(members))
        if len(comps) > 1:
            a0 = 0
            for v in sorted(sizes, reverse=True):
                arcs_f[(j, a0, v) if several else (a0, v)] += 1
                a0 += v
    opts = model.meta["options"]
    pair_vars = defaultdict(list)
    for key, v in V["pair"].items():
        pair_vars[key[0]].append((key[1:], v))
    for t in range(T):
        lb, rb = blocks.left[t], blocks.right[t]
        sin = state[lb] if lb is not None else ("N",)
        sout = state[rb] if rb is not None else ("N",)
        if t in chain or sin[0] == "A":
            keys = {("joint", sin, sout, att_in.get(t, 0))}
        else:
            keys = {("in", sin, None, att_in.get(t, 0)), ("out", None, sout, att_out.get(t, 0))}
        want = {i for i, op in enumerate(opts[t])
                if (op.part, op.sin, op.sout, op.att_in if op.part != "out" else op.att_out) in keys}
        if len(want) != len(keys):
            return {}
        for i in range(len(opts[t])):
            start[V["opt"][(t, i)]] = 1 if i in want else 0
        chosen = [opts[t][i] for i in want]
        li = [op for op in chosen if op.part == "in"]
        ro = [op for op in chosen if op.part == "out"]
        cell = (li[0].xl, li[0].cons, ro[0].xr, ro[0].cons) if li and ro else None
        for key, v in pair_vars[t]:
            start[v] = 1 if key == cell else 0
        for j, D in enumerate(dps):
            start[V["p"][(t, j) if several else t]] = p.get((t, j), 0)
            for v in range(1, D):
                start[V["e"][(t, j, v) if several else (t, v)]] = e.get((t, j, v), 0)
    for key, v in V["F"].items():
        start[v] = arcs_f.get(key, 0)
    return start


def encode_explicit(model: BuiltModel, placement: Placement) -> dict[pulp.LpVariable, float]:
    """Decision values of an ``explicit`` model that reproduce ``placement`` as closely as its candidates allow.

    A ring is matched to the candidate with the same first slot and signature
    (the shortest such span, so non-crossing still holds).
    """
    data = model.data
    cands, sig_ix = data["candidates"], data["sig_ix"]
    by_key = {(c.slots[0], c.sig): r for r, c in enumerate(cands)}
    V = model.var
    start: dict[pulp.LpVariable, float] = {v: 0 for v in V["x"].values()}
    sig_of_ring = {}
    for ring_i, ring in enumerate(placement.rings):
        sig = tuple(_sig_of(model, ring))
        r = by_key.get((ring[0], sig))
        if r is None:
            return {}  # not representable: no warm start
        sig_of_ring[ring_i] = sig_ix[sig]
        if ring_i in set(placement.used_rings):
            start[V["x"][r]] = 1
    slot = Counter()
    for inst in placement.instances:
        j = inst.job
        i = slot[j]
        slot[j] += 1
        if (j, i) not in V["y"]:
            return {}
        start[V["y"][(j, i)]] = 1
        for p, stage in enumerate(inst.stages):
            cnt = Counter(sig_of_ring[r] for r in stage)
            for q in range(len(data["sigs"])):
                start[V["n"][(j, i, p, q)]] = cnt.get(q, 0)
    for v in V["h"].values():
        start[v] = 0
    return start


def _sig_of(model: BuiltModel, ring) -> list[int]:
    tor = model.meta.get("tor")
    return [int(tor[u]) for u in ring]
