"""The typed operator catalog: which tensors each operator accepts, how it draws its
parameters, its output type (shape inference), its PyTorch lines and its work.

Each operator is a function `draw(ctx, t) -> Step | None` (None: not applicable to t).
"""
from __future__ import annotations

import math

from .types import SPATIAL, Ctx, Step, T, channel_dim, io_bytes, last_dim, spatial

# -- elementwise: (expression, flops per element, scalar args and their menus) ----------

ELEMENTWISE = {
    "relu": ("torch.relu({x})", 1, {}),
    "leaky_relu": ("F.leaky_relu({x}, negative_slope={negative_slope})", 2, {"negative_slope": (0.01, 0.05, 0.1, 0.2)}),
    "gelu": ("F.gelu({x})", 8, {}),
    "gelu_tanh": ("F.gelu({x}, approximate='tanh')", 10, {}),
    "silu": ("F.silu({x})", 4, {}),
    "mish": ("F.mish({x})", 10, {}),
    "hardswish": ("F.hardswish({x})", 4, {}),
    "elu": ("F.elu({x})", 4, {}),
    "selu": ("torch.selu({x})", 5, {}),
    "softplus": ("F.softplus({x})", 5, {}),
    "sigmoid": ("torch.sigmoid({x})", 4, {}),
    "tanh": ("torch.tanh({x})", 4, {}),
    "hardtanh": ("F.hardtanh({x}, min_val={min_val}, max_val={max_val})", 2, {"min_val": (-1.0, -0.5, -2.0), "max_val": (1.0, 0.5, 2.0)}),
    "clamp": ("torch.clamp({x}, min={clamp_min}, max={clamp_max})", 2, {"clamp_min": (-1.0, -0.5, 0.0), "clamp_max": (1.0, 2.0, 6.0)}),
    "scale": ("{x} * {scale_factor}", 1, {"scale_factor": (0.5, 2.0, 1.5, 0.1, 3.0)}),
    "divide": ("{x} / {divisor}", 1, {"divisor": (2.0, 4.0, 8.0, 1.5)}),
    "add_scalar": ("{x} + {add_value}", 1, {"add_value": (0.5, 1.0, -0.5, 0.1)}),
    "abs": ("torch.abs({x})", 1, {}),
}
# idempotent or saturating pairs that make a program trivial when repeated back to back
_NO_REPEAT = {"relu", "abs", "clamp", "hardtanh", "sigmoid", "tanh"}


def _elementwise(name: str):
    expr, per_elem, args = ELEMENTWISE[name]

    def draw(ctx: Ctx, t: T) -> Step | None:
        params, fill, setup = {}, {"x": "x"}, []
        for arg, menu in args.items():
            params[arg] = ctx.choice(menu)
            c = ctx.const(arg, params[arg])
            setup.append(f"self.{c} = {c}")
            fill[arg] = f"self.{c}"
        return Step(name, "elementwise", params, t, t, setup, [f"x = {expr.format(**fill)}"],
                    float(per_elem * t.numel), io_bytes(ctx, t.numel, t.numel))
    return draw


# transformers-style activations and norms, written into the program as helper modules
HELPERS = {
    "NewGELU": '''class NewGELU(nn.Module):
    """GELU, tanh approximation as in Google BERT / GPT-2 (transformers' NewGELUActivation)."""

    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))''',
    "QuickGELU": '''class QuickGELU(nn.Module):
    """Fast GELU approximation x * sigmoid(1.702 x) (transformers' QuickGELUActivation)."""

    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)''',
    "RMSNorm": '''class RMSNorm(nn.Module):
    """Root-mean-square norm over the last dim, computed in float32 (Llama / T5 style)."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)''',
}


def _helper_act(name: str, helper: str, per_elem: int):
    def draw(ctx: Ctx, t: T) -> Step | None:
        a = ctx.attr("act")
        return Step(name, "elementwise", {}, t, t, [f"self.{a} = {helper}()"], [f"x = self.{a}(x)"],
                    float(per_elem * t.numel), io_bytes(ctx, t.numel, t.numel), (helper,))
    return draw


def _param_shape(t: T, ctx: Ctx) -> tuple[str, tuple]:
    """Shape expression of a per-channel parameter broadcast against t."""
    d = channel_dim(t)
    c = ctx.size(t, d, "channels" if t.kind in SPATIAL else "features", init=False)
    ones = ", 1" * len(spatial(t))
    return f"({c}{ones},)" if not ones else f"({c}{ones})", (t.shape[d],) + (1,) * len(spatial(t))


def _param_op(name: str, symbol: str, init: str):
    def draw(ctx: Ctx, t: T) -> Step | None:
        expr, shape = _param_shape(t, ctx)
        c = ctx.const(f"{name.split('_')[0]}_shape", shape, expr=expr)
        a = ctx.attr(name.split("_")[0])
        setup = [f"self.{a} = nn.Parameter({init}({c}))"]
        return Step(name, "elementwise", {"shape": list(shape)}, t, t, setup, [f"x = x {symbol} self.{a}"],
                    float(t.numel), io_bytes(ctx, t.numel, t.numel, shape[0]), weights=shape[0])
    return draw


# -- norms, softmax, reductions ---------------------------------------------------------

def _layer_norm(ctx: Ctx, t: T) -> Step | None:
    if t.kind not in ("vec", "seq") or t.shape[-1] < 8:
        return None
    f, a = ctx.size(t, last_dim(t), "normalized_shape"), ctx.attr("norm")
    return Step("layer_norm", "norm", {}, t, t, [f"self.{a} = nn.LayerNorm({f})"], [f"x = self.{a}(x)"],
                8.0 * t.numel, io_bytes(ctx, t.numel, t.numel, 2 * t.shape[-1]), weights=2 * t.shape[-1])


def _rms_norm(ctx: Ctx, t: T) -> Step | None:
    if t.kind not in ("vec", "seq") or t.shape[-1] < 8:
        return None
    f, a = ctx.size(t, last_dim(t), "hidden_size"), ctx.attr("norm")
    return Step("rms_norm", "norm", {}, t, t, [f"self.{a} = RMSNorm({f})"], [f"x = self.{a}(x)"],
                5.0 * t.numel, io_bytes(ctx, t.numel, t.numel, t.shape[-1]), ("RMSNorm",), t.shape[-1])


def _batch_norm(ctx: Ctx, t: T) -> Step | None:
    if t.kind == "seq" or t.shape[0] < 2 or (t.kind in SPATIAL and math.prod(spatial(t)) < 2):
        return None
    d = SPATIAL.get(t.kind, 1)
    c, a = ctx.size(t, 1, "num_features"), ctx.attr("bn")
    return Step("batch_norm", "norm", {}, t, t, [f"self.{a} = nn.BatchNorm{d}d({c})"], [f"x = self.{a}(x)"],
                8.0 * t.numel, io_bytes(ctx, 2 * t.numel, t.numel, 4 * t.shape[1]), weights=4 * t.shape[1])


def _group_norm(ctx: Ctx, t: T) -> Step | None:
    if t.kind not in SPATIAL:
        return None
    groups = [g for g in (2, 4, 8, 16) if t.shape[1] % g == 0 and t.shape[1] // g >= 2]
    if not groups:
        return None
    g = ctx.choice(groups)
    gc, c, a = ctx.const("num_groups", g), ctx.size(t, 1, "num_channels"), ctx.attr("gn")
    return Step("group_norm", "norm", {"groups": g}, t, t, [f"self.{a} = nn.GroupNorm({gc}, {c})"],
                [f"x = self.{a}(x)"], 8.0 * t.numel, io_bytes(ctx, 2 * t.numel, t.numel, 2 * t.shape[1]),
                weights=2 * t.shape[1])


def _instance_norm(ctx: Ctx, t: T) -> Step | None:
    if t.kind not in SPATIAL or math.prod(spatial(t)) < 16:
        return None
    d = SPATIAL[t.kind]
    c, a = ctx.size(t, 1, "num_features"), ctx.attr("inorm")
    return Step("instance_norm", "norm", {}, t, t, [f"self.{a} = nn.InstanceNorm{d}d({c})"], [f"x = self.{a}(x)"],
                8.0 * t.numel, io_bytes(ctx, 2 * t.numel, t.numel))


def _softmax(name: str, fn: str):
    def draw(ctx: Ctx, t: T) -> Step | None:
        d = channel_dim(t)
        if t.shape[d] < 4:
            return None
        dim = -1 if d == last_dim(t) else d
        return Step(name, "softmax", {"dim": dim}, t, t, [], [f"x = {fn}(x, dim={dim})"],
                    5.0 * t.numel, io_bytes(ctx, t.numel, t.numel))
    return draw


REDUCTIONS = {"sum": "torch.sum", "mean": "torch.mean", "amax": "torch.amax", "amin": "torch.amin",
              "logsumexp": "torch.logsumexp"}


def _reduction(name: str):
    fn = REDUCTIONS[name]

    def draw(ctx: Ctx, t: T) -> Step | None:
        d = channel_dim(t)
        if t.shape[d] < 4:
            return None
        if t.kind in SPATIAL and name == "mean" and math.prod(spatial(t)) >= 4 and ctx.rng.random() < 0.5:
            # global average pool + flatten: (N, C, *spatial) -> (N, C)
            dims = tuple(range(2, len(t.shape)))
            out = T("vec", t.shape[:2], t.names[:2])
            return Step(name, "reduction", {"dim": list(dims), "keepdim": False}, t, out, [],
                        [f"x = {fn}(x, dim={dims})"], float(t.numel), io_bytes(ctx, t.numel, out.numel))
        dim = -1 if d == last_dim(t) else d
        out = t.with_dim(d, 1, None)
        return Step(name, "reduction", {"dim": dim, "keepdim": True}, t, out, [],
                    [f"x = {fn}(x, dim={dim}, keepdim=True)"], (4.0 if name == "logsumexp" else 1.0) * t.numel,
                    io_bytes(ctx, t.numel, out.numel))
    return draw


# -- pooling and reshapes -----------------------------------------------------------------

def _pool(name: str, module: str):
    def draw(ctx: Ctx, t: T) -> Step | None:
        if t.kind not in SPATIAL or min(spatial(t)) < 4:
            return None
        d = SPATIAL[t.kind]
        k = ctx.choice((2, 2, 3) if min(spatial(t)) >= 6 else (2,))
        kc, a = ctx.const("pool_kernel_size", k), ctx.attr("pool")
        out = T(t.kind, t.shape[:2] + tuple(s // k for s in spatial(t)), t.names[:2] + (None,) * d)
        return Step(f"{name}{d}d", "pool", {"kernel_size": k}, t, out, [f"self.{a} = nn.{module}{d}d(kernel_size={kc})"],
                    [f"x = self.{a}(x)"], float(t.numel), io_bytes(ctx, t.numel, out.numel))
    return draw


def _adaptive_avg_pool(ctx: Ctx, t: T) -> Step | None:
    if t.kind not in SPATIAL or math.prod(spatial(t)) < 4:
        return None
    d = SPATIAL[t.kind]
    out = T(t.kind, t.shape[:2] + (1,) * d, t.names[:2] + (None,) * d)
    return Step(f"adaptive_avg_pool{d}d", "pool", {"output_size": 1}, t, out, [],
                [f"x = F.adaptive_avg_pool{d}d(x, 1)"], float(t.numel), io_bytes(ctx, t.numel, out.numel))


def _flatten(ctx: Ctx, t: T) -> Step | None:
    if t.kind not in SPATIAL:
        return None
    out = T("vec", (t.shape[0], t.numel // t.shape[0]), (t.names[0], t.names[1] if t.numel == t.shape[0] * t.shape[1] else None))
    return Step("flatten", "reshape", {}, t, out, [], ["x = torch.flatten(x, 1)"], 0.0, 0.0)


def _glu(ctx: Ctx, t: T) -> Step | None:
    if t.kind not in ("vec", "seq") or t.shape[-1] % 2 or t.shape[-1] < 16:
        return None
    out = t.with_dim(last_dim(t), t.shape[-1] // 2, None)
    return Step("glu", "elementwise", {"dim": -1}, t, out, [], ["x = F.glu(x, dim=-1)"],
                4.0 * out.numel, io_bytes(ctx, t.numel, out.numel))


# -- contractions and attention -----------------------------------------------------------

FEATURES = (64, 128, 256, 384, 512, 768, 1024, 2048)
CHANNELS = (8, 16, 24, 32, 48, 64, 96, 128)


def _linear(ctx: Ctx, t: T) -> Step | None:
    if t.kind not in ("vec", "seq"):
        return None
    k, n = t.shape[-1], ctx.choice(FEATURES)
    kc, nc, a = ctx.size(t, last_dim(t), "in_features"), ctx.const("out_features", n), ctx.attr("linear")
    bias = ctx.rng.random() < 0.8
    out = t.with_dim(last_dim(t), n, nc)
    rows = t.numel // k
    return Step("linear", "contraction", {"in_features": k, "out_features": n, "bias": bias}, t, out,
                [f"self.{a} = nn.Linear({kc}, {nc}{'' if bias else ', bias=False'})"], [f"x = self.{a}(x)"],
                2.0 * rows * k * n, io_bytes(ctx, t.numel, k * n + n * bias, out.numel), weights=k * n + n * bias)


def _conv(transposed: bool):
    def draw(ctx: Ctx, t: T) -> Step | None:
        if t.kind not in SPATIAL:
            return None
        d = SPATIAL[t.kind]
        cin, cout = t.shape[1], ctx.choice(CHANNELS)
        k = ctx.choice((3, 3, 1, 5) if d < 3 else (3, 3, 1))
        stride = ctx.choice((1, 1, 2))
        pad = ctx.choice((0, k // 2))
        if transposed:
            sizes = tuple((s - 1) * stride - 2 * pad + k for s in spatial(t))
        else:
            sizes = tuple((s + 2 * pad - k) // stride + 1 for s in spatial(t))
        if min(sizes) < 2:
            return None
        name = ("conv_transpose" if transposed else "conv") + f"{d}d"
        module = ("ConvTranspose" if transposed else "Conv") + f"{d}d"
        ic = ctx.size(t, 1, "in_channels")
        oc, kc = ctx.const("out_channels", cout), ctx.const("kernel_size", k)
        extra = (f", stride={ctx.const('stride', stride)}" if stride != 1 else "") + \
                (f", padding={ctx.const('padding', pad)}" if pad else "")
        a = ctx.attr("conv_transpose" if transposed else "conv")
        out = T(t.kind, (t.shape[0], cout) + sizes, (t.names[0], oc) + (None,) * d)
        taps = cin * k ** d
        work = 2.0 * (t.numel * cout * k ** d if transposed else out.numel * taps)
        return Step(name, "contraction", {"out_channels": cout, "kernel_size": k, "stride": stride, "padding": pad},
                    t, out, [f"self.{a} = nn.{module}({ic}, {oc}, {kc}{extra})"], [f"x = self.{a}(x)"],
                    work, io_bytes(ctx, t.numel, taps * cout + cout, out.numel), weights=taps * cout + cout)
    return draw


def _gram(ctx: Ctx, t: T) -> Step | None:
    if t.kind != "seq" or t.shape[1] > 1024:
        return None
    b, s, d = t.shape
    out = T("seq", (b, s, s), (t.names[0], t.names[1], t.names[1]))
    return Step("gram", "contraction", {}, t, out, [], ["x = torch.matmul(x, x.transpose(-2, -1))"],
                2.0 * b * s * s * d, io_bytes(ctx, t.numel, out.numel))


def _sdpa(ctx: Ctx, t: T) -> Step | None:
    if t.kind != "seq" or t.shape[1] < 16:
        return None
    b, s, d = t.shape
    heads = [h for h in (1, 2, 4, 8, 16) if d % h == 0 and 16 <= d // h <= 128]
    if not heads:
        return None
    h, causal = ctx.choice(heads), ctx.rng.random() < 0.5
    hc = ctx.const("num_heads", h)
    setup = [f"self.{hc} = {hc}"]
    lines = [f"q = x.view(x.shape[0], x.shape[1], self.{hc}, -1).transpose(1, 2)",
             f"x = F.scaled_dot_product_attention(q, q, q, is_causal={causal})",
             "x = x.transpose(1, 2).flatten(2)"]
    flops = 4.0 * b * s * s * d * (0.5 if causal else 1.0) + 5.0 * b * h * s * s
    return Step("sdpa", "attention", {"num_heads": h, "is_causal": causal}, t, t, setup, lines,
                flops, io_bytes(ctx, t.numel, t.numel))


def _residual(ctx: Ctx, t: T) -> Step | None:
    return Step("residual_add", "residual", {}, t, t, [], ["x = x + skip"], float(t.numel),
                io_bytes(ctx, 3 * t.numel))


# The catalog: op name -> draw. Ops whose name depends on rank (conv2d ...) are listed by family.
CATALOG = {
    **{n: _elementwise(n) for n in ELEMENTWISE},
    "new_gelu": _helper_act("new_gelu", "NewGELU", 12),
    "quick_gelu": _helper_act("quick_gelu", "QuickGELU", 5),
    "bias_add": _param_op("bias_add", "+", "torch.randn"),
    "scale_param": _param_op("scale_param", "*", "torch.randn"),
    "layer_norm": _layer_norm, "rms_norm": _rms_norm, "batch_norm": _batch_norm,
    "group_norm": _group_norm, "instance_norm": _instance_norm,
    "softmax": _softmax("softmax", "torch.softmax"), "log_softmax": _softmax("log_softmax", "torch.log_softmax"),
    **{n: _reduction(n) for n in REDUCTIONS},
    "max_pool": _pool("max_pool", "MaxPool"), "avg_pool": _pool("avg_pool", "AvgPool"),
    "adaptive_avg_pool": _adaptive_avg_pool, "flatten": _flatten, "glu": _glu,
    "linear": _linear, "conv": _conv(False), "conv_transpose": _conv(True),
    "gram": _gram, "sdpa": _sdpa, "residual_add": _residual,
}
NO_REPEAT = _NO_REPEAT
# Random operators (dropout, rrelu, randn_like, rand_like, bernoulli, multinomial) never enter the
# catalog: a task's output must be a function of its inputs.
