"""Fuzz (Hypothesis): crafted ids and file names in a dataset, through merge, export, workdir and
report, never make a command write outside its output, and never crash it (exit 0 or 2)."""
import hashlib
import json
import shutil
import tempfile
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the fuzz test needs hypothesis (the dev extra)")
from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

from corrupt import rewrite_row  # noqa: E402
from kernelstrain.cli import main  # noqa: E402

# names an attacker would try: separators, parent steps, absolute paths, hidden names, control
# characters, NUL, long names, and ordinary ids
PIECES = st.sampled_from(["..", ".", "/", "\\", "~", "/tmp", "x", "kernelstrain-s0-000000", "\x00", "\x1b[2J",
                          "\n", " ", "*", "%2e%2e", "a" * 300, "é", ".kernelstrain-lock", "stats.json"])
NAMES = st.lists(PIECES, min_size=1, max_size=6).map("".join)
FUZZ = settings(max_examples=25, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
            for p in sorted(root.rglob("*"))}


def _outside(root: Path, out: Path) -> dict:
    """Everything under root but the output."""
    o = str(out.relative_to(root))
    return {k: v for k, v in _tree(root).items() if k != o and not k.startswith(o + "/")}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    for name, extra in (("data", []), ("s0", ["--shard", "0/2"]), ("s1", ["--shard", "1/2"])):
        assert main(["generate", "--seed", "0", "--out", str(root / name), "--episodes", "2", "--workers", "1",
                     "--quiet", *extra]) == 0
    for p in (root / "data").glob("tasks_holdout_*.jsonl"):   # export reads every split: keep it small
        p.unlink()
    return root


def _sandbox(base: Path, names) -> Path:
    box = Path(tempfile.mkdtemp(dir=base))
    for n in names:
        shutil.copytree(base / n, box / n)
    return box


def _run_and_check(box: Path, out: Path, argv: list) -> None:
    before = _outside(box, out)
    code = main([str(a) for a in argv])
    assert code in (0, 2), argv
    assert _outside(box, out) == before, argv
    shutil.rmtree(box)


@FUZZ
@given(episode_id=NAMES, task_id=NAMES)
def test_export_stays_inside_its_output(base, episode_id, task_id):
    box = _sandbox(base, ["data"])
    rewrite_row(box / "data" / "episodes.jsonl", 1, lambda r: r.update(id=episode_id, task_id=task_id))
    _run_and_check(box, box / "kb", ["export", "kernelbench", box / "data", "--out", box / "kb"])


@FUZZ
@given(task_id=NAMES)
def test_workdir_stays_inside_its_output(base, task_id):
    box = _sandbox(base, ["data"])
    rewrite_row(box / "data" / "episodes.jsonl", 1, lambda r: r.update(task_id=task_id))
    _run_and_check(box, box / "ws", ["workdir", task_id, "--data", box / "data", "--out", box / "ws"])


@FUZZ
@given(episode_id=NAMES, module=NAMES)
def test_report_stays_inside_its_output(base, episode_id, module):
    box = _sandbox(base, ["data"])
    rewrite_row(box / "data" / "episodes.jsonl", 1, lambda r: r.update(id=episode_id, module=module))
    out = box / "r"
    out.mkdir()
    _run_and_check(box, out, ["report", box / "data", "--out", out / "report.html"])


@FUZZ
@given(split=NAMES, file=NAMES)
def test_merge_stays_inside_its_output(base, split, file):
    box = _sandbox(base, ["s0", "s1"])
    for s in ("s0", "s1"):
        path = box / s / "stats.json"
        stats = json.loads(path.read_text())
        stats["holdout"]["splits"][split] = {**stats["holdout"]["splits"]["combo"], "file": file}
        stats["files"][file] = stats["files"]["tasks_holdout.jsonl"]
        path.write_text(json.dumps(stats))
    _run_and_check(box, box / "m", ["merge", box / "s0", box / "s1", "--out", box / "m"])
