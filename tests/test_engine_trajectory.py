"""scripts/read_trajectory.py: one trajectory as the model reads it, with the engineer's reason for
each step read from the trace."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

import read_trajectory  # noqa: E402


def _episodes(data):
    with open(data / "episodes.jsonl", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def test_every_step_gets_one_reason_that_says_what_it_measured(small_dataset):
    for ep in _episodes(small_dataset):
        why = read_trajectory.reasons(ep)
        assert len(why) == len(ep["steps"])
        for s, w in zip(ep["steps"], why):
            if s["status"] != "ok":
                assert "it fails" in w
            elif s["kept"]:
                assert "kept, the new best" in w and f"{s['time_ms']:g} ms" in w
            else:
                assert "kept, the new best" not in w


def test_a_repair_is_read_as_one_and_a_climb_as_a_rewrite():
    base = {"tag": "a", "params": {"t": 1}, "time_ms": 10.0, "code": "x"}
    steps = [{"step": 1, "kind": "structural", "tag": "b", "params": {"t": 1}, "status": "wrong_result",
              "failure": "mismatch", "bug": "race", "time_ms": None, "best_ms": 10.0, "kept": False},
             {"step": 2, "kind": "structural", "tag": "b", "params": {"t": 1}, "status": "ok", "failure": None,
              "bug": None, "time_ms": 5.0, "best_ms": 5.0, "kept": True},
             {"step": 3, "kind": "param_sweep", "tag": "b", "params": {"t": 2}, "status": "ok", "failure": None,
              "bug": None, "time_ms": 6.0, "best_ms": 5.0, "kept": False}]
    why = read_trajectory.reasons({"baseline": base, "steps": steps})
    assert why[0].startswith("Rewrite onto a new technique, `b`") and "risky transformation" in why[0]
    assert why[1].startswith("Repair of step 1's mismatch") and "kept, the new best" in why[1]
    assert why[2].startswith("Tune the best one parameter: t 1->2") and "(1.20x): slower, reverted" in why[2]


def test_the_rendered_trajectory_shows_every_assistant_turn_with_its_reason(small_dataset):
    ep = max(_episodes(small_dataset), key=lambda e: len(e["steps"]))
    row, messages = read_trajectory.load(small_dataset, ep["id"])
    text = read_trajectory.render(row, messages)
    assert text.count("  WHY step ") == len(ep["steps"])
    assert text.count("ASSISTANT step ") == len(ep["steps"])
    assert "USER: " in text and "```" not in text          # code shown as its change, feedback as lines


def test_stop_reasons_names_a_rule_for_every_episode_and_tables_them(capsys):
    import stop_reasons
    assert stop_reasons.main(["--config", "kernelstrain", "--seed", "5", "--sample", "6", "--list"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("module=")]
    assert len(rows) == 6
    stops = {field.split("=")[1] for line in rows for field in line.split() if field.startswith("stop=")}
    assert stops <= {"roofline", "launch", "patience", "exhausted", "budget", "time"}
    assert "| all | 6 |" in out


def test_a_repaired_opt_in_slip_is_the_same_change_written_right():
    base = {"tag": "a", "params": {"t": 1}, "time_ms": 10.0, "code": "x"}
    steps = [{"step": 1, "kind": "structural", "tag": "b", "params": {"t": 1, "optin": 1}, "status": "compile_error",
              "failure": "smem", "bug": None, "time_ms": None, "best_ms": 10.0, "kept": False},
             {"step": 2, "kind": "structural", "tag": "b", "params": {"t": 1, "optin": 0}, "status": "ok",
              "failure": None, "bug": None, "time_ms": 5.0, "best_ms": 5.0, "kept": True}]
    why = read_trajectory.reasons({"baseline": base, "steps": steps})
    assert why[1].startswith("Repair of step 1's smem on the same rung, the same change written right")
