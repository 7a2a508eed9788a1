"""`validate --workers N` reports what one worker reports: the same findings, in the same order,
the same figures and exit code, on a sound dataset and on damaged ones of both layouts."""
import shutil

import pytest

from corrupt import refresh_hashes, rewrite_row
from kernelstrain.cli import main


def validate(data, workers: str, capsys) -> tuple:
    capsys.readouterr()
    code = main(["validate", str(data), "--workers", workers, "--quiet"])
    out = capsys.readouterr()
    return code, out.out, out.err


def damage_episode(d):
    """A step's time and a later episode's best both changed, the hashes refreshed: only content checks see it."""
    rewrite_row(d / "episodes.jsonl", 2, lambda ep: ep["steps"][0].update(time_ms=ep["steps"][0]["time_ms"] * 3))
    rewrite_row(d / "episodes.jsonl", 5, lambda ep: ep["best"].update(speedup=ep["best"]["speedup"] + 1))
    refresh_hashes(d)


def damage_session(d):
    """A message of the second session and its recorded baseline time changed."""
    def change(row):
        row["messages"][1]["content"] += " "
        row["baseline_ms"] *= 2
    rewrite_row(d / "sessions.jsonl", 2, change)


@pytest.mark.parametrize("config,episodes,damage", [("kernelstrain", "8", damage_episode),
                                                     ("kernelinfer", "3", damage_session)])
def test_workers_give_the_same_report(config, episodes, damage, tmp_path, capsys):
    sound = tmp_path / "sound"
    assert main(["generate", "--seed", "5", "--config", config, "--episodes", episodes, "--workers", "1",
                 "--out", str(sound), "--quiet"]) == 0
    one = validate(sound, "1", capsys)
    assert one[0] == 0 and one == validate(sound, "2", capsys)
    damaged = tmp_path / "damaged"
    shutil.copytree(sound, damaged)
    damage(damaged)
    one = validate(damaged, "1", capsys)
    assert one[0] == 1 and "problem" in one[1] + one[2]
    assert validate(damaged, "2", capsys) == one
