"""validate finds the consistent corruptions a row's own checks cannot (issue 34, item 8): a
flipped `end`, a consistently shifted clock, an edited qa.json or card, in both layouts, each at
its file and line; and an edited episode is named at its own row, not at the rows derived from it."""
import hashlib
import json
import shutil

import pytest

from corrupt import rewrite_row
from kernelstrain.cli import main
from kernelstrain.profiles import DEFAULT_PROFILE
from kernelstrain.dataset import validate

KI = str(DEFAULT_PROFILE.parent / "kernelinfer.toml")
OTHER_END = {"time": "converged", "converged": "budget", "budget": "converged"}


def refresh_all(data):
    """Every file stats.json lists gets its rows, bytes and sha256 back (a careful corrupter)."""
    stats = json.loads((data / "stats.json").read_text())
    for name in stats["files"]:
        raw = (data / name).read_bytes()
        stats["files"][name] = {"rows": raw.count(b"\n"), "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    (data / "stats.json").write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")


@pytest.fixture(scope="module")
def layouts(tmp_path_factory):
    root = tmp_path_factory.mktemp("layouts")
    assert main(["generate", "--seed", "0", "--out", str(root / "episodes"), "--episodes", "4", "--workers", "1",
                 "--quiet"]) == 0
    assert main(["generate", "--seed", "0", "--out", str(root / "sessions"), "--episodes", "3", "--workers", "1",
                 "--quiet", "--config", KI]) == 0
    return root


def _copy(layouts, layout, tmp_path):
    dst = tmp_path / layout
    shutil.copytree(layouts / layout, dst)
    return dst


def _main_file(layout):
    return "sessions.jsonl" if layout == "sessions" else "episodes.jsonl"


def _edit_row(data, layout, change):
    """Change row 2 of the layout's main file (and, for sessions, its batch copy)."""
    name = _main_file(layout)
    rewrite_row(data / name, 2, change)
    if layout == "sessions":
        (data / "batches" / "batch_000.jsonl").write_bytes((data / name).read_bytes())
    refresh_all(data)


def _where(data) -> list[str]:
    return [p.split(": ", 1)[0] for p in validate(data, limit=200)]


@pytest.mark.parametrize("layout", ["episodes", "sessions"])
def test_a_flipped_end_is_found_at_its_row(layouts, tmp_path, layout):
    data = _copy(layouts, layout, tmp_path)
    _edit_row(data, layout, lambda r: r.update(end=OTHER_END[r["end"]]))
    assert f"{_main_file(layout)}:2" in _where(data)


@pytest.mark.parametrize("layout", ["episodes", "sessions"])
def test_a_consistent_clock_shift_is_found_at_its_row(layouts, tmp_path, layout):
    data = _copy(layouts, layout, tmp_path)

    def later(r):
        for s in r["steps" if layout == "episodes" else "trace"]:
            s["elapsed_s"] += 60
        r["elapsed_s"] += 60
    _edit_row(data, layout, later)
    assert f"{_main_file(layout)}:2" in _where(data)


def test_an_edited_qa_json_is_found_at_its_line(layouts, tmp_path):
    data = _copy(layouts, "episodes", tmp_path)
    text = (data / "qa.json").read_text().splitlines(keepends=True)
    k = next(i for i, line in enumerate(text) if '"pass": false' in line or '"pass": true' in line)
    text[k] = text[k].replace("false", "true") if "false" in text[k] else text[k].replace("true", "false")
    (data / "qa.json").write_text("".join(text))
    assert f"qa.json:{k + 1}" in _where(data)


@pytest.mark.parametrize("layout", ["episodes", "sessions"])
def test_an_edited_card_is_found_at_its_line(layouts, tmp_path, layout):
    data = _copy(layouts, layout, tmp_path)
    text = (data / "README.md").read_text().splitlines(keepends=True)
    k = len(text) // 2
    text[k] = "All kernels verified on real hardware.\n"
    (data / "README.md").write_text("".join(text))
    assert f"README.md:{k + 1}" in _where(data)


@pytest.mark.parametrize("change", ["code", "status", "kept", "params"])
def test_an_edited_episode_is_named_at_its_row_not_at_derived_rows(layouts, tmp_path, change):
    data = _copy(layouts, "episodes", tmp_path)

    def edit(r):
        s = r["steps"][1]
        if change == "code":
            s["code"] += "\n// tuned by hand\n"
        elif change == "status":
            s["status"] = "wrong_result" if s["status"] == "ok" else "ok"
        elif change == "kept":
            s["kept"] = not s["kept"]
        else:
            s["params"][0]["value"] = s["params"][0]["value"] * 2 if isinstance(s["params"][0]["value"], int) else 3
    _edit_row(data, "episodes", edit)
    where = _where(data)
    assert any(w.split(" ")[0] == "episodes.jsonl:2" for w in where), where
    assert not [w for w in where if w.startswith(("sft_multiturn", "sft_steps"))], where
