"""TPUv4-style pod: 4x4x4 cubes of chips joined through OCS (TPU v4 paper, arXiv 2304.01433).

* A cube is 64 chips in a 4x4x4 mesh (electrical ICI links; PCB inside a
  4-chip host, copper between hosts).  Chip (x, y, z) has index x + 4y + 16z;
  the 4 chips of a host share (y, z) (assumed: the host layout is not
  published, only its size of 4 chips).
* Each of the 6 faces has 16 chips with one optical link out: 96 links per
  cube, each a fibre into a port of one OCS.  OCS ``(d, pos)`` (3 dimensions x
  16 face positions = 48 per pod) takes the + and - face links of position
  ``pos`` of every cube: 128 of its 136 ports for 64 cubes.  64 cubes ->
  4,096 chips, 48 OCS, 6,144 optical links (FIGURES).
* Larger clusters are several pods of up to 64 cubes, each with its own 48
  OCS.  The default configuration arranges each pod's cubes in the most cubic
  grid and closes a torus in every dimension (a 16x16x16 torus for 64 cubes).
* Slices are built from whole cubes; a cube with a faulty host cannot join one
  (FIGURES: TPUv4 slices).
* DCN: one 400G NIC per 4-chip host (assumed 100G per chip) into a Clos.
"""

from __future__ import annotations

import math

import numpy as np

from fabric.catalog import Catalog
from fabric.model import Configuration, DeviceKind, Fabric, FabricBuilder, HBDKind, HBDSpec
from topologies.clos import DCN_DRIVERS, attach_clos, dcn_params
from topologies.params import Param, positive
from topologies.servers import propagate_tor
from topologies.size import Size, dcn_size

CUBE = 4
CHIPS_PER_CUBE = CUBE ** 3
CHIPS_PER_HOST = 4
MAX_CUBES_PER_POD = 64

PARAMS = [
    Param("cubes", int, None, "number of 4x4x4 cubes (default: ceil(gpus / 64), or 64)", check=positive),
    Param("chip", str, "tpu_v4", "catalog id of the accelerator"),
    Param("ocs", str, "ocs_palomar", "catalog id of the OCS"),
    *dcn_params(),
]


def cube_grid(n: int) -> tuple[int, int, int]:
    """The most cubic (gx, gy, gz) with gx * gy * gz == n."""
    best = (n, 1, 1)
    for gx in range(1, n + 1):
        if n % gx:
            continue
        for gy in range(1, n // gx + 1):
            if (n // gx) % gy:
                continue
            gz = n // gx // gy
            cand = tuple(sorted((gx, gy, gz), reverse=True))
            if max(cand) - min(cand) < max(best) - min(best):
                best = cand
    return best


def size(params: dict, gpus: int | None, catalog: Catalog) -> Size:
    """Closed-form size (see :func:`build`): chips, hosts' NICs, OCS, ICI and face links, the Clos of hosts."""
    n_cubes = params["cubes"] or (math.ceil(gpus / CHIPS_PER_CUBE) if gpus else MAX_CUBES_PER_POD)
    G, hosts = n_cubes * CHIPS_PER_CUBE, n_cubes * CHIPS_PER_CUBE // CHIPS_PER_HOST
    host_bw = CHIPS_PER_HOST * catalog.value(params["chip"], "nic_bandwidth")
    devices, links = dcn_size(catalog, params, hosts, host_bw)
    ocs = 48 * math.ceil(n_cubes / MAX_CUBES_PER_POD)
    return Size(G, G + hosts + ocs + devices, (144 + 96) * n_cubes + G + links, ("cubes", "gpus", *DCN_DRIVERS))


def build(params: dict, gpus: int | None, catalog: Catalog) -> Fabric:
    """Build TPUv4 cubes of 64 chips in pods of up to 64 cubes, joined by OCS, with a Clos DCN.

    Parameters
    ----------
    params : dict
        :data:`PARAMS` resolved: ``cubes`` (default: ``ceil(gpus / 64)``),
        ``chip`` (catalog id), and the DCN's.
    gpus : int, optional
        Chips wanted (default: one full pod of 64 cubes); rounded up to whole cubes.
    catalog : Catalog

    Closed forms
    ------------
    With ``C`` cubes in ``P = ceil(C / 64)`` pods: ``64 C`` chips on ``16 C``
    4-chip hosts; ``144 C`` electrical ICI links (3 x 4 x 4 x 3 per 4x4x4
    mesh); ``96 C`` optical face links, one OCS port each; ``48 P`` OCS.

    Examples
    --------
    >>> from topologies import build
    >>> f = build("tpuv4", 128)
    >>> c = f.counts()
    >>> c["gpus"], c["hosts"], c["ocs"], c["ocs_ports"], int((f.links.layer == 0).sum())
    (128, 32, 48, 192, 480)
    """
    chip_item = params["chip"]
    catalog.get(chip_item)
    # long: one build in construction order (chips, cube faces, OCS per face and dimension, hosts, DCN);
    # the steps share the chip / cube / face index arrays
    n_cubes = params["cubes"] or (math.ceil(gpus / CHIPS_PER_CUBE) if gpus else MAX_CUBES_PER_POD)
    b = FabricBuilder("tpuv4", {**params, "cubes": n_cubes}, catalog.category)
    if gpus and n_cubes * CHIPS_PER_CUBE != gpus:
        b.note(f"rounded {gpus} chips up to {n_cubes} whole 64-chip cubes")
    n_pods = math.ceil(n_cubes / MAX_CUBES_PER_POD)
    pod_of_cube = np.arange(n_cubes) // MAX_CUBES_PER_POD
    G = n_cubes * CHIPS_PER_CUBE
    chip = np.arange(G)
    cube = chip // CHIPS_PER_CUBE
    local = chip % CHIPS_PER_CUBE
    x, y, z = local % CUBE, (local // CUBE) % CUBE, local // (CUBE * CUBE)
    host = cube * (CHIPS_PER_CUBE // CHIPS_PER_HOST) + y + CUBE * z
    hosts_per_rack = CHIPS_PER_CUBE // CHIPS_PER_HOST  # a cube is a rack
    ids = b.add_devices(DeviceKind.GPU, G, node=host, rack=cube, cube=cube, domain=pod_of_cube[cube])
    link_bw = catalog.value(chip_item, "hbd_bandwidth")
    lat = catalog.value("nvlink_latency", "latency")
    coords = np.stack([x, y, z])
    stride = np.array([1, CUBE, CUBE * CUBE])

    # intra-cube mesh: chip -> +1 neighbour in each dimension; x stays inside a host (PCB)
    for d in range(3):
        has = coords[d] < CUBE - 1
        b.add_links(ids[has], ids[has] + stride[d], capacity=link_bw, latency=lat,
                    medium="pcb" if d == 0 else "copper", layer="hbd")

    # faces -> OCS (pod, d, pos); + face is coord 3, - face coord 0
    ocs = b.add_devices(DeviceKind.OCS, n_pods * 3 * CUBE * CUBE, domain=np.repeat(np.arange(n_pods), 48))
    plus_links, minus_links = {}, {}
    for d in range(3):
        others = [e for e in range(3) if e != d]
        for sign, face in ((+1, CUBE - 1), (-1, 0)):
            on_face = coords[d] == face
            pos = coords[others[0]][on_face] + CUBE * coords[others[1]][on_face]
            c = cube[on_face]
            ocs_dev = ocs[pod_of_cube[c] * 48 + d * 16 + pos]
            lids = b.add_links(ids[on_face], ocs_dev, capacity=link_bw, latency=lat, medium="fiber", layer="hbd",
                               state="ocs_port")
            table = plus_links if sign > 0 else minus_links
            table[d] = (c, pos, lids)
    n_face_links = 6 * CUBE * CUBE * n_cubes
    trx = catalog.find_by_bandwidth("transceiver", link_bw)
    b.add_bom(trx, "hbd", n_face_links)
    b.add_bom("fiber", "hbd", n_face_links)
    b.add_bom(params["ocs"], "hbd", ocs.size)

    # default circuits: + port of a cube -> - port of the next cube along d in the pod's grid
    next_cube = np.empty((3, n_cubes), dtype=np.int64)
    for p in range(n_pods):
        cubes_in_pod = np.flatnonzero(pod_of_cube == p)
        grid = cube_grid(cubes_in_pod.size)
        gcoord = np.stack(np.unravel_index(np.arange(cubes_in_pod.size), grid, order="F"))
        for d in range(3):
            nxt = gcoord.copy()
            nxt[d] = (nxt[d] + 1) % grid[d]
            next_cube[d, cubes_in_pod] = cubes_in_pod[np.ravel_multi_index(tuple(nxt), grid, order="F")]
    circuits = []
    for d in range(3):
        pc, ppos, plids = plus_links[d]
        mc, mpos, mlids = minus_links[d]
        minus_lid = np.empty((n_cubes, CUBE * CUBE), dtype=np.int64)
        minus_lid[mc, mpos] = mlids
        circuits.append(np.stack([plids, minus_lid[next_cube[d, pc], ppos]], axis=1))
    cfg = Configuration(circuits=np.concatenate(circuits))

    # DCN: one NIC per host, every chip of the host on it by PCIe
    n_hosts = G // CHIPS_PER_HOST
    host_bw = CHIPS_PER_HOST * catalog.value(chip_item, "nic_bandwidth")
    nic_item = catalog.find_by_bandwidth("nic", host_bw)
    nics = b.add_devices(DeviceKind.NIC, n_hosts, node=np.arange(n_hosts), rack=np.arange(n_hosts) // hosts_per_rack)
    b.add_links(ids, nics[host], capacity=catalog.value("pcie_gen5_x16", "bandwidth"),
                latency=catalog.value("pcb_latency", "latency"), medium="pcb", layer="dcn")
    b.add_bom(nic_item, "dcn", n_hosts)
    info = attach_clos(b, nics, catalog, port_bandwidth=host_bw, params=params)
    propagate_tor(b, ids, info.tor_of_endpoint[host], info.pod_of_endpoint[host])
    b.add_bom(chip_item, "compute", G)
    b.add_bom("server_4gpu", "compute", n_hosts)
    if n_pods > 1:
        b.note(f"{n_cubes} cubes in {n_pods} OCS pods of up to {MAX_CUBES_PER_POD} cubes")
    pod_chips = min(n_cubes, MAX_CUBES_PER_POD) * CHIPS_PER_CUBE
    return b.build(HBDSpec(kind=HBDKind.OCS_CUBE, gpus_per_node=CHIPS_PER_HOST, domain_gpus=pod_chips,
                           max_tp=pod_chips, dims=(CUBE, CUBE, CUBE), cube_gpus=CHIPS_PER_CUBE, closed=True),
                   cfg)
