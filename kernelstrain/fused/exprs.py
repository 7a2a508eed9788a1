"""What each fusible operator computes, as one statement on an fp32 register `v`, in CUDA C++
and in Triton; and which operators a custom kernel can take (the rest stay PyTorch calls).

Elementwise operators map v -> v; a row operator (norm, softmax, reduction along one dim)
reads a whole row. Per-channel parameters (bias_add, scale_param) read `p[c]`, the channel of
the element; a residual add reads `skip`.

>>> cuda_stmt("leaky_relu", {"negative_slope": 0.2})
'v = v > 0.f ? v : v * 0.2f;'
>>> triton_stmt("clamp", {"clamp_min": -1.0, "clamp_max": 6.0})
'v = tl.minimum(tl.maximum(v, -1.0), 6.0)'
"""
from __future__ import annotations

# op -> CUDA statement template ({name} are the op's scalar params, written as float literals)
CUDA = {
    "relu": "v = fmaxf(v, 0.f);",
    "leaky_relu": "v = v > 0.f ? v : v * {negative_slope};",
    "gelu": "v = 0.5f * v * (1.f + erff(v * 0.70710678118654752f));",
    "gelu_tanh": "v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));",
    "new_gelu": "v = 0.5f * v * (1.f + tanhf(0.7978845608028654f * (v + 0.044715f * v * v * v)));",
    "quick_gelu": "v = v / (1.f + expf(-1.702f * v));",
    "silu": "v = v / (1.f + expf(-v));",
    "mish": "v = v * tanhf(v > 20.f ? v : log1pf(expf(v)));",
    "hardswish": "v = v * fminf(fmaxf(v + 3.f, 0.f), 6.f) / 6.f;",
    "elu": "v = v > 0.f ? v : expm1f(v);",
    "selu": "v = 1.0507009873554805f * (v > 0.f ? v : 1.6732632423543772f * expm1f(v));",
    "softplus": "v = v > 20.f ? v : log1pf(expf(v));",
    "sigmoid": "v = 1.f / (1.f + expf(-v));",
    "tanh": "v = tanhf(v);",
    "hardtanh": "v = fminf(fmaxf(v, {min_val}), {max_val});",
    "clamp": "v = fminf(fmaxf(v, {clamp_min}), {clamp_max});",
    "scale": "v = v * {scale_factor};",
    "divide": "v = v / {divisor};",
    "add_scalar": "v = v + {add_value};",
    "abs": "v = fabsf(v);",
    "bias_add": "v = v + {p};",
    "scale_param": "v = v * {p};",
    "residual_add": "v = v + {skip};",
}

_TANH = "(2.0 * tl.sigmoid(2.0 * {x}) - 1.0)"      # tanh: Triton has no portable tanh
_SOFTPLUS = "tl.where(v > 20.0, v, tl.log(1.0 + tl.exp(v)))"
TRITON = {
    "relu": "v = tl.maximum(v, 0.0)",
    "leaky_relu": "v = tl.where(v > 0.0, v, v * {negative_slope})",
    "gelu": "v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))",
    "gelu_tanh": "v = 0.5 * v * (1.0 + " + _TANH.format(x="(0.7978845608028654 * (v + 0.044715 * v * v * v))") + ")",
    "new_gelu": "v = 0.5 * v * (1.0 + " + _TANH.format(x="(0.7978845608028654 * (v + 0.044715 * v * v * v))") + ")",
    "quick_gelu": "v = v * tl.sigmoid(1.702 * v)",
    "silu": "v = v * tl.sigmoid(v)",
    "mish": "v = v * " + _TANH.format(x=_SOFTPLUS),
    "hardswish": "v = v * tl.minimum(tl.maximum(v + 3.0, 0.0), 6.0) / 6.0",
    "elu": "v = tl.where(v > 0.0, v, tl.exp(v) - 1.0)",
    "selu": "v = 1.0507009873554805 * tl.where(v > 0.0, v, 1.6732632423543772 * (tl.exp(v) - 1.0))",
    "softplus": "v = " + _SOFTPLUS,
    "sigmoid": "v = tl.sigmoid(v)",
    "tanh": "v = " + _TANH.format(x="v"),
    "hardtanh": "v = tl.minimum(tl.maximum(v, {min_val}), {max_val})",
    "clamp": "v = tl.minimum(tl.maximum(v, {clamp_min}), {clamp_max})",
    "scale": "v = v * {scale_factor}",
    "divide": "v = v / {divisor}",
    "add_scalar": "v = v + {add_value}",
    "abs": "v = tl.abs(v)",
    "bias_add": "v = v + {p}",
    "scale_param": "v = v * {p}",
    "residual_add": "v = v + {skip}",
}
ELEMENTWISE = frozenset(CUDA)
CHANNEL_PARAMS = ("bias_add", "scale_param")     # read one value per channel
ROW_NORMS = ("layer_norm", "rms_norm")
ROW_SOFTMAX = ("softmax", "log_softmax")
ROW_REDUCE = ("sum", "mean", "amax", "amin", "logsumexp")
ROW_OPS = frozenset(ROW_NORMS + ROW_SOFTMAX + ROW_REDUCE)
EXP_ROWS = ("softmax", "log_softmax", "logsumexp")   # exponentiate the row: stable only after the max
LAYER_NORM_EPS, RMS_NORM_EPS = 1e-5, 1e-6            # nn.LayerNorm's default; the RMSNorm helper's


def literal_c(x: float) -> str:
    """A float literal in CUDA: 0.2 -> '0.2f', -1.0 -> '-1.0f'."""
    return f"{float(x)!r}f"


def cuda_stmt(op: str, params: dict, p: str = "", skip: str = "") -> str:
    scalars = {k: literal_c(v) for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return CUDA[op].format(p=p, skip=skip, **scalars)


def triton_stmt(op: str, params: dict, p: str = "", skip: str = "") -> str:
    scalars = {k: repr(float(v)) for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return TRITON[op].format(p=p, skip=skip, **scalars)


def fusible(step: dict) -> bool:
    """Whether a custom kernel of ours computes this step: an elementwise op, or a row op over
    one dim whose output keeps that dim (keepdim) -- not a global pool over a tuple of dims."""
    if step["op"] in ELEMENTWISE:
        return True
    return step["op"] in ROW_OPS and isinstance(step["params"].get("dim", -1), int)
