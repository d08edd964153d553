"""The scalable, exact ILP for ToR blocks (:func:`solvers.orchestrator.rings.block_structure`), one job, PP = 1.

Objective unit: one *slot crossing*: a TP slot (node) of a DP group whose
all-reduce rings cross ``phi(T)`` ToR boundaries contributes ``phi(T)``
units; a unit is ``g x 2 (D - 1) / D x dp_bytes`` bytes
(:mod:`solvers.orchestrator.traffic`).  The first objective (GPUs in
complete groups) is met exactly by fixing the group count ``C`` to its
maximum beforehand: the two objectives are **lexicographic**, solved as one
ILP with ``C`` fixed, never as a weighted sum whose big weight would let the
solver's relative gap tolerance swallow the traffic term.

Why an aggregated model is exact
--------------------------------
Split the rings of a DP group into *items*: the connected components of
"shares a ToR".  In a group of two or more items every slot sees at least
two ToRs, so ``phi(T) = T`` and the group costs the sum over its items of
``w(item)`` = the slots each of the item's ToRs holds: **additive**, and
blind to which ToRs they are.  On ToR blocks an item is a *piece* (pure
rings of one ToR, ``w = m``) or a *straddle item*: a chain of straddling
rings at consecutive boundaries plus pure rings of the ToRs it touches
(*attachments*).  So the mixed groups are a bin packing of item sizes into
groups of exactly ``D`` rings, modelled exactly by an arc flow (paths
0 -> D, an arc per item).  A group of a single item is priced directly:
``sum_slots phi``; only three kinds are cheaper than ``w``: a straddle with
``D - 1`` pure rings of its left ToR (``A1L``) or of its right ToR
(``A1R``), and two straddles ``x1 < x2`` at consecutive boundaries with
``D - 2`` pure rings of the ToR between them (``A2``).  A model solution
maps to a placement of no larger cost (pieces of one ToR sharing a group
only merge), and a placement maps to the model at equal cost.

The line as a path
------------------
Everything but the packing is local, so the line is modelled as a path
through *boundary states* (the straddle at a boundary, its split and its
role: ``N`` none, ``L``/``R`` in an A1L/A1R group, ``A``/``B`` first/second
straddle of an A2 group, ``G`` in a straddle item with ``sigma`` rings so
far).  Every ToR picks one *option* for the state on its left and one for
the state on its right, or one *joint* option for both (a straddle item
continuing through it, an A2 group around it): ``opt[t, i]``, with flow
conservation of the states at every boundary.  An option carries its exact
cost, the pure rings it takes, the alone groups it completes and the item
it closes; ``pair[t, xl, cl, xr, cr]`` (the split and the pure rings taken
on each side; its marginals are the option choices, so it is integral when
they are) gives the ToR's pure capacity ``cap[t][xl, xr]`` and the whole
groups that still fit, exactly per combination.  There is no big-M term:
the LP relaxation is close to the convex hull of each ToR's choices, which
is what lets thousands of nodes solve to proven optimality (the earlier
big-M formulation of the same model stalled at a 46 % gap on 1,024 nodes).

Variables: ``opt[t, i]`` (binary), ``pair[...]`` (continuous), ``p[t]``
groups of D pure rings of ToR t (integer, cost 0), ``e[t, v]`` pieces of
v < D pure rings in mixed groups (integer, cost m), ``F[a, v]`` arc flow of
the packing (integer; arcs only from ring counts reachable with sizes >= v:
items sorted by size, a symmetry cut).

Exactness is tested against brute force (``tests/solvers/test_orchestrator_exact.py``).
Limits: ToR blocks of at least ``(m - 1) k`` nodes (no ring spans three
ToRs), one job, PP = 1, and on a closed line more ToRs than ``D`` (a chain
of straddle items cannot close around the circle); anything else goes to
:mod:`~solvers.orchestrator.model_explicit`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import pulp

from solvers.orchestrator.built import BuiltModel
from solvers.orchestrator.rings import Blocks


def _ge_sizes(D: int) -> dict[int, set[int]]:
    """For each item size v: the ring counts 0..D reachable with items of size >= v (arc-flow symmetry cut)."""
    out = {}
    for v in range(1, D):
        reach = {0}
        for a in range(D + 1):
            if a in reach:
                for u in range(v, D):
                    if a + u <= D:
                        reach.add(a + u)
        out[v] = reach
    return out


def alone_cost(m: int, rings_tors: list[tuple[int, ...]]) -> int:
    """Slot crossings of one DP group given each ring's ToR per slot: sum over slots of phi(distinct ToRs)."""
    total = 0
    for j in range(m):
        t = len({r[j] for r in rings_tors})
        total += t if t > 1 else 0
    return total


@dataclass(frozen=True)
class Option:
    """One choice of one ToR about the straddle on its left (``in``), on its right (``out``), or both (``joint``).

    ``sin``/``sout``: the boundary state it handles (None: the other side);
    ``xl``/``xr``: the splits it fixes; ``att_in``/``att_out``: pure rings it
    attaches to the straddle item coming in / going out (a chain counts them
    in ``att_in``); ``cons``: pure rings it takes; ``cost``: slot crossings it
    prices; ``alone``: groups it completes; ``emit``: size of the item it
    closes into the mixed-group pool (0: none).
    """

    part: str
    sin: tuple | None
    sout: tuple | None
    xl: int | None
    xr: int | None
    att_in: int
    att_out: int
    chain: bool
    cons: int
    cost: int
    alone: int
    emit: int


def _splits(blocks: Blocks, b) -> list[int]:
    return [] if b is None else sorted(blocks.straddle[b])


def tor_options(blocks: Blocks, t: int, D: int) -> list[Option]:
    """Every choice of ToR ``t`` (module docstring)."""
    m = blocks.m
    P, Q, S = -1, 0, 1  # symbolic ToRs (left neighbour, this one, right neighbour) to price alone groups
    lb, rb = blocks.left[t], blocks.right[t]
    fmax = blocks.cap[t].get((0, 0), 0)  # an option taking more pure rings than this never fits (skipped early)
    out = [Option("in", ("N",), None, 0, None, 0, 0, False, 0, 0, 0, 0)]
    for x in _splits(blocks, lb):
        out += [Option("in", ("L", x), None, x, None, 0, 0, False, 0, 0, 0, 0),
                Option("in", ("B", x), None, x, None, 0, 0, False, 0, 0, 0, 0)]
        a1r = alone_cost(m, [(P,) * x + (Q,) * (m - x)] + [(Q,) * m] * (D - 1))
        out.append(Option("in", ("R", x), None, x, None, 0, 0, False, D - 1, a1r, 1, 0))
        for sg in range(1, D + 1):
            for a in range(0, min(D - sg, fmax) + 1):  # the item coming in ends here with a more rings of this ToR
                v = sg + a
                out.append(Option("in", ("G", x, sg), None, x, None, a, 0, False, a, m if a else m - x,
                                  int(v == D), 0 if v == D else v))
    out.append(Option("out", None, ("N",), None, 0, 0, 0, False, 0, 0, 0, 0))
    for x in _splits(blocks, rb):
        out += [Option("out", None, ("R", x), None, x, 0, 0, False, 0, 0, 0, 0),
                Option("out", None, ("A", x), None, x, 0, 0, False, 0, 0, 0, 0)]
        a1l = alone_cost(m, [(Q,) * x + (S,) * (m - x)] + [(Q,) * m] * (D - 1))
        out.append(Option("out", None, ("L", x), None, x, 0, 0, False, D - 1, a1l, 1, 0))
        for sg in range(1, min(D - 1, fmax + 1) + 1):  # an item starts at the right boundary with sg - 1 rings
            a = sg - 1
            out.append(Option("out", None, ("G", x, sg), None, x, 0, a, False, a, m if a else x, 0, 0))
    for xl in _splits(blocks, lb):
        for xr in _splits(blocks, rb):
            if (xl, xr) not in blocks.cap[t]:
                continue
            for sg in range(1, D):
                for a in range(0, min(D - sg - 1, fmax) + 1):  # the item coming in continues into the right straddle
                    union = m if a else m - max(0, xl - xr)
                    out.append(Option("joint", ("G", xl, sg), ("G", xr, sg + a + 1), xl, xr, a, 0, True, a, union,
                                      0, 0))
            if xl < xr and lb != rb:
                a2 = alone_cost(m, [(P,) * xl + (Q,) * (m - xl), (Q,) * xr + (S,) * (m - xr)]
                                + [(Q,) * m] * (D - 2))
                out.append(Option("joint", ("A", xl), ("B", xr), xl, xr, 0, 0, False, D - 2, a2, 1, 0))
    return [o for o in out if o.cons <= fmax]


def lin(terms) -> pulp.LpAffineExpression:
    """A linear expression from (variable, coefficient) pairs; repeated variables add up (fast path for big models)."""
    acc: dict = {}
    for v, c in terms:
        acc[v] = acc.get(v, 0) + c
    return pulp.LpAffineExpression(acc)


def con(prob: pulp.LpProblem, terms, sense: str, rhs: float, name: str) -> None:
    """Add ``sum(terms) <sense> rhs`` (sense one of ``<=``, ``>=``, ``==``)."""
    s = {"<=": pulp.LpConstraintLE, ">=": pulp.LpConstraintGE, "==": pulp.LpConstraintEQ}[sense]
    prob.addConstraint(pulp.LpConstraint(lin(terms), s, name, rhs))


class ToRChoice(list):
    """The option variables of one ToR (a list, in option order) and the rows they enter by side.

    Attributes
    ----------
    sout, sin : dict
        Boundary state -> [(variable, 1)] of the options that leave it on the right / find it on the left.
    free : list of (int, variable)
        (pure rings left for whole groups, variable) of the joint options and of the side pairs.
    """

    sout: dict
    sin: dict
    free: list


def tor_choice_rows(prob: pulp.LpProblem, V: dict, blocks: Blocks, t: int, ops: list[Option]) -> ToRChoice:
    """ToR ``t``'s option variables, its left/right choice rows and its side-pair rows (module docstring).

    Shared by the block model and the several-job model (:mod:`solvers.orchestrator.model_jobs`), which add
    their own group-side rows (emitted sizes, lone rings, costs) over the returned variables.
    """
    ov = ToRChoice(pulp.LpVariable(f"opt_{t}_{i}", 0, 1, pulp.LpBinary) for i in range(len(ops)))
    left, right, so, si = [], [], defaultdict(list), defaultdict(list)
    by_l, by_r, free = defaultdict(list), defaultdict(list), []
    for i, (op, v) in enumerate(zip(ops, ov)):
        V["opt"][(t, i)] = v
        if op.part != "out":
            left.append((v, 1))
            si[op.sin].append((v, 1))
        if op.part != "in":
            right.append((v, 1))
            so[op.sout].append((v, 1))
        if op.part == "in":
            by_l[op.xl, op.cons].append((v, 1))
        elif op.part == "out":
            by_r[op.xr, op.cons].append((v, 1))
        else:
            free.append((blocks.cap[t][(op.xl, op.xr)] - op.cons, v))
    con(prob, left, "==", 1, f"left_choice_{t}")
    con(prob, right, "==", 1, f"right_choice_{t}")
    # pair[t, xl, cl, xr, cr]: the ToR's split and pure rings taken on each side.  Its marginals are the
    # option choices, so for integer options it is the one cell where they meet (continuous is enough);
    # it makes the capacity and the whole-group count exact per combination, which tightens the LP a lot.
    pair_l, pair_r = defaultdict(list), defaultdict(list)
    for xl, cl in sorted(by_l):
        for xr, cr in sorted(by_r):
            f = blocks.cap[t].get((xl, xr))
            if f is not None and cl + cr <= f:
                v = V["pair"][(t, xl, cl, xr, cr)] = pulp.LpVariable(f"pair_{t}_{xl}_{cl}_{xr}_{cr}", 0, 1)
                pair_l[xl, cl].append((v, 1))
                pair_r[xr, cr].append((v, 1))
                free.append((f - cl - cr, v))
    for key, terms in by_l.items():
        con(prob, pair_l[key] + [(v, -1) for v, _ in terms], "==", 0, f"pair_l_{t}_{key[0]}_{key[1]}")
    for key, terms in by_r.items():
        con(prob, pair_r[key] + [(v, -1) for v, _ in terms], "==", 0, f"pair_r_{t}_{key[0]}_{key[1]}")
    ov.sout, ov.sin, ov.free = so, si, free
    return ov


def pool_rows(prob: pulp.LpProblem, V: dict, D: int, C: int, emitted: dict, job: int | None = None) -> list:
    """The packing of pooled items into mixed groups of ``D`` (module docstring): ``F`` arcs, flow rows, item rows.

    ``emitted[v]``: [(variable, count)] of the items of size ``v``.  ``job`` tags names and keys (the
    several-job model).  Returns the terms counting mixed groups (the arcs leaving 0).
    """
    key = () if job is None else (job,)
    tag = "" if job is None else f"{job}_"
    reach = _ge_sizes(D)
    F = {}
    for v in range(1, D):
        for a0 in sorted(reach[v]):
            if a0 + v <= D:
                F[a0, v] = V["F"][key + (a0, v)] = pulp.LpVariable(f"F_{tag}{a0}_{v}", 0, C, pulp.LpInteger)
    for a0 in range(1, D):
        terms = [(F[a0 - v, v], 1) for v in range(1, D) if (a0 - v, v) in F]
        terms += [(F[a0, v], -1) for v in range(1, D) if (a0, v) in F]
        if terms:
            con(prob, terms, "==", 0, f"flow_{tag}{a0}")
    for v in range(1, D):
        terms = [(f, 1) for (a0, u), f in F.items() if u == v] + [(x, -c) for x, c in emitted[v]]
        con(prob, terms, "==", 0, f"items_{tag}of_size_{v}")
    return [(F[0, v], 1) for v in range(1, D) if (0, v) in F]


def build_blocks_model(blocks: Blocks, D: int, C: int, unit_bytes: float, budget=None,
                       options: list[list[Option]] | None = None) -> BuiltModel:
    """The block ILP for ``C`` DP groups of ``D`` rings (module docstring).  ``C == 1`` uses the single-group form.

    ``budget`` (a :class:`solvers.orchestrator.run.Budget`) is checked at every ToR.  ``options``
    replaces each ToR's :func:`tor_options` (a subset of them: the model is then restricted to those
    choices, e.g. the path of :func:`solvers.orchestrator.line_bound.line_bound`).
    """
    # long: the model's variables and constraints in the order of the module docstring's formulation (per ToR
    # choices, boundary pairs, pooled leftovers, DP groups); split, the formulation would no longer read as one
    if C == 1:
        return build_single_group_model(blocks, D, unit_bytes, budget)
    m, T = blocks.m, blocks.T
    prob = pulp.LpProblem("orchestrate_blocks", pulp.LpMinimize)
    V: dict[str, dict] = {k: {} for k in ("pair", "opt", "p", "e", "F")}
    opts = []
    for t in range(T):
        if budget is not None:
            budget.check()
        opts.append(tor_options(blocks, t, D) if options is None else options[t])
    emitted: dict[int, list] = {v: [] for v in range(1, D)}
    alone, cost, ps = [], [], []
    sout_of: list[dict] = []
    sin_of: list[dict] = []
    for t in range(T):
        if budget is not None:
            budget.check()
        ov = tor_choice_rows(prob, V, blocks, t, opts[t])
        for op, v in zip(opts[t], ov):
            if op.emit:
                emitted[op.emit].append((v, 1))
            if op.alone:
                alone.append((v, op.alone))
            if op.cost:
                cost.append((v, op.cost))
        free = ov.free
        sout_of.append(ov.sout)
        sin_of.append(ov.sin)
        fmax = blocks.cap[t].get((0, 0), 0)
        p = V["p"][t] = pulp.LpVariable(f"p_{t}", 0, fmax // D, pulp.LpInteger)
        ps.append((p, 1))
        es = []
        for v in range(1, D):
            e = V["e"][(t, v)] = pulp.LpVariable(f"e_{t}_{v}", 0, fmax // v, pulp.LpInteger)
            es.append((e, v))
            emitted[v].append((e, 1))
            cost.append((e, m))
        con(prob, [(p, D)] + es + [(v, -r) for r, v in free], "<=", 0, f"cap_{t}")
        # whole groups fit in what the straddles and options leave (tighter than the capacity row in the LP)
        con(prob, [(p, 1)] + [(v, -(r // D)) for r, v in free], "<=", 0, f"whole_groups_{t}")
    # boundary b: the state ToR b leaves on its right is the state ToR b+1 finds on its left
    for b in range(blocks.n_boundaries):
        tl, tr = b, (b + 1) % T
        for st in sorted(set(sout_of[tl]) | set(sin_of[tr])):
            if st == ("N",):
                continue
            terms = sout_of[tl].get(st, []) + [(v, -1) for v, _ in sin_of[tr].get(st, [])]
            con(prob, terms, "==", 0, f"state_{b}_{'_'.join(map(str, st))}")
    mixed = pool_rows(prob, V, D, C, emitted)
    con(prob, ps + mixed + alone, "==", C, "groups")
    prob.setObjective(lin(cost))
    return BuiltModel("blocks", prob, V, unit_bytes, 1.0, blocks, {"D": D, "C": C, "options": opts})


def build_single_group_model(blocks: Blocks, D: int, unit_bytes: float, budget=None) -> BuiltModel:
    """One DP group of ``D`` rings (``--dp max``): pick rings to minimise its ToR slot incidences.

    ``act[t, j]`` is 1 when ToR t holds slot j of some ring of the group;
    slot j costs ``phi(sum_t act) = sum_t act - one[j]`` with ``one[j] = 1``
    only when a single ToR holds it.
    """
    m, T, B = blocks.m, blocks.T, blocks.n_boundaries
    prob = pulp.LpProblem("orchestrate_single_group", pulp.LpMinimize)
    V: dict[str, dict] = {k: {} for k in ("s", "r", "rho", "pair", "act", "one")}

    def var(fam, key, lo=0, hi=None, cat=pulp.LpContinuous):
        name = fam + "_" + "_".join(str(i) for i in (key if isinstance(key, tuple) else (key,)))
        v = pulp.LpVariable(name, lowBound=lo, upBound=hi, cat=cat)
        V[fam][key] = v
        return v

    s = {(b, x): var("s", (b, x), 0, 1, pulp.LpBinary) for b in range(B) for x in blocks.straddle[b]}
    S = {b: pulp.lpSum(s[b, x] for x in blocks.straddle[b]) for b in range(B)}
    for b in range(B):
        if blocks.straddle[b]:
            prob += S[b] <= 1, f"one_straddle_{b}"

    def sel(b, x):
        if b is None:
            return 1 if x == 0 else 0
        return 1 - S[b] if x == 0 else s[b, x]

    for t in range(T):
        if budget is not None:
            budget.check()
        fmax = blocks.cap[t].get((0, 0), 0)
        r = var("r", t, 0, fmax, pulp.LpInteger)
        rho = var("rho", t, 0, 1, pulp.LpBinary)
        prob += r <= fmax * rho, f"rho_{t}"
        lb, rb = blocks.left[t], blocks.right[t]
        # pair[t, xl, xr]: the straddle splits on both sides (marginals = the straddle choices), so that
        # the capacity is exact per pair in the LP too (no big-M)
        pair = {pr: var("pair", (t,) + pr, 0, 1) for pr in sorted(blocks.cap[t])}
        L_opts = [0] + (sorted(blocks.straddle[lb]) if lb is not None else [])
        R_opts = [0] + (sorted(blocks.straddle[rb]) if rb is not None else [])
        for xl in L_opts:
            prob += pulp.lpSum(v for pr, v in pair.items() if pr[0] == xl) == sel(lb, xl), f"pair_l_{t}_{xl}"
        for xr in R_opts:
            prob += pulp.lpSum(v for pr, v in pair.items() if pr[1] == xr) == sel(rb, xr), f"pair_r_{t}_{xr}"
        prob += r <= pulp.lpSum(blocks.cap[t][pr] * v for pr, v in pair.items()), f"cap_{t}"
        for j in range(m):
            a = var("act", (t, j), 0, 1)
            prob += a >= rho, f"act_pure_{t}_{j}"
            if lb is not None and blocks.straddle[lb]:
                prob += a >= pulp.lpSum(s[lb, x] for x in blocks.straddle[lb] if x <= j), f"act_l_{t}_{j}"
            if rb is not None and blocks.straddle[rb]:
                prob += a >= pulp.lpSum(s[rb, x] for x in blocks.straddle[rb] if x > j), f"act_r_{t}_{j}"
    prob += pulp.lpSum(V["r"].values()) + pulp.lpSum(S.values()) == D, "group_size"
    for j in range(m):
        # one[j] = 1 only when a single ToR holds slot j: (T - 1) one + sum_t act <= T
        one = var("one", j, 0, 1, pulp.LpBinary)
        prob += (max(T - 1, 1) * one + pulp.lpSum(V["act"][(t, j)] for t in range(T)) <= max(T, 2)), f"one_{j}"
    prob += pulp.lpSum(V["act"].values()) - pulp.lpSum(V["one"].values()), "slot_crossings"
    return BuiltModel("blocks-single", prob, V, unit_bytes, 1.0, blocks, {"D": D, "C": 1})
