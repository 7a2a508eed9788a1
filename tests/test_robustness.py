"""Interruption and resume: runs killed at named points (KERNELSTRAIN_FAULT) and by real
signals at seeded random moments all resume to the bytes of an uninterrupted run; flat memory."""
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

FILES = ["episodes.jsonl", "sft_multiturn.jsonl", "sft_steps.jsonl", "tasks_holdout.jsonl", "stats.json", "README.md"]
EPISODES = "10"


def cli(*args, env=None, **kw):
    full = {**os.environ, "KERNELSTRAIN_CHECKPOINT_EPISODES": "3", **(env or {})}
    return subprocess.run([sys.executable, "-m", "kernelstrain", *args], capture_output=True, text=True, env=full, **kw)


def gen(out, *extra, seed="0", episodes=EPISODES, env=None):
    return cli("generate", "--seed", seed, "--out", str(out), "--episodes", episodes, "--workers", "1", "--quiet",
               *extra, env=env)


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    out = tmp_path_factory.mktemp("ref") / "whole"
    assert gen(out).returncode == 0
    return {f: (out / f).read_bytes() for f in FILES}


@pytest.fixture(scope="module")
def old_dataset(tmp_path_factory):
    """Another run's dataset (seed 1, 4 episodes) that --force replaces, with a file of the user's."""
    out = tmp_path_factory.mktemp("old") / "d"
    assert gen(out, seed="1", episodes="4").returncode == 0
    (out / "notes.txt").write_text("mine")
    return out


def assert_nothing_wrong_looks_complete(out, reference, old=None):
    """After a kill: out is the old dataset, the complete new one, or holds no stats.json."""
    if not (out / "stats.json").exists():
        return
    got = {f: (out / f).read_bytes() for f in FILES if (out / f).exists()}
    assert got == reference or (old is not None and got == old), "a complete-looking dataset that is neither"


def assert_finished(out, reference):
    for f in FILES:
        assert (out / f).read_bytes() == reference[f], f
    leftovers = [p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}.")]
    assert not leftovers and not (out / ".kernelstrain-resume.json").exists(), leftovers


KILL_POINTS = [   # (fault point: pass number, whether --out already holds another dataset)
    ("checkpoint:1", False), ("episode:2", False), ("checkpoint:2", False), ("episode:5", False),
    ("checkpoint:4", False), ("episode:9", False), ("data-closed:1", False), ("holdout-written:1", False),
    ("card-written:1", False), ("stats-written:1", False), ("journal-swap:1", False), ("rename-dir:1", False),
    ("removed-old:1", False),
    ("journal-swap:1", True), ("rename-old:1", True), ("rename-old:4", True), ("rename-new:1", True),
    ("rename-new:3", True), ("rename-new:7", True), ("removed-old:1", True),
]


@pytest.mark.parametrize("point, over_old", KILL_POINTS, ids=[f"{p}{'-force' if o else ''}" for p, o in KILL_POINTS])
def test_kill_at_a_point_then_resume_gives_the_same_bytes(point, over_old, tmp_path, reference, old_dataset):
    out = tmp_path / "d"
    old = None
    if over_old:
        shutil.copytree(old_dataset, out)
        old = {f: (out / f).read_bytes() for f in FILES}
    r = gen(out, *(["--force"] if over_old else []), env={"KERNELSTRAIN_FAULT": point})
    assert r.returncode == -signal.SIGKILL, (point, r.returncode, r.stderr)
    assert_nothing_wrong_looks_complete(out, reference, old)
    # the README's recipe: a plain rerun refuses (or finds the run complete), --resume finishes
    plain = gen(out)
    assert plain.returncode == 2 and "--resume" in plain.stderr and "Traceback" not in plain.stderr, plain.stderr
    r = gen(out, "--resume")
    assert r.returncode == 0, r.stderr
    assert_finished(out, reference)
    if over_old:
        assert (out / "notes.txt").read_text() == "mine"
    again = gen(out, "--resume")
    assert again.returncode == 0 and "already holds this complete run" in again.stderr


def staged(out: Path) -> Path:
    return out.parent / f".{out.name}.kernelstrain-staging"


@pytest.fixture(scope="module")
def whole_120(tmp_path_factory):
    """The bytes of an uninterrupted 120-episode run, shared by the signal tests."""
    out = tmp_path_factory.mktemp("whole") / "whole"
    t0 = time.monotonic()
    assert gen(out, episodes="120").returncode == 0
    WHOLE_S.append(time.monotonic() - t0)       # the signal tests aim inside a run this long on this machine now
    return {f: (out / f).read_bytes() for f in FILES}


WHOLE_S: list = []


@pytest.mark.slow    # five 120-episode runs in subprocesses
@pytest.mark.parametrize("sig, workers, seed", [(signal.SIGKILL, "1", 1), (signal.SIGTERM, "2", 2), (signal.SIGINT, "1", 3),
                                                (signal.SIGKILL, "2", 4)])
def test_real_signal_at_a_random_moment_resumes(tmp_path, sig, workers, seed, whole_120):
    """A real kill at a seeded random delay into a longer run (120 episodes)."""
    part = tmp_path / "part"
    env = {**os.environ, "KERNELSTRAIN_CHECKPOINT_EPISODES": "5"}
    proc = subprocess.Popen([sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--out", str(part),
                             "--episodes", "120", "--workers", workers, "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 60
    while not (staged(part) / ".kernelstrain-resume.json").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    # a seeded moment inside the run: a fraction of the uninterrupted run's wall time (fixed delays of 0.2-2 s let a
    # fast machine finish first, so the test skipped, and a slow one catch the run's cleanup after the rename)
    time.sleep(random.Random(seed).uniform(0.1, 0.6) * WHOLE_S[-1])
    os.kill(proc.pid, sig)
    _, err = proc.communicate(timeout=60)
    if proc.returncode == 0:
        pytest.skip("the run finished before the signal")   # a slow machine's timing, not a failure
    if sig == signal.SIGINT:
        assert b"--resume" in err and b"Traceback" not in err
    # a signal that lands after the staging directory's rename (the run complete, its cleanup or exit left) leaves
    # the whole dataset, as the fault points rename-dir / removed-old do; anything else must not look complete
    assert_nothing_wrong_looks_complete(part, whole_120)
    r = gen(part, "--resume", episodes="120", env={"KERNELSTRAIN_CHECKPOINT_EPISODES": "5"})
    assert r.returncode == 0, r.stderr
    assert_finished(part, whole_120)


def test_resume_with_other_arguments_is_refused(tmp_path):
    out = tmp_path / "o"
    assert gen(out, env={"KERNELSTRAIN_FAULT": "episode:4"}).returncode == -signal.SIGKILL
    r = gen(out, "--resume", seed="1")
    assert r.returncode == 2 and "different seed" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert "--force" in r.stderr     # the exact command that starts over


def peak_rss_mb(episodes: int, tmp_path) -> float:
    code = ("import resource, sys; from kernelstrain.cli import main; "
            f"main(['generate', '--seed', '0', '--out', r'{tmp_path / str(episodes)}', '--episodes', '{episodes}', "
            "'--quiet', '--workers', '1']); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(r.stdout.strip().splitlines()[-1]) / 1024


def test_memory_is_flat_in_episode_count(tmp_path):
    # 10x the episodes: keeping each episode's rows (~80 KB of episodes.jsonl alone) would add ~70 MB
    small, large = peak_rss_mb(100, tmp_path), peak_rss_mb(1000, tmp_path)
    assert large < small * 1.25 + 10, f"peak RSS grew from {small:.0f} MB to {large:.0f} MB"
