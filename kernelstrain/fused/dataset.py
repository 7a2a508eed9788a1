"""The fused-task directory: candidates written by `tasks fused`, tasks and rejects written
by `tasks filter`, with stats.json and a README.md card whose YAML declares the configs.

Candidates are a deterministic stream: candidate i of seed s is `compose(s, i)`, so
`tasks fused --count N` writes the first N + spare of them, and the filter, when it needs
more passing tasks than the spare gives, takes further candidates from the same stream.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
from collections import Counter
from pathlib import Path

from ..version import __version__
from ..errors import DataError, UsageError
from ..safety import remove_quietly
from ..schema import SCHEMA
from ..writers import write_error
from .grammar import compose
from .render import task_row

CANDIDATES, TASKS, REJECTS = "candidates_fused.jsonl", "tasks_fused.jsonl", "rejects_fused.jsonl"
PROGRESS, REPORT = "filter_progress.jsonl", "filter_report.txt"
STATS_SCHEMA = SCHEMA["fused_stats"]
DEFAULT_SPARE = 0.3


def candidate(seed: int, index: int) -> dict:
    return task_row(compose(seed, index))


def dumps(row: dict) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":")) + "\n"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)      # a full disk leaves no temporary behind
        raise


def write_rows(path: Path, rows) -> dict:
    """Stream rows to a hidden file, rename into place; the file's rows, bytes and sha256."""
    tmp = path.with_name(f".{path.name}.tmp")
    digest, n, size = hashlib.sha256(), 0, 0
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for row in rows:
                line = dumps(row)
                f.write(line)
                data = line.encode()
                digest.update(data)
                n, size = n + 1, size + len(data)
        os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    return {"rows": n, "bytes": size, "sha256": digest.hexdigest()}


def read_rows(path: Path) -> list[dict]:
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            for k, line in enumerate(f, 1):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise DataError(f"{path}:{k}: not valid JSON ({e.msg})") from None
    except FileNotFoundError:
        raise DataError(f"{path}: missing (not a fused-task directory?)") from None
    return rows


def is_fused_dir(path: Path) -> bool:
    try:
        return json.loads((path / "stats.json").read_text(encoding="utf-8")).get("schema") == STATS_SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def read_fused_stats(path: Path) -> dict:
    if not is_fused_dir(path):
        raise DataError(f"{path}: not a fused-task directory (stats.json with schema {STATS_SCHEMA})")
    return json.loads((path / "stats.json").read_text(encoding="utf-8"))


def generate_fused(count: int, seed: int, out: Path, spare: float = DEFAULT_SPARE, force: bool = False) -> dict:
    """Write count + ceil(count * spare) candidates, stats.json and the card to `out`."""
    if count < 1:
        raise UsageError("--count must be at least 1")
    if not 0 <= spare <= 10:
        raise UsageError(f"--spare must be in [0, 10], got {spare}")
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not force:
        raise UsageError(f"--out {out} is not empty (use --force to overwrite)")
    n = count + math.ceil(count * spare)
    rows = (candidate(seed, i) for i in range(n))
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        files = {CANDIDATES: write_rows(out / CANDIDATES, rows)}
        for stale in (TASKS, REJECTS, PROGRESS, REPORT):   # a regenerated directory starts unfiltered
            (out / stale).unlink(missing_ok=True)
        stats = fused_stats(read_rows(out / CANDIDATES), seed, count, spare, files, None)
        write_outputs(out, stats)
    except OSError as e:
        if created:
            remove_quietly(out)      # a directory this run made holds nothing complete
        raise write_error(out, e) from None
    return stats


def fused_stats(rows: list[dict], seed: int, count: int, spare: float, files: dict, report: dict | None) -> dict:
    """stats.json of a fused directory: counts over `rows` (the tasks, or the candidates before filtering)."""
    by_ops, by_len, by_dtype, by_start = Counter(), Counter(), Counter(), Counter()
    flops = sorted(r["flops"] for r in rows)
    for r in rows:
        by_ops.update(r["ops"])
        by_len[len(r["ops"])] += 1
        by_dtype[r["dtype"]] += 1
        by_start[r["program"][0]["in"]["kind"]] += 1
    q = (lambda f: flops[min(len(flops) - 1, int(f * len(flops)))]) if flops else (lambda f: 0)
    return {"schema": STATS_SCHEMA, "generator": f"kernelstrain {__version__}", "seed": seed, "count": count,
            "spare": spare, "filtered": report is not None, "rows": len(rows),
            "ops_per_task": {str(k): by_len[k] for k in sorted(by_len)},
            "by_op": dict(sorted(by_ops.items())), "by_dtype": dict(sorted(by_dtype.items())),
            "by_input_kind": dict(sorted(by_start.items())),
            "distinct_op_sequences": len({tuple(r["ops"]) for r in rows}),
            "flops": {"min": q(0), "median": q(0.5), "max": q(1)},
            "filter": report, "files": files}


def write_outputs(out: Path, stats: dict) -> None:
    from .card import render_fused_card
    write_atomic(out / "README.md", render_fused_card(stats))
    write_atomic(out / "stats.json", json.dumps(stats, indent=2) + "\n")


def fused_summary(stats: dict) -> str:
    """The human summary `kernelstrain stats DIR` prints for a fused-task directory."""
    what = "tasks (filtered)" if stats["filtered"] else "candidates (not yet filtered)"
    lines = [f"fused tasks, seed {stats['seed']}, count {stats['count']}, {stats['generator']}",
             f"{what:28} {stats['rows']:,}",
             "operators per task           " + ", ".join(f"{k}: {v}" for k, v in stats["ops_per_task"].items()),
             "dtypes                       " + ", ".join(f"{k} {v}" for k, v in stats["by_dtype"].items()),
             "input kinds                  " + ", ".join(f"{k} {v}" for k, v in stats["by_input_kind"].items()),
             f"distinct operator sequences  {stats['distinct_op_sequences']:,}",
             f"FLOPs                        min {stats['flops']['min']:.3g}, median {stats['flops']['median']:.3g}, "
             f"max {stats['flops']['max']:.3g}",
             f"operators                    {len(stats['by_op'])} distinct"]
    if stats["filter"]:
        from .filter import reason_table
        lines += ["filter:", reason_table(stats["filter"])]
    lines += ["files:"] + [f"  {n:24} {f['rows']:>7,} rows {f['bytes'] / 1e6:>8.1f} MB" for n, f in stats["files"].items()]
    return "\n".join(lines)
