"""Adafactor's factored second moment in CUDA: row and column means of g^2 for a [R, C] grad.

row = b2t*row + (1-b2t)*(mean_j g^2 + eps1); col = b2t*col + (1-b2t)*(mean_i g^2 + eps1): rows
reduce across lanes, columns down the rows. Ladder: square into a scratch + per-row and per-column
kernels -> one pass over 2-D tiles (shuffles for rows, registers for columns, atomics) -> 16-byte
loads -> persistent row strips: row stats written directly, column partials in registers for the
whole kernel, one atomic per column per block and a last-block finish (one launch, no memset).
"""
from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, DTYPE_BYTES, cdiv
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ._block_reduce import BARRIER

ROWS = Param("rows", (8, 16, 32, 64), 32)

ENTRY = Entry("adafactor_stats", (
    Arg("grad", "in", ("R", "C")), Arg("row", "inout", ("R",), "fp32"), Arg("col", "inout", ("C",), "fp32"),
    Scalar("R"), Scalar("C"), Scalar("beta2t", "float"), Scalar("eps1", "float")))


def launch_of(kind: str):
    """multi (scratch + row / column kernels), tile / vec_tile (2-D tiles) or persistent (strips)."""
    def launch(p, task):
        r, c, e, gpu = task["R"], task["C"], DTYPE_BYTES[task.dtype], task.gpu
        threads, vec = p["threads"], 16 // e
        warps = cdiv(threads, gpu.warp)
        if kind == "multi":
            # g read, fp32 squares written, read by the row kernel (lanes a row apart) and the column one
            return Launch(grid=cdiv(r * c, threads), threads=threads, regs=30, bytes_per_access=4,
                          traffic=(e + 4 + 8 + 4) / e, lane_util=min(1.0, r / threads), launches=3)
        rows = p["rows"]
        if kind in ("tile", "vec_tile"):
            width = threads * (vec if kind == "vec_tile" else 1)
            # one 8-byte L2 read-modify-write per column per tile
            return Launch(grid=cdiv(c, width) * cdiv(r, rows), threads=threads, smem_bytes=rows * warps * 4,
                          regs=30, bytes_per_access=e * (width // threads), traffic=1 + 8 / (rows * e),
                          lane_util=c / (cdiv(c, width) * width), launches=3)
        passes = cdiv(c, threads * vec)
        grid = min(cdiv(r, rows), gpu.sms * p["blocks_per_sm"])
        regs = 40 + passes * vec // 2               # column partials live in registers
        spill = 1.0 + max(0, regs - 255) / 64       # past 255 registers the partials spill
        return Launch(grid=grid, threads=threads, smem_bytes=rows * warps * 4 + 1, regs=min(regs, 255),
                      bytes_per_access=16, traffic=spill + grid * c * 8 / (r * c * e),
                      lane_util=c / (passes * threads * vec), rounds=cdiv(cdiv(r, rows), grid))
    return launch


def tiled_host(task, grid: str, mean: str = " / C") -> str:
    return f"""
// Accumulators -> exponential moving averages; zero-filled next call by the memset.
__global__ void adafactor_finalize_kernel(float* row, float* col, const float* acc, int R, int C,
                                          float beta2t, float eps1) {{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < R) row[i] = beta2t * row[i] + (1.f - beta2t) * (acc[i]{mean} + eps1);
    else if (i < R + C) col[i - R] = beta2t * col[i - R] + (1.f - beta2t) * (acc[i] / R + eps1);
}}

{ENTRY.prototype(task)} {{
    float* acc = nullptr;   // R row sums, then C column sums
    cudaMallocAsync((void**)&acc, (R + C) * sizeof(float), stream);
    cudaMemsetAsync(acc, 0, (R + C) * sizeof(float), stream);
    adafactor_kernel<<<{grid}, THREADS, 0, stream>>>(grad, acc, acc + R, R, C);
    adafactor_finalize_kernel<<<(R + C + 255) / 256, 256, 0, stream>>>(row, col, acc, R, C, beta2t, eps1);
    cudaFreeAsync(acc, stream);
}}
"""


def multi_kernel_src(p, task, mean=" / C"):
    return f"""
// Like the tensor-op version: g^2 + eps1 materialised in fp32, then one kernel per statistic.
__global__ void adafactor_square_kernel(const scalar_t* __restrict__ g, float* __restrict__ sq, int64_t n, float eps1) {{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i < n) {{ const float x = to_float(g[i]); sq[i] = x * x + eps1; }}
}}

// One thread walks a whole row: the lanes of a warp read addresses C floats apart.
extern "C" __global__ void adafactor_kernel(const float* __restrict__ sq, float* row, int R, int C, float beta2t) {{
    const int r = blockIdx.x * THREADS + threadIdx.x;
    if (r >= R) return;
    float s = 0.f;
    for (int j = 0; j < C; ++j) s += sq[(size_t)r * C + j];
    row[r] = beta2t * row[r] + (1.f - beta2t) * s{mean};
}}

// One thread walks a whole column: coalesced across the warp, but only C threads.
__global__ void adafactor_col_kernel(const float* __restrict__ sq, float* col, int R, int C, float beta2t) {{
    const int c = blockIdx.x * THREADS + threadIdx.x;
    if (c >= C) return;
    float s = 0.f;
    for (int i = 0; i < R; ++i) s += sq[(size_t)i * C + c];
    col[c] = beta2t * col[c] + (1.f - beta2t) * s / R;
}}

{ENTRY.prototype(task)} {{
    const int64_t n = (int64_t)R * C;
    float* sq = nullptr;
    cudaMallocAsync((void**)&sq, n * sizeof(float), stream);
    adafactor_square_kernel<<<(unsigned)((n + THREADS - 1) / THREADS), THREADS, 0, stream>>>(grad, sq, n, eps1);
    adafactor_kernel<<<(R + THREADS - 1) / THREADS, THREADS, 0, stream>>>(sq, row, R, C, beta2t);
    adafactor_col_kernel<<<(C + THREADS - 1) / THREADS, THREADS, 0, stream>>>(sq, col, R, C, beta2t);
    cudaFreeAsync(sq, stream);
}}
"""


def row_flush(barrier: str = BARRIER, publish: str = "atomicAdd(&row_acc[r0 + threadIdx.x], s);") -> str:
    return f"""{barrier}
    if (threadIdx.x < ROWS && r0 + threadIdx.x < R) {{   // one thread per row adds up the warps
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < THREADS / WARP_SIZE; ++w) s += row_part[threadIdx.x][w];
        {publish}
    }}"""


def fused_tile_shuffle_src(p, task, col_add="atomicAdd(&col_acc[c], colsum);", barrier=BARRIER):
    return f"""
// A [ROWS x THREADS] tile per block, one column per thread. g is read exactly once: each
// element feeds its row (warp shuffle, then across warps in smem) and its column (a register).
extern "C" __global__ void __launch_bounds__(THREADS)
adafactor_kernel(const scalar_t* __restrict__ g, float* row_acc, float* col_acc, int R, int C) {{
    __shared__ float row_part[ROWS][THREADS / WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int c = blockIdx.x * THREADS + threadIdx.x, r0 = blockIdx.y * ROWS;
    float colsum = 0.f;
    for (int i = 0; i < ROWS; ++i) {{
        float s = 0.f;
        if (r0 + i < R && c < C) {{ const float x = to_float(g[(size_t)(r0 + i) * C + c]); s = x * x; }}
        colsum += s;
        s = warp_sum(s);
        if (lane == 0) row_part[i][warp] = s;
    }}{row_flush(barrier)}
    if (c < C) {col_add}
}}
{tiled_host(task, "dim3((C + THREADS - 1) / THREADS, (R + ROWS - 1) / ROWS)")}"""


def pack(task) -> str:
    return (f"constexpr int VEC = {16 // DTYPE_BYTES[task.dtype]};     // columns per 16-byte load (C is a "
            "multiple of VEC)\nunion Pack { uint4 u; scalar_t h[VEC]; };\n")


def vectorized_uint4_src(p, task, col_add="atomicAdd(&col_acc[c0 + k], colsum[k]);", mean=" / C"):
    return f"""{pack(task)}
// The tiled pass with one uint4 per thread per row: VEC columns per thread, so a row's warp
// shuffle is amortized over VEC elements and each warp moves 512 contiguous bytes.
extern "C" __global__ void __launch_bounds__(THREADS)
adafactor_kernel(const scalar_t* __restrict__ g, float* row_acc, float* col_acc, int R, int C) {{
    __shared__ float row_part[ROWS][THREADS / WARP_SIZE];
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    const int c0 = (blockIdx.x * THREADS + threadIdx.x) * VEC, r0 = blockIdx.y * ROWS;
    float colsum[VEC] = {{}};
    for (int i = 0; i < ROWS; ++i) {{
        float s = 0.f;
        if (r0 + i < R && c0 < C) {{
            Pack a; a.u = *reinterpret_cast<const uint4*>(g + (size_t)(r0 + i) * C + c0);
#pragma unroll
            for (int k = 0; k < VEC; ++k) {{ const float x = to_float(a.h[k]); colsum[k] += x * x; s += x * x; }}
        }}
        s = warp_sum(s);
        if (lane == 0) row_part[i][warp] = s;
    }}{row_flush()}
    if (c0 < C) {{
#pragma unroll
        for (int k = 0; k < VEC; ++k) {col_add}
    }}
}}
{tiled_host(task, "dim3((C / VEC + THREADS - 1) / THREADS, (R + ROWS - 1) / ROWS)", mean)}"""


def persistent_last_block_src(p, task, col_add="atomicAdd(&col_acc[cc + k], colsum[q][k]);", last="gridDim.x - 1"):
    r, c = task["R"], task["C"]
    passes = cdiv(c, p["threads"] * (16 // DTYPE_BYTES[task.dtype]))
    return f"""#define BLOCKS_PER_SM {p['blocks_per_sm']}
#define R_ROWS {r}                    // the shape is baked in: column partials are registers
#define C_COLS {c}
{pack(task)}constexpr int PASSES = (C_COLS / VEC + THREADS - 1) / THREADS;   // = {passes} uint4 per thread per row
__device__ float col_acc[C_COLS];       // zero at load; the finishing block re-zeroes it
__device__ unsigned int ticket = 0;

// Each block owns whole rows, ROWS at a time, strided over the grid: a row's sum never leaves
// the block, so row stats are written directly. Column partials stay in registers across all
// of a block's strips and reach the accumulator once per block; the last block to finish
// turns them into the column EMA. One launch, no memset, no finalize kernel.
extern "C" __global__ void __launch_bounds__(THREADS)
adafactor_kernel(const scalar_t* __restrict__ g, float* row, float* col, float beta2t, float eps1) {{
    __shared__ float row_part[ROWS][THREADS / WARP_SIZE];
    __shared__ bool is_last;
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    float colsum[PASSES][VEC] = {{}};
    for (int r0 = blockIdx.x * ROWS; r0 < R_ROWS; r0 += gridDim.x * ROWS) {{
        for (int i = 0; i < ROWS && r0 + i < R_ROWS; ++i) {{
            const scalar_t* gr = g + (size_t)(r0 + i) * C_COLS;
            float s = 0.f;
#pragma unroll
            for (int q = 0; q < PASSES; ++q) {{
                const int cc = (q * THREADS + threadIdx.x) * VEC;
                if (cc < C_COLS) {{
                    Pack a; a.u = *reinterpret_cast<const uint4*>(gr + cc);
#pragma unroll
                    for (int k = 0; k < VEC; ++k) {{ const float x = to_float(a.h[k]); colsum[q][k] += x * x; s += x * x; }}
                }}
            }}
            s = warp_sum(s);
            if (lane == 0) row_part[i][warp] = s;
        }}
        __syncthreads();
        if (threadIdx.x < ROWS && r0 + threadIdx.x < R_ROWS) {{
            float s = 0.f;
#pragma unroll
            for (int w = 0; w < THREADS / WARP_SIZE; ++w) s += row_part[threadIdx.x][w];
            float* rp = row + r0 + threadIdx.x;
            *rp = beta2t * *rp + (1.f - beta2t) * (s / C_COLS + eps1);
        }}
        __syncthreads();                          // row_part is refilled by the next strip
    }}
#pragma unroll
    for (int q = 0; q < PASSES; ++q) {{
        const int cc = (q * THREADS + threadIdx.x) * VEC;
        if (cc < C_COLS) {{
#pragma unroll
            for (int k = 0; k < VEC; ++k) {col_add}
        }}
    }}
    __threadfence();                              // column sums visible before the ticket
    __syncthreads();
    if (threadIdx.x == 0) is_last = atomicAdd(&ticket, 1u) == {last};
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    for (int j = threadIdx.x; j < C_COLS; j += THREADS) {{
        const float s = atomicExch(&col_acc[j], 0.f);   // read past L1 and re-zero in one step
        col[j] = beta2t * col[j] + (1.f - beta2t) * (s / R_ROWS + eps1);
    }}
    if (threadIdx.x == 0) ticket = 0;
}}

{ENTRY.prototype(task)} {{
    static int sms = 0;
    if (!sms) {{ int dev; cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); }}
    const int strips = (R + ROWS - 1) / ROWS;
    const int grid = strips < sms * BLOCKS_PER_SM ? strips : sms * BLOCKS_PER_SM;
    adafactor_kernel<<<grid, THREADS, 0, stream>>>(grad, row, col, beta2t, eps1);
}}
"""


class AdafactorCuda(OpModule):
    op, impl, family = "adafactor", "cuda", "training"
    title = "Adafactor factored second-moment update"
    desc = ("For a grad g [R, C]: exp_avg_sq_row[R] and exp_avg_sq_col[C] (fp32, in place) become "
            "b2t*s + (1-b2t)*(mean of g^2 over columns / rows + eps1); fp32 accumulation.")
    dims = {"R": "rows of the weight gradient", "C": "columns (contiguous)"}
    shapes = ({"R": 1024, "C": 4096}, {"R": 4096, "C": 4096}, {"R": 14336, "C": 4096},
              {"R": 4096, "C": 14336}, {"R": 128256, "C": 4096}, {"R": 28672, "C": 8192})
    dtypes = ("bf16", "fp32")
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("grad", "row", "col")
    check_shape, tolerance = {"R": 4096, "C": 4096}, "fp32"      # row / col EMAs updated in place
    variants = (
        Rung("multi_kernel", "square into fp32 scratch, thread-per-row and thread-per-column kernels",
             (Param("threads", (128, 256, 512), 256),), compute_eff=0.5, memory_eff=0.5,
             launch=launch_of("multi"), render=multi_kernel_src, bugs={"missing_scale": {"mean": ""}}),
        Rung("fused_tile_shuffle", "one pass over [ROWS x THREADS] tiles: warp_sum per row, column "
             "partials in registers, atomics into accumulators, finalize kernel",
             (Param("threads", (128, 256, 512), 256), ROWS), compute_eff=0.06, memory_eff=0.7,
             smem="static", launch=launch_of("tile"), render=fused_tile_shuffle_src,
             bugs={"missing_barrier": {"barrier": ""}, "racy_update": {"col_add": "col_acc[c] = colsum;   // plain store: the last strip wins"}}),
        Rung("vectorized_uint4", "the tiled pass with 16-byte loads: 8 columns per thread, shuffles amortized",
             (Param("threads", (64, 128, 256), 128), ROWS), compute_eff=0.4, memory_eff=0.86,
             smem="static", launch=launch_of("vec_tile"), render=vectorized_uint4_src,
             bugs={"racy_update": {"col_add": "col_acc[c0 + k] = colsum[k];"}, "missing_scale": {"mean": ""}}),
        Rung("persistent_last_block", "#SMs x k blocks own full-width row strips; columns in registers, last "
             "block finishes: one launch", (Param("threads", (256, 512, 1024), 512), Param("rows", (4, 8, 16), 8),
              Param("blocks_per_sm", (1, 2), 1)), compute_eff=0.5, memory_eff=0.9,
             smem="static", launch=launch_of("persistent"), render=persistent_last_block_src,
             bugs={"racy_update": {"col_add": "col_acc[cc + k] = colsum[q][k];"}, "off_by_one": {"last": "gridDim.x"}}),
    )

    def cost(self, task: Task) -> Cost:
        r, c = task["R"], task["C"]
        return Cost(flops=3 * r * c, bytes=r * c * DTYPE_BYTES[task.dtype] + 8 * (r + c))

    torch_ref = TorchRef(
        body=("update = grad.float().pow(2) + self.eps1\n"
              "        row.mul_(self.beta2t).add_(update.mean(dim=-1), alpha=1 - self.beta2t)\n"
              "        col.mul_(self.beta2t).add_(update.mean(dim=-2), alpha=1 - self.beta2t)\n"
              "        return row, col"),
        init="self.beta2t, self.eps1 = 1.0 - 10 ** -0.8, 1e-30",
        # unit-scale gradients and moments: with outputs of ~1e-4 (grad * 1e-2) every error would sit
        # under KernelBench's fp32 atol of 1e-4, a lost column strip included
        inputs=("[torch.randn(R, C, dtype=DTYPE, device='cuda'), "
                "torch.rand(R, device='cuda'), torch.rand(C, device='cuda')]"))

    def assemble(self, body, variant, params, task) -> str:
        head = f"#define THREADS {params['threads']}\n"
        if "rows" in params:
            head += f"#define ROWS {params['rows']}             // rows per tile / strip\n"
        return f"{prelude(task)}\n{head}{body}"
