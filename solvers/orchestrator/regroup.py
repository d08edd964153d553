"""A better warm start for any ToR wiring: regroup the rings by swaps until no swap of two rings helps.

One job, PP = 1.  A DP group's cross-ToR bytes are ``phi`` summed over
its rank slots (:mod:`solvers.orchestrator.traffic`): the number of
distinct ToRs at the slot, 0 when one.  The ToR-aware warm start
(:func:`solvers.orchestrator.greedy.tor_aware_placement`) forms the DP
groups of identical ToR signatures and leaves the rest in signature order;
on interleaved wiring that rest costs much more than it must.  Here every
pair of groups that share a ToR at some slot (and every group with the
spare rings) tries the best exchange of one ring for one ring, in a fixed
order (or a split of the two groups' rings anew in signature order), for
at most ``max_passes`` passes: a first-improvement local search,
deterministic, never worse than its start, and with the same rings formed
(so the same GPUs in complete instances).  It proves nothing; the bound is
the explicit orchestration's (:mod:`solvers.orchestrator.explicit_bounded`).
"""

from __future__ import annotations

from collections import defaultdict

from solvers.orchestrator.placement import PlacedInstance, Placement
from solvers.orchestrator.space import SlotSpace

MAX_PASSES = 20  # each pass is O(pairs sharing a ToR x D^2); measured: 3-4 passes reach a local optimum
CHECK_EVERY = 256  # pairs between looks at the budget (a pair costs D^2 group costs: microseconds)


def group_cost(sigs: list[tuple[int, ...]]) -> int:
    """DP crossings of one group of rings given by their ToR signatures: sum over slots of ``phi``."""
    cost = 0
    for column in zip(*sigs):
        t = len(set(column))
        if t > 1:
            cost += t
    return cost


def regroup(placement: Placement, space: SlotSpace, max_passes: int = MAX_PASSES, budget=None) -> Placement:
    """``placement`` (one job, PP = 1) with its DP groups improved by ring swaps (module docstring).

    Parameters
    ----------
    placement : Placement
        Every instance one stage of ``D`` rings; spare rings may be swapped in.
    space : SlotSpace
    max_passes : int
        Sweeps over all pairs of groups; the search stops earlier at a local optimum.
    budget : solvers.orchestrator.run.Budget, optional
        Checked every :data:`CHECK_EVERY` pairs: the search stops where it is when it is spent (a pass
        over a 16,384-node line with 8 ToRs takes minutes), keeping the exchanges made so far.

    Returns
    -------
    Placement
        Same rings, same instance count, cross-ToR DP bytes never higher.
    """
    if not placement.instances or any(len(inst.stages) != 1 for inst in placement.instances):
        return placement
    sig = [tuple(int(space.tor[u]) for u in ring) for ring in placement.rings]
    groups = [list(inst.stages[0]) for inst in placement.instances]
    if len(groups[0]) < 2:
        return placement
    spare = list(placement.spare)
    cost = [group_cost([sig[r] for r in grp]) for grp in groups]
    spent = False
    for _ in range(max_passes):
        changed = False
        for i, (a, b) in enumerate(_pairs(groups, sig)):
            if budget is not None and i % CHECK_EVERY == 0 and budget.spent():
                spent = True
                break
            if cost[a] or cost[b]:
                changed |= _best_swap(groups, cost, sig, a, b)
        if spent:
            break
        for a in range(len(groups)):
            if cost[a]:
                changed |= _best_spare(groups, cost, sig, spare, a)
        if not changed:
            break
    instances = tuple(PlacedInstance(inst.job, (tuple(grp),)) for inst, grp in zip(placement.instances, groups))
    return Placement(placement.rings, instances, tuple(sorted(spare)))


def _pairs(groups: list[list[int]], sig):
    """Pairs of groups (a < b) with a ToR in common at some slot, ascending, as the groups stand now.

    Generated group by group (never all at once: with few ToRs they are quadratic in the groups); the
    ToR memberships are taken when the generator starts, so the exchanges it feeds do not change them.
    """
    members = defaultdict(set)
    keys = []
    for g, grp in enumerate(groups):
        mine = {(s, t) for r in grp for s, t in enumerate(sig[r])}
        keys.append(mine)
        for key in mine:
            members[key].add(g)
    for a, mine in enumerate(keys):
        near = set()
        for key in mine:
            near.update(members[key])
        yield from ((a, b) for b in sorted(near) if b > a)


def _best_swap(groups, cost, sig, a: int, b: int) -> bool:
    """Apply the move between groups ``a`` and ``b`` that saves the most, if any.

    The moves: exchange one ring of ``a`` for one of ``b``; or split their ``2 D`` rings anew in signature
    order (which turns {A, A, B, B} x 2 into {A, A, A, A} and {B, B, B, B}, where every single exchange
    costs as much as it saves).
    """
    ga, gb = groups[a], groups[b]
    best = (cost[a] + cost[b], None)
    both = sorted(ga + gb, key=lambda r: (sig[r], r))
    na, nb = both[:len(ga)], both[len(ga):]
    ca, cb = group_cost([sig[r] for r in na]), group_cost([sig[r] for r in nb])
    if ca + cb < best[0]:
        best = (ca + cb, (na, nb, ca, cb))
    for i in range(len(ga)):
        for j in range(len(gb)):
            na = ga[:i] + [gb[j]] + ga[i + 1:]
            nb = gb[:j] + [ga[i]] + gb[j + 1:]
            ca, cb = group_cost([sig[r] for r in na]), group_cost([sig[r] for r in nb])
            if ca + cb < best[0]:
                best = (ca + cb, (na, nb, ca, cb))
    if best[1] is None:
        return False
    groups[a], groups[b], cost[a], cost[b] = best[1]
    return True


def _best_spare(groups, cost, sig, spare: list[int], a: int) -> bool:
    """Apply the exchange of one ring of group ``a`` with a spare ring that saves the most, if any."""
    ga = groups[a]
    best = (cost[a], None)
    for i in range(len(ga)):
        for j, r in enumerate(spare):
            na = ga[:i] + [r] + ga[i + 1:]
            c = group_cost([sig[x] for x in na])
            if c < best[0]:
                best = (c, (na, i, j))
    if best[1] is None:
        return False
    na, i, j = best[1]
    spare[j] = ga[i]
    groups[a], cost[a] = na, best[0]
    return True
