r"""Generic Triton knobs (knobs.py adds them to a profile's Triton rungs): compiler controls written
into a candidate's code.

- `evict` (Triton, NVIDIA): an `eviction_policy` hint on the loads of the kernel's main loop (1:
  "evict_first", 2: "evict_last"); PTX carries it as an L2 cache-policy operand on each load (or
  cp.async) and ptxas builds the policy into the SASS. Offered where the main loop loads without a
  hint of its own and a later loop reads the same rows again (`rereads`: a two- or three-pass norm
  or softmax re-reading its row from L2), the only loops where the device saw it move.

Measured on an H100 (2026-12-06 13:44 UTC, scripts/knobs_device.py, measurements/h100_knobs_triton.json),
each value's time over the code without it:
  evict_first, re-reading kernels: rmsnorm chunked_two_pass 1.26 (T=4096 D=4096) / 1.10 (T=64), layernorm
    chunked_three_pass 1.21, softmax online_softmax 1.20 (R=32 C=128256) / 1.00 (R=4096), softmax
    chunked_three_pass 0.99: the first pass marks the row first out, and the next pass misses L2;
  evict_last, re-reading kernels: softmax online_softmax 0.93 / 0.92, chunked_three_pass 0.89; rmsnorm
    0.99 / 1.08 (a 4 us launch), layernorm 0.99: the row stays for the next pass where L2 is contested;
  single-pass loops (cross_entropy_fwd online_softmax, rmsnorm persistent, gemm_fp16 pipelined_stages,
    paged_decode split_kv, flash_prefill pipelined): 0.97-1.01 either way.
Two more controls were measured there and are not knobs: `cache_modifier=".cg"` (0.99-1.01 at every
shape but one 4 us launch; on a loop Triton pipelines into cp.async the SASS is the same) and the launch
option `maxnreg` (never faster beyond the noise: 0.99-1.01 at caps at or over ptxas's own count; under it
1.05-2.7x on the streaming and decode rungs and 2.2-12.3x on the tl.dot ones, which under ~90 registers do
not build at all, ptxas C7602).

>>> src = ("@triton.jit\ndef k(x_ptr, n, B: tl.constexpr):\n    w = tl.load(x_ptr)\n"
...        "    for i in range(0, n, B):\n        v = tl.load(x_ptr + i + tl.arange(0, B), mask=m, other=0.0).to(tl.float32)\n"
...        "    return\n")
>>> print(apply_code(src, {"evict": 1}))
@triton.jit
def k(x_ptr, n, B: tl.constexpr):
    w = tl.load(x_ptr)
    for i in range(0, n, B):
        v = tl.load(x_ptr + i + tl.arange(0, B), mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
    return
<BLANKLINE>
>>> rereads(src + "    u = tl.load(x_ptr + n)\n"), rereads(src + "    for i in range(0, n, B):\n        u = tl.load(x_ptr + i)\n")
(False, True)
"""
from __future__ import annotations

import re

from .ops.base import Param
from .ops.occupancy import blocks_per_sm

OFF = 0
POLICIES = {1: "evict_first", 2: "evict_last"}
# evict_last beside none: the engineer's first try on a row the kernel reads again (keep it), evict_first the far one
KNOBS = {"evict": Param("evict", (0, 2, 1), OFF)}
# L1 data cache and shared memory of one SM, bytes, by NVIDIA architecture: what the resident programs' rows share
L1_BYTES = {"sm_80": 192 << 10, "sm_86": 128 << 10, "sm_89": 128 << 10, "sm_90a": 256 << 10, "sm_120": 128 << 10}
# the share of a task's bytes (its Cost.bytes) the main loop of a re-reading rung loads, from the renders: one
# input row of an input and an output of the same size (norms, softmax: 0.5); cross-entropy reads its logits and
# writes a number a row; fp8_quant reads 2 bytes an element and writes 1; add_rmsnorm two_kernels' second kernel
# reads the residual (of x, r in, r out, y); flash_decode's first pass reads K of K and V
READ_SHARE = {"cross_entropy_fwd_triton": 1.0, "fp8_quant_triton": 2 / 3, "add_rmsnorm_triton/two_kernels": 0.25}
READ_SHARE_DEFAULT = 0.5
# the traffic multiplier each value gives a re-reading kernel (fitted below: EVICT_FIRST_LOSS, EVICT_LAST_GAIN)
EVICT_FIRST_LOSS = 0.25
EVICT_LAST_GAIN = 0.1
FIT_LO, FIT_HI = 0.9, 1.1        # evict_first's loss: whole below FIT_LO, none above FIT_HI
OVER_LO, OVER_HI = 0.8, 1.0      # evict_last's gain: none below OVER_LO, whole above OVER_HI

_JIT = re.compile(r"^@triton\.jit[^\n]*\ndef ", re.M)
_LOOP = re.compile(r"^([ \t]*)for [^\n]*\b(?:range|tl\.range|tl\.static_range)\([^\n]*:[ \t]*(?:#[^\n]*)?\n", re.M)
_BASE = re.compile(r"tl\.load\(\s*([A-Za-z_]\w*)")


def _closing(code: str, at: int) -> int:
    """Offset of the `)` closing the `(` at `at`."""
    depth = 0
    for i in range(at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced parentheses")


def _main_loop(code: str) -> tuple[int, int] | None:
    """(start, end) of the body of the main loop: the first loop of a @triton.jit function whose
    body loads (the lines after the `for` indented deeper than it)."""
    starts = [m.end() for m in _JIT.finditer(code)]
    for begin, end_fn in zip(starts, starts[1:] + [len(code)]):
        m = _LOOP.search(code, begin, end_fn)
        if m is None:
            continue
        indent, at = len(m.group(1).expandtabs()), m.end()
        while at < end_fn:
            line_end = code.find("\n", at)
            line_end = end_fn if line_end < 0 else line_end + 1
            line = code[at:line_end]
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            at = line_end
        if "tl.load(" in code[m.end():at]:
            return m.end(), at
    return None


def _loads(code: str) -> list[tuple[int, int]]:
    """(open, close) of every tl.load call of the main loop's body."""
    span = _main_loop(code)
    if span is None:
        return []
    out, at = [], span[0]
    while (i := code.find("tl.load(", at, span[1])) >= 0:
        close = _closing(code, i + len("tl.load"))
        out.append((i + len("tl.load"), close))
        at = close
    return out


def rereads(code: str) -> bool:
    """Whether a later loop of the main loop's function loads from a pointer the main loop loads from (a
    second pass over the row; one element loaded after the loop, a label's logit, is no re-read)."""
    span = _main_loop(code)
    if span is None:
        return False
    bases = {m.group(1) for m in _BASE.finditer(code, span[0], span[1])}
    nxt = _JIT.search(code, span[1])
    end = nxt.start() if nxt else len(code)
    later = _LOOP.search(code, span[1], end)
    return later is not None and any(m.group(1) in bases for m in _BASE.finditer(code, later.end(), end))


def places(code: str) -> dict:
    loads = _loads(code)
    hinted = any(w in code[a:b] for a, b in loads for w in ("eviction_policy", "cache_modifier"))
    return {"evict": bool(loads) and not hinted and rereads(code)}


def apply_code(code: str, params: dict) -> str:
    """Write the Triton knobs' settings into a candidate's code."""
    policy = POLICIES.get(params.get("evict", OFF))
    if policy:
        for _, close in reversed(_loads(code)):
            code = f'{code[:close]}, eviction_policy="{policy}"{code[close:]}'
    return code


def read_share(module: str, tag: str) -> float:
    return READ_SHARE.get(f"{module}/{tag}", READ_SHARE.get(module, READ_SHARE_DEFAULT))


def l1_load(launch, gpu, row_bytes: float) -> float:
    """The rows the programs resident on one SM load in the main loop (`row_bytes` each) over the L1 left beside
    their shared memory: under 1 the whole rows are still there when the next pass re-reads them."""
    resident = max(1, min(blocks_per_sm(launch, gpu), -(-launch.grid // gpu.sms)))
    free = L1_BYTES.get(gpu.arch, 128 << 10) - resident * launch.smem_bytes
    return resident * row_bytes / max(free, 16 << 10)


def reread_traffic(evict: int, load: float) -> float:
    """The traffic multiplier of an eviction policy on the main loop's loads of a kernel that re-reads them, at
    `load` (l1_load). evict_first marks the first pass's lines first out: where the rows fit (load under 1) the
    re-read loses its L1 hits; where they do not, LRU had already lost them (no change). evict_last keeps the
    first pass's lines ahead of the other loads: where the rows overflow the L1 part of them survives to the
    re-read; where they fit they survive anyway (no change)."""
    if evict == 1:
        return 1.0 + EVICT_FIRST_LOSS * _clamp((FIT_HI - load) / (FIT_HI - FIT_LO))
    if evict == 2:      # what survives is at most the L1's share of the rows
        return 1.0 - EVICT_LAST_GAIN * _clamp((load - OVER_LO) / (OVER_HI - OVER_LO)) * min(1.0, 1.0 / load)
    return 1.0


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))
