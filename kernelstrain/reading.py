"""Strict readers of a dataset's files (merge, verify, stats, qa): a problem is bad input,
exit 2, naming file and line. validate's own reader (validate.rows) reports problems instead.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import progress
from .dirkind import what_is
from .errors import DataError
from .schema import SCHEMA

STATS_SCHEMA = SCHEMA["stats"]


def read_jsonl(path: Path):
    """Yield (line number, object); a corrupt line raises DataError naming file and line."""
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    with fh:
        for n, raw in enumerate(progress.lines(fh, f"reading {path.name}"), 1):
            try:
                row = json.loads(raw.decode("utf-8"))
            except UnicodeDecodeError:
                raise DataError(f"{path}:{n}: not valid UTF-8") from None
            except json.JSONDecodeError as e:
                raise DataError(f"{path}:{n}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DataError(f"{path}:{n}: not a JSON object")
            yield n, row


# what `stats` and the other readers rely on: key -> type (dict keys hold these)
_STATS_SHAPE = {"generator": str, "profile": str, "seed": int, "episodes": int, "steps": int, "holdout_tasks": int,
                "status": dict, "status_pct": dict, "kind": dict, "steps_per_episode": dict, "speedup": dict,
                "by_op": dict, "by_module": dict, "by_gpu": dict, "by_impl": dict, "files": dict}


def read_stats(data: Path) -> dict:
    """stats.json of a dataset directory, with the shape the readers rely on."""
    path = data / "stats.json"
    if not data.is_dir():
        raise DataError(f"{data}: not a dataset directory")
    try:
        stats = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise DataError(what_is(data) or f"{path}: missing (an incomplete or interrupted run?)") from None
    except UnicodeDecodeError:
        raise DataError(f"{path}: not valid UTF-8") from None
    except json.JSONDecodeError as e:
        raise DataError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except OSError as e:
        raise DataError(f"{path}: cannot read ({e.strerror or e})") from None
    if not isinstance(stats, dict) or stats.get("schema") != STATS_SCHEMA:
        raise DataError(what_is(data) or f"{path}: not a kernelstrain stats file (schema {STATS_SCHEMA})")
    for key, typ in _STATS_SHAPE.items():
        if not isinstance(stats.get(key), typ) or isinstance(stats.get(key), bool):
            raise DataError(f"{path}: key {key!r} must be {typ.__name__}, got {stats.get(key)!r:.60}")
    for sub, keys in (("steps_per_episode", ("mean", "median", "min", "max")), ("speedup", ("mean", "geomean", "max")),
                      ("status", ("ok", "wrong_result", "compile_error")),
                      ("status_pct", ("ok", "wrong_result", "compile_error"))):
        for k in keys:
            if not is_number(stats[sub].get(k)):
                raise DataError(f"{path}: key {sub}.{k} must be a number, got {stats[sub].get(k)!r:.60}")
    for name, f in stats["files"].items():
        if not (isinstance(f, dict) and is_count(f.get("rows")) and is_count(f.get("bytes"))
                and isinstance(f.get("sha256"), str)):
            raise DataError(f"{path}: files[{name!r}] must hold rows, bytes and sha256")
    for name in ("by_op", "by_module", "by_gpu", "by_impl", "kind"):
        if not all(is_count(v) for v in stats[name].values()):
            raise DataError(f"{path}: key {name!r} must map names to counts")
    return stats


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v


def is_count(v) -> bool:
    return type(v) is int and v >= 0
