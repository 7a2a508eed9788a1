"""Generic Triton knobs (knobs.py adds them to a profile's Triton rungs): compiler controls written
into a candidate's code.

- `evict` (Triton): an `eviction_policy` hint on the loads of the kernel's main loop (1:
  "evict_first", 2: "evict_last"); PTX carries it as an L2 cache-policy operand on each load.
- `cache` (Triton): `cache_modifier=".cg"` on the same loads: PTX `ld.global.cg`, cached in L2
  only, not in L1. Not offered on a loop that feeds tl.dot: Triton pipelines its loads into
  cp.async, L2-only already, and the SASS with .cg is the SASS without it (so too on a streaming
  loop the rung pipelines with num_stages > 1; scripts/compile_knobs.py --generic).
- `maxnreg` (Triton, NVIDIA): the launch option `maxnreg=N`: ptxas caps the registers a thread
  gets at N, so a kernel over it spills to local memory and one under it runs more warps an SM.

A value 0 leaves the code as the module renders it. A knob has a place only where its text has
one: `evict` where the first @triton.jit function's main loop loads without a hint of its own,
`maxnreg` where the wrapper launches a kernel with `num_warps=` and no `maxnreg=` yet, and no
kernel multiplies on tensor cores (tl.dot, tl.dot_scaled): ptxas (Triton 3.9, sm_90a) refuses a tl.dot kernel a cap under
its MMA fragments' need ("C7602 Insufficient registers (64) to compile instruction ... Try to
compile with register target of 90 or higher": gemm_fp16_triton pipelined_stages, flash_prefill_triton
pipelined), a failure the simulator does not know.

>>> src = ("@triton.jit\\ndef k(x_ptr, n, B: tl.constexpr):\\n    w = tl.load(x_ptr)\\n"
...        "    for i in range(0, n, B):\\n        v = tl.load(x_ptr + i + tl.arange(0, B), mask=m, other=0.0).to(tl.float32)\\n"
...        "    return\\n\\n\\ndef f(x):\\n    k[(1,)](x, 4, B=1, num_warps=4)\\n")
>>> print(apply_code(src, {"evict": 1, "maxnreg": 128}))
@triton.jit
def k(x_ptr, n, B: tl.constexpr):
    w = tl.load(x_ptr)
    for i in range(0, n, B):
        v = tl.load(x_ptr + i + tl.arange(0, B), mask=m, other=0.0, eviction_policy="evict_first").to(tl.float32)
    return
<BLANKLINE>
<BLANKLINE>
def f(x):
    k[(1,)](x, 4, B=1, num_warps=4, maxnreg=128)
<BLANKLINE>
"""
from __future__ import annotations

import re

from .ops.base import Param

OFF = 0
POLICIES = {1: "evict_first", 2: "evict_last"}
KNOBS = {
    "evict": Param("evict", (0, 1, 2), OFF),
    "cache": Param("cache", (0, 1), OFF),
    "maxnreg": Param("maxnreg", (0, 32, 64, 128, 255), OFF),
}

_JIT = re.compile(r"^@triton\.jit[^\n]*\ndef ", re.M)
_LOOP = re.compile(r"^([ \t]*)for [^\n]*\b(?:range|tl\.range|tl\.static_range)\([^\n]*:[ \t]*(?:#[^\n]*)?\n", re.M)
_LAUNCH = re.compile(r"\bnum_warps=[^,)\n]+")


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


def places(code: str) -> dict:
    loads = _loads(code)
    hinted = any(w in code[a:b] for a, b in loads for w in ("eviction_policy", "cache_modifier"))
    launch = _LAUNCH.search(code) is not None and "maxnreg" not in code and "tl.dot" not in code
    span = _main_loop(code)
    dot_loop = span is not None and "tl.dot" in code[span[0]:span[1]]
    return {"evict": bool(loads) and not hinted, "cache": bool(loads) and not hinted and not dot_loop, "maxnreg": launch}


def apply_code(code: str, params: dict) -> str:
    """Write the Triton knobs' settings into a candidate's code."""
    policy = POLICIES.get(params.get("evict", OFF))
    hint = (f', eviction_policy="{policy}"' if policy else "") + (', cache_modifier=".cg"' if params.get("cache") else "")
    if hint:
        for _, close in reversed(_loads(code)):
            code = f"{code[:close]}{hint}{code[close:]}"
    if params.get("maxnreg", OFF):
        code = _LAUNCH.sub(lambda m: f"{m.group(0)}, maxnreg={params['maxnreg']}", code)
    return code
