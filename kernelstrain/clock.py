"""The simulated wall clock: how long each step of a session takes an engineer.

A step is writing (or editing) the candidate, building it (nvcc or the Triton JIT: longer
for bigger sources and for every C++ template instantiated), benchmarking it when it built,
and reading a failure's output before the next move. Constants come from the profile's
`[clock]` table; a term whose range is [0, 0] draws nothing, so the default profile's
clock makes the same draws as it always has.

>>> c = Clock()
>>> import random
>>> s = c.step_seconds(random.Random(0), "structural", "ok", "cuda", "__global__ void k() {}")
>>> 240 + 8 + 6 <= s <= 900 + 40 + 25
True
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from .errors import UsageError

WRITE_KINDS = ("structural", "joint", "rebench")     # every other kind: write_other


@dataclass(frozen=True)
class Clock:
    """Ranges in seconds, each drawn uniformly from the episode's clock stream."""
    setup: tuple = (0.0, 0.0)              # reading the task and profiling the baseline (first step)
    pace: tuple = (1.0, 1.0)               # this engineer's speed: every step's time times a draw
    write_structural: tuple = (240.0, 900.0)
    write_joint: tuple = (90.0, 300.0)
    write_rebench: tuple = (10.0, 30.0)
    write_other: tuple = (45.0, 180.0)     # one-parameter sweeps and endgame steps
    compile_cuda: tuple = (8.0, 40.0)
    compile_triton: tuple = (3.0, 15.0)
    compile_per_kchar: tuple = (0.0, 0.0)  # extra build seconds per 1,000 characters of source
    compile_per_template: tuple = (0.0, 0.0)   # extra nvcc seconds per `template <` in the source
    bench: tuple = (6.0, 25.0)
    debug_compile_error: tuple = (0.0, 0.0)    # reading a build log, finding the line
    debug_wrong_result: tuple = (0.0, 0.0)     # diffing outputs, bisecting the bad change
    profile_best: tuple = (0.0, 0.0)           # a profiler run (ncu) of a new best: its bottleneck picks the next move

    @classmethod
    def from_table(cls, table: dict, path: Path | str) -> "Clock":
        """A [clock] table -> Clock; every key is optional, each a [low, high] pair."""
        known = {f.name for f in fields(cls)}
        for key, value in table.items():
            if key not in known:
                raise UsageError(f"{path}: unknown key 'clock.{key}' (expected one of: {', '.join(sorted(known))})")
            if (not isinstance(value, list) or len(value) != 2
                    or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
                    or not 0 <= value[0] <= value[1] or (key == "pace" and value[0] <= 0)):
                raise UsageError(f"{path}: key 'clock.{key}' must be [low, high] with 0 <= low <= high"
                                 + (" and low > 0" if key == "pace" else "") + f", got {value!r}")
        return cls(**{k: (float(v[0]), float(v[1])) for k, v in table.items()})

    def session_pace(self, rng) -> float:
        return _draw(rng, self.pace) if self.pace != (1.0, 1.0) else 1.0

    def setup_seconds(self, rng) -> float:
        return _draw(rng, self.setup)

    def step_seconds(self, rng, kind: str, status: str, impl: str, code: str, kept: bool = False) -> float:
        """Seconds of one step (before the session's pace); a kept step adds the profile of the new best."""
        # every write range is drawn, the step's kind picks one: the default clock's draw order
        writes = [rng.uniform(*getattr(self, "write_" + k)) for k in WRITE_KINDS]
        other = rng.uniform(*self.write_other)
        write = dict(zip(WRITE_KINDS, writes)).get(kind, other)
        build = rng.uniform(*(self.compile_cuda if impl == "cuda" else self.compile_triton))
        bench = 0.0 if status == "compile_error" else rng.uniform(*self.bench)
        build += _draw(rng, self.compile_per_kchar) * len(code) / 1000
        if impl == "cuda":
            build += _draw(rng, self.compile_per_template) * code.count("template <")
        debug = {"compile_error": self.debug_compile_error, "wrong_result": self.debug_wrong_result}.get(status)
        profile = _draw(rng, self.profile_best) if kept else 0.0
        return write + (0.0 if kind == "rebench" else build) + bench + (_draw(rng, debug) if debug else 0.0) + profile


def _draw(rng, pair: tuple) -> float:
    """A uniform draw, or nothing drawn for a [0, 0] term."""
    return rng.uniform(*pair) if pair != (0.0, 0.0) else 0.0
