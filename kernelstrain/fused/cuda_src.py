"""CUDA kernels of a fused candidate and their torch bindings: the source load_inline builds.

Elementwise kernels: one thread an element (`vec` 0), or `vec` elements a thread through one
aligned vector load with a scalar tail for the last n % vec elements. Row kernels: one block a
row (or `rows_per_block` rows, `row_threads` threads each: a short row's warp), block reductions by
warp shuffles; re-reading the row for each pass, or (`cached`) holding it in registers. Every kernel computes in fp32 and stores in the tensor's dtype; a bf16 program's rounds each op's result to bf16 where the reference's tensors hold it (exprs.ROUND).

Bugs (written in only where they break this program: module.py decides):
  no_bounds_check     the vector kernel without its scalar tail
  broadcast_index     a per-channel parameter indexed by i % C, not (i / inner) % C
  no_max_subtraction  exp of the raw element in softmax / log_softmax / logsumexp
  wrong_reduce_dim    the row read as C contiguous elements, not C elements `inner` apart
  half_accumulator    each thread's partial sums kept in a bf16 register (bf16 programs)
"""
from __future__ import annotations

from .chain import chain_lines, kernel_args, rounded_entry
from .exprs import CHANNEL_PARAMS
from .kernels import Kernel, chain_parts, row_step
from .recipes import CUDA_WORDS, recipe
from .view import ProgramView

SCALAR = {"fp32": "float", "bf16": "__nv_bfloat16"}

PRELUDE = """#include <cuda_bf16.h>
#include <math_constants.h>

typedef {scalar} scalar_t;

__device__ __forceinline__ float to_f(float v) {{ return v; }}
__device__ __forceinline__ float to_f(__nv_bfloat16 v) {{ return __bfloat162float(v); }}
__device__ __forceinline__ void store_f(float* p, float v) {{ *p = v; }}
__device__ __forceinline__ void store_f(__nv_bfloat16* p, float v) {{ *p = __float2bfloat16(v); }}
"""

VECTOR = """
template <typename T, int N>
struct alignas(sizeof(T) * N) Pack {
    T v[N];
};
"""

# one block reduction per combine: the same code, with the warp step and the empty partial's value.
# ROWS rows a block, THREADS threads a row: a row of one warp needs no shared memory nor barrier.
BLOCK_REDUCE = """template <int THREADS, int ROWS = 1>
__device__ float block_{name}(float v) {{
    __shared__ float partial[ROWS][32];
    v = warp_{name}(v);
    if (THREADS == 32) return v;
    const int sub = threadIdx.x / THREADS, lane = threadIdx.x & 31, warp = (threadIdx.x % THREADS) >> 5;
    if (lane == 0) partial[sub][warp] = v;
    __syncthreads();
    v = warp_{name}(lane < THREADS / 32 ? partial[sub][lane] : {identity});
    __syncthreads();
    return v;
}}
"""

REDUCE = """
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Every thread gets the block's total: warps reduce by shuffles, warp 0's lanes hold the partials.
""" + "\n".join(BLOCK_REDUCE.format(name=name, identity=identity) for name, identity in
               (("sum", "0.f"), ("max", "-CUDART_INF_F")))


def _ptrs(args: list) -> str:
    return ", ".join(f"const scalar_t* __restrict__ {n}" for n, _ in args)


def _host_args(args: list) -> str:
    return ", ".join(f"torch::Tensor {n}" for n, _ in args)


def _launch_args(args: list) -> str:
    return ", ".join(f"(const scalar_t*){n}.data_ptr()" for n, _ in args)


def _checks(args: list) -> list[str]:
    return [f'    TORCH_CHECK({n}.is_contiguous(), "{n} must be contiguous");' for n, _ in args]


def _load(ptr: str, index: str) -> str:
    return f"to_f({ptr}[{index}])"


def ew_kernel(view: ProgramView, k: Kernel, name: str, params: dict, bug: str | None) -> tuple[str, str]:
    """(kernel, host function) of an elementwise kernel."""
    g = view.kernel_geometry(k)
    threads, vec = params["threads"], params.get("vec", 0)
    upper = name.upper()
    chan = f"i % {g.C}" if bug == "broadcast_index" else f"(i / {upper}_INNER) % {upper}_C"
    args = kernel_args(view, k)
    [(entry, part)] = chain_parts(view.steps, k)
    body = chain_lines(view, k, entry, part, "cuda", chan, "i", _load)
    consts = [f"constexpr int {upper}_THREADS = {threads};"]
    if any(view.steps[j]["op"] in CHANNEL_PARAMS for j in k.steps) and bug != "broadcast_index":
        consts += [f"constexpr long {upper}_C = {g.C};", f"constexpr long {upper}_INNER = {g.inner};"]
    sig = f"__global__ void __launch_bounds__({upper}_THREADS) {name}_kernel({_ptrs(args)}, scalar_t* __restrict__ y, long n)"

    def element(load_v: str, store: str, pad: str) -> list[str]:
        return [pad + f"float v = {load_v};"] + [pad + s for s in body] + [pad + store]
    if not vec:
        lines = [sig + " {", f"    const long i = (long)blockIdx.x * {upper}_THREADS + threadIdx.x;", "    if (i < n) {",
                 *element("to_f(x[i])", "store_f(&y[i], v);", "        "), "    }", "}"]
        per_block = f"{upper}_THREADS"
    else:
        consts.append(f"constexpr int {upper}_VEC = {vec};")
        pack = f"Pack<scalar_t, {upper}_VEC>"
        lines = [sig + " {", f"    const long base = ((long)blockIdx.x * {upper}_THREADS + threadIdx.x) * {upper}_VEC;",
                 f"    if (base + {upper}_VEC <= n) {{",
                 f"        const {pack} in = *reinterpret_cast<const {pack}*>(x + base);",
                 f"        {pack} out;", "#pragma unroll", f"        for (int e = 0; e < {upper}_VEC; ++e) {{",
                 "            const long i = base + e;",
                 *element("to_f(in.v[e])", "store_f(&out.v[e], v);", "            "), "        }",
                 f"        *reinterpret_cast<{pack}*>(y + base) = out;"]
        if bug == "no_bounds_check":
            lines += ["    }", "}"]
        else:
            lines += ["    } else {", "        // the tail: the last n % VEC elements, one at a time",
                      "        for (long i = base; i < n; ++i) {",
                      *element("to_f(x[i])", "store_f(&y[i], v);", "            "), "        }", "    }", "}"]
        per_block = f"{upper}_THREADS * {upper}_VEC"
    host = [f"torch::Tensor {name}({_host_args(args)}) {{", *_checks(args),
            "    auto y = torch::empty_like(x);", "    const long n = x.numel();",
            f"    const int blocks = (int)((n + {per_block} - 1) / ({per_block}));",
            f"    {name}_kernel<<<blocks, {upper}_THREADS>>>(",
            f"        {_launch_args(args)}, (scalar_t*)y.data_ptr(), n);",
            "    return y;", "}"]
    return "\n".join(consts + lines), "\n".join(host)


MAX_CACHED_ITEMS = 16     # values of its row one thread holds in registers; a longer row is re-read per pass


def cached_row(params: dict, C: int) -> bool:
    """Whether a row kernel of the register-caching rung holds its row in registers here."""
    return bool(params.get("cached")) and -(-C // params["row_threads"]) <= MAX_CACHED_ITEMS


def row_kernel(view: ProgramView, k: Kernel, name: str, params: dict, bug: str | None) -> tuple[str, str]:
    """(kernel, host function) of a row kernel: one block a row of C elements `inner` apart."""
    steps = view.steps
    r = row_step(steps, k)
    op = steps[r]["op"]
    g = view.geometry(r)
    threads, cached, rows_per = params["row_threads"], cached_row(params, g.C), params.get("rows_per_block", 1)
    upper = name.upper()
    bf16 = view.dtype == "bf16"
    rec = recipe(op, bug == "no_max_subtraction", bf16)
    words = {**CUDA_WORDS, "C": f"{upper}_C", "w": f"to_f(w{r}[c])", "b": f"to_f(b{r}[c])"}
    args = kernel_args(view, k)
    (entry, pre), (_, post) = chain_parts(steps, k)
    contiguous = bug == "wrong_reduce_dim" or g.inner == 1
    stride = "1" if contiguous else f"{upper}_INNER"
    base = f"row * {upper}_C" if contiguous else f"(row / {upper}_INNER) * {upper}_C * {upper}_INNER + row % {upper}_INNER"
    pre_lines = chain_lines(view, k, entry, pre, "cuda", "c", f"base + (long)c * {stride}", _load, stored=False)
    consts = [f"constexpr int {upper}_THREADS = {threads};", f"constexpr long {upper}_C = {g.C};"]
    if not contiguous:
        consts.append(f"constexpr long {upper}_INNER = {g.inner};")
    tid, block = "threadIdx.x", f"{upper}_THREADS"
    if rows_per > 1:
        consts.append(f"constexpr int {upper}_ROWS = {rows_per};")
        tid, block = f"tid", f"{upper}_THREADS * {upper}_ROWS"
    sig = f"__global__ void __launch_bounds__({block}) {name}_kernel({_ptrs(args)}, scalar_t* __restrict__ y, long rows)"
    if rows_per > 1:
        # a row a group of THREADS threads; a last block's spare groups reduce the last row again (every
        # thread must reach the barriers) and store nothing
        lines = [sig + " {", f"    const int tid = threadIdx.x % {upper}_THREADS;",
                 f"    const long want = (long)blockIdx.x * {upper}_ROWS + threadIdx.x / {upper}_THREADS;",
                 "    const bool live = want < rows;", "    const long row = live ? want : rows - 1;",
                 f"    const long base = {base};"]
    else:
        lines = [sig + " {", "    const long row = blockIdx.x;", f"    const long base = {base};"]
    reduce_args = f"{upper}_THREADS, {upper}_ROWS" if rows_per > 1 else f"{upper}_THREADS"
    live = "live && " if rows_per > 1 else ""
    if cached:
        items = -(-g.C // threads)
        consts.append(f"constexpr int {upper}_ITEMS = {items};")
        lines += [f"    float vals[{upper}_ITEMS];", "#pragma unroll", f"    for (int t = 0; t < {upper}_ITEMS; ++t) {{",
                  f"        const int c = {tid} + t * {upper}_THREADS;", "        float v = 0.f;",
                  f"        if (c < {upper}_C) {{", f"            v = to_f(x[base + (long)c * {stride}]);",
                  *["            " + s for s in pre_lines], "        }", "        vals[t] = v;", "    }"]

        def loop(inner: list[str]) -> list[str]:
            return ["#pragma unroll", f"    for (int t = 0; t < {upper}_ITEMS; ++t) {{",
                    f"        const int c = {tid} + t * {upper}_THREADS;", f"        if (c < {upper}_C) {{",
                    "            float v = vals[t];", *["            " + s for s in inner], "        }", "    }"]
    else:
        def loop(inner: list[str]) -> list[str]:
            return [f"    for (int c = {tid}; c < {upper}_C; c += {upper}_THREADS) {{",
                    f"        float v = to_f(x[base + (long)c * {stride}]);", *["        " + s for s in pre_lines],
                    *["        " + s for s in inner], "    }"]
    names = [result.split(" = ")[0] for _, _, result in rec.passes]
    lines.append(f"    float {', '.join(names)};")
    for combine, term, result in rec.passes:
        target, value = result.split(" = ")
        if combine == "sum" and bug == "half_accumulator":
            lines += ["    {", "    scalar_t acc_h = __float2bfloat16(0.f);",
                      *loop([f"acc_h = __float2bfloat16(to_f(acc_h) + {term.format(**words)});"]),
                      f"    const float acc = block_sum<{reduce_args}>(to_f(acc_h));"]
        else:
            ident = "0.f" if combine == "sum" else "-CUDART_INF_F"
            acc = "acc += {};" if combine == "sum" else "acc = fmaxf(acc, {});"
            lines += ["    {", f"    float acc = {ident};", *loop([acc.format(term.format(**words))]),
                      f"    acc = block_{combine}<{reduce_args}>(acc);"]
        lines += [f"    {target} = {value.format(acc='acc', **words)};", "    }"]
    if rec.out:
        out_stmt = rec.out.format(**words) + ";"
        post_lines = rounded_entry(view, post, "cuda") + chain_lines(view, k, r, post, "cuda", "c", f"base + (long)c * {stride}", _load)
        store = f"store_f(&y[base + (long)c * {stride}], v);"
        lines += loop([out_stmt, *post_lines, f"if (live) {store}" if rows_per > 1 else store])
        out_shape = "auto y = torch::empty_like(x);"
    else:
        post_lines = rounded_entry(view, post, "cuda") + chain_lines(view, k, r, post, "cuda", "0", "row", _load)
        lines += [f"    if ({live}{tid} == 0) {{", f"        float v = {rec.value.format(**words)};",
                  *["        " + s for s in post_lines], "        store_f(&y[row], v);", "    }"]
        out_shape = f"auto sizes = x.sizes().vec();\n    sizes[{view.steps[r]['params']['dim'] % len(steps[r]['in']['shape'])}] = 1;\n" \
                    "    auto y = torch::empty(sizes, x.options());"
    lines.append("}")
    host = [f"torch::Tensor {name}({_host_args(args)}) {{", *_checks(args), f"    {out_shape}",
            f"    const long rows = x.numel() / {upper}_C;",
            f"    {name}_kernel<<<(int)((rows + {rows_per} - 1) / {rows_per}), {block}>>>(" if rows_per > 1 else
            f"    {name}_kernel<<<(int)rows, {upper}_THREADS>>>(",
            f"        {_launch_args(args)}, (scalar_t*)y.data_ptr(), rows);", "    return y;", "}"]
    return "\n".join(consts + lines), "\n".join(host)


def prototypes(source: str, names: list[str]) -> str:
    """The declarations load_inline's C++ side binds: each host function's first line, as a prototype."""
    lines = source.split("\n")
    return "\n".join(next(line[:-2] + ";" for line in lines if line.startswith(f"torch::Tensor {n}(")) for n in names)
