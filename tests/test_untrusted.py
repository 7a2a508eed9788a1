"""Datasets from elsewhere cannot hurt the user (issue 34): every path a dataset names stays
inside its output, no command writes over its inputs, dataset code runs or is copied only when
it is kernelstrain's own render (or the user says --trust-dataset), dataset text reaches the
terminal escaped, bad input is exit 2 with nothing left behind, and the advice after a failure
always works."""
import errno
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from corrupt import dumps, lines, refresh_hashes, rewrite_row, snapshot, write_lines
from kernelstrain.cli import main
from kernelstrain.profiles import DEFAULT_PROFILE

KI = str(DEFAULT_PROFILE.parent / "kernelinfer.toml")


def _gen(out, *args):
    assert main(["generate", "--seed", "0", "--out", str(out), "--workers", "1", "--quiet", *args]) == 0


def _run(*argv, cwd=None, limit=None, env=None):
    def pre():
        if limit:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([sys.executable, "-m", "kernelstrain", *map(str, argv)], capture_output=True, text=True,
                          cwd=cwd, preexec_fn=pre, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1]),
                                                         **(env or {})})


def _one_error(r, code=2):
    err = r.stderr.strip().splitlines()
    assert r.returncode == code and len(err) == 1 and err[0].startswith("kernelstrain: error: "), r.stderr
    assert "\x1b" not in r.stderr
    return err[0]


def _hidden(d: Path) -> list:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


@pytest.fixture(scope="module")
def w(tmp_path_factory):
    w = tmp_path_factory.mktemp("untrusted")
    _gen(w / "data", "--episodes", "6")
    for i in range(2):
        _gen(w / f"s{i}", "--episodes", "6", "--shard", f"{i}/2")
    _gen(w / "ki", "--episodes", "3", "--config", KI)
    assert main(["tasks", "fused", "--count", "2", "--seed", "0", "--out", str(w / "fused"), "--quiet"]) == 0
    return w


def _copy(w, name, tmp_path, to=None):
    dst = tmp_path / (to or name)
    shutil.copytree(w / name, dst)
    return dst


# -- 1. every path a dataset names is checked ---------------------------------------------
@pytest.mark.parametrize("name", ["ABS", "../escaped.jsonl"])
def test_merge_never_writes_where_a_shard_says(w, tmp_path, name):
    victim = tmp_path / "victim.jsonl"
    victim.write_text("precious\n" * 4)
    shards = [_copy(w, f"s{i}", tmp_path) for i in range(2)]
    target = str(victim) if name == "ABS" else name
    for s in shards:
        stats = json.loads((s / "stats.json").read_text())
        old = stats["holdout"]["splits"]["unseen_op"]["file"]
        stats["holdout"]["splits"]["unseen_op"]["file"] = target
        stats["files"][target] = stats["files"].pop(old)
        (s / "stats.json").write_text(json.dumps(stats))
    before = snapshot(tmp_path)
    r = _run("merge", *shards, "--out", tmp_path / "m")
    assert "not the layout's tasks_holdout_unseen_op.jsonl" in _one_error(r)
    assert victim.read_text() == "precious\n" * 4 and snapshot(tmp_path) == before


def _set_episode_field(data: Path, key: str, value: str) -> None:
    rewrite_row(data / "episodes.jsonl", 1, lambda row: row.__setitem__(key, value))


@pytest.mark.parametrize("case", ["episode_id", "task_id", "holdout_task_id", "fused_id"])
def test_export_ids_with_dot_dot_never_leave_out(w, tmp_path, case):
    box = tmp_path / "box"
    box.mkdir()
    if case == "fused_id":
        data = _copy(w, "fused", box, "data")
        rewrite_row(data / "candidates_fused.jsonl", 1, lambda r: r.__setitem__("id", "../../../pwned"))
    else:
        data = _copy(w, "data", box, "data")
        if case == "holdout_task_id":
            rewrite_row(data / "tasks_holdout.jsonl", 1, lambda r: r.__setitem__("task_id", "../../../pwned"))
        else:
            _set_episode_field(data, "id" if case == "episode_id" else "task_id", "../../../pwned")
    before = snapshot(tmp_path)
    r = _run("export", "kernelbench", data, "--out", box / "kb")
    _one_error(r)
    assert snapshot(tmp_path) == before


# -- 2. one output guard for every writer ----------------------------------------------------
@pytest.mark.parametrize("verb", ["workdir", "export"])
@pytest.mark.parametrize("where", ["data", "parent"])
def test_force_never_removes_the_input(w, tmp_path, verb, where):
    data = _copy(w, "data", tmp_path)
    out = data if where == "data" else tmp_path
    task = json.loads(lines(data / "episodes.jsonl")[0])["task_id"]
    argv = ["workdir", task, "--data", data] if verb == "workdir" else ["export", "kernelbench", data]
    before = snapshot(tmp_path)
    assert "would write over the input" in _one_error(_run(*argv, "--out", out, "--force"))
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", ["stats.json", "README.md", "qa.json", "episodes.jsonl", "batches/batch_000.jsonl"])
def test_report_never_overwrites_a_dataset_file(w, tmp_path, name):
    data = _copy(w, "ki" if name.startswith("batches") else "data", tmp_path)
    before = snapshot(tmp_path)
    assert "would write over the input" in _one_error(_run("report", data, "--out", data / name))
    assert snapshot(tmp_path) == before


def test_force_replaces_only_what_the_command_writes(w, tmp_path):
    data = w / "data"
    task = json.loads(lines(data / "episodes.jsonl")[0])["task_id"]
    out = tmp_path / "ws"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    (out / "model.py").write_text("old")
    assert main(["workdir", task, "--data", str(data), "--out", str(out), "--force"]) == 0
    assert (out / "notes.txt").read_text() == "mine" and (out / "model.py").read_text() != "old"
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "notes.txt").write_text("mine")
    assert main(["export", "kernelbench", str(data), "--out", str(kb), "--force"]) == 0
    assert (kb / "notes.txt").read_text() == "mine" and (kb / "index.json").exists()
    assert _hidden(tmp_path) == []


# -- 4. dataset code runs or is copied only when it is kernelstrain's render ------------------
PAYLOAD = "\nimport os; open(os.environ.get('PWNED', '/tmp/pwned'), 'w').write('ran')\n"


def _tamper_all_steps(data: Path) -> None:
    rows = []
    for raw in lines(data / "episodes.jsonl"):
        row = json.loads(raw)
        for s in row["steps"]:
            s["code"] += PAYLOAD
        row["baseline"]["code"] += PAYLOAD
        rows.append((dumps(row) + "\n").encode())
    write_lines(data / "episodes.jsonl", rows)
    refresh_hashes(data)


def test_verify_refuses_code_its_recipe_does_not_render(w, tmp_path):
    data = _copy(w, "data", tmp_path)
    _tamper_all_steps(data)
    flag = tmp_path / "pwned"
    r = _run("verify", data, "--sample", "3", "--jobs", "1", env={"PWNED": str(flag)})
    line = _one_error(r)
    assert "not what its recipe renders" in line and "--trust-dataset" in line and not flag.exists()


def test_gpu_check_refuses_code_its_recipe_does_not_render(w, tmp_path):
    data = _copy(w, "data", tmp_path)
    _tamper_all_steps(data)
    r = _run("gpu-check", data, "--compile-only", "--sample", "3", "--build-dir", tmp_path / "b")
    assert "--trust-dataset" in _one_error(r) and not (tmp_path / "b").exists()


def test_tasks_filter_refuses_a_source_tasks_fused_did_not_compose(w, tmp_path):
    data = _copy(w, "fused", tmp_path)
    rewrite_row(data / "candidates_fused.jsonl", 1, lambda r: r.__setitem__("source", r["source"] + PAYLOAD))
    before = snapshot(tmp_path)
    r = _run("tasks", "filter", data, "--device", "cpu")
    assert "--trust-dataset" in _one_error(r) and snapshot(tmp_path) == before


@pytest.mark.parametrize("case", ["step", "baseline", "reference", "fused"])
def test_workdir_and_export_never_copy_foreign_code(w, tmp_path, case):
    if case == "fused":
        data = _copy(w, "fused", tmp_path)
        rewrite_row(data / "candidates_fused.jsonl", 1, lambda r: r.__setitem__("source", r["source"] + PAYLOAD))
        task = json.loads(lines(data / "candidates_fused.jsonl")[0])["id"]
        extra = []
    elif case == "reference":
        data = _copy(w, "data", tmp_path)
        rewrite_row(data / "tasks_holdout.jsonl", 1, lambda r: r.__setitem__("reference", r["reference"] + PAYLOAD))
        task = json.loads(lines(data / "tasks_holdout.jsonl")[0])["task_id"]
        extra = []
    else:
        data = _copy(w, "data", tmp_path)
        _tamper_all_steps(data)
        task = json.loads(lines(data / "episodes.jsonl")[0])["task_id"]
        extra = ["--step", "1"] if case == "step" else []
    before = snapshot(tmp_path)
    assert "recipe" in _one_error(_run("workdir", task, "--data", data, "--out", tmp_path / "ws", *extra)) \
        or "compose" in _one_error(_run("workdir", task, "--data", data, "--out", tmp_path / "ws", *extra))
    _one_error(_run("export", "kernelbench", data, "--out", tmp_path / "kb"))
    assert snapshot(tmp_path) == before


# -- 5. terminal output escaped ---------------------------------------------------------------
ESC = "\x1b]0;owned\x07\x1b[2J\x1b[31mfake\r"


def test_show_and_stats_escape_dataset_text(w, tmp_path, capsys):
    data = _copy(w, "data", tmp_path)

    def poison(row):
        row["desc"] = ESC
        for s in row["steps"]:
            if s["error"]:
                s["error"] = ESC + s["error"]
        row["steps"][0]["tag"] = row["steps"][0]["tag"] + ESC
    rewrite_row(data / "episodes.jsonl", 1, poison)
    ep = json.loads(lines(data / "episodes.jsonl")[0])
    bad = next((s["step"] for s in ep["steps"] if s["error"]), 1)
    for step in (1, bad):
        assert main(["show", str(data), ep["id"], "--step", str(step)]) == 0
        out = capsys.readouterr().out
        assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\\x1b" in out
    stats = json.loads((data / "stats.json").read_text())
    stats["profile"] = ESC
    (data / "stats.json").write_text(json.dumps(stats))
    assert main(["stats", str(data)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b" in out


def test_error_lines_escape_dataset_text(w, tmp_path):
    data = _copy(w, "data", tmp_path)
    rewrite_row(data / "episodes.jsonl", 1, lambda r: r.update(task_id=ESC, module="no_such_module"))
    r = _run("export", "kernelbench", data, "--out", tmp_path / "kb")
    assert "\\x1b" in _one_error(r)


# -- 6. no exit 3 on bad input ----------------------------------------------------------------
def test_workdir_out_dot_is_exit_2_or_works(w, tmp_path):
    task = json.loads(lines(w / "data" / "episodes.jsonl")[0])["task_id"]
    here = tmp_path / "here"
    here.mkdir()
    (here / "keep.txt").write_text("x")
    _one_error(_run("workdir", task, "--data", w / "data", "--out", ".", cwd=here))
    r = _run("workdir", task, "--data", w / "data", "--out", ".", "--force", cwd=here)
    assert r.returncode == 0, r.stderr
    assert (here / "keep.txt").exists() and (here / "model.py").exists() and _hidden(tmp_path) == []


def test_report_per_module_0_is_exit_2(w, tmp_path):
    _one_error(_run("report", w / "data", "--per-module", "0", "--out", tmp_path / "r.html"))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("key", ["steps", "code"])
@pytest.mark.parametrize("verb", ["report", "show"])
def test_report_and_show_on_a_row_missing_a_key(w, tmp_path, key, verb):
    data = _copy(w, "data", tmp_path)
    ep_id = json.loads(lines(data / "episodes.jsonl")[0])["id"]
    rewrite_row(data / "episodes.jsonl", 1, lambda r: r.pop("steps") if key == "steps" else r["steps"][0].pop("code"))
    before = snapshot(tmp_path)
    argv = ["report", data, "--out", tmp_path / "r.html"] if verb == "report" else ["show", data, ep_id]
    assert "malformed" in _one_error(_run(*argv))
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("change", [lambda s: {"schema": s["schema"]},
                                    lambda s: {**s, "rows": "many", "by_op": [1], "flops": "x"}])
def test_stats_on_malformed_fused_stats(w, tmp_path, change):
    data = _copy(w, "fused", tmp_path)
    stats = json.loads((data / "stats.json").read_text())
    (data / "stats.json").write_text(json.dumps(change(stats)))
    _one_error(_run("stats", data))


@pytest.mark.parametrize("table", ["baseline_cap = nan", "slip_weights = {const_cast = nan}", "baseline_cap = inf"])
def test_non_finite_profile_numbers_are_exit_2_and_leave_nothing(tmp_path, table):
    profile = tmp_path / "p.toml"
    profile.write_text(DEFAULT_PROFILE.read_text() + f"\n[search]\n{table}\n")
    r = _run("generate", "--seed", "0", "--out", tmp_path / "o", "--config", profile, "--episodes", "2", "--quiet")
    assert "finite" in _one_error(r) or ">= 0" in _one_error(r)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.toml"]


# -- 7. recovery that always converges ----------------------------------------------------------
def _data_bytes(d: Path) -> dict:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in d.iterdir() if p.is_file()}


@pytest.mark.parametrize("point", ["start:1", "staging-created:1"])
def test_generate_or_resume_works_after_a_kill_at_any_moment(w, tmp_path, point):
    out = tmp_path / "o"
    r = _run("generate", "--seed", "0", "--out", out, "--episodes", "6", "--workers", "1", "--quiet",
             env={"KERNELSTRAIN_FAULT": point})
    assert r.returncode == -signal.SIGKILL, r.stderr
    r = _run("generate", "--seed", "0", "--out", out, "--episodes", "6", "--workers", "1", "--quiet", "--resume")
    assert r.returncode == 0, r.stderr
    assert _data_bytes(out) == _data_bytes(w / "data") and _hidden(tmp_path) == []


def test_disk_full_before_the_first_checkpoint_gives_advice_that_works(w, tmp_path, monkeypatch, capsys):
    import kernelstrain.generation as g
    real = g._checkpoint

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(g, "_checkpoint", full)
    out = tmp_path / "o"
    assert main(["generate", "--seed", "0", "--out", str(out), "--episodes", "6", "--workers", "1", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no space left" in err and _hidden(tmp_path) == []
    monkeypatch.setattr(g, "_checkpoint", real)
    again = ["--resume"] if "--resume" in err else []
    assert main(["generate", "--seed", "0", "--out", str(out), "--episodes", "6", "--workers", "1", "--quiet",
                 *again]) == 0
    assert _data_bytes(out) == _data_bytes(w / "data")


def test_a_missing_package_data_file_is_an_internal_error_not_a_full_disk(tmp_path, monkeypatch, capsys):
    """A broken install (a corpus file of the package gone) is exit 3 naming the file and a
    reinstall, never "free space and rerun" (which could not help); nothing is left behind."""
    import kernelstrain.generation as g
    gone = g.PACKAGE / "corpus" / "hip_names.txt"

    def missing(*a, **k):
        raise FileNotFoundError(errno.ENOENT, "No such file or directory", str(gone))
    monkeypatch.setattr(g, "_checkpoint", missing)
    out = tmp_path / "o"
    assert main(["generate", "--seed", "0", "--out", str(out), "--episodes", "6", "--workers", "1", "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "internal error" in err and str(gone) in err and "reinstall" in err and "free space" not in err
    assert _hidden(tmp_path) == [] and not out.exists()


@pytest.mark.parametrize("verb", ["workdir", "report", "tasks fused", "holdout"])
def test_full_disk_leaves_no_temporary_files(w, tmp_path, verb):
    out_dir = tmp_path / "o"
    out_dir.mkdir()
    task = json.loads(lines(w / "data" / "episodes.jsonl")[0])["task_id"]
    argv = {"workdir": ["workdir", task, "--data", w / "data", "--out", out_dir / "ws"],
            "report": ["report", w / "data", "--out", out_dir / "r.html"],
            "tasks fused": ["tasks", "fused", "--count", "200", "--seed", "0", "--out", out_dir / "f"],
            "holdout": ["holdout", "--out", out_dir / "h"]}[verb]
    r = _run(*argv, limit=3000)
    line = _one_error(r)
    assert str(out_dir) in line
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == ["o"]


def test_full_disk_on_verify_report_leaves_no_temporary(w, tmp_path, monkeypatch, capsys):
    import kernelstrain.writers as wr

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(wr.os, "fsync", full)
    report = tmp_path / "v.json"
    assert main(["verify", str(w / "data"), "--sample", "1", "--jobs", "1", "--report", str(report)]) == 2
    assert list(tmp_path.iterdir()) == []
