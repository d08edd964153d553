"""Production fault traces: load, validate, replay on a cluster's nodes, summarise.

The format is that of InfiniteHBD-Trace (StepFun, Apache-2.0,
https://github.com/stepfun-ai/InfiniteHBD-Trace; shipped as ``--trace stepfun``
in ``fabric/data/traces/stepfun`` with its LICENSE and NOTICE): a JSON list of
events, sorted by time::

    {"node_id": "<uuid>", "event_time": 8.6112, "event_type": "fault_start",
     "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "GPU xid Error"}}

``event_time`` is in days from the trace's origin; ``event_type`` is
``fault_start`` or ``fault_end``.  The shipped trace covers 400 servers, of
which only the 231 that ever failed appear in the file; the server count of
any other file is given by the caller (default: the servers that appear).

Replay semantics
----------------
* A server is **down while its count of open faults is > 0**: every
  ``fault_start`` adds one, every ``fault_end`` removes one.  A
  ``fault_start`` on a server that is already down (the shipped trace has 2)
  therefore extends the outage until *all* its faults have ended.
* Events at the same time are applied together, and a server's state holds on
  the half-open interval up to the next event time (down on ``[start, end)``).
  A **zero-length episode** (``fault_end`` at the time of its ``fault_start``;
  the shipped trace has 14) is counted as a fault in rates, but the server is
  never down for a positive time, so it has no weight in time statistics.
* For episode durations, each ``fault_end`` closes the *earliest* open
  ``fault_start`` of its server (first in, first out).
* A ``fault_end`` with no open fault on its server is an error; a fault still
  open at the end stays down until the horizon.
* The horizon is ``[0, last event time]`` days unless given, and at least
  one second; time-weighted statistics weight each interval between event
  times by its length.
  Quantiles are inverse-CDF quantiles (the smallest value whose cumulative
  weight reaches q); this reproduces FIGURES.md "derived from it" for the
  shipped trace.

Mapping onto a cluster (:meth:`Trace.replay`)
---------------------------------------------
The trace's node ids are anonymised (no racks, no adjacency), so trace
servers are placed on the cluster's nodes uniformly at random, seeded:

* ``tile`` (default): the cluster's nodes, in dense node order, are cut into
  blocks of ``n_servers``; each block gets its own random permutation of the
  trace's servers (drawn block by block from ``default_rng(seed)``).  Every
  full block replays the whole trace, so the fraction of nodes down over time
  is exactly the trace's when the node count is a multiple of ``n_servers``;
  the last, partial block replays a uniform random subset of servers.
* ``sample``: every node draws a trace server independently, with replacement.

Nodes replaying the same server fail at the same times (the copies are
correlated); that is the price of replaying a 400-server trace on a larger
cluster, and the reason ``tile`` keeps copies in different blocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from fabric import limits
from fabric.checks import is_number, is_whole, shown
from fabric.errors import FabricError
from fabric.fault_names import TRACE_MAPPINGS
from fabric.faults import FaultSamples

EVENT_TYPES = ("fault_start", "fault_end")
CAUSE_KEYS = ("Level", "Class", "Desc")
MAPPINGS = TRACE_MAPPINGS
#: Latest event time read (days): beyond any real trace, and far from float overflow in time-weighted sums.
MAX_DAYS = 1e6
#: Shortest observation window (days): one second.  Rates divide by it; a window of 5e-324 days (one event at
#: a subnormal time) makes faults per node-day overflow to inf.
MIN_SPAN_DAYS = 1.0 / 86400
#: Bytes per (interval, server) of the down state: the int32 deltas, their int64 running count and the
#: boolean state (:meth:`Trace._server_states`).
STATE_BYTES_PER_SERVER = 13
#: Bytes per (interval, node) of a replay: the boolean node state and its copy into fault samples.
STATE_BYTES_PER_NODE = 2


@dataclass(frozen=True)
class ShippedTrace:
    folder: str
    n_servers: int
    source: str


SHIPPED: dict[str, ShippedTrace] = {
    "stepfun": ShippedTrace(
        "stepfun", 400,
        "InfiniteHBD-Trace (StepFun), https://github.com/stepfun-ai/InfiniteHBD-Trace, Apache-2.0: "
        "400 GPU servers, 348 days (its README)"),
}
"""Traces shipped in ``fabric/data/traces/<folder>``; ``n_servers`` counts servers that never fail too."""


def _quantile(values: np.ndarray, q: float, weights: np.ndarray | None = None) -> float:
    if values.size == 0:
        return float("nan")
    return float(np.quantile(values, q, weights=weights, method="inverted_cdf"))


@dataclass(frozen=True)
class TraceStatistics:
    """What a trace says about how often and how long servers are down (days, fractions)."""

    n_servers: int
    failing_servers: int
    never_failed: int
    faults: int
    horizon_days: float
    faults_per_node_day: float
    episode_median_days: float
    episode_mean_days: float
    episode_p99_days: float
    zero_length_episodes: int
    overlapping_starts: int
    down_fraction_time_mean: float
    down_fraction_max: float
    time_at_or_above_7pct: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class NodeReplay:
    """A trace replayed on ``n_nodes`` cluster nodes, as piecewise-constant fault sets.

    Attributes
    ----------
    times : ndarray of float, shape (I + 1,)
        Interval edges in days; interval ``i`` is ``[times[i], times[i + 1])``.
    down : FaultSamples
        Row ``i``: the dense node indices down during interval ``i``.
    server_of_node : ndarray of int
        The trace server each node replays.
    method : str
    seed : int
    """

    times: np.ndarray
    down: FaultSamples
    server_of_node: np.ndarray
    method: str
    seed: int

    @property
    def durations(self) -> np.ndarray:
        """Length of each interval, days."""
        return np.diff(self.times)

    @property
    def n_nodes(self) -> int:
        return self.down.n_cols

    def down_at(self, t: float) -> np.ndarray:
        """Dense node indices down at time ``t`` (days; the state holds on ``[t_i, t_{i+1})``)."""
        if not self.times[0] <= t < self.times[-1]:
            raise FabricError("time", f"{t} is outside the replay window [{self.times[0]}, {self.times[-1]}) days")
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return self.down.row(i).copy()

    def down_fraction(self) -> np.ndarray:
        """Fraction of nodes down in each interval."""
        return self.down.counts() / max(self.n_nodes, 1)

    def time_mean(self, values: np.ndarray) -> float:
        """Time-weighted mean of one value per interval."""
        w = self.durations
        return float(np.dot(values, w) / w.sum())

    def time_quantile(self, values: np.ndarray, q: float) -> float:
        """Time-weighted inverse-CDF quantile of one value per interval."""
        return _quantile(np.asarray(values, dtype=float), q, self.durations)


@dataclass(frozen=True)
class Trace:
    """A validated fault trace (see the module docstring for its semantics).

    Attributes
    ----------
    name : str
        ``stepfun`` or the file name.
    server_names : tuple of str
        Trace node ids in order of first appearance; servers
        ``len(server_names) .. n_servers - 1`` never fail.
    n_servers : int
    time : ndarray of float
        Event times, days, non-decreasing.
    server : ndarray of int
        Server index per event.
    is_start : ndarray of bool
        ``fault_start`` (True) or ``fault_end``.
    cause : tuple of tuple of str
        (Level, Class, Desc) per event.
    horizon : float
        End of the observation window, days.
    source : str
    """

    name: str
    server_names: tuple[str, ...]
    n_servers: int
    time: np.ndarray
    server: np.ndarray
    is_start: np.ndarray
    cause: tuple[tuple[str, str, str], ...]
    horizon: float
    source: str = ""

    # ------------------------------------------------------------------ episodes
    def episodes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(server, start, end) of every fault, ends matched first in, first out; open ones end at the horizon."""
        open_: dict[int, list[float]] = {}
        srv, start, end = [], [], []
        for s, t, st in zip(self.server.tolist(), self.time.tolist(), self.is_start.tolist()):
            if st:
                open_.setdefault(s, []).append(t)
            else:
                srv.append(s)
                start.append(open_[s].pop(0))
                end.append(t)
        for s, ts in open_.items():
            for t in ts:
                srv.append(s)
                start.append(t)
                end.append(self.horizon)
        order = np.lexsort((np.array(start), np.array(srv))) if srv else np.zeros(0, dtype=np.int64)
        return (np.array(srv, dtype=np.int64)[order], np.array(start, dtype=float)[order],
                np.array(end, dtype=float)[order])

    def overlapping_starts(self) -> int:
        """``fault_start`` events on a server that already has an open fault."""
        count = np.zeros(self.n_servers, dtype=np.int64)
        n = 0
        for s, st in zip(self.server.tolist(), self.is_start.tolist()):
            if st:
                n += int(count[s] > 0)
                count[s] += 1
            else:
                count[s] -= 1
        return n

    def check_state_memory(self, n_nodes: int = 0) -> None:
        """Refuse a trace whose dense state matrices would not fit the ``memory`` limit, before building them.

        The down state is kept per interval between event times and per server (and, replayed, per
        node): a trace of 300,000 events over 75,000 servers asked numpy for 84 GiB at once and ended in
        a MemoryError.  Bytes per cell: :data:`STATE_BYTES_PER_SERVER` and :data:`STATE_BYTES_PER_NODE`.
        """
        intervals = int(np.unique(self.time).size) + 2
        limits.check("memory", float(intervals) * (self.n_servers * STATE_BYTES_PER_SERVER
                                                   + n_nodes * STATE_BYTES_PER_NODE), "trace",
                     f"{intervals:,} event times x ({self.n_servers:,} servers x {STATE_BYTES_PER_SERVER} B"
                     + (f" + {n_nodes:,} nodes x {STATE_BYTES_PER_NODE} B" if n_nodes else "") + ")")

    def _server_states(self) -> tuple[np.ndarray, np.ndarray]:
        """Interval edges and the (intervals x servers) down matrix."""
        self.check_state_memory()
        edges = np.unique(np.concatenate([[0.0], self.time, [self.horizon]]))
        edges = edges[edges <= self.horizon]
        ti = np.searchsorted(edges, self.time)  # events land on an edge
        delta = np.zeros((edges.size, self.n_servers), dtype=np.int32)
        np.add.at(delta, (ti, self.server), np.where(self.is_start, 1, -1).astype(np.int32))
        open_count = np.cumsum(delta, axis=0)[:-1]  # state on [edges[i], edges[i+1])
        return edges, open_count > 0

    # ------------------------------------------------------------------ statistics
    def statistics(self) -> TraceStatistics:
        """Fault rate, episode lengths and down fractions (see :class:`TraceStatistics`)."""
        srv, start, end = self.episodes()
        dur = end - start
        edges, down = self._server_states()
        w = np.diff(edges)
        n_down = down.sum(axis=1)
        frac = n_down / self.n_servers
        positive = w > 0
        # ">= 7 %" compares server counts, so 28 of 400 counts despite 0.07 * 400 = 28.000000000000004
        at_least = n_down >= np.ceil(0.07 * self.n_servers - 1e-9)
        failing = int(np.unique(self.server[self.is_start]).size)
        return TraceStatistics(
            n_servers=self.n_servers, failing_servers=failing, never_failed=self.n_servers - failing,
            faults=int(self.is_start.sum()), horizon_days=float(self.horizon),
            faults_per_node_day=float(self.is_start.sum() / (self.n_servers * self.horizon)),
            episode_median_days=_quantile(dur, 0.5), episode_mean_days=float(dur.mean()) if dur.size else 0.0,
            episode_p99_days=_quantile(dur, 0.99), zero_length_episodes=int(np.count_nonzero(dur == 0)),
            overlapping_starts=self.overlapping_starts(),
            down_fraction_time_mean=float(np.dot(frac, w) / w.sum()),
            down_fraction_max=float(frac[positive].max()) if positive.any() else 0.0,
            time_at_or_above_7pct=float(w[at_least].sum() / w.sum()),
        )

    # ------------------------------------------------------------------ replay
    def replay(self, n_nodes: int, method: str = "tile", seed: int = 0) -> NodeReplay:
        """Replay the trace on ``n_nodes`` cluster nodes (dense node indices 0..n_nodes-1).

        Parameters
        ----------
        n_nodes : int
            Nodes of the cluster.
        method : {'tile', 'sample'}
            How trace servers are assigned to nodes (module docstring).
        seed : int
            Seed of the assignment.

        Returns
        -------
        NodeReplay
        """
        if method not in MAPPINGS:
            raise FabricError("trace_mapping", f"{method!r} not allowed; use one of {', '.join(MAPPINGS)}")
        n_nodes = int(n_nodes)
        rng = np.random.default_rng(seed)
        S = self.n_servers
        if method == "tile":
            blocks = -(-n_nodes // S)
            server_of_node = np.concatenate([rng.permutation(S) for _ in range(blocks)])[:n_nodes] if blocks else \
                np.zeros(0, dtype=np.int64)
        else:
            server_of_node = rng.integers(0, S, size=n_nodes)
        self.check_state_memory(n_nodes)
        edges, down = self._server_states()
        node_down = down[:, server_of_node]
        return NodeReplay(edges, FaultSamples.from_dense(node_down), server_of_node.astype(np.int64), method,
                          int(seed))


# ------------------------------------------------------------------------------------------ loading
def shipped_path(name: str) -> Path:
    """Folder of a shipped trace."""
    return Path(str(resources.files("fabric.data").joinpath("traces", SHIPPED[name].folder)))


def load_trace(spec: str | Path, n_servers: int | None = None, horizon: float | None = None) -> Trace:
    """Load and validate a trace: a shipped name (``stepfun``) or a JSON file in that format.

    Parameters
    ----------
    spec : str or Path
        ``stepfun`` or a path to a ``fault_trace.json``-style file.
    n_servers : int, optional
        Servers the trace covers, including those that never fail (default:
        400 for ``stepfun``, else the servers that appear in the file).
    horizon : float, optional
        End of the observation window in days (default: the last event time).

    Raises
    ------
    FabricError
        For a missing file, invalid JSON, or a malformed event, naming it as
        ``FILE:events[i].field``.
    """
    spec_s = str(spec)
    if spec_s in SHIPPED:
        meta = SHIPPED[spec_s]
        path = shipped_path(spec_s) / "fault_trace.json"
        name, source = spec_s, meta.source
        n_servers = meta.n_servers if n_servers is None else n_servers
    else:
        path = Path(spec_s)
        if not path.is_file():
            raise FabricError("trace", f"{spec_s!r} is neither a shipped trace ({', '.join(SHIPPED)}) nor a file")
        name, source = path.name, str(path)
    from fabric.files import load_json

    doc = load_json(path, "trace")
    return trace_from_events(doc, name, n_servers=n_servers, horizon=horizon, source=source)


def with_servers(trace, trace_servers: int | None):
    """``trace`` loaded with ``trace_servers`` servers (:func:`load_trace`), or as given if None.

    Without the count a file covers only the servers that failed, and replaying those alone on every node
    overstates the faults (400 servers of which 3 failed replay as 3 servers, each of them down at times).
    The one check that a server count comes with a trace, for every command that takes both (``faults``
    ignored ``--trace-servers`` without ``--trace``).
    """
    if trace_servers is None:
        return trace
    if trace is None:
        raise FabricError("trace_servers", "counts the servers of a trace file; give --trace FILE with it")
    if isinstance(trace, Trace):
        raise FabricError("trace_servers", "give it with a trace name or file, not a loaded Trace")
    return load_trace(str(trace), n_servers=trace_servers)


def trace_from_events(events: Any, name: str = "trace", *, n_servers: int | None = None,
                      horizon: float | None = None, source: str = "") -> Trace:
    """Validate a list of event dicts (the JSON format above) into a :class:`Trace`."""
    if not isinstance(events, list):
        raise FabricError(name, "must be a JSON list of fault_start / fault_end events")
    if not events and horizon is None:  # nothing to replay, and no span to replay it over
        raise FabricError(name, "has no events; a trace file needs at least one fault_start")
    index: dict[str, int] = {}
    times, servers, starts, causes = [], [], [], []
    open_count: dict[int, int] = {}
    last = 0.0
    for i, ev in enumerate(events):
        f = f"{name}:events[{i}]"
        if not isinstance(ev, dict):
            raise FabricError(f, "must be an object with node_id, event_time, event_type, fault_type")
        node = ev.get("node_id")
        if not isinstance(node, str) or not node:
            raise FabricError(f"{f}.node_id", "must be a non-empty string")
        t = ev.get("event_time")
        if isinstance(t, bool) or not isinstance(t, (int, float)) or not 0 <= t <= MAX_DAYS:  # NaN fails too
            raise FabricError(f"{f}.event_time", f"{shown(t)} must be a number of days in [0, {MAX_DAYS:g}]")
        if t < last:
            raise FabricError(f"{f}.event_time", f"{t} is earlier than the previous event ({last}); "
                                                 "events must be sorted by time")
        kind = ev.get("event_type")
        if kind not in EVENT_TYPES:
            raise FabricError(f"{f}.event_type", f"{shown(kind)} not allowed; use fault_start or fault_end")
        cause = ev.get("fault_type")
        if not isinstance(cause, dict):
            raise FabricError(f"{f}.fault_type", "must be an object with Level, Class and Desc")
        for key in CAUSE_KEYS:
            if not isinstance(cause.get(key), str):
                raise FabricError(f"{f}.fault_type.{key}", "must be a string")
        s = index.setdefault(node, len(index))
        if kind == "fault_start":
            open_count[s] = open_count.get(s, 0) + 1
        else:
            if open_count.get(s, 0) == 0:
                raise FabricError(f"{f}.event_type", f"fault_end for node {node} that has no open fault")
            open_count[s] -= 1
        last = float(t)
        times.append(float(t))
        servers.append(s)
        starts.append(kind == "fault_start")
        causes.append(tuple(cause[k] for k in CAUSE_KEYS))
    n_seen = len(index)
    if n_servers is None:
        n_servers = n_seen
    if not is_whole(n_servers) or n_servers < max(n_seen, 1):
        raise FabricError("n_servers", f"{n_servers!r} must be a whole number >= the {n_seen} servers "
                                             f"in {name} (and >= 1)")
    limits.check("gpus", n_servers, "n_servers", "a server holds at least one GPU")  # before arrays of that size
    end = max(times) if times else 0.0
    if horizon is None:
        if end < MIN_SPAN_DAYS:  # the window is the events' own span: the file is at fault
            raise FabricError(name, f"its events span {end:g} days (the last event time); a trace must span at "
                                    f"least one second ({MIN_SPAN_DAYS:.3g} days) for rates and down fractions")
        horizon = end
    if not is_number(horizon) or not np.isfinite(horizon) or horizon < end or horizon < MIN_SPAN_DAYS:
        raise FabricError("horizon", f"{horizon!r} must be >= {MIN_SPAN_DAYS:.3g} days (one second) and >= the "
                                     f"last event time ({end}) days")
    return Trace(name, tuple(index), int(n_servers), np.array(times, dtype=float), np.array(servers, dtype=np.int64),
                 np.array(starts, dtype=bool), tuple(causes), float(horizon), source)
