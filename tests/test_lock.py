"""One writer per output (an advisory lock beside it, naming its holder), a lock of a dead run
taken over, and readers that never report on a half-swapped dataset (issue 34, item 3)."""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelstrain.cli import main
from kernelstrain.safety import OutputLock, lock_path


def _cmd(*argv, env=None):
    return [sys.executable, "-m", "kernelstrain", *map(str, argv)]


ENV = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}


def _gen_argv(out, seed="0", episodes="6", *extra):
    return _cmd("generate", "--seed", seed, "--out", out, "--episodes", episodes, "--workers", "1", "--quiet", *extra)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("lock") / "d"
    assert main(["generate", "--seed", "0", "--out", str(d), "--episodes", "6", "--workers", "1", "--quiet"]) == 0
    return d


def test_a_second_writer_is_refused_naming_the_first(tmp_path):
    out = tmp_path / "o"
    first = subprocess.Popen(_gen_argv(out, "0", "40"), env=ENV, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not lock_path(out).exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert lock_path(out).exists(), "the first run never took its lock"
        second = subprocess.run(_gen_argv(out, "1", "6", "--force"), env=ENV, capture_output=True, text=True)
        err = second.stderr.strip().splitlines()
        assert second.returncode == 2 and len(err) == 1, second.stderr
        assert f"pid {first.pid}" in err[0] and "being written by another kernelstrain run" in err[0]
    finally:
        assert first.wait(timeout=300) == 0, first.stderr.read()
    assert not lock_path(out).exists()
    assert main(["validate", str(out)]) == 0
    assert json.loads((out / "stats.json").read_text())["seed"] == 0


def test_the_lock_of_a_dead_run_is_taken_over(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    out = tmp_path / "o"
    lock_path(out).write_text(f"pid {dead.pid}: kernelstrain generate (killed)\n")
    r = subprocess.run(_gen_argv(out), env=ENV, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not lock_path(out).exists()


def test_a_killed_writer_releases_its_lock(tmp_path):
    out = tmp_path / "o"
    r = subprocess.run(_gen_argv(out), env={**ENV, "KERNELSTRAIN_FAULT": "checkpoint:2"}, capture_output=True)
    assert r.returncode == -signal.SIGKILL
    r = subprocess.run(_gen_argv(out, "0", "6", "--resume"), env=ENV, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o"]


def test_every_writer_takes_the_lock(data, tmp_path, capsys):
    task = json.loads((data / "episodes.jsonl").open().readline())["task_id"]
    shutil.copytree(data, tmp_path / "d")
    cases = [(tmp_path / "ws", ["workdir", task, "--data", str(data), "--out", str(tmp_path / "ws")]),
             (tmp_path / "kb", ["export", "kernelbench", str(data), "--out", str(tmp_path / "kb")]),
             (tmp_path / "r.html", ["report", str(data), "--out", str(tmp_path / "r.html")]),
             (tmp_path / "d" / "report.html", ["report", str(tmp_path / "d")]),
             (tmp_path / "f", ["tasks", "fused", "--count", "2", "--seed", "0", "--out", str(tmp_path / "f")]),
             (tmp_path / "h", ["holdout", "--out", str(tmp_path / "h")]),
             (tmp_path / "m", ["merge", str(data), "--out", str(tmp_path / "m")])]
    for out, argv in cases:
        with OutputLock(out, "test holder"):
            assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "being written by another kernelstrain run" in err and f"pid {os.getpid()}" in err, argv
        assert not out.exists() or out == tmp_path / "d" / "report.html" and not out.exists()


def test_a_reader_refuses_a_dataset_being_swapped(data, tmp_path, capsys):
    d = tmp_path / "d"
    shutil.copytree(data, d)
    old = tmp_path / ".d.kernelstrain-old"
    old.mkdir()
    with OutputLock(d, "generate (swapping)"):
        assert main(["validate", str(d)]) == 2
    assert "being replaced by another kernelstrain run" in capsys.readouterr().err
    assert main(["validate", str(d)]) == 2
    assert "interrupted replacement" in capsys.readouterr().err


def test_a_reader_notices_a_swap_while_it_reads(data, tmp_path, monkeypatch, capsys):
    import kernelstrain.dataset as v
    d = tmp_path / "d"
    shutil.copytree(data, d)
    real = v.validate

    def swapped_meanwhile(path, limit=50, **kw):
        result = real(path, limit=limit, **kw)
        fresh = d / ".stats.new"
        fresh.write_bytes((d / "stats.json").read_bytes())
        os.replace(fresh, d / "stats.json")     # what a swap does: a new stats.json, last
        return result
    monkeypatch.setattr(v, "validate", swapped_meanwhile)
    assert main(["validate", str(d)]) == 2
    assert "was replaced while it was read" in capsys.readouterr().err


def test_validate_of_a_swap_killed_midway_is_refused_until_resumed(data, tmp_path, capsys):
    d = tmp_path / "d"
    shutil.copytree(data, d)
    r = subprocess.run(_gen_argv(d, "1", "6", "--force"), env={**ENV, "KERNELSTRAIN_FAULT": "rename-new:2"},
                       capture_output=True)
    assert r.returncode == -signal.SIGKILL
    assert main(["validate", str(d)]) == 2
    assert "interrupted replacement" in capsys.readouterr().err
    r = subprocess.run(_gen_argv(d, "1", "6", "--resume"), env=ENV, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert main(["validate", str(d)]) == 0


def test_two_runs_into_a_new_path_are_locked_and_a_failed_one_leaves_no_folder(tmp_path):
    """The output's parent does not exist yet: the lock is taken all the same (the run would make
    the folders itself), and a command that writes nothing leaves none of them behind."""
    from kernelstrain.errors import UsageError
    from kernelstrain.safety import OutputLock
    out = tmp_path / "new" / "deeper" / "data"
    with OutputLock(out, "generate A"):
        assert out.parent.is_dir()
        with pytest.raises(UsageError, match="generate A"):
            with OutputLock(out, "generate B"):
                pass
    assert not (tmp_path / "new").exists()
