"""The job's TP groups are the allocation policy's groups on the fault-free Fabric, and they obey the HBD's physics.

Independent check (brute force on small Fabrics, every TP size from 1 to twice the HBD): for each HBD kind,
a checker written from the physics alone says whether a set of GPUs can be one TP group (any GPUs of one
switch domain; one node's mesh or a ring of whole consecutive nodes on a k-hop line; one cube or whole cubes
of one OCS pod on TPUv4; one torus line, or whole adjacent lines / planes), and the greatest number of
disjoint groups is counted by hand from the same physics (per domain ``floor(D / TP)``, per line
``floor(nodes / m)``, ...).  Exact because with no fault every unit is whole, so the maximum packing is that
closed form; a size the physics cannot join must be refused by both ``tp_blocks`` and the allocator.
"""

from __future__ import annotations

import numpy as np
import pytest

from fabric.errors import FabricError
from solvers.allocation import allocate
from topologies import build
from workloads.placement import tp_across_domains, tp_blocks, usable_gpus

CASES = [("dgx", 16, {}), ("nvl", 72, {"size": 36}), ("khop-ring", 32, {"k": 2}), ("khop-ring", 24, {"k": 3}),
         ("tpuv4", 128, {}), ("torus", 32, {"dims": "4x4x2"}), ("fattree", 16, {})]


def _physics(fab, tp: int):
    """(whether TP groups of ``tp`` exist, checker of one group, most disjoint groups) from the HBD alone."""
    h, gpus = fab.hbd, fab.gpu_ids
    dom, node, pos = fab.group("domain"), fab.group("node"), fab.group("position")
    kind = str(h.kind.value)
    if kind == "none":
        return tp == 1, (lambda grp: True), gpus.size
    if kind == "switch_domain":
        sizes = np.bincount(dom[gpus])
        return tp <= h.max_tp, (lambda grp: np.unique(dom[grp]).size == 1), int((sizes // tp).sum())
    if kind == "khop_line":
        g = h.gpus_per_node
        n_nodes = gpus.size // g
        if tp < g:  # inside one node's full mesh
            return True, (lambda grp: np.unique(node[grp]).size == 1), n_nodes * (g // tp)
        m = tp // g

        def ring(grp):
            nd = np.unique(node[grp])
            p = np.sort(np.unique(pos[grp]))
            whole = all(np.sum(node[gpus] == n) == np.sum(node[grp] == n) for n in nd)
            return whole and nd.size == m and np.all(np.diff(p) <= h.k)
        return tp % g == 0 and tp <= h.max_tp, ring, n_nodes // m  # one line here
    if kind == "ocs_cube":
        cube, C = fab.group("cube"), h.cube_gpus
        n_cubes = gpus.size // C
        if tp <= C:
            return True, (lambda grp: np.unique(cube[grp]).size == 1), n_cubes * (C // tp)

        def slice_(grp):
            cs = np.unique(cube[grp])
            return cs.size * C == tp and np.unique(dom[grp]).size == 1
        return tp % C == 0 and tp <= h.max_tp, slice_, n_cubes // (tp // C)  # one pod here
    if kind == "torus":
        X, Y = h.dims[0], h.dims[1]
        line = gpus // X
        if tp <= X:
            return True, (lambda grp: np.unique(line[grp]).size == 1), (gpus.size // X) * (X // tp)
        unit = X if tp <= X * Y else X * Y
        if tp % unit:
            return False, None, 0
        ids = gpus // unit

        def adjacent(grp):
            u = np.unique(ids[grp])
            whole = u.size * unit == tp
            same_plane = unit == X * Y or np.unique(u // Y).size == 1
            step = np.diff(u % (Y if unit == X else gpus.size // (X * Y)))
            return whole and same_plane and np.all(step == 1)
        return tp <= h.max_tp, adjacent, (gpus.size // unit) // (tp // unit)
    raise AssertionError(kind)


@pytest.mark.parametrize("arch, gpus, params", CASES)
def test_tp_blocks_are_the_fault_free_allocation_and_obey_the_hbd(arch, gpus, params):
    fab = build(arch, gpus, params)
    limit = fab.hbd.max_tp
    for tp in range(1, limit + 1):
        ok, joinable, most = _physics(fab, tp)
        if not ok:
            with pytest.raises(FabricError, match="^tp: "):
                allocate(fab, tp)
            with pytest.raises(FabricError, match="^tp: "):
                tp_blocks(fab, tp)
            assert usable_gpus(fab, tp) == 0
            continue
        blocks = tp_blocks(fab, tp)
        assert np.array_equal(blocks, allocate(fab, tp).groups), tp
        assert blocks.shape == (most, tp), tp
        assert np.unique(blocks).size == blocks.size  # disjoint
        assert all(joinable(grp) for grp in blocks), tp
        assert usable_gpus(fab, tp) == most * tp


@pytest.mark.parametrize("arch, gpus, params", [c for c in CASES if c[0] in ("dgx", "nvl", "fattree")])
def test_tp_beyond_the_hbd_takes_whole_consecutive_domains(arch, gpus, params):
    """The MFU study's extension: whole fault-free domains (groups at the HBD's largest TP), joined in order."""
    fab = build(arch, gpus, params)
    limit = fab.hbd.max_tp
    whole = allocate(fab, limit).groups
    assert whole.shape[0] >= 2  # several domains to join
    blocks = tp_blocks(fab, 2 * limit)
    assert np.array_equal(blocks, whole[: whole.shape[0] // 2 * 2].reshape(-1, 2 * limit))
    assert np.array_equal(tp_across_domains(fab, 2 * limit), blocks)
    if limit > 1:  # with one-GPU domains every size is whole domains
        with pytest.raises(FabricError, match="not a multiple"):
            tp_blocks(fab, limit + 1)
        assert usable_gpus(fab, limit + 1) == 0


def test_balanced_need_takes_as_many_groups_from_the_fewest_domains():
    """NVL-36 x 2, TP 4: 9 groups per domain; 6 groups come 6 from the first domain, 12 as 6 + 6."""
    fab = build("nvl", 72, {"size": 36})
    dom = fab.group("domain")
    assert np.unique(dom[tp_blocks(fab, 4, 6)]).size == 1
    twelve = tp_blocks(fab, 4, 12)
    assert np.bincount(dom[twelve[:, 0]]).tolist() == [6, 6]


def test_a_pinned_tp_the_hbd_cannot_form_names_the_hbd_rule():
    """TP 96 on TPUv4 is not whole cubes (not a sub-cube shape the OCS can join): the MFU model says so."""
    from workloads.mfu import mfu_summary

    fab = build("tpuv4", 128, {})
    with pytest.raises(FabricError, match="^tp: 96: .*whole cubes"):
        # (without sequence parallelism: with it, 96 TP ranks cannot split the 2,048-token sequence either)
        mfu_summary(fab, "gpt3-175b", search=False, tp=96, sequence_parallel=False, comm="analytic")
