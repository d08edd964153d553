"""The viewer's document model without Bokeh: levels of detail, layouts, edges, overlays."""

from __future__ import annotations

import numpy as np
import pytest

from fabric.errors import FabricError
from fabric.model import DeviceKind
from fabric.viewer import Overlay, build_scene, style
from fabric.viewer.edges import drawable_links
from fabric.viewer.layout import compute_layout, tier_of
from fabric.viewer.levels import assign, choose_level, counts
from fabric.viewer.overlay import resolve
from topologies import build
from topologies.khop import ring_configuration

SMALL = [("dgx", 32, {}), ("nvl-72", 144, {}), ("nvl-576", 576, {}), ("tpuv4", 512, {}),
         ("khop-ring", 64, {}), ("khop-ring", 64, {"closed": True, "k": 3}), ("torus", 64, {"dims": "8x8"}),
         ("torus", 64, {"dims": "4x4x4"}), ("fat-tree", None, {}), ("rfabric", 64, {})]


@pytest.fixture(scope="module")
def fabrics():
    return {(name, str(params)): build(name, gpus, params) for name, gpus, params in SMALL}


def _polyline(scene, e):
    """The points of edge ``e``, cut out of its style's bundle."""
    r, o, n = (int(scene.edges[k][e]) for k in ("row", "start", "npts"))
    return scene.links["xs"][r][o:o + n], scene.links["ys"][r][o:o + n]


def test_every_device_gets_a_finite_position(fabrics):
    for key, fab in fabrics.items():
        lay = compute_layout(fab)
        x, y = lay.xy
        assert np.isfinite(x).all() and np.isfinite(y).all(), key


def test_switch_tiers_sit_above_the_compute_band(fabrics):
    for key, fab in fabrics.items():
        lay = compute_layout(fab)
        if lay.circle:
            continue
        band = tier_of(fab) < 0
        tor = fab.devices.kind == DeviceKind.TOR
        core = fab.devices.kind == DeviceKind.CORE
        assert lay.v[tor].min() > lay.v[band].max(), key
        if core.any():
            assert lay.v[core].min() > lay.v[tor].max(), key


def test_khop_line_places_nodes_in_line_order_and_the_closed_ring_on_a_circle(fabrics):
    line = fabrics[("khop-ring", "{}")]
    lay = compute_layout(line)
    gpus = line.gpu_ids
    pos = line.group("position")[gpus]
    assert np.all(np.diff(lay.u[gpus][np.argsort(pos, kind="stable")]) >= 0)
    assert np.all(lay.v[gpus] == 0)

    ring = fabrics[("khop-ring", str({"closed": True, "k": 3}))]
    lay = compute_layout(ring)
    assert lay.circle
    x, y = lay.xy
    r = np.hypot(x[ring.gpu_ids], y[ring.gpu_ids])
    assert np.allclose(r, lay.radius)


def test_tpu_cubes_do_not_overlap(fabrics):
    fab = fabrics[("tpuv4", "{}")]
    lay = compute_layout(fab)
    gpus = fab.gpu_ids
    cube = fab.group("cube")[gpus]
    boxes = [(lay.u[gpus][cube == c].min(), lay.u[gpus][cube == c].max(),
              lay.v[gpus][cube == c].min(), lay.v[gpus][cube == c].max()) for c in np.unique(cube)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            assert a[1] < b[0] or b[1] < a[0] or a[3] < b[2] or b[3] < a[2]
    # a cube shows its 64 chips at 64 distinct places
    first = gpus[cube == 0]
    assert len(set(zip(lay.u[first], lay.v[first]))) == 64


def test_levels_fold_nics_then_nodes_then_racks(fabrics):
    fab = fabrics[("dgx", "{}")]  # 4 nodes of 8 GPUs, 4 NVSwitch chips and 8 NICs each
    kind = fab.devices.kind
    dev = assign(fab, "device")
    assert dev.n == fab.n_devices - np.count_nonzero(kind == DeviceKind.NIC)
    nics = np.flatnonzero(kind == DeviceKind.NIC)
    assert np.all(kind[dev.unit_id[dev.of_device[nics]]] == DeviceKind.GPU)  # a NIC is drawn as its GPU
    switches = np.count_nonzero(np.isin(kind, (DeviceKind.TOR, DeviceKind.AGG, DeviceKind.CORE)))
    assert assign(fab, "node").n == 4 + switches
    assert assign(fab, "rack").n == 1 + switches  # 4 nodes per rack


def test_level_choice_follows_the_budgets(fabrics):
    fab = fabrics[("nvl-72", "{}")]
    res = resolve(fab, None)
    links = drawable_links(fab, res)
    c = counts(fab, links.src, links.dst, links.cls)
    assert c["device"][0] > c["node"][0] > c["rack"][0]
    assert c["device"][1] > c["node"][1] > c["rack"][1]
    assert choose_level(fab, 10**6, 10**6, links.src, links.dst, links.cls)[0] == "device"
    assert choose_level(fab, c["device"][0] - 1, 10**6, links.src, links.dst, links.cls)[0] == "node"
    assert choose_level(fab, 10**6, c["node"][1] - 1, links.src, links.dst, links.cls)[0] == "rack"
    level, reason = choose_level(fab, 1, 1, links.src, links.dst, links.cls)
    assert level == "rack" and "budget" in reason
    with pytest.raises(FabricError):
        choose_level(fab, 0)


def test_merged_edges_account_for_every_drawn_link(fabrics):
    for key, fab in fabrics.items():
        scene = build_scene(fab, level="device")
        res = resolve(fab, None)
        links = drawable_links(fab, res)
        g = assign(fab, "device").of_device
        if fab.hbd.kind == "ocs_cube":  # circuits are drawn between cubes
            cube = fab.group("cube")
            circ = links.cls == style.CIRCUIT
            g = np.where(circ, -1 - cube[links.src], g[links.src]), np.where(circ, -1 - cube[links.dst], g[links.dst])
        else:
            g = g[links.src], g[links.dst]
        between = int(np.count_nonzero(g[0] != g[1]))
        assert scene.edges["count"].sum() == between, key
        # the bundles hold every polyline, NaN-separated, where the edge table says
        pts = sum(np.count_nonzero(~np.isnan(xs)) for xs in scene.links["xs"])
        assert pts == scene.edges["npts"].sum(), key
        for e in range(0, scene.n_edges, 7):
            xs = _polyline(scene, e)[0]
            assert not np.isnan(xs).any()
            end = scene.edges["start"][e] + scene.edges["npts"][e]
            row = scene.links["xs"][scene.edges["row"][e]]
            assert end == len(row) or np.isnan(row[end]), key


def test_a_ring_around_a_faulty_node_is_drawn_with_a_skip_hop():
    fab = build("khop-ring", 32, {"k": 2})  # 8 nodes of 4 GPUs
    fab = fab.with_configuration(ring_configuration(fab, [[0, 1, 3, 4]]))  # node 2 bypassed
    scene = build_scene(fab, Overlay(faulty_nodes=[2]))
    cls = scene.edges["cls"]
    skip = cls == style.SKIP
    assert skip.sum() == 4  # one per GPU (one lane)
    assert (cls == style.LIT).sum() == 8
    assert "skip hop (bypasses a node)" in scene.links["label"]
    # the skip hop bows below the line, deeper than a one-node hop
    depth = lambda mask: min(_polyline(scene, e)[1].min() for e in np.flatnonzero(mask))  # noqa: E731
    assert depth(skip) < depth(cls == style.LIT) < 0


def test_tpu_circuits_join_cubes_not_chips(fabrics):
    fab = fabrics[("tpuv4", "{}")]  # 8 cubes in a 2x2x2 torus of cubes
    scene = build_scene(fab, level="device")
    circ = scene.edges["cls"] == style.CIRCUIT
    assert circ.any()
    assert np.all(scene.edges["a"][circ] == -1) and np.all(scene.edges["b"][circ] == -1)  # ends are cube boxes
    assert scene.edges["count"][circ].sum() == len(fab.configuration.circuits)
    assert len(scene.boxes["left"]) == 8
    assert circ.sum() == 12  # the 12 cube pairs of a 2x2x2 grid


def test_a_fault_marks_its_glyphs_and_its_cube():
    fab = build("tpuv4", 512, {})
    host = int(fab.group("node")[fab.gpu_ids][70])  # a host in cube 1
    scene = build_scene(fab, Overlay(faulty_nodes=[host]), level="device")
    red = np.asarray(scene.nodes["color"]) == style.FAULT_COLOR
    assert red.sum() == 4 and np.all(scene.nodes["faulty"][red] == 1)
    assert list(scene.boxes["legend"]).count("cube lost (a faulty chip)") == 1
    assert scene.boxes["faulty"].tolist() == [0, 4, 0, 0, 0, 0, 0, 0]


def test_aggregated_glyphs_count_members_faults_and_groups():
    fab = build("dgx", 64, {})  # 8 nodes
    gpus = fab.gpu_ids
    groups = [gpus[0:8], gpus[8:16]]
    scene = build_scene(fab, Overlay(faulty_nodes=[3], tp_groups=groups), level="node")
    nodes = scene.nodes
    names = list(nodes["name"])
    n0, n1, n3, n5 = (names.index(f"node {i}") for i in (0, 1, 3, 5))
    assert nodes["gpus"][n0] == 8
    assert nodes["faulty"][n3] == 8 and nodes["color"][n3] == style.FAULT_COLOR
    assert nodes["tp"][n0] == "0" and nodes["tp"][n1] == "1"
    assert nodes["color"][n0] == style.GROUP_PALETTE[0] and nodes["color"][n1] == style.GROUP_PALETTE[1]
    assert nodes["color"][n5] == style.IDLE_COLOR and nodes["tp"][n5].startswith("none")


def test_load_colouring_bins_utilisation_and_keeps_the_hottest_of_merged_links():
    fab = build("fat-tree", None, {})
    util = np.full(len(fab.links), 0.1)
    L = fab.links
    kind = fab.devices.kind
    up = np.flatnonzero(kind[L.src] == DeviceKind.TOR)
    util[up[0]] = 0.95
    scene = build_scene(fab, Overlay(link_utilisation=util, link_bytes=util * 1e9), color_links_by="load")
    assert "load >= 80%" in scene.links["label"]
    hot = np.nanargmax(scene.edges["util"])
    assert scene.edges["util"][hot] == pytest.approx(0.95)
    assert scene.styles[scene.edges["style"][hot]][0] == "load >= 80%"
    assert np.isclose(np.nansum(scene.edges["bytes"]), 1e9 * util[np.flatnonzero(
        assign(fab, "device").of_device[L.src] != assign(fab, "device").of_device[L.dst])].sum())


@pytest.mark.parametrize("overlay, field", [
    (Overlay(faulty_devices=[10**6]), "faulty_devices"),
    (Overlay(faulty_nodes=[-1]), "faulty_nodes"),
    (Overlay(tp_groups=[[0, 1], [1, 2]]), "tp_groups"),
    (Overlay(link_utilisation=[0.5]), "link_utilisation"),
    (Overlay(link_bytes=np.full(512, -1.0)), "link_bytes"),
])
def test_bad_overlays_name_the_field(overlay, field):
    fab = build("fat-tree", None, {})
    with pytest.raises(FabricError) as err:
        resolve(fab, overlay)
    assert err.value.field == field


def test_groups_must_hold_gpus():
    fab = build("dgx", 16, {})
    chip = int(np.flatnonzero(fab.devices.kind == DeviceKind.SWITCH_CHIP)[0])
    with pytest.raises(FabricError, match="not GPUs"):
        resolve(fab, Overlay(tp_groups=[[0, chip]]))


def test_unknown_options_are_rejected():
    fab = build("dgx", 16, {})
    with pytest.raises(FabricError):
        build_scene(fab, color_links_by="colour")
    with pytest.raises(FabricError):
        build_scene(fab, level="pod")
