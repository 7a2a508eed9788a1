"""`kernelstrain show`: an episode's steps, one step's feedback and its diff, in a terminal."""
import json
import re

import pytest

from kernelstrain.cli import main
from kernelstrain.report import browser_episode, read_feedback
from kernelstrain.show import find_episode, render


def episodes(data):
    return [json.loads(line) for line in (data / "episodes.jsonl").open()]


def changed_step(ep) -> int:
    """A step whose candidate differs from the best before it, and that best; not the last step (no turn follows
    the last candidate, so the multi-turn row carries no feedback for it)."""
    best_code = ep["baseline"]["code"]
    for s in ep["steps"][:-1]:
        if s["code"] != best_code and s["status"] == "compile_error":
            return s["step"]
        if s["kept"]:
            best_code = s["code"]
    return ep["steps"][0]["step"]


def test_show_prints_the_table_feedback_and_diff(small_dataset, capsys):
    ep = episodes(small_dataset)[3]
    step = changed_step(ep)
    assert main(["show", str(small_dataset), ep["id"], "--step", str(step)]) == 0
    out = capsys.readouterr().out
    assert "\x1b[" not in out                                   # captured stdout is not a terminal: plain text
    table = [line for line in out.splitlines() if re.match(r"^[> ] +\d+  ", line)]
    assert [int(line[1:].split()[0]) for line in table] == [s["step"] for s in ep["steps"]]
    assert sum(line.startswith(">") for line in table) == 1
    chosen = ep["steps"][step - 1]
    feedback = read_feedback(small_dataset / "sft_multiturn.jsonl", {ep["id"]})[ep["id"]][step - 1]
    assert feedback.splitlines()[0] in out
    assert f"+++ step {step}" in out and "\n@@ " in out
    added = [line[1:] for line in out.splitlines() if line.startswith("+") and not line.startswith("+++")]
    assert added and all(a in chosen["code"].splitlines() for a in added)


def test_default_step_is_the_best_and_colour_is_optional(small_dataset):
    ep = episodes(small_dataset)[0]
    view = browser_episode(ep, [])
    plain = render(view)
    assert re.search(rf"^> +{ep['best']['step'] or 1}  ", plain, re.M)
    coloured = render(view, colour=True)
    assert "\x1b[32m" in coloured and re.sub(r"\x1b\[[\d;]*m", "", coloured) == plain


def test_find_episode_does_not_match_a_prefix(small_dataset):
    first = episodes(small_dataset)[1]["id"]
    with pytest.raises(Exception, match="no episode"):
        find_episode(small_dataset / "episodes.jsonl", first[:-1])


@pytest.mark.parametrize("args, message", [
    (["no-such-episode"], "no episode 'no-such-episode'"),
    (["kernelstrain-s0-000000", "--step", "999"], "has steps 1.."),
])
def test_show_bad_input_is_one_line_exit_2(small_dataset, capsys, args, message):
    assert main(["show", str(small_dataset), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err and err.startswith("kernelstrain: error: ")


def test_show_on_a_directory_without_episodes(tmp_path, capsys):
    assert main(["show", str(tmp_path), "x"]) == 2
    assert "no episodes.jsonl" in capsys.readouterr().err
