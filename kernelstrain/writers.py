"""Streamed, atomic output: each file is written to a hidden temporary name, hashed as
it goes, and renamed into place only when complete."""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

from .errors import UsageError

FILES = {  # config name -> file name, in the order they are written
    "episodes": "episodes.jsonl",
    "sft_multiturn": "sft_multiturn.jsonl",
    "sft_steps": "sft_steps.jsonl",
    "holdout": "tasks_holdout.jsonl",
}


class StreamFile:
    """A JSONL file under construction: rows are appended, counted and hashed."""

    def __init__(self, final: Path, resume_bytes: int | None = None):
        """Start a new temporary file, or (resume_bytes) continue one cut back to that size."""
        self.final = final
        self.tmp = final.with_name(f".{final.name}.tmp")
        self.rows = 0
        self.bytes = 0
        self.sha = hashlib.sha256()
        if resume_bytes is None:
            self.fh = open(self.tmp, "wb")
            return
        with open(self.tmp, "r+b") as fh:
            fh.truncate(resume_bytes)
            for line in fh:
                self.sha.update(line)
                self.rows += 1
                self.bytes += len(line)
        self.fh = open(self.tmp, "ab")

    def flush(self) -> None:
        self.fh.flush()

    def write(self, line: str) -> None:
        self.write_block((line + "\n").encode("utf-8"), 1)

    def write_block(self, data: bytes, rows: int) -> None:
        """Append `rows` complete lines, already encoded (each ending in a newline)."""
        self.fh.write(data)
        self.sha.update(data)
        self.rows += rows
        self.bytes += len(data)

    def summary(self) -> dict:
        return {"rows": self.rows, "bytes": self.bytes, "sha256": self.sha.hexdigest()}

    def commit(self) -> None:
        self.fh.close()
        os.replace(self.tmp, self.final)

    def abort(self) -> None:
        self.fh.close()
        self.tmp.unlink(missing_ok=True)


def write_text_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    os.replace(tmp, path)


def prepare_out_dir(out: Path, force: bool) -> None:
    """Check the output directory can take a new dataset; create it."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UsageError(f"--out {out} is not empty (use --force to overwrite its dataset files, "
                         "or --resume to finish an interrupted run)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".kernelstrain-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UsageError(f"cannot write to {out}: {e.strerror or e}") from None
