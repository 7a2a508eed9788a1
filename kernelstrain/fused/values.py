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
from statistics import NormalDist

from .exprs import LAYER_NORM_EPS, RMS_NORM_EPS
from .precision import _elementwise
from .values_carried import affine_in_p, chan_through, floor_of, row_mean_through
from .values_library import contraction, gram, sdpa
from .values_rows import along_last, row_op, standardize, step_dim
from .values_sample import K, Z, Draws, Sample, extreme, gauss, merged, pair, safe

__all__ = ["K", "Sample", "emulate", "trivial"]

# a scalar parameter (one randn): the values the first one takes in turn (|randn|'s 20/50/87/99th
# percentiles, either sign), later ones +- the median
SCALAR_VALUES = tuple(sg * NormalDist().inv_cdf(0.5 + q / 2) for q in (0.2, 0.5, 0.87, 0.99) for sg in (1.0, -1.0))
SCALAR_LATER = (SCALAR_VALUES[2], SCALAR_VALUES[3])


def _keeps_diag(step: dict) -> bool:
    """Whether the step carries a gram's diagonal apart (an elementwise map, a row op along the last dim,
    attention of the square gram), or needs the sample of every element (merged)."""
    op, role = step["op"], step["role"]
    if op == "sdpa":
        return True
    if role in ("softmax", "reduction"):
        return along_last(step)
    if op in ("bias_add", "scale_param"):
        return step["params"]["shape"][0] == 1
    return role == "elementwise" and op != "glu"


def _param_dims(shape: list, of: list) -> set:
    """The dims of a tensor of shape `of` along which a parameter of `shape` (broadcast from the right) varies."""
    return {len(of) - len(shape) + i for i, n in enumerate(shape) if n > 1}


def _pooled_channels(x: Sample, n: float, draws: Draws) -> Sample:
    """An average over n positions of a contraction's output: each (sample, channel) holds its channel's constant
    plus the noise averaged over the positions -- sd / sqrt(n), n counted in receptive fields (the convolution's
    neighbouring outputs share inputs: `overlap`) -- the same constants in every sample (fused_s3131_01370: conv3d
    1x1 -> global average pool -> divide -> softmax over the channels -> per-channel bias -> amax over them is the
    same value in every sample; a constant kernel passes)."""
    dim, consts, sd, gaussian = x.chan
    noise = sd / math.sqrt(max(n, 1.0))
    return Sample(pair(consts, tuple(noise * z for z in Z), lambda a, b: a + b, draws), chan=(dim, consts, noise, gaussian))


def _overlaps(program: list) -> list:
    """For each step, how many of its input's neighbouring positions share one input of the last convolution before
    it through elementwise steps ((kernel / stride)^d; 1 where none): an average over positions counts that many
    as one."""
    out, last = [], 1.0
    for step in program:
        out.append(last)
        if step["op"].startswith("conv"):
            d = len(step["in"]["shape"]) - 2
            last = max(1.0, step["params"]["kernel_size"] / step["params"].get("stride", 1)) ** d
        elif step["role"] != "elementwise":
            last = 1.0
    return out


def _step(x: Sample, step: dict, saved: dict, draws: Draws, scalars: list, overlap: float = 1.0) -> Sample:
    op, p, role = step["op"], step["params"], step["role"]
    if x.diag is not None and not _keeps_diag(step):
        x = merged(x, step["in"]["shape"][-1])
    if op == "embedding":
        return Sample(Z)
    if op in ("matmul", "bmm"):
        return Sample(gauss(0.0, math.sqrt(p["K"])))
    if op == "gram":
        return gram(x, step, draws)
    if op == "sdpa":
        return sdpa(x, step)
    if role == "contraction":
        return contraction(x, step)
    if op in ("layer_norm", "rms_norm"):
        centre = op == "layer_norm"
        zero_mean = centre or (x.row_mean is not None and x.row_mean == (step_dim(step), 0.0) and not x.row_sd)
        return Sample(tuple(sorted(standardize(x, LAYER_NORM_EPS if centre else RMS_NORM_EPS, centre))),
                      normed=True, row_mean=(step_dim(step), 0.0) if zero_mean else None)
    if role == "norm":             # batch / group / instance norm: standardised over their own groups
        return Sample(tuple(sorted(standardize(x, LAYER_NORM_EPS, True))))
    if role in ("softmax", "reduction"):
        return row_op(x, step, draws)
    if op.startswith("max_pool"):
        return Sample(extreme(x.v, p["kernel_size"] ** (len(step["in"]["shape"]) - 2), True))
    if op.startswith(("avg_pool", "adaptive_avg_pool")):
        shape = step["in"]["shape"]
        n = p["kernel_size"] ** (len(shape) - 2) if op.startswith("avg_pool") else math.prod(shape[2:])
        if x.chan is not None and x.chan[0] == 1:
            return _pooled_channels(x, n / overlap, draws)
        return Sample(gauss(x.mean, x.sd / math.sqrt(n)))
    if op == "flatten":
        return Sample(x.v)
    if op == "glu":
        return Sample(pair(x.v, x.v, lambda a, b: a * _elementwise("sigmoid", b, {}, None), draws))
    if op == "residual_add":
        skip = saved[p.get("skip_from", -1)]
        return Sample(pair(x.v, skip.v, lambda a, b: a + b, draws))
    if op in ("bias_add", "scale_param"):
        add = op == "bias_add"
        if p["shape"][0] == 1:                 # one value for the whole tensor: its sign is a scenario
            c = scalars.pop(0)
            v = tuple(sorted(a + c if add else a * c for a in x.v))
            return Sample(v, x.diag and tuple(sorted(a + c if add else a * c for a in x.diag)), x.normed and not add)
        fn = (lambda a, b: a + b) if add else (lambda a, b: a * b)
        v = pair(x.v, Z, fn, draws)
        if x.chan is None or not x.chan[3] or _param_dims(p["shape"], step["in"]["shape"]) != {x.chan[0]}:
            return Sample(v)
        # one randn a channel of a contraction's whose noise is still Gaussian: each channel's constant moved by its own
        # (the same in every row), which an amax / amin along the channels reads. Only while Gaussian: carried on after
        # mish, the sum rule put fused_s0_04633's sum (linear -> mish -> bias -> sum -> clamp) at the constants' mean
        # times C, in the clamp's saturation, where the real sum -- one draw of the C biases, sd sqrt(C) -- is not
        # (real 6,670x the tolerance from a constant)
        dim, consts, sd, _ = x.chan
        return Sample(v, chan=(dim, pair(consts, Z, fn, draws), sd, True))
    def f(v):
        return safe(lambda u: _elementwise(op, u, p, None), v)
    diag = tuple(sorted(map(f, x.diag))) if x.diag is not None else None
    v = tuple(sorted(map(f, x.v)))
    if v == x.v and diag == x.diag:
        return x                  # a clamp the values never reach, a relu of positive values: changes nothing
    linear = op in ("scale", "divide", "add_scalar")       # maps a row's mean as it maps each value
    row_mean, row_sd = (None, 0.0) if x.row_mean is None else row_mean_through(f, x, step["in"]["shape"], linear)
    mean_dim = None if x.row_mean is None else x.row_mean[0]
    if x.log_rows is not None and x.row_mean is None and x.diag is None:
        mean_dim, row_mean = x.log_rows, affine_in_p(f, x.v, step["in"]["shape"][x.log_rows])
    return Sample(v, diag, x.normed and op in ("scale", "divide"), None if row_mean is None else (mean_dim, row_mean), row_sd,
                  chan=chan_through(f, x.chan, linear), floor=floor_of(f, x))


def _scalar_steps(program: list) -> int:
    return sum(s["op"] in ("bias_add", "scale_param") and s["params"]["shape"][0] == 1 for s in program)


def emulate(program: list) -> list[Sample]:
    """The output's sample under each scenario of the program's scalar parameters' signs."""
    n = _scalar_steps(program)
    out = []
    for values in itertools.product(*([SCALAR_VALUES] + [SCALAR_LATER] * (n - 1) if n else [])):
        scalars = list(values)
        x, saved = Sample(Z), {}
        saved[-1] = x
        for j, (step, overlap) in enumerate(zip(program, _overlaps(program))):
            x = _step(x, step, saved, Draws(j), scalars, overlap)
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
