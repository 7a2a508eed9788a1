"""Layouts are records (kernelstrain/layouts.py), the dataset is a library object
(kernelstrain.open), and a third layout is one record: a toy layout of episodes alone."""
from dataclasses import replace

import pytest

import kernelstrain
from kernelstrain import layouts, profiles
from kernelstrain.api import generate
from kernelstrain.cli import main
from kernelstrain.episodes import build_episode
from kernelstrain.errors import UsageError
from kernelstrain.stats import StatsAccumulator
from kernelstrain.validate import Findings, check_episode, rows
from kernelstrain.writers import FILES


def test_every_layout_record_is_complete():
    for name, layout in layouts.LAYOUTS.items():
        assert layout.name == name and layout.streamed[0] in layout.files and "holdout" in layout.files
        assert all(callable(getattr(layout, f)) for f in ("rows", "episode", "check", "qa", "card", "stored_steps"))
    assert tuple(layouts.LAYOUTS) == profiles.LAYOUTS


def test_open_reads_both_layouts(small_dataset, tmp_path):
    """open() gives the manifest, stats and layout; episodes() streams public episode rows
    whether the dataset stores them whole or as sessions re-rendered from their trace."""
    ks = kernelstrain.open(small_dataset)
    assert ks.layout is layouts.EPISODES and ks.manifest.seed == 0 and ks.stats["episodes"] == 40
    first = next(ks.episodes())
    assert ks.episode(first["id"]) == first and ks.code(first, 1) == first["steps"][0]["code"]
    mts, steps = ks.chat_rows(first)
    assert len(steps) == len(first["steps"]) and mts[0]["id"] == first["id"]
    sessions = generate("kernelinfer", seed=1, out=tmp_path / "ki", episodes=2)
    assert sessions.layout is layouts.SESSIONS and sessions.manifest.profile.output.timestamps
    eps = list(sessions.episodes())
    assert len(eps) == 2 and all(s["code"] for ep in eps for s in ep["steps"])
    assert len(sessions.replay(eps[0])) == len(eps[0]["steps"])
    assert sessions.validate().total == 0


def test_episode_on_a_task_of_ones_own():
    ep = kernelstrain.episode(task="gemv_cuda|A100|fp16|M=1,N=4096,K=4096", seed=3)
    assert ep == kernelstrain.episode(task="gemv_cuda|A100|fp16|M=1,N=4096,K=4096", seed=3)
    assert ep != kernelstrain.episode(task="gemv_cuda|A100|fp16|M=1,N=4096,K=4096", seed=4)
    with pytest.raises(UsageError, match="unknown module"):
        kernelstrain.episode(task={"module": "nope", "gpu": "A100", "dtype": "fp16", "shape": {}})


# -- a third layout, as one record ---------------------------------------------------------
def _toy_rows(plan, index):
    row = build_episode(plan, index).row()
    return {"episodes": [row]}, row


def _toy_check(data, ctx, held, out):
    acc = StatsAccumulator()
    for n, ep in rows(data / FILES["episodes"], out):
        if ep is not None and check_episode(ep, f"episodes.jsonl:{n}", out, ctx, n - 1):
            acc.add(ep)
    return acc


def _toy_card(stats):
    return f"# {stats['profile']}: {stats['episodes']} episodes, no chat files\n"


TOY = replace(layouts.EPISODES, name="toy", files={"episodes": FILES["episodes"], "holdout": FILES["holdout"]},
              streamed=("episodes",), rows=_toy_rows, check=_toy_check, card=_toy_card, qa_file=None)


def test_a_third_layout_is_one_record(tmp_path, monkeypatch):
    monkeypatch.setitem(layouts.LAYOUTS, "toy", TOY)
    monkeypatch.setattr(profiles, "LAYOUTS", (*profiles.LAYOUTS, "toy"))
    config = tmp_path / "toy.toml"
    text = profiles.DEFAULT_PROFILE.read_text(encoding="utf-8")
    config.write_text(text.replace("[output]\n", '[output]\nlayout = "toy"\n'), encoding="utf-8")
    out = tmp_path / "d"
    assert main(["generate", "--seed", "2", "--out", str(out), "--config", str(config), "--episodes", "3",
                 "--workers", "1", "--quiet"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["README.md", "episodes.jsonl", "manifest.json", "stats.json", "tasks_holdout.jsonl", "tasks_holdout_unseen_op.jsonl"]
    ds = kernelstrain.open(out)
    assert ds.layout is TOY and len(list(ds.episodes())) == 3
    assert main(["validate", str(out), "--workers", "1", "--quiet"]) == 0
    text = (out / "episodes.jsonl").read_text()
    assert '"status":"ok"' in text
    (out / "episodes.jsonl").write_text(text.replace('"status":"ok"', '"status":"okay"', 1))
    found = ds.validate()
    assert {"files", "rows_and_schema"} <= set(found.checks), list(found)


def test_findings_carry_check_ids(dataset_copy):
    lines = (dataset_copy / "episodes.jsonl").read_text().splitlines(keepends=True)
    assert '"status":"ok"' in lines[2]
    lines[2] = lines[2].replace('"status":"ok"', '"status":"okay"', 1)
    (dataset_copy / "episodes.jsonl").write_text("".join(lines))
    found = kernelstrain.open(dataset_copy).validate()
    assert found and {"files", "rows_and_schema"} <= set(found.checks), list(zip(found, found.checks))
    assert isinstance(Findings(1).checks, list)
