"""Run batches of design points: in this process, on a local process pool, or on a Dask cluster.

Every runner calls the same :func:`cli.evaluate.evaluate_batch` and hands each
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
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from typing import Any, Callable, Sequence

from cli.evaluate import Batch, MetricRequest, evaluate_batch
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

    # Ctrl-C reaches the whole process group: the driver alone handles it (and stops the pool)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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
            ctx.set_forkserver_preload(["cli.evaluate", "cli.cost", "cli.build", "topologies"])
        pool = ProcessPoolExecutor(max_workers=min(self.workers, len(batches)), mp_context=ctx,
                                   initializer=_watch_driver, initargs=(os.getpid(),))
        try:
            pending = {pool.submit(evaluate_batch, b): b for b in batches}
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    on_done(pending.pop(fut), fut.result())
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)


class DaskRunner:
    """Runs batches on a Dask cluster (``dask.distributed``) at ``address``.

    Workers must be able to import this package (same version) and read any
    trace files at the paths in the spec; the catalog travels with each batch.
    """

    def __init__(self, address: str, timeout: float = 10.0):
        if "://" not in address:
            raise FabricError("--scheduler", f"{address!r} must look like tcp://host:port")
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
