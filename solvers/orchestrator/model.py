"""Build step: choose and build the placement ILP for a k-hop line (testable without solving).

:func:`choose_model` says which formulation is exact *and* small for the
request; :func:`build_model` builds it.

* ``blocks`` (:mod:`~solvers.orchestrator.model_blocks`): ToR blocks, one
  job, PP = 1.  Size O(ToRs x (slots + D) + D^2): scales to thousands of nodes.
* ``blocks-single``: the same with one DP group (``--dp max``); groups larger
  than any block's rings + 2 are solved by the exact path of
  :mod:`~solvers.orchestrator.single_group` instead.
* ``explicit`` (:mod:`~solvers.orchestrator.model_explicit`): anything else
  (interleaved or arbitrary ToR maps, several jobs, PP > 1, closed lines
  with no more ToRs than D); size grows with candidate rings x instances,
  so it is for small and medium lines.
* ``none``: nothing to optimise (D = 1 and PP = 1: no DCN bytes at all).

When a ring *could* span three ToR blocks (short blocks, e.g. k = 3 or TP 64
on 16-node ToRs) the block model is not exact; on lines of more than
:data:`EXPLICIT_MAX_SLOTS` slots it is used anyway on the rings that stay
within two blocks (``Blocks.exact`` False): its optimum is then a feasible
placement.  The orchestration then bounds it (open or closed line) with the line
DP over a view that holds the rings spanning three or more blocks too
(:mod:`~solvers.orchestrator.three_blocks`, :mod:`~solvers.orchestrator.bounded`):
a restricted placement that reaches that bound is optimal; otherwise the
gap is stated against it.
:func:`~solvers.orchestrator.rings.three_block_rings_excluded` (a counting
argument that no placement with the stage-1 ring count holds a ring spanning
three blocks) is *not* used to call the block model exact: on short blocks it
let the block model report an optimum below brute force (found with highspy
1.16 by ``test_blocks_shorter_than_m_minus_1_k_are_exact_when_faults_stop_rings_spanning_three``),
so such lines go to the explicit model (small) or the restricted block model (large).
"""

from __future__ import annotations

from fabric.errors import FabricError
from solvers.orchestrator.built import BuiltModel
from solvers.orchestrator.jobs import Job
from solvers.orchestrator.model_blocks import build_blocks_model
from solvers.orchestrator.model_explicit import build_explicit_model, position_conflicts, unit_costs
from solvers.orchestrator.rings import Blocks, Candidate, TooManyCandidates, block_structure, candidate_rings
from solvers.orchestrator.run import UNLIMITED, Budget, BudgetSpent
from solvers.orchestrator.space import Line

MODELS = ("auto", "blocks", "explicit")
EXPLICIT_MAX_SLOTS = 128  # above this the explicit model ends near a 100 % gap (issue 18): blocks restricted instead
# Columns of the explicit model, estimated as candidate rings + instances x stages x signatures (its integer
# counts; the binaries per slot and ToR come on top).  Measured on interleaved lines, TP 16 x DP 4 at 60 s: 2,048
# nodes, 137k estimated (201k real) built in 7 s; 4,096 nodes, 496k (773k) took 28 s and 16,384 nodes ran out of
# the 280 s budget at 3 GiB, and neither solve ever improved on the warm start.  Beyond this the model is not
# built: the warm start (and the search that makes it) has the time.
EXPLICIT_MAX_COLUMNS = 300_000


def choose_model(line: Line, jobs: list[Job], prefer: str = "auto") -> tuple[str, Blocks | None]:
    """(model kind, block view or None) for resolved ``jobs`` on ``line``."""
    if all(j.dp == 1 and j.pp == 1 for j in jobs):
        return "none", None
    m = jobs[0].tp // line.space.g
    blocks = None
    if len(jobs) == 1 and jobs[0].pp == 1 and prefer != "explicit":
        blocks = block_structure(line, m, allow_short=True)
        # (the counting argument of three_block_rings_excluded is not used to claim exactness: with
        # highspy 1.16 it let the block model report an optimum below brute force on short blocks)
        if blocks is not None and not blocks.exact and line.n <= EXPLICIT_MAX_SLOTS and prefer != "blocks":
            blocks = None
        D = jobs[0].dp
        if blocks is not None and line.closed and 1 < blocks.T <= D and jobs[0].count > 1:
            blocks = None  # a chain of straddles could close around the circle: not modelled
        if blocks is not None:
            return ("blocks-single" if jobs[0].count == 1 else "blocks"), blocks
    if prefer == "blocks":
        raise FabricError("model", "the block model needs ToR blocks of >= (m-1)k nodes, one job and PP = 1")
    return "explicit", None


def build_model(line: Line, jobs: list[Job], prefer: str = "auto", budget: Budget = UNLIMITED) -> BuiltModel | None:
    """The chosen ILP, built but not solved (None when there is nothing to optimise)."""
    kind, blocks = choose_model(line, jobs, prefer)
    if kind == "none":
        return None
    return build_chosen(line, jobs, kind, blocks, budget)


def build_chosen(line: Line, jobs: list[Job], kind: str, blocks: Blocks | None,
                 budget: Budget = UNLIMITED, cands: list[Candidate] | None = None) -> BuiltModel:
    """Build the formulation :func:`choose_model` picked, checking ``budget`` as it goes.

    ``cands``: the explicit model's candidate rings when already listed (:func:`explicit_model_fits`).

    Raises
    ------
    solvers.orchestrator.run.BudgetSpent
        The budget ran out during the build.
    solvers.orchestrator.rings.TooManyCandidates
        The explicit model would not fit in memory.
    """
    g = line.space.g
    unit, _, _ = unit_costs(jobs, g)
    if kind.startswith("blocks"):
        job = jobs[0]
        return build_blocks_model(blocks, job.dp, job.count, unit, budget=budget)
    m = jobs[0].tp // g
    if cands is None:
        cands = candidate_rings(line, m, budget=budget)
    budget.check()
    columns = _explicit_columns(cands, jobs)
    if columns > EXPLICIT_MAX_COLUMNS:
        raise TooManyCandidates("tp", f"the explicit model would have about {columns:,} columns (more than "
                                      f"{EXPLICIT_MAX_COLUMNS:,}: its build alone would take most of a minute)")
    model = build_explicit_model(cands, position_conflicts(cands, line.n), jobs, g, budget=budget)
    model.meta["tor"] = line.space.tor
    return model


def explicit_model_fits(line: Line, jobs: list[Job], budget: Budget = UNLIMITED,
                        listed: dict | None = None) -> bool:
    """The explicit model of this request is within :data:`EXPLICIT_MAX_COLUMNS` (and its candidate limit).

    True when ``budget`` runs out first: the build then reports the spent budget itself.  ``listed`` (a dict)
    receives the candidate rings under ``"cands"``, for :func:`build_chosen` not to list them again.
    """
    try:
        cands = candidate_rings(line, jobs[0].tp // line.space.g, budget=budget)
    except TooManyCandidates:
        return False
    except BudgetSpent:
        return True
    if listed is not None:
        listed["cands"] = cands
    return _explicit_columns(cands, jobs) <= EXPLICIT_MAX_COLUMNS


def _explicit_columns(cands: list[Candidate], jobs: list[Job]) -> int:
    """Candidate rings + instances x stages x ring signatures: the bulk of the explicit model's columns."""
    signatures = len({c.sig for c in cands})
    return len(cands) + sum(j.count * j.pp for j in jobs) * signatures
