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

# A bf16 program's reference rounds every PyTorch op's output to bf16; a kernel keeping the chain in fp32
# differs from it by those roundings, which later steps amplify past KernelBench's tolerance (H200,
# 2026-12-05: a Triton GEMM epilogue of matmul -> scale_param -> relu -> new_gelu -> scale -> residual_add,
# max |diff| 1-2 on outputs ~100; linear -> sigmoid -> layer_norm, 0.0195 -- the norm divides the sigmoid's
# rounding by a row std of ~0.14). Our kernels round where the reference does: after each op, and inside
# the helper modules whose forward is several ops (torch.pow(x, 3.0) is base * base * base in bf16
# arithmetic: two roundings).
ROUND = "round_bf16"
CUDA_ROUND_FN = ("__device__ __forceinline__ float round_bf16(float v) { return __bfloat162float(__float2bfloat16(v)); }"
                 "  // as a bf16 tensor stores v")
TRITON_ROUND_FN = '@triton.jit\ndef round_bf16(v):\n    """v as a bf16 tensor stores it (round to nearest even), kept in fp32."""\n' \
                  "    return v.to(tl.bfloat16).to(tl.float32)"


def _r(x: str) -> str:
    return f"{ROUND}({x})"


# the helpers' ops one by one, each rounded (the statement's own result is rounded after it, as every op's)
BF16_CUDA = {
    "new_gelu": "v = " + _r("0.5f * v") + " * " + _r("1.f + " + _r("tanhf(" + _r("0.7978845608028654f * " + _r(
        "v + " + _r("0.044715f * " + _r(_r("v * v") + " * v")))) + ")")) + ";",
    "quick_gelu": "v = v * " + _r("1.f / (1.f + expf(-" + _r("1.702f * v") + "))") + ";",
}
BF16_TRITON = {
    "new_gelu": "v = " + _r("0.5 * v") + " * " + _r("1.0 + " + _r(_TANH.format(x=_r("0.7978845608028654 * " + _r(
        "v + " + _r("0.044715 * " + _r(_r("v * v") + " * v"))))))),
    "quick_gelu": "v = v * " + _r("tl.sigmoid(" + _r("1.702 * v") + ")"),
}
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


def cuda_stmt(op: str, params: dict, p: str = "", skip: str = "", bf16: bool = False) -> str:
    """`bf16`: a bf16 program's statement, a helper's ops rounded one by one (BF16_CUDA)."""
    scalars = {k: literal_c(v) for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return ((BF16_CUDA if bf16 else {}).get(op) or CUDA[op]).format(p=p, skip=skip, **scalars)


def triton_stmt(op: str, params: dict, p: str = "", skip: str = "", bf16: bool = False) -> str:
    scalars = {k: repr(float(v)) for k, v in params.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return ((BF16_TRITON if bf16 else {}).get(op) or TRITON[op]).format(p=p, skip=skip, **scalars)


def fusible(step: dict) -> bool:
    """Whether a custom kernel of ours computes this step: an elementwise op, or a row op over
    one dim whose output keeps that dim (keepdim) -- not a global pool over a tuple of dims."""
    if step["op"] in ELEMENTWISE:
        return True
    return step["op"] in ROW_OPS and isinstance(step["params"].get("dim", -1), int)
