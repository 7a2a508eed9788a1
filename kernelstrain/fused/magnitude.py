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
OVERFLOW_MARGIN = 3.0         # offer the unstable-exp bug only past 3x this (rough estimate, sure overflow)
_SQRT3 = math.sqrt(3.0)


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
            d = s["in"]["shape"][-1]
            m, r = 0.0, rms2 * math.sqrt(d)
        elif op == "embedding":
            m, r = 0.0, 1.0
        elif s["role"] == "norm":
            m, r = 0.0, 1.0
        elif op in ("relu", "gelu", "gelu_tanh", "new_gelu", "quick_gelu", "silu", "mish", "softplus", "elu", "selu",
                    "hardswish", "leaky_relu"):
            m, r = m + 0.4 * r, r / math.sqrt(2.0)
        elif op in ("sigmoid", "tanh", "softmax"):
            m, r = 0.5 if op == "sigmoid" else 0.0, min(r, 1.0)
        elif op in ("hardtanh", "clamp"):
            lo, hi = (p.get("min_val", p.get("clamp_min")), p.get("max_val", p.get("clamp_max")))
            m, r = min(max(m, lo), hi), min(r, hi - lo)
        elif op == "scale":
            m, r = m * p["scale_factor"], r * p["scale_factor"]
        elif op == "divide":
            m, r = m / p["divisor"], r / p["divisor"]
        elif op == "add_scalar":
            m += p["add_value"]
        elif op == "abs":
            m, r = abs(m) + 0.8 * r, r
        elif op in ("bias_add", "scale_param"):
            m, r = m, math.sqrt(rms2 + (1.0 if op == "bias_add" else 0.0))
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


def exp_overflows(mean: float, rms: float) -> bool:
    """Whether exp of the raw values surely overflows somewhere in fp32."""
    return abs(mean) + 3.0 * rms > OVERFLOW_MARGIN * EXP_OVERFLOW
