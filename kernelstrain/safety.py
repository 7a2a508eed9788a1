"""Guards for datasets that come from elsewhere and for outputs that other runs share.

Datasets travel: a user runs our commands on shards and datasets somebody else generated.
So every id or file name a dataset supplies is checked before it becomes part of a path
(`safe_name`, `join_under`); no command writes over, into or above one of its inputs
(`check_output`); one writer at a time holds an output (`OutputLock`); readers refuse a
dataset that changed under them (`ReadSnapshot`); and dataset text reaches the terminal
only with its control characters escaped (`terminal_text`).
"""
from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import sys
from pathlib import Path

from .errors import DataError, UsageError

# ids and file names a dataset may supply: a letter or digit first (so never "." or ".."),
# then letters, digits and . _ + = - only (never a separator); short enough for any file system
_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,127}")


def safe_name(value, what: str) -> str:
    """`value` when it is a safe single path component (see _SAFE_NAME), else a UsageError
    naming `what` (e.g. "episode id in DATA/episodes.jsonl:3")."""
    if isinstance(value, str) and _SAFE_NAME.fullmatch(value):
        return value
    raise UsageError(f"{what} {terminal_text(repr(value))} is not a safe file name "
                     "(letters, digits and . _ + = - only)")


def join_under(root: Path, relative: str) -> Path:
    """root / relative, where `relative` is '/'-separated safe names, checked to stay inside root."""
    parts = relative.split("/")
    for part in parts:
        safe_name(part, "path component")
    path = root.joinpath(*parts)
    if not is_inside(path.resolve(), root.resolve()):
        raise UsageError(f"{terminal_text(relative)} would be written outside {root}")
    return path


def is_inside(a: Path, b: Path) -> bool:
    """a is b or lies under it (both resolved)."""
    return a == b or b in a.parents


def check_output(target: Path, inputs, what: str = "--out") -> None:
    """Refuse an output that is, lies inside or holds one of the command's inputs."""
    t = Path(target).resolve()
    for p in inputs:
        q = Path(p).resolve()
        if is_inside(t, q) or is_inside(q, t):
            raise UsageError(f"{what} {target} would write over the input {p}")


@contextlib.contextmanager
def row_guard(where: str):
    """Turn the errors a malformed row raises while it is read (a missing key, a wrong type) into
    one bad-input line naming `where`, instead of an internal error."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
        if isinstance(e, UsageError):
            raise
        raise DataError(f"{where}: malformed data ({type(e).__name__}: {terminal_text(str(e))[:80]}); "
                        "`kernelstrain validate` lists its problems") from None


# -- terminal text ----------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """`text` with every control character (escape sequences, carriage returns, C1 codes,
    bidi overrides) shown as a visible \\x.. / \\u.... escape; newlines and tabs stay."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}" if ord(m.group()) < 0x100
                        else f"\\u{ord(m.group()):04x}", str(text))


def terminal_values(value):
    """A JSON value with every string in it passed through terminal_text."""
    if isinstance(value, str):
        return terminal_text(value)
    if isinstance(value, dict):
        return {terminal_values(k): terminal_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [terminal_values(v) for v in value]
    return value


# -- one writer per output -------------------------------------------------------------
def lock_path(out: Path) -> Path:
    """The advisory lock file of an output: a hidden sibling (the output itself is swapped)."""
    out = Path(os.path.abspath(out))
    return out.parent / f".{out.name}.kernelstrain-lock"


class OutputLock:
    """An exclusive advisory lock on an output (file or directory), held while a command writes it.

    The lock is a flock on a hidden sibling file that holds the holder's pid and command; the
    kernel drops a flock when its process dies however it dies, so the lock of a killed run is
    taken over at once (its file, still naming the dead pid, is rewritten). The file is removed
    on release; a taker checks that the file it locked is still the one at the path, so a lock
    removed in between is never shared."""

    def __init__(self, out: Path, command: str, make_parents: bool = True):
        self.make_parents = make_parents    # False: a missing parent is the command's own error to report
        self.path = lock_path(out)
        self.out = out
        self.command = command
        self.fd = None
        self.created = []       # folders made for the lock, deepest first: removed on exit while empty

    def __enter__(self):
        import fcntl
        parent = self.path.parent
        if not parent.is_dir() and not self.make_parents:
            return self     # nothing can be written there: the command reports that itself
        if not parent.is_dir():
            # the command would make the missing folders itself (generate does): make them first, so
            # two runs into a new path are locked too
            missing, p = [], parent
            while not p.exists() and p != p.parent:
                missing.append(p)
                p = p.parent
            try:
                parent.mkdir(parents=True, exist_ok=True)
            except OSError:
                return self     # nothing can be written there: the command reports that itself
            self.created = missing
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                return self     # an unwritable parent: the command's own check reports it
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                holder = _read_holder(fd)
                os.close(fd)
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                raise UsageError(f"{self.out} is being written by another kernelstrain run ({holder}); "
                                 "wait for it to finish or stop it first") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)                # the holder removed it as we opened it: take the new one
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: kernelstrain {self.command}\n".encode("utf-8", "replace"))
        self.fd = fd
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            try:
                os.unlink(self.path)      # still ours: we hold its flock
            except FileNotFoundError:
                pass
            os.close(self.fd)
            self.fd = None
        for folder in self.created:       # a command that wrote nothing leaves no folder behind
            try:
                folder.rmdir()
            except OSError:
                break
        return False


def _read_holder(fd: int) -> str:
    try:
        text = os.pread(fd, 400, 0).decode("utf-8", "replace").strip()
    except OSError:
        text = ""
    return terminal_text(text) or "pid unknown"


def lock_holder(out: Path) -> str | None:
    """Who holds the lock of `out` now (None: nobody); takes nothing and creates nothing."""
    import fcntl
    try:
        fd = os.open(lock_path(out), os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return None
    except OSError:
        return _read_holder(fd)
    finally:
        os.close(fd)


# -- readers ---------------------------------------------------------------------------
class ReadSnapshot:
    """What a reader checks a dataset did not change under it: no swap in progress before or
    after, and stats.json (the completion marker, replaced last by a swap) the same file."""

    def __init__(self, data: Path):
        self.data = data
        self.before = self._state()

    def _state(self):
        data = self.data
        old = data.parent / f".{data.name}.kernelstrain-old"
        if old.exists():
            holder = lock_holder(data)
            if holder:
                raise UsageError(f"{data} is being replaced by another kernelstrain run ({holder}); "
                                 "rerun when it has finished")
            raise UsageError(f"{data} holds an interrupted replacement (in {old.name}): finish it by rerunning "
                             "the command that wrote it with --resume")
        try:
            st = os.stat(data / "stats.json")
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    def check(self) -> None:
        if self._state() != self.before:
            raise UsageError(f"{self.data} was replaced while it was read (another kernelstrain run wrote it); "
                             "rerun the command")


# -- replacing only what a command writes -------------------------------------------------
def staging_path(out: Path) -> Path:
    """The hidden sibling a result is built in (`out` may be relative, even '.')."""
    out = Path(os.path.abspath(out))
    return out.parent / f".{out.name}.kernelstrain-staging"


def check_tree_out(out: Path, inputs, force: bool) -> None:
    """Before any work: `out` is not an input (nor inside or above one) and, unless --force,
    is absent or empty."""
    check_output(out, inputs)
    if Path(os.path.abspath(out)) == Path(os.path.abspath(out)).parent:
        raise UsageError(f"--out {out} is a file system root")
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not force:
        raise UsageError(f"{out}: exists and is not empty (use --force to replace it)")


def write_tree(out: Path, files, names) -> None:
    """Write `files` ((relative '/'-path, text) pairs, paths checked to stay inside) into a
    staging sibling, then swap them into `out` (see swap_in: --force replaces only `names`).
    A failure, a full disk included, leaves `out` as it was and no staging directory."""
    staging = staging_path(out)
    remove_quietly(staging)
    try:
        staging.mkdir(parents=True)
        for rel, text in files:
            path = join_under(staging, rel)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        swap_in(staging, Path(os.path.abspath(out)), names)
    except OSError as e:
        remove_quietly(staging)
        why = "no space left on device" if e.errno == errno.ENOSPC else (e.strerror or str(e))
        raise UsageError(f"cannot write {out}: {why}; {out} was left as it was") from None
    except BaseException:
        remove_quietly(staging)
        raise


def swap_in(staging: Path, out: Path, names) -> None:
    """Move the staged result into `out`: an absent `out` in one rename; into an existing
    directory (empty, or with --force) entry by entry, after removing only the entries `names`
    (what this command writes) — every other file in it stays."""
    if not out.exists():
        os.replace(staging, out)
        return
    if not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    for name in names:
        old = out / name
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old)
        elif old.exists() or old.is_symlink():
            old.unlink()
    for entry in sorted(staging.iterdir()):
        os.replace(entry, out / entry.name)
    staging.rmdir()


def remove_quietly(path: Path) -> None:
    """Remove a temporary file or directory left by a failed write; never raises."""
    try:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    except OSError as e:
        print(f"kernelstrain: note: could not remove {path}: {e.strerror or e}", file=sys.stderr)
