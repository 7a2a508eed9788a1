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
