"""Start-up: the CLI imports its heavy libraries where they are used, not when ``cli.app`` loads.

Checked in a fresh interpreter (a subprocess), because this test process has
imported everything already.  Exact: ``sys.modules`` lists every module the
interpreter has imported.
"""

import json
import subprocess
import sys

HEAVY = ("bokeh", "pandas", "pyarrow", "pulp", "scipy", "networkx", "highspy", "dask", "rich")
# numpy (~0.15 s, half of `fabric --help` once: 0.35-0.40 s -> 0.21-0.25 s wall without it), yaml (the catalog) and
# the process pool (the sweep) are imported by the commands that use them; help and flag checks need none of them
LIGHT_BUT_SLOW = ("numpy", "yaml", "concurrent.futures.process")
# the project's own heavy layers, each 35-200 ms to import: the study engine (it imports every metric's module),
# the simulator, the solvers, the RL and goodput models.  A top-level import of one of them in a command module
# once doubled `fabric --help` (0.27 -> 0.5 s CPU).
OWN_HEAVY = ("cli.study.runner", "cli.study.metrics", "cli.study.report", "fabric.sim", "fabric.faultset",
             "solvers.allocation", "solvers.orchestrator", "workloads.rl", "workloads.goodput.summary")


def _imported_after(code: str) -> list[str]:
    probe = (f"import sys\n{code}\n"
             f"print(__import__('json').dumps(sorted(m for m in {HEAVY + LIGHT_BUT_SLOW + OWN_HEAVY!r} if m in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_importing_the_app_imports_no_heavy_library():
    assert _imported_after("import cli.app") == []


def test_fabric_help_imports_no_heavy_library():
    """``fabric --help`` and every command's ``--help`` print plain help (no rich) and load no solver, viewer or numpy."""
    code = ("import contextlib, io\nfrom cli.app import main, app\nimport typer\n"
            "names = [c.name for c in typer.main.get_command(app).commands.values()]\n"
            "assert len(names) >= 15, names\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    assert main(['--help']) == 0 and all(main([n, '--help']) == 0 for n in names)")
    assert _imported_after(code) == []
