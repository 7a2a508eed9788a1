"""What an elementwise step keeps of the structure beside a sample (values_sample.Sample): a contraction's channel
constants, the mean every row has (a softmax's, a layer norm's, a log_softmax's through a line in p), the floor
an activation's minimum sets -- each found by evaluating the step's function f over the values' range."""
from __future__ import annotations

import math
from statistics import NormalDist

from .values_sample import K, Sample

NOISE_POINTS = 16                         # quantiles a channel's own noise is averaged over (chan_through)
NOISE = tuple(NormalDist().inv_cdf((i + 0.5) / NOISE_POINTS) for i in range(NOISE_POINTS))
FLOOR_GRID = 256                          # points f is evaluated at over a tensor's range to find its least value
LINEAR_RESIDUAL = 1e-6                    # an elementwise step this close to a line over a tensor's values keeps its rows' mean


def affine_in_p(f, values: tuple, C: int) -> float | None:
    """The mean of f over a log_softmax's row where f(log p) = a + b p (within LINEAR_RESIDUAL): a + b / C in every row,
    the p summing to 1 (elu of log p is p - 1: fused_s3131_00572, linear -> gelu -> log_softmax -> elu -> gram, is
    C - 2 + sum p_i p_j everywhere, a constant kernel passed); else None. Checked on a grid over the values' range, not
    the sample: a matmul's log p sample holds two distinct p (0 and one near 1/3), which any f fits by a line."""
    lo, hi = values[0], values[-1]
    grid = [lo + (hi - lo) * i / FLOOR_GRID for i in range(FLOOR_GRID + 1)]
    ps = tuple(math.exp(u) for u in grid)
    ys = [f(u) for u in grid]
    if max(ps) <= min(ps) or not all(map(math.isfinite, ys)):
        return None
    a, b = _line_fit(ps, ys)
    if max(abs(y - a - b * q) for q, y in zip(ps, ys)) > LINEAR_RESIDUAL * max(map(abs, ys)):
        return None
    return a + b / C


def chan_through(f, chan: tuple | None, linear: bool) -> tuple | None:
    """A contraction's channels (Sample.chan) through the elementwise f: each channel's constant becomes f's average
    over its own noise, the noise what f leaves of it (its rms over the channels), so a sum or mean along the channels
    after the step still sees the constants every row shares (fused_s0_10106: linear -> mean -> linear from one
    feature -> gelu -> mean, each row gelu(w m + b) averaged over the same w, b: a constant kernel passed). A step
    that is not `linear` bends the noise (relu of it is mostly 0 with a long tail): past it only the noise's spread
    is kept, which is all a sum or mean needs; row ops that see a row's values (softmax, logsumexp) draw from the
    marginal sample instead (fused_s0_03277, 01708, 05407: a Gaussian noise there made a softmax / logsumexp
    constant that is 3.5-16x the tolerance from one)."""
    if chan is None:
        return None
    dim, consts, sd, gaussian = chan
    means, variances = [], []
    for c in consts:
        ys = [f(c + sd * z) for z in NOISE]
        mean = math.fsum(ys) / len(ys)
        means.append(mean)
        variances.append(math.fsum((y - mean) ** 2 for y in ys) / len(ys))
    if not all(map(math.isfinite, means + variances)):
        return None
    return dim, tuple(sorted(means)), math.sqrt(math.fsum(variances) / K), gaussian and linear


def floor_of(f, x: Sample) -> float | None:
    """The least value f takes over the inputs' range -- from the input's floor (else its sample's least value, whose
    tail f may still fall along) to its largest -- where that least value lies inside the range: the global minimum of
    silu, gelu, mish, hardswish ... (a row's amin of many values sits at it); or f of the input's floor where f rises
    from it. None elsewhere."""
    lo = x.v[0] if x.floor is None else x.floor
    hi = x.v[-1]
    if hi <= lo:
        return None
    grid = [lo + (hi - lo) * i / FLOOR_GRID for i in range(FLOOR_GRID + 1)]
    ys = [f(u) for u in grid]
    at = min(range(len(ys)), key=ys.__getitem__)
    if at == 0:
        return ys[0] if x.floor is not None else None
    if at == FLOOR_GRID:
        return None
    a, b = grid[at - 1], grid[at + 1]
    for _ in range(60):           # golden section on the bracket around the grid's least point
        c, d = b - (b - a) / 1.618033988749895, a + (b - a) / 1.618033988749895
        if f(c) < f(d):
            b = d
        else:
            a = c
    return min(ys[at], f((a + b) / 2))


def row_mean_through(f, x: Sample, shape: list, linear: bool) -> tuple:
    """(the mean every row along x.row_mean's dim has after the elementwise f, its spread across rows), or (None, 0):
    f linear maps it (within LINEAR_RESIDUAL over the values, a gram's diagonal among them: a sigmoid of softmax
    probabilities ~1/C); otherwise a least-squares fit maps it -- a line a + b u on rows of one mean, a quadratic
    a + b u + c u^2 on rows of one mean and one energy (a layer norm's) -- the rest of f, r, averaging over a row's C
    values to its mean +- sd(r) / sqrt(C) (tanh of a softmax's rows; silu of a layer norm divided by a large divisor)."""
    values = x.v + (x.diag or ())
    dim, mu = x.row_mean
    last = dim == len(shape) - 1          # `normed` holds along the last dim
    lo, hi = min(values), max(values)
    if hi <= lo:
        return f(mu), 0.0
    slope = (f(hi) - f(lo)) / (hi - lo)
    fv = [f(u) for u in values]
    if linear or max(abs(a - f(lo) - slope * (u - lo)) for a, u in zip(fv, values)) <= LINEAR_RESIDUAL * max(map(abs, fv)):
        return f(lo) + slope * (mu - lo), abs(slope) * x.row_sd
    if x.diag is not None:
        return None, 0.0
    quadratic = last and x.normed and not x.row_sd
    a, b, c = _quadratic_fit(x.v, fv) if quadratic else (*_line_fit(x.v, fv), 0.0)
    r = [y - a - b * u - c * u * u for u, y in zip(x.v, fv)]
    r_mean = math.fsum(r) / K
    r_sd = math.sqrt(math.fsum((t - r_mean) ** 2 for t in r) / K)
    return a + b * mu + c * x.energy + r_mean, math.hypot(b * x.row_sd, r_sd / math.sqrt(shape[dim]))


def _line_fit(us: tuple, ys: list) -> tuple:
    """Least squares a + b u."""
    mu, my = math.fsum(us) / len(us), math.fsum(ys) / len(ys)
    var = math.fsum((u - mu) ** 2 for u in us)
    b = math.fsum((u - mu) * (y - my) for u, y in zip(us, ys)) / var if var > 0 else 0.0
    return my - b * mu, b


def _quadratic_fit(us: tuple, ys: list) -> tuple:
    """Least squares a + b u + c u^2 (the normal equations, Cramer's rule)."""
    s = [math.fsum(u ** k for u in us) for k in range(5)]
    t = [math.fsum(y * u ** k for u, y in zip(us, ys)) for k in range(3)]
    m = [[s[0], s[1], s[2]], [s[1], s[2], s[3]], [s[2], s[3], s[4]]]

    def det(a):
        return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
                + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))
    d = det(m)
    return tuple(det([[t[i] if j == col else m[i][j] for j in range(3)] for i in range(3)]) / d for col in range(3))
