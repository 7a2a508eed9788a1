"""The library steps of an emulated program: a GEMM / conv with PyTorch's default init, a gram x x^T and
self-attention (q = k = v), each mapping an input sample (values_sample.Sample) to the Gaussian, outer product or
attention average its arithmetic makes."""
from __future__ import annotations

import math
from statistics import NormalDist

from .values_sample import K, Draws, Sample, gauss, pair, quantiles

SCORE_POINTS = 4096                        # quantiles an attention row's scores are taken on (softmax_of_scores)


def contraction(x: Sample, step: dict) -> Sample:
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
    return Sample(gauss(0.0, math.sqrt(shared + varying)), chan=(dim, gauss(0.0, math.sqrt(shared)), math.sqrt(varying), True))


def gram(x: Sample, step: dict, draws: Draws) -> Sample:
    """x x^T over the last dim (d terms): each off-diagonal entry a sum of d products of two rows, the
    diagonal a row's sum of squares. Rows of one mean mu (a softmax's, carried through near-linear steps)
    leave no linear term: off d mu^2 + sum(dx_i dx_j), diagonal d (mu^2 + var) + sum(dx^2 - var).
    Rows of one value (d = 1) make an outer product, its entries the products themselves, not a Gaussian
    (fused_s0_12801: the squares of |row means| on the diagonal reach 5x the Gaussian's largest)."""
    shape = step["in"]["shape"]
    d = shape[-1]
    if d == 1 and not x.normed:
        return Sample(pair(x.v, x.v, lambda a, b: a * b, draws), tuple(sorted(u * u for u in x.v)))
    m, e = x.mean, x.energy
    e2 = math.fsum(v ** 4 for v in x.v) / K
    if x.row_mean is not None and x.row_mean[0] == len(shape) - 1 and not x.row_sd:
        mu = x.row_mean[1]
        var = max(e - mu * mu, 0.0)
        dev4 = math.fsum((v - mu) ** 4 for v in x.v) / K
        off = gauss(d * mu * mu, math.sqrt(d) * var)
        diag = gauss(d * (mu * mu + var), math.sqrt(d * max(dev4 - var * var, 0.0)))
    else:
        off = gauss(d * m * m, math.sqrt(d * max(e * e - m ** 4, 0.0)))
        diag = gauss(d * e, math.sqrt(d * max(e2 - e * e, 0.0)))
    return Sample(off, (d * e,) * K if x.normed else tuple(sorted(diag)))


def softmax_of_scores(n: float, var: float) -> tuple[float, float]:
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


def sdpa(x: Sample, step: dict) -> Sample:
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
    lse, weight_energy = softmax_of_scores(keys - 1.0, var)
    t = min(other + lse - own, 700.0)
    w = 1.0 / (1.0 + math.exp(t))
    shrink = math.sqrt(w * w + (1.0 - w) ** 2 * weight_energy)
    if x.diag is None or causal or d != s:
        v = x.v if x.diag is None else quantiles(list(x.v) * (s - 1) + list(x.diag))
        return Sample(tuple(sorted(m + (u - m) * shrink for u in v)))
    shift = (math.fsum(x.diag) / K - m) * (1.0 - w) / (keys - 1.0)
    return Sample(tuple(sorted(m + shift + (u - m) * shrink for u in x.v)),
                  tuple(sorted(m + (a - m) * w for a in x.diag)))
