"""Physical feasibility of a candidate at a task's shape: the alignment and descriptor rules a real
build or launch enforces on the memory instructions its code uses (issue 30).

A candidate's code is scanned for the instructions that need aligned rows, and each data tensor of
the op's entry (the task's dtype, two or more dims, the innermost one a dim of the task) is checked:
its row of `last dim x element bytes` is the global stride every row after the first starts at.

  rule          what in the code                                          needs rows of
  tma           cuTensorMapEncodeTiled / cp.async.bulk.tensor (CUDA),     16-byte multiples (the tensor
                tl.make_tensor_descriptor (Triton)                        map's global strides)
  bulk_copy     cp.async.bulk global<->shared (Hopper's bulk-copy engine) 16-byte multiples (address, size)
  vector16      uint4 / float4 / int4 casts, ld/st.global.v4, 16-byte     16-byte multiples
                cp.async (cp_async_16, cp.async.cg)
  vector8       uint2 / float2 / int2 casts                               8-byte multiples
  vector4       __half2 / __nv_bfloat162 casts                            4-byte multiples

What violates a rule at a shape is not written (sim.writable: an engineer who knows the shape does
not pick a 16-byte vector for 1,554-byte rows) and, when asked anyway, `sim.simulate` fails it with
the runtime's text: on NVIDIA a misaligned vector or bulk access faults ("misaligned address"), and a
TMA tile whose global address is not 16-byte aligned stops the SM ("an illegal instruction was
encountered", triton-lang/triton#7385 on an H100; the renders' host code does not check
cuTensorMapEncodeTiled's CUDA_ERROR_INVALID_VALUE, and Triton checks device-built descriptors' dynamic
strides only in its instrumented mode). On AMD a misaligned global vector load is split by the
hardware (unaligned access mode on gfx9+) and runs; no TMA exists there.

The static tile rules of the same instructions (a TMA box at most 256 a dim, the inner box at least
16 bytes; wgmma tiles M a multiple of 64, N a multiple of 8 up to 256, K 16 for 16-bit and 32 for 8-bit
inputs) depend on the rung's parameters only: tile_violation() names them and
tests/test_feasibility.py holds every rung of the registry to them.

Triton code outside tensor descriptors is not checked: Triton proves alignment from its
arguments' divisibility by 16 and emits narrower loads where it cannot, so it always runs.

>>> from kernelstrain.ops import REGISTRY
>>> from kernelstrain.tasks import make_task
>>> m = REGISTRY["gemm_fp16_triton"]; v = m.variant("persistent_tma")
>>> violation(m, v, v.defaults(), make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 777}))[0]
'tma'
>>> violation(m, v, v.defaults(), make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 776})) is None
True
"""
from __future__ import annotations

import functools
import re

from .ops.base import DTYPE_BYTES, OpModule, Task, Variant
from .ops.contract import Arg

# (rule, bytes a row must be a multiple of, the code that needs it, impl)
RULES = (
    ("tma", 16, re.compile(r"cuTensorMapEncodeTiled|cp\.async\.bulk\.tensor"), "cuda"),
    ("tma", 16, re.compile(r"tl\.make_tensor_descriptor|TensorDescriptor"), "triton"),
    ("bulk_copy", 16, re.compile(r"cp\.async\.bulk\.(?:shared|global)"), "cuda"),
    ("vector16", 16, re.compile(r"reinterpret_cast<\s*(?:const\s+)?(?:uint4|float4|int4|double2|longlong2)\s*\*\s*>"
                                r"|\b(?:ld|st)\.global(?:\.nc)?(?:\.[a-z_:0-9]+)*\.v4\.(?:b32|u32|f32|s32)"
                                r"|\bcp_async_16\b|cp\.async\.c[ag]\.shared\.global"), "cuda"),
    ("vector8", 8, re.compile(r"reinterpret_cast<\s*(?:const\s+)?(?:uint2|float2|int2)\s*\*\s*>"), "cuda"),
    ("vector4", 4, re.compile(r"reinterpret_cast<\s*(?:const\s+)?(?:__half2|__nv_bfloat162|half2)\s*\*\s*>"), "cuda"),
)
WIDEST = max(need for _, need, _, _ in RULES)
# what the runtime says when the kernel meets a misaligned access of each rule (NVIDIA)
RUNTIME = {"tma": "an illegal instruction was encountered", "bulk_copy": "misaligned address",
           "vector16": "misaligned address", "vector8": "misaligned address", "vector4": "misaligned address"}
TMA_BOX_MAX = 256
WGMMA_K = {1: 32, 2: 16}          # element bytes -> wgmma's K per instruction (fp8/int8, fp16/bf16)


@functools.lru_cache(maxsize=4096)
def _rows(entry, dtype: str, shape: tuple) -> tuple:
    """((tensor, row bytes, of the task's dtype), ...) of the entry's tensors at this shape."""
    dims = _Dims(dict(shape), dtype)
    out = []
    for a in entry.args if entry is not None else ():
        if not isinstance(a, Arg) or len(a.dims) < 2 or not isinstance(a.dims[-1], str):
            continue
        elt = DTYPE_BYTES.get(a.dtype_of(dims))
        if elt is not None and elt >= 1:
            out.append((a.name, int(a.shape(dims)[-1] * elt), a.dtype == "task"))
    return tuple(out)


class _Dims:
    """The little of a Task that Arg.shape and Arg.dtype_of read."""
    def __init__(self, dims: dict, dtype: str):
        self.dims, self.dtype = dims, dtype


def rows(module: OpModule, task: Task) -> tuple:
    """((tensor name, row bytes, of the task's dtype), ...): the global strides the rules check, of
    every tensor of two or more dims whose innermost dim is a dim of the task.

    >>> from kernelstrain.ops import REGISTRY
    >>> from kernelstrain.tasks import make_task
    >>> m = REGISTRY["gemm_fp16_cuda"]
    >>> rows(m, make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 777}))
    (('A', 1554, True), ('B', 1554, True), ('C', 6000, True))
    """
    return _rows(module.entry, task.dtype, task.shape)


def misaligned(module: OpModule, task: Task, own: bool = False) -> bool:
    """Whether some row of the task (own: of a tensor of the task's dtype, the data a kernel streams) is
    not a multiple of the widest access (the fast path: no rule can fail where every row is aligned)."""
    return any(row % WIDEST for _, row, of_task in rows(module, task) if of_task or not own)


_STATEMENT = re.compile(r"__shared__[^;]*;")
_ARRAY_NAME = re.compile(r"\b([A-Za-z_]\w*)\s*\[")
# local arrays: `float a[TM], b[TN];`, `Pack cache[8] = {};` (registers or local memory, aligned to their type)
_LOCAL_DECL = re.compile(r"^[ \t]*(?:const\s+)?[A-Za-z_][\w:<>]*\s+((?:[A-Za-z_]\w*\s*(?:\[[^\]\n]*\]\s*)+"
                         r"(?:=\s*\{[^}\n]*\}\s*)?,\s*)*[A-Za-z_]\w*\s*(?:\[[^\]\n]*\]\s*)+(?:=\s*\{[^}\n]*\}\s*)?);", re.M)
_ASSIGN = re.compile(r"\b([A-Za-z_]\w*)\s*=(?!=)([^;]*)")
_NAME = re.compile(r"[A-Za-z_]\w*")
_FIRST_NAME = re.compile(r"(?:\([A-Za-z_ ]+\)|[\s(&*])*([A-Za-z_]\w*)")


def _outside_brackets(text: str) -> str:
    return re.sub(r"\[[^\]]*\]", "[]", text)


def on_chip_names(code: str) -> set:
    """Names of shared-memory and local arrays, and of the pointers set from them: their addresses are
    aligned whatever the task's shape."""
    decls = _STATEMENT.findall(code) + _LOCAL_DECL.findall(code)
    names = {n for d in decls for n in _ARRAY_NAME.findall(_outside_brackets(d))}
    assigned = [(a, _FIRST_NAME.match(rhs)) for a, rhs in _ASSIGN.findall(code)]
    while True:
        more = {a for a, first in assigned if first is not None and first.group(1) in names} - names
        if not more:
            return names
        names |= more


def reach(code: str, tensors: set) -> dict:
    """name -> the entry tensors a pointer of that name is set from (assignments followed to a fixed point)."""
    sources = {}
    for name, rhs in _ASSIGN.findall(code):
        sources.setdefault(name, set()).update(_NAME.findall(rhs))
    out = {t: {t} for t in tensors}
    while True:
        grown = False
        for name, names in sources.items():
            got = set().union(*(out.get(n, set()) for n in names)) - out.get(name, set())
            if got:
                out.setdefault(name, set()).update(got)
                grown = True
        if not grown:
            return out


def _operand(code: str, at: int) -> str:
    """The parenthesised operand that starts at `at` (a cast's argument)."""
    if at >= len(code) or code[at] != "(":
        return ""
    depth = 0
    for i in range(at, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return code[at + 1:i]
    return code[at + 1:]


def accessed(pattern: re.Pattern, code: str, tensors: tuple, on_chip: set, reached: dict) -> set:
    """The entry tensors the code may reach with `pattern`. A cast's operand is traced back through
    assignments to the tensors it is computed from; a cast of an on-chip array is aligned whatever
    the task's shape and reaches none; a cast whose operand cannot be traced (a kernel parameter named
    otherwise, a helper's argument), and an instruction without an operand (cp.async, TMA, bulk
    copies), may reach any tensor of the task's dtype."""
    own = {name for name, _, of_task in tensors if of_task}
    out = set()
    for m in pattern.finditer(code):
        if not m.group(0).startswith("reinterpret_cast"):
            return out | own
        first = _FIRST_NAME.match(_operand(code, m.end()))
        if first is None:
            out |= own
        elif first.group(1) not in on_chip:
            out |= reached.get(first.group(1)) or own
    return out


def violation(module: OpModule, variant: Variant, params: dict, task: Task) -> tuple | None:
    """(rule, tensor, row bytes, needed multiple) of the first rule the candidate's code breaks at this
    task's shape, or None."""
    if task.gpu.vendor != "nvidia" or not misaligned(module, task):
        return None
    from .knobs import render
    code = render(module, variant, params, task)
    tensors = rows(module, task)
    on_chip, reached = on_chip_names(code), reach(code, {name for name, _, _ in tensors})
    for rule, need, pattern, impl in RULES:
        if impl != module.impl:
            continue
        hit = accessed(pattern, code, tensors, on_chip, reached)
        for name, row, _ in tensors:
            if name in hit and row % need:
                return rule, name, row, need
    return None


def error_text(found: tuple, module: OpModule, task: Task) -> str:
    """The runtime's report of a violation (see the module docstring), as the harness prints it."""
    from .runtime_texts import accelerator_error
    what = RUNTIME[found[0]]
    if module.impl == "triton":
        return f"RuntimeError: Triton Error [CUDA]: {what}"
    return accelerator_error(what, task.is_hip)


TILE_PARAMS = {"M": ("BM", "BLOCK_M"), "N": ("BN", "BLOCK_N"), "K": ("BK", "BLOCK_K")}


def tile_violation(variant: Variant, params: dict, elt_bytes: float, uses_tma: bool, uses_wgmma: bool) -> str | None:
    """The static TMA / wgmma tile rule a rung's parameters break, or None (tile params named BM/BN/BK
    or BLOCK_M/N/K; a rung without them tiles by constants its render fixes)."""
    tile = {d: next((params[n] for n in names if n in params), None) for d, names in TILE_PARAMS.items()}
    if uses_tma:
        for d, x in tile.items():
            if x is not None and x > TMA_BOX_MAX:
                return f"TMA box dim {d} = {x} > {TMA_BOX_MAX}"
        if tile["K"] is not None and tile["K"] * elt_bytes < 16:
            return f"TMA inner box {tile['K']} x {elt_bytes} B < 16 B"
    if uses_wgmma:
        m, n, k = tile["M"], tile["N"], tile["K"]
        if m is not None and m % 64:
            return f"wgmma M tile {m} not a multiple of 64"
        if n is not None and n % 8:       # wider than 256: several instructions, each N <= 256
            return f"wgmma N tile {n} not a multiple of 8"
        need = WGMMA_K.get(int(elt_bytes)) if elt_bytes >= 1 else None
        if k is not None and need and k % need:
            return f"wgmma K tile {k} not a multiple of {need}"
    return None
