"""RMSNorm forward in CUDA: y = x * rsqrt(mean(x^2) + eps) * w, one row of D per token.

Ladder: one thread per row -> block reduction through shared memory -> warp shuffles ->
16-byte vector loads -> row cached in registers (one DRAM read of x).
"""
from ..base import Launch, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude
from ._norms import BLOCK_SUM, VEC_PACK
from .rmsnorm_spec import RMSNormSpec

THREADS = Param("threads", (64, 128, 256, 512, 1024), 256)


class RMSNormCuda(RMSNormSpec):
    impl = "cuda"
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 1, "D": 4096}, {"T": 64, "D": 4096}, {"T": 4096, "D": 4096},
              {"T": 8192, "D": 5120}, {"T": 16384, "D": 8192}, {"T": 2048, "D": 2048})
    variants = (
        Variant("row_per_thread", "one thread walks a whole row, two passes, scalar loads",
                (Param("threads", (64, 128, 256), 128),), memory_eff=0.45, bugs=("off_by_one", "missing_scale")),
        Variant("smem_block_reduce", "one block per row, tree reduction in shared memory",
                (THREADS,), memory_eff=0.75, smem="static", bugs=("wrong_init", "missing_scale")),
        Variant("warp_shuffle", "block per row, warp-shuffle reduction, one smem slot per warp",
                (THREADS,), memory_eff=0.82, smem="static", bugs=("wrong_init", "missing_scale")),
        Variant("vectorized_uint4", "16-byte uint4 loads/stores of 8 elements plus warp shuffles",
                (THREADS,), memory_eff=0.9, smem="static", bugs=("no_bounds_check", "missing_scale")),
        Variant("register_cached", "row held in registers between the two passes: x read from DRAM once",
                (THREADS, Param("rows_per_block", (1, 2, 4), 1)), memory_eff=0.93, smem="static",
                bugs=("missing_scale", "wrong_init")),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, d, elt = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        threads = params["threads"]
        warps = cdiv(threads, task.gpu.warp)
        if variant.tag == "row_per_thread":
            # each lane walks a different row: every warp load touches 32 sectors (32 B each);
            # L1 catches the rest of each line, so DRAM sees ~2 passes plus some refetch.
            return Launch(grid=cdiv(t, threads), threads=threads, regs=24, bytes_per_access=32,
                          traffic=2.5, lane_util=min(1.0, t / threads))
        if variant.tag == "smem_block_reduce":
            return Launch(grid=t, threads=threads, smem_bytes=threads * 4, regs=20, bytes_per_access=elt,
                          traffic=1.6, lane_util=min(1.0, d / threads))
        if variant.tag == "warp_shuffle":
            return Launch(grid=t, threads=threads, smem_bytes=warps * 4, regs=24, bytes_per_access=elt,
                          traffic=1.5, lane_util=min(1.0, d / threads))
        vec = 16 // elt
        if variant.tag == "vectorized_uint4":
            return Launch(grid=t, threads=threads, smem_bytes=warps * 4, regs=32, bytes_per_access=16,
                          traffic=1.5, lane_util=min(1.0, d / (threads * vec)))
        rows = params["rows_per_block"]
        per_thread = cdiv(d, threads * vec)             # uint4 chunks cached per thread
        regs = 32 + 8 * per_thread                      # 4 regs of packed data + 4 of fp32 partials
        spill = 1.0 + max(0, regs - 255) / 64           # past 255 registers the row spills to local memory
        return Launch(grid=cdiv(t, rows), threads=threads * rows, smem_bytes=warps * rows * 4,
                      regs=min(regs, 255), bytes_per_access=16, traffic=spill,
                      lane_util=min(1.0, d / (threads * vec)))

    def signature(self, task: Task) -> str:
        return ("void rmsnorm_forward(const scalar_t* x, const scalar_t* weight, scalar_t* y, "
                "int T, int D, float eps, cudaStream_t stream)")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n{body}"

    def _host(self, grid: str, block: str, smem: str = "0") -> str:
        return f"""
void rmsnorm_forward(const scalar_t* x, const scalar_t* weight, scalar_t* y,
                     int T, int D, float eps, cudaStream_t stream) {{
    rmsnorm_kernel<<<{grid}, {block}, {smem}, stream>>>(x, weight, y, T, D, eps);
}}
"""

    def _row_per_thread(self, p, task, bug):
        last = "D - 1" if bug == "off_by_one" else "D"
        scale = "" if bug == "missing_scale" else " * to_float(weight[i])"
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
{self._host(f"({task['T']} + {p['threads']} - 1) / {p['threads']}", str(p['threads']))}"""

    def _smem_block_reduce(self, p, task, bug):
        init = "1.f" if bug == "wrong_init" else "0.f"
        scale = "" if bug == "missing_scale" else " * to_float(weight[i])"
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
    for (int i = threadIdx.x; i < D; i += THREADS) {{
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
    for (int i = threadIdx.x; i < D; i += THREADS)
        yr[i] = from_float(to_float(xr[i]) * inv_rms{scale});
}}
{self._host("T", "THREADS")}"""

    def _warp_shuffle(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * to_float(weight[i])"
        init = "1.f" if bug == "wrong_init" else "0.f"
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
    for (int i = threadIdx.x; i < D; i += THREADS) {{
        float v = to_float(xr[i]);
        sum_sq += v * v;
    }}
    const float inv_rms = rsqrtf(block_sum(sum_sq, warp_totals) / D + eps);
    for (int i = threadIdx.x; i < D; i += THREADS)
        yr[i] = from_float(to_float(xr[i]) * inv_rms{scale});
}}
{self._host("T", "THREADS")}"""

    def _vectorized_uint4(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * to_float(w.h[k])"
        loop = ("for (int j = 0; j <= chunks / THREADS; ++j) {  const int c = threadIdx.x + j * THREADS;"
                if bug == "no_bounds_check" else "for (int c = threadIdx.x; c < chunks; c += THREADS) {")
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
    for (int c = threadIdx.x; c < chunks; c += THREADS) {{
        Pack v; v.u = xr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ float f = to_float(v.h[k]); sum_sq += f * f; }}
    }}
    const float inv_rms = rsqrtf(block_sum(sum_sq, warp_totals) / D + eps);
    {loop}
        Pack v, w, o; v.u = xr[c]; w.u = wr[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) o.h[k] = from_float(to_float(v.h[k]) * inv_rms{scale});
        yr[c] = o.u;
    }}
}}
{self._host("T", "THREADS")}"""

    def _register_cached(self, p, task, bug):
        d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
        per_thread = max(1, cdiv(d, threads * 8))
        scale = "" if bug == "missing_scale" else " * to_float(w.h[k])"
        init = "1.f" if bug == "wrong_init" else "0.f"
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
{self._host("(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK", "THREADS * ROWS_PER_BLOCK")}"""
