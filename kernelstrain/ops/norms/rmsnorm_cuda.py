"""RMSNorm forward in CUDA: y = x * rsqrt(mean(x^2) + eps) * w, one row of D per token.

Ladder: one thread per row -> block reduction through shared memory -> warp shuffles ->
16-byte vector loads -> row cached in registers (one DRAM read of x).
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..unroll import PRAGMA_UNROLL, pragma, unrolled
from ..words import VEC
from ._rmsnorm_words import rms_words_kernel
from ..row_reread import reread, exposed_reread
from ._persistent_norms import climb, rmsnorm_src
from ._norms import BLOCK_SUM, VEC_PACK, block_row_rounds, rows_follow
from .rmsnorm_spec import ENTRY, RMSNormSpec
from ..over_read import CHUNK_LOOP, UNBOUNDED_LOOP

THREADS = Param("threads", (64, 128, 256, 512, 1024), 256)
SCALE = " * to_float(weight[i])"        # the weight multiply that missing_scale drops
VEC_SCALE = " * to_float(w.h[k])"
NO_SCALE = {"scale": ""}


def host(task, grid: str, block: str) -> str:
    return ENTRY.host(task, "rmsnorm_kernel", grid, block)


# -- row_per_thread ------------------------------------------------------------------------
def row_per_thread_launch(p, task):
    # each lane walks a different row: every warp load touches 32 sectors (32 B each);
    # L1 catches the rest of each line, so DRAM sees ~2 passes plus some refetch.
    t, threads = task["T"], p["threads"]
    return Launch(grid=cdiv(t, threads), threads=threads, regs=24, bytes_per_access=32,
                  traffic=2.5, lane_util=min(1.0, t / threads))


def row_per_thread_src(p, task, last="D", scale=SCALE):
    return f"""
// One thread per row: simple, but lanes of a warp read addresses D elements apart.
extern "C" __global__ void rmsnorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                                          scalar_t* __restrict__ y, int T, int D, float eps) {{
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= T) return;
    const scalar_t* xr = x + (size_t)row * D;
    float sum_sq = 0.f;
    for (int i = 0; i < D; ++i) {{
        float v = to_float(xr[i]);
        sum_sq += v * v;
    }}
    const float inv_rms = rsqrtf(sum_sq / D + eps);
    for (int i = 0; i < {last}; ++i)
        y[(size_t)row * D + i] = from_float(to_float(xr[i]) * inv_rms{scale});
}}
{host(task, f"({task['T']} + {p['threads']} - 1) / {p['threads']}", str(p['threads']))}"""


# -- smem_block_reduce ---------------------------------------------------------------------
# The block rungs' second pass re-reads x (row_reread): traffic 1.5 (x twice and y, over x and y) as fitted where the
# re-read misses L1 (the stored rows: vectorized_uint4 H100 bf16 T=16384 D=8192 at 128 / 64 threads 1.31 / 1.44x its
# 512-thread time; H200 fp16 T=8192 D=5120 64 threads 1.43x register_cached, 128-256 threads 1.08x). Stored rows,
# pair order / Spearman / within 0.8-1.25x (H100, H200): 0.930 / 0.776 / 0.767, 0.916 -> 0.927 / 0.804 / 0.867, 0.924.
REREAD_MISS = 0.4


# vectorized_uint4's registers as ptxas allocates them (nvcc 13.0 sm_90a, 256 and 1024 threads alike): bf16's unpacking
# takes two more than fp16's, and 34 a thread at 1024 threads (34,816 of the SM's 65,536) leaves room for one block an
# SM, not two: half the rows in flight, each block's load / reduce / reload chain exposed. The H100 and H200 ran bf16
# at 1024 threads 1.5-2.1x slower than modelled with 32 (57.3 / 312.0 us H100 T=4096 D=4096 / T=16384 D=8192,
# measurements/h100_simB_b1.json; H200 s5151 112.8 us T=8192 D=5120, s1717 279.9 us), fp16 within 0.94-0.98x (H200
# pgrid 78.6, s3131 192.6)
VEC_REGS = {"fp16": 32, "bf16": 34}


def block_launch(smem_of, regs, traffic: float = 1.5, vec: bool = False):
    """Launch model of a block-per-row rung: smem_of(threads, warps) bytes, scalar or uint4 loads, `regs` registers a
    thread (or {dtype: registers})."""
    def launch(p, task):
        d, elt, threads = task["D"], DTYPE_BYTES[task.dtype], p["threads"]
        per = 16 // elt if vec else p.get("vec", 1)      # values one load moves (words.VEC on a scalar rung)
        out = unrolled(Launch(grid=task["T"], threads=threads, smem_bytes=smem_of(threads, cdiv(threads, task.gpu.warp)),
                              regs=regs[task.dtype] if isinstance(regs, dict) else regs, bytes_per_access=elt * per,
                              traffic=traffic,
                              lane_util=min(1.0, d / (threads * per)), rounds=block_row_rounds(threads, task.gpu.warp, 1)),
                       p, d / (threads * per), 4 if vec else max(1, per // 2))
        # 16-byte loads stream pass 1 at DRAM's rate: pass 2 from L1 hides behind other blocks (exposed_reread); the
        # scalar rungs' passes are issue-bound and keep the fitted re-read, REREAD_MISS more past the L1 (reread)
        return exposed_reread(out, task, d * elt, d * elt) if vec else reread(out, task, d * elt, d * elt, REREAD_MISS)
    return launch


TREE_SMEM = lambda threads, warps: threads * 4       # noqa: E731 - one float partial per thread
WARP_SMEM = lambda threads, warps: warps * 4         # noqa: E731 - one float per warp


# wrong_init: each thread's partial sum of squares starts at D (the count) instead of 0. A start of
# 1.f added only THREADS to a sum near D: an H200 matched it at D=5120 on 64 threads (6.5e-3 error).
WRONG_INIT = {"init": "(float)D"}


TREE_REDUCE = """partial[threadIdx.x] = sum_sq;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    const float inv_rms = rsqrtf(partial[0] / D + eps);"""


def smem_block_reduce_src(p, task, init="0.f", scale=None):
    vec = p.get("vec", 1)
    if vec > 1:
        return rms_words_kernel(p, vec, init, WORD_SCALE if scale is None else scale, "",
                                "__shared__ float partial[THREADS];", TREE_REDUCE) + host(task, "T", "THREADS")
    scale = SCALE if scale is None else scale
    return f"""
#define THREADS {p['threads']}

// One block per row; partial sums meet in shared memory and halve each step.
extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
               scalar_t* __restrict__ y, int T, int D, float eps) {{
    __shared__ float partial[THREADS];
    const scalar_t* xr = x + (size_t)blockIdx.x * D;
    scalar_t* yr = y + (size_t)blockIdx.x * D;
    float sum_sq = {init};
{pragma(p)}    for (int i = threadIdx.x; i < D; i += THREADS) {{
        float v = to_float(xr[i]);
        sum_sq += v * v;
    }}
    partial[threadIdx.x] = sum_sq;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {{
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }}
    const float inv_rms = rsqrtf(partial[0] / D + eps);
{pragma(p)}    for (int i = threadIdx.x; i < D; i += THREADS)
        yr[i] = from_float(to_float(xr[i]) * inv_rms{scale});
}}
{host(task, "T", "THREADS")}"""


# -- warp_shuffle ---------------------------------------------------------------------------
WORD_SCALE = " * to_float(w.h[k])"


def warp_shuffle_src(p, task, init="0.f", scale=None):
    vec = p.get("vec", 1)
    if vec == 1:
        return f"""
#define THREADS {p['threads']}
{BLOCK_SUM}
extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
               scalar_t* __restrict__ y, int T, int D, float eps) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    const scalar_t* xr = x + (size_t)blockIdx.x * D;
    scalar_t* yr = y + (size_t)blockIdx.x * D;
    float sum_sq = {init};
{pragma(p)}    for (int i = threadIdx.x; i < D; i += THREADS) {{
        float v = to_float(xr[i]);
        sum_sq += v * v;
    }}
    const float inv_rms = rsqrtf(block_sum(sum_sq, warp_totals) / D + eps);
{pragma(p)}    for (int i = threadIdx.x; i < D; i += THREADS)
        yr[i] = from_float(to_float(xr[i]) * inv_rms{SCALE if scale is None else scale});
}}
{host(task, "T", "THREADS")}"""
    return rms_words_kernel(p, vec, init, WORD_SCALE if scale is None else scale, BLOCK_SUM,
                            "__shared__ float warp_totals[THREADS / WARP_SIZE];",
                            "const float inv_rms = rsqrtf(block_sum(sum_sq, warp_totals) / D + eps);") + host(task, "T", "THREADS")


# -- vectorized_uint4 ----------------------------------------------------------------------


def vectorized_uint4_src(p, task, loop=CHUNK_LOOP, scale=VEC_SCALE):
    return f"""
#define THREADS {p['threads']}
{VEC_PACK}{BLOCK_SUM}
extern "C" __global__ void __launch_bounds__(THREADS)
rmsnorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
               scalar_t* __restrict__ y, int T, int D, float eps) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    const uint4* xr = reinterpret_cast<const uint4*>(x + (size_t)blockIdx.x * D);
    const uint4* wr = reinterpret_cast<const uint4*>(weight);
    uint4* yr = reinterpret_cast<uint4*>(y + (size_t)blockIdx.x * D);
    const int chunks = D / VEC;
    float sum_sq = 0.f;
{pragma(p)}    for (int c = threadIdx.x; c < chunks; c += THREADS) {{
        Pack v; v.u = xr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ float f = to_float(v.h[k]); sum_sq += f * f; }}
    }}
    const float inv_rms = rsqrtf(block_sum(sum_sq, warp_totals) / D + eps);
{pragma(p)}    {loop}
        Pack v, w, o; v.u = xr[c]; w.u = wr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(to_float(v.h[k]) * inv_rms{scale});
        yr[c] = o.u;
    }}
}}
{host(task, "T", "THREADS")}"""


# -- register_cached -----------------------------------------------------------------------
def register_cached_launch(p, task):
    d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
    vec, warps = 16 // DTYPE_BYTES[task.dtype], cdiv(threads, task.gpu.warp)
    per_thread = cdiv(d, threads * vec)             # uint4 chunks cached per thread
    regs = 32 + 8 * per_thread                      # 4 regs of packed data + 4 of fp32 partials
    spill = 1.0 + max(0, regs - 255) / 64           # past 255 registers the row spills to local memory
    return Launch(grid=cdiv(task["T"], rows), threads=threads * rows, smem_bytes=warps * rows * 4,
                  regs=min(regs, 255), bytes_per_access=16, traffic=spill,
                  lane_util=min(1.0, d / (threads * vec)))


def register_cached_src(p, task, init="0.f", scale=VEC_SCALE):
    d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
    per_thread = max(1, cdiv(d, threads * 8))
    return f"""
#define THREADS {threads}          // threads per row
#define ROWS_PER_BLOCK {rows}
#define CHUNKS_PER_THREAD {per_thread}  // ceil(D / (THREADS * 8)) for D = {d}
{VEC_PACK}
// Each row is owned by THREADS threads; the row stays in registers between the
// sum-of-squares pass and the scaling pass, so x is read from DRAM exactly once.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
rmsnorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
               scalar_t* __restrict__ y, int T, int D, float eps) {{
    __shared__ float warp_totals[ROWS_PER_BLOCK][THREADS / WARP_SIZE];
    const int sub = threadIdx.x / THREADS, tid = threadIdx.x % THREADS;
    const int row = blockIdx.x * ROWS_PER_BLOCK + sub;
    const int chunks = D / VEC;
    const bool live = row < T;
    const uint4* xr = reinterpret_cast<const uint4*>(x + (size_t)min(row, T - 1) * D);
    Pack cache[CHUNKS_PER_THREAD];
    float sum_sq = {init};
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        if (c < chunks) cache[j].u = xr[c];
        else cache[j].u = make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ float f = to_float(cache[j].h[k]); sum_sq += f * f; }}
    }}
    // per-row reduction: shuffle inside each warp, then across this row's warps
    sum_sq = warp_sum(sum_sq);
    if (tid % WARP_SIZE == 0) warp_totals[sub][tid / WARP_SIZE] = sum_sq;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < THREADS / WARP_SIZE; ++w) total += warp_totals[sub][w];
    const float inv_rms = rsqrtf(total / D + eps);
    if (!live) return;
    const uint4* wr = reinterpret_cast<const uint4*>(weight);
    uint4* yr = reinterpret_cast<uint4*>(y + (size_t)row * D);
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        if (c >= chunks) continue;
        Pack w, o; w.u = wr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(to_float(cache[j].h[k]) * inv_rms{scale});
        yr[c] = o.u;
    }}
}}
{host(task, "(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK", "THREADS * ROWS_PER_BLOCK")}"""


class RMSNormCuda(RMSNormSpec):
    impl = "cuda"
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 1, "D": 4096}, {"T": 64, "D": 4096}, {"T": 4096, "D": 4096},
              {"T": 8192, "D": 5120}, {"T": 16384, "D": 8192}, {"T": 2048, "D": 2048})
    variants = climb("rmsnorm_cuda", (
        Rung("row_per_thread", "one thread walks a whole row, two passes, scalar loads",
             (Param("threads", (64, 128, 256), 128),), memory_eff=0.45,
             launch=row_per_thread_launch, render=row_per_thread_src,
             bugs={"off_by_one": {"last": "D - 1"}, "missing_scale": NO_SCALE}),
        Rung("smem_block_reduce", "one block per row, tree reduction in shared memory",
             (THREADS, PRAGMA_UNROLL, VEC), memory_eff=0.75, smem="static",
             launch=block_launch(TREE_SMEM, regs=20, traffic=1.6), render=smem_block_reduce_src,
             bugs={"wrong_init": WRONG_INIT, "missing_scale": NO_SCALE}),
        Rung("warp_shuffle", "block per row, warp-shuffle reduction, one smem slot per warp",
             (THREADS, PRAGMA_UNROLL, VEC), memory_eff=0.82, smem="static",
             launch=block_launch(WARP_SMEM, regs=24), render=warp_shuffle_src,
             bugs={"wrong_init": WRONG_INIT, "missing_scale": NO_SCALE}),
        Rung("vectorized_uint4", "16-byte uint4 loads/stores of 8 elements plus warp shuffles",
             (THREADS, PRAGMA_UNROLL), memory_eff=0.9, smem="static",
             launch=block_launch(WARP_SMEM, regs=VEC_REGS, vec=True), render=vectorized_uint4_src,
             bugs={"no_bounds_check": {"loop": UNBOUNDED_LOOP}, "missing_scale": NO_SCALE},
             bug_tasks=(("no_bounds_check", rows_follow),)),
        Rung("register_cached", "row held in registers between the two passes: x read from DRAM once",
             (THREADS, Param("rows_per_block", (1, 2, 4), 1)), memory_eff=0.93, smem="static",
             launch=register_cached_launch, render=register_cached_src,
             bugs={"missing_scale": NO_SCALE, "wrong_init": WRONG_INIT}),
    ), rmsnorm_src(ENTRY), 3)
