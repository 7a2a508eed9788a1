"""Interruption and resume with a real killed process; flat memory; stale outputs."""
import os
import signal
import subprocess
import sys
import time

import pytest

FILES = ["episodes.jsonl", "sft_multiturn.jsonl", "sft_steps.jsonl", "tasks_holdout.jsonl", "stats.json", "README.md"]


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "kernelstrain", *args], capture_output=True, text=True, **kw)


def wait_for_progress(out, min_bytes=2_000_000):
    """Until the run has checkpointed and written some episodes."""
    deadline = time.monotonic() + 60
    tmp = out / ".episodes.jsonl.tmp"
    while time.monotonic() < deadline:
        if (out / ".kernelstrain-resume.json").exists() and tmp.exists() and tmp.stat().st_size > min_bytes:
            return
        time.sleep(0.02)
    raise AssertionError("the run made no progress")


@pytest.mark.parametrize("sig, workers", [(signal.SIGKILL, "1"), (signal.SIGTERM, "2"), (signal.SIGINT, "1")])
def test_killed_run_resumes_to_the_same_bytes(tmp_path, sig, workers):
    whole, part = tmp_path / "whole", tmp_path / "part"
    assert cli("generate", "--seed", "0", "--out", str(whole), "--episodes", "300", "--quiet").returncode == 0
    proc = subprocess.Popen([sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--out", str(part),
                             "--episodes", "300", "--workers", workers, "--quiet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_progress(part)
    os.kill(proc.pid, sig)
    proc.wait(timeout=60)
    assert not (part / "stats.json").exists(), "an interrupted run must not look complete"
    assert not any((part / f).exists() for f in FILES[:3])
    r = cli("generate", "--seed", "0", "--out", str(part), "--episodes", "300", "--workers", workers, "--quiet",
            "--resume")
    assert r.returncode == 0, r.stderr
    for f in FILES:
        assert (part / f).read_bytes() == (whole / f).read_bytes(), f
    assert not (part / ".kernelstrain-resume.json").exists()


def test_resume_with_other_arguments_is_refused(tmp_path):
    out = tmp_path / "o"
    proc = subprocess.Popen([sys.executable, "-m", "kernelstrain", "generate", "--seed", "0", "--out", str(out),
                             "--episodes", "400", "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_progress(out)
    proc.kill()
    proc.wait()
    r = cli("generate", "--seed", "1", "--out", str(out), "--episodes", "400", "--quiet", "--resume")
    assert r.returncode == 2 and "different seed" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_resume_without_a_run_is_a_clean_error(tmp_path):
    r = cli("generate", "--seed", "0", "--out", str(tmp_path), "--resume", "--quiet")
    assert r.returncode == 2 and "no interrupted run" in r.stderr


def peak_rss_mb(episodes: int, tmp_path) -> float:
    code = ("import resource, sys; from kernelstrain.cli import main; "
            f"main(['generate', '--seed', '0', '--out', r'{tmp_path / str(episodes)}', '--episodes', '{episodes}', "
            "'--quiet', '--workers', '1']); print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return int(r.stdout.strip().splitlines()[-1]) / 1024


def test_memory_is_flat_in_episode_count(tmp_path):
    small, large = peak_rss_mb(200, tmp_path), peak_rss_mb(2000, tmp_path)
    assert large < small * 1.25 + 10, f"peak RSS grew from {small:.0f} MB to {large:.0f} MB"
