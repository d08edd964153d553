"""Study folders under abuse (issue 15): two writers, --overwrite beside a user's files, a truncated batch.

Each test states the rule it holds; every count is exact because each point of
these studies writes exactly one row.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import yaml

from cli.study.spec import load_study
from cli.study.store import LOCK, batch_files, read_results

SLOW = {"name": "slow", "gpus": 256, "architectures": [{"name": "dgx"}], "seeds": list(range(24)),
        "metrics": [{"noop": {"sleep_s": 0.4}}], "batch_size": 4}


def _spec(tmp_path: Path, doc: dict) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _start(spec: Path, out: Path, cwd: Path, *extra: str) -> subprocess.Popen:
    cmd = [sys.executable, "-c", "from cli.app import entry; entry()", "sweep", str(spec), "--out", str(out),
           "--workers", "1", "--json", *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, text=True)


def test_two_concurrent_sweeps_into_one_folder_one_is_refused_and_no_row_is_lost(tmp_path):
    """Two `sweep --resume` runs used to both exit 0 and leave 24 of 48 rows (their batch names collided).

    Now the folder has one writer: the second process is refused with exit 2 and one line naming --out,
    and the first completes every row.  Then a `--resume` after it finds nothing to do.
    """
    spec = _spec(tmp_path, SLOW)
    out = tmp_path / "out"
    first = _start(spec, out, tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not batch_files(out) and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert first.poll() is None, "the first sweep must still be running"
        second = _start(spec, out, tmp_path, "--resume")
        _, err2 = second.communicate(timeout=120)
        out1, err1 = first.communicate(timeout=120)
    finally:
        for p in (first,):
            if p.poll() is None:
                p.kill()
                p.wait()
    assert second.returncode == 2, err2
    lines = err2.strip().splitlines()
    assert len(lines) == 1 and "--out" in lines[0] and "another sweep" in lines[0], err2
    assert first.returncode == 0, err1
    assert json.loads(out1)["done"] == 24
    ids = read_results(out)["point_id"]
    assert len(ids) == 24 and ids.is_unique and set(ids) == {p.point_id for p in load_study(spec).points}
    again = _start(spec, out, tmp_path, "--resume")
    stdout, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(stdout)["skipped"] == 24 and len(read_results(out)) == 24


def test_overwrite_deletes_only_what_sweeps_wrote(tmp_path, run_cli):
    """`--overwrite` used to delete everything inside architecture=*; a user's notes there must survive."""
    doc = {**SLOW, "seeds": [0, 1], "metrics": ["noop"]}
    spec = _spec(tmp_path, doc)
    out = tmp_path / "out"
    assert run_cli("sweep", spec, "--out", out, "--workers", 1)[0] == 0
    mine = out / "architecture=dgx" / "notes.txt"
    mine.write_text("mine")
    stale = out / "architecture=dgx" / "batch-000099.parquet"  # a batch of an earlier, larger study
    batch_files(out)[0].rename(stale)
    rc, _, err = run_cli("sweep", spec, "--out", out, "--workers", 1, "--overwrite")
    assert rc == 0, err
    assert mine.read_text() == "mine" and not stale.exists()
    ids = read_results(out)["point_id"]
    assert len(ids) == 2 and ids.is_unique


def test_truncated_batch_is_named_by_results_and_recomputed_by_resume(tmp_path, run_cli):
    """A truncated Parquet batch used to raise ArrowInvalid from `results` and from `sweep --resume`."""
    doc = {**SLOW, "seeds": list(range(6)), "metrics": ["noop"], "batch_size": 2}
    spec = _spec(tmp_path, doc)
    out = tmp_path / "out"
    assert run_cli("sweep", spec, "--out", out, "--workers", 1)[0] == 0
    victim = batch_files(out)[1]
    victim.write_bytes(victim.read_bytes()[:40])
    rc, _, err = run_cli("results", out)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and victim.name in err and "--resume" in err
    rc, stdout, err = run_cli("sweep", spec, "--out", out, "--workers", 1, "--resume", "--json")
    assert rc == 0, err
    assert victim.name in err and "recomputed" in err
    summary = json.loads(stdout)
    assert (summary["skipped"], summary["done"]) == (4, 2)
    ids = read_results(out)["point_id"]
    assert len(ids) == 6 and ids.is_unique


def test_out_that_cannot_be_created_is_bad_input_and_leaves_nothing(tmp_path, run_cli):
    """`sweep --out /proc/x` used to exit 1 and advise --resume."""
    spec = _spec(tmp_path, {**SLOW, "seeds": [0], "metrics": ["noop"]})
    rc, _, err = run_cli("sweep", spec, "--out", "/proc/fabric-sweep-test")
    assert rc == 2 and err.startswith("error: --out:") and len(err.strip().splitlines()) == 1, err
    assert "--resume" not in err


def test_out_with_a_nul_byte_is_bad_input(tmp_path, run_cli, monkeypatch):
    """Found by `pytest -m slow tests/cli/test_fuzz.py`: os.mkdir raised ValueError (a traceback)."""
    monkeypatch.chdir(tmp_path)
    spec = _spec(tmp_path, {**SLOW, "seeds": [0], "metrics": ["noop"]})
    rc, _, err = run_cli("sweep", spec, "--out", "o\x00ut")
    assert rc == 2 and err.startswith("error: --out:") and "NUL" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [spec.name]


def test_a_refused_run_leaves_no_folder_and_a_lock_alone_is_not_results(tmp_path, run_cli):
    spec = _spec(tmp_path, {**SLOW, "seeds": [0], "metrics": ["noop"]})
    out = tmp_path / "out"
    rc, _, err = run_cli("sweep", spec, "--out", out, "--scheduler", "tcp://127.0.0.1:1")
    assert rc == 2 and not out.exists(), err
    out.mkdir()
    (out / LOCK).write_text("123\n")  # left by a killed sweep: the kernel dropped its flock
    rc, _, err = run_cli("sweep", spec, "--out", out, "--workers", 1)
    assert rc == 0, err


def test_a_batch_with_a_column_of_another_type_is_the_one_named(tmp_path, run_cli):
    """The first batch rewritten with ``gpus`` as text: `results` and `report` named the second, good batch
    (the odd one was sought against the first file); now the batch against the other batches' type."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    doc = {**SLOW, "seeds": list(range(6)), "metrics": ["noop"], "batch_size": 2}
    out = tmp_path / "out"
    assert run_cli("sweep", _spec(tmp_path, doc), "--out", out, "--workers", 1)[0] == 0
    files = batch_files(out)
    assert len(files) == 3
    victim = files[0]
    t = pq.read_table(victim)
    i = t.schema.get_field_index("gpus")
    pq.write_table(t.set_column(i, "gpus", pa.array([str(v) for v in t.column("gpus").to_pylist()])), victim)
    for command in ("results", "report"):
        rc, _, err = run_cli(command, out)
        assert rc == 2 and len(err.strip().splitlines()) == 1, err
        assert victim.name in err and "'gpus'" in err and all(f.name not in err for f in files[1:]), err
