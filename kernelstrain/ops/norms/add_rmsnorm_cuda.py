"""Fused residual add + RMSNorm in CUDA: residual += x; y = residual * rsqrt(mean(residual^2) + eps) * w.

Ladder: an add kernel then an RMSNorm kernel (two launches, residual crosses DRAM three
times) -> one fused kernel with a shared-memory tree sum -> warp shuffles -> 16-byte
uint4 loads/stores -> the summed row cached in registers (no re-read of the residual).
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..unroll import PRAGMA_UNROLL, launch_of, render_of, row_trips
from ..words import VEC, word_regs, word_trips
from ._add_rmsnorm_words import fused_words
from ..row_reread import reread, served_traffic
from ._persistent_norms import climb, add_rmsnorm_src
from ._norms import BLOCK_SUM, VEC_PACK, block_row_rounds
from .add_rmsnorm_spec import ENTRY, AddRMSNormSpec
from ..over_read import CHUNK_LOOP, UNBOUNDED_LOOP

THREADS = Param("threads", (64, 128, 256, 512, 1024), 256)
SCALE = " * to_float(weight[i])"        # the weight multiply that missing_scale drops
VEC_SCALE = " * to_float(w.h[k])"
NO_SCALE = {"scale": ""}
BARRIER = "\n        __syncthreads();"    # between the tree sum's steps; missing_barrier drops it
SIG = """add_rmsnorm_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ residual,
                   const scalar_t* __restrict__ weight, scalar_t* __restrict__ y, int T, int D, float eps)"""


def host(task, grid: str, block: str, pre: str = "") -> str:
    return ENTRY.host(task, "add_rmsnorm_kernel", grid, block, pre=pre)


def block_launch(p, task, smem: int, traffic: float, launches: int = 1, vec: bool = False):
    """Launch model of a block-per-row rung with `smem` bytes, scalar or uint4 loads."""
    d, elt, threads = task["D"], DTYPE_BYTES[task.dtype], p["threads"]
    per = 16 // elt if vec else p.get("vec", 1)      # values one load moves (words.VEC on a scalar rung)
    return Launch(grid=task["T"], threads=threads, smem_bytes=smem, regs=32 if vec else 24 + (per - 1),
                  bytes_per_access=elt * per, traffic=traffic,
                  lane_util=min(1.0, d / (threads * per)), launches=launches,
                  rounds=block_row_rounds(threads, task.gpu.warp, 1))


REREAD_HIT = 1.05     # the stored rows' pair order at 1.0 / 1.05 / 1.1 / 1.15: 0.916 / 0.925 / 0.924 / 0.919


def vector_launch(p, task):
    """vectorized_uint4: pass 2 re-reads the residual row pass 1 wrote, each thread its own chunks, which L1 holds while
    the resident rows fit it (row_reread; then no DRAM traffic: REREAD_HIT, not the 1.25 of a re-read from DRAM) and
    which comes back from past it, one row of the four the kernel moves (x, residual in; residual, y out), where
    they do not. The stored rows: 1.00-1.04x register_cached wherever the rows fit (H100 fp16 T=16384 D=8192 256-1024
    threads, T=4096 D=4096, T=2048 D=2048; H200 likewise), where 1.25 put it 1.07-1.23x; H200 fp16 T=8192 D=5120
    on 64 threads (330 KiB of rows an SM) 1.165x."""
    d, elt = task["D"], DTYPE_BYTES[task.dtype]
    return reread(block_launch(p, task, warp_slots(p, task), served_traffic(task, REREAD_HIT, 1.25), vec=True),
                  task, d * elt, d * elt, 0.25)


def warp_slots(p, task) -> int:
    return cdiv(p["threads"], task.gpu.warp) * 4


def tree_sum(barrier: str) -> str:
    return f"""
// Tree sum in shared memory: THREADS partials halve each step.
__device__ __forceinline__ float tree_sum(float v, float* partial) {{
    partial[threadIdx.x] = v;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {{
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];{barrier}
    }}
    return partial[0];
}}
"""


# -- two_kernels ---------------------------------------------------------------------------
def two_kernels_launch(p, task):
    # add: 2 reads + 1 write; norm: the residual read twice + y written -> 6 passes for 4
    return block_launch(p, task, p["threads"] * 4, 1.5, launches=2)


def two_kernels_src(p, task, barrier=BARRIER, scale=SCALE):
    return f"""
#define THREADS {p['threads']}
{tree_sum(barrier)}
// Kernel 1: residual += x, grid-stride over the whole tensor.
__global__ void residual_add_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ residual, size_t n) {{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        residual[i] = from_float(to_float(x[i]) + to_float(residual[i]));
}}

// Kernel 2: RMSNorm of the updated residual, which comes back from DRAM twice.
extern "C" __global__ void __launch_bounds__(THREADS)
{SIG} {{
    __shared__ float partial[THREADS];
    const scalar_t* r = residual + (size_t)blockIdx.x * D;
    scalar_t* yr = y + (size_t)blockIdx.x * D;
    float sum_sq = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) {{ const float v = to_float(r[i]); sum_sq += v * v; }}
    const float inv_rms = rsqrtf(tree_sum(sum_sq, partial) / D + eps);
    for (int i = threadIdx.x; i < D; i += THREADS)
        yr[i] = from_float(to_float(r[i]) * inv_rms{scale});
}}
{host(task, "T", "THREADS", pre='''
    const size_t n = (size_t)T * D;
    residual_add_kernel<<<(unsigned)((n + 1023) / 1024), 256, 0, stream>>>(x, residual, n);''')}"""


# -- fused_block_reduce, warp_shuffle: one fused kernel -------------------------------------
def fused_launch(tree: bool):
    # x, residual read; residual written; residual re-read for the output; y written -> 5 for 4
    return lambda p, task: block_launch(p, task, p["threads"] * 4 if tree else warp_slots(p, task), 1.25)


def fused(p, task, reduce: str, smem: str, last: str, scale: str) -> str:
    return f"""
// One block per row: add and store the residual, reduce, then re-read the residual
// (each thread re-reads only what it wrote, so no barrier is needed) to normalise.
extern "C" __global__ void __launch_bounds__(THREADS)
{SIG} {{
    {smem}
    const scalar_t* xr = x + (size_t)blockIdx.x * D;
    scalar_t* r = residual + (size_t)blockIdx.x * D;
    scalar_t* yr = y + (size_t)blockIdx.x * D;
    float sum_sq = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) {{
        const scalar_t h = from_float(to_float(xr[i]) + to_float(r[i]));
        r[i] = h;
        const float f = to_float(h);
        sum_sq += f * f;
    }}
    const float inv_rms = rsqrtf({reduce} / D + eps);
    for (int i = threadIdx.x; i < {last}; i += THREADS)
        yr[i] = from_float(to_float(r[i]) * inv_rms{scale});
}}
{host(task, "T", "THREADS")}"""


def fused_block_reduce_src(p, task, barrier=BARRIER, last="D", scale=None):
    vec, smem = p.get("vec", 1), "__shared__ float partial[THREADS];"
    if vec > 1:
        return (fused_words(SIG, p["threads"], vec, tree_sum(barrier), "tree_sum(sum_sq, partial)", smem, last,
                            VEC_SCALE if scale is None else scale) + host(task, "T", "THREADS"))
    return (f"\n#define THREADS {p['threads']}\n{tree_sum(barrier)}"
            + fused(p, task, "tree_sum(sum_sq, partial)", smem, last, SCALE if scale is None else scale))


def warp_shuffle_src(p, task, last="D", scale=None):
    vec = p.get("vec", 1)
    smem = "__shared__ float warp_totals[THREADS / WARP_SIZE];"
    if vec == 1:
        return (f"\n#define THREADS {p['threads']}\n{BLOCK_SUM}"
                + fused(p, task, "block_sum(sum_sq, warp_totals)", smem, last, SCALE if scale is None else scale))
    return (fused_words(SIG, p["threads"], vec, BLOCK_SUM, "block_sum(sum_sq, warp_totals)", smem, last,
                        VEC_SCALE if scale is None else scale) + host(task, "T", "THREADS"))


# -- vectorized_uint4 ----------------------------------------------------------------------


def vectorized_uint4_src(p, task, loop=CHUNK_LOOP, scale=VEC_SCALE):
    return f"""
#define THREADS {p['threads']}
{VEC_PACK}{BLOCK_SUM}
extern "C" __global__ void __launch_bounds__(THREADS)
{SIG} {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    const uint4* xr = reinterpret_cast<const uint4*>(x + (size_t)blockIdx.x * D);
    uint4* r = reinterpret_cast<uint4*>(residual + (size_t)blockIdx.x * D);
    const uint4* wr = reinterpret_cast<const uint4*>(weight);
    uint4* yr = reinterpret_cast<uint4*>(y + (size_t)blockIdx.x * D);
    const int chunks = D / VEC;
    float sum_sq = 0.f;
    {loop}
        Pack a, b, h; a.u = xr[c]; b.u = r[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{
            h.h[k] = from_float(to_float(a.h[k]) + to_float(b.h[k]));
            const float f = to_float(h.h[k]);
            sum_sq += f * f;
        }}
        r[c] = h.u;
    }}
    const float inv_rms = rsqrtf(block_sum(sum_sq, warp_totals) / D + eps);
    for (int c = threadIdx.x; c < chunks; c += THREADS) {{
        Pack h, w, o; h.u = r[c]; w.u = wr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(to_float(h.h[k]) * inv_rms{scale});
        yr[c] = o.u;
    }}
}}
{host(task, "T", "THREADS")}"""


# -- register_cached -----------------------------------------------------------------------
def register_cached_launch(p, task):
    d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
    vec = 16 // DTYPE_BYTES[task.dtype]
    regs = 24 + 6 * cdiv(d, threads * vec)          # uint4 chunks cached per thread
    spill = 1.0 + max(0, regs - 255) / 64           # past 255 registers the row spills to local memory
    return Launch(grid=cdiv(task["T"], rows), threads=threads * rows, smem_bytes=warp_slots(p, task) * rows,
                  regs=min(regs, 255), bytes_per_access=16, traffic=spill,
                  lane_util=min(1.0, d / (threads * vec)))


def register_cached_src(p, task, first="0", scale=VEC_SCALE):
    d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
    per_thread = max(1, cdiv(d, threads * 8))
    return f"""
#define THREADS {threads}          // threads per row
#define ROWS_PER_BLOCK {rows}
#define CHUNKS_PER_THREAD {per_thread}  // ceil(D / (THREADS * 8)) for D = {d}
{VEC_PACK}
// The summed row stays in registers between the reduction and the output:
// residual is written once and never re-read, x and residual are read once.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
{SIG} {{
    __shared__ float warp_totals[ROWS_PER_BLOCK][THREADS / WARP_SIZE];
    const int sub = threadIdx.x / THREADS, tid = threadIdx.x % THREADS;
    const int row = blockIdx.x * ROWS_PER_BLOCK + sub;
    const bool live = row < T;
    const int chunks = D / VEC;
    const size_t base = (size_t)min(row, T - 1) * D;
    const uint4* xr = reinterpret_cast<const uint4*>(x + base);
    uint4* r = reinterpret_cast<uint4*>(residual + base);
    Pack cache[CHUNKS_PER_THREAD];
    float sum_sq = 0.f;
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        cache[j].u = make_uint4(0u, 0u, 0u, 0u);
        if (!(c < chunks)) continue;
        Pack a, b; a.u = xr[c]; b.u = r[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{
            cache[j].h[k] = from_float(to_float(a.h[k]) + to_float(b.h[k]));
            const float f = to_float(cache[j].h[k]);
            sum_sq += f * f;
        }}
        if (live) r[c] = cache[j].u;
    }}
    // per-row reduction: shuffle inside each warp, then across this row's warps
    sum_sq = warp_sum(sum_sq);
    if (tid % WARP_SIZE == 0) warp_totals[sub][tid / WARP_SIZE] = sum_sq;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int w = {first}; w < THREADS / WARP_SIZE; ++w) total += warp_totals[sub][w];
    const float inv_rms = rsqrtf(total / D + eps);
    if (!live) return;
    const uint4* wr = reinterpret_cast<const uint4*>(weight);
    uint4* yr = reinterpret_cast<uint4*>(y + (size_t)row * D);
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        if (!(c < chunks)) continue;
        Pack w, o; w.u = wr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(to_float(cache[j].h[k]) * inv_rms{scale});
        yr[c] = o.u;
    }}
}}
{host(task, "(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK", "THREADS * ROWS_PER_BLOCK")}"""


class AddRMSNormCuda(AddRMSNormSpec):
    impl = "cuda"
    variants = climb("add_rmsnorm_cuda", (
        Rung("two_kernels", "elementwise add kernel, then a block-per-row RMSNorm kernel re-reading the residual",
             (THREADS,), memory_eff=0.72, smem="static", launch=two_kernels_launch, render=two_kernels_src,
             bugs={"missing_barrier": {"barrier": ""}, "missing_scale": NO_SCALE}),
        Rung("fused_block_reduce", "one kernel: add, store residual, shared-memory tree sum, normalise",
             (THREADS, PRAGMA_UNROLL, VEC), memory_eff=0.75, smem="static",
             launch=launch_of(fused_launch(tree=True), word_trips(), word_regs),
             render=render_of(fused_block_reduce_src),
             bugs={"missing_barrier": {"barrier": ""}, "off_by_one": {"last": "D - 1"}}),
        Rung("warp_shuffle", "fused kernel, warp-shuffle reduction, one smem slot per warp",
             (THREADS, PRAGMA_UNROLL, VEC), memory_eff=0.82, smem="static",
             launch=launch_of(fused_launch(tree=False), word_trips(), word_regs),
             render=render_of(warp_shuffle_src),
             bugs={"off_by_one": {"last": "D - 1"}, "missing_scale": NO_SCALE}),
        Rung("vectorized_uint4", "fused kernel with 16-byte uint4 loads/stores of x, residual and y",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.9, smem="static", launch=launch_of(vector_launch, row_trips(vec=True), 4),
             render=render_of(vectorized_uint4_src),
             bugs={"no_bounds_check": {"loop": UNBOUNDED_LOOP}, "missing_scale": NO_SCALE}),
        Rung("register_cached", "summed row kept in registers: residual written once, never re-read",
             (THREADS, Param("rows_per_block", (1, 2, 4), 1)), memory_eff=0.93, smem="static",
             launch=register_cached_launch, render=register_cached_src,
             bugs={"missing_scale": NO_SCALE, "off_by_one": {"first": "1"}}),
    ), add_rmsnorm_src(ENTRY, SIG), 6)
