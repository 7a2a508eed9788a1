"""Same seed and profile -> the same bytes: across runs, prefixes, workers and shards."""
import subprocess
import sys

from kernelstrain.cli import main

FILES = ["episodes.jsonl", "sft_multiturn.jsonl", "sft_steps.jsonl", "tasks_holdout.jsonl", "stats.json", "README.md"]


def gen(out, *extra):
    assert main(["generate", "--seed", "0", "--out", str(out), "--quiet", *extra]) == 0
    return {f: (out / f).read_bytes() for f in FILES}


def test_same_seed_twice_is_byte_identical(small_dataset, tmp_path):
    again = gen(tmp_path / "b", "--episodes", "40", "--workers", "1")
    assert again == {f: (small_dataset / f).read_bytes() for f in FILES}


def test_other_seed_differs(small_dataset, tmp_path):
    assert main(["generate", "--seed", "1", "--out", str(tmp_path / "s1"), "--episodes", "40", "--quiet"]) == 0
    assert (tmp_path / "s1" / "episodes.jsonl").read_bytes() != (small_dataset / "episodes.jsonl").read_bytes()


def test_episodes_n_is_a_prefix_of_a_longer_run(small_dataset, tmp_path):
    short = gen(tmp_path / "short", "--episodes", "15", "--workers", "1")
    for f in ["episodes.jsonl", "sft_multiturn.jsonl", "sft_steps.jsonl"]:
        assert (small_dataset / f).read_bytes().startswith(short[f])
    assert short["tasks_holdout.jsonl"] == (small_dataset / "tasks_holdout.jsonl").read_bytes()


def test_workers_do_not_change_bytes(small_dataset, tmp_path, monkeypatch):
    """Two workers write one worker's bytes, the episodes' contamination measured either way the early pool
    does (generation.episodes_ahead): each worker's first episodes sent unscanned (as before the parent hands
    the matcher over: forced here, whatever the timing), the rest scanned by the workers with the handed-over
    matcher (one task primed: the others are handed out after the matcher is written)."""
    from kernelstrain import contamination, generation
    plain, first = generation._scan_part, [0]

    def late(ep):         # in each forked worker (its own count): its first three episodes wait
        first[0] += 1
        if first[0] <= 3 and isinstance(generation._SCAN, contamination.Unmatched):
            return generation._SCAN.part(ep)
        return plain(ep)
    merged = {"waiting": 0, "scanned": 0}
    add = contamination.Incremental.add

    def counted(self, part):
        merged["waiting" if isinstance(part, contamination.Waiting) else "scanned"] += 1
        return add(self, part)
    monkeypatch.setattr(generation, "_scan_part", late)
    monkeypatch.setattr(generation, "PRIMED_MAX", 1)
    monkeypatch.setattr(generation, "spare_core", lambda workers: True)      # the early pool, however many cores
    monkeypatch.setattr(contamination.Incremental, "add", counted)
    assert gen(tmp_path / "w2", "--episodes", "40", "--workers", "2") == {f: (small_dataset / f).read_bytes() for f in FILES}
    assert merged["waiting"] >= 3 and merged["scanned"] >= 20 and sum(merged.values()) == 40, merged


def test_workers_on_every_core_take_no_early_pool(tmp_path, monkeypatch):
    """Where the workers take every core (generation.spare_core), the pool is forked after the matcher is built:
    no episode comes back unscanned, and two workers write one worker's bytes."""
    from kernelstrain import contamination, generation
    merged = {"waiting": 0, "scanned": 0}
    add = contamination.Incremental.add

    def counted(self, part):
        merged["waiting" if isinstance(part, contamination.Waiting) else "scanned"] += 1
        return add(self, part)
    monkeypatch.setattr(contamination.Incremental, "add", counted)
    monkeypatch.setattr(generation, "default_workers", lambda: 2)
    assert not generation.spare_core(2) and generation.spare_core(1)
    one = gen(tmp_path / "w1", "--episodes", "12", "--workers", "1")
    assert gen(tmp_path / "w2", "--episodes", "12", "--workers", "2") == one
    assert merged == {"waiting": 0, "scanned": 24}, merged


def test_shards_merge_to_single_run(small_dataset, tmp_path):
    dirs = []
    for i in range(3):
        d = tmp_path / f"shard{i}"
        assert main(["generate", "--seed", "0", "--out", str(d), "--episodes", "40", "--shard", f"{i}/3", "--quiet"]) == 0
        dirs.append(str(d))
    assert main(["merge", *dirs, "--out", str(tmp_path / "merged")]) == 0
    assert {f: (tmp_path / "merged" / f).read_bytes() for f in FILES} == {f: (small_dataset / f).read_bytes() for f in FILES}


def test_python_m_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "kernelstrain", "ops"], capture_output=True, text=True)
    assert proc.returncode == 0 and "modules," in proc.stdout
