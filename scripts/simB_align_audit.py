"""simB (issue 30 item 2): an audit, independent of kernelstrain/feasibility.py's tracing, of every candidate
`kernelstrain sim` times ok at shapes off the menus: does its rendered code break a rule a real build or launch
enforces on NVIDIA's Hopper?

    python3 scripts/simB_align_audit.py [--modules a b ...] [--gpu H100] [--per-rung 6] [--list]

Shapes: per module, the first menu shape with its row dims (the innermost dim of a data tensor, free of choices)
moved down by 1, 2, 4 and 8 of their multiples together, each alone by one (odd), at its least allowed value and at
64x + one multiple (what `sim` accepts: shapes.parse_shape's constraints), every dtype of the module. Candidates:
each rung's defaults plus an even sample of its grid (--per-rung), those `sim.simulate` times ok. Rules read off
the rendered code (not off feasibility's answer):

  tma_stride     Triton tl.make_tensor_descriptor: leading strides x element bytes a multiple of 16 (the
                 descriptor's global strides); CUDA: the strides[] a CUtensorMap helper hands cuTensorMapEncodeTiled,
                 its parameters bound to the host call's arguments (`kmajor_map(A, M, K, BM)`), a multiple of 16
  tma_base       a Triton descriptor made on an offset pointer (its base must be 16-byte aligned too)
  tma_box        every box / block_shape dim <= 256; the inner box >= 16 bytes (Triton), a multiple of 16 bytes
                 (cuTensorMapEncodeTiled), and within the swizzle span (128B swizzle: <= 128 bytes)
  cp_async       a call of a helper whose body issues cp.async.cg (16 bytes) with an argument that points into an
                 entry tensor whose rows are not a multiple of 16 bytes
  vector         a uint4/float4/int4/double2 (16), uint2/float2/int2 (8) or half2/bfloat162 (4) cast of a pointer
                 traced (assignments, both branches of a ternary, index reads left out) into an entry tensor whose
                 rows are misaligned for it, or of an untraced one that is no shared or local array where every
                 data row is; a 4-byte word cast (uint32_t / int / float) only where its first name traces to an
                 entry tensor (else: a workspace carved, a register punned)
  crash          simulating the candidate raises (a shape `sim` accepts that the code cannot be written for)
  wgmma          wgmma.mma_async mMnNkK: M 64, N a multiple of 8 within 8..256, K 16 for f16/bf16 inputs, 32
                 for e4m3/e5m2/s8/u8, 8 for tf32

A finding is printed with the module, rung, parameters, shape, dtype and the rule's text. --list prints every
candidate's verdicts. Exit status 1 if any finding.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.errors import UsageError  # noqa: E402
from kernelstrain.knobs import own, render  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.ops.base import DTYPE_BYTES  # noqa: E402
from kernelstrain.ops.contract import Arg  # noqa: E402
from kernelstrain.shapes import constraints, sim_report  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402

TRITON_ELT = {"*fp32": 4, "*fp16": 2, "*bf16": 2, "*fp8e4nv": 1, "*fp8e5": 1, "*i8": 1, "*u8": 1, "*i32": 4,
              "*i64": 8, "*fp64": 8, "*i16": 2}
TMA_DTYPE_ELT = {"FLOAT16": 2, "BFLOAT16": 2, "FLOAT32": 4, "UINT8": 1, "INT32": 4, "UINT16": 2, "FLOAT64": 8,
                 "INT64": 8, "UINT32": 4, "TFLOAT32": 4}
WGMMA_K = {"f16": 16, "bf16": 16, "e4m3": 32, "e5m2": 32, "s8": 32, "u8": 32, "tf32": 8}
# (bytes, cast types, whether an operand that is no entry tensor may reach one): a word cast of something else is how
# code carves a workspace (`reinterpret_cast<int*>(sorted_ids + T)`) or puns a register, not a data access
VECTORS = ((16, r"uint4|float4|int4|double2|longlong2", True), (8, r"uint2|float2|int2", True),
           (4, r"__half2|__nv_bfloat162|half2", True), (4, r"uint32_t|int32_t|unsigned(?:\s+int)?|int|float", False))


# -- shapes -----------------------------------------------------------------------------------------------------
def row_dims(module) -> list:
    """The free dims (no choices) an innermost dim of a data tensor is, or is computed from (`K // 2`)."""
    cons = constraints(module)
    named = {n for a in module.entry.args if isinstance(a, Arg) and len(a.dims) >= 2 and isinstance(a.dims[-1], str)
             for n in re.findall(r"[A-Za-z_]\w*", a.dims[-1])}
    return sorted(d for d in named if d in module.dims and cons[d][2] is None)


def shapes(module) -> list:
    """Off-menu shapes of misaligned rows (see the module docstring)."""
    cons, base, dims = constraints(module), dict(module.shapes[0]), row_dims(module)

    def ok(d, v):
        mult, cap, _ = cons[d]
        return 1 <= v <= cap and v % mult == 0

    out = [{**base, **{d: base[d] - k * cons[d][0] for d in dims if ok(d, base[d] - k * cons[d][0])}}
           for k in (1, 2, 4, 8)]
    for d in dims:
        out += [{**base, d: base[d] - cons[d][0]}, {**base, d: cons[d][0]}, {**base, d: 64 * base[d] + cons[d][0]}]
    unique = []
    for s in out:
        if s != base and s not in unique and all(ok(d, v) for d, v in s.items() if cons[d][2] is None):
            unique.append(s)
    return unique


def accepted(module, gpu: str, dtype: str, shape: dict) -> bool | str:
    """Whether `kernelstrain sim` accepts the shape (a usage error: no), or the text of its crash."""
    try:
        sim_report(gpu, module.op, module.impl, dtype, ",".join(f"{d}={v}" for d, v in shape.items()))
    except UsageError:
        return False
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return True


# -- what the code does -------------------------------------------------------------------------------------------
# element bytes of every dtype an entry declares (DTYPE_BYTES holds the task dtypes only: the raw uint8 codes of a packed
# fp4 GEMM's operands, a uint8 fp8 output, int4 weights packed in uint32 are data rows too)
ELT = {**DTYPE_BYTES, "uint8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4, "int64": 8, "fp64": 8}


def entry_rows(module, task) -> dict:
    """tensor name -> bytes of its innermost row (sub-byte dtypes count their packed bytes), every Arg of 2+ dims."""
    out = {}
    for a in module.entry.args:
        if isinstance(a, Arg) and len(a.dims) >= 2:
            elt = ELT.get(a.dtype_of(task))
            if elt:
                out[a.name] = a.shape(task)[-1] * elt
    return out


def call_args(code: str, start: int) -> str:
    """The text inside the parentheses that open at or after `start`."""
    i = code.index("(", start)
    depth = 0
    for j in range(i, len(code)):
        depth += {"(": 1, ")": -1}.get(code[j], 0)
        if depth == 0:
            return code[i + 1:j]
    return code[i + 1:]


def evaluate(expr: str, names: dict):
    expr = expr.strip()
    if not re.fullmatch(r"[\w\s*+\-/()]+", expr):
        return None
    used = set(re.findall(r"[A-Za-z_]\w*", expr))
    if not used <= set(names):
        return None
    try:
        return int(eval(expr.replace("/", "//"), {"__builtins__": {}}, {n: names[n] for n in used}))
    except Exception:
        return None


def bracket_list(text: str, key: str) -> list | None:
    m = re.search(rf"\b{key}\s*=\s*\[([^\]]*)\]", text)
    return None if m is None else [x.strip() for x in m.group(1).split(",")]


def triton_findings(module, variant, params, task, code: str) -> tuple:
    """(findings, unresolved) of the Triton descriptors in `code`."""
    found, unresolved = [], 0
    for spec in module.compile_specs(variant, own(params), task):
        names = {**task.dims, **{k: v for k, v in spec.constexprs.items() if type(v) is int},
                 **{k: v for k, v in (spec.ints or {}).items() if type(v) is int}}
        for m in re.finditer(r"tl\.make_tensor_descriptor\(", code):
            args = call_args(code, m.start())
            ptr = args.split(",")[0].strip()
            if not re.fullmatch(r"[A-Za-z_]\w*", ptr):     # an offset base: 16-byte aligned only where the offset is
                found.append(("tma_base", f"descriptor on {ptr!r}: base not a tensor argument"))
                ptr = re.match(r"\W*([A-Za-z_]\w*)", ptr).group(1)
            elt = TRITON_ELT.get(spec.signature.get(ptr, ""))
            strides, block = bracket_list(args, "strides"), bracket_list(args, "block_shape")
            if elt is None or strides is None or block is None:
                unresolved += 1
                continue
            for s in strides[:-1]:
                v = evaluate(s, names)
                if v is None:
                    unresolved += 1
                elif v * elt % 16:
                    found.append(("tma_stride", f"{ptr}: stride {s} = {v} x {elt} B = {v * elt} B, not a multiple of 16"))
            dims = [evaluate(b, names) for b in block]
            if None in dims:
                unresolved += 1
                continue
            if max(dims) > 256:
                found.append(("tma_box", f"{ptr}: block_shape {dims}, a dim > 256"))
            if dims[-1] * elt < 16:
                found.append(("tma_box", f"{ptr}: inner block {dims[-1]} x {elt} B < 16 B"))
    return found, unresolved


def defines(code: str, task) -> dict:
    names = dict(task.dims)
    for name, value in re.findall(r"^\s*#define\s+(\w+)\s+\(?(-?\d+)\)?", code, re.M):
        names[name] = int(value)
    for name, value in re.findall(r"constexpr\s+(?:int|unsigned|uint32_t|size_t)\s+(\w+)\s*=\s*(\d+)\s*;", code):
        names[name] = int(value)
    return names




def split_top(text: str) -> list:
    """`text` split at its top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += {"(": 1, ")": -1, "{": 1, "}": -1, "[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    return out + [cur]


def tma_helper(code: str, name: str):
    """(parameter names, body) of `static CUtensorMap name(...) { ... }`, or None."""
    m = re.search(rf"static\s+CUtensorMap\s+{re.escape(name)}\(([^)]*)\)\s*\{{", code)
    if m is None:
        return None
    params = [re.findall(r"[A-Za-z_]\w*", p)[-1] for p in m.group(1).split(",") if p.strip()]
    return params, code[m.end():code.index("return map;", m.end())]


def encoded_map(body: str, names: dict, base: str) -> tuple:
    """(findings, unresolved) of one cuTensorMapEncodeTiled call in a helper's `body` under `names`."""
    found, unresolved = [], 0
    kind = re.search(r"CU_TENSOR_MAP_DATA_TYPE_(\w+)", body)
    elt = TMA_DTYPE_ELT.get(kind.group(1)) if kind else None
    strides = re.search(r"strides\[\d\]\s*=\s*\{([^}]*)\}", body)
    box = re.search(r"box\[\d\]\s*=\s*\{([^}]*)\}", body)
    swizzle = re.search(r"CU_TENSOR_MAP_SWIZZLE_(\d+)B", body)
    if strides is None or box is None or elt is None:
        return found, 1
    for x in split_top(strides.group(1)):
        v = evaluate(x.replace("(cuuint64_t)", ""), names)
        if v is None:
            unresolved += 1
        elif v % 16:
            found.append(("tma_stride", f"tensor map of {base}: global stride {x.strip()} = {v} B, not a multiple of 16"))
    dims = [evaluate(x.replace("(cuuint32_t)", ""), names) for x in split_top(box.group(1))]
    if None in dims:
        return found, unresolved + 1
    if max(dims) > 256:
        found.append(("tma_box", f"tensor map of {base}: box {dims}, a dim > 256"))
    if dims[0] * elt % 16:
        found.append(("tma_box", f"tensor map of {base}: inner box {dims[0]} x {elt} B not a multiple of 16 B"))
    if swizzle and dims[0] * elt > int(swizzle.group(1)):
        found.append(("tma_box", f"tensor map of {base}: inner box {dims[0]} x {elt} B past the {swizzle.group(1)}B swizzle span"))
    return found, unresolved


def cuda_findings(module, task, code: str, rows: dict) -> tuple:
    found, unresolved = [], 0
    names = defines(code, task)
    # TMA: each CUtensorMap a host statement makes through a helper (`kmajor_map(A, M, K, BM)`), the helper's
    # parameters bound to the call's arguments: its strides[] and box[] evaluated as the driver gets them
    if re.search(r"cuTensorMapEncodeTiled|cp\.async\.bulk\.tensor", code):
        for stmt in re.findall(r"CUtensorMap\s+[^;{]*=[^;]*;", code):
            for call in re.finditer(r"\b(\w+)\(", stmt):
                helper = tma_helper(code, call.group(1))
                if helper is None:
                    continue
                params, body = helper
                args = [x.strip() for x in split_top(call_args(stmt, call.start()))]
                bound = dict(names)
                for p, arg in zip(params, args):
                    v = evaluate(arg.replace("(cuuint32_t)", ""), names)
                    if v is not None:
                        bound[p] = v
                got, miss = encoded_map(body, bound, args[params.index("base")] if "base" in params else "?")
                found += got
                unresolved += miss
    for m in re.finditer(r"wgmma\.mma_async\.sync\.aligned\.m(\d+)n(\d+)k(\d+)\.\w+\.(\w+)\.(\w+)", code):
        mm, n, k, a = int(m.group(1)), int(m.group(2)), int(m.group(3)), m.group(4)
        if mm != 64 or n % 8 or not 8 <= n <= 256 or (a in WGMMA_K and k != WGMMA_K[a]):
            found.append(("wgmma", m.group(0)))
    # global vector accesses and 16-byte cp.async: their operands traced to the entry tensors they point into
    data = [r for r in rows.values()]
    shared = shared_names(code)
    reach = pointer_reach(code, set(rows), shared)
    index = {a.name for a in module.entry.args if isinstance(a, Arg) and a.dtype in ("int32", "int64")}
    for width, types, untraced in VECTORS:
        every = bool(data) and all(r % width for r in data)
        for m in re.finditer(rf"reinterpret_cast<\s*(?:const\s+)?(?:{types})\s*\*\s*>\s*\(", code):
            operand = call_args(code, m.end() - 1).strip()
            first = re.match(r"[(&*\s]*(?:\([^)]*\))?[(&*\s]*([A-Za-z_]\w*)", operand)
            if first is None or first.group(1) in shared or operand.startswith("&"):
                continue
            hit = pointed(operand, reach, rows, index) if untraced else reach.get(first.group(1), set())
            bad = sorted(t for t in hit if rows[t] % width)
            if bad:
                found.append(("vector", f"{width}-byte cast of {operand[:60]!r}: rows of {bad[0]} {rows[bad[0]]:g} B"))
            elif every and untraced and not hit and first.group(1) not in reach:
                found.append(("vector", f"{width}-byte cast of {operand[:60]!r} with every row misaligned ({sorted(set(data))[:4]})"))
    for name in re.findall(r"\b(\w+)\s*\([^)]*\)\s*\{[^}]*cp\.async\.c[ag]\.shared\.global", code):
        for call in re.finditer(rf"\b{name}\s*(?:<[^<>()]*>)?\s*\(", code):
            args = call_args(code, call.start())
            bad = sorted(t for arg in split_top(args) for t in pointed(arg, reach, rows, index) if rows[t] % 16)
            if bad and not code[max(0, call.start() - 40):call.start()].rstrip().endswith(("void", "inline")):
                found.append(("cp_async", f"16-byte cp.async {name}({args.strip()[:50]}...): rows of {bad[0]} {rows[bad[0]]:g} B"))
    return found, unresolved


def pointer_names(expr: str) -> list:
    """The names an address expression is computed from, less index reads (`tables[j]`) and ternary conditions."""
    expr = re.sub(r"\b[A-Za-z_]\w*\s*\[[^\]]*\]", " ", expr)
    depth = 0
    for i, ch in enumerate(expr):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if ch == "?" and depth == 0:
            expr = expr[i + 1:]
            break
    return re.findall(r"[A-Za-z_]\w*", expr)


def pointed(expr: str, reach: dict, rows: dict, index: set) -> set:
    """The entry tensors an address expression points into: its base where that is an entry tensor itself
    (`k_cache + r`: k_cache, whatever r was computed from), else what its names reach, index tensors (int32 / int64:
    block tables, slot maps) left out -- they give offsets, not the data copied."""
    bare = re.sub(r"reinterpret_cast<[^>]*>|static_cast<[^>]*>|\((?:const\s+)?[A-Za-z_][\w:]*\s*\*+\s*\)", " ", expr)
    first = re.match(r"[\s(&*]*([A-Za-z_]\w*)", bare)
    if first and first.group(1) in rows:
        return {first.group(1)}
    return set().union(*(reach.get(n, set()) for n in pointer_names(bare))) - index


def pointer_reach(code: str, tensors: set, shared: set) -> dict:
    """name -> the entry tensors it points into (assignments followed to a fixed point; on-chip arrays none)."""
    sources = {}
    for a, rhs in re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)([^;]*)", code):
        if a not in shared:
            sources.setdefault(a, set()).update(pointer_names(rhs))
    # a helper's pointer parameter points where its call sites' arguments do (`load_rows(sA, A, ...)`)
    for fn in re.finditer(r"\b([A-Za-z_]\w*)\s*\(([^()]*)\)\s*\{", code):
        params = [(re.findall(r"[A-Za-z_]\w*", q) or [""])[-1] for q in fn.group(2).split(",")]
        for call in re.finditer(rf"\b{re.escape(fn.group(1))}\s*(?:<[^<>()]*>)?\s*\(", code):
            if call.start() == fn.start():
                continue
            for q, arg in zip(params, split_top(call_args(code, call.start()))):
                if q and q not in shared:
                    sources.setdefault(q, set()).update(pointer_names(arg))
    out = {t: {t} for t in tensors}
    while True:
        grown = False
        for a, names in sources.items():
            got = set().union(*(out.get(n, set()) for n in names)) - out.get(a, set())
            if got:
                out.setdefault(a, set()).update(got)
                grown = True
        if not grown:
            return out


def shared_names(code: str) -> set:
    """Names of __shared__ and local arrays and the pointers set from them (aligned whatever the shape)."""
    names = set(re.findall(r"__shared__[^;]*?\b([A-Za-z_]\w*)\s*\[", code))
    names |= set(re.findall(r"extern\s+__shared__[^;]*?\b([A-Za-z_]\w*)\s*\[", code))
    names |= set(re.findall(r"^\s*(?:const\s+)?[A-Za-z_][\w:<>]*\s+([A-Za-z_]\w*)\s*\[[^\]]+\]\s*(?:=|;)", code, re.M))
    assigned = [(a, pointer_names(re.sub(r"reinterpret_cast<[^>]*>", " ", rhs))[:1])
                for a, rhs in re.findall(r"\b([A-Za-z_]\w*)\s*=(?!=)([^;]*)", code)]
    while True:
        more = {a for a, first in assigned if first and first[0] in names} - names
        if not more:
            return names
        names |= more


def sampled(variant, per_rung: int) -> list:
    grid = list(param_grid(variant))
    picks = grid[:: max(1, len(grid) // per_rung)] if per_rung else grid
    return [variant.defaults()] + picks


def audit(modules, gpu: str, per_rung: int, listing: bool) -> tuple:
    counts, findings = Counter(), []
    for name in modules:
        m = REGISTRY[name]
        if m.entry is None or not hasattr(m, "variants"):
            continue
        for shape in shapes(m):
            for dtype in m.dtypes:
                verdict = accepted(m, gpu, dtype, shape)
                if verdict is False:
                    continue
                if verdict is not True:
                    counts["crash"] += 1
                    findings.append((name, "(sim)", {}, shape, dtype, "crash", f"kernelstrain sim: {verdict}"))
                    continue
                task = make_task(m, gpu, dtype, shape)
                rows = entry_rows(m, task)
                counts["tasks"] += 1
                for v in m.variants:
                    if v.needs - task.gpu.features:
                        continue
                    for params in sampled(v, per_rung):
                        try:
                            r = simulate(m, v, params, task)
                        except Exception as e:      # sim accepted the shape, and a candidate of it does not build
                            counts["crash"] += 1
                            findings.append((name, v.tag, params, shape, dtype, "crash", f"{type(e).__name__}: {e}"))
                            continue
                        counts["candidates"] += 1
                        if not r.ok:
                            counts[f"not ok ({r.error_class})"] += 1
                            continue
                        counts["ok"] += 1
                        code = render(m, v, params, task)
                        if m.impl == "triton":
                            got, unresolved = triton_findings(m, v, params, task, code)
                        else:
                            got, unresolved = cuda_findings(m, task, code, rows)
                        counts["unresolved"] += unresolved
                        for rule, text in got:
                            counts[rule] += 1
                            findings.append((name, v.tag, params, shape, dtype, rule, text))
                        if listing:
                            print(name, v.tag, params, shape, dtype, got or "clean")
    return counts, findings


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", nargs="*", default=sorted(REGISTRY))
    ap.add_argument("--gpu", default="H100")
    ap.add_argument("--per-rung", type=int, default=6, help="grid points a rung (0: its whole grid)")
    ap.add_argument("--list", action="store_true")
    a = ap.parse_args(argv)
    counts, findings = audit(a.modules, a.gpu, a.per_rung, a.list)
    seen = set()
    for name, tag, params, shape, dtype, rule, text in findings:
        key = (name, tag, rule, text)
        if key in seen:
            continue
        seen.add(key)
        print(f"FINDING {rule:10} {name}/{tag} {params} {shape} {dtype}: {text}")
    print(" ".join(f"{k}={v}" for k, v in sorted(counts.items())))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
