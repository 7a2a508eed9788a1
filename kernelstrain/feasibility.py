"""Physical feasibility of a candidate at a task's shape: the alignment and descriptor rules a real
build or launch enforces on the memory instructions its code uses (issue 30).

A candidate's code is scanned for the instructions that need aligned rows, and the entry's tensors they
reach are checked (those of two or more dims whose innermost one is a dim of the task): a tensor's row
of `last dim x element bytes` is the global stride every row after the first starts at. A vector cast's
operand is traced through the code's assignments to the tensors it is computed from (a cast of a shared
or local array reaches none); an operand that cannot be traced, and an instruction without one (cp.async,
TMA, bulk copies), may reach any tensor of the task's dtype (declared `task`, or by its name: an int8 GEMM's
A and B). A word4 cast is also how code puns a register (`*reinterpret_cast<uint32_t*>(&p)`) or carves a
workspace (`reinterpret_cast<int*>(ws + n)`): its operand reaches a tensor only where it is traced to one or
is a pointer the code never assigns (a kernel or helper parameter: a copy helper's `src`).

  rule          what in the code                                          needs rows of
  tma           cuTensorMapEncodeTiled / cp.async.bulk.tensor (CUDA),     16-byte multiples (the tensor
                tl.make_tensor_descriptor (Triton)                        map's global strides)
  bulk_copy     cp.async.bulk global<->shared (Hopper's bulk-copy engine) 16-byte multiples (address, size)
  vector16      uint4 / float4 / int4 casts, ld/st.global.v4, 16-byte     16-byte multiples
                cp.async (cp_async_16, cp.async.cg)
  vector8       uint2 / float2 / int2 casts                               8-byte multiples
  vector4       __half2 / __nv_bfloat162 casts                            4-byte multiples
  word4         uint32_t / int / unsigned / float casts of 1- or 2-byte   4-byte multiples
                data (dp4a's four int8 a word, two fp16 a 32-bit copy)

What violates a rule at a shape is not written (sim.writable: an engineer who knows the shape does
not pick a 16-byte vector for 1,554-byte rows) and, when asked anyway, `sim.simulate` fails it with
the runtime's text: on NVIDIA a misaligned vector or bulk access faults ("misaligned address"), and a
TMA tile whose global address is not 16-byte aligned stops the SM ("an illegal instruction was
encountered", triton-lang/triton#7385 on an H100; the renders' host code does not check
cuTensorMapEncodeTiled's CUDA_ERROR_INVALID_VALUE, and Triton checks device-built descriptors' dynamic
strides only in its instrumented mode). On AMD a misaligned global vector load is split by the
hardware (unaligned access mode on gfx9+) and runs; no TMA exists there.

A Triton kernel's `tl.arange(0, N)` needs N a power of 2: where the rung binds N to a dim of the task
(a head dim of 96, a head count of 6) Triton's code generator rejects the kernel ("arange's range must
be a power of 2"), and an engineer pads it to the next power and masks instead; a rung that does not is
not written at that shape, and fails with Triton's CompilationError when asked.

The static tile rules of the same instructions (a TMA box at most 256 a dim, the inner box at least
16 bytes; wgmma tiles M a multiple of 64, N a multiple of 8 up to 256, K 16 for 16-bit and 32 for 8-bit
inputs) depend on the rung's parameters only: tile_violation() names them and
tests/test_feasibility.py holds every rung of the registry to them.

Triton loads outside tensor descriptors break no alignment rule: Triton proves alignment from its
arguments' divisibility by 16 and emits one-element loads where it cannot (sim.narrowed times that).

>>> from kernelstrain.ops import REGISTRY
>>> from kernelstrain.tasks import make_task
>>> m = REGISTRY["gemm_fp16_triton"]; v = m.variant("persistent_tma")
>>> violation(m, v, v.defaults(), make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 777}))[0]
'tma'
>>> violation(m, v, v.defaults(), make_task(m, "H100", "fp16", {"M": 1000, "N": 3000, "K": 776})) is None
True
"""
from __future__ import annotations

import ast
import functools
import operator
import re

from .knobs import own, render
from .memo import candidate_cache
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
    ("word4", 4, re.compile(r"reinterpret_cast<\s*(?:const\s+)?(?:volatile\s+)?(?:uint32_t|int32_t|unsigned(?:\s+int)?"
                            r"|int|float)\s*\*\s*>"), "cuda"),
)
TRACED_ONLY = {"word4"}     # rules whose untraced operands reach a tensor only as a never-assigned pointer
WIDEST = max(need for _, need, _, _ in RULES)
# what the runtime says when the kernel meets a misaligned access of each rule (NVIDIA)
RUNTIME = {"tma": "an illegal instruction was encountered", "bulk_copy": "misaligned address",
           "vector16": "misaligned address", "vector8": "misaligned address", "vector4": "misaligned address",
           "word4": "misaligned address"}
TMA_BOX_MAX = 256
WGMMA_K = {1: 32, 2: 16}          # element bytes -> wgmma's K per instruction (fp8/int8, fp16/bf16)


_ROWS: dict = {}        # (module name, dtype, shape) -> rows(): a pure function of them
# Element bytes of every dtype an entry declares: DTYPE_BYTES holds the task dtypes only, and a tensor of another one
# (gemm_fp4's operands as raw uint8 codes, fp8_quant_cuda's uint8 output, gemm_int4's uint32-packed weights) had no
# row at all, so no rule ever checked it (scripts/simB_align_audit.py, session 14)
ELEMENT_BYTES = {**DTYPE_BYTES, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "fp64": 8}


def _rows(entry, dtype: str, shape: tuple) -> tuple:
    """((tensor, row bytes, of the task's dtype), ...) of the entry's tensors at this shape."""
    dims = _Dims(dict(shape), dtype)
    out = []
    for a in entry.args if entry is not None else ():
        if not isinstance(a, Arg) or len(a.dims) < 2 or not isinstance(a.dims[-1], str):
            continue
        elt = ELEMENT_BYTES.get(a.dtype_of(dims))
        if elt is not None and elt >= 1:
            out.append((a.name, int(a.shape(dims)[-1] * elt), a.dtype in ("task", dtype)))
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
    key = (module.name, task.dtype, task.shape)
    if key not in _ROWS:
        _ROWS[key] = _rows(module.entry, task.dtype, task.shape)
    return _ROWS[key]


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
    assigned = [(a, _values(rhs)) for a, rhs in _ASSIGN.findall(code)]
    while True:
        more = {a for a, firsts in assigned if firsts and all(f in names for f in firsts)} - names
        if not more:
            return names
        names |= more


def _values(rhs: str) -> list:
    """The first names of the values an assignment's right side can take: both branches of a top-level
    `cond ? a : b` (its condition is no value: `base = is_a ? A : B` is A or B, whatever `is_a` is named
    after), else its first name (gemm_fp4_cuda's mma_reg_dequant loads uint4 chunks of `src = base + ...`, which
    the condition's name, shared with a local array `r[4]` of another function, had put on chip)."""
    depth = 0
    for i, ch in enumerate(rhs):
        depth += {"(": 1, ")": -1, "[": 1, "]": -1}.get(ch, 0)
        if ch == "?" and depth == 0:
            branches = rhs[i + 1:].split(":", 1)
            firsts = [_FIRST_NAME.match(b) for b in branches]
            return [f.group(1) for f in firsts if f is not None] if all(firsts) and len(branches) == 2 else []
    first = _FIRST_NAME.match(rhs)
    return [first.group(1)] if first is not None else []


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


def accessed(pattern: re.Pattern, code: str, tensors: tuple, on_chip: set, reached: dict,
             assigned: frozenset | None = None, index: frozenset = frozenset()) -> set:
    """The entry tensors the code may reach with `pattern`. A cast's operand is traced back through
    assignments to the tensors it is computed from; a cast of an on-chip array is aligned whatever
    the task's shape and reaches none; a cast whose operand cannot be traced (a kernel parameter named
    otherwise, a helper's argument), and an instruction without an operand (TMA, bulk copies), may reach
    any tensor of the task's dtype; a cp.async those and the tensors its source operands are computed from
    (copied_by_cp_async: gemm_fp4_cuda's packed uint8 A and B). With `assigned` (the names the code assigns:
    TRACED_ONLY rules), an untraced operand that takes an address (`&p`) or that the code assigns from
    other things (a workspace) reaches none."""
    own = {name for name, _, of_task in tensors if of_task}
    out = set()
    for m in pattern.finditer(code):
        if _CP_ASYNC.match(m.group(0)):
            out |= own | copied_by_cp_async(code, tensors, index)
            continue
        if not m.group(0).startswith("reinterpret_cast"):
            return out | own
        operand = _operand(code, m.end())
        first = _FIRST_NAME.match(operand)
        if first is None:
            out |= own if assigned is None else set()
        elif first.group(1) not in on_chip:
            local = assigned is not None and (operand.lstrip().startswith("&") or first.group(1) in assigned)
            out |= reached.get(first.group(1)) or (set() if local else own)
    return out


_CP_ASYNC = re.compile(r"cp_async_16\b|cp\.async\.c[ag]\.shared\.global")
_ASM_GLOBAL = re.compile(r'"l"\s*\(')
_DEVICE_FN = re.compile(r"__device__[^;{()]*?\b(\w+)\s*\(([^)]*)\)\s*\{")
_SUBSCRIPT = re.compile(r"\b[A-Za-z_]\w*\s*\[[^\]]*\]")


def _cp_async_sources(code: str) -> list:
    """The global-address operands of the code's cp.async copies: an inline asm's `"l"(gmem)` beside the
    instruction, and through a wrapper (`cp_async16(dst, src, ok)` whose body's asm takes its parameter `gmem`) the
    argument each call site passes in that parameter's place."""
    out = []
    for fn in _DEVICE_FN.finditer(code):
        body = code[fn.end():code.find("\n}", fn.end())]
        if not _CP_ASYNC.search(body):
            continue
        params = [(re.findall(r"[A-Za-z_]\w*", q) or [""])[-1] for q in fn.group(2).split(",")]
        used = {_operand(body, g.end() - 1).strip() for g in _ASM_GLOBAL.finditer(body)}
        slots = [i for i, q in enumerate(params) if q in used]
        for call in re.finditer(rf"\b{re.escape(fn.group(1))}\s*\(", code):
            if call.start() == fn.start(1):
                continue
            args = _split_args(_operand(code, call.end() - 1))
            out += [args[i] for i in slots if i < len(args)]
    for m in _CP_ASYNC.finditer(code):
        stmt = code[m.start():code.find(";", m.start())]
        out += [_operand(stmt, g.end() - 1) for g in _ASM_GLOBAL.finditer(stmt)]
    return out


def _split_args(text: str) -> list:
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def copied_by_cp_async(code: str, tensors: tuple, index: frozenset = frozenset()) -> set:
    """The entry tensors a cp.async copies from: its source operands traced through the assignments of pointers
    (an index read, `block_tables[j]`, is a value the address is computed with, not a base it copies from; so is
    anything read from an `index` tensor: paged_decode_cuda's `r = kv_row(table, ...)` offsets the K/V row it copies)."""
    sources = {}
    for name, rhs in _ASSIGN.findall(code):
        sources.setdefault(name, set()).update(_NAME.findall(_SUBSCRIPT.sub(" ", rhs)))
    names = {t for t, _, _ in tensors} - index
    out, seen = set(), set()
    todo = [n for operand in _cp_async_sources(code) for n in _NAME.findall(_SUBSCRIPT.sub(" ", operand))]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        if n in names:
            out.add(n)
        todo += sources.get(n, ())
    return out


_ARANGE_OF = re.compile(r"tl\.arange\(\s*0\s*,\s*([A-Za-z_0-9 *+\-/]+?)\s*\)")
_OPS = {ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub, ast.FloorDiv: operator.floordiv}


def _pow2(x) -> bool:
    return x >= 1 and not x & (x - 1)


@functools.lru_cache(maxsize=1024)
def _parsed(expr: str):
    try:
        return ast.parse(expr, mode="eval").body
    except SyntaxError:
        return None


def _value(expr: str, names: dict) -> int | None:
    """An arange bound (a constexpr, an int, or +, -, *, // of them) under the launch's constexprs;
    None where it names anything else."""
    def ev(node):
        if isinstance(node, ast.Constant) and type(node.value) is int:
            return node.value
        if isinstance(node, ast.Name) and type(names.get(node.id)) is int:
            return names[node.id]
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            a, b = ev(node.left), ev(node.right)
            return None if a is None or b is None else _OPS[type(node.op)](a, b)
        return None
    node = _parsed(expr)
    return None if node is None else ev(node)


def _jit_bodies(lines: list) -> dict:
    """name -> (def line, end) of every @triton.jit function."""
    out = {}
    for i, line in enumerate(lines):
        m = re.match(r"def (\w+)\(", line) if line.startswith("def ") else None
        if m and i and lines[i - 1].startswith("@triton.jit"):
            end = next((j for j in range(i + 1, len(lines)) if lines[j] and not lines[j][0].isspace()
                        and not lines[j].startswith(")")), len(lines))
            out[m.group(1)] = (i, end)
    return out


def _arange_frames(lines: list, bodies: dict, name: str, consts: dict, seen: frozenset) -> list | None:
    """Triton's frames (def line, line, column, message or None), innermost first, of the first
    non-power-of-2 arange reached from jit function `name`: its own, or one of a jit helper it calls
    (a helper's constexpr parameters take the caller's values of the same name)."""
    start, end = bodies[name]
    callees = sorted(set(bodies) - seen - {name})
    calls = re.compile(r"\b(" + "|".join(map(re.escape, callees)) + r")\(") if callees else None
    for j in range(start + 1, end):
        found = []
        for m in _ARANGE_OF.finditer(lines[j]) if "tl.arange" in lines[j] else ():
            n = _value(m.group(1), consts)
            if n is not None and not _pow2(n):
                found.append((m.start(), [(start, j, m.start(), "arange's range must be a power of 2")]))
        for m in calls.finditer(lines[j]) if calls and any(c in lines[j] for c in callees) else ():
            inner = _arange_frames(lines, bodies, m.group(1), consts, seen | {name})
            if inner:
                found.append((m.start(), inner + [(start, j, m.start(), None)]))
        if found:
            return min(found)[1]
    return None


def arange_site(module: OpModule, variant: Variant, params: dict, task: Task, code: str) -> tuple | None:
    """(the arange's bound, its value, Triton's frames innermost first) of the first `tl.arange(0, N)`
    a launched Triton kernel reaches whose N the launch binds to an integer that is not a power of 2,
    or None."""
    specs = module.compile_specs(variant, own(params), task)
    bounds = set(_ARANGE_OF.findall(code))
    if not any((n := _value(b, s.constexprs)) is not None and not _pow2(n) for b in bounds for s in specs):
        return None              # the fast path: every arange the code has is a power of 2 here
    lines = code.split("\n")
    bodies = _jit_bodies(lines)
    for spec in specs:
        if spec.name not in bodies:
            continue
        frames = _arange_frames(lines, bodies, spec.name, spec.constexprs, frozenset())
        if frames:
            d, j, col, _ = frames[0]
            bound = _ARANGE_OF.match(lines[j], col).group(1)
            return bound, _value(bound, spec.constexprs) or 0, frames
    return None


@candidate_cache
def violation(module: OpModule, variant: Variant, params: dict, task: Task) -> tuple | None:
    """(rule, subject, value, need) of the first rule the candidate's code breaks at this task's shape,
    or None: ('tma' | 'bulk_copy' | 'vector16' | 'vector8' | 'vector4' | 'word4', tensor, row bytes, multiple) or
    ('arange', constexpr, value, 'a power of 2')."""
    if module.impl == "triton" and not all(_pow2(v) for v in task.dims.values()) and any(
            type(v) is int and not _pow2(v) for s in module.compile_specs(variant, own(params), task)
            for v in s.constexprs.values()):
        site = arange_site(module, variant, params, task, render(module, variant, params, task))
        if site is not None:
            return "arange", site[0], site[1], "a power of 2"
    if task.gpu.vendor != "nvidia" or not misaligned(module, task):
        return None
    tensors = rows(module, task)
    code = render(module, variant, params, task)
    if module.impl == "cuda" and "cuTensorMapEncodeTiled" in code:
        for base, stride in map_strides(code, task.dims):
            if stride % 16:
                return "tma", base, stride, 16
    hits = _accesses(code, module.impl, tensors, index_tensors(module))
    for rule, need, hit in hits:
        for name, row, _ in tensors:
            if name in hit and row % need:
                return rule, name, row, need
    return None


_MAP_HELPER = re.compile(r"static\s+CUtensorMap\s+(\w+)\(([^)]*)\)\s*\{")
_MAP_STATEMENT = re.compile(r"CUtensorMap\s+[^;{]*=[^;]*;")


def map_strides(code: str, dims: dict) -> list:
    """[(the base argument, a global stride in bytes)] of every tensor map the host code makes through a helper
    (`kmajor_map(a, M, K, BM)`): the helper's `strides[] = {...}` evaluated with its parameters bound to the call's
    arguments and the task's dims. The driver's cuTensorMapEncodeTiled wants each a multiple of 16; a map a helper
    builds over a workspace (gemm_fp4_cuda's dequantized [M, K] copies, K x 2 bytes a row) is checked too, which the
    entry's rows are not. A stride the dims do not decide is left out."""
    out = []
    helpers = {m.group(1): (m.group(2), code[m.end():code.find("return map;", m.end())]) for m in _MAP_HELPER.finditer(code)}
    for stmt in _MAP_STATEMENT.findall(code):
        for call in re.finditer(r"\b(\w+)\(", stmt):
            if call.group(1) not in helpers:
                continue
            params, body = helpers[call.group(1)]
            names = [(_NAME.findall(q) or [""])[-1] for q in params.split(",")]
            args = _split_args(_operand(stmt, call.end() - 1))
            bound = {n: v for n, a in zip(names, args) if (v := _value(a.strip(), dims)) is not None}
            found = re.search(r"strides\[\d+\]\s*=\s*\{([^}]*)\}", body)
            for term in _split_args(found.group(1)) if found else ():
                v = _value(re.sub(r"\(\s*cuuint64_t\s*\)", "", term).strip(), {**dims, **bound})
                if v is not None:
                    at = names.index("base") if "base" in names and names.index("base") < len(args) else 0
                    out.append(((_NAME.findall(args[at]) or ["?"])[-1] if args else "?", v))
    return out


@functools.lru_cache(maxsize=2048)
def _accesses(code: str, impl: str, tensors: tuple, index: frozenset = frozenset()) -> tuple:
    """((rule, bytes needed, the tensors its instructions may reach), ...) of one candidate's code; `index`: the
    entry's index tensors (INDEX_DTYPES: block tables, slot maps), which address a cp.async and are not what it copies."""
    on_chip, reached = on_chip_names(code), reach(code, {name for name, _, _ in tensors})
    assigned = frozenset(name for name, _ in _ASSIGN.findall(code))
    return tuple((rule, need, frozenset(accessed(pattern, code, tensors, on_chip, reached,
                                                 assigned if rule in TRACED_ONLY else None, index)))
                 for rule, need, pattern, rule_impl in RULES if rule_impl == impl)


INDEX_DTYPES = ("int32", "int64")


def index_tensors(module: OpModule) -> frozenset:
    """Names of the entry's tensors of an index dtype (INDEX_DTYPES)."""
    return frozenset(a.name for a in (module.entry.args if module.entry is not None else ())
                     if isinstance(a, Arg) and a.dtype in INDEX_DTYPES)


def error_text(found: tuple, module: OpModule, variant: Variant, params: dict, task: Task) -> str:
    """The tool's report of a violation (see the module docstring): Triton's CompilationError for a
    non-power-of-2 arange, else the runtime's error as the harness prints it."""
    from .runtime_texts import accelerator_error
    if found[0] == "arange":
        from .slips.triton_slips import CHAINED, compilation_error
        lines = render(module, variant, params, task).split("\n")
        frames = arange_site(module, variant, params, task, "\n".join(lines))[2]
        return CHAINED.join(compilation_error(lines, *frame) for frame in frames)
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
