"""`validate` finds every kind of corruption, naming file and line — with stats.json's hashes
left stale, and refreshed by a careful corrupter (then only content checks can find it)."""
import json
import re
import shutil

import pytest

from corrupt import dumps, lines, refresh_hashes, rewrite_row, write_lines
from kernelstrain.cli import main
from kernelstrain.messages import fmt_ms


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    out = tmp_path_factory.mktemp("v") / "d"
    assert main(["generate", "--seed", "0", "--out", str(out), "--episodes", "36", "--quiet", "--workers", "1"]) == 0
    return out


def episodes(d):
    return [json.loads(raw) for raw in lines(d / "episodes.jsonl")]


def find(d, pred):
    """(line, episode, step) of the first step with pred(episode, step)."""
    for n, ep in enumerate(episodes(d), 1):
        for i, s in enumerate(ep["steps"]):
            if pred(ep, s):
                return n, ep, i
    raise AssertionError("no such step in the test dataset")


def step_change(pred, change):
    def corrupt(d):
        n, _, i = find(d, pred)
        rewrite_row(d / "episodes.jsonl", n, lambda ep: change(ep, ep["steps"][i]))
        return f"episodes.jsonl:{n}"
    return corrupt


def episode_change(line, change):
    def corrupt(d):
        rewrite_row(d / "episodes.jsonl", line, change)
        return f"episodes.jsonl:{line}"
    return corrupt


def row_change(name, line, change):
    def corrupt(d):
        rewrite_row(d / name, line, change)
        return f"{name}:{line}"
    return corrupt


def raw_lines(name, edit, where):
    def corrupt(d):
        rows = lines(d / name)
        edit(rows)
        write_lines(d / name, rows)
        return f"{name}:{where(rows) if callable(where) else where}"
    return corrupt


def _single_windows(rows) -> tuple[int, int]:
    """Line numbers of the first two neighbouring multi-turn rows past the first that are whole
    episodes (one window each): swapping them misplaces both, whatever the run's window counts."""
    one = [json.loads(r)["windows"] == 1 for r in rows]
    i = next(i for i in range(2, len(rows)) if one[i - 1] and one[i])
    return i, i + 1


def swap(rows, a, b):
    rows[a - 1], rows[b - 1] = rows[b - 1], rows[a - 1]


def set_msg(index, edit):
    def change(row):
        row["messages"][index]["content"] = edit(row["messages"][index]["content"])
    return change


def multiturn_code_changed(d):
    """A comment slipped into the second candidate of the first multiturn row that has two (the
    row's place depends on how long the first episodes are)."""
    rows = [json.loads(r) for r in lines(d / "sft_multiturn.jsonl")]
    line = next(i for i, r in enumerate(rows, 1) if len(r["messages"]) > 4)
    rewrite_row(d / "sft_multiturn.jsonl", line, set_msg(4, lambda t: t.replace("\n", "\n// x\n", 1)))
    return f"sft_multiturn.jsonl:{line}"


def history_changed(d):
    """A word slipped into the history line of step 1 in the first step row that has a history
    (the row's place depends on how long the first episodes are)."""
    rows = [json.loads(r) for r in lines(d / "sft_steps.jsonl")]
    line = next(i for i, r in enumerate(rows, 1) if "- step 1: " in r["messages"][1]["content"])
    rewrite_row(d / "sft_steps.jsonl", line, set_msg(1, lambda t: t.replace("- step 1: ", "- step 1: joint ", 1)))
    return f"sft_steps.jsonl:{line}"


def leak_final_best(d):
    """The episode's final best written into the first feedback of a conversation past its first
    row that has one (an episode may end after one step: its row has no feedback to leak into)."""
    rows = [json.loads(r) for r in lines(d / "sft_multiturn.jsonl")]
    line = next(i for i, r in enumerate(rows, 1) if i > 1 and len(r["messages"]) > 3)
    ep = next(e for e in episodes(d) if e["id"] == rows[line - 1]["id"])
    rewrite_row(d / "sft_multiturn.jsonl", line, set_msg(3, lambda t: t + f" (final: {fmt_ms(ep['best']['time_ms'])})"))
    return f"sft_multiturn.jsonl:{line}"


def other_param_value(ep, s):
    from kernelstrain.ops import REGISTRY
    v = REGISTRY[ep["module"]].variant(s["tag"])
    for p in v.params:
        if len(p.values) > 1:
            entry = next(e for e in s["params"] if e["name"] == p.name)
            entry["value"] = next(x for x in p.values if x != entry["value"])
            return
    raise AssertionError("no tunable parameter")


def has_tunable(ep, s):
    from kernelstrain.ops import REGISTRY
    return s["status"] == "ok" and any(len(p.values) > 1 for p in REGISTRY[ep["module"]].variant(s["tag"]).params)


def holdout_leak(d):
    ep = episodes(d)[0]
    rows = lines(d / "tasks_holdout.jsonl")
    row = json.loads(rows[0])
    row.update(module=ep["module"], gpu=ep["gpu"], dtype=ep["dtype"], shape=ep["shape"])
    rows.append((dumps(row) + "\n").encode())
    write_lines(d / "tasks_holdout.jsonl", rows)
    return f"tasks_holdout.jsonl:{len(rows)}"


def stats_count(d):
    stats = json.loads((d / "stats.json").read_text())
    stats["status"]["ok"] += 1
    (d / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    return "stats.json"


def not_wgmma_gpu(ep, s):
    from kernelstrain.gpus import GPUS
    return s["status"] == "ok" and "wgmma" not in GPUS[ep["gpu"]].features


def rename_bug(ep, s):
    from kernelstrain.ops import REGISTRY
    others = [b for b in REGISTRY[ep["module"]].variant(s["tag"]).bugs if b != s["bug"]]
    s["bug"] = others[0] if others else "no_such_bug"


ok = lambda ep, s: s["status"] == "ok"           # noqa: E731
failed = lambda ep, s: s["status"] != "ok"       # noqa: E731

KINDS = {
    "code_byte_changed": step_change(lambda ep, s: ok(ep, s) and len(s["code"]) > 200,
                                     lambda ep, s: s.update(code=s["code"][:150] + ("#" if s["code"][150] != "#" else "%") + s["code"][151:])),
    "final_best_leaked_into_feedback": leak_final_best,
    "sft_steps_code_differs": row_change("sft_steps.jsonl", 4, set_msg(2, lambda t: t.replace("\n", "\n// tuned\n", 1))),
    "multiturn_code_differs": multiturn_code_changed,
    "speedup_multiplied": episode_change(2, lambda ep: ep["best"].update(speedup=round(ep["best"]["speedup"] * 2, 4))),
    "wrong_schema_version": episode_change(3, lambda ep: ep.update(schema="kernelstrain/episode@1")),
    "arch_not_the_gpus": episode_change(4, lambda ep: ep.update(arch="sm_80" if ep["arch"] != "sm_80" else "sm_90a")),
    "deleted_holdout_row": raw_lines("tasks_holdout.jsonl", lambda rows: rows.pop(4), 5),
    "swapped_episode_lines": raw_lines("episodes.jsonl", lambda rows: swap(rows, 3, 4), 3),
    "cut_off_last_line": raw_lines("episodes.jsonl", lambda rows: rows.__setitem__(-1, rows[-1][:-60]), len),
    "duplicated_step_line": raw_lines("sft_steps.jsonl", lambda rows: rows.insert(7, rows[6]), 8),
    "swapped_step_lines": raw_lines("sft_steps.jsonl", lambda rows: swap(rows, 5, 6), 5),
    "corrupt_json_multiturn": raw_lines("sft_multiturn.jsonl", lambda rows: rows.__setitem__(1, rows[1][:300] + b"\n"), 2),
    "invalid_utf8_byte": raw_lines("episodes.jsonl", lambda rows: rows.__setitem__(1, rows[1].replace(b'"code":"', b'"code":"\xff', 1)), 2),
    "line_is_a_list": raw_lines("episodes.jsonl", lambda rows: rows.__setitem__(1, b"[]\n"), 2),
    "multiturn_line_is_a_number": raw_lines("sft_multiturn.jsonl", lambda rows: rows.__setitem__(2, b"42\n"), 3),
    "string_time_ms": step_change(ok, lambda ep, s: s.update(time_ms=str(s["time_ms"]))),
    "kept_failure": step_change(failed, lambda ep, s: s.update(kept=True)),
    "broken_running_minimum": episode_change(3, lambda ep: ep["steps"][-1].update(best_ms=1e-9)),
    "time_on_failed_step": step_change(failed, lambda ep, s: s.update(time_ms=1.0)),
    "wgmma_in_ok_step": step_change(not_wgmma_gpu, lambda ep, s: s.update(code=s["code"] + '\nasm volatile("wgmma.fence.sync.aligned;");')),
    "holdout_leak": holdout_leak,
    "attempts_miscounted": episode_change(5, lambda ep: ep["attempts"].update(kept=ep["attempts"]["kept"] + 1)),
    "smem_bytes_changed": step_change(ok, lambda ep, s: s.update(smem_bytes=s["smem_bytes"] + 16)),
    "compile_error_text_changed": step_change(lambda ep, s: s["status"] == "compile_error",
                                              lambda ep, s: s.update(error=s["error"].replace("error", "warning", 1))),
    "params_changed": step_change(has_tunable, lambda ep, s: other_param_value(ep, s)),
    "feedback_number_changed": row_change("sft_multiturn.jsonl", 1, set_msg(3, lambda t: t.replace(" registers", "0 registers", 1)
                                                                            if " registers" in t else t + " 1.0000 ms")),
    "history_changed": lambda d: history_changed(d),
    "profile_figure_changed": lambda d: profile_changed(d),
    "deleted_step_row": raw_lines("sft_steps.jsonl", lambda rows: rows.pop(9), 10),
    "task_id_changed": episode_change(6, lambda ep: ep.update(task_id="t-000000000000")),
    "stats_count_changed": stats_count,
    "typo_pick_changed": step_change(lambda ep, s: s["typo"] is not None, lambda ep, s: s.update(typo=s["typo"] + 1)),
    "bug_renamed": step_change(lambda ep, s: s["bug"] is not None, rename_bug),
    "baseline_code_changed": episode_change(7, lambda ep: ep["baseline"].update(code=ep["baseline"]["code"] + "\n")),
    "elapsed_changed": episode_change(8, lambda ep: ep.update(elapsed_s=ep["elapsed_s"] + 5)),
    "swapped_multiturn_lines": raw_lines("sft_multiturn.jsonl", lambda rows: swap(rows, *_single_windows(rows)),
                                         lambda rows: _single_windows(rows)[0]),
    "holdout_row_changed": row_change("tasks_holdout.jsonl", 3, lambda r: r["baseline"].update(time_ms=r["baseline"]["time_ms"] * 2)),
    "episode_task_swapped_gpu": episode_change(9, lambda ep: ep.update(gpu="H100" if ep["gpu"] != "H100" else "A100")),
}


def profile_changed(d):
    """A profiler figure of a correct step's feedback (profiler.text: the share of peak DRAM bandwidth)
    raised by one: validate re-derives it from the simulator, not from the written row."""
    for line, raw in enumerate(lines(d / "sft_multiturn.jsonl"), 1):
        row = json.loads(raw)
        for i, m in enumerate(row["messages"]):
            if m["role"] == "user" and "\nthroughput: DRAM " in m["content"]:
                edit = lambda t: re.sub(r"(\d+)(\.\d)?% of peak", lambda x: f"{int(x.group(1)) + 1}{x.group(2) or ''}% of peak", t, 1)
                rewrite_row(d / "sft_multiturn.jsonl", line, set_msg(i, edit))
                return f"sft_multiturn.jsonl:{line}"
    raise AssertionError("no profile in the test dataset")


def test_the_suite_is_large():
    assert len(KINDS) >= 25


def test_the_pristine_dataset_is_clean(pristine, capsys):
    assert main(["validate", str(pristine)]) == 0
    assert "ok: no problems found" in capsys.readouterr().out


@pytest.mark.parametrize("refreshed", [False, True], ids=["stale-hashes", "refreshed-hashes"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_corruption_is_found_with_file_and_line(kind, refreshed, pristine, tmp_path, capsys):
    d = tmp_path / "d"
    shutil.copytree(pristine, d)
    where = KINDS[kind](d)
    if refreshed:
        refresh_hashes(d)
    code = main(["validate", str(d), "--max-problems", "1000"])
    out = capsys.readouterr().out
    assert code == 1, out
    found = [line for line in out.splitlines() if line.startswith(where + ":") or line.startswith(where + " ")]
    assert found, f"{kind}: nothing reported at {where}\n{out}"
    if not refreshed and kind != "stats_count_changed":
        assert "sha256/bytes differ from stats.json" in out


def test_max_problems_limits_the_list_but_counts_all(pristine, tmp_path, capsys):
    d = tmp_path / "d"
    shutil.copytree(pristine, d)
    rewrite_row(d / "episodes.jsonl", 2, lambda ep: [s.update(smem_bytes=s["smem_bytes"] + 1) for s in ep["steps"]])
    assert main(["validate", str(d), "--max-problems", "3"]) == 1
    out = [line for line in capsys.readouterr().out.splitlines()
           if not line.startswith("holdout split ")]     # the combo split's contamination note is not a problem
    assert len(out) == 4 and "(first 3 shown" in out[-1] and int(out[-1].split()[0]) > 3


def test_kind_that_does_not_say_what_changed(dataset_copy, capsys):
    def relabel(ep):
        s = next(s for s in ep["steps"] if s["kind"] == "structural")
        s["kind"] = "param_sweep"
    refresh = episode_change(2, relabel)(dataset_copy)
    refresh_hashes(dataset_copy)
    code = main(["validate", str(dataset_copy), "--max-problems", "1000"])
    out = capsys.readouterr().out
    assert code == 1 and f"{refresh} step" in out and "kind param_sweep but the variant changed" in out
