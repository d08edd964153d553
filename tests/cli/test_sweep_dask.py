"""`fabric sweep --scheduler`: the same study on a real Dask scheduler and worker gives the same rows.

The fixture starts `dask scheduler` and `dask worker` as processes on 127.0.0.1
(as a user would on a cluster) and stops them at the end.
"""

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from cli.study.evaluator import TIMING_COLUMNS
from cli.study.store import read_results

pytest.importorskip("distributed", reason="dask[distributed] is not installed (pip install -e '.[dask]')")

STUDY = {
    "name": "dask",
    "gpus": [256],
    "architectures": [{"name": "dgx"}, {"name": "nvl-72"}, {"name": "khop-ring", "grid": {"k": [2, 3]}}],
    "faults": {"ratios": [0.0, 0.03]},
    "seeds": [0, 1, 2],
    "metrics": ["cost", "build"],
    "batch_size": 5,
}


def _dask_cli() -> str:
    exe = Path(sys.executable).parent / "dask"
    if exe.exists():
        return str(exe)
    found = shutil.which("dask")
    if not found:
        pytest.skip("the `dask` command is not installed next to this Python")
    return found


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def scheduler(request, tmp_path_factory):
    """Address of a local Dask scheduler with one single-threaded worker process."""
    tmp = tmp_path_factory.mktemp("dask")
    dask = _dask_cli()
    sched_file = tmp / "scheduler.json"
    log = open(tmp / "dask.log", "wb")
    request.addfinalizer(log.close)
    procs: list[subprocess.Popen] = []

    def stop_all():  # workers first, so they do not try to reconnect to a stopped scheduler
        for p in reversed(procs):
            _stop(p)

    request.addfinalizer(stop_all)
    procs.append(subprocess.Popen([dask, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                   "--scheduler-file", str(sched_file)], stdout=log, stderr=log, cwd=tmp))
    deadline = time.monotonic() + 60
    while not sched_file.exists() and time.monotonic() < deadline:
        assert procs[0].poll() is None, (tmp / "dask.log").read_text()
        time.sleep(0.1)
    procs.append(subprocess.Popen([dask, "worker", "--scheduler-file", str(sched_file), "--nworkers", "1",
                                   "--nthreads", "1", "--no-dashboard", "--local-directory", str(tmp / "work")],
                                  stdout=log, stderr=log, cwd=tmp))
    address = json.loads(sched_file.read_text())["address"]
    from distributed import Client

    with Client(address, timeout=30, set_as_default=False) as client:
        client.wait_for_workers(1, timeout=60)
    return address


def test_dask_rows_equal_local_rows(scheduler, tmp_path, run_cli):
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump(STUDY))
    rc, out, err = run_cli("sweep", spec, "--out", tmp_path / "dask", "--scheduler", scheduler, "--json")
    assert rc == 0, err
    summary = json.loads(out)
    assert summary["where"].startswith(f"Dask at {scheduler}") and summary["done"] == 4 * 2 * 3
    rc, _, err = run_cli("sweep", spec, "--out", tmp_path / "local", "--workers", "1", "--json")
    assert rc == 0, err

    def rows(folder):
        df = read_results(folder).drop(columns=list(TIMING_COLUMNS))
        return df.sort_values("point_id").reset_index(drop=True)

    remote, local = rows(tmp_path / "dask"), rows(tmp_path / "local")
    assert list(remote.columns) == list(local.columns)
    assert remote.equals(local)


def test_dask_resume_after_losing_a_batch(scheduler, tmp_path, run_cli):
    spec = tmp_path / "study.yaml"
    spec.write_text(yaml.safe_dump(STUDY))
    out = tmp_path / "out"
    assert run_cli("sweep", spec, "--out", out, "--scheduler", scheduler, "--json")[0] == 0
    files = sorted(out.glob("architecture=*/batch-*.parquet"))
    files[0].unlink()
    rc, stdout, err = run_cli("sweep", spec, "--out", out, "--scheduler", scheduler, "--resume", "--json")
    assert rc == 0, err
    summary = json.loads(stdout)
    assert summary["done"] > 0 and summary["done"] + summary["skipped"] == 24
    assert read_results(out)["point_id"].is_unique


def test_an_unreachable_scheduler_is_bad_input():
    from cli.study.runner import DaskRunner
    from fabric.errors import FabricError

    # the runner connects before the output folder is prepared, so a failure here writes nothing
    with pytest.raises(FabricError, match="--scheduler: cannot reach a Dask scheduler at tcp://127.0.0.1:9"):
        DaskRunner("tcp://127.0.0.1:9", timeout=1)
