"""Streamed, atomic output. Every command builds its whole result beside the target — in a
hidden sibling staging directory — and swaps it in only when complete, stats.json last, so a
failure at any point leaves either the old dataset or nothing that looks complete."""
from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from pathlib import Path

from .errors import UsageError, fault_point
from .safety import check_output

FILES = {  # config name -> file name, in the order they are written
    "episodes": "episodes.jsonl",
    "sft_multiturn": "sft_multiturn.jsonl",
    "sft_steps": "sft_steps.jsonl",
    "sft_prompt_completion": "sft_prompt_completion.jsonl",
    "holdout": "tasks_holdout.jsonl",
}
# holdout split -> (datasets config, file name); combo keeps the seed card's `holdout` config
SPLIT_FILES = {
    "combo": ("holdout", FILES["holdout"]),
    "unseen_op": ("holdout_unseen_op", "tasks_holdout_unseen_op.jsonl"),
    "unseen_gpu": ("holdout_unseen_gpu", "tasks_holdout_unseen_gpu.jsonl"),
}
# the sessions layout's files (layouts.SESSIONS)
SESSION_FILES = {"sessions": "sessions.jsonl", "sft_multiturn": FILES["sft_multiturn"], "holdout": FILES["holdout"]}
# configs with a validation split (training.py): rows of validation tasks go to X.validation.jsonl
SPLIT_CONFIGS = ("sft_multiturn", "sft_steps", "sft_prompt_completion")
VALIDATION = ".validation"
MARKER = "stats.json"        # written last: its presence means the dataset is complete
MANIFEST = "manifest.json"   # the run: resolved profile, seed, generator, fit (manifest.py)
JOURNAL = ".kernelstrain-resume.json"


def validation_file(name: str) -> str:
    """The validation split's file of a config's file.

    >>> validation_file("sft_steps.jsonl")
    'sft_steps.validation.jsonl'
    """
    return name.removesuffix(".jsonl") + VALIDATION + ".jsonl"


# names a kernelstrain dataset may hold: --force replaces these and leaves every other file alone
DATASET_NAMES = (MARKER, MANIFEST, "README.md", *FILES.values(), *(validation_file(FILES[k]) for k in SPLIT_CONFIGS),
                 *(f for _, f in list(SPLIT_FILES.values())[1:]), "qa.json",
                 JOURNAL, SESSION_FILES["sessions"], "batches", "qa_reports")


class StreamFile:
    """A JSONL file under construction: rows are appended, counted and hashed."""

    def __init__(self, path: Path, resume: dict | None = None):
        """Start a new file, or (resume: {bytes, rows, sha256}) continue one cut back to that
        prefix, which must be exactly what the checkpoint recorded."""
        self.path = self.final = path
        self.rows = 0
        self.bytes = 0
        self.sha = hashlib.sha256()
        if resume is None:
            self.fh = open(path, "wb")
            return
        self.sha = check_prefix(path, resume)     # the running hash continues from the prefix's
        self.rows, self.bytes = resume["rows"], resume["bytes"]
        with open(path, "r+b") as fh:
            fh.truncate(resume["bytes"])
        self.fh = open(path, "ab")

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

    def close(self) -> None:
        self.fh.close()


def check_prefix(path: Path, want: dict):
    """Raise unless the file's first want["bytes"] bytes are want["rows"] whole lines with
    sha256 want["sha256"] (what a checkpoint recorded); reads only, changes nothing.
    Returns the hash object of that prefix."""
    size = path.stat().st_size
    if size < want["bytes"]:
        raise UsageError(f"{path} holds {size} bytes but the checkpoint recorded {want['bytes']}")
    sha, rows, seen = hashlib.sha256(), 0, 0
    with open(path, "rb") as fh:
        for line in fh:
            if seen + len(line) > want["bytes"]:
                break
            sha.update(line)
            rows += 1
            seen += len(line)
    if seen != want["bytes"] or rows != want["rows"] or sha.hexdigest() != want["sha256"]:
        raise UsageError(f"{path} does not match its checkpoint (its first {want['bytes']} bytes changed)")
    return sha


def write_text_atomic(path: Path, text: str) -> None:
    """Write beside `path`, then rename over it; a failed write (a full disk) leaves no temporary."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_error(dest: Path, e: OSError) -> UsageError:
    """One line naming the destination (not the hidden staging file) of a failed write."""
    why = "no space left on device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
    return UsageError(f"cannot write {dest}: {why}; {dest} was left as it was")


def check_report_path(report: str | None, force: bool, inputs: list[Path]) -> None:
    """Before any work: a report file can be written there (parent exists, not a directory,
    not a dataset file), and an existing one is replaced only with --force."""
    if report is None:
        return
    path = Path(report)
    if path.is_dir():
        raise UsageError(f"--report {report} is a directory")
    if not path.parent.is_dir():
        raise UsageError(f"--report {report}: directory {path.parent} does not exist")
    for data in inputs:
        check_output(path, [Path(data) / name for name in DATASET_NAMES], "--report")
    if path.exists() and not force:
        raise UsageError(f"--report {report} exists (use --force to replace it)")
    if not os.access(path.parent, os.W_OK):
        raise UsageError(f"--report {report}: directory {path.parent} is not writable")


def check_out_dir(out: Path, force: bool, resumable: bool = False) -> None:
    """The target can take a new dataset: absent, empty, or (with --force) a directory."""
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise UsageError(f"--out {out} is not empty (use --force to replace its dataset files"
                         + (", or --resume to finish an interrupted run)" if resumable else ")"))
    parent = out.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not os.access(parent if not out.exists() else out, os.W_OK) or not os.access(parent, os.W_OK):
        raise UsageError(f"cannot write to {out}: permission denied")


class Staging:
    """A hidden sibling directory where a result is built, then swapped into `out`.

    The swap is journaled (`JOURNAL` in the staging directory says "swap"), so an
    interrupted swap is finished by `finish_swap()`; until then `out` holds no stats.json."""

    def __init__(self, out: Path):
        self.out = out
        self.dir = out.parent / f".{out.name}.kernelstrain-staging"
        self.old = out.parent / f".{out.name}.kernelstrain-old"

    def journal(self) -> dict | None:
        try:
            state = json.loads((self.dir / JOURNAL).read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise UsageError(f"{self.dir / JOURNAL} is corrupt; start again with --force") from None
        if not isinstance(state, dict):
            raise UsageError(f"{self.dir / JOURNAL} is corrupt; start again with --force")
        return state

    def create(self) -> Path:
        """A fresh, empty staging directory (a leftover one is removed)."""
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        return self.dir

    def remove(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def swap(self, state: dict) -> None:
        """Mark the staged result complete, then move it into `out`."""
        write_text_atomic(self.dir / JOURNAL, json.dumps({**state, "phase": "swap"}))
        fault_point("journal-swap")
        self.finish_swap()

    def finish_swap(self) -> None:
        """Idempotent: whatever step a kill interrupted, run the remaining ones."""
        out = self.out
        if self.dir.exists():
            if not out.exists() or (out.is_dir() and not any(out.iterdir())):
                if out.exists():
                    out.rmdir()
                os.replace(self.dir, out)             # the common case: one atomic rename
                fault_point("rename-dir")
            else:
                self.old.mkdir(exist_ok=True)
                staged = sorted(p.name for p in self.dir.iterdir())
                if not (self.old / ".moved").exists():
                    # the old completion marker goes first, the new one comes last: nothing looks
                    # complete in between; files that are not the dataset's stay where they are
                    for name in sorted(set(staged) | set(DATASET_NAMES), key=lambda n: n != MARKER):
                        if (out / name).exists() and not (self.old / name).exists():
                            os.replace(out / name, self.old / name)
                            fault_point("rename-old")
                    (self.old / ".moved").touch()
                for name in sorted(staged, key=lambda n: n == MARKER):
                    os.replace(self.dir / name, out / name)
                    fault_point("rename-new")
                self.dir.rmdir()
        shutil.rmtree(self.old, ignore_errors=True)
        fault_point("removed-old")
        (out / JOURNAL).unlink(missing_ok=True)
