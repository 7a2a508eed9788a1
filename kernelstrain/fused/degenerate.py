"""Programs a trivial kernel solves, found from the program alone (the execution filter checks the
real output too: execute.kb_trivial).

- a no-op step: an operator that cannot change what the step before it produced (relu after
  softplus, sigmoid or softmax; a clamp wider than a sigmoid's range ...): the task teaches nothing
  the shorter program does not;
- an output constant by construction: the sum of a softmax along its own dim is 1 everywhere (its
  mean 1/C), logsumexp of a log_softmax 0, the sum of a layer norm's row 0; or saturated: a clamp,
  sigmoid or tanh whose input lies past one end of its range (magnitude.py's estimate);
- an output that vanishes under KernelBench's tolerance (magnitude.py's estimate far below it):
  a kernel writing zeros passes.

>>> reason([{"op": "softplus", "params": {}}, {"op": "relu", "params": {}}])
'noop_chain: relu after softplus changes nothing'
>>> reason([{"op": "softmax", "params": {"dim": -1}}, {"op": "sum", "params": {"dim": -1, "keepdim": True}}]) is not None
True
>>> reason([{"op": "relu", "params": {}}, {"op": "tanh", "params": {}}]) is None
True
"""
from __future__ import annotations

import math

from .exprs import ELEMENTWISE
from .magnitude import beyond, magnitudes
from .precision import _elementwise

NONNEGATIVE = ("relu", "abs", "softplus", "sigmoid", "softmax")      # outputs >= 0
UNIT_RANGE = ("sigmoid", "softmax")                                   # outputs in [0, 1]
IDENTITY_ON_NONNEGATIVE = ("relu", "abs", "leaky_relu", "elu")
KB_ATOL = {"fp32": 1e-4, "bf16": 1e-2}     # KernelBench's tolerance (rtol alike)
VANISH_MARGIN = 0.5                        # an output whose estimated magnitude (or spread) is under half the tolerance: a trivial kernel nearly passes, and the estimate is rough


def _noop(prev: dict, step: dict) -> bool:
    a, b, p = prev["op"], step["op"], step["params"]
    if a in NONNEGATIVE and b in IDENTITY_ON_NONNEGATIVE:
        return True
    if a in UNIT_RANGE and b in ("hardtanh", "clamp"):
        lo, hi = p.get("min_val", p.get("clamp_min")), p.get("max_val", p.get("clamp_max"))
        return lo <= 0.0 and hi >= 1.0
    return False


# a reduction of a row op's output along the row op's own dim that is the same for every row: a softmax
# sums to 1 (its mean is 1/C), a log_softmax's logsumexp is 0, a layer norm's row (weight 1, bias 0 as
# nn.LayerNorm starts) sums to 0
CONSTANT_REDUCTIONS = (("softmax", "sum"), ("softmax", "mean"), ("log_softmax", "logsumexp"),
                       ("layer_norm", "sum"), ("layer_norm", "mean"))


# steps that keep every row's mean 0 along the row's dim: a per-row scale (an RMS norm of the same
# row, weight 1 as it starts) or a scalar one
ROW_MEAN_KEEPERS = ("rms_norm", "scale", "divide")


def _zero_mean_reduced(program: list) -> str | None:
    """A layer norm's rows (mean 0), scaled per row, then summed or averaged along the same dim: 0."""
    for i, s in enumerate(program):
        if s["op"] != "layer_norm":
            continue
        dim = s["params"].get("dim", -1)
        j = i + 1
        while j < len(program) and program[j]["op"] in ROW_MEAN_KEEPERS \
                and program[j]["params"].get("dim", dim) == dim:
            j += 1
        if j < len(program) and program[j]["op"] in ("sum", "mean") and program[j]["params"].get("dim") == dim:
            return f"constant_output: {program[j]['op']} of a layer_norm's rows (mean 0) along their dim is 0"
    return None


# elementwise steps that keep a clamp's bound an extreme of the row (increasing maps)
MONOTONE = ("scale", "divide", "add_scalar", "relu", "sigmoid", "tanh", "hardtanh", "clamp")
HITS = 20.0        # values of a row expected at the bound: then every row's max (min) is the bound


def _extreme_of_clamped(program: list, mags: list) -> str | None:
    """A clamp (hardtanh, clamp, relu) that many values of each row reach, then through increasing steps
    to the row's max (min) at that bound: every row's extreme is the bound -- a constant."""
    for i, s in enumerate(program):
        op, p = s["op"], s["params"]
        if op not in ("hardtanh", "clamp", "relu"):
            continue
        lo = 0.0 if op == "relu" else p.get("min_val", p.get("clamp_min"))
        hi = None if op == "relu" else p.get("max_val", p.get("clamp_max"))
        j = i + 1
        while j < len(program) and program[j]["op"] in MONOTONE and \
                not (program[j]["op"] in ("scale", "divide") and program[j]["params"].get("scale_factor",
                                                                                     program[j]["params"].get("divisor", 1)) <= 0):
            j += 1
        if j == len(program) or program[j]["op"] not in ("amax", "amin"):
            continue
        red = program[j]
        C = red["in"]["shape"][red["params"]["dim"]]
        m, r = mags[i]
        upper = red["op"] == "amax"
        bound = hi if upper else lo
        if bound is not None and beyond(m, r, bound, upper) * C >= HITS:
            return f"constant_output: every row's {red['op']} is the {op}'s bound {bound:g}"
    return None


# activations with one global minimum (x0, f(x0), f''(x0)), found numerically: a row's min of many of
# their values sits at f(x0) as closely as the nearest input lies to x0
DIPPING = ("gelu", "gelu_tanh", "new_gelu", "silu", "mish", "quick_gelu", "hardswish")


def _dip(op: str) -> tuple[float, float, float]:
    f = lambda x: _elementwise(op, x, {}, None)       # noqa: E731 - these ops draw no parameter
    lo, hi = -4.0, 0.0
    for _ in range(80):                                # golden-section search: f is unimodal on [-4, 0]
        a, b = hi - 0.618 * (hi - lo), lo + 0.618 * (hi - lo)
        lo, hi = (lo, b) if f(a) < f(b) else (a, hi)
    x0, h = (lo + hi) / 2, 1e-3
    return x0, f(x0), (f(x0 + h) - 2 * f(x0) + f(x0 - h)) / (h * h)


DIPS = {op: _dip(op) for op in DIPPING}
AFTER_CONSTANT = frozenset(ELEMENTWISE) - {"bias_add", "scale_param", "residual_add"}


def _min_at_dip(program: list, mags: list, tol: float) -> str | None:
    """A row's min of a dipping activation's values (through increasing steps), then only scalar
    elementwise steps: when the row's nearest input to the dip lies close enough, every row's min is
    the dip within the tolerance -- a constant output."""
    for i, s in enumerate(program):
        if s["op"] not in DIPS:
            continue
        x0, low, curve = DIPS[s["op"]]
        factor, j = 1.0, i + 1
        while j < len(program) and program[j]["op"] in MONOTONE + DIPPING:
            op, p = program[j]["op"], program[j]["params"]
            if op in DIPS and DIPS[op][0] > low:
                break                                  # not increasing over the values it gets
            factor *= p.get("scale_factor", 1.0) / p.get("divisor", 1.0) if op in ("scale", "divide") else 1.0
            low = _elementwise(op, low, p, None)
            j += 1
        if j == len(program) or program[j]["op"] != "amin" or factor <= 0:
            continue
        if any(t["op"] not in AFTER_CONSTANT for t in program[j + 1:]):
            continue
        m, r = mags[i]
        C = program[j]["in"]["shape"][program[j]["params"]["dim"]]
        density = math.exp(-0.5 * ((x0 - m) / r) ** 2) / (r * math.sqrt(2 * math.pi)) if r > 0 else 0.0
        if density * C < 1.0:
            continue
        gap = 1.0 / (2.0 * C * density)               # the nearest of C values to x0, typically
        spread = 0.5 * curve * gap * gap * abs(factor)
        if spread < VANISH_MARGIN * (tol + tol * abs(low)):
            return (f"constant_output: every row's amin of {s['op']} sits at its minimum {low:.3g} "
                    f"(within {spread:.1g})")
    return None


def _constant(prev: dict, step: dict) -> bool:
    same_dim = prev["params"].get("dim", -1) == step["params"].get("dim")
    return same_dim and (prev["op"], step["op"]) in CONSTANT_REDUCTIONS


def reason(program: list, dtype: str | None = None) -> str | None:
    """Why a program is degenerate (module docstring), or None. `dtype` enables the vanishing check."""
    for prev, step in zip(program, program[1:]):
        if _noop(prev, step):
            return f"noop_chain: {step['op']} after {prev['op']} changes nothing"
        if _constant(prev, step):
            return f"constant_output: {step['op']} of a {prev['op']} along its dim is the same everywhere"
    zero = _zero_mean_reduced(program) or (_extreme_of_clamped(program, magnitudes(program)) if "in" in program[0] else None)
    if zero is None and dtype is not None and "in" in program[0]:
        zero = _min_at_dip(program, magnitudes(program), KB_ATOL[dtype])
    if zero:
        return zero
    if dtype is not None and "in" in program[0]:
        mean, rms = magnitudes(program + [{"op": "output", "role": "output", "params": {}, "in": program[-1]["out"]}])[-1]
        tol = KB_ATOL[dtype]
        if abs(mean) + 3.0 * rms < VANISH_MARGIN * tol:
            return f"vanishing_output: estimated |y| {abs(mean) + 3.0 * rms:.2g} under KernelBench's atol {tol:g}"
        if 3.0 * rms < VANISH_MARGIN * (tol + tol * abs(mean)):
            return (f"constant_output: estimated spread {3.0 * rms:.2g} about {mean:.3g}, under KernelBench's "
                    f"tolerance there")
    return None
