"""The README's console blocks, run: each ``$ command`` line's output must be what the block shows.

Every fenced ``console`` block of README.md is a list of ``$ command`` lines,
each followed by the exact stdout it prints (stderr is not shown).  Commands
run from the repository root through ``bash`` with this interpreter's
``bin`` folder first on ``PATH`` (so ``fabric`` is the project's own).

**Tolerance**: wall-clock times vary from run to run and machine to machine,
so a number followed by a time unit (``1.2 s``, ``15 ms``, ``3 min``,
``0.87 points/s``) matches any number; everything else must match exactly,
character for character (trailing spaces ignored).

A block that reads a study's results (``results/default``) needs ``make run``
first; the test skips it, saying so, when the folder is missing.

After changing a command's output (or merging a branch that does), refresh
every block at once and review the diff::

    .venv/bin/python -m tests.readme --update     # rewrite README.md's console blocks from real output
    .venv/bin/python -m tests.readme              # check only (exit 1 and a diff when a block is stale)
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
TIMEOUT_S = 600
NEEDS = {"results/default": "run `make run` first (it writes results/default)"}
"""Inputs a block may read, and how to make them; a block is skipped when one is missing."""
_TIME = re.compile(r"\d[\d,]*(?:\.\d+)?(?=\s?(?:s|ms|min|h|points/s)\b)")


@dataclass
class Command:
    line: str          # the command, without "$ "
    expected: str      # the output the README shows
    start: int         # index of the "$" line in README's lines
    end: int           # index after the last output line


def blocks(text: str) -> list[list[Command]]:
    """The console blocks of ``text``, each a list of commands with their shown output."""
    lines = text.splitlines()
    out: list[list[Command]] = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "```console":
            j = i + 1
            cmds: list[Command] = []
            while j < len(lines) and lines[j].strip() != "```":
                if lines[j].startswith("$ "):
                    cmds.append(Command(lines[j][2:], "", j, j + 1))
                elif cmds:
                    cmds[-1].expected += lines[j] + "\n"
                    cmds[-1].end = j + 1
                j += 1
            out.append(cmds)
            i = j
        i += 1
    return out


def normalise(text: str) -> str:
    """Mask timings (see the module docstring) and drop trailing spaces."""
    return "\n".join(_TIME.sub("<t>", ln.rstrip()) for ln in text.rstrip("\n").splitlines())


def missing_input(cmd: str) -> str | None:
    """Why ``cmd`` cannot run here (a missing results folder or program), or None."""
    for path, how in NEEDS.items():
        if path in cmd and not (ROOT / path).is_dir():
            return f"{path} is missing: {how}"
    for program in ("jq",):
        if f"| {program}" in cmd and shutil.which(program) is None:
            return f"{program} is not installed"
    return None


def run(cmd: str) -> str:
    """stdout of ``cmd`` run by bash from the repository root, with this venv's ``fabric`` first on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("COLUMNS", None)  # tables take the width they take in a log, not the caller's terminal
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=TIMEOUT_S)
    if proc.returncode != 0:
        raise RuntimeError(f"`{cmd}` exited {proc.returncode}: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def update(path: Path = README) -> int:
    """Rewrite every console block's outputs with real ones; returns how many commands changed."""
    lines = path.read_text().splitlines()
    changed = 0
    for cmds in reversed(blocks("\n".join(lines))):
        for c in reversed(cmds):
            why = missing_input(c.line)
            if why:
                print(f"kept (cannot run: {why}): $ {c.line}", file=sys.stderr)
                continue
            got = [ln.rstrip() for ln in run(c.line).rstrip("\n").splitlines()]
            if normalise("\n".join(got)) != normalise(c.expected):
                changed += 1
                lines[c.start + 1:c.end] = got
    path.write_text("\n".join(lines) + "\n")
    return changed


def check(path: Path = README) -> list[str]:
    """A diff per stale command (empty when every block matches)."""
    problems = []
    for cmds in blocks(path.read_text()):
        for c in cmds:
            if missing_input(c.line):
                continue
            want, got = normalise(c.expected), normalise(run(c.line))
            if want != got:
                diff = "\n".join(difflib.unified_diff(want.splitlines(), got.splitlines(), "README", "real",
                                                      lineterm=""))
                problems.append(f"$ {c.line}\n{diff}")
    return problems


def main(argv: list[str]) -> int:
    if argv == ["--update"]:
        print(f"{update()} command output(s) rewritten in {README.name}")
        return 0
    if argv:
        print("usage: python -m tests.readme [--update]", file=sys.stderr)
        return 2
    problems = check()
    print("\n\n".join(problems) or "every README console block matches")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
