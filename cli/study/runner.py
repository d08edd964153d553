"""Run a study: batches of design points in this process, on a local process pool, or on a Dask cluster.

:func:`run_study` is the Python API of ``fabric sweep``: it checks and locks
the output folder, evaluates the missing points and writes one file per batch.
Every runner calls the same :func:`cli.study.evaluator.evaluate_batch` and hands each
batch's rows back to the driver (``on_done``) in completion order; only the
driver writes files.  Batches are made by the driver, so the rows do not depend
on where they were computed.
"""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import urlsplit

import fabric
from cli.study.evaluator import Batch, evaluate_batch
from cli.study.progress import make_progress, say
from cli.study.registry import MetricRequest
from cli.study.spec import Study
from cli.study.store import (SCHEMA_VERSION, FolderLock, batch_files, check_out_dir, prepare_out_dir,
                             present_point_ids, read_batch_columns, read_results, write_batch)
from fabric.errors import FabricError

OnDone = Callable[[Batch, list[dict[str, Any]]], None]
TASKS_PER_WORKER = 4
"""Aim for this many batches per worker so that uneven batches still balance."""


def default_workers() -> int:
    """CPU cores this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def make_batches(points: Sequence, metrics: tuple[MetricRequest, ...], catalog: Any, max_size: int,
                 workers: int, start: int = 0) -> list[Batch]:
    """Cut ``points`` (in study order) into batches of one architecture each.

    The size is ``min(max_size, ceil(len(points) / (4 * workers)))``: a few
    hundred points per task in large studies, and still enough tasks to keep
    every worker busy in small ones.  Batches are numbered from ``start``.
    """
    if not points:
        return []
    size = max(1, min(max_size, math.ceil(len(points) / (TASKS_PER_WORKER * max(workers, 1)))))
    batches: list[Batch] = []
    run: list = []

    def flush():
        for i in range(0, len(run), size):
            batches.append(Batch(start + len(batches), run[0].architecture, tuple(run[i:i + size]), metrics, catalog))
        run.clear()

    for p in points:
        if run and p.architecture != run[0].architecture:
            flush()
        run.append(p)
    flush()
    return batches


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed but not yet reaped, counts as dead)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):  # no /proc (macOS): the signal test above is all there is
        return True


def _watch_driver(driver: int) -> None:
    """Pool-worker initializer: exit when the driver process dies (a SIGKILLed sweep leaves no orphans).

    A worker blocked on its task queue never notices a dead driver by itself,
    and watching the parent is not enough: under ``forkserver`` the parent is
    the fork server, which lives as long as any worker does.
    """

    def watch():
        while _alive(driver):
            time.sleep(0.5)
        os._exit(1)

    # Ctrl-C reaches the whole process group, and so may SIGTERM (a scheduler's time limit): the driver alone
    # handles them (and stops the pool); a worker killed first would turn the stop into a broken-pool error
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    threading.Thread(target=watch, name="fabric-sweep-driver-watch", daemon=True).start()


class LocalRunner:
    """Runs batches on ``workers`` processes (in this process when ``workers == 1``).

    Workers start with ``forkserver`` (``spawn`` where that is missing): the
    progress bar's thread makes plain ``fork`` unsafe.
    """

    def __init__(self, workers: int | None = None):
        if workers is not None and workers < 1:
            raise FabricError("--workers", f"{workers} must be >= 1")
        self.workers = workers or default_workers()
        self.where = "this process" if self.workers == 1 else f"{self.workers} local processes"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, batches: list[Batch], on_done: OnDone) -> None:
        if self.workers == 1 or len(batches) <= 1:
            self.where = "this process"  # a pool's start-up would cost more than it saves
            for b in batches:
                on_done(b, evaluate_batch(b))
            return
        methods = mp.get_all_start_methods()
        ctx = mp.get_context("forkserver" if "forkserver" in methods else "spawn")
        if ctx.get_start_method() == "forkserver":
            ctx.set_forkserver_preload(["cli.study.evaluator", "topologies"])
        pool = ProcessPoolExecutor(max_workers=min(self.workers, len(batches)), mp_context=ctx,
                                   initializer=_watch_driver, initargs=(os.getpid(),))
        try:
            pending = {pool.submit(evaluate_batch, b): b for b in batches}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    on_done(pending.pop(fut), fut.result())
        except BaseException:
            _stop_pool(pool)
            raise
        pool.shutdown(wait=True)


#: Seconds the driver waits for killed workers and the pool's manager thread to end (they take milliseconds).
STOP_WAIT_S = 10.0


def _stop_pool(pool: ProcessPoolExecutor) -> None:
    """Stop ``pool`` now, on Ctrl-C, SIGTERM or an error of the driver: cancel what waits, kill what runs.

    A batch that was running is lost; nothing of it was written (the driver writes a batch when it is done)
    and ``--resume`` redoes it.  The pool used to be left to finish its running batches at the interpreter's
    exit; a second Ctrl-C there (a user's, or ``timeout -s INT``'s copy to the process group) broke into
    that join with a traceback, and the driver then waited for ever on workers nobody told to stop.  The
    workers ignore SIGINT and SIGTERM (:func:`_watch_driver`), so they are killed; further signals are
    ignored for the moment this takes.
    """
    main = threading.current_thread() is threading.main_thread()  # Python sets handlers from there only
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)} if main else {}
    try:
        workers = list((getattr(pool, "_processes", None) or {}).values())
        manager = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for w in workers:
            w.kill()
        for w in workers:
            w.join(STOP_WAIT_S)
        if manager is not None:  # it sees the workers gone and ends; the exit's join then finds nothing to wait for
            manager.join(STOP_WAIT_S)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


NETWORK_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # dask.distributed's comm protocols that take host:port


def check_scheduler_address(address: str) -> None:
    """Refuse a ``--scheduler`` address that is not ``protocol://host:port`` with a port in 1..65535.

    Checked before anything connects: a port Dask cannot parse used to surface as a traceback from inside
    ``Client`` after a 20 s wait.

    Raises
    ------
    FabricError
        Field ``--scheduler``: the address, and what is allowed.
    """
    want = f"must look like tcp://host:port with a port in 1..65535 (protocols: {', '.join(NETWORK_SCHEMES)})"
    try:
        parts = urlsplit(address)
        port = parts.port
    except ValueError:
        raise FabricError("--scheduler", f"{address!r} {want}") from None
    if parts.scheme not in NETWORK_SCHEMES or not parts.hostname or port is None or not 1 <= port <= 65535 \
            or parts.path or parts.query or parts.fragment:
        raise FabricError("--scheduler", f"{address!r} {want}")


class DaskRunner:
    """Runs batches on a Dask cluster (``dask.distributed``) at ``address``.

    Workers must be able to import this package (same version) and read any
    trace files at the paths in the spec; the catalog travels with each batch.
    """

    def __init__(self, address: str, timeout: float = 10.0):
        check_scheduler_address(address)
        try:
            from distributed import Client
        except ImportError:
            raise FabricError("--scheduler", "needs dask.distributed: pip install 'hbd-fabric[dask]'") from None
        try:
            self.client = Client(address, timeout=timeout, set_as_default=False)
        except (OSError, TimeoutError) as exc:
            why = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise FabricError("--scheduler", f"cannot reach a Dask scheduler at {address}: {why}") from None
        self.workers = max(1, sum(self.client.nthreads().values()))
        self.where = f"Dask at {address} ({self.workers} threads)"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.client.close()
        return False

    def run(self, batches: list[Batch], on_done: OnDone) -> None:
        from distributed import as_completed

        # pure=False: a rerun must recompute, never reuse a result the scheduler still holds
        futures = {self.client.submit(evaluate_batch, b, pure=False): b for b in batches}
        try:
            for fut in as_completed(list(futures), loop=self.client.loop):
                on_done(futures[fut], fut.result())
        except BaseException:
            self.client.cancel(list(futures))
            raise


def run_study(study: Study, out: Path, workers: int | None = None, scheduler: str | None = None,
              resume: bool = False, overwrite: bool = False, progress: bool = True) -> dict[str, Any]:
    """Evaluate the study's missing points and write them to ``out``.

    Parameters
    ----------
    study : Study
        From :func:`cli.study.spec.load_study`.
    out : Path
        Output folder.
    workers : int, optional
        Local processes (default: the CPU cores); 1 runs in this process.
    scheduler : str, optional
        Dask scheduler address; runs there instead of locally.
    resume : bool
        Keep the rows already in ``out`` and evaluate only the missing points.
    overwrite : bool
        Delete a previous sweep's files in ``out`` first.
    progress : bool
        Show progress on stderr: a bar on a terminal, else one line per finished batch.

    Returns
    -------
    dict
        Summary: ``points, done, skipped, failed, errors, batches, out, where, elapsed_s``.

    Raises
    ------
    FabricError
        Bad options or output folder, found before anything is written.
    """
    t0 = time.perf_counter()
    if scheduler is not None and workers is not None:
        raise FabricError("--workers", "give --workers (local) or --scheduler (Dask), not both")
    fingerprint = study.fingerprint()
    check_out_dir(out, resume, overwrite, fingerprint)
    runner = DaskRunner(scheduler) if scheduler is not None else LocalRunner(workers)  # checks its options
    with FolderLock(out) as lock:  # one writer per folder: a second sweep into it is refused here
        try:
            check_out_dir(out, resume, overwrite, fingerprint)  # again: another sweep may have finished meanwhile
            present: set[str] = set()
            next_no = 0
            if resume:
                present, next_no = present_point_ids(out, warn=say)
                _warn_foreign_rows(study, out, present)
                _warn_relabelled_rows(study, out)
        except BaseException:
            lock.discard_if_unused()
            raise
        try:
            return _run_locked(study, out, runner, overwrite, fingerprint, present, next_no, progress, t0)
        except FabricError:  # e.g. the Dask scheduler cannot be reached: leave no empty folder behind
            lock.discard_if_unused()
            raise


def _warn_foreign_rows(study: Study, out: Path, present: set[str]) -> None:
    """Say so when ``--resume`` meets rows of points this spec no longer has (its grid changed since).

    Same metrics and catalog (the fingerprint matched), so the rows are comparable and stay; but the folder now
    answers more than this spec asks, which must not pass in silence.
    """
    ours = {p.point_id for p in study.points}
    foreign = len(present - ours)
    if foreign:
        say(f"warning: {out} holds {foreign:,} point(s) that this spec does not have (its grid changed since they "
            f"were run); they stay in the folder and in `fabric results`, --overwrite starts again")


def _warn_relabelled_rows(study: Study, out: Path) -> None:
    """Say so when ``--resume`` keeps rows whose label the spec has since changed.

    A label is not an input of the point (its id), so a relabelled point is not run again, and its row keeps the old
    label in the comparison and in `fabric results`: a table under names the spec no longer has.
    """
    ours = {p.point_id: p.label for p in study.points}
    renamed: Counter = Counter()
    for f in batch_files(out):
        try:
            t = read_batch_columns(f, ["point_id", "label"])
        except FabricError:  # no label column: not this tool's batch, which `fabric results` names
            continue
        for pid, label in zip(t.column("point_id").to_pylist(), t.column("label").to_pylist()):
            if pid in ours and ours[pid] != label:
                renamed[(label, ours[pid])] += 1
    if renamed:
        (old, new), _ = renamed.most_common(1)[0]
        say(f"warning: {out} holds {sum(renamed.values()):,} row(s) under a label this spec has changed ({old!r} -> "
            f"{new!r}{', ...' if len(renamed) > 1 else ''}); they keep the old label in the table and in "
            f"`fabric results`, --overwrite runs them again under the new one")


def _run_locked(study: Study, out: Path, runner, overwrite: bool, fingerprint: str, present: set[str],
                next_no: int, progress: bool, t0: float) -> dict[str, Any]:
    """The part of :func:`run_study` that writes, under the folder's lock."""
    todo = [p for p in study.points if p.point_id not in present]
    counts = {"done": 0, "failed": 0}
    errors: Counter = Counter()
    with runner:
        manifest = {"study": study.name, "spec": study.source, "fingerprint": fingerprint,
                    "metrics": [m.to_dict() for m in study.metrics], "catalog": study.catalog_path or "shipped",
                    "points": len(study.points), "tool_version": fabric.__version__, "schema_version": SCHEMA_VERSION}
        prepare_out_dir(out, overwrite, manifest, study.text)
        batches = make_batches(todo, study.metrics, study.catalog, study.batch_size, runner.workers, next_no)
        bar = make_progress(study.name, len(todo)) if progress else None

        def on_done(batch, rows):
            write_batch(out, batch.architecture, batch.number, rows)
            failed = 0
            for r in rows:
                if r["status"] == "ok":
                    counts["done"] += 1
                else:
                    failed += 1
                    errors[r["error"]] += 1
            counts["failed"] += failed
            if bar is not None:
                bar.advance(len(rows), failed)

        if bar is not None:
            with bar:
                runner.run(batches, on_done)
        else:
            runner.run(batches, on_done)
    return {"study": study.name, "spec": study.source, "out": str(out), "points": len(study.points),
            "done": counts["done"], "skipped": len(study.points) - len(todo), "failed": counts["failed"],
            "errors": [{"error": e, "points": n} for e, n in errors.most_common(5)],
            "distinct_errors": len(errors),
            "batches": len(batches), "where": runner.where, "elapsed_s": time.perf_counter() - t0}


def study_rows(study: Study, out: Path):
    """The rows of ``study``'s points in folder ``out`` (a resumed folder may hold rows of points since removed)."""
    df = read_results(out)
    ids = {p.point_id for p in study.points}
    return df[df["point_id"].isin(ids)].reset_index(drop=True)
