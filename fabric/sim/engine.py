"""The fluid flow engine: event-driven max-min fair rates over routes.

Timing convention (exact, and what the closed forms in the tests rely on)
-------------------------------------------------------------------------
* A flow is **released** at ``max(start_s, finish of every flow it waits on)``.
* Its data transfer starts at release: from then on it is *active* and sends
  at its max-min fair rate, recomputed at every event (a release or the end of
  a transfer anywhere).  Rates are constant between events, so the bytes sent
  are the integral of a step function.
* Its transfer **ends** when its last byte is sent (it stops using the links
  then), and it **finishes** at transfer end + its path latency (the sum of
  its links' one-way latencies; for an ECMP split, the longest of its paths)
  + its own extra latency (a collective step's protocol latency, if any).
  Dependents are released at the finish time.

So one flow of ``B`` bytes alone on a path of bottleneck capacity ``c`` and
latency ``a`` finishes at ``start + B / c + a``; a chain of ``k`` such flows
waiting on each other takes ``k (a + B / c)``.  (The latency is not spent
inside the link capacity: the pipe is assumed to hold the in-flight bytes,
which is how the alpha-beta model counts them.)

Two schedulers give the same answer:

* **DAG pass** (when it applies): if no link is ever asked for more than its
  capacity by the flows active at one time, every flow runs at its *free
  rate* (its bottleneck capacity alone) — that is then exactly the max-min
  fair allocation — and finish times follow from one longest-path pass over
  the dependency DAG.  The engine computes this schedule and then *checks*
  the premise: flows on one route must not overlap in time, and on every arc
  the sum of the free rates of the routes using it must fit, or else (for the
  arcs where it does not) an exact sweep over time must show that the flows
  that overlap fit.  Rings, chains and pipelines are contention-free and run
  this way at millions of flows.
* **Event loop** otherwise: at every event only the flows connected (through
  shared arcs) to flows that started or ended are re-solved by progressive
  filling (:func:`fabric.sim.maxmin.max_min_rates`); rates of the other
  connected components stay as they were, which is exact because max-min
  fairness decomposes over components.  Events closer than a relative
  ``1e-12`` are processed together, so symmetric flows finish in one event.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from fabric.errors import FabricError
from fabric.sim.csr import ranges
from fabric.sim.maxmin import max_min_rates_csr

TIME_RTOL = 1e-12          # events closer than this (relative) are simultaneous
LOAD_RTOL = 1e-9           # a link is within capacity up to this relative excess
SWEEP_LIMIT = 5_000_000    # (flow, arc) incidences the exact contention check may sweep
COMPONENT_MIN_FLOWS = 4096  # below this many active flows re-solve everything (cheaper than components)
METHODS = ("auto", "dag", "event")


@dataclass(frozen=True)
class Problem:
    """What the schedulers need, all in local numbering.

    Attributes
    ----------
    R : scipy.sparse.csr_matrix, shape (n_routes, n_arcs)
        Byte fraction of each route on each arc.
    capacity : ndarray, shape (n_arcs,)
        Bytes/s.
    route_latency : ndarray, shape (n_routes,)
        Seconds.
    route : ndarray, shape (n_flows,)
        Route of each flow.
    size, start, count, dep_ptr, dep_idx
        As in :class:`fabric.sim.flows.FlowTable`.
    flow_latency : ndarray, shape (n_flows,), optional
        Extra latency per flow, seconds, added to its route latency.
    """

    R: sp.csr_matrix
    capacity: np.ndarray
    route_latency: np.ndarray
    route: np.ndarray
    size: np.ndarray
    start: np.ndarray
    count: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    flow_latency: np.ndarray | None = None

    def latency_of_flows(self) -> np.ndarray:
        """Route latency plus extra latency of every flow, seconds."""
        lat = self.route_latency[self.route]
        return lat if self.flow_latency is None else lat + self.flow_latency

    @property
    def n_flows(self) -> int:
        return int(self.route.shape[0])


@dataclass(frozen=True)
class Schedule:
    """When every flow ran.

    Attributes
    ----------
    release, tx_end, finish : ndarray
        Seconds: release (= transfer start), last byte sent, finish
        (= ``tx_end`` + path latency).
    method : str
        ``dag`` or ``event``.
    events : int
        Event-loop iterations (0 for the DAG pass).
    """

    release: np.ndarray
    tx_end: np.ndarray
    finish: np.ndarray
    method: str
    events: int


def schedule(problem: Problem, method: str = "auto") -> Schedule:
    """Run the flows of ``problem``.

    Parameters
    ----------
    problem : Problem
    method : {'auto', 'dag', 'event'}
        ``auto`` takes the DAG pass when its contention-free premise is
        verified and the event loop otherwise; ``dag`` fails if it cannot be
        verified; ``event`` always runs the event loop.
    """
    if method not in METHODS:
        raise FabricError("method", f"{method!r} is not one of {', '.join(METHODS)}")
    if method in ("auto", "dag"):
        sched = dag_schedule(problem)
        if sched is not None:
            return sched
        if method == "dag":
            raise FabricError("method", "the flows contend for links; the DAG pass does not apply (use auto or event)")
    return event_schedule(problem)


# ---------------------------------------------------------------------------------- helpers

def _rows(R: sp.csr_matrix, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR arrays (indptr, indices, data) of the given rows of ``R`` (repeats allowed)."""
    cnt = R.indptr[rows + 1] - R.indptr[rows]
    pos = ranges(R.indptr[rows], cnt)
    return np.concatenate([[0], np.cumsum(cnt)]).astype(np.int64), R.indices[pos], R.data[pos]


def _successors(p: Problem) -> tuple[np.ndarray, np.ndarray]:
    n = p.n_flows
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(p.dep_ptr))
    order = np.argsort(p.dep_idx, kind="stable")
    ptr = np.concatenate([[0], np.cumsum(np.bincount(p.dep_idx, minlength=n))]).astype(np.int64)
    return ptr, owner[order]


def _max_dep_finish(p: Problem, flows: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """Latest finish among the flows each of ``flows`` waits on (-inf if none)."""
    cnt = p.dep_ptr[flows + 1] - p.dep_ptr[flows]
    out = np.full(flows.size, -np.inf)
    has = cnt > 0
    if has.any():
        vals = finish[p.dep_idx[ranges(p.dep_ptr[flows[has]], cnt[has])]]
        starts = np.cumsum(cnt[has]) - cnt[has]
        out[has] = np.maximum.reduceat(vals, starts)
    return out


def free_rates(p: Problem) -> np.ndarray:
    """Rate of each route's whole class alone on the fabric: min over arcs of capacity / fraction."""
    vals = p.R.data / p.capacity[p.R.indices]
    nz = np.diff(p.R.indptr) > 0
    worst = np.zeros(p.R.shape[0])
    if nz.any():
        worst[nz] = np.maximum.reduceat(vals, p.R.indptr[:-1][nz])
    with np.errstate(divide="ignore"):
        return np.where(worst > 0, 1.0 / np.where(worst > 0, worst, 1.0), np.inf)


def _cycle_error() -> FabricError:
    return FabricError("after", "the flows wait on each other in a cycle")


# --------------------------------------------------------------------------------- DAG pass
def dag_schedule(p: Problem) -> Schedule | None:
    """The contention-free schedule, or None when its premise does not hold (see module doc)."""
    n = p.n_flows
    rho = free_rates(p)
    lat = p.latency_of_flows()
    with np.errstate(divide="ignore", invalid="ignore"):
        dur = np.where(p.size > 0, p.size * p.count / rho[p.route], 0.0)
    dur = np.where(np.isfinite(rho[p.route]), dur, 0.0)
    release = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    blocks = _backward_blocks(p)
    if blocks is not None:
        _blocks_pass(p, blocks, dur + lat, release, finish)
    else:
        _kahn_pass(p, dur + lat, release, finish)
    tx_end = release + dur
    if not _contention_free(p, rho, release, tx_end, dur):
        return None
    return Schedule(release, tx_end, finish, "dag", 0)


def _backward_blocks(p: Problem) -> list[tuple[int, int]] | None:
    """Split flows into consecutive blocks whose dependencies all lie in earlier blocks.

    None unless every flow waits only on flows with smaller indices (what
    the collective generators produce: one block per step or pipeline piece).
    """
    n = p.n_flows
    cnt = np.diff(p.dep_ptr)
    has = cnt > 0
    maxdep = np.full(n, -1, dtype=np.int64)
    if has.any():
        maxdep[has] = np.maximum.reduceat(p.dep_idx, p.dep_ptr[:-1][has])
    if np.any(maxdep >= np.arange(n)):
        return None
    blocks = []
    b, guess = 0, 64
    while b < n:
        lo, w, e = b + 1, guess, n
        while lo < n:
            hi = min(n, lo + w)
            hit = maxdep[lo:hi] >= b
            k = int(hit.argmax())
            if hit[k]:
                e = lo + k
                break
            lo, w = hi, 2 * w
        blocks.append((b, e))
        guess = max(64, e - b + 1)
        b = e
    return blocks


def _blocks_pass(p: Problem, blocks: list, busy: np.ndarray, release: np.ndarray, finish: np.ndarray) -> None:
    """Longest-path pass block by block: release = max(start, finish of dependencies)."""
    cnt = np.diff(p.dep_ptr)
    for b, e in blocks:
        rel = p.start[b:e].copy()
        d0, d1 = int(p.dep_ptr[b]), int(p.dep_ptr[e])
        if d1 > d0:
            c = cnt[b:e]
            nz = c > 0
            vals = finish[p.dep_idx[d0:d1]]
            k = int(c[0])
            if 0 < k <= 8 and d1 - d0 == k * (e - b) and c.min() == k:
                # every flow of the block waits on k flows (ring steps, pipeline pieces):
                # strided maxima are far cheaper than reduceat on many short segments
                for j in range(k):
                    np.maximum(rel, vals[j::k], out=rel)
            elif nz.all():
                mx = np.maximum.reduceat(vals, p.dep_ptr[b:e] - d0)
                np.maximum(rel, mx, out=rel)
            else:
                mx = np.maximum.reduceat(vals, p.dep_ptr[b:e][nz] - d0)
                rel[nz] = np.maximum(rel[nz], mx)
        release[b:e] = rel
        finish[b:e] = rel + busy[b:e]


def _kahn_pass(p: Problem, busy: np.ndarray, release: np.ndarray, finish: np.ndarray) -> None:
    """Longest-path pass in topological levels (any dependency order); detects cycles."""
    sptr, sidx = _successors(p)
    pending = np.diff(p.dep_ptr).astype(np.int64)
    frontier = np.flatnonzero(pending == 0)
    done = 0
    while frontier.size:
        rel = np.maximum(p.start[frontier], _max_dep_finish(p, frontier, finish))
        release[frontier] = rel
        finish[frontier] = rel + busy[frontier]
        done += frontier.size
        cnt = sptr[frontier + 1] - sptr[frontier]
        succ = sidx[ranges(sptr[frontier], cnt)]
        if succ.size == 0:
            break
        u, c = np.unique(succ, return_counts=True)
        pending[u] -= c
        frontier = u[pending[u] == 0]
    if done < p.n_flows:
        raise _cycle_error()


def _contention_free(p: Problem, rho: np.ndarray, release: np.ndarray, tx_end: np.ndarray,
                     dur: np.ndarray) -> bool:
    positive = dur > 0
    if dur.size == 0:
        return True
    if positive.all():  # the usual case: skip the gathers
        busy, r, rel_b, end_b = np.arange(dur.size), p.route, release, tx_end
    else:
        busy = np.flatnonzero(positive)
        if busy.size == 0:
            return True
        r, rel_b, end_b = p.route[busy], release[busy], tx_end[busy]
    # 1. on every arc the routes that use it fit even if all ran at once ...
    per_route = np.bincount(r, minlength=p.R.shape[0])
    demand = p.R.T @ ((per_route > 0) * np.where(np.isfinite(rho), rho, 0.0))
    over = np.flatnonzero(demand > p.capacity * (1.0 + LOAD_RTOL))
    if over.size and rel_b.max() < end_b.min():
        return False  # every flow is running at the latest release, so that overload is real
    # 2. flows on one route never overlap (two would exceed its bottleneck arc)
    if per_route.max() > 1:
        # flows of a route in index order (usually time order already); radix sort on narrow ints
        narrow = np.uint16 if p.R.shape[0] <= np.iinfo(np.uint16).max else np.uint32
        order = np.argsort(r.astype(narrow), kind="stable")
        r_o = r[order]
        rel_o = rel_b[order]
        same = r_o[1:] == r_o[:-1]
        if np.any(same & (rel_o[1:] < rel_o[:-1])):
            order = np.lexsort((rel_b, r))
            r_o = r[order]
            rel_o = rel_b[order]
            same = r_o[1:] == r_o[:-1]
        e_prev = end_b[order][:-1]
        # ends may pass the next start by rounding only (relative TIME_RTOL; times are >= 0)
        if np.any(same & (e_prev > rel_o[1:] + TIME_RTOL * e_prev)):
            return False
    if over.size == 0:
        return True
    # 3. ... or, on the arcs where they would not, the flows that do overlap fit (exact sweep)
    sub = p.R[:, over].tocsr()
    nnz_route = np.diff(sub.indptr)
    cnt = nnz_route[r]
    if int(cnt.sum()) > SWEEP_LIMIT:
        return False
    keep = cnt > 0
    f, rf, cf = busy[keep], r[keep], cnt[keep]
    pos = ranges(sub.indptr[rf], cf)
    arc = sub.indices[pos]
    load = sub.data[pos] * np.repeat(rho[rf], cf) / p.capacity[over][arc]  # share of capacity
    t0 = np.repeat(release[f], cf)
    t1 = np.repeat(tx_end[f], cf)
    # ends sort before starts at equal times (half-open intervals); starts nudged by the time tolerance
    times = np.concatenate([t1, t0 + TIME_RTOL * np.abs(t0)])
    kind = np.concatenate([np.zeros(t1.size), np.ones(t0.size)])
    arcs2 = np.concatenate([arc, arc])
    delta = np.concatenate([-load, load])
    order = np.lexsort((kind, times, arcs2))
    a_o, d_o = arcs2[order], delta[order]
    csum = np.cumsum(d_o)
    seg_start = np.ones(a_o.size, dtype=bool)
    seg_start[1:] = a_o[1:] != a_o[:-1]
    base = np.maximum.accumulate(np.where(seg_start, np.arange(a_o.size), 0))
    before = np.where(base > 0, csum[base - 1], 0.0)
    level = csum - before
    return bool(np.all(level <= 1.0 + LOAD_RTOL))


# ------------------------------------------------------------------------------- event loop
def event_schedule(p: Problem) -> Schedule:
    """Event-driven max-min simulation (see module doc)."""
    # long: one event loop and its two closures (push, complete) share a dozen per-flow arrays; split, each part
    # would take them all as arguments and the loop's invariants would no longer be visible in one place
    n = p.n_flows
    R, cap = p.R, p.capacity
    route, m = p.route, p.count.astype(np.float64)
    lat = p.latency_of_flows()
    empty_route = np.diff(R.indptr)[route] == 0
    instant = (p.size <= 0) | empty_route
    sptr, sidx = _successors(p)
    pending = np.diff(p.dep_ptr).astype(np.int64)
    release = np.full(n, np.nan)
    tx_end = np.full(n, np.nan)
    finish = np.full(n, np.nan)
    rem = p.size.astype(np.float64).copy()
    rate = np.zeros(n)
    active = np.zeros(0, dtype=np.int64)
    heap: list = []
    seq = 0

    def push(flows: np.ndarray, times: np.ndarray) -> None:
        nonlocal seq
        if flows.size == 0:
            return
        ut, inv = np.unique(times, return_inverse=True)
        order = np.argsort(inv, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(inv, minlength=ut.size))])
        for k, t in enumerate(ut.tolist()):
            heapq.heappush(heap, (t, seq, flows[order[bounds[k]:bounds[k + 1]]]))
            seq += 1

    def complete(flows: np.ndarray, ends: np.ndarray) -> None:
        tx_end[flows] = ends
        finish[flows] = ends + lat[flows]
        rem[flows] = 0.0
        cnt = sptr[flows + 1] - sptr[flows]
        succ = sidx[ranges(sptr[flows], cnt)]
        if succ.size == 0:
            return
        u, c = np.unique(succ, return_counts=True)
        pending[u] -= c
        ready = u[pending[u] == 0]
        if ready.size:
            push(ready, np.maximum(p.start[ready], _max_dep_finish(p, ready, finish)))

    roots = np.flatnonzero(pending == 0)
    push(roots, p.start[roots])
    t = 0.0
    events = 0
    skip_components = 0
    while heap or active.size:
        events += 1
        t_rel = heap[0][0] if heap else np.inf
        if active.size:
            proj = t + rem[active] / rate[active]
            t_cmp = float(proj.min())
        else:
            proj = np.zeros(0)
            t_cmp = np.inf
        t_next = min(t_rel, t_cmp)
        tol = TIME_RTOL * abs(t_next)
        dirty_arcs = np.zeros(0, dtype=np.int64)
        if active.size:
            rem[active] -= rate[active] * (t_next - t)
            done = proj <= t_next + tol
            if done.any():
                fin_flows = active[done]
                dirty_arcs = _rows(R, route[fin_flows])[1]
                active = active[~done]
                complete(fin_flows, proj[done])
        t = t_next
        started = []
        while heap and heap[0][0] <= t + tol:
            t_b, _, batch = heapq.heappop(heap)
            release[batch] = t_b
            inst = instant[batch]
            if inst.any():
                complete(batch[inst], np.full(int(inst.sum()), t_b))
            started.append(batch[~inst])
        started = np.concatenate(started) if started else np.zeros(0, dtype=np.int64)
        if started.size:
            active = np.concatenate([active, started])
        if active.size and (started.size or dirty_arcs.size):
            if skip_components:
                rate[active] = max_min_rates_csr(*_rows(R, route[active]), cap, m[active])
                skip_components -= 1
            elif _resolve(R, cap, route, m, rate, active, started, dirty_arcs) > 0.5:
                # most flows were touched anyway: the component analysis does not pay for a while
                skip_components = 8
    if np.isnan(finish).any():
        raise _cycle_error()
    return Schedule(release, tx_end, finish, "event", events)


def _resolve(R: sp.csr_matrix, cap: np.ndarray, route: np.ndarray, m: np.ndarray, rate: np.ndarray,
             active: np.ndarray, started: np.ndarray, dirty_arcs: np.ndarray) -> float:
    """Recompute (in place) the rates of the active flows connected to what an event changed.

    Returns the share of the active flows that were re-solved.
    """
    ptr, idx, data = _rows(R, route[active])
    na, n_arcs = active.size, R.shape[1]
    if na < COMPONENT_MIN_FLOWS:
        rate[active] = max_min_rates_csr(ptr, idx, data, cap, m[active])
        return 1.0
    from scipy.sparse.csgraph import connected_components  # here: it pulls in scipy.linalg (start-up time)

    # bipartite flow-arc graph of the active flows: flows 0..na-1, arcs na..na+n_arcs-1
    B = sp.csr_matrix((np.ones(idx.size, dtype=np.int8), idx + na, ptr), shape=(na, na + n_arcs))
    B = sp.vstack([B, sp.csr_matrix((n_arcs, na + n_arcs), dtype=np.int8)]).tocsr()
    _, label = connected_components(B, directed=False)
    touched = np.zeros(label.max() + 1, dtype=bool)
    if started.size:
        pos = np.flatnonzero(np.isin(active, started))
        touched[label[pos]] = True
    if dirty_arcs.size:
        touched[label[na + dirty_arcs]] = True
    sel = np.flatnonzero(touched[label[:na]])
    if sel.size == na:
        rate[active] = max_min_rates_csr(ptr, idx, data, cap, m[active])
    elif sel.size:
        rate[active[sel]] = max_min_rates_csr(*_rows(R, route[active[sel]]), cap, m[active[sel]])
    return sel.size / na
