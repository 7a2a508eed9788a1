"""LayerNorm forward in CUDA: y = (x - mean) * rsqrt(var + eps) * w + b, one row of D per token.

Ladder: one thread per row (three passes) -> block per row with two shared-memory tree
reductions -> single-pass Welford merged with warp shuffles -> 16-byte uint4 loads with
per-chunk Welford -> row cached in registers, exact two-pass statistics from registers.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from .. import l2_reuse, row_reread
from ..unroll import PRAGMA_UNROLL, launch_of, render_of, row_trips
from ..dialect import shfl_xor_macro
from ..words import VEC, word_regs, word_trips
from ._layernorm_words import smem_block_kernel, welford_words_kernel
from ._persistent_norms import climb, layernorm_src
from ._norms import VEC_PACK, block_row_rounds
from .layernorm_spec import ENTRY, LayerNormSpec
from ..over_read import CHUNK_LOOP, UNBOUNDED_LOOP

THREADS = Param("threads", (64, 128, 256, 512, 1024), 256)
SCALE = " * to_float(weight[i])"        # the weight multiply that missing_scale drops
VEC_SCALE = " * to_float(w.h[k])"
NO_SCALE = {"scale": ""}
SIG = """layernorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                 const scalar_t* __restrict__ bias, scalar_t* __restrict__ y, int T, int D, float eps)"""


def host(task, grid: str, block: str) -> str:
    return ENTRY.host(task, "layernorm_kernel", grid, block)


# -- row_per_thread ------------------------------------------------------------------------
def row_per_thread_launch(p, task):
    # three strided walks per row; lanes hit a different 32-byte sector each.
    t, threads = task["T"], p["threads"]
    return Launch(grid=cdiv(t, threads), threads=threads, regs=32, bytes_per_access=32,
                  traffic=3.4, lane_util=min(1.0, t / threads))


def row_per_thread_src(p, task, last="D", scale=SCALE):
    return f"""
// One thread per row, three passes: simple, but lanes of a warp read addresses D elements apart.
extern "C" __global__ void {SIG} {{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= T) return;
    const scalar_t* xr = x + (size_t)row * D;  scalar_t* yr = y + (size_t)row * D;
    float sum = 0.f;
    for (int i = 0; i < D; ++i) sum += to_float(xr[i]);
    const float mean = sum / D;
    float sq = 0.f;
    for (int i = 0; i < D; ++i) {{ const float d = to_float(xr[i]) - mean; sq += d * d; }}
    const float rstd = rsqrtf(sq / D + eps);
    for (int i = 0; i < {last}; ++i)
        yr[i] = from_float((to_float(xr[i]) - mean) * rstd{scale} + to_float(bias[i]));
}}
{host(task, f"({task['T']} + {p['threads']} - 1) / {p['threads']}", str(p['threads']))}"""


# -- smem_block_reduce, welford_shuffle, vectorized_uint4: a block per row ------------------
def block_launch(smem_of, traffic: float, reductions: int, vec: bool = False, word_regs: int = 0):
    """Launch model of a block-per-row rung: two-pass reads x for the mean, the variance and the
    output; Welford for the statistics and the output; `reductions` block-wide reductions a row
    waits on (block_row_rounds); `word_regs` registers a value of a words.VEC word adds (ptxas
    sm_90a, VEC 1/2/4: smem_block_reduce 32/36/36 at 256 threads and 32/32/37 at 1024, about one a
    value; welford_shuffle 32/30/32, none)."""
    def launch(p, task):
        d, elt, threads = task["D"], DTYPE_BYTES[task.dtype], p["threads"]
        per = 16 // elt if vec else p.get("vec", 1)      # values one load moves (words.VEC on a scalar rung)
        out = Launch(grid=task["T"], threads=threads, smem_bytes=smem_of(threads, cdiv(threads, task.gpu.warp)),
                     regs=34 if vec else 30 + word_regs * (per - 1), bytes_per_access=per * elt, traffic=traffic,
                     lane_util=min(1.0, d / (threads * per)), rounds=block_row_rounds(threads, task.gpu.warp, reductions))
        return row_reread.exposed_reread(out, task, d * elt, 2 * d * elt) if vec else out     # x again from L1
    return launch


def smem_block_reduce_src(p, task, barrier="\n        __syncthreads();", root="0"):
    return f"""
#define THREADS {p['threads']}
// Tree sum in shared memory: THREADS partials halve each step.
__device__ __forceinline__ float tree_sum(float v, float* partial) {{
    partial[threadIdx.x] = v;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {{
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];{barrier}
    }}
    const float total = partial[{root}];
    __syncthreads();  // partial[] is reused by the next reduction
    return total;
}}

{smem_block_kernel(SIG, p.get('vec', 1))}
{host(task, "T", "THREADS")}"""


def welford_helpers(task):
    return f"""
#define WARPS (THREADS / WARP_SIZE)
{shfl_xor_macro(task)}
// Chan's parallel Welford merge of (n, mean, M2) partials.
__device__ __forceinline__ void welford_merge(float& n, float& mean, float& m2, float nb, float mean_b, float m2_b) {{
    const float n_ab = n + nb, delta = mean_b - mean, w_b = n_ab > 0.f ? nb / n_ab : 0.f;
    mean += delta * w_b;
    m2 += m2_b + delta * delta * n * w_b;
    n = n_ab;
}}

__device__ __forceinline__ void warp_welford(float& n, float& mean, float& m2) {{
#pragma unroll
    for (int o = WARP_SIZE / 2; o > 0; o >>= 1)
        welford_merge(n, mean, m2, SHFL_XOR(n, o), SHFL_XOR(mean, o), SHFL_XOR(m2, o));
}}

// Block-wide Welford: shuffle inside each warp, warp 0 merges the warp partials.
// Returns (mean, biased variance) of the row to every thread.
__device__ __forceinline__ float2 block_welford(float n, float mean, float m2, float* stats) {{
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    warp_welford(n, mean, m2);
    if (lane == 0) {{ stats[warp] = n; stats[WARPS + warp] = mean; stats[2 * WARPS + warp] = m2; }}
    __syncthreads();
    if (warp == 0) {{
        const bool has = lane < WARPS;  // lanes past the warp count merge an empty partial
        n = has ? stats[lane] : 0.f; mean = has ? stats[WARPS + lane] : 0.f; m2 = has ? stats[2 * WARPS + lane] : 0.f;
        warp_welford(n, mean, m2);
        if (lane == 0) {{ stats[0] = mean; stats[1] = m2 / n; }}
    }}
    __syncthreads();
    return make_float2(stats[0], stats[1]);
}}
"""


def welford_shuffle_src(p, task, last="D", scale=None):
    vec = p.get("vec", 1)
    if vec > 1:         # PyTorch's vectorized_layer_norm_kernel: per-element Welford over VEC-value words
        return f"""
#define THREADS {p['threads']}
{welford_helpers(task)}{welford_words_kernel(SIG, vec, last, VEC_SCALE if scale is None else scale)}
{host(task, "T", "THREADS")}"""
    scale = SCALE if scale is None else scale
    return f"""
#define THREADS {p['threads']}
{welford_helpers(task)}
// One pass over x for the statistics (Welford per thread), a second for the output.
extern "C" __global__ void __launch_bounds__(THREADS)
{SIG} {{
    __shared__ float stats[3 * WARPS];
    const scalar_t* xr = x + (size_t)blockIdx.x * D;  scalar_t* yr = y + (size_t)blockIdx.x * D;
    float n = 0.f, mean = 0.f, m2 = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) {{
        const float v = to_float(xr[i]), delta = v - mean;
        n += 1.f;  mean += delta / n;  m2 += delta * (v - mean);
    }}
    const float2 mv = block_welford(n, mean, m2, stats);
    const float rstd = rsqrtf(mv.y + eps);
    for (int i = threadIdx.x; i < {last}; i += THREADS)
        yr[i] = from_float((to_float(xr[i]) - mv.x) * rstd{scale} + to_float(bias[i]));
}}
{host(task, "T", "THREADS")}"""




def vectorized_uint4_src(p, task, loop=CHUNK_LOOP, scale=VEC_SCALE):
    return f"""
#define THREADS {p['threads']}
{VEC_PACK}{welford_helpers(task)}
extern "C" __global__ void __launch_bounds__(THREADS)
{SIG} {{
    __shared__ float stats[3 * WARPS];
    const uint4* xr = reinterpret_cast<const uint4*>(x + (size_t)blockIdx.x * D);
    const uint4 *wr = reinterpret_cast<const uint4*>(weight), *br = reinterpret_cast<const uint4*>(bias);
    uint4* yr = reinterpret_cast<uint4*>(y + (size_t)blockIdx.x * D);
    const int chunks = D / VEC;
    float n = 0.f, mean = 0.f, m2 = 0.f;
    {loop}
        // exact statistics of the 8-element chunk, then one Welford merge per chunk
        Pack v; v.u = xr[c];
        float f[VEC], s = 0.f, cm2 = 0.f;
        for (int k = 0; k < VEC; ++k) {{ f[k] = to_float(v.h[k]); s += f[k]; }}
        const float cmean = s * (1.f / VEC);
        for (int k = 0; k < VEC; ++k) cm2 += (f[k] - cmean) * (f[k] - cmean);
        welford_merge(n, mean, m2, (float)VEC, cmean, cm2);
    }}
    const float2 mv = block_welford(n, mean, m2, stats);
    const float rstd = rsqrtf(mv.y + eps);
    for (int c = threadIdx.x; c < chunks; c += THREADS) {{
        Pack v, w, b, o; v.u = xr[c]; w.u = wr[c]; b.u = br[c];
        for (int k = 0; k < VEC; ++k)
            o.h[k] = from_float((to_float(v.h[k]) - mv.x) * rstd{scale} + to_float(b.h[k]));
        yr[c] = o.u;
    }}
}}
{host(task, "T", "THREADS")}"""


# -- register_cached -----------------------------------------------------------------------
def register_cached_launch(p, task):
    d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
    vec, warps = 16 // DTYPE_BYTES[task.dtype], cdiv(threads, task.gpu.warp)
    regs = 24 + 6 * cdiv(d, threads * vec)          # uint4 chunks cached per thread + weight/bias in flight
    spill = 1.0 + max(0, regs - 255) / 64           # past 255 registers the row spills to local memory
    return Launch(grid=cdiv(task["T"], rows), threads=threads * rows, smem_bytes=warps * rows * 4, regs=min(regs, 255),
                  bytes_per_access=16, traffic=spill, lane_util=min(1.0, d / (threads * vec)))


def register_cached_src(p, task, first="0", scale=VEC_SCALE):
    d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
    return f"""
#define THREADS {threads}          // threads per row
#define WARPS (THREADS / WARP_SIZE)
#define ROWS_PER_BLOCK {rows}
#define CHUNKS_PER_THREAD {cdiv(d, threads * 8)}  // ceil(D / (THREADS * 8)) for D = {d}
{VEC_PACK}
// Sum over the THREADS threads of one row: shuffles, then this row's warp totals.
__device__ __forceinline__ float row_sum(float v, float (*totals)[WARPS], int sub, int tid) {{
    v = warp_sum(v);
    if (tid % WARP_SIZE == 0) totals[sub][tid / WARP_SIZE] = v;
    __syncthreads();
    float total = 0.f;
    for (int w = {first}; w < WARPS; ++w) total += totals[sub][w];
    __syncthreads();  // totals[] is reused by the next reduction
    return total;
}}

// The row stays in registers: the mean, the centred variance (exact two-pass, no
// cancellation) and the output all read it there, so x crosses DRAM once. Every loop over
// the cache unrolls whole: an index the compiler cannot fold moves cache[] to memory (on
// gfx942 clang promotes it to LDS, 16 KB a block of 1024 threads).
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
{SIG} {{
    __shared__ float totals[ROWS_PER_BLOCK][WARPS];
    const int sub = threadIdx.x / THREADS, tid = threadIdx.x % THREADS, chunks = D / VEC;
    const int row = blockIdx.x * ROWS_PER_BLOCK + sub;
    const uint4* xr = reinterpret_cast<const uint4*>(x + (size_t)min(row, T - 1) * D);
    Pack cache[CHUNKS_PER_THREAD];
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        cache[j].u = (c < chunks) ? xr[c] : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int k = 0; k < VEC; ++k) sum += to_float(cache[j].h[k]);
    }}
    const float mean = row_sum(sum, totals, sub, tid) / D;
    float sq = 0.f;
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        if (c >= chunks) continue;  // zero-filled tail chunks are not samples
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ const float dv = to_float(cache[j].h[k]) - mean; sq += dv * dv; }}
    }}
    const float rstd = rsqrtf(row_sum(sq, totals, sub, tid) / D + eps);
    if (row >= T) return;
    const uint4 *wr = reinterpret_cast<const uint4*>(weight), *br = reinterpret_cast<const uint4*>(bias);
    uint4* yr = reinterpret_cast<uint4*>(y + (size_t)row * D);
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        if (c >= chunks) continue;
        Pack w, b, o; w.u = wr[c]; b.u = br[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k)
            o.h[k] = from_float((to_float(cache[j].h[k]) - mean) * rstd{scale} + to_float(b.h[k]));
        yr[c] = o.u;
    }}
}}
{host(task, "(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK", "THREADS * ROWS_PER_BLOCK")}"""


class LayerNormCuda(LayerNormSpec):
    impl = "cuda"
    desc = "y[t, :] = (x[t, :] - mean) * rsqrt(var + eps) * weight + bias, biased variance, eps = 1e-5; fp32 stats."
    variants = climb("layernorm_cuda", (
        Rung("row_per_thread", "one thread walks a whole row: mean, variance and output passes",
             (Param("threads", (64, 128, 256), 128),), memory_eff=0.45,
             launch=row_per_thread_launch, render=row_per_thread_src,
             bugs={"off_by_one": {"last": "D - 1"}, "missing_scale": NO_SCALE}),
        # off_by_one reads the tree's partial[1] (half the lanes) for its total; a "stride > 1" loop
        # (partial[1] never added) moved the result by ~1/THREADS, inside KernelBench's 1e-2
        Rung("smem_block_reduce", "one block per row, two-pass mean/variance with shared-memory tree sums",
             (THREADS, PRAGMA_UNROLL, VEC), memory_eff=0.75, smem="static", render=render_of(smem_block_reduce_src),
             # mean/variance passes re-read the row from L2 as far as resident rows fit (l2_reuse.row_rereads): H100
             # T=16384 D=8192 fp16, 256/128/64 threads 230.8/335.7/400.9 us, modelled 371.6 each by three DRAM reads
             # (all rows: tests/test_sim32_models.py); welford_shuffle/vectorized_uint4 ran 1.0-1.1x their DRAM read
             launch=l2_reuse.row_rereads(launch_of(block_launch(lambda threads, warps: threads * 4, 2.1, 2, word_regs=1),
                                                   word_trips(), word_regs), "T", "D"),
             bugs={"missing_barrier": {"barrier": ""}, "off_by_one": {"root": "1"}}),
        Rung("welford_shuffle", "single-pass Welford per thread, (n, mean, M2) merged with warp shuffles",
             (THREADS, PRAGMA_UNROLL, VEC), memory_eff=0.82, smem="static", render=render_of(welford_shuffle_src),
             launch=launch_of(block_launch(lambda threads, warps: 3 * warps * 4, 1.5, 1), word_trips(), word_regs),
             bugs={"off_by_one": {"last": "D - 1"}, "missing_scale": NO_SCALE}),
        Rung("vectorized_uint4", "16-byte uint4 loads of 8 elements, per-chunk Welford merged by shuffles",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.9, smem="static", render=render_of(vectorized_uint4_src),
             launch=launch_of(block_launch(lambda threads, warps: 3 * warps * 4, 1.5, 1, vec=True), row_trips(vec=True), 4),
             bugs={"no_bounds_check": {"loop": UNBOUNDED_LOOP}, "missing_scale": NO_SCALE}),
        Rung("register_cached", "row held in registers: exact two-pass statistics, x read from DRAM once",
             (THREADS, Param("rows_per_block", (1, 2, 4), 1)), memory_eff=0.92, smem="static",
             launch=register_cached_launch, render=register_cached_src,
             bugs={"missing_scale": NO_SCALE, "off_by_one": {"first": "1"}}),
    ), layernorm_src(ENTRY, SIG), 5, reductions=2)
