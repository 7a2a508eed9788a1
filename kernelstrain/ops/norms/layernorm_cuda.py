"""LayerNorm forward in CUDA: y = (x - mean) * rsqrt(var + eps) * w + b, one row of D per token.

Ladder: one thread per row (three passes) -> block per row with two shared-memory tree
reductions -> single-pass Welford merged with warp shuffles -> 16-byte uint4 loads with
per-chunk Welford -> row cached in registers, exact two-pass statistics from registers.
"""
from ..base import Launch, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude
from ._norms import VEC_PACK
from .layernorm_spec import LayerNormSpec

THREADS = Param("threads", (64, 128, 256, 512, 1024), 256)


class LayerNormCuda(LayerNormSpec):
    impl = "cuda"
    desc = "y[t, :] = (x[t, :] - mean) * rsqrt(var + eps) * weight + bias, biased variance, eps = 1e-5; fp32 stats."
    variants = (
        Variant("row_per_thread", "one thread walks a whole row: mean, variance and output passes",
                (Param("threads", (64, 128, 256), 128),), memory_eff=0.45, bugs=("off_by_one", "missing_scale")),
        Variant("smem_block_reduce", "one block per row, two-pass mean/variance with shared-memory tree sums",
                (THREADS,), memory_eff=0.75, smem="static", bugs=("missing_barrier", "off_by_one")),
        Variant("welford_shuffle", "single-pass Welford per thread, (n, mean, M2) merged with warp shuffles",
                (THREADS,), memory_eff=0.82, smem="static", bugs=("off_by_one", "missing_scale")),
        Variant("vectorized_uint4", "16-byte uint4 loads of 8 elements, per-chunk Welford merged by shuffles",
                (THREADS,), memory_eff=0.9, smem="static", bugs=("no_bounds_check", "missing_scale")),
        Variant("register_cached", "row held in registers: exact two-pass statistics, x read from DRAM once",
                (THREADS, Param("rows_per_block", (1, 2, 4), 1)), memory_eff=0.92, smem="static",
                bugs=("missing_scale", "off_by_one")),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, d, elt = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        threads = params["threads"]
        warps = cdiv(threads, task.gpu.warp)
        vec = 16 // elt
        if variant.tag == "row_per_thread":
            # three strided walks per row; lanes hit a different 32-byte sector each.
            return Launch(grid=cdiv(t, threads), threads=threads, regs=32, bytes_per_access=32,
                          traffic=3.4, lane_util=min(1.0, t / threads))
        if variant.tag != "register_cached":
            # two-pass reads x for the mean, the variance and the output; Welford for stats + output
            per = vec if variant.tag == "vectorized_uint4" else 1
            return Launch(grid=t, threads=threads, smem_bytes=threads * 4 if variant.tag == "smem_block_reduce"
                          else 3 * warps * 4, regs=34 if per > 1 else 30, bytes_per_access=per * elt,
                          traffic=2.1 if variant.tag == "smem_block_reduce" else 1.5, lane_util=min(1.0, d / (threads * per)))
        rows = params["rows_per_block"]
        regs = 24 + 6 * cdiv(d, threads * vec)          # uint4 chunks cached per thread + weight/bias in flight
        spill = 1.0 + max(0, regs - 255) / 64           # past 255 registers the row spills to local memory
        return Launch(grid=cdiv(t, rows), threads=threads * rows, smem_bytes=warps * rows * 4, regs=min(regs, 255),
                      bytes_per_access=16, traffic=spill, lane_util=min(1.0, d / (threads * vec)))

    def signature(self, task: Task) -> str:
        return ("void layernorm_forward(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, "
                "scalar_t* y, int T, int D, float eps, cudaStream_t stream)")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        return f"{cuda_prelude(task)}\n{getattr(self, '_' + variant.tag)(params, task, bug)}"

    def _host(self, grid: str, block: str) -> str:
        return ("\nvoid layernorm_forward(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,\n"
                f"                       int T, int D, float eps, cudaStream_t stream) {{\n    layernorm_kernel<<<{grid}, "
                f"{block}, 0, stream>>>(x, weight, bias, y, T, D, eps);\n}}\n")

    _SIG = """layernorm_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                 const scalar_t* __restrict__ bias, scalar_t* __restrict__ y, int T, int D, float eps)"""

    def _row_per_thread(self, p, task, bug):
        last = "D - 1" if bug == "off_by_one" else "D"
        scale = "" if bug == "missing_scale" else " * to_float(weight[i])"
        return f"""
// One thread per row, three passes: simple, but lanes of a warp read addresses D elements apart.
extern "C" __global__ void {self._SIG} {{
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
{self._host(f"({task['T']} + {p['threads']} - 1) / {p['threads']}", str(p['threads']))}"""

    def _smem_block_reduce(self, p, task, bug):
        barrier = "" if bug == "missing_barrier" else "\n        __syncthreads();"
        last = "1" if bug == "off_by_one" else "0"
        return f"""
#define THREADS {p['threads']}
// Tree sum in shared memory: THREADS partials halve each step.
__device__ __forceinline__ float tree_sum(float v, float* partial) {{
    partial[threadIdx.x] = v;
    __syncthreads();
    for (int stride = THREADS / 2; stride > {last}; stride >>= 1) {{
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];{barrier}
    }}
    const float total = partial[0];
    __syncthreads();  // partial[] is reused by the next reduction
    return total;
}}

// One block per row; the mean and the centred variance each take a pass over x.
extern "C" __global__ void __launch_bounds__(THREADS)
{self._SIG} {{
    __shared__ float partial[THREADS];
    const scalar_t* xr = x + (size_t)blockIdx.x * D;  scalar_t* yr = y + (size_t)blockIdx.x * D;
    float sum = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) sum += to_float(xr[i]);
    const float mean = tree_sum(sum, partial) / D;
    float sq = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) {{ const float d = to_float(xr[i]) - mean; sq += d * d; }}
    const float rstd = rsqrtf(tree_sum(sq, partial) / D + eps);
    for (int i = threadIdx.x; i < D; i += THREADS)
        yr[i] = from_float((to_float(xr[i]) - mean) * rstd * to_float(weight[i]) + to_float(bias[i]));
}}
{self._host("T", "THREADS")}"""

    def _welford_helpers(self, task):
        return f"""
#define WARPS (THREADS / WARP_SIZE)
#define SHFL_XOR(v, o) {"__shfl_xor(v, o)" if task.is_hip else "__shfl_xor_sync(0xffffffffu, v, o)"}

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

    def _welford_shuffle(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * to_float(weight[i])"
        last = "D - 1" if bug == "off_by_one" else "D"
        return f"""
#define THREADS {p['threads']}
{self._welford_helpers(task)}
// One pass over x for the statistics (Welford per thread), a second for the output.
extern "C" __global__ void __launch_bounds__(THREADS)
{self._SIG} {{
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
{self._host("T", "THREADS")}"""

    def _vectorized_uint4(self, p, task, bug):
        loop = ("for (int j = 0; j <= chunks / THREADS; ++j) {\n        const int c = threadIdx.x + j * THREADS;"
                if bug == "no_bounds_check" else "for (int c = threadIdx.x; c < chunks; c += THREADS) {")
        scale = "" if bug == "missing_scale" else " * to_float(w.h[k])"
        return f"""
#define THREADS {p['threads']}
{VEC_PACK}{self._welford_helpers(task)}
extern "C" __global__ void __launch_bounds__(THREADS)
{self._SIG} {{
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
{self._host("T", "THREADS")}"""

    def _register_cached(self, p, task, bug):
        d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
        scale = "" if bug == "missing_scale" else " * to_float(w.h[k])"
        warps = "WARPS - 1" if bug == "off_by_one" else "WARPS"
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
    for (int w = 0; w < {warps}; ++w) total += totals[sub][w];
    __syncthreads();  // totals[] is reused by the next reduction
    return total;
}}

// The row stays in registers: the mean, the centred variance (exact two-pass, no
// cancellation) and the output all read it there, so x crosses DRAM once.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
{self._SIG} {{
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
        for (int k = 0; k < VEC; ++k) sum += to_float(cache[j].h[k]);
    }}
    const float mean = row_sum(sum, totals, sub, tid) / D;
    float sq = 0.f;
#pragma unroll
    for (int j = 0; j < CHUNKS_PER_THREAD; ++j) {{
        const int c = tid + j * THREADS;
        if (c >= chunks) continue;  // zero-filled tail chunks are not samples
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
        for (int k = 0; k < VEC; ++k)
            o.h[k] = from_float((to_float(cache[j].h[k]) - mean) * rstd{scale} + to_float(b.h[k]));
        yr[c] = o.u;
    }}
}}
{self._host("(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK", "THREADS * ROWS_PER_BLOCK")}"""
