"""Held-out solutions kept on disk between runs (contamination.solution_code), and the
registry's boilerplate 13-grams (contamination.boilerplate, ~0.5 s of every run's setup).

A held-out task's solution is its best reachable candidate: a search of every config of its
rungs (tasks.best_config), ~9 ms of CPU a task, some 3 s for the default profile's 346 held-out
tasks, paid by every `generate`, `validate` and `qa` of a dataset before its first episode is
measured. The answer is a pure function of the task key (module, GPU, dtype, shape) (the boilerplate:
of its n) and of the
package's code and data, so it is stored under a digest of every file of the installed package
(and of the Python version): any change to the simulator, an op module, the calibration or a
corpus is another digest, and a stored answer is never read by another version. A file holds
its key beside the code, and is read only where the key is the one asked.

Where: `~/.cache/kernelstrain/solutions/<digest>/` (KERNELSTRAIN_SOLUTIONS sets the folder; `off`
keeps nothing). Each answer is written atomically (a temporary file renamed), so concurrent runs
share the folder safely; the folders of all but the KEEP most recently written package digests
are removed. A store that cannot be read or written is skipped: the answer is computed as before.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
KEEP = 4          # package digests kept (worktrees and versions used side by side)


def store_dir() -> Path | None:
    """The store's folder, None when KERNELSTRAIN_SOLUTIONS is `off`."""
    where = os.environ.get("KERNELSTRAIN_SOLUTIONS", str(Path.home() / ".cache" / "kernelstrain" / "solutions"))
    return None if where == "off" else Path(where)


@functools.cache
def package_digest(package: Path = PACKAGE) -> str:
    """sha256 of the Python version and of every file under `package` (its path and bytes), bytecode aside."""
    h = hashlib.sha256(sys.version.encode())
    for path in sorted(p for p in package.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        data = path.read_bytes()
        h.update(f"\0{path.relative_to(package).as_posix()}\0{len(data)}\0".encode())
        h.update(data)
    return h.hexdigest()


def _path(key: tuple) -> tuple[Path, str] | None:
    root = store_dir()
    if root is None:
        return None
    text = json.dumps(key)
    return root / package_digest() / f"{hashlib.sha256(text.encode()).hexdigest()}.json", text


def get(key: tuple) -> str | None:
    """The stored solution of `key`, or None (none stored, another key's file, or no store)."""
    where = _path(key)
    if where is None:
        return None
    path, text = where
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return stored["code"] if isinstance(stored, dict) and stored.get("key") == text else None


def put(key: tuple, code: str) -> None:
    """Store the solution of `key` (nothing when there is no store or it cannot be written)."""
    where = _path(key)
    if where is None:
        return
    path, text = where
    try:
        fresh = not path.parent.is_dir()
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"key": text, "code": code}), encoding="utf-8")
        os.replace(temporary, path)
        if fresh:
            _prune(path.parent.parent)
    except OSError:
        return


def _prune(root: Path) -> None:
    """Remove the folders of all but the KEEP most recently created package digests."""
    folders = sorted((p for p in root.iterdir() if p.is_dir()), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in folders[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)
