"""The general, exact ILP: any ToR wiring, several jobs, pipeline stages.  Sized for small and medium lines.

Rings are chosen among candidates (:func:`solvers.orchestrator.rings.candidate_rings`,
or the fixed TP groups of another architecture) and aggregated by their ToR
*signature* (the ToR of each slot): DP and PP costs depend only on
signatures, so instances count rings per signature instead of holding
per-ring binaries.

Variables
---------
``x[r]``            candidate ring r is formed (binary); non-crossing: at most one per position
``h[j, q]``         instances of job j made only of rings of signature q (cost 0)
``y[j, i]``         explicit instance slot i of job j is used (binary; ``y[j, i] >= y[j, i+1]`` breaks symmetry)
``n[j, i, p, q]``   rings of signature q in stage p of that instance (integer)
``u[j, i, p, s, t]`` ToR t holds slot s of some ring of that DP group (binary)
``f[j, i, p, s]``    that slot's all-reduce spans two or more ToRs (binary)
``q[j, i, p, a, b]`` pipelines whose stage-p ring has signature a and stage-(p+1) ring b,
                    for pairs sharing a ToR at some slot; ``go/gi`` the other pipelines

DP cost of a slot: ``phi(T) = sum_t u - y + f`` (= 0 for one ToR, T otherwise).
PP cost of a pipeline hop: the slots where the two rings' ToRs differ (``m``
for pairs that share no ToR at any slot).  Objective: bytes on ToR uplinks,
in units of ``unit_bytes``.  The group counts are fixed beforehand at their
maximum (lexicographic objective, see :mod:`solvers.orchestrator.model_blocks`).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pulp

from solvers.orchestrator.built import BuiltModel
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.rings import Candidate

CHECK_EVERY = 2048  # candidates or positions between looks at the budget (each a PuLP variable or row: ~10 us)


def unit_costs(jobs: list[Job], g: int) -> tuple[float, list[float], list[float]]:
    """(bytes per objective unit, DP cost per slot crossing, PP cost per mismatched slot) per job, in units."""
    dp = [g * 2.0 * (j.dp - 1) / j.dp * j.bytes_dp if j.dp > 1 else 0.0 for j in jobs]
    pp = [g * j.bytes_pp if j.pp > 1 else 0.0 for j in jobs]
    pos = [c for c in dp + pp if c > 0]
    unit = min(pos) if pos else 0.0
    if unit == 0.0:
        return 0.0, [0.0] * len(jobs), [0.0] * len(jobs)
    return unit, [c / unit for c in dp], [c / unit for c in pp]


def _ring_choices(prob, n_cands: int, conflicts: list[list[int]], new_var, budget) -> list:
    """One binary per candidate ring (formed or not), and at most one formed per line position."""
    x = []
    for r in range(n_cands):
        if budget is not None and r % CHECK_EVERY == 0:
            budget.check()
        x.append(new_var(r))
    for k, group in enumerate(conflicts):
        if budget is not None and k % CHECK_EVERY == 0:
            budget.check()
        if len(group) > 1:
            prob += pulp.lpSum(x[r] for r in group) <= 1, f"span_{k}"
    return x


def _slot_tors(sig_list: list[tuple[int, ...]], m: int):
    """(ToRs that occur at each slot, (slot, ToR) -> indices of the signatures with that ToR there)."""
    tors_at = [sorted({s[j] for s in sig_list}) for j in range(m)]
    holding = defaultdict(list)
    for qi, sg in enumerate(sig_list):
        for j, t in enumerate(sg):
            holding[j, t].append(qi)
    return tors_at, holding


def build_explicit_model(cands: list[Candidate], conflicts: list[list[int]], jobs: list[Job], g: int,
                         fixed: bool = False, budget=None) -> BuiltModel:
    """The explicit ILP (module docstring).

    Parameters
    ----------
    cands : list of Candidate
        Rings that may be formed (all of one size ``m``).
    conflicts : list of list of int
        Candidate index sets of which at most one may be formed (per line position).
    jobs : list of Job
        With ``dp`` and ``count`` resolved.
    g : int
        GPUs per slot.
    fixed : bool
        Candidates are already-formed TP groups (other architectures): only grouping is decided.
    budget : solvers.orchestrator.run.Budget, optional
        Checked every :data:`CHECK_EVERY` candidates or positions and at every rank slot of every instance
        (the build of a large line takes seconds).
    """
    prob = pulp.LpProblem("orchestrate_explicit", pulp.LpMinimize)
    V: dict[str, dict] = {k: {} for k in ("x", "h", "y", "n", "u", "f", "q", "go", "gi")}
    sig_list = sorted({c.sig for c in cands})
    sig_ix = {s: i for i, s in enumerate(sig_list)}
    m = len(sig_list[0]) if sig_list else 0
    unit, dpc, ppc = unit_costs(jobs, g)

    def var(fam, key, lo=0, hi=None, cat=pulp.LpContinuous):
        name = fam + "_" + "_".join(str(i) for i in (key if isinstance(key, tuple) else (key,)))
        v = pulp.LpVariable(name, lowBound=lo, upBound=hi, cat=cat)
        V[fam][key] = v
        return v

    BIN, INT = pulp.LpBinary, pulp.LpInteger
    x = _ring_choices(prob, len(cands), conflicts, lambda r: var("x", r, 0, 1, BIN), budget)
    supply = defaultdict(list)
    for r, c in enumerate(cands):
        supply[sig_ix[c.sig]].append(x[r])
    tors_at, holding = _slot_tors(sig_list, m)
    close, mism = _pp_pairs(sig_list, m) if any(job.pp > 1 for job in jobs) else ([], {})

    demand = defaultdict(list)
    cost = []
    for j, job in enumerate(jobs):
        D, P, C = job.dp, job.pp, job.count
        for qi in range(len(sig_list)):
            if len(supply[qi]) * 1 >= D * P or fixed:
                h = var("h", (j, qi), 0, C, INT)
                demand[qi].append(D * P * h)
        hom = pulp.lpSum(v for (jj, _), v in V["h"].items() if jj == j)
        ys = []
        for i in range(C):
            if budget is not None:
                budget.check()
            y = var("y", (j, i), 0, 1, BIN)
            ys.append(y)
            if i:
                prob += ys[i - 1] >= y, f"order_{j}_{i}"
            for p in range(P):
                ns = {qi: var("n", (j, i, p, qi), 0, D, INT) for qi in range(len(sig_list))}
                for qi, v in ns.items():
                    demand[qi].append(v)
                prob += pulp.lpSum(ns.values()) == D * y, f"size_{j}_{i}_{p}"
                if D > 1 and dpc[j] > 0:
                    for s in range(m):
                        if budget is not None:
                            budget.check()
                        us = []
                        for t in tors_at[s]:
                            u = var("u", (j, i, p, s, t), 0, 1, BIN)
                            us.append(u)
                            members = [ns[qi] for qi in holding[s, t]]
                            prob += D * u >= pulp.lpSum(members), f"u_{j}_{i}_{p}_{s}_{t}"
                        f = var("f", (j, i, p, s), 0, 1, BIN)
                        prob += (D - 1) * f >= pulp.lpSum(us) - y, f"f_{j}_{i}_{p}_{s}"
                        cost.append(dpc[j] * (pulp.lpSum(us) - y + f))
            if P > 1 and ppc[j] > 0:
                for p in range(P - 1):
                    qs = {(a, b): var("q", (j, i, p, a, b), 0, D, INT) for a, b in close}
                    go = {a: var("go", (j, i, p, a), 0, D, INT) for a in range(len(sig_list))}
                    gi = {b: var("gi", (j, i, p, b), 0, D, INT) for b in range(len(sig_list))}
                    for a in range(len(sig_list)):
                        prob += (pulp.lpSum(v for (aa, _), v in qs.items() if aa == a) + go[a]
                                 == V["n"][(j, i, p, a)]), f"pp_out_{j}_{i}_{p}_{a}"
                        prob += (pulp.lpSum(v for (_, bb), v in qs.items() if bb == a) + gi[a]
                                 == V["n"][(j, i, p + 1, a)]), f"pp_in_{j}_{i}_{p}_{a}"
                    cost.append(ppc[j] * (pulp.lpSum(mism[k] * v for k, v in qs.items())
                                          + m * pulp.lpSum(go.values())))
        prob += hom + pulp.lpSum(ys) == C, f"count_{j}"
    for qi in range(len(sig_list)):
        prob += pulp.lpSum(demand[qi]) <= pulp.lpSum(supply[qi]), f"supply_{qi}"
    prob += pulp.lpSum(cost), "uplink_units"
    integral = len(jobs) == 1 and all(p.pp == 1 for p in jobs)
    data = {"candidates": cands, "jobs": jobs, "sigs": sig_list, "sig_ix": sig_ix}
    return BuiltModel("explicit", prob, V, unit, 1.0 if integral else None, data, {"fixed": fixed})


def _pp_pairs(sig_list: list[tuple[int, ...]], m: int) -> tuple[list[tuple[int, int]], dict]:
    """Signature pairs (a, b) that share a ToR at some slot, and their mismatched slots.

    The PP pairs worth tracking one by one; quadratic in the signatures, so built only for PP > 1
    (vectorised: a 1,024-node interleaved line has 512 signatures).
    """
    S = np.asarray(sig_list, dtype=np.int64).reshape(len(sig_list), m)
    diff = (S[:, None, :] != S[None, :, :]).sum(axis=2)
    a_ix, b_ix = np.nonzero(diff < m)
    close = list(zip(a_ix.tolist(), b_ix.tolist()))
    return close, {(a, b): int(diff[a, b]) for a, b in close}


def position_conflicts(cands: list[Candidate], n: int) -> list[list[int]]:
    """Per line position, the candidates whose span covers it (non-crossing rings)."""
    from solvers.orchestrator.rings import span

    cover: list[list[int]] = [[] for _ in range(n)]
    for r, c in enumerate(cands):
        for p in span(c, n):
            cover[p].append(r)
    return cover
