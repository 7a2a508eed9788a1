"""A fresh machine as the README describes it (issue 33): without torch, compiling a Triton
candidate leaves no stand-in `torch` in sys.modules, so later tests that need torch skip."""
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# a process where `import torch` fails, as on a machine without it
NO_TORCH = """
import importlib.abc, sys
class NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NoTorch())
"""


def test_triton_source_without_torch_leaves_no_stand_in():
    pytest.importorskip("triton", reason="needs triton (pip install 'kernelstrain[verify]')")
    code = NO_TORCH + """
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
from kernelstrain.compilers import load_triton_source
m = REGISTRY["rmsnorm_triton"]
v = m.variants[0]
task = make_task(m, "H100", m.dtypes[0], m.shapes[0])
ns = load_triton_source(m.render(v, v.defaults(), task))
assert callable(ns[m.compile_specs(v, v.defaults(), task)[0].name])
assert "torch" not in sys.modules, sys.modules["torch"]
try:
    import torch
except ImportError:
    print("torch still missing")
"""
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "torch still missing"


# -- answers that mean what they say -------------------------------------------------------

@pytest.mark.parametrize("config", ["kernelstrain", "kernelinfer"])
def test_holdout_writes_the_splits_generate_applies(tmp_path, capsys, config):
    """With no --frac / --seed, `holdout` uses the profile's own [holdout] settings (kernelinfer:
    frac 0.0932, 195 tasks, where a default of 0.08 wrote 168)."""
    import json

    from kernelstrain.cli import main
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    from kernelstrain.writers import SPLIT_FILES
    plan = make_plan(load_profile(config), 0)
    assert main(["holdout", "--config", config, "--out", str(tmp_path)]) == 0
    said = capsys.readouterr().out
    for split, tasks in plan.splits.items():
        rows = [json.loads(line) for line in (tmp_path / SPLIT_FILES[split][1]).open()]
        assert len(rows) == len(tasks) > 0
        assert f"{split}: {len(tasks)} held-out tasks" in said
    if config == "kernelinfer":
        assert len(plan.splits["combo"]) == round(plan.profile.holdout.frac * 2094) == 195


def test_stats_counts_every_split(small_dataset, capsys):
    from kernelstrain.cli import main
    from kernelstrain.writers import SPLIT_FILES
    files = [f for _, f in SPLIT_FILES.values() if (small_dataset / f).exists()]
    assert len(files) == 2     # the default profile: combo and unseen_op
    rows = {f: sum(1 for _ in (small_dataset / f).open()) for f in files}
    assert main(["stats", str(small_dataset)]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("holdout tasks"))
    assert line.split()[2] == f"{sum(rows.values()):,}", line
    assert "combo" in line and "unseen_op" in line


def _fused_dir(tmp_path):
    from kernelstrain.cli import main
    out = tmp_path / "fused"
    assert main(["tasks", "fused", "--count", "2", "--seed", "0", "--out", str(out), "--quiet"]) == 0
    return out


@pytest.mark.parametrize("kind", ["fused", "workdir", "export", "holdout", "shards"])
@pytest.mark.parametrize("verb", ["validate", "qa", "verify"])
def test_readers_name_every_directory_the_product_writes(small_dataset, tmp_path, capsys, kind, verb):
    """Given another of the product's outputs, a dataset reader says what it is and what to run
    (exit 2), instead of "not a kernelstrain stats file"."""
    import json
    import shutil

    from kernelstrain.cli import main
    if kind == "fused":
        target, says = _fused_dir(tmp_path), "fused-task directory"
    elif kind == "workdir":
        ep = json.loads((small_dataset / "episodes.jsonl").open().readline())
        target, says = tmp_path / "w", "agent workspace"
        assert main(["workdir", ep["task_id"], "--data", str(small_dataset), "--out", str(target)]) == 0
    elif kind == "export":
        target, says = tmp_path / "kb", "KernelBench export"
        assert main(["export", "kernelbench", str(small_dataset), "--out", str(target)]) == 0
    elif kind == "holdout":
        target, says = tmp_path / "h", "held-out task files"
        assert main(["holdout", "--out", str(target)]) == 0
    else:
        target, says = tmp_path / "shards", "holds 1 directory with a stats.json"
        shutil.copytree(small_dataset, target / "s0")
    capsys.readouterr()
    assert main([verb, str(target)]) == 2
    err = capsys.readouterr().err
    assert says in err and "not a kernelstrain stats file" not in err, err
    assert err.count("\n") == 1


def test_generate_says_on_stderr_when_its_own_qa_fails(tmp_path, monkeypatch, capsys, small_dataset):
    import kernelstrain.qa as qa_mod
    from kernelstrain.cli import main
    from kernelstrain.generation import qa_failures
    failing = [c["name"] for c in json.loads((small_dataset / "qa.json").read_text())["checks"] if not c["pass"]]
    said = qa_failures(small_dataset)                    # nothing to say when its qa passes, else each failing check
    assert said is None if not failing else all(name in said for name in failing), said
    real = qa_mod.report

    def failing(acc, *args):
        r = real(acc, *args)
        r["checks"][0] = dict(r["checks"][0], value=7, **{"pass": False})
        r["pass"] = False
        return r
    monkeypatch.setattr(qa_mod, "report", failing)
    monkeypatch.setattr("kernelstrain.generation.report", failing)   # the figures summed as episodes stream
    out = tmp_path / "d"
    assert main(["generate", "--seed", "0", "--out", str(out), "--episodes", "12", "--workers", "1", "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "kernelstrain: warning: the dataset's own qa fails: identical_code_keeps 7 (wants == 0)" in err, err
    assert f"kernelstrain qa {out}" in err


def test_qa_thresholds_allow_for_the_sample_size():
    """A 300-episode prefix of the default profile (207 compile errors, 132 typos: 0.638; a choice
    point reached 20 times, 18 on one rung) is within sampling noise of the thresholds; the same
    shares on 10x the sample, or 30 of 30 episodes climbing one rung at a choice point, fail."""
    from collections import Counter

    from kernelstrain.qa import _Acc, report

    def checks(syntax, others, paths):
        acc = _Acc()
        acc.fail.update(syntax=syntax, arch=others)
        acc.paths["m"] = Counter(paths)
        return {c["name"]: c for c in report(acc)["checks"]}
    small = checks(132, 75, {"a": 18, "b": 2})
    assert small["compile_errors_typo_share"]["value"] == 0.6377 and small["compile_errors_typo_share"]["pass"]
    assert small["max_choice_share"]["value"] == 0.9 and small["max_choice_share"]["pass"]
    large = checks(1320, 750, {"a": 30})
    assert large["compile_errors_typo_share"]["value"] == 0.6377 and not large["compile_errors_typo_share"]["pass"]
    assert large["max_choice_share"]["value"] == 1.0 and not large["max_choice_share"]["pass"]


# -- progress on every long command --------------------------------------------------------

class Terminal(io.StringIO):
    def isatty(self):
        return True


def _stderr_of(monkeypatch, argv):
    """(exit code, what a terminal on stderr would show) of one command."""
    from kernelstrain.cli import main
    term = Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    code = main(argv)
    monkeypatch.undo()
    return code, term.getvalue()


@pytest.mark.parametrize("verb, shown", [("validate", "checking episodes.jsonl"), ("qa", "reading episodes.jsonl")])
def test_long_commands_show_progress_on_a_terminal_only(small_dataset, monkeypatch, capsys, verb, shown):
    from kernelstrain.cli import main
    expected = main([verb, str(small_dataset), "--quiet"])   # qa exits 1 where a check fails (README, Behaviour)
    capsys.readouterr()
    assert expected == 0 or verb == "qa" and expected == 1
    code, err = _stderr_of(monkeypatch, [verb, str(small_dataset)])
    assert code == expected and shown in err and "%" in err and "elapsed" in err, err
    code, err = _stderr_of(monkeypatch, [verb, str(small_dataset), "--quiet"])
    assert code == expected and err == ""
    assert main([verb, str(small_dataset)]) == expected
    assert capsys.readouterr().err == ""          # not a terminal: nothing


def test_merge_and_generates_final_phase_show_progress(tmp_path, monkeypatch):
    base = ["generate", "--seed", "0", "--episodes", "6", "--workers", "1"]
    code, err = _stderr_of(monkeypatch, [*base, "--out", str(tmp_path / "s0"), "--shard", "0/2"])
    assert code == 0
    # contamination is measured and the QA figures summed as the episodes are built (no phase of
    # their own on a fresh run)
    for phase in ("generate", "writing the held-out tasks", "writing the dataset card"):
        assert phase in err, (phase, err)
    code, err = _stderr_of(monkeypatch, [*base, "--out", str(tmp_path / "s1"), "--shard", "1/2", "--quiet"])
    # no bar; a line only if the shard's own qa fails (a warning, not progress)
    assert code == 0 and all(line.startswith("kernelstrain: warning: ") for line in err.splitlines()), err
    code, err = _stderr_of(monkeypatch, ["merge", str(tmp_path / "s0"), str(tmp_path / "s1"), "--out",
                                         str(tmp_path / "m")])
    assert code == 0 and "merging s0/episodes.jsonl" in err and "contamination" in err, err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc (the CUDA toolkit)")
def test_verify_shows_its_compiles(small_dataset, monkeypatch):
    pytest.importorskip("triton", reason="needs triton (pip install 'kernelstrain[verify]')")
    code, err = _stderr_of(monkeypatch, ["verify", str(small_dataset), "--sample", "3", "--jobs", "1"])
    assert code == 0 and "verify: compiled  3/3 candidates" in err, err


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="gpu-check builds need nvcc (the CUDA toolkit)")
def test_gpu_check_compile_only_shows_its_builds(small_dataset, tmp_path, monkeypatch):
    import kernelstrain.gpucheck.runtime as runtime
    monkeypatch.setattr(runtime, "build_case", lambda case, build_dir: {"ok": True, "log": "", "compile_s": 0.0})
    code, err = _stderr_of(monkeypatch, ["gpu-check", str(small_dataset), "--compile-only", "--sample", "4",
                                         "--build-dir", str(tmp_path / "b")])
    assert "gpu-check: built" in err and "candidates" in err, (code, err)


def test_workspace_build_says_it_needs_torch(small_dataset, tmp_path):
    """`build.py --dry` needs PyTorch (the binding compiles against its headers): without it,
    one line says so instead of a traceback."""
    import json
    import runpy  # noqa: F401 - used by the child

    from kernelstrain.cli import main
    ep = json.loads((small_dataset / "episodes.jsonl").open().readline())
    assert main(["workdir", ep["task_id"], "--data", str(small_dataset), "--out", str(tmp_path / "w")]) == 0
    build = tmp_path / "w" / "build.py"
    code = NO_TORCH + f"import runpy, sys; sys.argv = [{str(build)!r}, '--dry']; runpy.run_path({str(build)!r}, run_name='__main__')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 1 and out.stderr.strip() == "build: needs PyTorch (pip install torch; a CPU build is enough for --dry)", out.stderr


def test_every_data_file_of_the_package_is_installed():
    """`pip install .` copies only the package data pyproject names: a data file the code reads but
    no pattern matches is missing on a fresh machine (corpus/hip_names.txt once was)."""
    import fnmatch
    import tomllib
    root = Path(__file__).resolve().parents[1]
    patterns = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["kernelstrain"]
    package = root / "kernelstrain"
    data = [p.relative_to(package).as_posix() for p in package.rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts]
    assert data, "the package holds data files"
    missing = [f for f in data if not any(fnmatch.fnmatch(f, pat) for pat in patterns)]
    assert not missing, f"not in pyproject's package-data: {missing}"
