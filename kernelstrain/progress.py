"""Progress of long commands on stderr: a line redrawn in place, only when stderr is a
terminal and the command was not given --quiet (`quiet()`); nothing otherwise.

    bar = Bar("validate episodes.jsonl", total=1_160_000_000, unit="MB")
    for chunk in chunks:
        bar.update(bar.done + len(chunk))      # at most one redraw every REDRAW_S seconds
    bar.close()                                # the final figures, then a newline

    with Bar("writing the dataset card"):      # a phase: its label, then its time
        ...

`lines(fh, label)` wraps a binary file's line iterator with a bar of the bytes read.
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

REDRAW_S = 0.5
_quiet = [False]      # set by the command line for one command (--quiet); a stack of one


@contextlib.contextmanager
def quiet(on: bool = True):
    """Silence every bar while the block runs (the command line's --quiet)."""
    before = _quiet[0]
    _quiet[0] = before or on
    try:
        yield
    finally:
        _quiet[0] = before


def shown() -> bool:
    """Whether a bar started now would draw: stderr is a terminal and nobody asked for quiet."""
    return not _quiet[0] and sys.stderr.isatty()


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 60}m{seconds % 60:02d}s"


class Bar:
    """`label  done/total unit  pct  rate  ETA` (or `label  done unit  elapsed` with no total)."""

    def __init__(self, label: str, total: float | None = None, unit: str = "", scale: float = 1.0,
                 enabled: bool = True):
        self.label, self.total, self.unit, self.scale = label, total, unit, scale
        self.enabled = enabled and shown()
        self.done, self.drawn, self.note = 0, False, ""
        self.start = time.monotonic()
        self.last = self.start - REDRAW_S       # the first update draws at once

    def _figure(self, value: float) -> str:
        value /= self.scale
        return f"{value:,.1f}" if self.scale != 1.0 else f"{int(value):,}"

    def update(self, done: float, note: str = "") -> None:
        self.done, self.note = done, note
        now = time.monotonic()
        if not self.enabled or now - self.last < REDRAW_S:
            return
        self.last = now
        self._draw(now)

    def _draw(self, now: float) -> None:
        elapsed = now - self.start
        unit = f" {self.unit}" if self.unit else ""
        if self.total:
            rate = self.done / elapsed if elapsed > 0 else 0.0
            # no ETA before a second's work: the first items' rate says little
            eta = _clock((self.total - self.done) / rate) if rate and elapsed >= 1.0 else "?"
            text = (f"{self.label}  {self._figure(self.done)}/{self._figure(self.total)}{unit}  "
                    f"{100 * self.done / self.total:3.0f}%  {_clock(elapsed)} elapsed, ETA {eta}")
        elif self.unit:
            text = f"{self.label}  {self._figure(self.done)}{unit}  {_clock(elapsed)} elapsed"
        else:
            text = f"{self.label}  {_clock(elapsed)} elapsed"
        sys.stderr.write(f"\r{text}{'  ' + self.note if self.note else ''} \x1b[K")
        sys.stderr.flush()
        self.drawn = True

    def __enter__(self) -> "Bar":
        """A phase with no count: its label at once, its time at the end."""
        self.update(0)
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        """Draw the final figures and end the line (nothing if the bar never drew)."""
        if self.enabled and self.drawn:
            self._draw(time.monotonic())
            sys.stderr.write("\n")
            sys.stderr.flush()
        self.enabled = False


def lines(fh, label: str):
    """Yield the lines of a binary file opened for reading, with a bar of the bytes read."""
    bar = Bar(label, os.fstat(fh.fileno()).st_size or None, "MB", 1e6)
    if not bar.enabled:
        yield from fh
        return
    done = 0
    try:
        for raw in fh:
            done += len(raw)
            bar.update(done)
            yield raw
    finally:
        bar.close()
