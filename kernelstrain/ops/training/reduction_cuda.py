"""Full 1-D sum in CUDA: out = sum(x[0:N]) in fp32, the reduction under loss/norm statistics.

Ladder: an atomicAdd per element -> shared-memory tree per block -> warp shuffles with several
elements per thread -> 16-byte vector loads in a grid-stride loop over #SMs x k blocks ->
persistent two-stage: block partials plus a last-block finish, one launch and deterministic.
"""
from dataclasses import replace

from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, DTYPE_BYTES, cdiv
from ..unroll import PRAGMA_UNROLL, launch_of, pragma
from ..contract import Arg, Entry, Scalar
from ._block_reduce import BARRIER, NO_BARRIER, block_sum

THREADS = Param("threads", (128, 256, 512, 1024), 256)
BLOCKS_PER_SM = Param("blocks_per_sm", (1, 2, 4, 8), 4)
MAX_GRID = 4096         # partial slots of the two-stage kernel
PUBLISH = "atomicAdd(out, v);"            # how a block adds its total into *out
RACY = {"publish": "*out += v;"}          # racy_update: the plain read-modify-write

ENTRY = Entry("reduce_sum", (Arg("x", "in", ("N",)), Arg("out", "out", (1,), "fp32"),
                             Scalar("n", "int64_t", value="N")))


# -- launch models -------------------------------------------------------------------------
def atomic_launch(per_block: bool):
    """An atomic per element (N same-address atomics serialise in the L2) or one per block."""
    def launch(p, task):
        n, e, threads = task["N"], DTYPE_BYTES[task.dtype], p["threads"]
        if not per_block:
            return Launch(grid=cdiv(n, threads), threads=threads, regs=10, bytes_per_access=e,
                          serial_atomics=n, launches=2)
        return Launch(grid=cdiv(n, threads), threads=threads, smem_bytes=threads * 4, regs=10,
                      bytes_per_access=e, serial_atomics=cdiv(n, threads), launches=2)   # one a block
    return launch


def warp_shuffle_launch(p, task):
    n, e, threads, items = task["N"], DTYPE_BYTES[task.dtype], p["threads"], p["items"]
    return Launch(grid=cdiv(n, threads * items), threads=threads, smem_bytes=cdiv(threads, task.gpu.warp) * 4,
                  regs=8 + 2 * items, bytes_per_access=e * items,
                  serial_atomics=cdiv(n, threads * items), launches=2)


def grid_trips(loads: int):
    """trips() of the grid-stride loop taking `loads` 16-byte vectors a trip."""
    return lambda p, task: task["N"] * DTYPE_BYTES[task.dtype] / 16 / loads / (grid_launch(False)(p, task).grid * p["threads"])


# The 16-byte loads a thread of the grid-stride loop has in flight as nvcc 13 -O3 compiles it for sm_90a (SASS, 256
# threads): fp32 (4 adds a vector) unrolled 4x, four LDG.E.128 before the first add; bf16 (8 conversions and adds)
# not unrolled, one; the two-stage trip's two vectors, two. The model had 2 for the one-vector loop and 4 for the
# two-stage one, so at a short grid it put the two-stage rung ahead where it is behind (H100 N=16M fp32, 256 x 1:
# grid-stride 28.4 us, two-stage 38.7, modelled 51.9 and 31.4: measurements/h100_sim2_fit.json) and bf16's loop level
# with fp32's where a short bf16 grid runs 3x its bandwidth time (H200 N=268M: 256 x 1 434.6 us, 256 x 4 145.6).
def loads_in_flight(task, two_stage: bool) -> int:
    return 2 if two_stage else 4 if DTYPE_BYTES[task.dtype] == 4 else 1


# The two-stage finish, in same-address atomic slots (sim.SAME_ADDRESS_ATOMIC_S): the last block's fence, ticket
# and re-read of the partials, a chain of L2 round trips whatever the grid. The blocks' ticket atomics (integer,
# spread over the blocks' ends) do not queue measurably: H100 N=1M, grids of 128-512 blocks (threads 256-1024,
# 1-8 blocks an SM) ran 5.4-5.7 us in bf16 and 6.4-6.8 in fp32, 0.6-1.0 us over the grid-stride rung, with no trend
# in the grid (measurements/h100_sim2_fit.json); the old grid + 600 slots put 1024 x 8 (128 blocks) 1.1 us ahead of
# 256 x 4 (512 blocks) and ahead of the grid-stride rung.
FINISH_ATOMICS = 900


def grid_launch(two_stage: bool):
    """#SMs x k blocks striding in 16-byte loads: atomics per block (and a memset), or the
    one-launch two-stage finish."""
    def launch(p, task):
        n, e, gpu, threads = task["N"], DTYPE_BYTES[task.dtype], task.gpu, p["threads"]
        warps = cdiv(threads, gpu.warp)
        grid = min(gpu.sms * p["blocks_per_sm"], cdiv(n * e, threads * 16), MAX_GRID)
        # bytes_per_access: the bytes a thread has in flight over the model's LOADS_IN_FLIGHT (2) loads
        per_access = 16 * loads_in_flight(task, two_stage) // 2
        if not two_stage:
            return Launch(grid=grid, threads=threads, smem_bytes=warps * 4, regs=20, bytes_per_access=per_access,
                          launches=2)
        return Launch(grid=grid, threads=threads, smem_bytes=warps * 4 + 1, regs=26, bytes_per_access=per_access,
                      serial_atomics=FINISH_ATOMICS)
    return launch


def unrolled_grid(two_stage: bool, loads: int):
    """grid_launch with the pragma_unroll knob, relative to the compiler's own depth. The pragma's
    copies keep more loads in flight only in the fp32 grid-stride loop, whose trip count nvcc computes (SASS at
    pragma 2: both vectors issued together). In the bf16 one and the two-stage one (its bound c + stride < chunks)
    it leaves an exit branch between copies and each copy's loads issue after the previous copy's adds (SASS at
    pragma 4: four LDG.128 one by one; two-stage eight, two at a time): registers, no loads in flight. H100 bf16
    N=268M, 256 threads x 1 block an SM: grid-stride 439.9 us, at pragma 4 432.6; two-stage 278.4 and 279.2; fp32
    N=67M grid-stride pragma 2 137.6 us against 103.6 at the compiler's 4 (measurements/h100_sim2_held.json)."""
    def launch(p, task):
        own = 1 if two_stage else loads_in_flight(task, False)        # the compiler's own depth, in trips
        out = launch_of(grid_launch(two_stage), grid_trips(loads), 4 * loads, own)(p, task)
        if two_stage or loads_in_flight(task, False) == 1:
            out = replace(out, bytes_per_access=grid_launch(two_stage)(p, task).bytes_per_access)
        return out
    return launch


# -- renders -------------------------------------------------------------------------------
def host(grid: str, memset: bool = True) -> str:
    zero = "    cudaMemsetAsync(out, 0, sizeof(float), stream);  // blocks accumulate into *out\n" if memset else ""
    return f"""
void reduce_sum(const scalar_t* x, float* out, int64_t n, cudaStream_t stream) {{
{zero}    reduction_kernel<<<{grid}, THREADS, 0, stream>>>(x, out, n);
}}
"""


def atomic_per_element_src(p, task, publish=PUBLISH):
    return f"""
#define THREADS {p['threads']}

// Every element goes straight into one address: the L2 serialises N atomics on it.
extern "C" __global__ void reduction_kernel(const scalar_t* __restrict__ x, float* out, int64_t n) {{
    const int64_t i = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (i < n) {{ const float v = to_float(x[i]); {publish} }}
}}
{host("(unsigned)((n + THREADS - 1) / THREADS)")}"""


def smem_tree_src(p, task, publish=PUBLISH, barrier="\n        __syncthreads();"):
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
    if (threadIdx.x == 0) {{ const float v = partial[0]; {publish} }}
}}
{host("(unsigned)((n + THREADS - 1) / THREADS)")}"""


def warp_shuffle_src(p, task, publish=PUBLISH, init="0.f"):
    return f"""
#define THREADS {p['threads']}
#define ITEMS {p['items']}           // elements per thread, THREADS apart: each load coalesced
{block_sum()}
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
    if (threadIdx.x == 0) {publish}
}}
{host("(unsigned)((n + THREADS * ITEMS - 1) / (THREADS * ITEMS))")}"""


def vec_loop(task, unroll: bool, head: str = "") -> str:
    vec = 16 // DTYPE_BYTES[task.dtype]
    body = head + """    for (; c + stride < chunks; c += 2 * stride) {   // two 16-byte loads in flight
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
{body or head}    for (; c < chunks; c += stride) {{
        Pack a; a.u = xv[c];
#pragma unroll
        for (int k = 0; k < VEC; ++k) v += to_float(a.h[k]);
    }}
    const int64_t tail = chunks * VEC + (int64_t)blockIdx.x * THREADS + threadIdx.x;   // n % VEC leftovers
    if (tail < n) v += to_float(x[tail]);"""


def pack(task):
    return f"constexpr int VEC = {16 // DTYPE_BYTES[task.dtype]};\nunion Pack {{ uint4 u; scalar_t h[VEC]; }};\n"


def grid_fn(cap: int) -> str:
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


def vectorized_grid_stride_src(p, task, publish=PUBLISH, barrier=BARRIER):
    return f"""
#define THREADS {p['threads']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
{pack(task)}{block_sum(barrier)}
// Just enough blocks to fill the GPU; each thread strides through x in 16-byte loads, so
// the grid's atomics are a few hundred instead of N / THREADS.
extern "C" __global__ void __launch_bounds__(THREADS)
reduction_kernel(const scalar_t* __restrict__ x, float* out, int64_t n) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
{vec_loop(task, unroll=False, head=pragma(p))}
    v = block_sum(v, warp_totals);
    if (threadIdx.x == 0) {publish}
}}
{grid_fn(65535)}{host("grid_size(n)")}"""


def persistent_two_stage_src(p, task, slot="slots[i]", last="gridDim.x - 1"):
    return f"""
#define THREADS {p['threads']}
#define BLOCKS_PER_SM {p['blocks_per_sm']}
#define MAX_GRID {MAX_GRID}
{pack(task)}{block_sum()}
// Stage 1: every block writes its partial to its own slot. Stage 2: the block that takes the
// last ticket sums the slots in a fixed order. One launch, no memset, no float atomics, and
// the same bits every run. The ticket resets itself for the next call.
__device__ float partials[MAX_GRID];
__device__ unsigned int ticket = 0;

extern "C" __global__ void __launch_bounds__(THREADS)
reduction_kernel(const scalar_t* __restrict__ x, float* out, int64_t n) {{
    __shared__ float warp_totals[THREADS / WARP_SIZE];
    __shared__ bool is_last;
{vec_loop(task, unroll=True, head=pragma(p))}
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
{grid_fn(MAX_GRID)}{host("grid_size(n)", memset=False)}"""


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
    entry, inputs = ENTRY, ("x",)
    # one fp32 sum of N values in another order (atomics, trees): error ~sqrt(N) ulps of the
    # partial sums, amplified by the cancellation of a zero-mean sum (the "sum" class)
    check_shape, tolerance = {"N": 67108864}, "sum"
    baseline = "smem_tree"        # nobody starts a sum from one same-address atomic per element
    variants = (
        Rung("atomic_per_element", "every thread atomicAdds its element into the result",
             (THREADS,), compute_eff=1.0, memory_eff=0.6,
             launch=atomic_launch(per_block=False), render=atomic_per_element_src, bugs={"racy_update": RACY}),
        Rung("smem_tree", "one element per thread, tree reduction in shared memory, an atomic per block",
             (THREADS,), compute_eff=1.0, memory_eff=0.55, smem="static",
             launch=atomic_launch(per_block=True), render=smem_tree_src,
             bugs={"missing_barrier": NO_BARRIER, "racy_update": RACY}),
        Rung("warp_shuffle", "several elements per thread, warp shuffles, one smem slot per warp",
             (THREADS, Param("items", (1, 2, 4, 8), 4)), compute_eff=1.0, memory_eff=0.78, smem="static",
             launch=warp_shuffle_launch, render=warp_shuffle_src,
             bugs={"wrong_init": {"init": "1.f"}, "racy_update": RACY}),
        Rung("vectorized_grid_stride", "16-byte uint4 loads, grid of #SMs x k blocks striding over x",
             (THREADS, BLOCKS_PER_SM, PRAGMA_UNROLL), compute_eff=1.0, memory_eff=0.88, smem="static",
             launch=unrolled_grid(False, 1), render=vectorized_grid_stride_src,
             bugs={"missing_barrier": NO_BARRIER, "racy_update": RACY}),
        Rung("persistent_two_stage", "vector grid-stride partials + last-block finish: one launch, no atomics on floats",
             (Param("threads", (256, 512, 1024), 512), BLOCKS_PER_SM, PRAGMA_UNROLL), compute_eff=1.0, memory_eff=0.92,
             smem="static", launch=unrolled_grid(True, 2), render=persistent_two_stage_src,
             bugs={"bad_combine_index": {"slot": "slots[i + 1]"}, "off_by_one": {"last": "gridDim.x"}}),
    )

    def cost(self, task: Task) -> Cost:
        n = task["N"]
        return Cost(flops=n, bytes=n * DTYPE_BYTES[task.dtype] + 4)

    torch_ref = TorchRef(body="return x.float().sum().reshape(1)",
        inputs="[torch.randn(N, dtype=DTYPE, device='cuda')]")
