"""Full 1-D sum in CUDA: out = sum(x[0:N]) in fp32, the reduction under loss/norm statistics.

Ladder: an atomicAdd per element -> shared-memory tree per block -> warp shuffles with several
elements per thread -> 16-byte vector loads in a grid-stride loop over #SMs x k blocks ->
persistent two-stage: block partials plus a last-block finish, one launch and deterministic.
"""
from ..base import (Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv,
                    cuda_prelude, kernelbench_program)
from ._block_reduce import block_sum

THREADS = Param("threads", (128, 256, 512, 1024), 256)
BLOCKS_PER_SM = Param("blocks_per_sm", (1, 2, 4, 8), 4)
MAX_GRID = 4096         # partial slots of the two-stage kernel


class ReductionCuda(OpModule):
    op, impl, family = "reduction", "cuda", "training"
    title = "Full sum reduction"
    desc = ("out = sum(x) over a flat vector of N elements (1-D, not per row), fp32 accumulation, "
            "fp32 scalar result.")
    dims = {"N": "elements"}
    shapes = ({"N": 1048576}, {"N": 4194304}, {"N": 16777216}, {"N": 67108864},
              {"N": 268435456}, {"N": 1073741824})
    dtypes = ("bf16", "fp32")
    vendors = ("nvidia", "amd")
    baseline = "smem_tree"        # nobody starts a sum from one same-address atomic per element
    variants = (
        Variant("atomic_per_element", "every thread atomicAdds its element into the result",
                (THREADS,), compute_eff=1.0, memory_eff=0.6, bugs=("racy_update",)),
        Variant("smem_tree", "one element per thread, tree reduction in shared memory, an atomic per block",
                (THREADS,), compute_eff=1.0, memory_eff=0.55, smem="static",
                bugs=("missing_barrier", "racy_update")),
        Variant("warp_shuffle", "several elements per thread, warp shuffles, one smem slot per warp",
                (THREADS, Param("items", (1, 2, 4, 8), 4)), compute_eff=1.0, memory_eff=0.78, smem="static",
                bugs=("wrong_init", "racy_update")),
        Variant("vectorized_grid_stride", "16-byte uint4 loads, grid of #SMs x k blocks striding over x",
                (THREADS, BLOCKS_PER_SM), compute_eff=1.0, memory_eff=0.88, smem="static",
                bugs=("missing_barrier", "racy_update")),
        Variant("persistent_two_stage", "vector grid-stride partials + last-block finish: one launch, no atomics on floats",
                (Param("threads", (256, 512, 1024), 512), BLOCKS_PER_SM), compute_eff=1.0, memory_eff=0.92,
                smem="static", bugs=("bad_combine_index", "off_by_one")),
    )

    def cost(self, task: Task) -> Cost:
        n = task["N"]
        return Cost(flops=n, bytes=n * DTYPE_BYTES[task.dtype] + 4)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        n, e, gpu = task["N"], DTYPE_BYTES[task.dtype], task.gpu
        threads = params["threads"]
        warps = cdiv(threads, gpu.warp)
        if variant.tag == "atomic_per_element":
            # N same-address atomics serialise in the L2: the atomic stream is the bottleneck
            return Launch(grid=cdiv(n, threads), threads=threads, regs=10, bytes_per_access=e,
                          serial_atomics=n, launches=2)
        if variant.tag == "smem_tree":
            return Launch(grid=cdiv(n, threads), threads=threads, smem_bytes=threads * 4, regs=10,
                          bytes_per_access=e, serial_atomics=cdiv(n, threads), launches=2)   # one a block
        if variant.tag == "warp_shuffle":
            items = params["items"]
            return Launch(grid=cdiv(n, threads * items), threads=threads, smem_bytes=warps * 4,
                          regs=8 + 2 * items, bytes_per_access=e * items,
                          serial_atomics=cdiv(n, threads * items), launches=2)
        grid = min(gpu.sms * params["blocks_per_sm"], cdiv(n * e, threads * 16), MAX_GRID)
        if variant.tag == "vectorized_grid_stride":
            return Launch(grid=grid, threads=threads, smem_bytes=warps * 4, regs=20, bytes_per_access=16,
                          launches=2)
        return Launch(grid=grid, threads=threads, smem_bytes=warps * 4 + 1, regs=26, bytes_per_access=32)

    def signature(self, task: Task) -> str:
        return "void reduce_sum(const scalar_t* x, float* out, int64_t n, cudaStream_t stream)"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="x", body="return x.float().sum().reshape(1)",
            inputs="[torch.randn(N, dtype=DTYPE, device='cuda')]")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n{body}"

    @staticmethod
    def _host(grid: str, memset: bool = True) -> str:
        zero = "    cudaMemsetAsync(out, 0, sizeof(float), stream);  // blocks accumulate into *out\n" if memset else ""
        return f"""
void reduce_sum(const scalar_t* x, float* out, int64_t n, cudaStream_t stream) {{
{zero}    reduction_kernel<<<{grid}, THREADS, 0, stream>>>(x, out, n);
}}
"""

    @staticmethod
    def _publish(bug, value="v", out="out"):
        """How a block adds its total into *out: an atomic, or the racy read-modify-write."""
        return f"*{out} += {value};" if bug == "racy_update" else f"atomicAdd({out}, {value});"

    def _atomic_per_element(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}

// Every element goes straight into one address: the L2 serialises N atomics on it.
extern "C" __global__ void reduction_kernel(const scalar_t* __restrict__ x, float* out, int64_t n) {{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i < n) {{ const float v = to_float(x[i]); {self._publish(bug)} }}
}}
{self._host("(unsigned)((n + THREADS - 1) / THREADS)")}"""

    def _smem_tree(self, p, task, bug):
        barrier = "" if bug == "missing_barrier" else "\n        __syncthreads();"
        return f"""
#define THREADS {p['threads']}

// One element per thread; the block halves its partials in shared memory each step and
// thread 0 adds the block total into *out: N / THREADS atomics instead of N.
extern "C" __global__ void __launch_bounds__(THREADS)
reduction_kernel(const scalar_t* __restrict__ x, float* out, int64_t n) {{
    __shared__ float partial[THREADS];
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    partial[threadIdx.x] = i < n ? to_float(x[i]) : 0.f;
    __syncthreads();
    for (int stride = THREADS / 2; stride > 0; stride >>= 1) {{
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];{barrier}
    }}
    if (threadIdx.x == 0) {{ const float v = partial[0]; {self._publish(bug)} }}
}}
{self._host("(unsigned)((n + THREADS - 1) / THREADS)")}"""

    def _warp_shuffle(self, p, task, bug):
        init = "1.f" if bug == "wrong_init" else "0.f"
        return f"""
#define THREADS {p['threads']}
#define ITEMS {p['items']}           // elements per thread, THREADS apart: each load coalesced
{block_sum(bug)}
extern "C" __global__ void __launch_bounds__(THREADS)
reduction_kernel(const scalar_t* __restrict__ x, float* out, int64_t n) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    const int64_t base = (int64_t)blockIdx.x * THREADS * ITEMS + threadIdx.x;
    float v = {init};
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {{
        const int64_t i = base + (int64_t)k * THREADS;
        if (i < n) v += to_float(x[i]);
    }}
    v = block_sum(v, warp_totals);
    if (threadIdx.x == 0) {self._publish(bug)}
}}
{self._host("(unsigned)((n + THREADS * ITEMS - 1) / (THREADS * ITEMS))")}"""

    def _vec_loop(self, task, unroll: bool) -> str:
        vec = 16 // DTYPE_BYTES[task.dtype]
        body = """    for (; c + stride < chunks; c += 2 * stride) {   // two 16-byte loads in flight
        Pack a, b; a.u = xv[c]; b.u = xv[c + stride];
#pragma unroll
        for (int k = 0; k < VEC; ++k) v += to_float(a.h[k]) + to_float(b.h[k]);
    }
""" if unroll else ""
        return f"""    // 16-byte loads of VEC = {vec} elements; x comes from the allocator, 256-byte aligned
    const uint4* xv = reinterpret_cast<const uint4*>(x);
    const int64_t chunks = n / VEC, stride = (int64_t)gridDim.x * THREADS;
    int64_t c = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    float v = 0.f;
{body}    for (; c < chunks; c += stride) {{
        Pack a; a.u = xv[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) v += to_float(a.h[k]);
    }}
    const int64_t tail = chunks * VEC + (int64_t)blockIdx.x * THREADS + threadIdx.x;   // n % VEC leftovers
    if (tail < n) v += to_float(x[tail]);"""

    def _pack(self, task):
        return f"constexpr int VEC = {16 // DTYPE_BYTES[task.dtype]};\nunion Pack {{ uint4 u; scalar_t h[VEC]; }};\n"

    @staticmethod
    def _grid(cap: int) -> str:
        return f"""
// #SMs x BLOCKS_PER_SM blocks, but never more than there are 16-byte chunks to hand out
static int grid_size(int64_t n) {{
    static int sms = 0;
    if (!sms) {{ int dev; cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); }}
    int64_t grid = (int64_t)sms * BLOCKS_PER_SM, useful = (n / VEC + THREADS - 1) / THREADS;
    grid = grid < useful ? grid : useful;
    return (int)(grid < 1 ? 1 : (grid > {cap} ? {cap} : grid));
}}
"""

    def _vectorized_grid_stride(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
{self._pack(task)}{block_sum(bug)}
// Just enough blocks to fill the GPU; each thread strides through x in 16-byte loads, so
// the grid's atomics are a few hundred instead of N / THREADS.
extern "C" __global__ void __launch_bounds__(THREADS)
reduction_kernel(const scalar_t* __restrict__ x, float* out, int64_t n) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
{self._vec_loop(task, unroll=False)}
    v = block_sum(v, warp_totals);
    if (threadIdx.x == 0) {self._publish(bug)}
}}
{self._grid(65535)}{self._host("grid_size(n)")}"""

    def _persistent_two_stage(self, p, task, bug):
        slot = "slots[i + 1]" if bug == "bad_combine_index" else "slots[i]"
        last = "gridDim.x" if bug == "off_by_one" else "gridDim.x - 1"
        return f"""
#define THREADS {p['threads']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
#define MAX_GRID {MAX_GRID}
{self._pack(task)}{block_sum()}
// Stage 1: every block writes its partial to its own slot. Stage 2: the block that takes the
// last ticket sums the slots in a fixed order. One launch, no memset, no float atomics, and
// the same bits every run. The ticket resets itself for the next call.
__device__ float partials[MAX_GRID];
__device__ unsigned int ticket = 0;

extern "C" __global__ void __launch_bounds__(THREADS)
reduction_kernel(const scalar_t* __restrict__ x, float* out, int64_t n) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    __shared__ bool is_last;
{self._vec_loop(task, unroll=True)}
    v = block_sum(v, warp_totals);
    if (threadIdx.x == 0) {{
        partials[blockIdx.x] = v;
        __threadfence();                       // partial visible before the ticket is taken
        is_last = atomicAdd(&ticket, 1u) == {last};
    }}
    __syncthreads();
    if (!is_last) return;
    __threadfence();
    const volatile float* slots = partials;    // written by other SMs: read past L1
    float total = 0.f;
    for (int i = threadIdx.x; i < gridDim.x; i += THREADS) total += {slot};
    total = block_sum(total, warp_totals);
    if (threadIdx.x == 0) {{ *out = total; ticket = 0; }}
}}
{self._grid(MAX_GRID)}{self._host("grid_size(n)", memset=False)}"""
