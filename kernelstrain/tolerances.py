"""Every numerical tolerance the product applies or quotes, in one place. They are four tables
because there are four kinds of check, each measuring something different — not four guesses
at one number:

  FEEDBACK     (atol, rtol) of the torch.testing.assert_close a wrong_result's feedback text
               quotes (runtime_texts.mismatch_text): elementwise |out - ref| <= atol + rtol * |ref|,
               as a harness comparing against a PyTorch reference prints it.
  GPU_CHECK    gpu-check's scale-free classes (rtol per element, atol relative to the reference's
               RMS, a bound on the relative L2 error): what a candidate run on a real GPU must meet
               to count as correct, per output class, from measured noise (comments below). The
               agent workspaces' verify.py applies the same classes to dataset tasks.
  KERNELBENCH  KernelBench's own check, torch.allclose with atol = rtol: what a fused task's
               workspace and the KernelBench export apply, so results compare with KernelBench's.
  FUSED_COMPILED (atol relative to the RMS, rtol) of `tasks filter`'s check of a fused program
               under torch.compile against its eager run: two PyTorch paths of one program.

So bf16 is 2e-2 in FEEDBACK (a harness's allclose), 1.6e-2 per element plus 1e-3 of the RMS in
GPU_CHECK (bf16's ulp, measured on an H200), 1e-2 in KERNELBENCH (its published check) and 3e-2 of
the RMS in FUSED_COMPILED (inductor's reassociation of whole programs): each is what its own
check measures.

>>> FEEDBACK["bf16"], GPU_CHECK["bf16"]["rtol"], KERNELBENCH["bf16"], FUSED_COMPILED["bf16"]
((0.02, 0.02), 0.016, 0.01, (0.03, 0.03))
"""
from __future__ import annotations

# (atol, rtol) of the correctness check per output dtype, as a wrong_result's feedback quotes it
FEEDBACK = {"fp32": (1e-4, 1e-4), "fp16": (1e-2, 1e-2), "bf16": (2e-2, 2e-2), "fp8": (6e-2, 6e-2),
            "int8": (0.0, 0.0), "int": (0.0, 0.0)}
FEEDBACK_DEFAULT = (1e-2, 1e-2)

# Output tolerance classes. rtol: per element, relative to the reference value; atol_rel: per
# element, relative to the reference's RMS (scale-free); l2: bound on ||out - ref|| / ||ref||.
# 16-bit outputs of fp32 math differ from the reference by at most ~1 ulp of the output type
# (bf16: 2^-8..2^-7, fp16: 2^-11..2^-10). Quantized paths (int4 weights dequantized with a 16-bit
# multiply, fp8 tensor cores accumulating with reduced precision inside a 128-wide K block) add
# ~1e-3 of the output RMS, hence the larger atol_rel. Pure data movement must be bit exact.
# "row": atol_rel is relative to the larger of the row's RMS (last dim) and the whole output's, for
# outputs whose rows differ in scale by orders (causal attention rows, touched vs untouched
# rows); the floor keeps rows that are ~0 by cancellation (dq of the first causal query) sane.
GPU_CHECK = {
    "exact": {"rtol": 0.0, "atol_rel": 0.0, "l2": 0.0},
    "fp32": {"rtol": 1e-4, "atol_rel": 1e-5, "l2": 1e-5},
    "fp16": {"rtol": 1e-2, "atol_rel": 1e-3, "l2": 1e-2},
    "bf16": {"rtol": 1.6e-2, "atol_rel": 1e-3, "l2": 1e-2},
    "quant": {"rtol": 1.6e-2, "atol_rel": 1e-2, "l2": 1e-2},
    # attention: P (and dS in the backward) are rounded to 16 bits to feed the second tensor-core
    # product, as FlashAttention does (and the bf16 SDPA references do too): on the H200 every
    # correct bf16 kernel landed at ||err||/||ref|| <= 3.5e-3 (stable to ~2% across seeds and
    # variants; fp16 <= 4.4e-4), i.e. per-element noise of ~3e-3 of the row's RMS, whose 5-6 sigma
    # tail over ~1e7 elements reaches ~2e-2 of it. The l2 bound sits at 1.4x the worst correct
    # kernel: a bf16 accumulator (6.6e-3) fails it, a mask / scale / combine bug fails by far.
    "attn": {"rtol": 2e-2, "atol_rel": 3e-2, "l2": 5e-3, "row": True},
    # accumulation in the storage type: atomics add into a bf16/fp16 gradient, each add rounds,
    # and the order differs from the reference's index_add (a row hit k times: k roundings of a
    # value ~1.4, ~0.008 each, against a row RMS of ~1.2); untouched rows must stay bit exact
    "accum": {"rtol": 1.6e-2, "atol_rel": 2e-2, "l2": 1e-2, "row": True},
    # inclusive scans: outputs grow along the row (cumsum of 32000 values in [0, 1) reaches ~16000),
    # so an absolute floor tied to the RMS would hide errors of the small leading prefix sums;
    # fp32 partial sums in another order, rounded to bf16: within 1 ulp (2^-8) of the value
    "scan": {"rtol": 1.6e-2, "atol_rel": 1e-6, "l2": 1e-2},
    # x * (1/scale) instead of x / scale moves a value across an fp8 rounding boundary now and
    # then: one e4m3 step (<= 1/8 of the value) on a few elements
    "fp8q": {"rtol": 0.125, "atol_rel": 1e-3, "l2": 1e-2},
    # same for int8 (round half away from zero): +-1 on a few elements (RMS of q ~40: 0.03 of it)
    "int8q": {"rtol": 0.0, "atol_rel": 0.03, "l2": 1e-2},
    # one fp32 sum of N zero-mean values: it cancels to ~sqrt(N) times the summands, so reordering
    # the same fp32 adds moves it by ~eps * sqrt(N) of itself (3.1e-5 measured at N = 2^28, more
    # when a seed's sum lands near 0): KernelBench's fp32 rtol, not the elementwise 1e-5
    "sum": {"rtol": 1e-4, "atol_rel": 1e-4, "l2": 1e-4},
}

# KernelBench's correctness check: torch.allclose with atol = rtol = 1e-4 (fp32), 1e-2 (16-bit)
KERNELBENCH = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
KERNELBENCH_DEFAULT = 1e-2

# |compiled - eager| <= ATOL * rms(eager) + RTOL * |eager|, per element
FUSED_COMPILED = {"fp32": (1e-3, 1e-3), "bf16": (3e-2, 3e-2)}
