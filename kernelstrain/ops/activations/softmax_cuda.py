"""Row softmax in CUDA: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)), fp32 math.

Ladder: one thread per row (max, sum and output passes) -> block per row with shared-
memory tree reductions -> warp-shuffle reductions -> online softmax (running max and
rescaled sum in ONE pass, then the output pass) -> online softmax with 16-byte vector
loads and rows packed per block (sub-warp rows for short C) -> the row split over CTAs for few
long rows (_softmax_rows.py).
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..unroll import PRAGMA_UNROLL, launch_of, render_of, row_trips
from ..dialect import prelude, shfl_xor_macro
from ..norms._norms import block_row_rounds
from ._act import host_line
from ._softmax_rows import (ROW_THREADS, SPLIT_MEMORY_EFF, SPLITS, merge_issue_s, split_row_launch, split_row_src,
                            with_block_merge)
from .softmax_spec import ENTRY, SoftmaxSpec

THREADS = Param("threads", (128, 256, 512, 1024), 512)
SIG = "softmax_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int R, int C)"
NEG_BIG = "#define NEG_BIG (-3.402823466e+38f)  // finite -inf: NEG_BIG - NEG_BIG = 0, not NaN\n"
RESCALED = "d_o * __expf(m_o - m_new)"   # the other partial's sum at the new max; missing_scale drops the rescale


def host(task, grid: str, block: str) -> str:
    return host_line(ENTRY, task, "softmax_kernel", grid, block)


# -- row_per_thread ------------------------------------------------------------------------
def row_per_thread_launch(p, task):
    # three strided walks per row; lanes hit a different 32-byte sector each
    r, threads = task["R"], p["threads"]
    return Launch(grid=cdiv(r, threads), threads=threads, regs=32, bytes_per_access=32,
                  traffic=3.4, lane_util=min(1.0, r / threads))


def row_per_thread_src(p, task, init="0.f", col="i"):
    return f"""
// One thread per row, three passes: lanes of a warp read addresses C elements apart.
extern "C" __global__ void {SIG} {{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= R) return;
    const scalar_t* xr = x + (size_t)row * C;
    scalar_t* yr = y + (size_t)row * C;
    float m = NEG_BIG;
    for (int i = 0; i < C; ++i) m = fmaxf(m, to_float(xr[i]));
    // the denominator is one thread's running sum of C terms: in fp32 the small terms get absorbed
    // (-2e-4 of the sum at C = 151936), so it is accumulated in double
    double d = {init};
    for (int i = 0; i < C; ++i) d += __expf(to_float(xr[i]) - m);
    const float inv = (float)(1.0 / d);
    for (int i = 0; i < C; ++i) yr[i] = from_float(__expf(to_float(xr[{col}]) - m) * inv);
}}
{host(task, f"({task['R']} + {p['threads']} - 1) / {p['threads']}", str(p['threads']))}"""


# -- smem_block_reduce, warp_shuffle, online_softmax: a block per row -----------------------
def block_launch(smem_of, traffic: float, reductions: int):
    """x read for the max, the sum and the output (traffic 2.0), or (m, d) in one pass + output (1.5);
    `reductions` block-wide reductions a row waits on (block_row_rounds)."""
    def launch(p, task):
        threads = p["threads"]
        return Launch(grid=task["R"], threads=threads, smem_bytes=smem_of(threads, cdiv(threads, task.gpu.warp)),
                      regs=32, bytes_per_access=DTYPE_BYTES[task.dtype], traffic=traffic,
                      lane_util=min(1.0, task["C"] / threads),
                      rounds=block_row_rounds(threads, task.gpu.warp, reductions))
    return launch


def three_pass(task, reduce_max: str, reduce_sum: str, scale: str) -> str:
    return f"""
// One block per row, three passes over x: row max, sum of exp, output.
extern "C" __global__ void __launch_bounds__(THREADS)
{SIG} {{
    __shared__ float red[RED_SLOTS];
    const scalar_t* xr = x + (size_t)blockIdx.x * C;
    scalar_t* yr = y + (size_t)blockIdx.x * C;
    float m = NEG_BIG;
    for (int i = threadIdx.x; i < C; i += THREADS) m = fmaxf(m, to_float(xr[i]));
    m = {reduce_max};
    float d = 0.f;
    for (int i = threadIdx.x; i < C; i += THREADS) d += __expf(to_float(xr[i]) - m);
    const float inv = 1.f / {reduce_sum};
    for (int i = threadIdx.x; i < C; i += THREADS) yr[i] = from_float(__expf(to_float(xr[i]) - m){scale});
}}
{host(task, "R", "THREADS")}"""


def smem_block_reduce_src(p, task, barrier="\n        __syncthreads();", root="0"):
    helpers = "".join(f"""
__device__ __forceinline__ float tree_{name}(float v, float* red) {{
    red[threadIdx.x] = v;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {{
        if (threadIdx.x < stride) red[threadIdx.x] = {op};{barrier}
    }}
    const float total = red[{root}];
    __syncthreads();  // red[] is reused by the next reduction
    return total;
}}
""" for name, op in (("max", "fmaxf(red[threadIdx.x], red[threadIdx.x + stride])"),
                                                   ("sum", "red[threadIdx.x] + red[threadIdx.x + stride]")))
    return (f"\n#define THREADS {p['threads']}\n#define RED_SLOTS THREADS\n"
            "// Tree reductions in shared memory: THREADS partials halve each step."
            + helpers + three_pass(task, "tree_max(m, red)", "tree_sum(d, red)", " * inv"))


def warp_shuffle_src(p, task, init="0.f", scale=" * inv"):
    helpers = "".join(f"""
__device__ __forceinline__ float block_{name}(float v, float* red) {{
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = warp_{name}(v);
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = (threadIdx.x < THREADS / WARP_SIZE) ? red[lane] : {ident};
    if (warp == 0) v = warp_{name}(v);
    if (threadIdx.x == 0) red[0] = v;
    __syncthreads();
    const float total = red[0];
    __syncthreads();  // red[] is reused by the next reduction
    return total;
}}
""" for name, ident in (("max", "NEG_BIG"), ("sum", init)))
    return (f"\n#define THREADS {p['threads']}\n#define RED_SLOTS (THREADS / WARP_SIZE)\n"
            "// Block reductions: shuffles inside each warp, then warp 0 combines the warp results."
            + helpers + three_pass(task, "block_max(m, red)", "block_sum(d, red)", scale))


def md_helpers(task, width: str, other: str) -> str:
    return f"""
{shfl_xor_macro(task)}
// Merge two online-softmax partials (max m, sum d of exp(x - m)): rescale both to the larger max.
__device__ __forceinline__ void md_merge(float& m, float& d, float m_o, float d_o) {{
    const float m_new = fmaxf(m, m_o);
    d = d * __expf(m - m_new) + {other};
    m = m_new;
}}

// Butterfly merge across {width} lanes (a whole warp, or a sub-warp row segment).
__device__ __forceinline__ void shfl_md(float& m, float& d) {{
#pragma unroll
    for (int o = {width} / 2; o > 0; o >>= 1) md_merge(m, d, SHFL_XOR(m, o), SHFL_XOR(d, o));
}}
"""


def online_softmax_src(p, task, last="WARPS", other=RESCALED):
    return f"""
#define THREADS {p['threads']}
#define WARPS (THREADS / WARP_SIZE)
{md_helpers(task, "WARP_SIZE", other)}
// Pass 1 keeps a running max and a sum rescaled whenever the max grows (online
// softmax), so the statistics take one read of x; pass 2 writes the output.
extern "C" __global__ void __launch_bounds__(THREADS)
{SIG} {{
    __shared__ float red_m[WARPS], red_d[WARPS];
    const scalar_t* xr = x + (size_t)blockIdx.x * C;
    scalar_t* yr = y + (size_t)blockIdx.x * C;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    float m = NEG_BIG, d = 0.f;
    for (int i = threadIdx.x; i < C; i += THREADS) {{
        const float v = to_float(xr[i]);
        if (v > m) {{ d = d * __expf(m - v) + 1.f; m = v; }}
        else d += __expf(v - m);
    }}
    shfl_md(m, d);
    if (lane == 0) {{ red_m[warp] = m; red_d[warp] = d; }}
    __syncthreads();
    m = NEG_BIG; d = 0.f;
    for (int w = 0; w < {last}; ++w) md_merge(m, d, red_m[w], red_d[w]);
    const float inv = 1.f / d;
    for (int i = threadIdx.x; i < C; i += THREADS) yr[i] = from_float(__expf(to_float(xr[i]) - m) * inv);
}}
{host(task, "R", "THREADS")}"""


# -- vectorized_online ---------------------------------------------------------------------
def vectorized_online_launch(p, task):
    threads, rows, vec, gpu = p["threads"], p["rows_per_block"], 16 // DTYPE_BYTES[task.dtype], task.gpu
    smem = rows * cdiv(threads, gpu.warp) * 8 if threads > gpu.warp else 0
    # every thread of a row merges its WARPS_PER_ROW warps' partials (a sub-warp row: none): _softmax_rows.MERGE_LANE_SLOTS
    merges = task["R"] * threads * (threads // gpu.warp if threads > gpu.warp else 0)
    return Launch(grid=cdiv(task["R"], rows), threads=threads * rows, smem_bytes=smem, regs=32,
                  bytes_per_access=16, traffic=1.5, lane_util=min(1.0, task["C"] / (threads * vec)),
                  issue_s=merge_issue_s(task, merges))


def vectorized_online_src(p, task, last="chunks", other=RESCALED):
    threads, rows = p["threads"], p["rows_per_block"]
    return f"""
#define THREADS {threads}          // threads per row
#define ROWS_PER_BLOCK {rows}
#define SEG (THREADS < WARP_SIZE ? THREADS : WARP_SIZE)   // lanes of one row inside a warp
#define WARPS_PER_ROW (THREADS / SEG)
{md_helpers(task, "SEG", other)}
// 16 bytes per load: 4 fp32 or 8 fp16/bf16 elements.
constexpr int VEC = 16 / sizeof(scalar_t);
union Pack {{ uint4 u; scalar_t h[VEC]; }};

// Online softmax over uint4 vectors: per vector, one max, one rescale and VEC exps.
// Short rows use a sub-warp segment per row (no shared memory, no barrier).
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
{SIG} {{
    const int sub = threadIdx.x / THREADS, tid = threadIdx.x % THREADS;
    const int row = min(blockIdx.x * ROWS_PER_BLOCK + sub, R - 1);
    const scalar_t* xr = x + (size_t)row * C;
    const uint4* xv = reinterpret_cast<const uint4*>(xr);
    const int chunks = C / VEC;
    float m = NEG_BIG, d = 0.f;
    for (int c = tid; c < chunks; c += THREADS) {{
        Pack v; v.u = xv[c];
        float f[VEC], cm = NEG_BIG;
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ f[k] = to_float(v.h[k]); cm = fmaxf(cm, f[k]); }}
        const float m_new = fmaxf(m, cm);
        d *= __expf(m - m_new);
#pragma unroll
        for (int k = 0; k < VEC; ++k) d += __expf(f[k] - m_new);
        m = m_new;
    }}
    for (int i = chunks * VEC + tid; i < C; i += THREADS) md_merge(m, d, to_float(xr[i]), 1.f);  // ragged tail
    shfl_md(m, d);
#if THREADS > WARP_SIZE
    __shared__ float red_m[ROWS_PER_BLOCK][WARPS_PER_ROW], red_d[ROWS_PER_BLOCK][WARPS_PER_ROW];
    if (tid % WARP_SIZE == 0) {{ red_m[sub][tid / WARP_SIZE] = m; red_d[sub][tid / WARP_SIZE] = d; }}
    __syncthreads();
    m = NEG_BIG; d = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS_PER_ROW; ++w) md_merge(m, d, red_m[sub][w], red_d[sub][w]);
#endif
    if (blockIdx.x * ROWS_PER_BLOCK + sub >= R) return;
    const float inv = 1.f / d;
    uint4* yv = reinterpret_cast<uint4*>(y + (size_t)row * C);
    for (int c = tid; c < {last}; c += THREADS) {{
        Pack v, o; v.u = xv[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(__expf(to_float(v.h[k]) - m) * inv);
        yv[c] = o.u;
    }}
    for (int i = chunks * VEC + tid; i < C; i += THREADS) y[(size_t)row * C + i] = from_float(__expf(to_float(xr[i]) - m) * inv);
}}
{host(task, "(R + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK", "THREADS * ROWS_PER_BLOCK")}"""


def split_row_online_src(p, task, other=RESCALED):
    return split_row_src(md_helpers(task, "WARP_SIZE", other), p, task)


NO_RESCALE = {"other": "d_o"}
# vectorized_online's off_by_one skips storing the last 16-byte chunk of every row: caught only where
# a skipped element's true value is above the tolerance, as KernelBench poisons no output (stale or
# zero memory passes for the tiny ones). Of a 4 * randn row, 11-13 elements are above 1e-2 (bf16,
# fp16) and 120-630 above 1e-4 (fp32); it is offered where one run's skipped elements hold 8 or more
# of them in expectation (a miss ~e^-8), not at R = 32 / 256 (tests/test_label_truth.py)
ABOVE_TOLERANCE_A_ROW = {"bf16": 11, "fp16": 11, "fp32": 120}
SKIPPED_CHUNK_ROWS = (("off_by_one", lambda t, p: t["R"] * (16 // DTYPE_BYTES[t.dtype]) * ABOVE_TOLERANCE_A_ROW[t.dtype]
                       >= 8 * t["C"]),)


# warp_shuffle's wrong_init is the identity warp 0's lanes past the last warp total read (1.f, not 0.f):
# at 1024 threads there are 32 totals, one a lane, so no lane reads it and the sum is right (an H100
# passed it: gpu-check of kernelinfer seed 94664, session 000838 step 10, rel_l2 2e-6).
PADDED_WARP_TOTALS = (("wrong_init", lambda t, p: p["threads"] // 32 < 32),)


class SoftmaxCuda(SoftmaxSpec):
    impl = "cuda"
    variants = (
        Rung("row_per_thread", "one thread per row: max, sum-of-exp and output loops, lanes C apart",
             (Param("threads", (32, 64, 128), 64),), memory_eff=0.45, launch=row_per_thread_launch,
             render=row_per_thread_src, bugs={"wrong_init": {"init": "1.f"}, "off_by_one": {"col": "i + 1"}}),
        # off_by_one reads the tree's partial[1] (half the lanes) for its total; a "stride > 1" loop
        # (partial[1] never added) moved the result by ~1/THREADS, inside KernelBench's 1e-2
        Rung("smem_block_reduce", "block per row, three passes, max and sum as shared-memory tree reductions",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.75, smem="static",
             launch=launch_of(block_launch(lambda t, w: t * 4, 2.0, 2), row_trips("C"), 1),
             render=render_of(smem_block_reduce_src), bugs={"missing_barrier": {"barrier": ""}, "off_by_one": {"root": "1"}}),
        Rung("warp_shuffle", "block per row, three passes, warp_max/warp_sum shuffles, one smem slot per warp",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.82, smem="static",
             launch=launch_of(block_launch(lambda t, w: w * 4, 2.0, 2), row_trips("C"), 1),
             render=render_of(warp_shuffle_src), bugs={"wrong_init": {"init": "1.f"}, "missing_scale": {"scale": ""}},
             bug_tasks=PADDED_WARP_TOTALS),
        Rung("online_softmax", "running max + rescaled sum in one pass, (m, d) pairs merged by shuffles",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.86, smem="static",
             launch=launch_of(with_block_merge(block_launch(lambda t, w: w * 8, 1.5, 1)), row_trips("C"), 1),
             render=render_of(online_softmax_src), bugs={"off_by_one": {"last": "WARPS - 1"}, "missing_scale": NO_RESCALE}),
        Rung("vectorized_online", "online softmax over 16-byte vectors, ROWS rows per block, sub-warp rows",
             (Param("threads", (32, 64, 128, 256, 512, 1024), 512), Param("rows_per_block", (1, 2, 4, 8), 1), PRAGMA_UNROLL),
             memory_eff=0.9, smem="static", launch=launch_of(vectorized_online_launch, row_trips("C", vec=True), 4),
             render=render_of(vectorized_online_src),
             bugs={"missing_scale": NO_RESCALE, "off_by_one": {"last": "chunks - 1"}}, bug_tasks=SKIPPED_CHUNK_ROWS),
        # no wrong_init: a merged sum started at 1 adds 1 to a sum of ~C terms, within tolerance
        # (an H100 passed it 3x); off_by_one (a part dropped) is a small share of the mass too
        Rung("split_row_online", "SPLITS CTAs per row: per-part online (max, sum), a second pass merges and writes",
             (ROW_THREADS, SPLITS), memory_eff=SPLIT_MEMORY_EFF, smem="static", launch=split_row_launch,
             render=split_row_online_src, bugs={"missing_scale": NO_RESCALE}),
    )

    def assemble(self, body, variant, params, task) -> str:
        return f"{prelude(task)}\n{NEG_BIG}{body}"
