"""Build -> solve -> extract as separate steps: model sizes without solving, costs, warm start, extraction."""

import numpy as np
import pulp
import pytest

from solvers.orchestrator import Job
from solvers.orchestrator.api import orchestrate_line, resolve_jobs
from solvers.orchestrator.brute import line_from_arrays
from solvers.orchestrator.encode import encode_blocks, encode_explicit
from solvers.orchestrator.extract import extract_blocks
from solvers.orchestrator.greedy import greedy_placement
from solvers.orchestrator.model import build_model, choose_model
from solvers.orchestrator.model_blocks import tor_options
from solvers.orchestrator.rings import block_structure, candidate_rings, max_rings
from solvers.orchestrator.solve import solve_model
from solvers.orchestrator.traffic import placement_traffic
from solvers.pulp_adapter import SolveOptions


def line_of(n, npt, k=2, faults=(), closed=False, interleaved=False, g=1):
    T = -(-n // npt)
    tor = np.arange(n) % T if interleaved else np.arange(n) // npt
    ok = np.ones(n, bool)
    ok[list(faults)] = False
    return line_from_arrays(ok, tor, k, g, closed)


def resolved(line, job):
    return resolve_jobs([job], len(max_rings(line, job.tp // line.space.g)), 0)


def test_block_model_is_built_without_solving_and_sized_per_tor():
    job = Job(tp=2, dp=2, dp_bytes=1.0)
    sizes = {}
    for T in (4, 8):
        line = line_of(8 * T, 8, faults=[3])
        jobs = resolved(line, job)
        model = build_model(line, jobs)
        assert model.kind == "blocks" and model.problem.status == pulp.LpStatusNotSolved
        st = model.stats()
        blocks = block_structure(line, 2)
        n_opt = sum(len(tor_options(blocks, t, 2)) for t in range(T))
        # binaries: one per ToR option; integers: p and e per ToR plus the packing arcs; continuous: pair cells
        assert st["binary"] >= n_opt  # (a p[t] or e[t, v] bounded by 1 counts as binary too)
        assert st["integer"] == n_opt + T * 2 + len(model.var["F"])
        assert st["variables"] == st["integer"] + len(model.var["pair"])
        assert set(model.var) == {"pair", "opt", "p", "e", "F"}
        sizes[T] = st
    # aggregated: size grows with ToRs, not with rings x groups
    assert sizes[8]["variables"] < 2.3 * sizes[4]["variables"]
    assert sizes[8]["constraints"] < 2.3 * sizes[4]["constraints"]


def test_explicit_model_counts():
    line = line_of(10, 3, interleaved=True)
    jobs = resolved(line, Job(tp=2, dp=2, dp_bytes=1.0))
    model = build_model(line, jobs)
    assert model.kind == "explicit"
    cands = candidate_rings(line, 2)
    assert len(model.var["x"]) == len(cands)
    assert len(model.var["y"]) == jobs[0].count  # explicit instance slots, ordered (symmetry)
    assert all(c.name.startswith("order_") for c in model.problem.constraints.values()
               if c.name.startswith("order_"))
    sigs = model.data["sigs"]
    assert len(model.var["n"]) == jobs[0].count * len(sigs)  # per instance and signature: integer counts


def test_choose_model():
    assert choose_model(line_of(16, 4), resolved(line_of(16, 4), Job(tp=2, dp=2)))[0] == "blocks"
    assert choose_model(line_of(16, 4), resolved(line_of(16, 4), Job(tp=2, dp=None)))[0] == "blocks-single"
    assert choose_model(line_of(16, 4, interleaved=True), resolved(line_of(16, 4), Job(tp=2, dp=2)))[0] == "explicit"
    assert choose_model(line_of(16, 4), resolved(line_of(16, 4), Job(tp=2, dp=2, pp=2)))[0] == "explicit"
    assert choose_model(line_of(16, 4), resolved(line_of(16, 4), Job(tp=2, dp=1)))[0] == "none"


@pytest.mark.parametrize("seed", range(6))
def test_model_cost_of_the_greedy_equals_its_accounted_traffic(seed):
    """Fix the model to the greedy placement (the warm start): its objective is the greedy's true cross bytes."""
    rng = np.random.default_rng(seed)
    n, npt = 24, 6
    faults = rng.choice(n, size=int(rng.integers(0, 4)), replace=False)
    line = line_of(n, npt, k=int(rng.integers(1, 4)), faults=faults, closed=bool(seed % 2))
    job = Job(tp=int(rng.integers(1, 4)), dp=int(rng.integers(2, 4)), dp_bytes=1.0)
    try:
        jobs = resolved(line, job)
    except Exception:
        pytest.skip("nothing fits")
    model = build_model(line, jobs)
    greedy = greedy_placement(line, jobs)
    start = encode_blocks(model, greedy) if model.kind.startswith("blocks") else encode_explicit(model, greedy)
    assert priced_at(model, start) * model.unit_bytes == pytest.approx(
        placement_traffic(greedy, line.space, jobs).cross_bytes)


def priced_at(model, start):
    """The model's objective with its integer variables fixed at ``start`` (a warm start's encoding)."""
    assert start
    for v, x in start.items():
        if v.cat == pulp.LpInteger:
            v.lowBound = v.upBound = round(x)
    rep = solve_model(model, SolveOptions())
    assert rep.status == "optimal"
    return rep.objective


def test_extracted_placement_is_a_valid_khop_configuration():
    from topologies import build
    from topologies.khop import ring_configuration
    from solvers.orchestrator import orchestrate

    fab = build("khop-ring", 48 * 4, {"k": 2, "gpus_per_node": 4, "nodes_per_tor": 8})
    res = orchestrate(fab, [Job(tp=8, dp=3)], [5, 6, 17, 30])
    assert res.status == "optimal" and res.model == "blocks"
    pl = res.placement
    pl.check(res.space)
    node_rings = [[int(res.space.node[u]) for u in ring] for ring in pl.rings]
    cfg = ring_configuration(fab, node_rings)  # raises if a hop is not an optical path or a node is reused
    assert cfg.active_candidates.size > 0
    for inst in pl.instances:
        assert [len(st) for st in inst.stages] == [3]
    assert not {5, 6, 17, 30} & {n for r in node_rings for n in r}
    # proved by the line-DP bound on a restricted ILP (the priced paths' options only, where the greedy is
    # not expressible), or else warm-started from the greedy
    assert res.report.warm_start or any("line-DP lower bound" in n for n in res.notes)


def test_extraction_reads_only_the_solution():
    """Extract alone, from a solved model: same placement as the pipeline."""
    line = line_of(20, 5, faults=[2, 11])
    jobs = resolved(line, Job(tp=2, dp=3, dp_bytes=1.0))
    model = build_model(line, jobs)
    rep = solve_model(model, SolveOptions())
    assert rep.status == "optimal"
    pl = extract_blocks(model)
    pl.check(line.space)
    assert placement_traffic(pl, line.space, jobs).cross_bytes == pytest.approx(rep.objective * model.unit_bytes)


def test_time_limit_is_honest():
    """A tiny time limit on a large line: an incumbent (the solver's or the warm start) and an honest bound."""
    rng = np.random.default_rng(3)
    n = 1024
    line = line_of(n, 16, faults=rng.choice(n, size=60, replace=False), g=4)
    res = orchestrate_line(line, [Job(tp=16, dp=4)], options=SolveOptions(time_limit=0.2))
    assert res.status in ("optimal", "feasible") and res.placement is not None and res.termination
    d = res.summary()
    assert d["bound"] is not None and 0 <= d["bound"] <= d["objective"] and 0 <= d["gap"] <= 1
    if res.report is None:  # the budget ran out before the solver produced anything
        assert d["warm_start_unimproved"] and d["bound"] == 0.0


def test_time_limit_covers_the_model_build():
    """A budget spent before the build ends: no solver run, the warm start with the slot bound.

    Exact because the build checks the budget at every ToR, and a budget of 1 ns is spent before the first
    (and before the line DP's first ToR, so no line-DP bound either).  The bound stated is then the slot bound
    of slot_bound.py (milliseconds, computed here on its own from each ToR's healthy nodes), not the trivial 0.
    The warm start is the cheaper of the greedy and its ToR-aware regrouping.
    """
    from solvers.orchestrator.greedy import greedy_placement, tor_aware_placement
    from solvers.orchestrator.model_explicit import unit_costs
    from solvers.orchestrator.slot_bound import tor_count_bound

    rng = np.random.default_rng(3)
    line = line_of(256, 16, faults=rng.choice(256, size=12, replace=False), g=4)
    jobs = resolved(line, Job(tp=16, dp=4))
    res = orchestrate_line(line, [Job(tp=16, dp=4)], options=SolveOptions(time_limit=1e-9))
    d = res.summary()
    assert d["mip_solver"] in (None, "-") and d["termination"] == "time_limit" and "time limit reached" in d["notes"]
    assert d["warm_start_unimproved"] is True and d["solver"] == "ilp"
    unit, _, _ = unit_costs(jobs, 4)
    per_tor = np.bincount(line.space.tor[line.space.healthy], minlength=line.space.n_tors)
    lb = tor_count_bound(per_tor, 4, 4, jobs[0].count)
    assert lb > 0 and d["bound"] == pytest.approx(lb * unit) and "slot bound" in d["notes"]
    warm = min(placement_traffic(p(line, jobs), line.space, jobs).cross_bytes
               for p in (greedy_placement, tor_aware_placement))
    assert d["objective"] == warm > 0
    assert d["gap"] == pytest.approx((warm - lb * unit) / warm) and d["status"] == "feasible"


def test_solver_termination_and_warm_start_flag_are_reported():
    """An unlimited solve: the solver's own status word, and whether it improved on the greedy (compared exactly)."""
    from solvers.orchestrator.greedy import greedy_placement, tor_aware_placement

    line = line_of(40, 8, faults=[3, 17, 22], g=1)
    jobs = resolved(line, Job(tp=2, dp=3, dp_bytes=1.0))
    res = orchestrate_line(line, [Job(tp=2, dp=3, dp_bytes=1.0)], options=SolveOptions(time_limit=30))
    d = res.summary()
    assert d["status"] == "optimal" and d["termination"] == res.report.termination == "optimal"
    warm = min(placement_traffic(p(line, jobs), line.space, jobs).cross_bytes
               for p in (greedy_placement, tor_aware_placement))
    assert d["warm_start_unimproved"] == (d["cross_tor_bytes"] >= warm)


@pytest.mark.parametrize("objective, bound, want", [
    (10.0, -5.0, (0.0, 1.0)),  # a negative solver bound says less than the trivial one
    (10.0, 12.0, (10.0, 0.0)),  # a bound above the incumbent (rounding) proves it
    (0.0, -1.0, (0.0, 0.0)),
    (8.0, 6.0, (6.0, 0.25)),
    (8.0, None, (None, None)),
])
def test_bound_is_clamped_to_the_trivial_bound_and_gap_to_unit_interval(objective, bound, want):
    from solvers.orchestrator.result import clamp_bound

    assert clamp_bound(objective, bound) == want


def test_tor_aware_warm_start_forms_the_same_rings_and_never_costs_more_on_whole_tors():
    """Same rings and GPUs as the greedy; a ToR holding D whole rings gives a zero-cost group (exact: phi(1) = 0)."""
    from solvers.orchestrator.greedy import greedy_placement, tor_aware_placement

    line = line_of(48, 8, faults=[1, 10, 30], g=1)
    jobs = resolved(line, Job(tp=2, dp=3, dp_bytes=1.0))
    a, b = greedy_placement(line, jobs), tor_aware_placement(line, jobs)
    b.check(line.space)
    assert sorted(a.rings) == sorted(b.rings) and len(a.used_rings) == len(b.used_rings)
    tor = line.space.tor
    for inst in b.instances[:2]:  # the first instances are whole ToRs: every ring of one ToR
        assert len({int(tor[u]) for r in inst.rings for u in b.rings[r]}) == 1
    assert placement_traffic(b, line.space, jobs).cross_bytes <= placement_traffic(a, line.space, jobs).cross_bytes
