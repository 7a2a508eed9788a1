"""Composing fused programs: a start (the program's inputs, maybe a head operator such as
matmul of two inputs or an embedding lookup), then operators drawn by weight from those
the catalog allows on the current tensor type, until the program has 2-6 operators.

A program that breaks a static bound (FLOPs, bytes, sizes) is redrawn with the next
attempt number, so every candidate index yields a well-formed program:

>>> p = compose(0, 7); 2 <= len(p.steps) <= 6 and p.index == 7
True
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..rng import seeded_rng
from .catalog import CATALOG, FEATURES, NO_REPEAT
from .types import SPATIAL, Ctx, Step, T

# Static bounds every candidate meets (the filter's CPU stand-in for a runtime range).
FLOPS_RANGE = (1e6, 2e9)
BYTES_RANGE = (1 << 16, 96 << 20)
MAX_NUMEL = 8 << 20           # largest tensor anywhere in a program, elements
MIN_OUTPUT_NUMEL = 16
LENGTHS = {2: 20, 3: 30, 4: 25, 5: 15, 6: 10}   # operators per program -> weight
BF16_SHARE = 0.2

# start -> weight; heads consume two inputs (matmul, bmm) or indices (embedding)
STARTS = {"vec": 18, "seq": 18, "img1": 8, "img2": 20, "img3": 7, "matmul": 10, "bmm": 8, "embedding": 8}
# op -> weight when applicable after the first operator
WEIGHTS = {
    "relu": 6, "leaky_relu": 3, "gelu": 5, "gelu_tanh": 2, "silu": 4, "mish": 2, "hardswish": 2, "elu": 2,
    "selu": 1, "softplus": 2, "sigmoid": 3, "tanh": 3, "hardtanh": 2, "clamp": 3, "abs": 1,
    "scale": 4, "divide": 3, "add_scalar": 2, "new_gelu": 2, "quick_gelu": 1, "bias_add": 3, "scale_param": 2,
    "layer_norm": 5, "rms_norm": 4, "batch_norm": 5, "group_norm": 4, "instance_norm": 2,
    "softmax": 4, "log_softmax": 2, "sum": 2, "mean": 3, "amax": 2, "amin": 1, "logsumexp": 2,
    "max_pool": 4, "avg_pool": 3, "adaptive_avg_pool": 1, "flatten": 2, "glu": 1,
    "linear": 4, "conv": 3, "conv_transpose": 2, "gram": 1, "sdpa": 3, "residual_add": 5,
}
FIRST_OPS = {"linear": 10, "conv": 10, "conv_transpose": 5, "sdpa": 4, "gram": 1,
             "layer_norm": 2, "rms_norm": 2, "batch_norm": 1, "group_norm": 1, "softmax": 1, "gelu": 1}
CONTRACTIONS = {"linear", "conv", "conv_transpose", "gram", "sdpa"}


@dataclass
class Program:
    """A composed program: its inputs, operator steps, residual source, and constants."""
    seed: int
    index: int
    attempt: int
    dtype: str
    start: str
    inputs: list        # {"name", "shape", "dtype", "expr"}
    steps: list         # Step
    skip_from: int | None   # residual's saved tensor: after step j (-1: the input); None: none
    ctx: Ctx

    @property
    def output(self) -> T:
        return self.steps[-1].t_out


def _weighted(rng, table: dict):
    names = list(table)
    return names[rng.choices(range(len(names)), weights=[table[n] for n in names])[0]]


def _randn(dims, ctx: Ctx) -> str:
    dt = ", dtype=dtype" if ctx.dtype != "fp32" else ""
    return f"torch.randn({', '.join(dims)}{dt})"


def _start(ctx: Ctx, start: str):
    """(inputs, head step or None, current tensor type) of a program start."""
    rng, c = ctx.rng, ctx.choice
    if start in ("vec", "seq") or start in SPATIAL:
        if start == "vec":
            dims = {"batch_size": c((16, 32, 64, 128, 256, 512)), "in_features": c(FEATURES)}
        elif start == "seq":
            dims = {"batch_size": c((2, 4, 8, 16)), "seq_len": c((64, 128, 256, 512)),
                    "hidden_size": c((64, 128, 256, 512, 768, 1024))}
        else:
            d = SPATIAL[start]
            space = {1: {"length": c((128, 256, 512, 1024))},
                     2: dict(zip(("height", "width"), [c((16, 32, 64, 128))] * 2)),
                     3: dict(zip(("depth", "height", "width"), [c((8, 16))] + [c((16, 32))] * 2))}[d]
            dims = {"batch_size": c((2, 4, 8, 16)), "in_channels": c((3, 4, 8, 16, 32)), **space}
        names = tuple(ctx.const(n, v, init=False) for n, v in dims.items())
        t = T(start, tuple(dims.values()), names)
        return [{"name": "x", "shape": list(t.shape), "dtype": ctx.dtype, "expr": _randn(names, ctx)}], None, t
    if start in ("matmul", "bmm"):
        size = (64, 128, 256, 512, 1024, 2048) if start == "matmul" else (64, 128, 256, 512)
        m, k, n = c(size), c(size), c(size)
        lead = {"batch_size": c((4, 8, 16, 32))} if start == "bmm" else {}
        consts = {**lead, "M": m, "K": k, "N": n}
        names = {key: ctx.const(key, v, init=False) for key, v in consts.items()}
        b = [names["batch_size"]] if lead else []
        inputs = [{"name": "a", "shape": list(lead.values()) + [m, k], "dtype": ctx.dtype, "expr": _randn(b + [names["M"], names["K"]], ctx)},
                  {"name": "b", "shape": list(lead.values()) + [k, n], "dtype": ctx.dtype, "expr": _randn(b + [names["K"], names["N"]], ctx)}]
        t = T("seq" if lead else "vec", tuple(lead.values()) + (m, n), tuple(b) + (names["M"], names["N"]))
        batch = lead.get("batch_size", 1)
        fn = "torch.bmm" if lead else "torch.matmul"
        t_in = T("seq" if lead else "vec", tuple(lead.values()) + (m, k), tuple(b) + (names["M"], names["K"]))
        step = Step(start, "contraction", {"M": m, "K": k, "N": n}, t_in, t, [], [f"x = {fn}(a, b)"],
                    2.0 * batch * m * n * k, float(batch * (m * k + k * n + m * n) * ctx.nbytes))
        return inputs, step, t
    # embedding lookup: integer indices (B, S) -> (B, S, D)
    dims = {"batch_size": c((4, 8, 16, 32)), "seq_len": c((32, 64, 128, 256, 512))}
    vocab, dim = c((1000, 5000, 10000, 32000)), c((64, 128, 256, 512, 768, 1024))
    names = [ctx.const(n, v, init=False) for n, v in dims.items()]
    vc, dc, a = ctx.const("num_embeddings", vocab), ctx.const("embedding_dim", dim), ctx.attr("embedding")
    rows = dims["batch_size"] * dims["seq_len"]
    t_in = T("seq", (dims["batch_size"], dims["seq_len"], 1), (names[0], names[1], None))
    t = T("seq", (dims["batch_size"], dims["seq_len"], dim), (names[0], names[1], dc))
    inputs = [{"name": "indices", "shape": list(dims.values()), "dtype": "int64",
               "expr": f"torch.randint(0, {vc}, ({names[0]}, {names[1]}))"}]
    step = Step("embedding", "gather", {"num_embeddings": vocab, "embedding_dim": dim}, t_in, t,
                [f"self.{a} = nn.Embedding({vc}, {dc})"], [f"x = self.{a}(indices)"], 0.0,
                float(rows * 8 + 2 * rows * dim * ctx.nbytes), weights=min(vocab, rows) * dim)
    return inputs, step, t


def _draw_op(ctx: Ctx, name: str, t: T) -> Step | None:
    return CATALOG[name](ctx, t)


def _try(seed: int, index: int, attempt: int) -> Program | None:
    rng = seeded_rng("kernelstrain-fused", seed, index, attempt)
    ctx = Ctx(rng, "bf16" if rng.random() < BF16_SHARE else "fp32")
    start = _weighted(rng, STARTS)
    length = _weighted(rng, LENGTHS)
    inputs, head, t = _start(ctx, start)
    steps = [head] if head else []
    saved = [(-1, t)] if head is None else [(0, t)]   # (after step j, type) a residual may add back
    skip_from = None
    while len(steps) < length:
        table = FIRST_OPS if not steps else WEIGHTS
        prev = steps[-1].op if steps else None
        for _ in range(12):   # a few draws for an operator that applies here
            name = _weighted(rng, table)
            if name == "residual_add":
                options = [j for j, st in saved if st == t and j < len(steps) - 1] if skip_from is None else []
                if not options:
                    continue
            elif name == prev and name not in CONTRACTIONS or (prev in NO_REPEAT and name in NO_REPEAT):
                continue
            elif name in CONTRACTIONS and sum(s.role in ("contraction", "attention") for s in steps) >= 3:
                continue
            step = _draw_op(ctx, name, t)
            if step is not None:
                if name == "residual_add":
                    skip_from = ctx.choice(options)
                    step.params["skip_from"] = skip_from
                break
        else:
            return None
        steps.append(step)
        t = step.t_out
        if t.numel > MAX_NUMEL:
            return None
        saved.append((len(steps) - 1, t))
    program = Program(seed, index, attempt, ctx.dtype, start, inputs, steps, skip_from, ctx)
    return program if _within_bounds(program) else None


def _within_bounds(p: Program) -> bool:
    flops = sum(s.flops for s in p.steps)
    nbytes = sum(s.bytes for s in p.steps)
    return (sum(s.role != "reshape" for s in p.steps) >= 2 and FLOPS_RANGE[0] <= flops <= FLOPS_RANGE[1] and BYTES_RANGE[0] <= nbytes <= BYTES_RANGE[1]
            and p.output.numel >= MIN_OUTPUT_NUMEL
            and all(math.prod(i["shape"]) <= MAX_NUMEL for i in p.inputs))


def compose(seed: int, index: int) -> Program:
    """Candidate `index` of the stream of `seed`: the first attempt that meets the bounds."""
    attempt = 0
    while True:
        program = _try(seed, index, attempt)
        if program is not None:
            return program
        attempt += 1
