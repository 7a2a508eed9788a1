"""Programs a trivial kernel solves, found from the program alone (the execution filter checks the
real output too: execute.kb_trivial).

- a no-op step: an operator that cannot change what the step before it produced (relu after
  softplus, sigmoid or softmax; a clamp wider than a sigmoid's range ...): the task teaches nothing
  the shorter program does not;
- an output constant by construction: the sum of a softmax along its own dim is 1 everywhere (its
  mean 1/C), logsumexp of a log_softmax 0, the sum of a layer norm's row 0;
- an output within KernelBench's tolerance of zero or of one constant, as values.py emulates the
  program's values (with a margin: the emulation is an estimate): saturated activations and clamps,
  a row's extreme at a clamp's bound or an activation's minimum, vanishing softmaxes, tiny scales.

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
from .magnitude import magnitudes
from .values import emulate, trivial

NONNEGATIVE = ("relu", "abs", "softplus", "sigmoid", "softmax")      # outputs >= 0
UNIT_RANGE = ("sigmoid", "softmax")                                   # outputs in [0, 1]
IDENTITY_ON_NONNEGATIVE = ("relu", "abs", "leaky_relu", "elu")
KB_ATOL = {"fp32": 1e-4, "bf16": 1e-2}     # KernelBench's tolerance (rtol alike)
TRIVIAL_MARGIN = 2.0                       # an emulated output within twice the tolerance of 0 or a constant: the emulation is an estimate


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


# elementwise steps through which a layer norm's row (sum 0, sum of squares C) keeps a fixed sum: at most
# quadratic in it -- a scalar scale or shift, a per-channel bias (its sum over the row is the bias's), hardswish
# (x (x + 3) / 6 within +-3, where a normed row lies): seed 0's fused_s0_06396 (layer_norm -> scale -> hardswish ->
# sum) passed a constant kernel on the CPU (fused_trivial.py --all-tasks --part 1/5, 2026-12-05)
NORMED_ROW_QUADRATIC = ROW_MEAN_KEEPERS + ("add_scalar", "bias_add", "hardswish")


# activations that are a smooth function of p = exp(x) (a log_softmax's values are log p), by the size of their p^2
# term: sigmoid(log p) = p / (1 + p) = p - p^2 + ..., tanh(log p) = (p^2 - 1) / (p^2 + 1) = -1 + 2 p^2 - ...,
# softplus(log p) = log(1 + p) = p - p^2 / 2 + ...
EXP_SMOOTH = {"sigmoid": 1.0, "tanh": 2.0, "softplus": 0.5}
SCALAR_STEPS = ("scale", "divide", "add_scalar")
SPREAD_SIGMAS = 3.0        # rows' sums that lie within this many of their sd of each other: "the same in every row"


def _log_rows(program: list, atol: float) -> str | None:
    """A sum (mean) along a log_softmax's dim of h(log p) = a C + b + c sum p^2 + ... (EXP_SMOOTH, then scalar steps):
    for logits of sd s (magnitude.py), sum p^2 is about e^(s^2) / C in a row, spread across rows by a factor
    sqrt((e^(4 s^2) - 1) / C) of it; where SPREAD_SIGMAS of that spread fit twice KernelBench's tolerance, every row
    sums to the same value (fused_s0_10287: embedding -> scale 0.1 -> log_softmax -> sigmoid -> sum is 1 - sum p^2,
    a constant kernel passed). Large logits (a bmm's, s ~ sqrt(K)) leave rows dominated by one p: kept."""
    mags = None
    for i, s in enumerate(program[:-2]):
        if s["op"] != "log_softmax" or program[i + 1]["op"] not in EXP_SMOOTH:
            continue
        dim, j, slope = s["params"].get("dim", -1), i + 2, EXP_SMOOTH[program[i + 1]["op"]]
        while j < len(program) and program[j]["op"] in SCALAR_STEPS:
            p = program[j]["params"]
            slope *= abs(p.get("scale_factor", 1.0)) / abs(p.get("divisor", 1.0))
            j += 1
        if j == len(program) or program[j]["op"] not in ("sum", "mean") or program[j]["params"].get("dim") != dim:
            continue
        mags = mags or magnitudes(program)
        C, sd = s["in"]["shape"][dim], mags[i][1]
        if sd * sd > 50.0:          # e^(4 s^2) past any float: rows far from uniform
            continue
        spread = slope * math.exp(sd * sd) / C * math.sqrt(math.expm1(4.0 * sd * sd) / C)
        if program[j]["op"] == "mean":
            spread /= C
        if SPREAD_SIGMAS * spread <= TRIVIAL_MARGIN * atol:
            return (f"constant_output: {program[j]['op']} of a log_softmax's rows (logits of sd {sd:.2g}) along their dim "
                    f"through {' -> '.join(p['op'] for p in program[i + 1:j])} is the same in every row "
                    f"(+- {SPREAD_SIGMAS * spread:.2g})")
    return None


def _reduced_rows(program: list) -> str | None:
    """A row reduction (sum, mean) along the dim of a row op whose rows have fixed statistics, through
    elementwise steps that keep its value fixed: a layer norm's rows (sum 0, sum of squares C) through
    at most quadratic steps; a softmax's rows (sum 1, every value in (0, 1)) through any elementwise
    steps, f(p) summed over a row being C f(0) + f'(0) + O(sum p^2) (fused_s0_02781: softmax -> new_gelu ->
    sum passed a constant kernel). The output is the same in every row, or nearly."""
    for i, s in enumerate(program):
        if s["op"] not in ("layer_norm", "softmax"):
            continue
        dim = s["params"].get("dim", -1)
        keep = NORMED_ROW_QUADRATIC if s["op"] == "layer_norm" else ELEMENTWISE
        j = i + 1
        while j < len(program) and program[j]["op"] in keep and program[j]["params"].get("dim", dim) == dim:
            j += 1
        if j < len(program) and program[j]["op"] in ("sum", "mean") and program[j]["params"].get("dim") == dim:
            return (f"constant_output: {program[j]['op']} of a {s['op']}'s rows along their dim through "
                    f"{' -> '.join(p['op'] for p in program[i + 1:j]) or 'no step'} is the same in every row")
    return None


# steps through which every (sample, channel) slice of an instance norm's output keeps a mean that is one
# constant per channel: scalar and per-channel scales and shifts (a per-channel parameter's shape is [C, 1, ...]);
# a group norm of slices that all average 0 (its groups' means are 0: each slice then averages its bias, 0 as
# nn.GroupNorm starts) -- SLICE_ZERO keep the mean 0 itself
SLICE_ZERO = ("scale", "divide", "scale_param")
SLICE_FIXED = SLICE_ZERO + ("add_scalar", "bias_add")


def _per_channel(step: dict) -> bool:
    shape = step["params"].get("shape")
    return shape is None or all(d == 1 for d in shape[1:])


def _spatial_mean(step: dict) -> bool:
    """A step that averages (or sums) each (sample, channel) slice over all its positions."""
    if step["op"].startswith("adaptive_avg_pool"):
        return step["params"].get("output_size") == 1
    dims = step["params"].get("dim")
    return step["op"] in ("mean", "sum") and isinstance(dims, list) and sorted(dims) == list(range(2, len(step["in"]["shape"])))


def _slice_means(program: list) -> str | None:
    """An instance norm leaves every (sample, channel) slice averaging 0 (nn.InstanceNorm keeps no affine); through
    SLICE_FIXED steps each slice's mean stays one constant per channel, so a spatial mean of them (a global average
    pool) is the same for every input (fused_s0_10908: instance_norm -> scale_param -> group_norm ->
    adaptive_avg_pool2d is 0 everywhere, a zeros kernel passed)."""
    for i, s in enumerate(program):
        if s["op"] != "instance_norm":
            continue
        zero = True
        for step in program[i + 1:]:
            if _spatial_mean(step):
                return (f"constant_output: the spatial {step['op']} of an instance norm's slices through "
                        f"{' -> '.join(p['op'] for p in program[i + 1:program.index(step)]) or 'no step'} "
                        "is one constant per channel whatever the input")
            if step["op"] == "group_norm" and zero:
                continue
            if step["op"] not in SLICE_FIXED or not _per_channel(step):
                break
            zero = zero and step["op"] in SLICE_ZERO
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
    fixed = _reduced_rows(program) or _slice_means(program)
    if fixed:
        return fixed
    if dtype is not None and "in" in program[0]:
        tol = KB_ATOL[dtype]
        fixed = _log_rows(program, tol)
        if fixed:
            return fixed
        for sample in emulate(program):
            kind = trivial(sample, tol, TRIVIAL_MARGIN, math.prod(program[-1]["out"]["shape"]))
            if kind == "zeros":
                return (f"vanishing_output: every emulated value within {TRIVIAL_MARGIN:g}x KernelBench's "
                        f"atol {tol:g} of 0 (largest |y| {max(abs(v) for v in sample.v):.2g})")
            if kind == "constant":
                return (f"constant_output: every emulated value within {TRIVIAL_MARGIN:g}x KernelBench's "
                        f"tolerance of {sample.v[len(sample.v) // 2]:.3g}")
    return None
