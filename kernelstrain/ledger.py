"""The harness's book of measurements: every benchmark of a code is one noisy run; the
recorded time of a code is the mean of its runs; a candidate is kept only when its mean
beats the best's by more than twice the noise of the difference of the two means (and never
by less than twice the noise of one run).

Engine, chat rows, validate and qa replay the same book, so "kept" and "best" mean one
thing everywhere.

>>> book = Ledger("base", 1.0)
>>> book.record("a", 0.99), book.record("b", 0.90), book.best_ms
(False, True, 0.9)
>>> book.record("b", 0.92), book.best_ms        # a rebenchmark of the best updates its time
(False, 0.91)
"""
from __future__ import annotations

import math

from .sim import noise_cv

SIGMAS = 2.0          # a keep needs a gain of this many standard deviations of the difference


def mean_ms(runs: list) -> float:
    return round(sum(runs) / len(runs), 6)


def beats(new_ms: float, new_runs: int, best_ms: float, best_runs: int) -> bool:
    """Whether a mean of `new_runs` runs is faster than the best beyond the noise."""
    return new_ms < best_ms * (1.0 - required_gain(best_ms, new_runs, best_runs))


def required_gain(best_ms: float, new_runs: int, best_runs: int) -> float:
    """The fraction a mean of `new_runs` runs must beat the best by: 2 sigma of the difference
    of the two means, never less than 2 sigma of one run."""
    return SIGMAS * noise_cv(best_ms) * max(1.0, math.sqrt(1.0 / new_runs + 1.0 / best_runs))


class Ledger:
    """Runs per code, the best code and its recorded (mean) time."""

    def __init__(self, baseline_code: str, baseline_ms: float):
        self.runs = {baseline_code: [baseline_ms]}
        self.best_code, self.best_ms, self.best_step = baseline_code, baseline_ms, 0

    def record(self, code: str, time_ms: float, step: int = 0) -> bool:
        """Add one measurement of `code`; True when it becomes the new best."""
        runs = self.runs.setdefault(code, [])
        runs.append(time_ms)
        mean = mean_ms(runs)
        if code == self.best_code:
            self.best_ms = mean
            return False
        if beats(mean, len(runs), self.best_ms, len(self.runs[self.best_code])):
            self.best_code, self.best_ms, self.best_step = code, mean, step
            return True
        return False

    def close(self, code: str) -> bool:
        """Measured faster than the best, but inside the noise: a decision worth re-measuring."""
        runs = self.runs.get(code)
        return bool(runs) and code != self.best_code and mean_ms(runs) < self.best_ms

    def mean(self, code: str) -> float:
        return mean_ms(self.runs[code])

    def best_runs(self) -> int:
        return len(self.runs[self.best_code])
