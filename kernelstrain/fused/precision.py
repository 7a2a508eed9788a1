"""Whether accumulating a reduction in bf16 (the half_accumulator bug) breaks a program's output
under KernelBench's tolerance: emulated on sampled values, element by element, as the hardware
rounds them.

The bug keeps a sum in the storage type: every addition is rounded to bf16 (8 significant bits).
How far that drifts depends on how many terms one accumulator takes in a row:
  CUDA row kernel    each thread sums its ceil(C / threads) terms in a bf16 register, the block
                     then combines the partials in fp32 (block_sum takes floats)
  Triton row kernel  tl.sum over a bf16 tile: each thread sums its BLOCK_C / (32 * warps) terms in
                     bf16, then the lanes and warps combine pairwise, each add rounded to bf16
  Triton GEMM        acc += tl.dot(a, b) in bf16: each BLOCK_K step's fp32 product rounded, then
                     added to the bf16 accumulator (K / BLOCK_K rounded adds)
Values are drawn from the magnitudes (magnitude.py) entering the step (randn inputs, PyTorch's
initialisations), carried through the elementwise steps after it, and compared, both rounded to
bf16 as stored, with torch.allclose's rule |y - ref| <= atol + rtol |ref|. A bug breaks the
output when the sampled share of failing elements predicts at least EXPECTED_FAILURES of the
whole output; where the output passes through a library call after the step (a GEMM mixes the
error with values not modelled here) the bug is not offered.

>>> bf16(1.0 + 2.0 ** -9), bf16(1.0 + 3.0 * 2.0 ** -9)      # ties to even, then up
(1.0, 1.0078125)
"""
from __future__ import annotations

import math
import random

from .exprs import ELEMENTWISE

KB_TOLERANCE = 1e-2            # KernelBench's atol = rtol for bf16 outputs
FP32_TOLERANCE = 1e-4          # ... and for fp32 ones
TF32_TERMS = 128               # products drawn for one output of a TF32 dot (the rest: their error scaled by sqrt(K / drawn))
EXPECTED_FAILURES = 5.0        # failing elements the whole output must be predicted to hold
SAMPLE_ROWS = 8                # rows drawn per row kernel (reductions: 3x as many, one output each)
SAMPLE_GEMM = 96               # output elements drawn per GEMM
SUM_PASSES = ("layer_norm", "rms_norm", "softmax", "log_softmax", "logsumexp", "sum", "mean")


def bf16(x: float) -> float:
    """x rounded to bfloat16's 8 significant bits, ties to even (as __float2bfloat16 and Triton's
    casts do; round() rounds halves to even)."""
    if x == 0.0 or not math.isfinite(x):
        return x
    m, e = math.frexp(x)
    return math.ldexp(round(math.ldexp(m, 8)), e - 8)


def tf32(x: float) -> float:
    """x rounded to TF32's 11 significant bits, ties to even: a tensor core's fp32 operand (round to
    nearest: the smaller error of the conversions the hardware may do; truncation errs more)."""
    if x == 0.0 or not math.isfinite(x):
        return x
    m, e = math.frexp(x)
    return math.ldexp(round(math.ldexp(m, 11)), e - 11)


def _sequential(terms: list) -> float:
    acc = 0.0
    for t in terms:
        acc = bf16(acc + t)
    return acc


def _pairwise(parts: list) -> float:
    while len(parts) > 1:
        parts = [bf16(parts[i] + parts[i + 1]) if i + 1 < len(parts) else parts[i] for i in range(0, len(parts), 2)]
    return parts[0]


def half_sum(terms: list, lanes: int, combine: str) -> float:
    """The sum of `terms` as `lanes` accumulators keep it in bf16 (lane t takes terms t, t + lanes, ...
    as a strided loop does), combined in fp32 ('float': a CUDA block_sum) or pairwise in bf16 ('tree':
    tl.sum of a tile cast to bf16, whose terms are rounded first)."""
    if combine == "tree":
        terms = [bf16(t) for t in terms]
    parts = [_sequential(terms[t::lanes]) for t in range(min(lanes, len(terms)))]
    return math.fsum(parts) if combine == "float" else _pairwise(parts)


def _elementwise(op: str, v: float, p: dict, draw) -> float:
    """One elementwise step on a value, in double precision (exprs' statements)."""
    if op in ("bias_add", "residual_add"):
        return v + draw()
    if op == "scale_param":
        return v * draw()
    if op == "relu":
        return max(v, 0.0)
    if op == "leaky_relu":
        return v if v > 0 else v * p["negative_slope"]
    if op in ("gelu",):
        return 0.5 * v * (1.0 + math.erf(v / math.sqrt(2.0)))
    if op in ("gelu_tanh", "new_gelu"):
        return 0.5 * v * (1.0 + math.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))
    if op == "quick_gelu":
        return v / (1.0 + math.exp(min(80.0, -1.702 * v)))
    if op == "silu":
        return v / (1.0 + math.exp(min(80.0, -v)))
    if op == "mish":
        return v * math.tanh(v if v > 20 else math.log1p(math.exp(v)))
    if op == "hardswish":
        return v * min(max(v + 3.0, 0.0), 6.0) / 6.0
    if op == "elu":
        return v if v > 0 else math.expm1(v)
    if op == "selu":
        return 1.0507009873554805 * (v if v > 0 else 1.6732632423543772 * math.expm1(v))
    if op == "softplus":
        return v if v > 20 else math.log1p(math.exp(v))
    if op == "sigmoid":
        return 1.0 / (1.0 + math.exp(min(80.0, -v)))
    if op == "tanh":
        return math.tanh(v)
    if op == "hardtanh":
        return min(max(v, p["min_val"]), p["max_val"])
    if op == "clamp":
        return min(max(v, p["clamp_min"]), p["clamp_max"])
    if op == "scale":
        return v * p["scale_factor"]
    if op == "divide":
        return v / p["divisor"]
    if op == "add_scalar":
        return v + p["add_value"]
    if op == "abs":
        return abs(v)
    raise ValueError(f"no elementwise rule for {op!r}")


def _row_outputs(op: str, row: list, total) -> list:
    """The row step's outputs from its row, `total(terms)` summing each sum pass (exact or buggy)."""
    C = len(row)
    if op in ("sum", "mean"):
        s = total(row)
        return [s / C if op == "mean" else s]
    if op == "layer_norm":
        mean = total(row) / C
        rstd = 1.0 / math.sqrt(max(total([(v - mean) ** 2 for v in row]) / C, 0.0) + 1e-5)
        return [(v - mean) * rstd for v in row]
    if op == "rms_norm":
        rstd = 1.0 / math.sqrt(max(total([v * v for v in row]) / C, 0.0) + 1e-6)
        return [v * rstd for v in row]
    m = max(row)
    s = total([math.exp(v - m) for v in row])
    if op == "softmax":
        return [math.exp(v - m) / s for v in row]
    if op == "log_softmax":
        return [v - m - math.log(s) for v in row]
    return [m + math.log(s)]            # logsumexp


def _fails(ref: float, got: float) -> bool:
    ref, got = bf16(ref), bf16(got)
    return not abs(got - ref) <= KB_TOLERANCE + KB_TOLERANCE * abs(ref)


def _tail(steps: list, after: int):
    """The elementwise steps from `after` to the output, or None where another kind of step follows."""
    tail = steps[after + 1:]
    return tail if all(s["op"] in ELEMENTWISE for s in tail) else None


def _through(tail: list, saved: dict, v_exact: float, v_half: float, rng: random.Random) -> tuple[float, float]:
    """Both values carried through the same tail steps (the same parameter and skip draws)."""
    for s in tail:
        mean, rms = saved.get(s["params"].get("skip_from", -1), (0.0, 1.0)) if s["op"] == "residual_add" else (0.0, 1.0)
        d = rng.gauss(mean, rms)
        v_exact = _elementwise(s["op"], v_exact, s["params"], lambda: d)
        v_half = _elementwise(s["op"], v_half, s["params"], lambda: d)
    return v_exact, v_half


def _verdict(failed: int, drawn: int, out_numel: int) -> bool:
    return drawn > 0 and failed / drawn * out_numel >= EXPECTED_FAILURES


def _saved(steps: list, mags: list) -> dict:
    """Magnitudes of each step's output (what a residual's skip tensor holds): the next step's input."""
    return {j: mags[j + 1] for j in range(len(steps) - 1)}


def row_breaks(steps: list, mags: list, r: int, C: int, lanes: int, combine: str, key: str) -> bool:
    """Whether the row step r, summing in bf16 over `lanes` accumulators, breaks the output (`key`
    seeds the draws: the program's id)."""
    tail = _tail(steps, r)
    if steps[r]["op"] not in SUM_PASSES or tail is None:
        return False
    rng = random.Random(f"half_accumulator/{key}/{r}/{lanes}/{combine}")
    mean, rms = mags[r]
    saved = _saved(steps, mags)
    per_row = steps[r]["op"] in ("sum", "mean", "logsumexp")
    failed = drawn = 0
    for _ in range(SAMPLE_ROWS * (3 if per_row else 1)):
        row = [bf16(rng.gauss(mean, rms)) for _ in range(C)]     # a bf16 tensor's values (fp32 prologues round less)
        exact = _row_outputs(steps[r]["op"], row, math.fsum)
        half = _row_outputs(steps[r]["op"], row, lambda t: half_sum(t, lanes, combine))
        for e, h in zip(exact, half):
            failed += _fails(*_through(tail, saved, e, h, rng))
            drawn += 1
    out_numel = math.prod(steps[-1]["out"]["shape"])
    return _verdict(failed, drawn, out_numel)


def gemm_breaks(steps: list, mags: list, head: int, K: int, block_k: int, weight_rms: float, key: str) -> bool:
    """Whether a GEMM step keeping its accumulator in bf16 (one rounded add per BLOCK_K step) breaks the
    output. Each step's fp32 product of BLOCK_K terms is drawn whole: a sum of BLOCK_K products of
    independent Gaussian-like values (the inputs' exact rounding changes both results alike)."""
    tail = _tail(steps, head)
    if tail is None:
        return False
    rng = random.Random(f"half_accumulator/{key}/{head}/{block_k}")
    mean, rms = mags[head]
    saved = _saved(steps, mags)
    failed = 0
    term_rms = math.sqrt(mean * mean + rms * rms) * weight_rms
    for _ in range(SAMPLE_GEMM):
        blocks = [rng.gauss(0.0, term_rms * math.sqrt(min(block_k, K - k))) for k in range(0, K, block_k)]
        exact = math.fsum(blocks)
        acc = 0.0
        for p in blocks:
            acc = bf16(acc + bf16(p))
        failed += _fails(*_through(tail, saved, exact, acc, rng))
    return _verdict(failed, SAMPLE_GEMM, math.prod(steps[-1]["out"]["shape"]))


def tf32_gemm_breaks(steps: list, mags: list, head: int, K: int, linear: bool, key: str) -> bool:
    """Whether an fp32 GEMM step computed by tl.dot at Triton's default input precision (TF32: every
    operand rounded to 11 significant bits, products summed in fp32) breaks the output under KernelBench's
    fp32 tolerance, against the reference's fp32 GEMM. Each output draws TF32_TERMS products of the
    step's input (magnitudes) and the weight (nn.Linear's uniform +-1/sqrt(K) init and bias; a matmul's
    randn operand), exact and with both operands rounded, the sums' error scaled to K terms."""
    tail = _tail(steps, head)
    if tail is None:
        return False
    rng = random.Random(f"tf32_dot/{key}/{head}")
    mean, rms = mags[head]
    saved = _saved(steps, mags)
    n = min(K, TF32_TERMS)
    scale = math.sqrt(K / n)
    bound = 1.0 / math.sqrt(K)
    failed = 0
    for _ in range(SAMPLE_GEMM):
        exact = err = 0.0
        for _ in range(n):
            a = rng.gauss(mean, rms)
            b = rng.uniform(-bound, bound) if linear else rng.gauss(0.0, 1.0)
            exact += a * b
            err += tf32(a) * tf32(b) - a * b
        bias = rng.uniform(-bound, bound) if linear else 0.0
        exact = exact * scale + bias
        ref, got = _through(tail, saved, exact, exact + err * scale, rng)
        failed += not abs(got - ref) <= FP32_TOLERANCE + FP32_TOLERANCE * abs(ref)
    return _verdict(failed, SAMPLE_GEMM, math.prod(steps[-1]["out"]["shape"]))
