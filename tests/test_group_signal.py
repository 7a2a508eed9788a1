"""SIGTERM / SIGINT sent to generate's whole process group (as `timeout`, a terminal's Ctrl-C or a
job control's kill send it), workers killed mid-task with their parent: generate stops promptly
(exit 130) with its workers gone, and leaves only the hidden partial run, which nothing takes for a
complete dataset (no stats.json in --out; a plain rerun refuses and names --resume).
Before pools.running a group SIGTERM left the parent and its 2 workers running for ever: the killed
workers' results never came, and the parent waited for them in Pool's get() with the signal only noted."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def group(pgid: int) -> list[int]:
    """The live processes (not zombies) of a process group, from /proc."""
    found = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                stat = (p / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()      # after "pid (comm) ": state, ppid, pgrp
            if int(fields[2]) == pgid and fields[0] != "Z":
                found.append(int(p.name))
    return found


def next_episode(journal: Path) -> int:
    try:
        return json.loads(journal.read_text())["next"]
    except (OSError, ValueError, KeyError):
        return -1


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process groups from /proc")
@pytest.mark.parametrize("sig, episodes_first", [
    pytest.param(signal.SIGTERM, 0, id="term-in-search", marks=pytest.mark.slow),     # ~30 s each on 2 cores
    pytest.param(signal.SIGTERM, 6, id="term-in-episodes"),
    pytest.param(signal.SIGINT, 6, id="int-in-episodes", marks=pytest.mark.slow)])
def test_a_signal_to_the_group_stops_generate_and_its_workers(tmp_path, sig, episodes_first):
    """episodes_first 0: the signal comes as the run's first checkpoint appears (the held-out
    solutions searched in a pool then); 6: once 6 episodes are written (the episodes' pool)."""
    out = tmp_path / "d"
    journal = out.parent / f".{out.name}.kernelstrain-staging" / ".kernelstrain-resume.json"
    env = {**os.environ, "KERNELSTRAIN_CHECKPOINT_EPISODES": "2", "KERNELSTRAIN_SOLUTIONS": "off"}
    cmd = [sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--out", str(out), "--episodes", "400",
           "--workers", "2", "--quiet"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while next_episode(journal) < episodes_first and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.poll() is None, "the run ended before the signal"
        if episodes_first:
            assert len(group(proc.pid)) >= 3, "the parent and its 2 workers"
        sent = time.monotonic()
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
        left = group(proc.pid)
        for _ in range(50):          # the pool's workers are joined before the parent exits; allow a moment
            if not left:
                break
            time.sleep(0.1)
            left = group(proc.pid)
    finally:
        if proc.poll() is None or group(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 130, (proc.returncode, err)
    assert not left, f"processes of the run still alive: {left}"
    assert took < 20, f"{took:.1f} s to stop"
    assert b"--resume" in err and b"Traceback" not in err, err
    assert not (out / "stats.json").exists(), "an interrupted run must not look complete"
    assert journal.exists(), "the partial run is kept, hidden, to resume"
    plain = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    assert plain.returncode == 2 and "--resume" in plain.stderr, plain.stderr
