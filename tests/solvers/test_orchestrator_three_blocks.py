"""Rings spanning three ToR blocks in the line-DP bound (:mod:`solvers.orchestrator.three_blocks`).

Checked against brute force (:mod:`solvers.orchestrator.brute`, which
enumerates every ring of the line with no block view at all): the tight
rings listed are exactly the ToR signatures of three-block rings that
exist; the bound never exceeds the true optimum, on draws where the
optimum needs such a ring too; and every placement the orchestration calls
optimal on short blocks costs what brute force says.
"""

import random

import numpy as np
import pytest

from fabric.errors import FabricError
from solvers.orchestrator import Job
from solvers.orchestrator.api import orchestrate_line
from solvers.orchestrator.brute import all_rings, brute_force, line_from_arrays
from solvers.orchestrator.line_bound import packed_bound
from solvers.orchestrator.model_explicit import unit_costs
from solvers.orchestrator.rings import block_structure, max_rings
from solvers.orchestrator.stage1 import resolve_jobs
from solvers.orchestrator.three_blocks import three_block_rings, three_block_view
from solvers.pulp_adapter import SolveOptions


def make_line(n, npt, k, faults):
    tor = np.arange(n) // npt
    healthy = np.ones(n, bool)
    healthy[list(faults)] = False
    return line_from_arrays(healthy, tor, k, 1, False)


def resolved(line, job):
    m = job.tp
    try:
        out = resolve_jobs([job], len(max_rings(line, m)), int(line.space.healthy.sum()))
    except FabricError:
        return None
    return None if out is None else out[0]


def real_keys(line, m):
    """(block, left key, right key) of every block that a ring of the line covers (brute force over all rings)."""
    tor = line.space.tor
    exact, long = set(), set()
    for slots, _, _ in all_rings(line, m):
        sig = [int(tor[p]) for p in slots]
        tors = sorted(set(sig))
        if len(tors) < 3:
            continue
        for t in tors[1:-1]:
            left = sum(1 for q in sig if q < t)
            upto = left + sig.count(t)
            a = (m if t - 1 == tors[0] else 3 * m) + left
            b = (2 * m if t + 1 == tors[-1] else 3 * m) + upto
            (exact if len(tors) == 3 else long).add((t, a, b))
    return exact, long


SHORT = [(12, 2, 2, 3), (14, 2, 2, 3), (15, 3, 2, 4), (16, 4, 2, 4), (18, 6, 3, 4), (21, 7, 3, 5), (20, 4, 3, 4),
         (12, 2, 2, 4), (16, 2, 3, 4), (18, 3, 3, 5)]


@pytest.mark.parametrize("n,npt,k,m", SHORT)
def test_covering_rings_listed_are_the_real_ones(n, npt, k, m):
    """Rings over three blocks: exactly the tight signatures that exist.  Longer rings: every real one is
    listed (the view may list more, a relaxation)."""
    rng = random.Random(n * 7 + m)
    for _ in range(6):
        line = make_line(n, npt, k, rng.sample(range(n), rng.randint(0, 3)))
        blocks = block_structure(line, m, allow_short=True)
        spans = three_block_rings(blocks, line.space.healthy, line.space.tor)
        if spans is None:  # only when a ring can hop over a whole block
            tors = [sorted({int(line.space.tor[p]) for p in r[0]}) for r in all_rings(line, m)]
            assert any(ts[-1] - ts[0] + 1 > len(ts) for ts in tors)
            continue
        listed = {(t, a, b) for t, pairs in enumerate(spans) for a, b in pairs}
        exact, long = real_keys(line, m)
        three = {(t, a, b) for t, a, b in listed if m <= a < 2 * m and b < 3 * m}
        assert three == exact
        assert long <= listed


CASES = [(12, 2, 2, 3, 2), (14, 2, 2, 3, 2), (12, 2, 2, 3, 3), (15, 3, 3, 4, 2), (16, 2, 2, 3, 2), (15, 3, 2, 4, 2),
         (16, 4, 2, 4, 2), (18, 6, 3, 4, 2), (20, 4, 2, 4, 2), (18, 3, 2, 4, 3), (12, 2, 2, 4, 2),
         (18, 3, 3, 5, 2), (14, 2, 2, 4, 2)]


def three_view_bound_holds(line, m, D):
    """Check the three-block view's bound against brute force on ``line`` (short blocks only).

    Returns (job, brute-force optimum, bytes per crossing unit, block view), or None when the line has no
    short-block instance of TP ``m`` x DP ``D`` (exact blocks, no view, or nothing fits).
    """
    job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
    blocks = block_structure(line, m, allow_short=True)
    if job is None or blocks is None or blocks.exact:
        return None
    view = three_block_view(blocks, line.space.healthy, line.space.tor)
    if view is None:
        return None
    best = brute_force(line, job)
    unit, _, _ = unit_costs([job], 1)
    pb = packed_bound(view[0], D, job.count, options_of=view[1])
    assert pb is not None and pb.bound * unit <= best + 1e-9
    return job, best, unit, blocks


def test_bound_never_exceeds_brute_force_on_short_blocks():
    """Random draws; the bound of the two-block view alone is wrong (above the optimum, or no path)
    on some of them (the optimum needs a three-block ring), and the three-block bound must hold there too."""
    rng = random.Random(6)
    checked = needs_three = 0
    for _ in range(120):
        n, npt, k, m, D = rng.choice(CASES)
        line = make_line(n, npt, k, sorted(rng.sample(range(n), rng.randint(0, 3))))
        checked_view = three_view_bound_holds(line, m, D)
        if checked_view is None:
            continue
        job, best, unit, blocks = checked_view
        two = packed_bound(blocks, D, job.count)
        needs_three += two is None or two.bound * unit > best + 1e-9
        checked += 1
    assert checked >= 60 and needs_three >= 1


@pytest.mark.parametrize("n,npt,k,m,D,faults", [(14, 2, 2, 3, 2, [10, 12]), (16, 2, 2, 3, 2, [3]),
                                                (15, 3, 2, 4, 2, [7]), (20, 4, 2, 4, 2, [2, 13]),
                                                (18, 3, 2, 4, 3, [4])])
def test_proofs_on_short_blocks_agree_with_brute_force(n, npt, k, m, D, faults):
    line = make_line(n, npt, k, faults)
    job = resolved(line, Job(tp=m, dp=D, dp_bytes=1.0))
    best = brute_force(line, job)
    res = orchestrate_line(line, [Job(tp=m, dp=D, dp_bytes=1.0)], options=SolveOptions(time_limit=30),
                           model="blocks")
    assert res.traffic.cross_bytes >= best - 1e-9
    if res.status == "optimal":
        assert res.traffic.cross_bytes == pytest.approx(best, abs=1e-9)
    if res.report is not None and res.report.bound is not None:
        assert res.report.bound * res.unit_bytes <= best + 1e-9


def test_bound_never_exceeds_brute_force_on_short_blocks_of_closed_lines():
    """Closed lines, the ToRs rotated against position 0: the view wraps (the block before block 0 is block
    T - 1 a lap earlier), the line DP closes on every wrap state (line_bound.py); brute force enumerates the
    rings over the seam independently.  Bound-proved placements must equal brute force."""
    rng = random.Random(8)
    checked = proved = 0
    for _ in range(80):
        n, npt, k, m, D = rng.choice([c for c in CASES if c[0] // c[1] > c[4]])  # more ToRs than D
        healthy = np.ones(n, bool)
        healthy[rng.sample(range(n), rng.randint(0, 3))] = False
        tor = (np.arange(n) + rng.randint(0, npt - 1)) // npt % (n // npt)
        line = line_from_arrays(healthy, tor, k, 1, True)
        checked_view = three_view_bound_holds(line, m, D)
        if checked_view is None:
            continue
        job, best, unit, _ = checked_view
        res = orchestrate_line(line, [Job(tp=m, dp=D, dp_bytes=1.0)], options=SolveOptions(time_limit=30),
                               model="blocks")
        assert res.traffic.cross_bytes >= best - 1e-9
        assert res.summary()["bound"] <= best + 1e-9
        if res.status == "optimal":
            proved += 1
            assert res.traffic.cross_bytes == pytest.approx(best, abs=1e-9)
        checked += 1
    assert checked >= 20 and proved >= 5
