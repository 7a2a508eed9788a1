"""scripts/bench_generate.py times nothing under CI or inside a test (its CI-free guard)."""
import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "bench_generate.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_generate", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("environ, found", [
    ({}, None), ({"CI": ""}, None), ({"CI": "false"}, None), ({"CI": " 0 "}, None), ({"HOME": "/root"}, None),
    ({"CI": "true"}, "CI"), ({"GITHUB_ACTIONS": "true"}, "GITHUB_ACTIONS"), ({"BUILDKITE": "1"}, "BUILDKITE"),
    ({"CODEBUILD_BUILD_ID": "b:1"}, "CODEBUILD_BUILD_ID"), ({"TOX_ENV_NAME": "py311"}, "TOX_ENV_NAME"),
    ({"PYTEST_CURRENT_TEST": "tests/t.py::x (call)"}, "PYTEST_CURRENT_TEST")])
def test_under_ci_names_the_marker(bench, environ, found):
    assert bench.under_ci(environ) == found


def test_main_refuses_inside_pytest_before_any_run(bench, monkeypatch, capsys):
    """A plain environment still refuses in a process that loaded pytest (a test calling main())."""
    monkeypatch.setattr(bench, "bench", lambda *a: pytest.fail("the bench ran"))
    monkeypatch.setattr(bench.os, "environ", {"HOME": "/root"})
    monkeypatch.setattr("sys.argv", ["bench_generate.py", "--episodes", "1", "--config", "kernelstrain"])
    assert bench.main() == 2
    assert "pytest is loaded" in capsys.readouterr().err
    assert bench.refuse({"HOME": "/root"}) is not None


def test_every_timed_run_refuses_inside_a_test_whoever_calls_it(bench, monkeypatch, capsys):
    """A caller that skips main (bench(), run(), the floor's child) times nothing inside a test either."""
    from types import SimpleNamespace
    monkeypatch.setattr(bench.subprocess, "run", lambda *a, **k: pytest.fail("a command ran"))
    monkeypatch.setattr(bench.os, "environ", {"HOME": "/root"})
    for call in (lambda: bench.run(["generate"]), lambda: bench.in_child(pytest.fail, "the child ran"),
                 lambda: bench.bench("kernelstrain", 1, SimpleNamespace(store=False))):
        with pytest.raises(SystemExit) as stop:
            call()
        assert stop.value.code == 2
        assert "pytest is loaded" in capsys.readouterr().err


@pytest.mark.parametrize("load, cores, judged", [(0.0, 2, True), (0.5, 2, True), (0.6, 2, False), (1.9, 2, False),
                                                 (14.5, 16, True), (14.6, 16, False), (0.0, 1, False)])
def test_wall_times_are_judged_only_with_a_core_and_a_half_idle(bench, load, cores, judged):
    assert (bench.busy(load, cores) is None) == judged


def test_main_refuses_wall_judging_on_a_busy_machine_and_takes_cpu(bench, monkeypatch, capsys):
    ran = []
    monkeypatch.setattr(bench, "refuse", lambda environ: None)       # (this test stands in for a plain shell)
    monkeypatch.setattr(bench, "bench", lambda config, n, a: ran.append((config, n)) or [])
    monkeypatch.setattr(bench.os, "getloadavg", lambda: (1.9, 1.0, 1.0))
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 2)
    monkeypatch.setattr("sys.argv", ["bench_generate.py", "--episodes", "7", "3"])
    assert bench.main() == 2 and ran == []
    assert "idle" in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", ["bench_generate.py", "--episodes", "7", "3", "--by", "cpu"])
    assert bench.main() == 0 and ran == [("kernelstrain", 7), ("kernelinfer", 3)]


def test_targets_judge_the_whole_profile_only_when_every_episode_ran(bench):
    """Each Done-when target is judged against its bound; the 2-worker whole-profile minutes are judged only
    where the bench ran all the profile's episodes (else projected, not judged); a missed bound is missed."""
    from types import SimpleNamespace
    a = SimpleNamespace(max_ratio=2.0, min_speedup=1.8, max_rss_mb=200, max_full_minutes=6.0)
    run = {"digest": "x", "code": 0, "rss_mb": 150}
    f = {"ratio": 1.9, "speedup": 1.85, "validate": 0.97, "validate2": 1.02, "two_s": 300.0}
    rows = {what.split(" (")[0]: met for what, _, _, met in bench.targets(f, a, 100, 100, (run,) * 4)}
    assert rows["validate/generate, 2 workers each"] is False and rows["whole profile"] is True
    assert [met for met in rows.values()].count(False) == 1
    partial = {what.split(" (")[0]: (value, met) for what, value, _, met in bench.targets(f, a, 50, 100, (run,) * 4)}
    assert partial["whole profile"] == ("~10.00 min projected", None)
    big = {**run, "rss_mb": 201}
    rows = {what.split(" (")[0]: met for what, _, _, met in bench.targets({**f, "two_s": 361.0}, a, 9, 9, (run, big, run, run))}
    assert rows["whole profile"] is False and rows["peak RSS, any run"] is False
