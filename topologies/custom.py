"""A user's own topology: networkx node-link JSON, validated.

Format (what ``networkx.node_link_data`` writes, with these attributes)::

    {"graph": {"hbd": {"kind": "switch_domain", "gpus_per_node": 8, "domain_gpus": 8}},   # optional
     "nodes": [{"id": "gpu0", "kind": "gpu", "node": 0}, {"id": "sw0", "kind": "tor"}, ...],
     "links": [{"source": "gpu0", "target": "sw0", "capacity": "400Gbps", "latency": "1us",
                "medium": "fiber", "layer": "dcn"}, ...]}

* node ``kind``: gpu, nic, switch_chip, tor, agg, core, ocs; optional integer
  groups node, rack, tor, pod, cube, domain, position.
* link ``capacity``: bytes/s per direction as a number, or a unit string;
  ``latency`` seconds or a unit string (default 0); ``medium`` pcb/copper/fiber
  (default fiber); ``layer`` hbd/dcn (default dcn).  ``edges`` is accepted for
  ``links``.
* The graph is undirected (``directed`` false or absent): one link per cable, its
  ``capacity`` in each direction.
* The bill of materials is empty: a custom topology has no catalog items
  (cost reports zero) unless ``graph.bom`` lists ``{item, scope, count}``.
* Other keys are the graph's own attributes and are ignored, but one close to a
  known key (``latncy``, ``meduim``, ``grpah``) is refused as its misspelling.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fabric.catalog import Catalog
from fabric.checks import is_whole, misspelt_key, shown
from fabric.errors import FabricError
from fabric.model import GROUPS, KIND_BY_LABEL, LAYER_BY_LABEL, MEDIUM_BY_LABEL, SCOPES, FabricBuilder, HBDSpec
from fabric.units import parse_bandwidth, parse_time

HBD_KINDS = ("switch_domain", "ocs_cube", "khop_line", "torus", "none")


#: Bounds of a link of a topology file: 1 B/s to 1e18 B/s (8 Eb/s) per direction, latency up to 1,000 s.
#: Far outside any real link (a geostationary hop is 0.25 s), and inside what float arithmetic on times holds.
MIN_CAPACITY, MAX_CAPACITY, MAX_LATENCY = 1.0, 1e18, 1e3
#: Largest count of one bill-of-materials line (2**40): priced sums stay exact in float.
MAX_BOM_COUNT = 1 << 40
#: Largest group id (node, rack, ToR, ...) of a node: 2**31 - 1, far above any cluster's count; an id beyond
#: int64 (10**30) raised OverflowError when stored.
MAX_GROUP_ID = (1 << 31) - 1


#: The keys this reader knows, at each level of a node-link file; others are the graph's own attributes and are
#: kept, but one close to these (``latncy``, ``meduim``, ``grpah``) is refused as its misspelling.  ``key``,
#: ``link``, ``state`` and the ports are what :meth:`fabric.model.Fabric.to_networkx` exports besides.
TOP_KEYS = ("directed", "multigraph", "graph", "nodes", "links", "edges")
GRAPH_KEYS = ("hbd", "bom", "architecture")
NODE_KEYS = ("id", "kind") + GROUPS
LINK_KEYS = ("source", "target", "capacity", "latency", "medium", "layer", "key", "link", "state", "src_port",
             "dst_port")


def load_topology(path: str | Path, catalog: Catalog | None = None):
    """Read and validate a node-link JSON file into a Fabric.

    Raises
    ------
    FabricError
        Naming ``FILE:nodes[i].field`` or ``FILE:links[j].field`` and what is allowed.
    """
    from fabric.files import load_json

    p = Path(path)
    doc = load_json(p, "topology")
    return topology_from_dict(doc, p.name, catalog)


def topology_from_dict(doc, where: str = "topology", catalog: Catalog | None = None):
    """Build a Fabric from a node-link dict (see module docstring)."""
    # long: a file's validation, field by field in file order, each with its own one-line error; the
    # checks share the node-id map and the groups they fill
    if not isinstance(doc, dict) or not isinstance(doc.get("nodes"), list):
        raise FabricError(f"{where}:nodes", "must be a list of nodes (networkx node-link format)")
    misspelt_key(doc, TOP_KEYS, f"{where}:")
    if "links" in doc and "edges" in doc:  # networkx reads one of them; the other was ignored without a word
        raise FabricError(f"{where}:edges", "given with 'links'; give the links under one of the two keys")
    directed = doc.get("directed", False)
    if directed is not None and not isinstance(directed, bool):
        raise FabricError(f"{where}:directed", f"{shown(directed)} must be true or false")
    if directed:  # a DiGraph's a->b and b->a were two links, each with the capacity both ways: twice the bandwidth
        raise FabricError(f"{where}:directed", "is true, but a link carries its capacity in both directions; give "
                                               "an undirected graph (directed: false), one link per cable")
    multigraph = doc.get("multigraph", False)  # parallel links are kept either way; a non-bool is a broken file
    if multigraph is not None and not isinstance(multigraph, bool):
        raise FabricError(f"{where}:multigraph", f"{shown(multigraph)} must be true or false")
    links = doc.get("links", doc.get("edges"))
    if not isinstance(links, list):
        raise FabricError(f"{where}:links", "must be a list of links (networkx node-link format)")
    # absent or null is empty; an empty list or string is the wrong shape (it was taken for "no graph data")
    graph = _mapping_or_none(doc.get("graph"), f"{where}:graph", "a mapping of graph attributes (hbd, bom)")
    misspelt_key(graph, GRAPH_KEYS, f"{where}:graph.")
    b = FabricBuilder("custom", {"file": where}, catalog.category if catalog else None)
    index: dict = {}
    text_ids: dict = {}
    kinds, names, groups = [], [], {g: [] for g in GROUPS}
    for i, node in enumerate(doc["nodes"]):
        f = f"{where}:nodes[{i}]"
        if not isinstance(node, dict) or "id" not in node:
            raise FabricError(f, "must be an object with an 'id'")
        misspelt_key(node, NODE_KEYS, f"{f}.")
        nid = node["id"]
        if not isinstance(nid, (str, int)) or isinstance(nid, bool):
            raise FabricError(f"{f}.id", "must be a string or an integer")
        if nid in index:
            raise FabricError(f"{f}.id", f"duplicate id {nid!r}")
        if str(nid) in text_ids:  # 1 and "1" are one device name: a flow's "src": "1" took the later in silence
            raise FabricError(f"{f}.id", f"{nid!r} names the same device as {text_ids[str(nid)]!r}; give ids "
                                         "that differ as text")
        text_ids[str(nid)] = nid
        kind = node.get("kind")
        if not isinstance(kind, str) or kind not in KIND_BY_LABEL:
            raise FabricError(f"{f}.kind", f"{shown(kind)} not allowed; use one of {', '.join(KIND_BY_LABEL)}")
        for gname in GROUPS:
            v = node.get(gname, -1)
            if not is_whole(v) or not -1 <= v <= MAX_GROUP_ID:  # 3.0 (as pandas writes it) is the group 3
                raise FabricError(f"{f}.{gname}", f"{shown(v)} must be an integer in [0, {MAX_GROUP_ID}]")
            groups[gname].append(int(v))
        index[nid] = i
        kinds.append(KIND_BY_LABEL[kind])
        names.append(str(nid))
    if not kinds:
        raise FabricError(f"{where}:nodes", "is empty")
    kinds_arr = np.array(kinds)
    offset = b.n_devices
    for i, kind in enumerate(kinds):  # one at a time so that device ids follow file order
        b.add_devices(kind, 1, names=[names[i]], **{g: groups[g][i] for g in GROUPS})
    src, dst, cap, lat, med, lay = [], [], [], [], [], []
    for j, link in enumerate(links):
        f = f"{where}:links[{j}]"
        if not isinstance(link, dict):
            raise FabricError(f, "must be an object")
        misspelt_key(link, LINK_KEYS, f"{f}.")
        for end in ("source", "target"):
            # true and false are no ids (a node's id refuses them) but equal 1 and 0 in the id map: they linked
            # nodes 1 and 0 in silence
            if isinstance(link.get(end), bool) or not isinstance(link.get(end), (str, int)) \
                    or link.get(end) not in index:
                raise FabricError(f"{f}.{end}", f"{shown(link.get(end))} is not a node id")
        if link["source"] == link["target"]:
            raise FabricError(f, "a link must join two different nodes")
        if "capacity" not in link:
            raise FabricError(f"{f}.capacity", "missing; bytes/s per direction or a unit string like 400Gbps")
        c = parse_bandwidth(link["capacity"], f"{f}.capacity")
        if not MIN_CAPACITY <= c <= MAX_CAPACITY:  # beyond these, times and utilisations overflow float
            raise FabricError(f"{f}.capacity", f"{shown(link['capacity'])} must be in [{MIN_CAPACITY:g}, "
                                               f"{MAX_CAPACITY:g}] bytes/s")
        medium = link.get("medium", "fiber")
        layer = link.get("layer", "dcn")
        if not isinstance(medium, str) or medium not in MEDIUM_BY_LABEL:
            raise FabricError(f"{f}.medium", f"{shown(medium)} not allowed; use pcb, copper or fiber")
        if not isinstance(layer, str) or layer not in LAYER_BY_LABEL:
            raise FabricError(f"{f}.layer", f"{shown(layer)} not allowed; use hbd or dcn")
        src.append(index[link["source"]] + offset)
        dst.append(index[link["target"]] + offset)
        cap.append(c)
        lat.append(parse_time(link.get("latency", 0.0), f"{f}.latency"))
        if lat[-1] > MAX_LATENCY:
            raise FabricError(f"{f}.latency", f"{shown(link['latency'])} must be at most {MAX_LATENCY:g} s")
        med.append(medium)
        lay.append(layer)
    for medium in MEDIUM_BY_LABEL:
        for layer in LAYER_BY_LABEL:
            sel = [t for t in range(len(src)) if med[t] == medium and lay[t] == layer]
            if sel:
                b.add_links(np.array(src)[sel], np.array(dst)[sel], capacity=np.array(cap)[sel],
                            latency=np.array(lat)[sel], medium=medium, layer=layer)
    bom = graph.get("bom")
    bom = [] if bom is None else bom
    if not isinstance(bom, list):
        raise FabricError(f"{where}:graph.bom", "must be a list of {item, scope, count}")
    for t, line in enumerate(bom):
        f = f"{where}:graph.bom[{t}]"
        if not isinstance(line, dict) or line.get("scope") not in SCOPES or not is_whole(line.get("count")) \
                or not isinstance(line.get("item"), str):
            raise FabricError(f, f"must be {{item, scope ({'/'.join(SCOPES)}), count (integer)}}")
        if not 0 <= line["count"] <= MAX_BOM_COUNT:
            raise FabricError(f"{f}.count", f"{shown(line['count'])} must be in [0, {MAX_BOM_COUNT}]")
        if catalog is not None:
            try:
                catalog.get(line["item"])
            except FabricError as exc:
                raise FabricError(f"{f}.item", exc.message) from None
        b.add_bom(line["item"], line["scope"], int(line["count"]))
    n_gpu = int(np.count_nonzero(kinds_arr == KIND_BY_LABEL["gpu"]))
    if n_gpu == 0:
        raise FabricError(f"{where}:nodes", "has no GPU; give at least one node with kind 'gpu'")
    # no HBD: TP 1, as a fat-tree's (a domain of every GPU let the MFU search pick a TP that goodput then refused)
    hbd_doc = graph.get("hbd")
    if hbd_doc is None:
        hbd_doc = {"kind": "none", "gpus_per_node": 1, "domain_gpus": 1, "max_tp": 1}
    try:
        if not isinstance(hbd_doc, dict) or hbd_doc.get("kind") not in HBD_KINDS:
            raise TypeError
        # a size given as an integral float (2.0) is the whole number it writes, as for the node groups
        hbd = HBDSpec(**{k: tuple(int(d) if is_whole(d) else d for d in v) if k == "dims" else
                         int(v) if is_whole(v) and not isinstance(v, int) else v for k, v in hbd_doc.items()})
        _check_hbd(hbd, f"{where}:graph.hbd", n_gpu)
    except TypeError:
        raise FabricError(f"{where}:graph.hbd", f"must be {{kind ({', '.join(HBD_KINDS)}), gpus_per_node, "
                                                "domain_gpus, ...}") from None
    return b.build(hbd)


def _mapping_or_none(value, field: str, what: str) -> dict:
    """``value`` as a dict: ``None`` is empty; anything but a mapping is refused (``[]`` and ``""`` too)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise FabricError(field, f"must be {what}; got {type(value).__name__} {shown(value)}")
    return value


def _check_hbd(hbd: HBDSpec, field: str, n_gpu: int) -> None:
    """Whole numbers where the solvers divide by them: a size of 0 or 'abc' must stop here."""
    for name in ("gpus_per_node", "domain_gpus", "tp_multiple_of"):
        v = getattr(hbd, name)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= max(n_gpu, 1):
            raise FabricError(f"{field}.{name}",
                              f"{shown(v)} must be a whole number in [1, {max(n_gpu, 1)}] (the GPUs)")
    for name in ("max_tp", "k", "cube_gpus"):
        v = getattr(hbd, name)
        if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= max(n_gpu, 1):
            raise FabricError(f"{field}.{name}", f"{shown(v)} must be a whole number in [0, {max(n_gpu, 1)}]")
    if not isinstance(hbd.closed, bool):
        raise FabricError(f"{field}.closed", f"{shown(hbd.closed)} must be true or false")
    if not all(isinstance(d, int) and not isinstance(d, bool) and 1 <= d <= max(n_gpu, 1) for d in hbd.dims):
        raise FabricError(f"{field}.dims", f"{list(hbd.dims)!r} must be whole numbers in [1, {max(n_gpu, 1)}] "
                                           "(the GPUs)")
