"""A tensor's values as values.py carries them: a sorted sample of K quantiles of its elements' distribution
(`Sample`), with the structure the marginal sample cannot see beside it, and the small tools every step uses on
one -- Gaussian samples, quantiles of many values, the max / min of n draws from the quantile function, a
deterministic stream of draws.

>>> s = Sample(gauss(1.0, 2.0))
>>> round(s.mean, 6), round(s.sd, 2)
(1.0, 1.99)
>>> extreme(s.v, 1024, True)[K // 2] > 1.0 + 2.0 * 3      # the max of 1,024 draws of N(1, 2): ~ +3.2 sd
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

K = 256                                   # sample size of a tensor
Z = tuple(NormalDist().inv_cdf((i + 0.5) / K) for i in range(K))   # randn's quantiles
TAIL = 8                                  # points the quantile function's tail slope is taken over


@dataclass(frozen=True)
class Sample:
    v: tuple                      # K values, sorted: the tensor's quantiles
    diag: tuple | None = None     # a gram's diagonal along the last dim (K values, sorted)
    normed: bool = False          # every row along the last dim has the same sum of squares
    row_mean: tuple | None = None  # (dim, m): every row along dim averages m (a softmax's 1/C, a layer norm's 0)
    row_sd: float = 0.0           # ... give or take this across rows (0: exactly)
    chan: tuple | None = None     # (dim, K values, sd, gaussian): a contraction's output, each channel along dim one constant
    #                               (the sample's values) + its own noise of sd, the same channels in every row; the noise
    #                               Gaussian until a step bends it (then only its spread is known: chan_through)
    floor: float | None = None    # no element is below this (an activation's global minimum inside the inputs' range)
    log_rows: int | None = None   # a log_softmax's output: along this dim every row's exp sums to 1

    @property
    def mean(self) -> float:
        return math.fsum(self.v) / K

    @property
    def energy(self) -> float:    # E[x^2]
        return math.fsum(x * x for x in self.v) / K

    @property
    def sd(self) -> float:
        return math.sqrt(max(self.energy - self.mean ** 2, 0.0))


def gauss(mean: float, sd: float) -> tuple:
    return tuple(mean + sd * z for z in Z)


def quantiles(xs: list) -> tuple:
    """K quantiles of any number of values (interpolated between order statistics)."""
    xs = sorted(xs)
    n = len(xs)
    out = []
    for i in range(K):
        pos = (i + 0.5) / K * n - 0.5
        lo = min(max(int(math.floor(pos)), 0), n - 1)
        hi, f = min(lo + 1, n - 1), min(max(pos - lo, 0.0), 1.0)
        out.append(xs[lo] + (xs[hi] - xs[lo]) * f)
    return tuple(out)


def merged(x: Sample, row: int) -> Sample:
    """The sample of every element, a gram's diagonal among them (one in `row` values): for a step that
    does not carry the diagonal apart."""
    pts = sorted([(u, row - 1.0) for u in x.v] + [(u, 1.0) for u in x.diag])
    total, acc, out, i = K * row, 0.0, [], 0
    for q in range(K):
        want = (q + 0.5) / K * total
        while i < len(pts) - 1 and acc + pts[i][1] < want:
            acc += pts[i][1]
            i += 1
        out.append(pts[i][0])
    return Sample(tuple(out), None, x.normed, x.row_mean, x.row_sd)


def _slope(end: float, next_: float, far: float) -> float:
    """A tail's slope in normal scores (Z is symmetric): the smaller of its last step's and its last
    TAIL steps', so a tail flattening against a bound (a clamp, an activation's minimum) stays there."""
    return min(abs(end - next_) / (Z[-1] - Z[-2]), abs(end - far) / (Z[-1] - Z[-1 - TAIL]))


def _at(v: tuple, z: float) -> float:
    """The sample's quantile function at normal score z, extrapolated along its tail's slope."""
    if z <= Z[0]:
        return v[0] - _slope(v[0], v[1], v[TAIL]) * (Z[0] - z)
    if z >= Z[-1]:
        return v[-1] + _slope(v[-1], v[-2], v[-1 - TAIL]) * (z - Z[-1])
    i = int((NormalDist().cdf(z) * K) - 0.5)
    i = min(max(i, 0), K - 2)
    while i > 0 and Z[i] > z:
        i -= 1
    while i < K - 2 and Z[i + 1] < z:
        i += 1
    f = (z - Z[i]) / (Z[i + 1] - Z[i])
    return v[i] + (v[i + 1] - v[i]) * f


def extreme(v: tuple, n: int, upper: bool) -> tuple:
    """Quantiles of the max (min) of n independent draws: F^-1(q^(1/n))."""
    nd = NormalDist()
    out = []
    for i in range(K):
        q = ((i + 0.5) / K) ** (1.0 / n)
        q = min(q, 1.0 - 1e-15)
        out.append(_at(v, nd.inv_cdf(q)) if upper else _at(v, -nd.inv_cdf(q)))
    return tuple(sorted(out))


class Draws:
    """A deterministic stream of sample indices (a 32-bit LCG: the same on every Python)."""

    def __init__(self, seed: int):
        self.x = (seed * 2654435761 + 12345) & 0xFFFFFFFF

    def index(self) -> int:
        self.x = (self.x * 1664525 + 1013904223) & 0xFFFFFFFF
        return self.x >> 24           # 0..255 = K - 1

    def pick(self, v: tuple, n: int) -> list:
        return [v[self.index()] for _ in range(n)]

    def perm(self) -> list:
        idx = list(range(K))
        for i in range(K - 1, 0, -1):
            self.x = (self.x * 1664525 + 1013904223) & 0xFFFFFFFF
            j = self.x % (i + 1)
            idx[i], idx[j] = idx[j], idx[i]
        return idx


def pair(a: tuple, b: tuple, fn, draws: Draws) -> tuple:
    perm = draws.perm()
    return tuple(sorted(fn(a[i], b[perm[i]]) for i in range(K)))


def safe(fn, v: float) -> float:
    try:
        return fn(v)
    except OverflowError:
        return math.copysign(math.inf, v)
