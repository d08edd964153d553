"""`fabric simulate`: flow-level simulation of a collective or of a flows file.

Ranks are GPU indices ``0..gpus-1`` (positions in ``Fabric.gpu_ids``).  In a
flows file (a JSON list of ``{id, src, dst, bytes, start_s, after}``), ``src``
and ``dst`` are device names (strings, as ``fabric build`` names them:
``gpu3``, ``tor0``, or the names of a ``--topology`` file) or GPU indices
(integers); ``bytes`` is a number or a size string (``1GiB``); ``start_s``
(default 0) seconds or a time string (``10us``); ``after`` (optional) lists
ids of flows that must finish first; ``id`` defaults to the position.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from cli.common import (CATALOG_OPT, GPUS_OPT, JSON_OPT, PARAM_OPT, TOPOLOGY_OPT, build_fabric, console, emit_json,
                        given, parse_int_list, print_rows)
from cli.validate import MAX_BYTES
from fabric.checks import MAX_SECONDS, shown
from fabric.errors import FabricError
from fabric.units import format_bandwidth, format_bytes, format_time, parse_bytes, parse_time

BOTTLENECKS = 5
#: Latest release time of a flow in a flows file (s): about 30 years, far from float overflow in the event loop.
MAX_START_S = MAX_SECONDS
#: Peak memory of a collective's simulation per rank, the fabric included (measured: ``fabric simulate dgx``,
#: 65,536 ranks in one group, 1 GiB, peak RSS by /usr/bin/time): tree 29 KB, all-reduce with auto 30 KB (it
#: times every candidate, tree among them), nvls-tree 23 KB, broadcast 12 KB, ring, all-gather and
#: reduce-scatter 9.5 KB, hierarchical 5.9 KB.  Linear in ranks (32,768 ranks: half of each).
SIM_BYTES_PER_RANK = {"tree": 32 << 10, "nvls-tree": 24 << 10}
SIM_BYTES_PER_RANK_OTHER = 12 << 10


def parse_ranks(text: str) -> list[int]:
    """``0,1,2`` or ranges ``0-7,16-23`` -> list of GPU indices."""
    return parse_int_list(text, "--ranks", "cannot read {part!r}; give GPU indices like 0,1,2 or 0-7", ranges=True,
                          empty="no GPU indices given", unique=True)


def _check_rank_lists(lists: list[list[int]], name, algo: str, blame: str) -> None:
    """Groups of at least 2 ranks whose flows (all-to-all) and simulator memory fit the limits, before any flow."""
    from fabric.limits import check, check_memory_per
    from fabric.sim.collectives import CollectiveName

    if len(lists[0]) < 2:  # no flow: time 0, and the table printed algbw infPB/s, busbw nanB/s
        raise FabricError(blame, "one rank moves no data (time 0, bandwidth undefined); give at least 2 ranks")
    if name == CollectiveName.ALL_TO_ALL:  # one flow per ordered pair of ranks, in every group (measured 8.5 s per 1 M)
        # the group count is stated: 1,024 groups of 64 read "4,128,768 flows (ranks x (ranks - 1) per group)"
        groups = f" x {len(lists):,} groups" if len(lists) > 1 else ""
        check("flows", sum(len(r) * (len(r) - 1) for r in lists), blame,
              f"all-to-all: ranks x (ranks - 1) per group{groups}")
    n_ranks = sum(len(r) for r in lists)
    per_rank = SIM_BYTES_PER_RANK.get("tree" if algo == "auto" and name == CollectiveName.ALL_REDUCE else algo,
                                      SIM_BYTES_PER_RANK_OTHER)
    # a tree all-reduce over 10^6 ranks grew to ~30 GB before any error: refused up front, as the fabric is
    check_memory_per(n_ranks, "ranks", per_rank, blame, f"({name}, {algo})")


def _check_seed(seed_given: bool, ecmp: str) -> None:
    """``--seed`` seeds only the per-flow hash of ``--ecmp hash``: the ideal split draws nothing."""
    if seed_given and ecmp != "hash":  # the seed changed no number
        raise FabricError("--seed", f"seeds the per-flow hash of --ecmp hash; --ecmp {ecmp} draws nothing (add "
                                    "--ecmp hash, or leave --seed out)")


def _check_pipelining(name, algorithm: str, protocol: str, channels: Optional[int], chunks: Optional[int]) -> None:
    """``--chunks`` and ``--channels`` only where the collective reads them (:func:`_check_chunks`,
    :func:`_check_channels`); the algorithm and protocol are read case-blind, as the simulator reads them."""
    algo = algorithm.lower()
    _check_chunks(chunks, name, algo, protocol.lower(), channels)
    _check_channels(name, algo, channels, chunks)


def _check_chunks(chunks: Optional[int], name, algo: str, protocol: str, channels: Optional[int]) -> None:
    """Refuse ``--chunks`` where nothing is pipelined in pieces: NCCL's rings and trees pipeline by their own
    protocol steps, so there it changed nothing, without a word; a broadcast, or a tree all-reduce in the flow
    model (the DAG's pieces), is where it applies."""
    from fabric.sim.collectives import CollectiveName

    tree_flow_dag = (name == CollectiveName.ALL_REDUCE and algo == "tree" and protocol == "none"
                     and channels in (None, 1))
    if chunks is not None and not (name == CollectiveName.BROADCAST or tree_flow_dag):
        raise FabricError("--chunks", "only with --collective broadcast, or a tree all-reduce in the flow model "
                                      "(--algorithm tree --protocol none): NCCL's rings and trees pipeline by their "
                                      "own protocol steps")


def rank_groups(n_gpus: int, ranks: Optional[str], group_size: Optional[int], groups: Optional[int]) -> list[list[int]]:
    """The rank lists of the collectives to run (one per group)."""
    if ranks is not None and group_size is not None:
        raise FabricError("--ranks", "give either --ranks or --group-size, not both")
    if ranks is not None:
        if groups not in (None, 1):
            raise FabricError("--groups", "only with --group-size")
        return [parse_ranks(ranks)]
    if group_size is None:
        raise FabricError("--ranks", "missing; give --ranks r1,r2,... or --group-size n [--groups m]")
    m = 1 if groups is None else groups
    if group_size < 1:
        raise FabricError("--group-size", f"{group_size} must be >= 1")
    if m < 1:
        raise FabricError("--groups", f"{m} must be >= 1")
    if group_size * m > n_gpus:
        if groups is None:  # "--groups: 1 groups of 16 GPUs" blamed a flag that was not given
            raise FabricError("--group-size", f"{group_size} GPUs per group; the topology has {n_gpus}")
        raise FabricError("--groups", f"{m} groups of {group_size} GPUs need {group_size * m} GPUs; "
                                      f"the topology has {n_gpus}")
    return [list(range(g * group_size, (g + 1) * group_size)) for g in range(m)]


#: Memory of a flows file once parsed into JSON objects and :class:`fabric.sim.Flow` objects, per byte of
#: the file (measured: a compact 40.6 MB file of 1 M flows peaks at 692 MB with a 16,384-GPU fabric of
#: ~100 MB, so ~15 B per byte; indented files have more bytes per flow and need less).  Checked before
#: parsing: a file of the 1 GiB the reader accepts would need ~16 GiB.
PARSED_BYTES_PER_FILE_BYTE = 16


def read_flows(path: Path, fabric) -> list:
    """Read a flows file into :class:`fabric.sim.Flow` objects (device ids resolved)."""
    from fabric.sim import Flow

    where = path.name
    from fabric.files import load_json
    from fabric.limits import check

    try:
        n_bytes = path.stat().st_size
    except OSError:
        n_bytes = 0  # load_json names what is wrong with the path
    check("memory", n_bytes * PARSED_BYTES_PER_FILE_BYTE, "--flows",
          f"{where} is {n_bytes:,} B; its parsed flows take ~{PARSED_BYTES_PER_FILE_BYTE} B per byte")
    doc = load_json(path, "--flows")
    if not isinstance(doc, list):
        raise FabricError(f"{where}", "must be a JSON list of flows {id, src, dst, bytes, start_s, after}")
    if not doc:
        raise FabricError(f"{where}", "lists no flows; give at least one {src, dst, bytes}")
    check("flows", len(doc), "--flows", f"{where} lists {len(doc):,}")
    names = {str(n): i for i, n in enumerate(fabric.device_names())}
    gpu_ids = fabric.gpu_ids

    def device(v, field):
        if isinstance(v, str):
            if v not in names:
                raise FabricError(field, f"no device named {shown(v)}")
            return names[v]
        if isinstance(v, bool) or not isinstance(v, int):
            raise FabricError(field, f"{shown(v)} must be a device name or a GPU index")
        if not 0 <= v < gpu_ids.size:
            raise FabricError(field, f"GPU {v} is not in the topology (GPUs 0..{gpu_ids.size - 1})")
        return int(gpu_ids[v])

    allowed = {"id", "src", "dst", "bytes", "start_s", "after"}
    flows = []
    for i, item in enumerate(doc):
        at = f"{where}:[{i}]"
        if not isinstance(item, dict):
            raise FabricError(at, "must be an object {id, src, dst, bytes, start_s, after}")
        extra = set(item) - allowed
        if extra:
            raise FabricError(f"{at}.{sorted(extra)[0]}", f"unknown key; allowed: {', '.join(sorted(allowed))}")
        for key in ("src", "dst", "bytes"):
            if key not in item:
                raise FabricError(f"{at}.{key}", "missing")
        fid = item.get("id", i)
        if not isinstance(fid, (str, int)) or isinstance(fid, bool):
            raise FabricError(f"{at}.id", f"{shown(fid)} must be a string or an integer")
        after = item.get("after", [])
        if not isinstance(after, list):
            raise FabricError(f"{at}.after", "must be a list of flow ids")
        seen_after = [str(a) for a in after if isinstance(a, (str, int))]
        if len(set(seen_after)) < len(seen_after):  # lists are strict: [0, 0] waited once, the second in silence
            twice = next(a for j, a in enumerate(seen_after) if a in seen_after[:j])
            raise FabricError(f"{at}.after", f"flow {twice} is named twice; name each flow once")
        if isinstance(item["bytes"], bool):
            raise FabricError(f"{at}.bytes", "must be a number of bytes or a size like 1GiB")
        size = parse_bytes(item["bytes"], f"{at}.bytes")
        if size > MAX_BYTES:
            raise FabricError(f"{at}.bytes", f"{shown(item['bytes'])} is over {MAX_BYTES:.3g} bytes (1 EiB)")
        start = item.get("start_s", 0.0)
        if isinstance(start, bool):
            raise FabricError(f"{at}.start_s", "must be seconds or a time like 10us")
        start = parse_time(start, f"{at}.start_s")
        if start > MAX_START_S:
            raise FabricError(f"{at}.start_s", f"{shown(item['start_s'])} is later than {MAX_START_S:g} s")
        src, dst = device(item["src"], f"{at}.src"), device(item["dst"], f"{at}.dst")
        if src == dst:  # no path: it would finish at once and hide a mistake in the file
            raise FabricError(f"{at}.dst", f"{item['dst']!r} is the flow's own source; a flow goes to another device")
        flows.append(Flow(src, dst, size, start, tuple(after), fid))
    _check_flow_ids(flows, where)
    return flows


def _check_flow_ids(flows: list, where: str) -> None:
    """Every flow id unique as text, every ``after`` entry one of them (``where``: the file's name)."""
    # one pass: `ids.count` per id took 18 s for a duplicate at the end of 40,000 flows (quadratic); ids 1 and "1"
    # were two flows the table printed alike as 1
    known: dict = {}
    for i, f in enumerate(flows):
        other = known.get(str(f.id))
        if other is not None:
            if other == f.id:
                raise FabricError(f"{where}:[{i}].id", f"duplicate flow id {f.id!r}")
            raise FabricError(f"{where}:[{i}].id", f"{f.id!r} reads as the same id as {other!r}; give ids that "
                                                   "differ as text")
        known[str(f.id)] = f.id
    known = set(known.values())
    for i, f in enumerate(flows):
        for a in f.after:
            # as an id is: true, false and 1.0 equal 1, 0 and 1 in a set, and waited for those flows in silence
            if isinstance(a, bool) or not isinstance(a, (str, int)):
                raise FabricError(f"{where}:[{i}].after", f"{shown(a)} is not a flow id (a string or an integer)")
            if a not in known:
                raise FabricError(f"{where}:[{i}].after", f"unknown flow id {a!r}")


def simulate_command(
    arch: Optional[str] = typer.Argument(None, help="architecture (see `fabric list`)"),
    gpus: Optional[int] = GPUS_OPT,
    param: list[str] = PARAM_OPT,
    topology: Optional[Path] = TOPOLOGY_OPT,
    catalog: Optional[Path] = CATALOG_OPT,
    collective: Optional[str] = typer.Option(None, "--collective", help="all-reduce, reduce-scatter, all-gather, "
                                                                        "all-to-all, broadcast or send-recv"),
    size: Optional[str] = typer.Option(None, "--size", help="per-rank buffer: bytes or a size like 1GiB"),
    ranks: Optional[str] = typer.Option(None, "--ranks", help="GPU indices, e.g. 0,1,2,3 or 0-7"),
    group_size: Optional[int] = typer.Option(None, "--group-size", help="ranks per group (consecutive GPUs)"),
    groups: Optional[int] = typer.Option(None, "--groups", help="disjoint groups running the collective at once"),
    algorithm: str = typer.Option("auto", "--algorithm", help="auto (as NCCL's tuner would), ring, tree, "
                                                              "hierarchical, direct, nvls, nvls-tree or sharp "
                                                              "(the ones the collective has)"),
    protocol: str = typer.Option("auto", "--protocol", help="auto (by size, as NCCL), ll, ll128, simple, or none "
                                                            "(ideal flow model: no protocol latency or overhead)"),
    channels: Optional[int] = typer.Option(None, "--channels", help="parallel rings of a ring or tree (default: "
                                                                   "one per NIC rail); --channels 1 --protocol none "
                                                                   "is the single-ring closed form"),
    chunks: Optional[int] = typer.Option(None, "--chunks", help="pipeline pieces of a broadcast (default: as NCCL "
                                         "pipelines it, one protocol step each; 8 with --protocol none) or of a tree "
                                         "all-reduce with --protocol none (default 8)"),
    root: int = typer.Option(0, "--root", help="broadcast root (position in the ranks)"),
    flows: Optional[Path] = typer.Option(None, "--flows", help="JSON list of flows {id, src, dst, bytes, start_s, "
                                                               "after} instead of --collective"),
    ecmp: str = typer.Option("ideal", "--ecmp", help="ideal (fluid split per next hop) or hash (per flow)"),
    seed: int = typer.Option(0, "--seed", help="ECMP hash seed"),
    method: str = typer.Option("auto", "--method", help="auto, dag (contention-free pass) or event"),
    links: bool = typer.Option(False, "--links", help="report bytes and utilisation of every used link"),
    as_json: bool = JSON_OPT,
) -> None:
    """Simulate a collective (or a flows file) on the graph: completion time, algbw/busbw, link load.

    Ranks are GPU indices 0..gpus-1.  A flows file is a JSON list of {id, src,
    dst, bytes, start_s, after}: src/dst are device names (strings) or GPU
    indices (integers), bytes a number or a size like 1GiB, after the ids of
    flows that must finish first.
    """
    from fabric.catalog import load_catalog
    from fabric.sim import simulator

    if (collective is None) == (flows is None):
        raise FabricError("--collective", "give either --collective NAME or --flows FILE")
    _check_seed(given("seed"), ecmp)
    fab = build_fabric(arch, gpus, param, load_catalog(catalog), topology)
    sim = simulator(fab)
    if flows is not None:
        # --groups, --chunks and --root were ignored without a word with a flows file
        for opt, val in (("--size", size), ("--ranks", ranks), ("--group-size", group_size), ("--groups", groups),
                         ("--algorithm", None if algorithm.lower() == "auto" else algorithm),
                         ("--protocol", None if protocol.lower() == "auto" else protocol), ("--channels", channels),
                         ("--chunks", chunks),
                         ("--root", root if given("root") else None)):
            if val is not None:
                raise FabricError(opt, "only with --collective")
        return _emit(_run_flows(sim, fab, flows, ecmp, seed, method, links), as_json, flows_mode=True)
    from fabric.sim.collectives import CollectiveName

    # parsed once, as the simulator will (all_to_all is all-to-all): the checks below compare the parsed name; the
    # text compared as typed let `all_to_all` past the all-to-all flows limit and `all_reduce` below its memory
    name = CollectiveName.parse(collective, "--collective")
    if given("root") and name != CollectiveName.BROADCAST:  # no other collective has a root
        raise FabricError("--root", f"only with --collective broadcast (the root of {collective} would be ignored)")
    _check_pipelining(name, algorithm, protocol, channels, chunks)
    if size is None:
        raise FabricError("--size", "missing; give the per-rank buffer, e.g. 1GiB")
    nbytes = parse_bytes(size, "--size")
    if nbytes <= 0:
        raise FabricError("--size", f"{size!r} must be > 0 bytes")
    lists = rank_groups(fab.n_gpus, ranks, group_size, groups)
    algo = algorithm.lower()
    _check_rank_lists(lists, name, algo, "--group-size" if ranks is None else "--ranks")
    from fabric.sim import Collective

    # --algorithm, --protocol and --collective are read case-blind alike (NCCL_ALGO=Ring is NCCL's own spelling)
    colls = [Collective(name, tuple(r), nbytes, algo, chunks, root, protocol=protocol.lower(),
                        channels=channels) for r in lists]
    # a library error names its parameter (collective, algorithm, ...): cli.app names the flag
    res = sim.collectives(colls, ecmp=ecmp, seed=seed, method=method)
    _emit(_collective_data(fab, res, nbytes, len(colls), ecmp, seed, links), as_json, flows_mode=False)


def _check_channels(name, algo: str, channels: Optional[int], chunks: Optional[int]) -> None:
    """Refuse ``--channels`` where the collective never reads it (the run would ignore it).

    Channels split a ring or a tree (all-reduce, reduce-scatter, all-gather) and NCCL's ring broadcast (its
    chains; not the flow DAG that ``--chunks`` pipelines); ``auto`` is left to the tuner, which may pick an
    algorithm that reads them.
    """
    from fabric.sim.collectives import ALGORITHMS, CollectiveName

    if algo != "auto" and algo not in ALGORITHMS[name]:
        return  # the simulator names --algorithm and what the collective has
    AR, RS, AG = CollectiveName.ALL_REDUCE, CollectiveName.REDUCE_SCATTER, CollectiveName.ALL_GATHER
    rings = name in (AR, RS, AG) and algo in ("auto", "ring", "tree")
    chains = name == CollectiveName.BROADCAST and algo in ("auto", "ring") and chunks is None
    if channels is not None and not (rings or chains):
        raise FabricError("--channels", f"sets the rings of a ring or tree (all-reduce, reduce-scatter, all-gather) "
                                        f"and of a ring broadcast without --chunks; {name} with --algorithm {algo}"
                                        f"{' and --chunks' if chunks is not None else ''} would ignore it")


def _run_flows(sim, fab, flows: Path, ecmp: str, seed: int, method: str, links: bool) -> dict:
    """Run a flows file; its JSON object (a flow's bad field is named in the file)."""
    flow_list = read_flows(flows, fab)
    try:
        res = sim.run(flow_list, ecmp=ecmp, seed=seed, method=method)
    except FabricError as exc:
        if exc.field == "flows":  # the whole file (its size against a resource limit): the flag
            raise FabricError("--flows", exc.message) from None
        if exc.field.startswith("flows") or exc.field == "after":
            raise FabricError(f"{flows.name}:{exc.field}", exc.message) from None
        raise
    data = {
        "architecture": fab.architecture, "gpus": fab.n_gpus, "ecmp": ecmp, "seed": seed,
        "makespan_s": res.makespan_s, "method": res.method, "events": res.events,
        "flows": [{"id": fid, "release_s": float(r), "finish_s": float(f)}
                  for fid, r, f in zip(res.flow_ids, res.release_s, res.finish_s)],
        "bottlenecks": res.bottlenecks(BOTTLENECKS),
    }
    if links:
        data["links"] = res.loads.records()
    return data


def _collective_data(fab, res, nbytes: int, n_groups: int, ecmp: str, seed: int, links: bool) -> dict:
    """The JSON object of a collective run (times of the first group; every group's time)."""
    from fabric.sim import bus_factor

    first = res.collectives[0]
    t = res.time_s
    algbw = nbytes / t if t > 0 else float("inf")
    data = {
        "architecture": fab.architecture, "gpus": fab.n_gpus, "collective": first.name,
        "algorithm": first.algorithm, "protocol": first.protocol, "channels": first.channels,
        "ranks": first.n_ranks, "groups": n_groups, "size_bytes": nbytes,
        "ecmp": ecmp, "seed": seed, "time_s": t, "algbw_Bps": algbw, "busbw_Bps": algbw * bus_factor(first.name,
                                                                                                    first.n_ranks),
        "group_times_s": [c.time_s for c in res.collectives], "makespan_s": res.makespan_s,
        "method": res.sim.method, "events": res.sim.events, "flows": res.sim.n_flows,
        "bottlenecks": res.sim.bottlenecks(BOTTLENECKS),
    }
    if links:
        data["links"] = res.sim.loads.records()
    return data


def _emit(data: dict, as_json: bool, flows_mode: bool) -> None:
    if as_json:
        emit_json(data)
        return
    from rich.table import Table

    con = console()
    if flows_mode:
        con.print(f"{len(data['flows'])} flows on {data['architecture']} ({data['gpus']} GPUs), ecmp {data['ecmp']}: "
                  f"makespan {format_time(data['makespan_s'])} ({data['method']}, {data['events']} events)")
        print_rows(con, "flows", ("id", "release", "finish"),
                   [(str(f["id"]), format_time(f["release_s"]), format_time(f["finish_s"])) for f in data["flows"]])
    else:
        t = Table(title=f"{data['collective']} ({data['algorithm']}) on {data['architecture']}", title_justify="left")
        t.add_column("metric")
        t.add_column("value", justify="right")
        rows = [("ranks x groups", f"{data['ranks']} x {data['groups']}"), ("size", format_bytes(data["size_bytes"])),
                ("protocol, channels", f"{data['protocol']}, {data['channels']}"),
                ("time", format_time(data["time_s"])), ("algbw", format_bandwidth(data["algbw_Bps"])),
                ("busbw", format_bandwidth(data["busbw_Bps"])), ("flows", f"{data['flows']:,}"),
                ("scheduler", f"{data['method']} ({data['events']} events)"), ("ecmp", data["ecmp"])]
        if data["groups"] > 1:
            times = data["group_times_s"]
            rows.append(("group times", f"{format_time(min(times))} .. {format_time(max(times))}"))
        for k, v in rows:
            t.add_row(k, v)
        con.print(t)
    _link_table(con, "bottleneck links", data["bottlenecks"])
    if "links" in data:
        _link_table(con, "links", data["links"])


def _link_table(con, title: str, recs: list) -> None:
    print_rows(con, title, ("link", "src", "dst", "capacity", "bytes ->", "bytes <-", "util ->", "util <-"),
               [("circuit" if r["link"] is None else str(r["link"]), r["src"], r["dst"],
                 format_bandwidth(r["capacity_Bps"]), format_bytes(r["bytes_fwd"]), format_bytes(r["bytes_rev"]),
                 f"{r['utilisation_fwd']:.1%}", f"{r['utilisation_rev']:.1%}") for r in recs])


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate_command)
