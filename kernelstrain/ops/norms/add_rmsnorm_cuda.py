"""Fused residual add + RMSNorm in CUDA: residual += x; y = residual * rsqrt(mean(residual^2) + eps) * w.

Ladder: an add kernel then an RMSNorm kernel (two launches, residual crosses DRAM three
times) -> one fused kernel with a shared-memory tree sum -> warp shuffles -> 16-byte
uint4 loads/stores -> the summed row cached in registers (no re-read of the residual).
"""
from ..base import Launch, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude
from ._norms import BLOCK_SUM, VEC_PACK
from .add_rmsnorm_spec import AddRMSNormSpec

THREADS = Param("threads", (64, 128, 256, 512, 1024), 256)


class AddRMSNormCuda(AddRMSNormSpec):
    impl = "cuda"
    variants = (
        Variant("two_kernels", "elementwise add kernel, then a block-per-row RMSNorm kernel re-reading the residual",
                (THREADS,), memory_eff=0.72, smem="static", bugs=("missing_barrier", "missing_scale")),
        Variant("fused_block_reduce", "one kernel: add, store residual, shared-memory tree sum, normalise",
                (THREADS,), memory_eff=0.75, smem="static", bugs=("missing_barrier", "off_by_one")),
        Variant("warp_shuffle", "fused kernel, warp-shuffle reduction, one smem slot per warp",
                (THREADS,), memory_eff=0.82, smem="static", bugs=("off_by_one", "missing_scale")),
        Variant("vectorized_uint4", "fused kernel with 16-byte uint4 loads/stores of x, residual and y",
                (THREADS,), memory_eff=0.9, smem="static", bugs=("no_bounds_check", "missing_scale")),
        Variant("register_cached", "summed row kept in registers: residual written once, never re-read",
                (THREADS, Param("rows_per_block", (1, 2, 4), 1)), memory_eff=0.93, smem="static",
                bugs=("missing_scale", "off_by_one")),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, d, elt = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        threads = params["threads"]
        warps = cdiv(threads, task.gpu.warp)
        vec = 16 // elt
        if variant.tag == "two_kernels":
            # add: 2 reads + 1 write; norm: the residual read twice + y written -> 6 passes for 4
            return Launch(grid=t, threads=threads, smem_bytes=threads * 4, regs=24, bytes_per_access=elt,
                          traffic=1.5, lane_util=min(1.0, d / threads), launches=2)
        if variant.tag in ("fused_block_reduce", "warp_shuffle"):
            # x, residual read; residual written; residual re-read for the output; y written -> 5 for 4
            smem = threads * 4 if variant.tag == "fused_block_reduce" else warps * 4
            return Launch(grid=t, threads=threads, smem_bytes=smem, regs=24, bytes_per_access=elt,
                          traffic=1.25, lane_util=min(1.0, d / threads))
        if variant.tag == "vectorized_uint4":
            return Launch(grid=t, threads=threads, smem_bytes=warps * 4, regs=32, bytes_per_access=16,
                          traffic=1.25, lane_util=min(1.0, d / (threads * vec)))
        rows = params["rows_per_block"]
        per_thread = cdiv(d, threads * vec)             # uint4 chunks cached per thread
        regs = 24 + 6 * per_thread
        spill = 1.0 + max(0, regs - 255) / 64           # past 255 registers the row spills to local memory
        return Launch(grid=cdiv(t, rows), threads=threads * rows, smem_bytes=warps * rows * 4,
                      regs=min(regs, 255), bytes_per_access=16, traffic=spill,
                      lane_util=min(1.0, d / (threads * vec)))

    def signature(self, task: Task) -> str:
        return ("void add_rmsnorm_forward(const scalar_t* x, scalar_t* residual, const scalar_t* weight, "
                "scalar_t* y, int T, int D, float eps, cudaStream_t stream)")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n{body}"

    def _host(self, grid: str, block: str, pre: str = "") -> str:
        return f"""
void add_rmsnorm_forward(const scalar_t* x, scalar_t* residual, const scalar_t* weight, scalar_t* y,
                         int T, int D, float eps, cudaStream_t stream) {{{pre}
    add_rmsnorm_kernel<<<{grid}, {block}, 0, stream>>>(x, residual, weight, y, T, D, eps);
}}
"""

    _SIG = """add_rmsnorm_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ residual,
                   const scalar_t* __restrict__ weight, scalar_t* __restrict__ y, int T, int D, float eps)"""

    def _tree_sum(self, bug):
        barrier = "" if bug == "missing_barrier" else "\n        __syncthreads();"
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

    def _two_kernels(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * to_float(weight[i])"
        return f"""
#define THREADS {p['threads']}
{self._tree_sum(bug)}
// Kernel 1: residual += x, grid-stride over the whole tensor.
__global__ void residual_add_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ residual, size_t n) {{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        residual[i] = from_float(to_float(x[i]) + to_float(residual[i]));
}}

// Kernel 2: RMSNorm of the updated residual, which comes back from DRAM twice.
extern "C" __global__ void __launch_bounds__(THREADS)
{self._SIG} {{
    __shared__ float partial[THREADS];
    const scalar_t* r = residual + (size_t)blockIdx.x * D;
    scalar_t* yr = y + (size_t)blockIdx.x * D;
    float sum_sq = 0.f;
    for (int i = threadIdx.x; i < D; i += THREADS) {{ const float v = to_float(r[i]); sum_sq += v * v; }}
    const float inv_rms = rsqrtf(tree_sum(sum_sq, partial) / D + eps);
    for (int i = threadIdx.x; i < D; i += THREADS)
        yr[i] = from_float(to_float(r[i]) * inv_rms{scale});
}}
{self._host("T", "THREADS", pre='''
    const size_t n = (size_t)T * D;
    residual_add_kernel<<<(unsigned)((n + 1023) / 1024), 256, 0, stream>>>(x, residual, n);''')}"""

    def _fused(self, p, bug, reduce: str, smem: str):
        scale = "" if bug == "missing_scale" else " * to_float(weight[i])"
        last = "D - 1" if bug == "off_by_one" else "D"
        return f"""
// One block per row: add and store the residual, reduce, then re-read the residual
// (each thread re-reads only what it wrote, so no barrier is needed) to normalise.
extern "C" __global__ void __launch_bounds__(THREADS)
{self._SIG} {{
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
{self._host("T", "THREADS")}"""

    def _fused_block_reduce(self, p, task, bug):
        return (f"\n#define THREADS {p['threads']}\n{self._tree_sum(bug)}"
                + self._fused(p, bug, "tree_sum(sum_sq, partial)", "__shared__ float partial[THREADS];"))

    def _warp_shuffle(self, p, task, bug):
        return (f"\n#define THREADS {p['threads']}\n{BLOCK_SUM}"
                + self._fused(p, bug, "block_sum(sum_sq, warp_totals)",
                              "__shared__ float warp_totals[THREADS / WARP_SIZE];"))

    def _vectorized_uint4(self, p, task, bug):
        loop = ("for (int j = 0; j <= chunks / THREADS; ++j) {\n        const int c = threadIdx.x + j * THREADS;"
                if bug == "no_bounds_check" else "for (int c = threadIdx.x; c < chunks; c += THREADS) {")
        scale = "" if bug == "missing_scale" else " * to_float(w.h[k])"
        return f"""
#define THREADS {p['threads']}
{VEC_PACK}{BLOCK_SUM}
extern "C" __global__ void __launch_bounds__(THREADS)
{self._SIG} {{
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
{self._host("T", "THREADS")}"""

    def _register_cached(self, p, task, bug):
        d, threads, rows = task["D"], p["threads"], p["rows_per_block"]
        per_thread = max(1, cdiv(d, threads * 8))
        scale = "" if bug == "missing_scale" else " * to_float(w.h[k])"
        warps = "THREADS / WARP_SIZE - 1" if bug == "off_by_one" else "THREADS / WARP_SIZE"
        return f"""
#define THREADS {threads}          // threads per row
#define ROWS_PER_BLOCK {rows}
#define CHUNKS_PER_THREAD {per_thread}  // ceil(D / (THREADS * 8)) for D = {d}
{VEC_PACK}
// The summed row stays in registers between the reduction and the output:
// residual is written once and never re-read, x and residual are read once.
extern "C" __global__ void __launch_bounds__(THREADS * ROWS_PER_BLOCK)
{self._SIG} {{
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
    for (int w = 0; w < {warps}; ++w) total += warp_totals[sub][w];
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
{self._host("(T + ROWS_PER_BLOCK - 1) / ROWS_PER_BLOCK", "THREADS * ROWS_PER_BLOCK")}"""
