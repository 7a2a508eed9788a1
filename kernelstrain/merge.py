"""`merge`: shard directories -> the single-run dataset, byte for byte.

Every shard is checked before anything reaches the target: its stats.json, its files'
sizes and sha256 against it, every row parses, the shards are all N of one run (same
profile, profile file, seed, generator and episode total) and their episodes are the
contiguous ranges of that run. The result is built in a staging directory and swapped in."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

from . import progress
from .errors import DataError, UsageError
from .generate import finish
from .holdout import with_contamination
from .layouts import all_files, streamed_keys
from .dataset import Dataset
from .manifest import dumps_manifest
from .stats import StatsAccumulator
from .safety import check_output, terminal_text
from .training import CHAT_KEYS, chat_figure, chat_settings
from .writers import FILES, SPLIT_FILES, Staging, StreamFile, check_out_dir, write_error
SAME = ("profile", "profile_description", "seed", "generator", "holdout_tasks", "layout", "batch_size")
# (stats' `chat` figures differ between shards; their settings are the profile's, which profile_sha pins)


def merge(dirs: list[Path], out: Path, force: bool = False) -> dict:
    """Merge all N shards of one run into `out`; returns the merged stats."""
    check_output(out, dirs)
    shards = _shards(dirs)
    for s in shards:
        _check_sizes(s)
    check_out_dir(out, force)
    stage = Staging(out)
    try:
        stage.create()
        stats = _build(shards, stage.dir)
        stage.swap({"merge": [str(s.dir) for s in shards]})
    except OSError as e:
        stage.remove()
        raise write_error(out, e) from None
    except BaseException:
        stage.remove()
        raise
    return stats


def _shards(dirs: list[Path]) -> list:
    shards = []
    for d in dirs:
        ds = Dataset(d)
        stats = ds.stats
        where = d / "stats.json"
        run = stats.get("run")
        if "shard" not in stats:
            raise UsageError(f"{d}: not a shard (stats.json has no 'shard'; generate it with --shard I/N)")
        try:
            i, n = (int(x) for x in str(stats["shard"]).split("/"))
        except ValueError:
            raise DataError(f"{where}: bad shard {stats['shard']!r}") from None
        if not isinstance(run, dict) or not isinstance(run.get("episodes"), int) or not 0 <= i < n:
            raise DataError(f"{where}: shard {stats['shard']!r} without a valid 'run' record")
        names = all_files(ds.layout)
        if not isinstance(stats.get("files"), dict) or any(not isinstance(stats["files"].get(f), dict)
                                                          for f in names.values()):
            raise DataError(f"{where}: no file summaries for {', '.join(names.values())}")
        first = run["episodes"] * i // n
        shards.append(SimpleNamespace(dir=d, index=i, count=n, stats=stats, run=run, manifest=ds.manifest, layout=ds.layout,
                                      start=first, stop=run["episodes"] * (i + 1) // n))
    shards.sort(key=lambda s: s.index)
    if len({s.count for s in shards}) != 1 or [s.index for s in shards] != list(range(shards[0].count)):
        raise UsageError(f"need every shard 0..N-1 of one run exactly once, got "
                         f"{[f'{s.index}/{s.count}' for s in shards]}")
    first = shards[0]
    for s in shards[1:]:
        if dumps_manifest(s.manifest) != dumps_manifest(first.manifest):
            raise UsageError(f"{s.dir}: its run manifest differs from {first.dir}'s: not shards of one run")
        for key in SAME:
            if s.stats.get(key) != first.stats.get(key):
                raise UsageError(f"{s.dir}: {key} {s.stats.get(key)!r} differs from {first.dir}'s "
                                 f"{first.stats.get(key)!r}: not shards of one run")
        for key in ("profile_sha", "episodes"):
            if s.run.get(key) != first.run.get(key):
                what = "profile file" if key == "profile_sha" else "episode total"
                raise UsageError(f"{s.dir}: {what} differs from {first.dir}'s: not shards of one run")
        for name in _holdout_files(first.stats):
            if s.stats["files"].get(name) != first.stats["files"].get(name):
                raise UsageError(f"{s.dir}: {name} differs from the other shards'")
    for s in shards:
        if s.stats.get("episodes") != s.stop - s.start:
            raise DataError(f"{s.dir / 'stats.json'}: {s.stats.get('episodes')} episodes, but shard "
                            f"{s.index}/{s.count} of {s.run['episodes']} holds {s.stop - s.start}")
    return shards


def _check_sizes(shard) -> None:
    """The cheap check first: every file exists with the size stats.json records."""
    for name in dict.fromkeys([*all_files(shard.layout).values(), *_holdout_files(shard.stats)]):
        path = shard.dir / name
        want = shard.stats["files"].get(name, {}).get("bytes")
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            raise DataError(f"{path}: file not found") from None
        if size != want:
            raise DataError(f"{path}: {size} bytes, stats.json records {want} (truncated or modified)")


def _build(shards: list, stage: Path) -> dict:
    """Write the merged files into `stage`, checking each shard's rows and hashes on the way;
    any problem raises before the swap, so the target is never touched."""
    acc = StatsAccumulator()
    summaries = {}
    first = shards[0].stats
    layout = shards[0].layout
    keys, names = streamed_keys(layout), all_files(layout)
    for key in keys:
        f = StreamFile(stage / names[key])
        try:
            for s in shards:
                _copy(s, names[key], f, acc if key == keys[0] else None, acc if key in CHAT_KEYS else None)
        finally:
            f.close()
        summaries[names[key]] = f.summary()
    for name in _holdout_files(first):
        hold = StreamFile(stage / name)
        try:
            _copy(shards[0], name, hold, None)
        finally:
            hold.close()
        summaries[name] = hold.summary()
    # contamination again, against the training files of all the shards together
    if layout.cut:
        summaries.update(layout.cut(stage, shards[0].manifest.profile.output.batch_size))
    holdout = with_contamination(first["holdout"], stage, layout) if "holdout" in first else None
    manifest = shards[0].manifest
    profile = manifest.profile
    stats = acc.result(profile, manifest.seed, first["holdout_tasks"], summaries, holdout=holdout, layout=layout.name,
                       batch_size=profile.output.batch_size if layout.cut else None,
                       chat=chat_settings(profile.output))
    finish(stage, stats, shards[0].manifest)
    return stats


def _holdout_files(stats: dict) -> list[str]:
    """The holdout split files of a run (every shard holds the same ones), named by the layout
    (writers.SPLIT_FILES) from the split names: never a path a shard's stats.json supplies."""
    splits = (stats.get("holdout") or {}).get("splits") or {"combo": {"file": FILES["holdout"]}}
    if not isinstance(splits, dict):
        raise DataError(f"stats.json: holdout splits {terminal_text(repr(splits))[:80]} are not a mapping")
    names = []
    for split, record in splits.items():
        if split not in SPLIT_FILES:
            raise DataError(f"stats.json: unknown holdout split {terminal_text(repr(split))[:80]} "
                            f"(known: {', '.join(SPLIT_FILES)})")
        name = SPLIT_FILES[split][1]
        if not isinstance(record, dict) or record.get("file") != name:
            raise DataError(f"stats.json: holdout split {split} names file "
                            f"{terminal_text(repr(record.get('file') if isinstance(record, dict) else record))[:80]}, "
                            f"not the layout's {name}")
        names.append(name)
    return names


def _copy(shard, name: str, f: StreamFile, acc: StatsAccumulator | None, chat: StatsAccumulator | None = None) -> None:
    """Append a shard's file to f, checking it; episode rows go to acc's stats, chat rows'
    figures to chat's."""
    path = shard.dir / name
    want = shard.stats["files"][name]
    digest, rows = hashlib.sha256(), 0
    prefix = f"{shard.stats['profile']}-s{shard.stats['seed']}-"
    with open(path, "rb") as fh:
        for n, raw in enumerate(progress.lines(fh, f"merging {shard.dir.name}/{name}"), 1):
            digest.update(raw)
            if not raw.endswith(b"\n"):
                raise DataError(f"{path}:{n}: truncated line (no newline at the end)")
            try:
                row = json.loads(raw)
            except (ValueError, UnicodeDecodeError) as e:
                raise DataError(f"{path}:{n}: not valid JSON ({getattr(e, 'msg', e)})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{n}: not a JSON object")
            if acc is not None:
                expected = f"{prefix}{shard.start + n - 1:06d}"
                if row.get("id") != expected:
                    raise DataError(f"{path}:{n}: episode {row.get('id')!r}, expected {expected} "
                                    f"(shard {shard.index}/{shard.count} holds episodes {shard.start}..{shard.stop - 1})")
                try:
                    acc.add(row)
                except (KeyError, TypeError, ValueError, AttributeError):
                    raise DataError(f"{path}:{n}: malformed episode row (run `kernelstrain validate {shard.dir}`)") from None
            if chat is not None:
                chat.add_chat(name, [chat_figure(row)])
            f.write_block(raw, 1)
            rows += 1
    if digest.hexdigest() != want.get("sha256") or rows != want.get("rows"):
        raise DataError(f"{path}: sha256/rows differ from its stats.json (modified after it was written)")
