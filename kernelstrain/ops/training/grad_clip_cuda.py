"""Global-norm gradient clipping in CUDA over one flat gradient buffer of N elements.

norm = sqrt(sum g^2); g *= min(1, max_norm / (norm + 1e-6)). A reduction then a scale pass.
Ladder: an atomicAdd per element -> block reduction with one atomic per block -> two-stage
deterministic partials with the final reduce fused into the scale kernel -> one cooperative
persistent kernel: 16-byte loads, partials, a grid-wide barrier, then the scale pass. (Holding g
in registers across the barrier, as Apex's persistent NHWC batch norm holds its tile, is not a rung:
the catalog's register files hold less than their L2, which already serves the re-read of a g that
fits; a larger g must cross DRAM again, so the best reaches ~1.5x the floor's read-once bytes. The two
fixed-grid rungs' `reverse` walks the scale pass from g's end, where the norm pass left L2 holding some of
g's tail: 2-8% on an H100 at 1.3x its L2, _reverse_scale.py.)
"""
from dataclasses import replace

from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, DTYPE_BYTES, cdiv, occupancy_regs
from .. import unroll
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ._block_reduce import BARRIER, block_sum
from ._reverse_scale import REVERSE, persistent_scale_loop, reverse_traffic, two_stage_scale_loop
from ._scalar_issue import scalar_issue_traffic

THREADS = Param("threads", (128, 256, 512, 1024), 256)
MAX_GRID = 4096         # partial slots
GRID_SYNC = "\n    grid.sync();                                 // every partial written"
NO_SCALE = {"scale": ""}
# two_stage_deterministic's memory_eff was fitted over bf16 rows, whose 2-byte loads fill half a 128-byte line a warp
# (and whose issue binds: _scalar_issue); fp32's fill it. Stored fp32 rows (fitted on) ran 1.16x faster than modelled
# on the H200 (33 rows: N=268,435,456 857 us, modelled 1,094) and 1.11x on the H100 (8), the bf16 ones 1.03x / 0.92x;
# the module's stored pair order 0.912 -> 0.944 at 0.9 (0.85 / 0.95: 0.928 / 0.928)
FULL_LINE = 0.9

ENTRY = Entry("grad_clip", (
    Arg("grads", "inout", ("N",)), Scalar("n", "int64_t", value="N"), Scalar("max_norm", "float", "1.0"),
    Arg("total_norm", "out", (1,), "fp32")))


def launch_of(kind: str):
    """atomic (one per element), block (one atomic per block), two_stage (fixed grid of
    partials) or cooperative (#SMs x k resident blocks)."""
    def launch(p, task):
        n, e, gpu, threads = task["N"], DTYPE_BYTES[task.dtype], task.gpu, p["threads"]
        warps = cdiv(threads, gpu.warp)
        # every structure reads g twice (norm, then scale) and writes it once: 3 passes / 2, less what
        # a reverse scale pass re-reads from L2
        traffic = reverse_traffic(task, p.get("reverse", 0))
        if kind == "atomic":
            return Launch(grid=cdiv(n, threads), threads=threads, regs=10, bytes_per_access=e, traffic=traffic,
                          serial_atomics=n, launches=3)
        if kind == "block":
            items = p["items"]
            return Launch(grid=cdiv(n, threads * items), threads=threads, smem_bytes=warps * 4,
                          regs=8 + 2 * items, bytes_per_access=e * items, traffic=traffic,
                          serial_atomics=cdiv(n, threads * items), launches=3)
        if kind == "two_stage":
            # nvcc unrolls the scalar grid-stride loops 4x: four independent loads a thread in
            # flight (H200: the time barely moves from 256x128 to 2048x512 threads)
            launch = Launch(grid=p["blocks"], threads=threads, smem_bytes=warps * 4, regs=28,
                            bytes_per_access=4 * e, traffic=traffic, launches=2)
            return replace(launch, traffic=max(traffic, scalar_issue_traffic(launch, task)),
                           narrow=FULL_LINE if e == 4 else 1.0)
        return Launch(grid=gpu.sms * p["blocks_per_sm"], threads=threads, smem_bytes=warps * 4, regs=26,
                      bytes_per_access=16, traffic=traffic)
    return launch


def cooperative_launch(p, task):
    """The cooperative rung with its loops unrolled: the host sizes the grid to the blocks that fit
    an SM (cudaOccupancyMaxActiveBlocksPerMultiprocessor), so registers an unroll adds can shrink it.
    Without the knob the model keeps the requested grid, as the calibration was fitted with it."""
    base = launch_of("cooperative")(p, task)
    if not unroll.factor(p):
        return base
    chunks = task["N"] * DTYPE_BYTES[task.dtype] / 16
    out = unroll.unrolled(base, p, chunks / (task.gpu.sms * p["blocks_per_sm"] * p["threads"]), 4)
    fit = occupancy_regs(p["threads"], out.regs, task.gpu)
    return replace(out, grid=task.gpu.sms * max(1, min(p["blocks_per_sm"], fit)))


def common(p, barrier=BARRIER) -> str:
    """THREADS, clip_coef and block_sum: the head of every rung's source."""
    return f"""#define THREADS {p['threads']}

// max_norm / (norm + eps), clamped to 1: the factor every element is scaled by
__device__ __forceinline__ float clip_coef(float sum_sq, float max_norm) {{
    return fminf(1.f, max_norm / (sqrtf(sum_sq) + 1e-6f));
}}
{block_sum(barrier, compact=True)}"""


def scale_kernel(acc: str = "float") -> str:
    return f"""
// Pass 2: every thread reads the finished sum, so no grid-wide sync is needed.
__global__ void grad_clip_scale_kernel(scalar_t* __restrict__ g, int64_t n, const {acc}* sum_sq,
                                       float max_norm, float* total_norm) {{
    const float coef = clip_coef((float)*sum_sq, max_norm);
    if (blockIdx.x == 0 && threadIdx.x == 0) *total_norm = sqrtf((float)*sum_sq);
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        g[i] = from_float(to_float(g[i]) * coef);
}}
"""


def atomic_host(grid, acc: str = "float") -> str:
    return f"""
void grad_clip(scalar_t* grads, int64_t n, float max_norm, float* total_norm, cudaStream_t stream) {{
    {acc}* sum_sq = nullptr;
    cudaMallocAsync((void**)&sum_sq, sizeof({acc}), stream);
    cudaMemsetAsync(sum_sq, 0, sizeof({acc}), stream);
    grad_clip_kernel<<<{grid}, THREADS, 0, stream>>>(grads, n, sum_sq);
    grad_clip_scale_kernel<<<4096, 256, 0, stream>>>(grads, n, sum_sq, max_norm, total_norm);
    cudaFreeAsync(sum_sq, stream);
}}
"""


def atomic_per_element_src(p, task, add="atomicAdd(sum_sq, (double)(v * v));"):
    return f"""{common(p)}
{scale_kernel("double")}
// Pass 1: every square goes straight into one double (a float running sum of 10^8 small
// squares stops growing once each term is under half its ulp); the L2 serialises N atomics on it.
extern "C" __global__ void grad_clip_kernel(const scalar_t* __restrict__ g, int64_t n, double* sum_sq) {{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i < n) {{ const float v = to_float(g[i]); {add} }}
}}
{atomic_host("(unsigned)((n + THREADS - 1) / THREADS)", "double")}"""


def block_reduce_atomic_src(p, task, add="atomicAdd(sum_sq, (double)v);", barrier=BARRIER):
    return f"""{common(p, barrier)}
#define ITEMS {p['items']}           // elements per thread, THREADS apart so each load is coalesced
{scale_kernel("double")}
// the block totals meet in a double: up to 10^7 blocks, and a float total of ~10^5 rounds
// every ~0.03 block total by up to an eighth of it (the H200: 0.4% off the norm at N 1.2e9)
extern "C" __global__ void __launch_bounds__(THREADS)
grad_clip_kernel(const scalar_t* __restrict__ g, int64_t n, double* sum_sq) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    const int64_t base = (int64_t)blockIdx.x * THREADS * ITEMS + threadIdx.x;
    float v = 0.f;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {{
        const int64_t i = base + (int64_t)k * THREADS;
        if (i < n) {{ const float x = to_float(g[i]); v += x * x; }}
    }}
    v = block_sum(v, warp_totals);
    if (threadIdx.x == 0) {add}   // one atomic per block
}}
{atomic_host("(unsigned)((n + THREADS * ITEMS - 1) / (THREADS * ITEMS))", "double")}"""


def two_stage_deterministic_src(p, task, scale=" * coef"):
    return f"""{common(p)}
#define BLOCKS {p['blocks']}          // fixed grid: partial slots, and the scale kernel's grid
__device__ float partials[BLOCKS];

// Stage 1: a fixed grid strides over g, each block leaves its sum of squares in its slot.
extern "C" __global__ void __launch_bounds__(THREADS)
grad_clip_kernel(const scalar_t* __restrict__ g, int64_t n) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    float v = 0.f;
    for (int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (int64_t)BLOCKS * THREADS) {{
        const float x = to_float(g[i]); v += x * x;
    }}
    v = block_sum(v, warp_totals);
    if (threadIdx.x == 0) partials[blockIdx.x] = v;
}}

// Stage 2, fused into the scale pass: each block re-reduces the BLOCKS partials in the same
// order (a few KB from L2), so every block gets the same bits without a third kernel.
__global__ void __launch_bounds__(THREADS)
grad_clip_scale_kernel(scalar_t* __restrict__ g, int64_t n, float max_norm, float* total_norm) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    __shared__ float coef_shared;
    float s = 0.f;
    for (int i = threadIdx.x; i < BLOCKS; i += THREADS) s += partials[i];
    s = block_sum(s, warp_totals);
    if (threadIdx.x == 0) {{
        coef_shared = clip_coef(s, max_norm);
        if (blockIdx.x == 0) *total_norm = sqrtf(s);
    }}
    __syncthreads();
    const float coef = coef_shared;
{two_stage_scale_loop(p, scale)}
}}

void grad_clip(scalar_t* grads, int64_t n, float max_norm, float* total_norm, cudaStream_t stream) {{
    grad_clip_kernel<<<BLOCKS, THREADS, 0, stream>>>(grads, n);
    grad_clip_scale_kernel<<<BLOCKS, THREADS, 0, stream>>>(grads, n, max_norm, total_norm);
}}
"""


def vectorized_persistent_src(p, task, scale=" * coef", sync=GRID_SYNC, barrier=BARRIER):
    vec = 16 // DTYPE_BYTES[task.dtype]
    return f"""{common(p, barrier)}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
#define MAX_GRID {MAX_GRID}
constexpr int VEC = {vec};             // elements per 16-byte load
union Pack {{ uint4 u; scalar_t h[VEC]; }};
namespace cg = cooperative_groups;
__device__ float partials[MAX_GRID];

// One cooperative launch: all blocks are resident, so a grid-wide barrier between the norm
// and the scale pass is safe. When g fits in L2 the second pass reads it from there.
extern "C" __global__ void __launch_bounds__(THREADS)
grad_clip_kernel(scalar_t* __restrict__ g, int64_t n, float max_norm, float* total_norm) {{
    cg::grid_group grid = cg::this_grid();
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    uint4* gv = reinterpret_cast<uint4*>(g);     // allocator memory: 256-byte aligned
    const int64_t chunks = n / VEC, stride = (int64_t)gridDim.x * THREADS;
    const int64_t first = (int64_t)blockIdx.x * THREADS + threadIdx.x, tail = chunks * VEC + first;
    float v = 0.f;
    for (int64_t c = first; c < chunks; c += stride) {{
        Pack a; a.u = gv[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) {{ const float x = to_float(a.h[k]); v += x * x; }}
    }}
    if (tail < n) {{ const float x = to_float(g[tail]); v += x * x; }}
    v = block_sum(v, warp_totals);
    if (threadIdx.x == 0) partials[blockIdx.x] = v;{sync}
    const volatile float* slots = partials;       // written by other SMs: read past L1
    float s = 0.f;
    for (int i = threadIdx.x; i < gridDim.x; i += THREADS) s += slots[i];   // same order in every block
    __syncthreads();                                // warp_totals is reused
    s = block_sum(s, warp_totals);
    if (threadIdx.x == 0) warp_totals[0] = s;
    __syncthreads();
    s = warp_totals[0];
    if (blockIdx.x == 0 && threadIdx.x == 0) *total_norm = sqrtf(s);
    const float coef = clip_coef(s, max_norm);
{persistent_scale_loop(p, scale)}
    if (tail < n) g[tail] = from_float(to_float(g[tail]){scale});
}}

void grad_clip(scalar_t* grads, int64_t n, float max_norm, float* total_norm, cudaStream_t stream) {{
    static int grid = 0;
    if (!grid) {{  // as many blocks as can be resident at once, the condition for grid.sync()
        int dev, sms, fit;
        cudaGetDevice(&dev);
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, grad_clip_kernel, THREADS, 0);
        grid = sms * (fit < BLOCKS_PER_SM ? fit : BLOCKS_PER_SM);
        grid = grid < MAX_GRID ? grid : MAX_GRID;
    }}
    void* args[] = {{&grads, &n, &max_norm, &total_norm}};
    cudaLaunchCooperativeKernel((const void*)grad_clip_kernel, grid, THREADS, args, 0, stream);
}}
"""


class GradClipCuda(OpModule):
    op, impl, family = "grad_clip", "cuda", "training"
    title = "Global-norm gradient clipping"
    desc = ("In place on a flat gradient g of N elements: norm = sqrt(sum(g^2)) in fp32, "
            "g *= min(1, max_norm / (norm + 1e-6)); the norm is also returned (fp32 scalar).")
    dims = {"N": "gradient elements"}
    shapes = ({"N": 4194304}, {"N": 16777216}, {"N": 124439808}, {"N": 268435456},
              {"N": 1235814400}, {"N": 3212749824})
    dtypes = ("bf16", "fp32")
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("grads",)
    check_shape = {"N": 124439808}                  # GPT-2 size: not a multiple of 512
    # the norm is a sum of N squares in fp32 in another order: dtype class (also for the scale)
    baseline = "block_reduce_atomic"    # one same-address atomic per element is nobody's first version
    variants = (
        Rung("atomic_per_element", "each thread atomicAdds g^2 into one float, then a scale kernel",
             (THREADS,), compute_eff=1.0, memory_eff=0.6, launch=launch_of("atomic"), render=atomic_per_element_src,
             bugs={"racy_update": {"add": "*sum_sq += (double)(v * v);"}}),
        Rung("block_reduce_atomic", "warp-shuffle block reduction, one atomic per block, then scale",
             (THREADS, Param("items", (1, 2, 4, 8), 4)), compute_eff=1.0, memory_eff=0.78, smem="static",
             launch=launch_of("block"), render=block_reduce_atomic_src,
             bugs={"missing_barrier": {"barrier": ""}, "racy_update": {"add": "*sum_sq += (double)v;"}}),
        Rung("two_stage_deterministic", "fixed-grid partials, scale kernel re-reduces them in order",
             (THREADS, Param("blocks", (256, 512, 1024, 2048), 1024), unroll.PRAGMA_UNROLL, REVERSE), compute_eff=1.0, memory_eff=0.82,
             smem="static", render=unroll.render_of(two_stage_deterministic_src),
             launch=unroll.launch_of(launch_of("two_stage"), lambda p, t: t["N"] / (p["blocks"] * p["threads"]), 1),
             bugs={"missing_scale": NO_SCALE}),
        # missing_barrier drops the grid.sync() and the block_sum barrier
        Rung("vectorized_persistent", "one cooperative launch: uint4 sum of squares, grid.sync(), uint4 scale",
             (Param("threads", (256, 512, 1024), 512), Param("blocks_per_sm", (1, 2, 4), 2), unroll.PRAGMA_UNROLL, REVERSE),
             compute_eff=1.0, memory_eff=0.9, smem="static", launch=cooperative_launch,
             render=unroll.render_of(vectorized_persistent_src),
             bugs={"missing_barrier": {"sync": "", "barrier": ""}, "missing_scale": NO_SCALE}),
    )

    def cost(self, task: Task) -> Cost:
        n = task["N"]
        return Cost(flops=3 * n, bytes=2 * n * DTYPE_BYTES[task.dtype] + 4)

    torch_ref = TorchRef(
        body=("norm = grads.float().pow(2).sum().sqrt()\n"
              "        coef = (self.max_norm / (norm + 1e-6)).clamp(max=1.0)\n"
              "        return (grads.float() * coef).to(grads.dtype), norm.reshape(1)"),
        init="self.max_norm = 1.0",
        inputs="[torch.randn(N, dtype=DTYPE, device='cuda') * 1e-2]")

    def assemble(self, body, variant, params, task) -> str:
        coop = (task.dialect.coop_groups_header,) if "cooperative_groups;" in body else ()
        return f"{prelude(task, coop)}\n{body}"
