"""How large the values entering each step are: a rough (mean, rms) carried through the program
from its randn inputs and PyTorch's default initialisations, so that a bug is offered only where
it really breaks the output (an exp without the max subtracted overflows fp32 past 88.7).

>>> rows = [{"op": "matmul", "role": "contraction", "params": {"M": 64, "K": 2048, "N": 64}, "in": {"shape": [64, 2048]}},
...         {"op": "softmax", "role": "softmax", "params": {"dim": -1}, "in": {"shape": [64, 64]}}]
>>> round(magnitudes(rows)[1][1])      # rms entering the softmax: sqrt(K)
45
"""
from __future__ import annotations

import math

EXP_OVERFLOW = 88.72          # expf(x) is inf in fp32 past this
OVERFLOW_MARGIN = 2.0         # offer the unstable-exp bug only where the estimated largest value is twice this
_SQRT3 = math.sqrt(3.0)
SATURATES = 8.0               # sigmoid / tanh of values past this are 0 or 1 / -1 or 1 within bf16 and fp32's atol
SPREAD_SIGMAS = 3.0           # "nearly every value": within this many rms of the mean


def magnitudes(program: list) -> list[tuple[float, float]]:
    """(mean, rms) of the tensor entering each step."""
    out, m, r = [], 0.0, 1.0
    saved = {-1: (0.0, 1.0)}
    for j, s in enumerate(program):
        out.append((m, r))
        op, p = s["op"], s["params"]
        rms2 = m * m + r * r
        if op in ("linear", "conv1d", "conv2d", "conv3d") or op.startswith("conv_transpose"):
            m, r = 0.0, math.sqrt(rms2) / _SQRT3
        elif op in ("matmul", "bmm"):
            m, r = 0.0, math.sqrt(p["K"])
        elif op == "gram":
            # x x^T over d: mean m^2 d (a constant input gives a constant product), spread as for m = 0
            d = s["in"]["shape"][-1]
            m, r = m * m * d, math.sqrt(max(rms2 * rms2 - m ** 4, 0.0) * d)
        elif op == "embedding":
            m, r = 0.0, 1.0
        elif s["role"] == "norm":
            m, r = 0.0, 1.0
        elif op in ("relu", "gelu", "gelu_tanh", "new_gelu", "quick_gelu", "silu", "mish", "softplus", "elu", "selu",
                    "hardswish", "leaky_relu"):
            m, r = m + 0.4 * r, r / math.sqrt(2.0)
        elif op == "softmax":
            # a row of C values summing to 1: mean 1/C, spread as exp spreads lognormal values (at most 1)
            m = 1.0 / s["in"]["shape"][p["dim"]]
            m, r = m, min(1.0, m * math.sqrt(math.expm1(min(r * r, 30.0))))
        elif op in ("sigmoid", "tanh"):
            lo, hi = (0.0, 1.0) if op == "sigmoid" else (-1.0, 1.0)
            m, r = _saturated(m, r, -SATURATES, SATURATES, lo, hi) or (0.5 if op == "sigmoid" else 0.0, min(r, 1.0))
        elif op in ("hardtanh", "clamp"):
            lo, hi = (p.get("min_val", p.get("clamp_min")), p.get("max_val", p.get("clamp_max")))
            m, r = _saturated(m, r, lo, hi, lo, hi) or (min(max(m, lo), hi), min(r, hi - lo))
        elif op == "scale":
            m, r = m * p["scale_factor"], r * p["scale_factor"]
        elif op == "divide":
            m, r = m / p["divisor"], r / p["divisor"]
        elif op == "add_scalar":
            m += p["add_value"]
        elif op == "abs":
            m, r = abs(m) + 0.8 * r, r
        elif op == "bias_add":          # + randn per channel: the mean stays, the spread grows
            m, r = m, math.sqrt(r * r + 1.0)
        elif op == "scale_param":       # x randn per channel: mean 0, the values' rms
            m, r = 0.0, math.sqrt(rms2)
        elif op == "log_softmax":
            m, r = -math.log(s["in"]["shape"][p["dim"]]) - r, r
        elif op == "sum":
            n = s["in"]["shape"][p["dim"] if isinstance(p["dim"], int) else 1]
            m, r = m * n, r * math.sqrt(n)
        elif op in ("mean", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
            r = r / 2.0
        elif op in ("amax", "amin", "logsumexp") or op.startswith("max_pool"):
            m = m + (2.5 * r if op != "amin" else -2.5 * r)
            if op == "logsumexp":
                m += math.log(s["in"]["shape"][p["dim"]])
            r = r / 2.0
        elif op == "residual_add":
            sm, sr = saved.get(p.get("skip_from", -1), (0.0, 1.0))
            m, r = m + sm, math.sqrt(r * r + sr * sr)
        saved[j] = (m, r)
    return out


def _saturated(m: float, r: float, lo: float, hi: float, out_lo: float, out_hi: float) -> tuple | None:
    """(value, 0) where nearly every value (3 sigma) lies past one end of [lo, hi], which a saturating
    op maps to out_lo / out_hi: the output is that constant; else None."""
    if m + SPREAD_SIGMAS * r <= lo:
        return out_lo, 0.0
    if m - SPREAD_SIGMAS * r >= hi:
        return out_hi, 0.0
    return None


def exp_overflows(mean: float, rms: float, numel: int) -> bool:
    """Whether exp of the raw values surely overflows somewhere in fp32: the largest of `numel`
    roughly Gaussian values lies near sqrt(2 ln numel) standard deviations out.

    >>> exp_overflows(0.0, 45.0, 65536), exp_overflows(0.0, 8.0, 65536)
    (True, False)
    """
    return abs(mean) + math.sqrt(2.0 * math.log(max(2, numel))) * rms > OVERFLOW_MARGIN * EXP_OVERFLOW
