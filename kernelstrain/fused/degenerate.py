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

from .magnitude import magnitudes

NONNEGATIVE = ("relu", "abs", "softplus", "sigmoid", "softmax")      # outputs >= 0
UNIT_RANGE = ("sigmoid", "softmax")                                   # outputs in [0, 1]
IDENTITY_ON_NONNEGATIVE = ("relu", "abs", "leaky_relu", "elu")
KB_ATOL = {"fp32": 1e-4, "bf16": 1e-2}     # KernelBench's tolerance (rtol alike)
VANISH_MARGIN = 0.1                        # an output whose estimated magnitude is under 10% of atol


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
    if dtype is not None and "in" in program[0]:
        mean, rms = magnitudes(program + [{"op": "output", "role": "output", "params": {}, "in": program[-1]["out"]}])[-1]
        tol = KB_ATOL[dtype]
        if abs(mean) + 3.0 * rms < VANISH_MARGIN * tol:
            return f"vanishing_output: estimated |y| {abs(mean) + 3.0 * rms:.2g} under KernelBench's atol {tol:g}"
        if 3.0 * rms < VANISH_MARGIN * (tol + tol * abs(mean)):
            return (f"constant_output: estimated spread {3.0 * rms:.2g} about {mean:.3g}, under KernelBench's "
                    f"tolerance there")
    return None
