"""generate builds its episodes with the set-up (plan, contamination matcher, caches) out of the cyclic
collector's reach (dataset.set_up_frozen around generation.episodes_ahead's episodes, issue 32): each full
collection walked the whole set-up again, in every worker (and wrote to its pages, copied then from the
parent's). The collector is left as it was, and the bytes are the same with 1 and 2 workers and an early pool."""
import gc

from kernelstrain.cli import main

FILES = ["episodes.jsonl", "sft_multiturn.jsonl", "sft_steps.jsonl", "tasks_holdout.jsonl", "stats.json"]


def _gen(out, workers: str) -> dict:
    assert main(["generate", "--seed", "0", "--out", str(out), "--quiet", "--episodes", "6", "--workers", workers]) == 0
    return {f: (out / f).read_bytes() for f in FILES}


def test_episodes_are_built_with_the_set_up_frozen(tmp_path, monkeypatch):
    from kernelstrain import generation, stats
    work, add = generation._work, stats.StatsAccumulator.add
    seen = []

    def counted(index):          # in the worker that builds the episode (this process with one worker)
        blocks, slim, *rest = work(index)
        return (blocks, {**slim, "frozen": gc.get_freeze_count()}, *rest)

    def took(self, ep):          # the parent's
        seen.append(ep.pop("frozen"))
        return add(self, ep)
    monkeypatch.setattr(generation, "_work", counted)
    monkeypatch.setattr(stats.StatsAccumulator, "add", took)
    assert gc.get_freeze_count() == 0
    outputs = []
    for name, workers, cores in (("w1", "1", 2), ("w2", "2", 2), ("early", "2", 3)):
        monkeypatch.setattr(generation, "default_workers", lambda cores=cores: cores)   # 3: the early pool
        seen.clear()
        outputs.append(_gen(tmp_path / name, workers))
        assert len(seen) == 6 and all(n > 1000 for n in seen), (name, seen)
        assert gc.get_freeze_count() == 0, name
    assert outputs[0] == outputs[1] == outputs[2]


def test_generate_leaves_a_callers_frozen_objects_frozen(tmp_path):
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        _gen(tmp_path / "w1", "1")
        assert 0 < gc.get_freeze_count() <= frozen
    finally:
        gc.unfreeze()
