"""SwiGLU forward in CUDA: y[t, i] = silu(x[t, i]) * x[t, I + i] from the fused gate|up GEMM output.

Ladder: one thread per element with div/mod indexing -> 2-D grid (token row x column block)
-> 16-byte uint4 loads of 8 gate and 8 up elements -> several uint4 per thread with every
load issued before the math (ILP) -> persistent grid (#SMs x resident blocks per SM, from the
occupancy API) grid-striding over the tensor.
"""
from ..base import Launch, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude
from .swiglu_fwd_spec import SwigluFwdSpec

THREADS = Param("threads", (128, 256, 512), 256)
UNROLL = Param("unroll", (1, 2, 4), 2)


class SwigluFwdCuda(SwigluFwdSpec):
    impl = "cuda"
    variants = (
        Variant("thread_per_element", "one thread per output, 64-bit div/mod per element, scalar loads",
                (Param("threads", (64, 128, 256), 64),), compute_eff=0.01, memory_eff=0.45, bugs=("off_by_one",)),
        Variant("row_grid_2d", "2-D grid: blockIdx.y is the token row, no division, scalar loads",
                (THREADS,), compute_eff=0.3, memory_eff=0.81, bugs=("off_by_one",)),
        Variant("vectorized_uint4", "16-byte uint4 loads of 8 gate + 8 up elements, one uint4 store",
                (THREADS,), compute_eff=0.4, memory_eff=0.88, bugs=("no_bounds_check",)),
        Variant("unrolled_ilp", "UNROLL uint4 chunks per thread, all loads in flight before the math",
                (THREADS, UNROLL), compute_eff=0.4, memory_eff=0.9, bugs=("no_bounds_check", "off_by_one")),
        Variant("persistent", "#SMs x occupancy blocks grid-striding over all uint4 chunks, unrolled",
                (THREADS, UNROLL), compute_eff=0.4, memory_eff=0.84,
                bugs=("off_by_one",)),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, i, elt = task["T"], task["I"], DTYPE_BYTES[task.dtype]
        threads, vec = params["threads"], 16 // elt
        chunks = cdiv(i, vec)                                # uint4 chunks per row
        if variant.tag == "thread_per_element":
            return Launch(grid=cdiv(t * i, threads), threads=threads, regs=20, bytes_per_access=elt)
        if variant.tag == "row_grid_2d":
            return Launch(grid=t * cdiv(i, threads), threads=threads, regs=16, bytes_per_access=elt,
                          lane_util=min(1.0, i / threads))
        if variant.tag == "vectorized_uint4":
            per_row = cdiv(chunks, threads)
            return Launch(grid=t * per_row, threads=threads, regs=26, bytes_per_access=16,
                          lane_util=chunks / (per_row * threads))
        unroll = params["unroll"]
        if variant.tag == "unrolled_ilp":
            per_row = cdiv(chunks, threads * unroll)
            return Launch(grid=t * per_row, threads=threads, regs=20 + 6 * unroll, bytes_per_access=16 * unroll,
                          lane_util=chunks / (per_row * threads * unroll))
        per_row, regs = cdiv(chunks, threads * unroll), 32 + 6 * unroll
        gpu = task.gpu      # the host asks cudaOccupancyMaxActiveBlocksPerMultiprocessor for this
        per_sm = min(gpu.max_blocks_per_sm, gpu.max_threads_per_sm // threads, gpu.regs_per_sm // (threads * regs))
        grid = min(gpu.sms * per_sm, t * per_row)
        return Launch(grid=grid, threads=threads, regs=regs, bytes_per_access=16 * unroll,
                      lane_util=chunks / (per_row * threads * unroll))

    def signature(self, task: Task) -> str:
        return "void swiglu_fwd(const scalar_t* x, scalar_t* y, int T, int I, cudaStream_t stream)"

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n{self._SILU}{body}"

    _SILU = """
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.f + __expf(-g)) * u; }
"""
    _PACK = """
// 8 x 16-bit elements travel as one 16-byte uint4; I must be a multiple of 8 (every MLP width is).
constexpr int VEC = 8;
union Pack { uint4 u; scalar_t h[VEC]; };

__device__ __forceinline__ uint4 swiglu_pack(const Pack& g, const Pack& u) {
    Pack o;
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.h[k] = from_float(silu_mul(to_float(g.h[k]), to_float(u.h[k])));
    return o.u;
}
"""

    def _host(self, grid: str, block: str) -> str:
        return f"""
void swiglu_fwd(const scalar_t* x, scalar_t* y, int T, int I, cudaStream_t stream) {{
    swiglu_fwd_kernel<<<{grid}, {block}, 0, stream>>>(x, y, T, I);
}}
"""

    def _thread_per_element(self, p, task, bug):
        n = "(long long)T * I - 1" if bug == "off_by_one" else "(long long)T * I"
        return f"""
#define THREADS {p['threads']}

// One thread per output element: a 64-bit division and modulo recover (t, i) for every
// element, and each 2-byte load is its own memory instruction.
extern "C" __global__ void swiglu_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
                                             int T, int I) {{
    const long long idx = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= {n}) return;
    const long long t = idx / I, i = idx % I;
    const float g = to_float(x[t * 2 * I + i]);
    const float u = to_float(x[t * 2 * I + I + i]);
    y[idx] = from_float(g / (1.f + expf(-g)) * u);
}}
{self._host("(unsigned)(((long long)T * I + THREADS - 1) / THREADS)", "THREADS")}"""

    def _row_grid_2d(self, p, task, bug):
        guard = f"\n    if (i >= {'I - 1' if bug == 'off_by_one' else 'I'}) return;"
        return f"""
#define THREADS {p['threads']}

// blockIdx.y is the token row, blockIdx.x a block of columns: no division, and a warp's
// gate and up loads are each one contiguous 64-byte run.
extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int T, int I) {{
    const int i = blockIdx.x * THREADS + threadIdx.x;{guard}
    const scalar_t* xr = x + (size_t)blockIdx.y * 2 * I;
    y[(size_t)blockIdx.y * I + i] = from_float(silu_mul(to_float(xr[i]), to_float(xr[I + i])));
}}
{self._host("dim3((I + THREADS - 1) / THREADS, T)", "THREADS")}"""

    def _vectorized_uint4(self, p, task, bug):
        guard = "" if bug == "no_bounds_check" else "\n    if (c >= chunks) return;"
        return f"""
#define THREADS {p['threads']}
{self._PACK}
// Each thread moves one 16-byte chunk of gate, one of up and one of y.
extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int T, int I) {{
    const int chunks = I / VEC;
    const int c = blockIdx.x * THREADS + threadIdx.x;{guard}
    const uint4* gate = reinterpret_cast<const uint4*>(x + (size_t)blockIdx.y * 2 * I);
    const uint4* up = gate + chunks;
    Pack g, u;
    g.u = gate[c];
    u.u = up[c];
    reinterpret_cast<uint4*>(y + (size_t)blockIdx.y * I)[c] = swiglu_pack(g, u);
}}
{self._host("dim3((I / VEC + THREADS - 1) / THREADS, T)", "THREADS")}"""

    def _tile_routine(self, p, bug) -> str:
        guard = "true" if bug == "no_bounds_check" else "c[k] < chunks"
        last = "UNROLL - 1" if bug == "off_by_one" else "UNROLL"
        return f"""
#define THREADS {p['threads']}
#define UNROLL {p['unroll']}
{self._PACK}
// One tile = THREADS * UNROLL chunks of one row. Each thread owns UNROLL chunks THREADS
// apart (a warp's accesses stay contiguous); all 2*UNROLL loads issue before any math.
__device__ __forceinline__ void swiglu_tile(const scalar_t* __restrict__ x, scalar_t* __restrict__ y,
                                            int I, int row, int col_tile) {{
    const int chunks = I / VEC;
    const uint4* gate = reinterpret_cast<const uint4*>(x + (size_t)row * 2 * I);
    const uint4* up = gate + chunks;
    uint4* yr = reinterpret_cast<uint4*>(y + (size_t)row * I);
    int c[UNROLL];
    Pack g[UNROLL], u[UNROLL];
#pragma unroll
    for (int k = 0; k < UNROLL; ++k) {{
        c[k] = (col_tile * UNROLL + k) * THREADS + threadIdx.x;
        if ({guard}) {{ g[k].u = gate[c[k]]; u[k].u = up[c[k]]; }}
    }}
#pragma unroll
    for (int k = 0; k < {last}; ++k)
        if ({guard}) yr[c[k]] = swiglu_pack(g[k], u[k]);
}}
"""

    def _unrolled_ilp(self, p, task, bug):
        return f"""{self._tile_routine(p, bug)}
// 2-D grid: blockIdx.y is the row, blockIdx.x the tile within it.
extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int T, int I) {{
    swiglu_tile(x, y, I, blockIdx.y, blockIdx.x);
}}
{self._host("dim3((I / VEC + THREADS * UNROLL - 1) / (THREADS * UNROLL), T)", "THREADS")}"""

    def _persistent(self, p, task, bug):
        tiles = "tiles - 1" if bug == "off_by_one" else "tiles"
        return f"""{self._tile_routine(p, None)}
// Persistent: as many blocks as fit on the GPU at once stay resident and stride over the
// T * col_tiles tiles; one 32-bit division per tile finds its row.
extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int T, int I) {{
    const int col_tiles = (I / VEC + THREADS * UNROLL - 1) / (THREADS * UNROLL), tiles = T * col_tiles;
    for (int tile = blockIdx.x; tile < {tiles}; tile += gridDim.x) {{
        const int row = tile / col_tiles;
        swiglu_tile(x, y, I, row, tile - row * col_tiles);
    }}
}}

void swiglu_fwd(const scalar_t* x, scalar_t* y, int T, int I, cudaStream_t stream) {{
    static int resident = 0;  // #SMs x blocks per SM, asked once
    if (resident == 0) {{
        int dev = 0, sms = 0, per_sm = 0;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, swiglu_fwd_kernel, THREADS, 0);
        resident = sms * per_sm;
    }}
    const int tiles = T * ((I / VEC + THREADS * UNROLL - 1) / (THREADS * UNROLL));
    swiglu_fwd_kernel<<<tiles < resident ? tiles : resident, THREADS, 0, stream>>>(x, y, T, I);
}}
"""
