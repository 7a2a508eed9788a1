"""Helpers for tests that damage datasets: rewrite one row, and refresh stats.json's hashes
the way a careful corrupter would, so only content checks can catch the damage."""
import hashlib
import json
from pathlib import Path

DATA_FILES = ("episodes.jsonl", "sft_multiturn.jsonl", "sft_steps.jsonl", "tasks_holdout.jsonl")


def dumps(row) -> str:
    return json.dumps(row, ensure_ascii=False, separators=(",", ":"))


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def write_lines(path: Path, rows: list[bytes]) -> None:
    path.write_bytes(b"".join(rows))


def rewrite_row(path: Path, line_no: int, change) -> None:
    """Apply change(row) to the JSON object on line `line_no` (1-based)."""
    rows = lines(path)
    row = json.loads(rows[line_no - 1])
    change(row)
    rows[line_no - 1] = (dumps(row) + "\n").encode("utf-8")
    write_lines(path, rows)


def refresh_hashes(data: Path) -> None:
    """Make stats.json's file summaries (rows, bytes, sha256) match the files again."""
    stats_path = data / "stats.json"
    stats = json.loads(stats_path.read_text())
    for name in DATA_FILES:
        raw = (data / name).read_bytes()
        stats["files"][name] = {"rows": raw.count(b"\n"), "bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}
    stats_path.write_text(json.dumps(stats, indent=2, ensure_ascii=False) + "\n")


def snapshot(root: Path) -> dict:
    """Every path under root with its content hash (directories as None): nothing touched means equal."""
    out = {}
    for p in sorted(root.rglob("*")):
        out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else None
    return out
