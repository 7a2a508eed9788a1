"""SwiGLU forward in CUDA: y[t, i] = silu(x[t, i]) * x[t, I + i] from the fused gate|up GEMM output.

Ladder: one thread per element with div/mod indexing -> 2-D grid (token row x column block)
-> 16-byte uint4 loads of 8 gate and 8 up elements -> several uint4 per thread with every
load issued before the math (ILP) -> persistent grid (#SMs x resident blocks per SM, from the
occupancy API) grid-striding over the tensor.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from ..words import VEC, WORD, word_union
from ._act import host_line
from .swiglu_fwd_spec import ENTRY, SwigluFwdSpec

THREADS = Param("threads", (128, 256, 512), 256)
UNROLL = Param("unroll", (1, 2, 4, 8), 2)
SILU = """
__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.f + __expf(-g)) * u; }
"""
PACK = """
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


def host(task, grid: str, block: str) -> str:
    return host_line(ENTRY, task, "swiglu_fwd_kernel", grid, block)


def chunks_of(p, task) -> int:
    return cdiv(task["I"], 16 // DTYPE_BYTES[task.dtype])     # uint4 chunks per row


# -- thread_per_element, row_grid_2d: scalar loads -----------------------------------------
def thread_per_element_launch(p, task):
    return Launch(grid=cdiv(task["T"] * task["I"], p["threads"]), threads=p["threads"], regs=20,
                  bytes_per_access=DTYPE_BYTES[task.dtype])


def thread_per_element_src(p, task, n="(long long)T * I"):
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
{host(task, "(unsigned)(((long long)T * I + THREADS - 1) / THREADS)", "THREADS")}"""


def row_grid_2d_launch(p, task):
    # VEC adjacent columns a thread: one load of VEC * elt bytes each for gate and up, so the grid
    # keeps VEC times the bytes in flight with VEC times fewer load/store instructions an element
    t, i, threads, vec = task["T"], task["I"], p["threads"], p.get("vec", 1)
    cols = cdiv(i, vec)
    return Launch(grid=t * cdiv(cols, threads), threads=threads, regs=16 + 2 * (vec - 1),
                  bytes_per_access=DTYPE_BYTES[task.dtype] * vec, lane_util=min(1.0, cols / threads))


def row_grid_2d_src(p, task, bound="I"):
    vec = p.get("vec", 1)
    if vec == 1:
        return f"""
#define THREADS {p['threads']}

// blockIdx.y is the token row, blockIdx.x a block of columns: no division, and a warp's
// gate and up loads are each one contiguous 64-byte run.
extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int T, int I) {{
    const int i = blockIdx.x * THREADS + threadIdx.x;
    if (i >= {bound}) return;
    const scalar_t* xr = x + (size_t)blockIdx.y * 2 * I;
    y[(size_t)blockIdx.y * I + i] = from_float(silu_mul(to_float(xr[i]), to_float(xr[I + i])));
}}
{host(task, "dim3((I + THREADS - 1) / THREADS, T)", "THREADS")}"""
    word = WORD[vec]
    return f"""
#define THREADS {p['threads']}
#define VEC {vec}  // adjacent columns a thread: one {vec * 2}-byte {word} of gate, of up and of y; I % VEC == 0
{word_union(vec)}

// blockIdx.y is the token row, blockIdx.x a block of VEC-column words: a warp's gate and up
// loads are each one contiguous {32 * vec * 2}-byte run, VEC values a load instruction.
extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int T, int I) {{
    const int w = blockIdx.x * THREADS + threadIdx.x;
    if (w >= ({bound}) / VEC) return;
    const {word}* gate = reinterpret_cast<const {word}*>(x + (size_t)blockIdx.y * 2 * I);
    const {word}* up = reinterpret_cast<const {word}*>(x + (size_t)blockIdx.y * 2 * I + I);
    Word g, u, o;
    g.u = gate[w];
    u.u = up[w];
#pragma unroll
    for (int k = 0; k < VEC; ++k) o.h[k] = from_float(silu_mul(to_float(g.h[k]), to_float(u.h[k])));
    reinterpret_cast<{word}*>(y + (size_t)blockIdx.y * I)[w] = o.u;
}}
{host(task, "dim3((I / VEC + THREADS - 1) / THREADS, T)", "THREADS")}"""


# -- vectorized_uint4 ----------------------------------------------------------------------
def vectorized_uint4_launch(p, task):
    chunks, threads = chunks_of(p, task), p["threads"]
    per_row = cdiv(chunks, threads)
    return Launch(grid=task["T"] * per_row, threads=threads, regs=26, bytes_per_access=16,
                  lane_util=chunks / (per_row * threads))


def vectorized_uint4_src(p, task, guard="\n    if (c >= chunks) return;"):
    return f"""
#define THREADS {p['threads']}
{PACK}
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
{host(task, "dim3((I / VEC + THREADS - 1) / THREADS, T)", "THREADS")}"""


# -- unrolled_ilp, persistent: UNROLL chunks per thread ------------------------------------
def tile_routine(p, guard: str = "c[k] < chunks") -> str:
    return f"""
#define THREADS {p['threads']}
#define UNROLL {p['unroll']}
{PACK}
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
    for (int k = 0; k < UNROLL; ++k)
        if ({guard}) yr[c[k]] = swiglu_pack(g[k], u[k]);
}}
"""


def unrolled_ilp_launch(p, task):
    chunks, threads, unroll = chunks_of(p, task), p["threads"], p["unroll"]
    per_row = cdiv(chunks, threads * unroll)
    return Launch(grid=task["T"] * per_row, threads=threads, regs=20 + 6 * unroll, bytes_per_access=16 * unroll,
                  lane_util=chunks / (per_row * threads * unroll))


def unrolled_ilp_src(p, task, guard="c[k] < chunks"):
    return f"""{tile_routine(p, guard)}
// 2-D grid: blockIdx.y is the row, blockIdx.x the tile within it.
extern "C" __global__ void __launch_bounds__(THREADS)
swiglu_fwd_kernel(const scalar_t* __restrict__ x, scalar_t* __restrict__ y, int T, int I) {{
    swiglu_tile(x, y, I, blockIdx.y, blockIdx.x);
}}
{host(task, "dim3((I / VEC + THREADS * UNROLL - 1) / (THREADS * UNROLL), T)", "THREADS")}"""


def persistent_launch(p, task):
    chunks, threads, unroll, gpu = chunks_of(p, task), p["threads"], p["unroll"], task.gpu
    per_row, regs = cdiv(chunks, threads * unroll), 32 + 6 * unroll
    # the host asks cudaOccupancyMaxActiveBlocksPerMultiprocessor for this
    per_sm = min(gpu.max_blocks_per_sm, gpu.max_threads_per_sm // threads, gpu.regs_per_sm // (threads * regs))
    grid = min(gpu.sms * per_sm, task["T"] * per_row)
    return Launch(grid=grid, threads=threads, regs=regs, bytes_per_access=16 * unroll,
                  lane_util=chunks / (per_row * threads * unroll))


def persistent_src(p, task, tiles="tiles"):
    return f"""{tile_routine(p)}
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

{ENTRY.prototype(task)} {{
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


# off_by_one on the uint4 rungs: the last chunk of every row is never written. It replaces
# no_bounds_check, invisible wherever a row's chunks fill the blocks exactly (I = 28672 at any
# THREADS: an H200 matched it), and UNROLL - 1 stores, invisible where one tile covers a row.
class SwigluFwdCuda(SwigluFwdSpec):
    impl = "cuda"
    variants = (
        Rung("thread_per_element", "one thread per output, 64-bit div/mod per element, scalar loads",
             (Param("threads", (64, 128, 256), 64),), compute_eff=0.01, memory_eff=0.45,
             launch=thread_per_element_launch, render=thread_per_element_src,
             bugs={"off_by_one": {"n": "(long long)T * I - 1"}}),
        Rung("row_grid_2d", "2-D grid: blockIdx.y is the token row, no division, scalar loads",
             (THREADS, VEC), compute_eff=0.3, memory_eff=0.81, launch=row_grid_2d_launch,
             render=row_grid_2d_src,
             bugs={"off_by_one": {"bound": "I - 1"}}),
        Rung("vectorized_uint4", "16-byte uint4 loads of 8 gate + 8 up elements, one uint4 store",
             (THREADS,), compute_eff=0.4, memory_eff=0.88, launch=vectorized_uint4_launch,
             render=vectorized_uint4_src, bugs={"off_by_one": {"guard": "\n    if (c >= chunks - 1) return;"}}),
        Rung("unrolled_ilp", "UNROLL uint4 chunks per thread, all loads in flight before the math",
             (Param("threads", (64, 128, 256, 512, 1024), 256), UNROLL), compute_eff=0.4, memory_eff=0.9,
             launch=unrolled_ilp_launch, render=unrolled_ilp_src,
             bugs={"off_by_one": {"guard": "c[k] < chunks - 1"}}),
        Rung("persistent", "#SMs x occupancy blocks grid-striding over all uint4 chunks, unrolled",
             (THREADS, UNROLL), compute_eff=0.4, memory_eff=0.84, launch=persistent_launch, render=persistent_src,
             bugs={"off_by_one": {"tiles": "tiles - 1"}}),
    )

    def assemble(self, body, variant, params, task) -> str:
        return f"{prelude(task)}\n{SILU}{body}"
