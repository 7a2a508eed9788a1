"""The values a program's output takes, emulated from the program alone (standard library): each
tensor is a sample of K values standing for its elements (quantiles of their distribution),
carried through every step as the step maps values -- elementwise ops applied to each value, a
row op on simulated rows of the row's true length drawn from the sample, a library GEMM or conv
as the Gaussian its randomly initialised weights make (PyTorch's default init), a per-channel
parameter as an independent randn per element.

Unlike magnitude.py's (mean, rms), a sample keeps a distribution's shape: quick_gelu of values
near -7, tanh of values spread over +-30, the row minimum of a clamp all keep the few values (or
the one value) they really take. Structure the marginal sample cannot see is carried beside it: a
gram's diagonal (one value a row), rows of fixed energy (a layer / RMS norm's, scaled), and a
scalar parameter (a per-channel one on a tensor of one channel), whose one random value's sign
changes what follows: the program is emulated under each sign (`scenarios`).

>>> s = emulate([{"op": "matmul", "role": "contraction", "params": {"M": 64, "K": 256, "N": 1024},
...               "in": {"kind": "vec", "shape": [64, 256]}, "out": {"kind": "vec", "shape": [64, 1024]}},
...              {"op": "amin", "role": "reduction", "params": {"dim": -1, "keepdim": True},
...               "in": {"kind": "vec", "shape": [64, 1024]}, "out": {"kind": "vec", "shape": [64, 1]}},
...              {"op": "quick_gelu", "role": "elementwise", "params": {},
...               "in": {"kind": "vec", "shape": [64, 1]}, "out": {"kind": "vec", "shape": [64, 1]}}])[0]
>>> max(abs(x) for x in s.v) < 1e-12      # every row's min is ~ -50: quick_gelu of it is 0
True
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from statistics import NormalDist

from .exprs import LAYER_NORM_EPS, RMS_NORM_EPS
from .precision import _elementwise
from .types import SPATIAL

K = 256                                   # sample size of a tensor
_Z = tuple(NormalDist().inv_cdf((i + 0.5) / K) for i in range(K))   # randn's quantiles
SCORE_POINTS = 4096                        # quantiles an attention row's scores are taken on (_softmax_of_scores)
NOISE_POINTS = 16                         # quantiles a channel's own noise is averaged over (_chan_through)
_NOISE = tuple(NormalDist().inv_cdf((i + 0.5) / NOISE_POINTS) for i in range(NOISE_POINTS))
ROW_BUDGET = 16384                        # values drawn for one simulated row op
FLOOR_GRID = 256                          # points f is evaluated at over a tensor's range to find its least value
LINEAR_RESIDUAL = 1e-6                    # an elementwise step this close to a line over a tensor's values keeps its rows' mean
TAIL = 8                                  # points the quantile function's tail slope is taken over
# a scalar parameter (one randn): the values the first one takes in turn (|randn|'s 20/50/87/99th
# percentiles, either sign), later ones +- the median
SCALAR_VALUES = tuple(sg * NormalDist().inv_cdf(0.5 + q / 2) for q in (0.2, 0.5, 0.87, 0.99) for sg in (1.0, -1.0))
SCALAR_LATER = (SCALAR_VALUES[2], SCALAR_VALUES[3])


@dataclass(frozen=True)
class Sample:
    v: tuple                      # K values, sorted: the tensor's quantiles
    diag: tuple | None = None     # a gram's diagonal along the last dim (K values, sorted)
    normed: bool = False          # every row along the last dim has the same sum of squares
    row_mean: tuple | None = None  # (dim, m): every row along dim averages m (a softmax's 1/C, a layer norm's 0)
    row_sd: float = 0.0           # ... give or take this across rows (0: exactly)
    chan: tuple | None = None     # (dim, K values, sd, gaussian): a contraction's output, each channel along dim one constant
    #                               (the sample's values) + its own noise of sd, the same channels in every row; the noise
    #                               Gaussian until a step bends it (then only its spread is known: _chan_through)
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


def _gauss(mean: float, sd: float) -> tuple:
    return tuple(mean + sd * z for z in _Z)


def _quantiles(xs: list) -> tuple:
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


def _merged(x: Sample, row: int) -> Sample:
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


def _keeps_diag(step: dict) -> bool:
    """Whether the step carries a gram's diagonal apart (an elementwise map, a row op along the last dim,
    attention of the square gram), or needs the sample of every element (_merged)."""
    op, role = step["op"], step["role"]
    if op == "sdpa":
        return True
    if role in ("softmax", "reduction"):
        return _along_last(step)
    if op in ("bias_add", "scale_param"):
        return step["params"]["shape"][0] == 1
    return role == "elementwise" and op != "glu"


def _slope(end: float, next_: float, far: float) -> float:
    """A tail's slope in normal scores (_Z is symmetric): the smaller of its last step's and its last
    TAIL steps', so a tail flattening against a bound (a clamp, an activation's minimum) stays there."""
    return min(abs(end - next_) / (_Z[-1] - _Z[-2]), abs(end - far) / (_Z[-1] - _Z[-1 - TAIL]))


def _at(v: tuple, z: float) -> float:
    """The sample's quantile function at normal score z, extrapolated along its tail's slope."""
    if z <= _Z[0]:
        return v[0] - _slope(v[0], v[1], v[TAIL]) * (_Z[0] - z)
    if z >= _Z[-1]:
        return v[-1] + _slope(v[-1], v[-2], v[-1 - TAIL]) * (z - _Z[-1])
    i = int((NormalDist().cdf(z) * K) - 0.5)
    i = min(max(i, 0), K - 2)
    while i > 0 and _Z[i] > z:
        i -= 1
    while i < K - 2 and _Z[i + 1] < z:
        i += 1
    f = (z - _Z[i]) / (_Z[i + 1] - _Z[i])
    return v[i] + (v[i + 1] - v[i]) * f


def _extreme(v: tuple, n: int, upper: bool) -> tuple:
    """Quantiles of the max (min) of n independent draws: F^-1(q^(1/n))."""
    nd = NormalDist()
    out = []
    for i in range(K):
        q = ((i + 0.5) / K) ** (1.0 / n)
        q = min(q, 1.0 - 1e-15)
        out.append(_at(v, nd.inv_cdf(q)) if upper else _at(v, -nd.inv_cdf(q)))
    return tuple(sorted(out))


class _Draws:
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


def _row_len(step: dict) -> int:
    shape, dim = step["in"]["shape"], step["params"].get("dim")
    if isinstance(dim, list):
        return math.prod(shape[d] for d in dim)
    if dim is None:
        dim = 1 if step["in"]["kind"] in SPATIAL else -1
    return shape[dim]


def _along_last(step: dict) -> bool:
    shape, dim = step["in"]["shape"], step["params"].get("dim", -1)
    return isinstance(dim, int) and dim % len(shape) == len(shape) - 1


def _rows(x: Sample, step: dict, draws: _Draws, with_diag: bool):
    """Simulated rows along the step's dim (at most ROW_BUDGET / 16 values drawn: the rest stand for as
    many again), held to the mean and energy every row of the tensor has, and the log of how many true
    values each drawn one stands for."""
    C, dim = _row_len(step), _dim(step)
    mean = x.row_mean[1] if x.row_mean is not None and x.row_mean[0] == dim else None
    energy = x.energy if x.normed and _along_last(step) else None
    n = min(C, ROW_BUDGET // 16)
    R = max(16, min(256, ROW_BUDGET // n))
    rows = []
    gaussian = _along_chan(x, step) and x.chan[3] and step["op"] not in ("amax", "amin")
    consts = draws.pick(x.chan[1], n) if gaussian else None
    for _ in range(R):
        row = draws.pick(x.v, n) if consts is None else [c + x.chan[2] * _Z[draws.index()] for c in consts]
        if with_diag:
            row[0] = x.diag[draws.index()]
        held = mean if mean is None or not x.row_sd else mean + x.row_sd * _Z[draws.index()]
        rows.append(_held(row, held, energy) if n > 1 else row)
    return rows, math.log(C / n)


def _held(row: list, mean: float | None, energy: float | None) -> list:
    """A drawn row moved to the row mean and scaled to the row energy every row has (a norm's rows)."""
    if mean is not None:
        own = math.fsum(row) / len(row)
        row = [r - own + mean for r in row]
    if energy is not None:
        centre = mean if mean is not None else 0.0
        dev = math.fsum((r - centre) ** 2 for r in row) / len(row)
        want = energy - centre * centre
        if dev > 0.0 and want > 0.0:
            f = math.sqrt(want / dev)
            row = [centre + (r - centre) * f for r in row]
    return row


def _lse(row: list, extra: float) -> float:
    m = max(row)
    return m + math.log(math.fsum(math.exp(r - m) for r in row)) + extra


def _dim(step: dict) -> int | None:
    dim, n = step["params"].get("dim"), len(step["in"]["shape"])
    if dim is None and step["op"] in ("layer_norm", "rms_norm"):
        return n - 1
    return dim % n if isinstance(dim, int) else None


def _along_chan(x: Sample, step: dict) -> bool:
    return x.chan is not None and x.chan[0] == _dim(step)


def _row_op(x: Sample, step: dict, draws: _Draws) -> Sample:
    op, C = step["op"], _row_len(step)
    if op in ("sum", "mean") and x.row_mean is not None and x.row_mean[0] == _dim(step):
        n = C if op == "sum" else 1
        return Sample(_gauss(x.row_mean[1] * n, x.row_sd * n))
    diag = x.diag is not None and _along_last(step)
    if op in ("sum", "mean") and _along_chan(x, step):
        # the channels' constants are one draw of the weights, the same for every row but not known here: their mean, not a
        # pick of C of them (24 picks put seed 404's 12759 -- conv3d -> add_scalar -> sum over 24 channels -> tanh -- 3 sd
        # down, deep in tanh's saturation: real 4.6x the tolerance from a constant)
        fixed = math.fsum(x.chan[1]) / K
        n = C if op == "sum" else 1
        return Sample(_gauss(fixed * n, x.chan[2] * math.sqrt(C) * n / C))
    if op in ("sum", "mean") and not diag:
        m, sd = x.mean, x.sd
        return Sample(_gauss(m * C, sd * math.sqrt(C)) if op == "sum" else _gauss(m, sd / math.sqrt(C)))
    if op in ("amax", "amin") and not diag:
        low = x.floor if op == "amin" and x.floor is not None else -math.inf
        return Sample(tuple(max(low, u) for u in _extreme(x.v, C, op == "amax")))
    rows, extra = _rows(x, step, draws, diag)
    if op in ("softmax", "log_softmax"):
        out, on_diag, own = [], [], 1 if diag else 0
        for row in rows:
            lse = _lse(row, extra)
            row = [math.exp(r - lse) if op == "softmax" else r - lse for r in row]
            on_diag.extend(row[:own])        # a gram's diagonal stays apart (row[0]: every row holds one)
            out.extend(row[own:])
        return Sample(_quantiles(out), _quantiles(on_diag) if diag else None,
                      row_mean=(_dim(step), 1.0 / C) if op == "softmax" else None,
                      log_rows=_dim(step) if op == "log_softmax" else None)
    if op == "logsumexp":
        return Sample(_quantiles([_lse(row, extra) for row in rows]))
    stat = {"sum": lambda r: math.fsum(r) * C / len(r), "mean": lambda r: math.fsum(r) / len(r),
            "amax": max, "amin": min}[op]
    return Sample(_quantiles([stat(row) for row in rows]))


def _standardize(x: Sample, eps: float, centre: bool) -> tuple:
    m = x.mean if centre else 0.0
    scale = 1.0 / math.sqrt((x.sd ** 2 if centre else x.energy) + eps)
    return tuple((v - m) * scale for v in x.v)


def _contraction(x: Sample, step: dict) -> Sample:
    """A library GEMM / conv with PyTorch's default init (weights and bias uniform in +-1/sqrt(fan_in)):
    each output a sum of many products, Gaussian; the bias's spread across channels added. What the input's
    mean and the bias give an output channel is the same at every position (`chan`): a row along the channels
    holds the same constants in every row, only the input's spread around its mean varies."""
    op, p, shape = step["op"], step["params"], step["in"]["shape"]
    m2, spread = x.mean ** 2, max(x.energy - x.mean ** 2, 0.0)
    if op == "linear":
        fan_in, taps = p["in_features"], p["in_features"]
    elif op.startswith("conv_transpose"):
        d = len(shape) - 2
        fan_in = p["out_channels"] * p["kernel_size"] ** d          # ConvTranspose's weight is (in, out, k...)
        taps = shape[1] * max(1.0, p["kernel_size"] / p["stride"]) ** d
    else:
        fan_in = shape[1] * p["kernel_size"] ** (len(shape) - 2)
        taps = fan_in
    bias = 1.0 / (3.0 * fan_in) if op != "linear" or p.get("bias", True) else 0.0
    shared, varying = taps * m2 / (3.0 * fan_in) + bias, taps * spread / (3.0 * fan_in)
    dim = len(shape) - 1 if op == "linear" else 1
    return Sample(_gauss(0.0, math.sqrt(shared + varying)), chan=(dim, _gauss(0.0, math.sqrt(shared)), math.sqrt(varying), True))


def _gram(x: Sample, step: dict, draws: _Draws) -> Sample:
    """x x^T over the last dim (d terms): each off-diagonal entry a sum of d products of two rows, the
    diagonal a row's sum of squares. Rows of one mean mu (a softmax's, carried through near-linear steps)
    leave no linear term: off d mu^2 + sum(dx_i dx_j), diagonal d (mu^2 + var) + sum(dx^2 - var).
    Rows of one value (d = 1) make an outer product, its entries the products themselves, not a Gaussian
    (fused_s0_12801: the squares of |row means| on the diagonal reach 5x the Gaussian's largest)."""
    shape = step["in"]["shape"]
    d = shape[-1]
    if d == 1 and not x.normed:
        return Sample(_pair(x.v, x.v, lambda a, b: a * b, draws), tuple(sorted(u * u for u in x.v)))
    m, e = x.mean, x.energy
    e2 = math.fsum(v ** 4 for v in x.v) / K
    if x.row_mean is not None and x.row_mean[0] == len(shape) - 1 and not x.row_sd:
        mu = x.row_mean[1]
        var = max(e - mu * mu, 0.0)
        dev4 = math.fsum((v - mu) ** 4 for v in x.v) / K
        off = _gauss(d * mu * mu, math.sqrt(d) * var)
        diag = _gauss(d * (mu * mu + var), math.sqrt(d * max(dev4 - var * var, 0.0)))
    else:
        off = _gauss(d * m * m, math.sqrt(d * max(e * e - m ** 4, 0.0)))
        diag = _gauss(d * e, math.sqrt(d * max(e2 - e * e, 0.0)))
    return Sample(off, (d * e,) * K if x.normed else tuple(sorted(diag)))


def _softmax_of_scores(n: float, var: float) -> tuple[float, float]:
    """(log sum exp, sum p^2) of n independent Gaussian scores of variance `var` about their mean, taken on their n
    expected order statistics (Blom's positions; at most SCORE_POINTS, each standing for n / SCORE_POINTS): log n +
    var / 2 while many terms carry the sum, the largest score once a few do -- fused_s0_16120's scores (bmm of K 128,
    then q = k = v over 64 dims: sd 128) sum to ~e^298 over 63 keys (direct draws: e^283-297), not the lognormal
    mean's e^8,200, and every row attends to itself. sum p^2 is 1 / n for equal weights, 1 where one key takes all:
    what an average under the weights keeps of the values' variance. Against 200 direct draws (n 63-2,047, sd
    0.5-128): log sum exp within 1.5 % (5 % at sd 128, where the largest of 63 draws moves most), sum p^2 0-31 % over."""
    points = max(1, min(round(n), SCORE_POINTS))
    sd = math.sqrt(var)
    scores = [sd * NormalDist().inv_cdf((i + 0.625) / (points + 0.25)) for i in range(points)]     # Blom's positions
    top = scores[-1]
    weights = [math.exp(u - top) for u in scores]
    total = math.fsum(weights)
    lse = top + math.log(total) + math.log(max(n, 1.0) / points)
    return lse, min(math.fsum(u * u for u in weights) / total ** 2 * points / max(n, 1.0), 1.0)


def _sdpa(x: Sample, step: dict) -> Sample:
    """Self-attention of q = k = v: a row's own key scores |q|^2 / sqrt(d_head), the others about
    mean^2 sqrt(d_head) +- E[x^2]; the output mixes the row's own value (weight w) with the average of
    the others'. A gram's diagonal (one value a row and a column of the square s x s input) is no
    independent draw: without a causal mask, column c's average over the other keys holds exactly one
    (row c's), the same shift (diag - mean) (1 - w) / (keys - 1) in every column off the row's own,
    and the row's own column holds its own diagonal value at weight w."""
    b, s, d = step["in"]["shape"]
    dh = d / step["params"]["num_heads"]
    m, e = x.mean, x.energy
    own, other, var = math.sqrt(dh) * e, math.sqrt(dh) * m * m, max(e * e - m ** 4, 0.0)
    causal = step["params"].get("is_causal")
    keys = s / 2.0 if causal else float(s)
    lse, weight_energy = _softmax_of_scores(keys - 1.0, var)
    t = min(other + lse - own, 700.0)
    w = 1.0 / (1.0 + math.exp(t))
    shrink = math.sqrt(w * w + (1.0 - w) ** 2 * weight_energy)
    if x.diag is None or causal or d != s:
        v = x.v if x.diag is None else _quantiles(list(x.v) * (s - 1) + list(x.diag))
        return Sample(tuple(sorted(m + (u - m) * shrink for u in v)))
    shift = (math.fsum(x.diag) / K - m) * (1.0 - w) / (keys - 1.0)
    return Sample(tuple(sorted(m + shift + (u - m) * shrink for u in x.v)),
                  tuple(sorted(m + (a - m) * w for a in x.diag)))


def _pair(a: tuple, b: tuple, fn, draws: _Draws) -> tuple:
    perm = draws.perm()
    return tuple(sorted(fn(a[i], b[perm[i]]) for i in range(K)))


def _safe(fn, v: float) -> float:
    try:
        return fn(v)
    except OverflowError:
        return math.copysign(math.inf, v)


def _step(x: Sample, step: dict, saved: dict, draws: _Draws, scalars: list) -> Sample:
    op, p, role = step["op"], step["params"], step["role"]
    if x.diag is not None and not _keeps_diag(step):
        x = _merged(x, step["in"]["shape"][-1])
    if op == "embedding":
        return Sample(_Z)
    if op in ("matmul", "bmm"):
        return Sample(_gauss(0.0, math.sqrt(p["K"])))
    if op == "gram":
        return _gram(x, step, draws)
    if op == "sdpa":
        return _sdpa(x, step)
    if role == "contraction":
        return _contraction(x, step)
    if op in ("layer_norm", "rms_norm"):
        centre = op == "layer_norm"
        zero_mean = centre or (x.row_mean is not None and x.row_mean == (_dim(step), 0.0) and not x.row_sd)
        return Sample(tuple(sorted(_standardize(x, LAYER_NORM_EPS if centre else RMS_NORM_EPS, centre))),
                      normed=True, row_mean=(_dim(step), 0.0) if zero_mean else None)
    if role == "norm":             # batch / group / instance norm: standardised over their own groups
        return Sample(tuple(sorted(_standardize(x, LAYER_NORM_EPS, True))))
    if role in ("softmax", "reduction"):
        return _row_op(x, step, draws)
    if op.startswith("max_pool"):
        return Sample(_extreme(x.v, p["kernel_size"] ** (len(step["in"]["shape"]) - 2), True))
    if op.startswith(("avg_pool", "adaptive_avg_pool")):
        shape = step["in"]["shape"]
        n = p["kernel_size"] ** (len(shape) - 2) if op.startswith("avg_pool") else math.prod(shape[2:])
        return Sample(_gauss(x.mean, x.sd / math.sqrt(n)))
    if op == "flatten":
        return Sample(x.v)
    if op == "glu":
        return Sample(_pair(x.v, x.v, lambda a, b: a * _elementwise("sigmoid", b, {}, None), draws))
    if op == "residual_add":
        skip = saved[p.get("skip_from", -1)]
        return Sample(_pair(x.v, skip.v, lambda a, b: a + b, draws))
    if op in ("bias_add", "scale_param"):
        add = op == "bias_add"
        if p["shape"][0] == 1:                 # one value for the whole tensor: its sign is a scenario
            c = scalars.pop(0)
            v = tuple(sorted(a + c if add else a * c for a in x.v))
            return Sample(v, x.diag and tuple(sorted(a + c if add else a * c for a in x.diag)), x.normed and not add)
        return Sample(_pair(x.v, _Z, (lambda a, b: a + b) if add else (lambda a, b: a * b), draws))
    def f(v):
        return _safe(lambda u: _elementwise(op, u, p, None), v)
    diag = tuple(sorted(map(f, x.diag))) if x.diag is not None else None
    v = tuple(sorted(map(f, x.v)))
    if v == x.v and diag == x.diag:
        return x                  # a clamp the values never reach, a relu of positive values: changes nothing
    linear = op in ("scale", "divide", "add_scalar")       # maps a row's mean as it maps each value
    row_mean, row_sd = (None, 0.0) if x.row_mean is None else _row_mean_through(f, x, step["in"]["shape"], linear)
    mean_dim = None if x.row_mean is None else x.row_mean[0]
    if x.log_rows is not None and x.row_mean is None and x.diag is None:
        mean_dim, row_mean = x.log_rows, _affine_in_p(f, x.v, step["in"]["shape"][x.log_rows])
    return Sample(v, diag, x.normed and op in ("scale", "divide"), None if row_mean is None else (mean_dim, row_mean), row_sd,
                  chan=_chan_through(f, x.chan, linear), floor=_floor(f, x))


def _affine_in_p(f, values: tuple, C: int) -> float | None:
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


def _chan_through(f, chan: tuple | None, linear: bool) -> tuple | None:
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
        ys = [f(c + sd * z) for z in _NOISE]
        mean = math.fsum(ys) / len(ys)
        means.append(mean)
        variances.append(math.fsum((y - mean) ** 2 for y in ys) / len(ys))
    if not all(map(math.isfinite, means + variances)):
        return None
    return dim, tuple(sorted(means)), math.sqrt(math.fsum(variances) / K), gaussian and linear


def _floor(f, x: Sample) -> float | None:
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


def _row_mean_through(f, x: Sample, shape: list, linear: bool) -> tuple:
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


def _scalar_steps(program: list) -> int:
    return sum(s["op"] in ("bias_add", "scale_param") and s["params"]["shape"][0] == 1 for s in program)


def emulate(program: list) -> list[Sample]:
    """The output's sample under each scenario of the program's scalar parameters' signs."""
    n = _scalar_steps(program)
    out = []
    for values in itertools.product(*([SCALAR_VALUES] + [SCALAR_LATER] * (n - 1) if n else [])):
        scalars = list(values)
        x, saved = Sample(_Z), {}
        saved[-1] = x
        for j, step in enumerate(program):
            x = _step(x, step, saved, _Draws(j), scalars)
            saved[j] = x
        out.append(x)
    return out


def trivial(sample: Sample, tol: float, margin: float, numel: int = K) -> str | None:
    """'zeros' / 'constant' when every sampled value lies within `margin` times KernelBench's
    tolerance of zero / of the median (allclose: |y - c| <= atol + rtol |y|); else None. An output of
    fewer than K elements is held to the quantiles its own extremes reach (0.5 / numel from either end):
    the sample's outermost stand for rarer values than it holds."""
    keep = [u for i, u in enumerate(sample.v) if numel >= K or 0.5 / numel <= (i + 0.5) / K <= 1.0 - 0.5 / numel]
    values = tuple(keep) + (sample.diag or ())         # a gram's diagonal is the output's too
    if any(math.isnan(x) or math.isinf(x) for x in sample.v + (sample.diag or ())):
        return None                                    # NaN / inf: the filter's, not a trivial kernel's
    v = list(values)
    if max(abs(x) for x in v) <= margin * tol:
        return "zeros"
    med = sample.v[K // 2]
    if max(abs(x - med) - margin * tol * abs(x) for x in v) <= margin * tol:
        return "constant"
    return None

