"""What the harness prints when a candidate builds but fails at run time: a launch the runtime
refuses or a kernel that faults, as PyTorch raises them (torch.AcceleratorError from
c10_cuda_check_implementation, as an H200 printed one: measurements/h200_gpucheck_s5151.json), an
MI300X's HSA memory-access fault, and a wrong result as torch.testing.assert_close reports it.

The free choices (which element, how far off) come from the caller's `wording` RNG only.
"""
from __future__ import annotations

import math
import struct
from statistics import NormalDist

from .tolerances import FEEDBACK, FEEDBACK_DEFAULT


# cudaGetErrorString -> the error's name; those in _ASYNC are reported asynchronously (a kernel's own fault)
_ERROR_NAMES = {"an illegal memory access was encountered": "ErrorIllegalAddress",
                "unspecified launch failure": "ErrorLaunchFailure",
                "invalid argument": "ErrorInvalidValue",
                "invalid configuration argument": "ErrorInvalidConfiguration",
                "too many resources requested for launch": "ErrorLaunchOutOfResources",
                "misaligned address": "ErrorMisalignedAddress",
                "an illegal instruction was encountered": "ErrorIllegalInstruction"}
_ASYNC = ("ErrorIllegalAddress", "ErrorLaunchFailure", "ErrorMisalignedAddress", "ErrorIllegalInstruction")
_HELP_URL = {"cuda": "https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html",
             "hip": "https://rocm.docs.amd.com/projects/HIP/en/latest/index.html"}


def accelerator_error(what: str, hip: bool) -> str:
    """A CUDA/HIP error as PyTorch raises it (c10/cuda/CUDAException.cpp, CUDAMiscFunctions.cpp).

    >>> print(accelerator_error("invalid argument", hip=False))
    torch.AcceleratorError: CUDA error: invalid argument
    Search for `cudaErrorInvalidValue' in https://docs.nvidia.com/cuda/cuda-runtime-api/group__CUDART__TYPES.html for more information.
    For more detailed error information, run with CUDA_LOG_FILE=stderr
    Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.
    """
    api, rt = ("hip", "HIP") if hip else ("cuda", "CUDA")
    name = _ERROR_NAMES[what]
    if name in _ASYNC:
        suffix = (f"{rt} kernel errors might be asynchronously reported at some other API call, so the stacktrace "
                  f"below might be incorrect.\nFor debugging consider passing "
                  f"{'AMD_SERIALIZE_KERNEL=3' if hip else 'CUDA_LAUNCH_BLOCKING=1'}")
    else:
        suffix = "For more detailed error information, run with CUDA_LOG_FILE=stderr"
    return (f"torch.AcceleratorError: {rt} error: {what}\nSearch for `{api}{name}' in {_HELP_URL[api]} for more "
            f"information.\n{suffix}\nCompile with `TORCH_USE_{rt}_DSA` to enable device-side assertions.")


def fault_text(bug: str, hip: bool, rng) -> str:
    """A kernel that crashes. On an MI300X an access outside every allocation often kills the
    process from the HSA runtime before PyTorch sees an error (a 47-bit user address, page aligned;
    the agent handle a heap pointer; GPU nodes 2-9 on an 8-GPU host)."""
    if hip and rng.random() < 0.5:
        reason = "Page not present or supervisor privilege" if rng.random() < 0.8 else "Unknown"
        return (f"Memory access fault by GPU node-{rng.randint(2, 9)} (Agent handle: "
                f"0x{rng.choice((0x55, 0x56))}{rng.getrandbits(40):010x}) on address "
                f"0x7f{rng.getrandbits(28):07x}000. Reason: {reason}.\nAborted (core dumped)")
    what = "unspecified launch failure" if bug == "missing_barrier" and rng.random() < 0.5 \
        else "an illegal memory access was encountered"
    return accelerator_error(what, hip)


# -- wrong results -----------------------------------------------------------------

def in_dtype(x: float, dtype: str) -> float:
    """x rounded to the output's dtype, as the Python float .item() gives (fp8 outputs are
    compared after .float(); fp32 otherwise).

    >>> in_dtype(0.2, "fp32"), in_dtype(0.4, "fp16"), in_dtype(0.1, "bf16")
    (0.20000000298023224, 0.39990234375, 0.10009765625)
    """
    if math.isinf(x) or math.isnan(x):
        return x
    if dtype == "fp16":
        return struct.unpack("e", struct.pack("e", x))[0] if abs(x) < 65520 else math.copysign(math.inf, x)
    f32 = struct.unpack("f", struct.pack("f", x))[0] if abs(x) < 3.4e38 else math.copysign(math.inf, x)
    if dtype != "bf16":
        return f32
    bits = struct.unpack("I", struct.pack("f", f32))[0]
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000          # round to nearest even
    return struct.unpack("f", struct.pack("I", bits))[0]


def _extreme(n: int, u: float) -> float:
    """The largest of n standard half-normal draws, from one uniform u (its order statistic)."""
    p = min(u ** (1.0 / max(n, 1)), 1 - 1e-16)
    return NormalDist().inv_cdf((1 + p) / 2)


def _smallest(n: int, u: float) -> float:
    """The smallest of n standard half-normal draws, from one uniform u."""
    p = max(1 - (1 - u) ** (1.0 / max(n, 1)), 1e-300)
    return NormalDist().inv_cdf(0.5 + p / 2) if p > 1e-12 else p * math.sqrt(math.pi / 2)


# share of the output a bug spoils, whether its error scales with the value (a lost scale, a
# half-precision accumulator), and where the spoiled elements lie
def _spoiled(bug: str, last: int, rng) -> tuple[float, float, bool, str]:
    """(share of elements, error over the output's scale, error proportional to the value, where)."""
    return {
        "no_bounds_check": (min(1.0, rng.randint(1, 31) / last), rng.uniform(1, 40), False, "tail"),
        "off_by_one": (min(1.0, 1.0 / last), rng.uniform(0.3, 2.0), False, "last"),
        "missing_barrier": (rng.uniform(0.001, 0.03), rng.uniform(0.5, 4.0), False, "scattered"),
        "racy_update": (rng.uniform(0.01, 0.3), rng.uniform(0.3, 1.0), False, "scattered"),
        "half_accumulator": (rng.uniform(0.05, 0.6), rng.uniform(0.02, 0.15), True, "scattered"),
        "tf32_dot": (rng.uniform(0.05, 0.6), rng.uniform(2e-4, 2e-3), True, "scattered"),
        "wrong_init": (rng.uniform(0.4, 1.0), rng.uniform(0.5, 3.0), False, "scattered"),
        "missing_scale": (rng.uniform(0.9, 1.0), rng.uniform(0.5, 10.0), True, "scattered"),
        "bad_combine_index": (rng.uniform(0.2, 0.95), rng.uniform(0.5, 2.0), False, "scattered"),
    }.get(bug, (rng.uniform(0.05, 0.5), rng.uniform(0.3, 3.0), False, "scattered"))


def _position(shape: tuple, where: str, tail: int, rng) -> tuple:
    """An index among the spoiled elements: the last column of a row (an off-by-one loop bound),
    one of a row's last `tail` columns (a tile past the end), or anywhere."""
    rows = tuple(rng.randrange(d) for d in shape[:-1])
    last = shape[-1]
    if where == "last":
        return rows + (last - 1,)
    if where == "tail":
        return rows + (last - 1 - rng.randrange(max(1, min(tail, last))),)
    return rows + (rng.randrange(last),)


def mismatch_text(bug: str, shape: tuple, dtype: str, scale: float, rng) -> str:
    """torch.testing.assert_close's AssertionError for an output of `shape` and `dtype` whose
    reference values have magnitude ~`scale`, spoiled by `bug`: the greatest absolute and the
    greatest relative difference each at its own element (the relative one where the reference
    is nearest zero), values in the output's dtype, printed as Python prints a float."""
    numel = math.prod(shape)
    atol, rtol = FEEDBACK.get(dtype, FEEDBACK_DEFAULT)
    frac, rel, proportional, where = _spoiled(bug, shape[-1], rng)
    bad = max(1, min(numel, round(frac * numel)))
    tail = max(1, round(frac * shape[-1]))
    abs_at, rel_at = _position(shape, where, tail, rng), _position(shape, where, tail, rng)
    sign = rng.choice((-1, 1))
    if dtype in ("int", "int8"):
        big = max(2, int(scale * 2))
        diff = rng.randint(1, big)
        expected = rng.randint(1, big)
        rel_diff = in_dtype(rng.randint(1, big) / expected, "fp32")
        return (f"AssertionError: Tensor-likes are not equal!\n\nMismatched elements: {bad} / {numel} "
                f"({bad / numel:.1%})\nGreatest absolute difference: {diff} at index {abs_at}\n"
                f"Greatest relative difference: {rel_diff} at index {rel_at}")
    if proportional:      # the error grows with the value: largest where the reference is largest
        top = scale * _extreme(bad, rng.random())
        e_abs, err_abs = top, rel * top * rng.uniform(0.8, 1.2)
        e_rel = scale * abs(rng.gauss(0, 1)) + atol
        err_rel = rel * e_rel * rng.uniform(1.0, 1.3)
    else:                 # garbage of its own size: relative error largest where the reference is ~0
        e_abs, err_abs = scale * abs(rng.gauss(0, 1)), rel * scale * _extreme(bad, rng.random())
        e_rel = scale * max(_smallest(bad, rng.random()), 1e-6)
        err_rel = max(rel * scale * abs(rng.gauss(0, 1)), atol + rtol * e_rel) * rng.uniform(1.0, 1.5)

    def diffs(expected: float, err: float) -> tuple[float, float]:
        e = in_dtype(sign * expected, dtype)
        a = in_dtype(e + sign * err, dtype)
        d = in_dtype(abs(a - e), dtype)
        return d, (in_dtype(d / abs(e), dtype) if e else math.inf)

    at_abs = diffs(e_abs, max(err_abs, atol + rtol * e_abs))
    at_rel = at_abs if bad == 1 else diffs(e_rel, err_rel)     # one spoiled element: both are its own
    if bad == 1:
        rel_at = abs_at
    if at_rel[0] > at_abs[0]:           # each greatest difference is over every element
        abs_at = rel_at
    if at_abs[1] > at_rel[1]:
        rel_at = abs_at
    abs_diff, rel_diff = max(at_abs[0], at_rel[0]), max(at_abs[1], at_rel[1])
    return (f"AssertionError: Tensor-likes are not close!\n\nMismatched elements: {bad} / {numel} ({bad / numel:.1%})\n"
            f"Greatest absolute difference: {abs_diff} at index {abs_at} (up to {atol} allowed)\n"
            f"Greatest relative difference: {rel_diff} at index {rel_at} (up to {rtol} allowed)")
