"""The rows trainers take: the validation split is grouped by task and a profile setting, the
prompt/completion rows are the weight-1 step rows, stats.json says what the chat rows hold, and
the sessions layout's windows are checked like the default profile's."""
import json
import re
import shutil
from pathlib import Path

from kernelstrain.cli import main
from kernelstrain.training import is_validation
from kernelstrain.writers import SPLIT_CONFIGS, validation_file

FIXTURE = Path(__file__).parent / "fixtures" / "sessions_profile.toml"


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.open()]


def test_validation_split_is_grouped_by_task(small_dataset):
    episodes = lines(small_dataset / "episodes.jsonl") + lines(small_dataset / "episodes.validation.jsonl")
    task = {e["id"]: e["task_id"] for e in episodes}
    assert len(task) == 40
    stats = json.loads((small_dataset / "stats.json").read_text())
    frac = stats["chat"]["validation_frac"]
    assert frac == 0.05 and stats["episodes"] == 40
    for config in (c for c in SPLIT_CONFIGS if c != "sessions"):
        name = f"{config}.jsonl"
        train, val = lines(small_dataset / name), lines(small_dataset / validation_file(name))
        tasks = [{task[r.get("episode_id", r["id"])] for r in rows} for rows in (train, val)]
        assert val and not tasks[0] & tasks[1], config
        assert not any(is_validation(t, frac) for t in tasks[0]) and all(is_validation(t, frac) for t in tasks[1])
    held = {t for t in task.values() if is_validation(t, frac)}
    assert 0 < len(held) < len(set(task.values()))


def test_prompt_completion_rows_are_the_weight_1_step_rows(small_dataset):
    for name in ("sft_steps.jsonl", "sft_steps.validation.jsonl"):
        steps = [r for r in lines(small_dataset / name) if r["weight"] == 1]
        pcs = lines(small_dataset / name.replace("sft_steps", "sft_prompt_completion"))
        assert [p["id"] for p in pcs] == [s["id"] for s in steps] and pcs
        for p, s in zip(pcs, steps):
            assert p["prompt"] == [{"role": m["role"], "content": m["content"]} for m in s["messages"][:2]]
            assert p["completion"] == [{"role": "assistant", "content": s["messages"][2]["content"]}]


def test_stats_say_what_the_chat_rows_hold(small_dataset, capsys):
    chat = json.loads((small_dataset / "stats.json").read_text())["chat"]
    steps = lines(small_dataset / "sft_steps.jsonl")
    f = chat["files"]["sft_steps.jsonl"]
    assert (f["rows"], f["targets"], f["weight1_targets"]) == (len(steps), len(steps), sum(r["weight"] for r in steps))
    assert chat["files"]["sft_prompt_completion.jsonl"]["weight1_share"] == 1.0
    windows = chat["files"]["sft_multiturn.jsonl"]
    assert windows["within_budget"] == 1.0 and windows["tokens"]["max"] <= chat["max_context_tokens"]
    assert main(["stats", str(small_dataset)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"sft_steps\.jsonl +[\d,]+ rows, weight 1 on [\d.]+% of", out)
    card = (small_dataset / "README.md").read_text()
    assert "      - split: validation\n        path: sft_steps.validation.jsonl" in card
    assert "message_field_training: weight" in card and "completion_only_loss=True" in card


def windowed_profile(tmp_path: Path) -> Path:
    """The sessions fixture with windows of 3,000 tokens and half the tasks held for validation."""
    text = FIXTURE.read_text().replace("max_context_tokens = 0", "max_context_tokens = 3000\nvalidation_frac = 0.5")
    path = tmp_path / "windowed.toml"
    path.write_text(text)
    return path


def test_sessions_windows_are_validated(tmp_path, capsys):
    data = tmp_path / "w"
    assert main(["generate", "--seed", "0", "--config", str(windowed_profile(tmp_path)), "--out", str(data),
                 "--episodes", "6", "--quiet", "--workers", "1"]) == 0
    sessions = lines(data / "sessions.jsonl") + lines(data / "sessions.validation.jsonl")
    assert len(sessions) == 6 and not {s["task_id"] for s in lines(data / "sessions.jsonl")} & \
        {s["task_id"] for s in lines(data / "sessions.validation.jsonl")}
    train, val = lines(data / "sft_multiturn.jsonl"), lines(data / "sft_multiturn.validation.jsonl")
    assert val and {w["id"] for w in train + val} == {s["id"] for s in sessions}
    assert not {w["task_id"] for w in train} & {w["task_id"] for w in val}
    for s in sessions:
        ws = [w for w in train + val if w["id"] == s["id"]]
        assert len(ws) == ws[0]["windows"]
        assert ws[0]["messages"][:3] == s["messages"][:3]          # system, task, first candidate
        for w in ws[1:]:                                            # later windows: task, history, best
            opener = w["messages"][1]["content"]
            assert "History:" in opener and "Current best (" in opener and opener.startswith(s["messages"][1]["content"][:60])
    assert any(w["windows"] > 1 for w in train + val)
    assert main(["validate", str(data)]) == 0
    broken = tmp_path / "b"
    shutil.copytree(data, broken)
    rows = (broken / "sft_multiturn.jsonl").read_text().splitlines(keepends=True)
    n = next(k for k, r in enumerate(rows) if json.loads(r)["window"] > 0)
    rows[n] = rows[n].replace("Current best (", "Current best (edited, ", 1)
    (broken / "sft_multiturn.jsonl").write_text("".join(rows))
    capsys.readouterr()
    assert main(["validate", str(broken)]) == 1
    assert f"sft_multiturn.jsonl:{n + 1}:" in capsys.readouterr().out


def test_validate_names_a_task_in_the_other_splits_file(dataset_copy, capsys):
    """An episode of a validation task moved, in plan order, into the train split's file: every
    line is still in place, only the split is wrong, and validate names it."""
    train, val = (dataset_copy / "episodes.jsonl", dataset_copy / "episodes.validation.jsonl")
    rows, moved = train.read_text().splitlines(keepends=True), val.read_text().splitlines(keepends=True)
    index = int(json.loads(moved[0])["id"].rsplit("-", 1)[1])
    at = sum(int(json.loads(r)["id"].rsplit("-", 1)[1]) < index for r in rows)
    train.write_text("".join(rows[:at] + moved[:1] + rows[at:]))
    val.write_text("".join(moved[1:]))
    capsys.readouterr()
    assert main(["validate", str(dataset_copy), "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert f"episodes.jsonl:{at + 1}: task {json.loads(moved[0])['task_id']} belongs to the validation split" in out
