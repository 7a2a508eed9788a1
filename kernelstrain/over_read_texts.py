"""What a no_bounds_check spoils, rung by rung: the CUDA rungs whose loop runs past its row (ops/over_read's
UNBOUNDED_LOOP: rmsnorm / add_rmsnorm / layernorm vectorized_uint4, fp8_quant warp_shuffle_vectorized) and
causal_conv1d thread_per_output's taps read before the row's start. Each model follows what the loop does with
the values past the row, and is checked against the H100's first runs of every offered shape x configuration
extremes, each case in a fresh process (labels j2, session 12: measurements/h100_label_device.json s12_j2;
tests/test_label_truth_over_read.py), counted there under gpu-check's tolerances and here under the harness's.

- rmsnorm: the extra pass WRITES row r + 1's head (x[r + 1] * inv_rms[r] * the values past the weight): values
  of their own over the first min(past, D) columns of rows 1..T-1, landing after row r + 1's own write in 75-100%
  of them where the pass runs after the row's (its own pass), 20-90% where it runs beside the next block's.
  What lies past the weight read as randn-sized values where x sits in the caching allocator's small pool (T 64
  D 4096: rel_l2 0.49-1.0 = sqrt(2 x the share)) and non-finite ones where x is in its large pool (T >= 2048:
  rel_l2 inf at every configuration).
- add_rmsnorm: the extra pass adds the next row's x + residual into row r's sum of squares: all of row r's y off
  by one factor, 1 - sqrt(D / (D + q past)), q 1 where the pass runs beside the next block (the H100's y rel_l2
  0.293 / 0.209 / 0.501 at T 64 D 4096, T 8192 D 5120, T 2048 D 2048 equal it to 3 digits), up to 2.5 where the
  next row's residual may already hold x added twice (its own pass).
- layernorm: the statistics take past more values: the mean and the rstd off by N(0, sqrt(past / (D (D + past))))
  and half that, every y element off by sqrt(1.5 past / (D (D + past))) of the scale (rel_l2 0.0113 at D 4096
  past 2048, 0.0272 at D 1024 past 1024, 0.0355 at D 1024 past 7168: the formula's 0.0110, 0.0271, 0.0358).
- fp8_quant: the absmax takes the next row's first `past` values: a row's scale grows where one of them beats
  its own max (P = past / (D + past)), and every code of that row moves where x / scale crosses a rounding step:
  q's bytes, compared exactly. The last row reads past x: from T 4096 (and at T 512 with 1024 threads) what lies
  there made its scale ~1e33 (rel_l2 of the scales 1e33-1e35), every code of that row 0.
- causal_conv1d: the first 3 outputs of every (b, d) row take the previous row's last values for the zero padding.
"""
from __future__ import annotations

import functools
import math
import random
from statistics import NormalDist

from .ops.over_read import UNBOUNDED_LOOP, extra_pass_later, past_row
from .runtime_texts import _extreme, _out_of_tolerance
from .tolerances import FEEDBACK, FEEDBACK_DEFAULT

UNBOUNDED = {"loop": UNBOUNDED_LOOP}     # the four uint4 rungs' edit
GARBAGE_REL = math.sqrt(2)      # x * inv_rms * (a randn-sized value in the weight's place): sqrt(1 + 1) of the scale
LARGE_POOL = 1 << 20            # the caching allocator serves requests of 1 MiB and more from its large pool
LANDED_OWN_PASS = (0.75, 1.0)   # the H100's share of the overwritten head that stayed wrong (s12_j2: 0.754-1.0)
LANDED_BESIDE = (0.2, 0.9)      # (0.21-0.87)
CONV_TAPS = 3                   # causal_conv1d's width - 1: the outputs whose window starts before the row


def site(op: str, tag: str, edit, task, params: dict) -> tuple | None:
    """runtime_texts' site of a no_bounds_check, or None where this rung's is not modelled here."""
    if op == "causal_conv1d" and tag == "thread_per_output" and edit == {"bounded": False}:
        return ("first_cols", CONV_TAPS, *_conv_spoil(task.dtype))
    if edit != UNBOUNDED or "threads" not in params:
        return None
    d, past = task["D"], past_row(task["D"], params["threads"])
    if op == "rmsnorm":
        nonfinite = task["T"] * d * 2 >= LARGE_POOL
        lo, hi = LANDED_OWN_PASS if extra_pass_later(d, params["threads"]) else LANDED_BESIDE
        return ("head", task["T"] - 1, past, lo, hi, GARBAGE_REL, nonfinite)
    if op == "add_rmsnorm":
        q = 2.5 if extra_pass_later(d, params["threads"]) else 1.0
        return ("rescaled", 1 - math.sqrt(d / (d + past)), 1 - math.sqrt(d / (d + q * past)))
    if op == "layernorm":
        return ("unscaled", math.sqrt(1.5 * past / (d * (d + past))))
    return None


# -- causal_conv1d: the padding read from the row before --------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _conv_spoil(dtype: str) -> tuple[float, float]:
    """(share of the first 3 outputs out of the harness's tolerance, RMS of their error over the output's) on the
    harness's inputs (x randn, w 0.5 randn, bias randn): output t < 3 adds w[k] x_prev for its 3 - t taps before the
    row, through the silu. 6,000 draws of a fixed RNG (at gpu-check's bf16 tolerance 0.907 of them; the H100:
    0.909-0.912).

    >>> [round(v, 2) for v in _conv_spoil("fp16")], [round(v, 2) for v in _conv_spoil("bf16")]
    ([0.83, 0.6], [0.74, 0.6])
    """
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    return conv_first_outputs(random.Random("conv_first_outputs"), 2000, lambda ref: atol + rtol * abs(ref))


def _silu(v: float) -> float:
    return v / (1 + math.exp(-v)) if v > -60 else 0.0


def conv_first_outputs(rng, draws: int, allowed) -> tuple[float, float]:
    """(share failing `allowed`, RMS error over the output's RMS) of outputs t = 0, 1, 2 whose padding holds the
    previous row's values."""
    bad, err2, ref2, n = 0, 0.0, 0.0, 0
    for _ in range(draws):
        w = [0.5 * rng.gauss(0, 1) for _ in range(4)]
        b = rng.gauss(0, 1)
        x = [rng.gauss(0, 1) for _ in range(6)]      # 3 values of the row before, then the row's first 3
        for t in range(CONV_TAPS):
            window = range(t, t + 4)                 # x[t - 3 + k] for k < 4, offset by the 3 before
            ref = _silu(b + sum(w[k] * x[i] for k, i in enumerate(window) if i >= 3))
            got = _silu(b + sum(w[k] * x[i] for k, i in enumerate(window)))
            bad += abs(got - ref) > allowed(ref)
            err2, ref2, n = err2 + (got - ref) ** 2, ref2 + ref * ref, n + 1
    return bad / n, math.sqrt(err2 / ref2)


# -- fp8_quant: requantized rows --------------------------------------------------------------------------------
STEPS_PER_SHIFT = 11.5   # e4m3 keeps 3 mantissa bits: values x / s move a code where a shift of d' of them crosses a
                         # rounding step, ~11.5 d' of them (8-16 steps an octave; torch's e4m3 casts: 11.5-11.6)
_HALF = NormalDist()


def _half_cdf(m: float) -> float:
    return 2 * _HALF.cdf(m) - 1


def requantized_share(d: int, past: int, rng, draws: int = 64) -> tuple[float, float, float]:
    """(share of a moved row's codes that move, P a row's scale grows, P a moved row has codes two steps off),
    fp8_quant's over-read: the row's max M over d values and the overall max M' over d + past lying past it
    (P = past / (d + past)); its values shrink by d' = 1 - M / M', a share min(1, 11.5 d') of its codes move a step,
    and some two where d' passes 1/16 (a code's step is 1/16-1/8 of it). Moved rows drawn by their order
    statistics (M given M < M'); torch's e4m3 casts of randn rows: tests/test_label_truth_over_read.py."""
    moved, total, two = past / (d + past), 0.0, 0
    for _ in range(draws):
        top = _extreme(d + past, rng.random())
        own = _HALF.inv_cdf((1 + _half_cdf(top) * rng.random() ** (1 / d)) / 2)
        total += min(1.0, STEPS_PER_SHIFT * (1 - own / top))
        two += 1 - own / top > 1 / 16
    return total / draws, moved, two / draws


def _e4m3_code(v: float) -> int:
    """The e4m3 code (0-126) of v >= 0 below 448, rounded to nearest."""
    if v < 2 ** -6:
        return round(v * 512)
    e = math.floor(math.log2(v))
    m = round((v / 2 ** e - 1) * 8)
    return (e + 7) * 8 + m


GARBAGE_PAST_X = 16 << 20   # x's bytes from which the last row's scale read garbage (~1e33): every H100 case of
                            # 32 MiB and more, 1 of 3 at 5 MiB (the one reaching 3,072 values past), none at 0.5 MiB


def fp8_text(shape: tuple, d: int, past: int, garbage_last: bool, rng) -> str:
    """assert_close's AssertionError for fp8_quant's q bytes (compared exactly) after the over-read: codes move by
    one step in the rows whose scale grew (two where it grew past 1/8 of a step), each byte's relative difference
    1 / its code (1.0 at a code 1); with garbage past x, the last row's codes all 0: a difference of its max code,
    126 (448)."""
    own = random.Random(f"mismatch:no_bounds_check:fp8:{rng.getrandbits(64)}")
    t, numel = shape[0], math.prod(shape)
    changed, moved, two = requantized_share(d, past, own)
    rows = t - 1 if garbage_last else t
    bad = max(1, round(rows * d * moved * changed + (d if garbage_last else 0)))
    rows_moved = max(1, round(rows * moved))
    code = max(1, _e4m3_code(448 * _smallest_changed(bad, own) / _extreme(d, own.random())))
    step = 2 if own.random() < 1 - (1 - two) ** rows_moved else 1
    at_rel = (rng.randrange(t), rng.randrange(d))
    if garbage_last:
        diff, at_abs = 126, (t - 1, rng.randrange(d))
        rel, at_rel = 1.0, (t - 1, rng.randrange(min(4, d)))     # its first positive byte, 0 now
    else:
        diff, at_abs, rel = step, (rng.randrange(t), rng.randrange(d)), 1.0 / code
    return (f"AssertionError: Tensor-likes are not equal!\n\nMismatched elements: {bad} / {numel} "
            f"({bad / numel:.1%})\nGreatest absolute difference: {diff} at index {at_abs}\n"
            f"Greatest relative difference: {rel} at index {at_rel}")


def _smallest_changed(bad: int, rng) -> float:
    """|x| of the smallest-magnitude input among `bad` moved codes (half-normal order statistic)."""
    p = max(1 - (1 - rng.random()) ** (1 / max(bad, 1)), 1e-300)
    return _HALF.inv_cdf(0.5 + p / 2) if p > 1e-12 else p * math.sqrt(math.pi / 2)
