"""Progress of a sweep on stderr: a rich bar on a terminal, one plain line per finished batch otherwise.

A study sent to a log file (``make run > log``, a CI job, ``nohup``) must still
say how far it is: a rich bar draws nothing when stderr is not a terminal, so
there each finished batch prints one line with the points done, failed, the
rate and the estimated time left.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


def say(line: str) -> None:
    """One unwrapped line on stderr (rich would wrap it and read [..] as markup)."""
    sys.stderr.write(line + "\n")


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``1 h 02 min``."""
    s = int(round(max(seconds, 0.0)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class LineProgress:
    """One line per finished batch: ``NAME: 120/600 points (20 %), 2 failed, 3.4 points/s, ETA 2 min 21 s``.

    Parameters
    ----------
    name : str
        The study's name, first on each line.
    total : int
        Points to evaluate.
    stream : file, optional
        Where the lines go (default: stderr).
    clock : callable, optional
        Seconds, monotonic (tests pass a fake one).
    """

    def __init__(self, name: str, total: int, stream: TextIO | None = None, clock=time.monotonic):
        self.name, self.total = name, total
        self.stream = stream if stream is not None else sys.stderr
        self.clock = clock
        self.done = 0
        self.failed = 0
        self.t0 = clock()

    def __enter__(self):
        self.t0 = self.clock()
        return self

    def __exit__(self, *exc):
        return False

    def line(self) -> str:
        """The current progress line (no newline)."""
        elapsed = self.clock() - self.t0
        rate = self.done / elapsed if elapsed > 0 else 0.0
        pct = 100.0 * self.done / self.total if self.total else 100.0
        left = self.total - self.done
        eta = _duration(left / rate) if rate > 0 else "unknown"
        return (f"{self.name}: {self.done:,}/{self.total:,} points ({pct:.0f} %), {self.failed:,} failed, "
                f"{rate:.3g} points/s, elapsed {_duration(elapsed)}, ETA {eta if left else '0 s'}")

    def advance(self, points: int, failed: int = 0) -> None:
        """Count a finished batch of ``points`` (``failed`` of them failed) and print its line."""
        self.done += points
        self.failed += failed
        self.stream.write(self.line() + "\n")
        self.stream.flush()


class BarProgress:
    """The rich progress bar (on a terminal)."""

    def __init__(self, name: str, total: int):
        from rich.console import Console
        from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn,
                                   TimeRemainingColumn)

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TextColumn("points"),
                            TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), TextColumn("ETA"),
                            TimeRemainingColumn(), console=Console(stderr=True))
        self.task = self.bar.add_task(name, total=total, failed=0)
        self.failed = 0

    def __enter__(self):
        self.bar.__enter__()
        return self

    def __exit__(self, *exc):
        return self.bar.__exit__(*exc)

    def advance(self, points: int, failed: int = 0) -> None:
        self.failed += failed
        self.bar.update(self.task, advance=points, failed=self.failed)


def make_progress(name: str, total: int, stream: TextIO | None = None):
    """A :class:`BarProgress` when ``stream`` (default stderr) is a terminal, else a :class:`LineProgress`."""
    stream = stream if stream is not None else sys.stderr
    isatty = getattr(stream, "isatty", None)
    if isatty is not None and isatty():
        return BarProgress(name, total)
    return LineProgress(name, total, stream)
