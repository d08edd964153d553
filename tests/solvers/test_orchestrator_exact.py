"""The ILP equals brute force on small lines, and the greedy is never better than the ILP.

Brute force (:mod:`solvers.orchestrator.brute`) enumerates every non-crossing
ring set and every grouping; the ILP is the block model on ToR blocks and
the explicit model otherwise (interleaved wiring, PP = 2, closed lines with
few ToRs).  Faults: every pattern of up to two faulty nodes on 12-node
lines, and seeded random patterns of up to four faults on 16- to 20-node lines.
"""

import itertools
import random

import numpy as np
import pytest

from fabric.errors import FabricError
from solvers.orchestrator import Job
from solvers.orchestrator.api import orchestrate_line, resolve_jobs
from solvers.orchestrator.brute import brute_force, line_from_arrays
from solvers.orchestrator.rings import max_rings
from solvers.pulp_adapter import SolveOptions

OPTS = SolveOptions(time_limit=30)


def make_line(n, npt, k, faults, closed=False, interleaved=False, g=1):
    T = -(-n // npt)
    tor = np.arange(n) % T if interleaved else np.arange(n) // npt
    healthy = np.ones(n, bool)
    healthy[list(faults)] = False
    return line_from_arrays(healthy, tor, k, g, closed)


def check(line, job, model="auto"):
    """ILP == brute force and greedy >= ILP on one instance; returns the ILP model kind (None: nothing fits)."""
    m = job.tp // line.space.g
    try:
        resolved = resolve_jobs([job], len(max_rings(line, m)), int(line.space.healthy.sum()) * line.space.g)
    except FabricError:
        return None
    best = brute_force(line, resolved[0])
    ilp = orchestrate_line(line, [job], options=OPTS, model=model)
    greedy = orchestrate_line(line, [job], solver="greedy")
    assert ilp.status == "optimal"
    assert ilp.used_gpus == greedy.used_gpus  # the same most GPUs in complete groups
    assert ilp.traffic.cross_bytes == pytest.approx(best, abs=1e-9)
    assert ilp.report.objective * ilp.unit_bytes == pytest.approx(best, rel=1e-6, abs=1e-6)
    assert greedy.traffic.cross_bytes >= ilp.traffic.cross_bytes - 1e-9
    return ilp.model


def patterns(n, most):
    return [f for nf in range(most + 1) for f in itertools.combinations(range(n), nf)]


@pytest.mark.parametrize("npt,k,m,D,closed", [(4, 2, 2, 2, False), (3, 1, 2, 2, True), (4, 2, 2, 3, False)])
def test_blocks_equal_brute_force_on_every_pattern_of_two_faults(npt, k, m, D, closed):
    kinds = {check(make_line(12, npt, k, f, closed), Job(tp=m, dp=D, dp_bytes=1.0)) for f in patterns(12, 2)}
    assert "blocks" in kinds and kinds <= {"blocks", "blocks-single", None}


@pytest.mark.parametrize("n,npt,k,m,D,closed", [(16, 4, 2, 2, 2, False), (15, 5, 2, 2, 3, False),
                                                 (15, 5, 2, 3, 2, True), (18, 6, 3, 2, 2, False),
                                                 (20, 5, 2, 2, 2, True), (18, 6, 2, 3, 2, False)])
def test_blocks_equal_brute_force_on_random_patterns(n, npt, k, m, D, closed):
    rng = random.Random(n * 100 + npt)
    cases = [tuple(sorted(rng.sample(range(n), rng.randint(0, 4)))) for _ in range(6)]
    kinds = {check(make_line(n, npt, k, f, closed), Job(tp=m, dp=D, dp_bytes=1.0)) for f in cases}
    assert "blocks" in kinds and kinds <= {"blocks", "blocks-single", None}


def test_nodes_of_several_gpus():
    for f in patterns(10, 1):
        check(make_line(10, 4, 2, f, g=4), Job(tp=8, dp=2, dp_bytes=1.0))


def test_dp_max_is_one_group():
    for f in patterns(12, 1):
        assert check(make_line(12, 4, 2, f), Job(tp=2, dp=None, dp_bytes=1.0)) in ("blocks-single", None)


@pytest.mark.parametrize("npt,k,m,D,closed,interleaved,pp", [
    (3, 2, 1, 3, False, True, 1),   # interleaved wiring: not ToR blocks
    (4, 2, 2, 2, True, True, 1),
    (4, 2, 1, 2, False, False, 2),  # pipeline stages
    (3, 2, 1, 2, True, True, 2),
])
def test_explicit_equals_brute_force(npt, k, m, D, closed, interleaved, pp):
    kinds = set()
    for f in patterns(10 if pp == 1 else 9, 2)[::3]:
        job = Job(tp=m, dp=D, pp=pp, dp_bytes=1.0, pp_bytes=0.7)
        kinds.add(check(make_line(10 if pp == 1 else 9, npt, k, f, closed, interleaved), job))
    assert kinds - {None} == {"explicit"}


def test_block_and_explicit_models_agree():
    for f in patterns(12, 2)[::4]:
        line = make_line(12, 4, 2, f)
        job = Job(tp=2, dp=2, dp_bytes=1.0)
        a = orchestrate_line(line, [job], options=OPTS, model="auto")
        b = orchestrate_line(line, [job], options=OPTS, model="explicit")
        assert (a.model, b.model) == ("blocks", "explicit")
        assert a.traffic.cross_bytes == pytest.approx(b.traffic.cross_bytes)


def test_fixed_count_leaves_spare_rings_to_avoid_crossing():
    """With fewer instances than fit, the ILP keeps every DP group inside a ToR when it can."""
    line = make_line(16, 4, 2, [1, 6])
    free = orchestrate_line(line, [Job(tp=2, dp=2, dp_bytes=1.0)], options=OPTS)
    some = orchestrate_line(line, [Job(tp=2, dp=2, count=2, dp_bytes=1.0)], options=OPTS)
    assert free.traffic.cross_bytes > 0
    assert some.traffic.cross_bytes == 0 and len(some.placement.instances) == 2


def _covers_a_block(line, m):
    """Brute force: does any ring (every hop path of m healthy nodes) start before a block and end after it?"""
    from solvers.orchestrator.brute import all_rings

    tor = line.space.tor
    n = line.n
    for slots, start, length in all_rings(line, m):
        pos = [start + i for i in range(length)]
        seen = [int(tor[p % n]) for p in pos]
        first, last = seen[0], seen[-1]
        inner = set(seen[1:-1]) - {first, last}
        # a ToR strictly inside the span, all of whose positions the span covers
        for t in inner:
            if all((p % n) in {q % n for q in pos} for p in np.flatnonzero(tor == t)):
                return True
    return False


def test_spans_three_blocks_agrees_with_every_ring():
    """The shortest-chain test of a ring covering a whole block == enumerating every ring (brute force)."""
    from solvers.orchestrator.rings import _runs, spans_three_blocks

    seen = set()
    for npt, k, m, closed in [(3, 2, 3, False), (4, 2, 4, False), (4, 3, 3, False), (3, 2, 2, True), (5, 3, 3, True)]:
        rng = random.Random(npt * 10 + k + m)
        n = 4 * npt
        for _ in range(40):
            f = tuple(sorted(rng.sample(range(n), rng.randint(0, 6))))
            line = make_line(n, npt, k, f, closed)
            got = spans_three_blocks(line.space.healthy, _runs(line.space.tor), m, k, closed)
            assert got == _covers_a_block(line, m), (npt, k, m, closed, f)
            seen.add(got)
    assert seen == {True, False}  # both answers occur, so the comparison can fail either way


@pytest.mark.parametrize("npt,k,m,D", [(3, 2, 3, 2), (4, 2, 4, 2)])
def test_blocks_shorter_than_m_minus_1_k_are_exact_when_faults_stop_rings_spanning_three(npt, k, m, D):
    """Blocks below the fault-free length rule: the block model whenever the faults make it exact, == brute force."""
    rng = random.Random(npt + 7 * k)
    n = 5 * npt
    kinds = set()
    for _ in range(24):
        f = tuple(sorted(rng.sample(range(n), rng.randint(1, 5))))
        kinds.add(check(make_line(n, npt, k, f), Job(tp=m, dp=D, dp_bytes=1.0)))
    assert kinds & {"blocks", "blocks-single"} and "explicit" in kinds


def test_restricted_block_model_is_feasible_and_claims_only_the_trivial_bound():
    """Short blocks with rings that may span three: forced block model = a valid placement, >= brute force, bound 0."""
    line = make_line(12, 3, 2, (4,))
    job = Job(tp=3, dp=2, dp_bytes=1.0)
    resolved = resolve_jobs([job], len(max_rings(line, 3)), 12)
    best = brute_force(line, resolved[0])
    res = orchestrate_line(line, [job], options=OPTS, model="blocks")
    d = res.summary()
    assert d["model"].endswith("-restricted") and d["bound"] == 0.0
    res.placement.check(line.space)
    assert res.traffic.cross_bytes >= best - 1e-9
    assert d["status"] == ("optimal" if res.traffic.cross_bytes == 0 else "feasible")
    assert d["gap"] == (0.0 if res.traffic.cross_bytes == 0 else 1.0)


def test_counting_proof_that_no_placement_holds_a_ring_spanning_three_blocks():
    """three_block_rings_excluded == True implies no set of `need` non-crossing rings has one covering a block.

    Brute force: every ring set of that size (solvers.orchestrator.brute.ring_sets), every ring checked.
    """
    from solvers.orchestrator.brute import ring_sets
    from solvers.orchestrator.rings import block_structure, three_block_rings_excluded

    rng = random.Random(11)
    proved = 0
    for npt, k, m in [(3, 2, 3), (4, 2, 4), (4, 3, 3)]:
        n = 4 * npt
        for _ in range(30):
            f = tuple(sorted(rng.sample(range(n), rng.randint(0, 4))))
            line = make_line(n, npt, k, f)
            b = block_structure(line, m, allow_short=True)
            R = len(max_rings(line, m))
            if b is None or b.exact or R < 2:
                continue
            for need in (R - 1, R):
                if not three_block_rings_excluded(line, m, b.spanned, need):
                    continue
                proved += 1
                tor = line.space.tor
                for rs in ring_sets(line, m, need):
                    for r in rs:
                        assert len({int(tor[u]) for u in r}) <= 2, (npt, k, m, f, r)
    assert proved > 0
