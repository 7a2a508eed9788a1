r"""Generic Triton knobs (knobs.py adds them to a profile's Triton rungs): compiler controls written
into a candidate's code.

- `evict` (Triton, NVIDIA): an `eviction_policy` hint on the loads of the kernel's main loop (1:
  "evict_first", 2: "evict_last"); Triton 3.9 writes it into the PTX as an L1 eviction priority and an
  L2 cache-policy operand on each load (`ld.global.L1::evict_last.L2::cache_hint`; for gfx942 its machine
  code is the same with or without). Offered where the main loop loads a contiguous chunk of a row without a
  hint of its own, does not store to it, and a later loop reads it again (`rereads`: the two- and three-pass
  norms, softmax and decode: 7 rungs of 5 modules), the only loops where the device saw it move as modelled.

Measured on an H100 (scripts/knobs_device.py; 13:44 UTC measurements/h100_knobs_triton.json, 16:36 UTC
h100_knobs_evict_menu.json: 13 rungs at 29 menu shapes, h100_knobs_evict_tuned.json: 11 tuned configurations),
each value's time over the code without it. What decides the sign is where the rows the SM's resident programs
read sit (`l1_load`: those programs, by threads and shared memory, times the bytes a program's main loop reads,
over the L1 left beside their shared memory):
  rows that fit (the 8 KB norm rows, sixteen to an SM at 4 warps: 0.5; softmax's 8 KB rows at 8 warps: 0.25): the
    re-read hits L1, and evict_first, marking the first pass's lines first out, loses those hits: rmsnorm
    chunked_two_pass 1.24-1.26, layernorm chunked_three_pass 1.19-1.21, welford 1.15, softmax chunked_three_pass
    1.21, online_softmax 1.09-1.12; evict_last changes nothing (0.97-0.99);
  so few rows that nothing evicts them before the re-read (under ~0.1: 2 KB rows, 1-64 row launches): neither moves
    beyond a few microseconds' noise (0.96-1.03; the 4-7 us launches of 64 rows 0.98-1.10 either way);
  rows that fill or overflow the L1 (softmax's 64 KB rows, five to eight an SM; the norms at 2 warps, 32 rows an SM;
    a decode's K): LRU has already lost them, so evict_first changes nothing (0.96-1.03), and evict_last keeps part
    for the re-read: softmax 0.74-0.92, rmsnorm 0.90, layernorm 0.84, flash_decode 0.91, less the further past the L1
    (flash_decode's 512 KB of K a program: 0.98).
The model (`reread_traffic`) moves the kernel's traffic so; on the 30 rows of each value on the offered rungs it
moves none the wrong way beyond 3%, rms log error 0.081 (evict_first) and 0.052 (evict_last) against 0.115 and
0.093 for no effect. Its misses: softmax's one 256 KB row an SM (R=32 C=128256, l1_load 0.98) lost 1.20-1.29 with
evict_first where the model holds still, and softmax chunked_three_pass R=2048 C=4096 ran evict_last 1.10.
Not offered (device, 16:36 UTC): cross_entropy_fwd chunked_two_pass (evict_first 1.13-2.00, evict_last 0.95-1.50
where softmax's like rows ran 1.20 / 0.93) and fp8_quant fused_row_loop (0.89-1.05 / 0.84-0.99), whose moves the
model cannot place (UNMODELLED); add_rmsnorm fused_chunked, which re-reads the residual it stored (0.91-1.02 /
0.99-1.00: the hint governs the loads, not the stores), and the one-row-a-lane rungs, whose loop reads one element a
lane (0.97-1.02 / 0.99-1.01); single-pass loops (cross_entropy_fwd online_softmax, rmsnorm persistent, gemm_fp16
pipelined_stages, paged_decode split_kv, flash_prefill pipelined): 0.97-1.01 either way.
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

OFF = 0
POLICIES = {1: "evict_first", 2: "evict_last"}
# evict_last beside none: the engineer's first try on a row the kernel reads again (keep it), evict_first the far one
KNOBS = {"evict": Param("evict", (0, 2, 1), OFF)}
# L1 data cache and shared memory of one SM, bytes, by NVIDIA architecture: what the resident programs' rows share
L1_BYTES = {"sm_80": 192 << 10, "sm_86": 128 << 10, "sm_89": 128 << 10, "sm_90a": 256 << 10, "sm_120": 128 << 10}
# the share of a task's bytes (its Cost.bytes) the main loop of a re-reading rung loads, from the renders: one row
# of an input and an output of the same size (norms, softmax; flash_decode's first pass reads K of K and V: 0.5);
# add_rmsnorm two_kernels' second kernel reads the residual of x, r in, r out and y
READ_SHARE = {"add_rmsnorm_triton/two_kernels": 0.25}
# the share of the candidate's traffic that the kernel holding the main loop moves, where the rung launches another
# before it: add_rmsnorm two_kernels' residual add moves x, r in and r out, about half (the H100: evict_first 1.04,
# evict_last 0.97 at T=4096 D=4096, where the one-kernel norms ran 1.19-1.26 / 0.98-0.99)
KERNEL_SHARE = {"add_rmsnorm_triton/two_kernels": 0.5}
READ_SHARE_DEFAULT = 0.5
# the traffic each value adds or saves on a re-reading kernel and where (reread_traffic; fitted on the H100's rows above)
EVICT_FIRST_LOSS = 0.25
FIRST_FROM = (0.1, 0.2)          # evict_first's loss grows from none to whole across this range of l1_load
FIRST_TO = (0.7, 0.95)           # and falls back to none across this one
EVICT_LAST_GAIN = 0.15
LAST_FROM = (0.75, 0.95)         # evict_last's gain grows from none to whole across this range

_JIT = re.compile(r"^@triton\.jit[^\n]*\ndef ", re.M)
_LOOP = re.compile(r"^([ \t]*)for [^\n]*\b(?:range|tl\.range|tl\.static_range)\([^\n]*:[ \t]*(?:#[^\n]*)?\n", re.M)
_BASE = re.compile(r"tl\.load\(\s*([A-Za-z_]\w*)")
_STORED = re.compile(r"tl\.store\(\s*([A-Za-z_]\w*)")
_NAME = re.compile(r"def\s+(\w+)")
# kernels whose re-read the device moved where the model cannot place it (H100, 2026-12-06 16:36 UTC,
# measurements/h100_knobs_evict_menu.json): cross-entropy's two-pass row (T=16 V=128256: evict_first 2.00x,
# evict_last 1.50x, where softmax's one 256 KB row ran 1.20 / 0.93; T=256 V=32000: 1.13 / 1.19) and fp8_quant's
# row loop, whose second pass is the software e4m3 conversion (T=4096 D=4096: 1.03 / 0.93; T=32: 0.89 / 0.84;
# at 2 and 16 warps 0.98-1.05 / 0.99-1.00): no place for the knob there
UNMODELLED = ("cross_entropy_fwd_kernel", "fp8_quant_kernel")


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
    """Whether a later loop of the main loop's function loads from a pointer the main loop loads a contiguous
    chunk from (tl.arange in its body) and does not store to: a second pass over the row the hinted loads
    brought in. One element loaded after the loop (a label's logit) is no re-read; a row the main loop
    rewrites (add_rmsnorm's residual) is re-read from its stores, which the hint does not govern; a loop that
    reads one element a lane (a row a lane) brings in no chunk."""
    span = _main_loop(code)
    if span is None or "tl.arange(" not in code[span[0]:span[1]]:
        return False
    starts = [m for m in _JIT.finditer(code, 0, span[0])]
    name = _NAME.search(code, starts[-1].end() - 4) if starts else None
    if name is not None and name.group(1) in UNMODELLED:
        return False
    stored = {m.group(1) for m in _STORED.finditer(code, span[0], span[1])}
    bases = {m.group(1) for m in _BASE.finditer(code, span[0], span[1])} - stored
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


def rung_traffic(module: str, tag: str, evict: int, load: float) -> float:
    """reread_traffic on the part of the candidate's traffic the re-reading kernel moves (KERNEL_SHARE)."""
    return 1.0 + (reread_traffic(evict, load) - 1.0) * KERNEL_SHARE.get(f"{module}/{tag}", 1.0)


def l1_load(launch, gpu, row_bytes: float) -> float:
    """The rows the programs resident on one SM load in the main loop (`row_bytes` each) over the L1 left beside
    their shared memory: under 1 the whole rows are still there when the next pass re-reads them."""
    # by threads and shared memory, not by the launch model's registers: these streaming kernels' few registers
    # (ptxas: 32-58 on the norm and softmax rungs) limit no block, and its estimate would (softmax at 16 warps:
    # 2 blocks an SM where 4 run, their 4 x 64 KB rows overflowing the L1 as the device saw)
    by_smem = gpu.smem_per_sm // launch.smem_bytes if launch.smem_bytes else gpu.max_blocks_per_sm
    resident = max(1, min(gpu.max_blocks_per_sm, gpu.max_threads_per_sm // max(1, launch.threads), by_smem,
                          -(-launch.grid // gpu.sms)))
    free = L1_BYTES.get(gpu.arch, 128 << 10) - resident * launch.smem_bytes
    return resident * row_bytes / max(free, 16 << 10)


def reread_traffic(evict: int, load: float) -> float:
    """The traffic multiplier of an eviction policy on the main loop's loads of a kernel that re-reads them, at
    `load` (l1_load). evict_first marks the first pass's lines first out: where the rows fit (load under 1) the
    re-read loses its L1 hits; where they do not, LRU had already lost them (no change). evict_last keeps the
    first pass's lines ahead of the other loads: where the rows overflow the L1 part of them survives to the
    re-read; where they fit they survive anyway (no change)."""
    if evict == 1:      # no loss where so few rows sit in the L1 that nothing evicts them before the re-read
        return 1.0 + EVICT_FIRST_LOSS * _clamp((load - FIRST_FROM[0]) / (FIRST_FROM[1] - FIRST_FROM[0])) \
            * _clamp((FIRST_TO[1] - load) / (FIRST_TO[1] - FIRST_TO[0]))
    if evict == 2:      # what survives is at most the L1's share of the rows
        return 1.0 - EVICT_LAST_GAIN * _clamp((load - LAST_FROM[0]) / (LAST_FROM[1] - LAST_FROM[0])) * min(1.0, 1.0 / load)
    return 1.0


def _clamp(x: float) -> float:
    return min(1.0, max(0.0, x))
