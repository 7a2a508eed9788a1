"""`merge`: shard directories -> the single-run dataset, byte for byte."""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

from .errors import DataError, UsageError
from .generate import finish
from .holdout import with_contamination
from .stats import StatsAccumulator
from .validate import read_jsonl, read_stats
from .writers import FILES, StreamFile, prepare_out_dir


def merge(dirs: list[Path], out: Path, force: bool = False) -> dict:
    shards = []
    for d in dirs:
        stats = read_stats(d)
        if "shard" not in stats:
            raise UsageError(f"{d}: not a shard (stats.json has no 'shard'; generate it with --shard I/N)")
        i, n = (int(x) for x in stats["shard"].split("/"))
        shards.append((i, n, d, stats))
    shards.sort(key=lambda s: s[0])
    counts = {s[1] for s in shards}
    if len(counts) != 1 or [s[0] for s in shards] != list(range(shards[0][1])):
        raise UsageError(f"need every shard 0..N-1 of one run exactly once, got {[f'{s[0]}/{s[1]}' for s in shards]}")
    first = shards[0][3]
    for _, _, d, st in shards:
        if (st["profile"], st["seed"]) != (first["profile"], first["seed"]):
            raise UsageError(f"{d}: profile/seed {st['profile']}/{st['seed']} differ from {first['profile']}/{first['seed']}")
        for name in _holdout_files(first):
            if st["files"].get(name) != first["files"][name]:
                raise UsageError(f"{d}: {name} differs from the other shards'")
    prepare_out_dir(out, force)
    acc = StatsAccumulator()
    files = {}
    try:
        for key in ("episodes", "sft_multiturn", "sft_steps"):
            f = files[key] = StreamFile(out / FILES[key])
            for _, _, d, _ in shards:
                path = d / FILES[key]
                for n, line in _lines(path):
                    f.write(line)
                    if key == "episodes":
                        acc.add(_episode(line, path, n))
    except BaseException:
        for f in files.values():
            f.abort()
        raise
    for f in files.values():
        f.commit()
    summaries = {f.final.name: f.summary() for f in files.values()}
    for name in _holdout_files(first):
        shutil.copyfile(shards[0][2] / name, out / name)
        summaries[name] = first["files"][name]
    holdout = with_contamination(first["holdout"], out) if "holdout" in first else None   # against all shards
    profile = SimpleNamespace(name=first["profile"], description=first["profile_description"])
    stats = acc.result(profile, first["seed"], first["holdout_tasks"], summaries, holdout=holdout)
    finish(out, stats)
    return stats


def _holdout_files(stats: dict) -> list[str]:
    splits = stats.get("holdout", {}).get("splits") or {"combo": {"file": FILES["holdout"]}}
    return [s["file"] for s in splits.values()]


def _lines(path: Path):
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.endswith("\n"):
                    raise DataError(f"{path}:{n}: truncated line")
                yield n, line[:-1]
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None


def _episode(line: str, path: Path, n: int) -> dict:
    try:
        return json.loads(line)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{n}: not valid JSON ({e.msg})") from None
