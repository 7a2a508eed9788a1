"""Paged KV-cache block copy in CUDA: for each (src, dst) pair copy one E-element block of the K
cache and of the V cache (E = P * H * D contiguous elements).

Ladder: thread per element (pair lookup and 64-bit div/mod per element) -> block per (pair,
cache) with coalesced scalar copies -> 16-byte uint4 copies -> persistent grid-stride blocks
(#SMs x k) with UNROLL uint4 loads in flight -> cp.async staging: each thread streams its
chunks through a STAGES-deep shared-memory ring (loads never wait on registers).
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from .paged_kv_copy_spec import ENTRY, PagedKvCopySpec, block_elems, chunks16

THREADS = Param("threads", (64, 128, 256, 512), 128)
OFF_BY_ONE = "off_by_one"


def host(task, grid: str, block: str, smem: str = "0", pre: str = "") -> str:
    return ENTRY.host(task, "paged_kv_copy_kernel", grid, block, smem, pre)


HEAD = """extern "C" __global__ void __launch_bounds__(THREADS)
paged_kv_copy_kernel(scalar_t* __restrict__ key_cache, scalar_t* __restrict__ value_cache,
                     const int64_t* __restrict__ block_mapping, int M, int P, int H, int D)"""
PAIR = """    const int64_t E = (int64_t)P * H * D;                       // elements of one block
    scalar_t* cache = blockIdx.y ? value_cache : key_cache;       // grid.y: 0 = K cache, 1 = V cache
    const int64_t src = block_mapping[2 * blockIdx.x], dst = block_mapping[2 * blockIdx.x + 1];"""
VEC_PAIR = PAIR + """
    const int chunks = (int)(E * sizeof(scalar_t) / 16);            // 16-byte chunks of one block
    const uint4* from = reinterpret_cast<const uint4*>(cache + src * E);
    uint4* to = reinterpret_cast<uint4*>(cache + dst * E);"""


# -- element_per_thread --------------------------------------------------------------------
def element_per_thread_launch(p, task):
    th = p["threads"]
    return Launch(grid=cdiv(task["M"] * block_elems(task), th), threads=th, regs=26,
                  bytes_per_access=DTYPE_BYTES[task.dtype], traffic=1.0)


def element_per_thread_src(p, task, total="(int64_t)M * E"):
    return f"""
#define THREADS {p['threads']}

// One thread per element of the M blocks: each thread finds its pair (a 64-bit divide),
// reads the mapping and copies one K and one V element.
{HEAD} {{
    const int64_t E = (int64_t)P * H * D;
    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= {total}) return;
    const int64_t m = idx / E, off = idx % E;
    const int64_t src = block_mapping[2 * m], dst = block_mapping[2 * m + 1];
    key_cache[dst * E + off] = key_cache[src * E + off];
    value_cache[dst * E + off] = value_cache[src * E + off];
}}
{host(task, "(int)(((int64_t)M * P * H * D + THREADS - 1) / THREADS)", "THREADS")}"""


# -- block_per_pair --------------------------------------------------------------------------
def block_per_pair_launch(p, task):
    th = p["threads"]
    # nvcc unrolls the stride loop 4x: four 2-byte loads in flight per thread
    return Launch(grid=2 * task["M"], threads=th, regs=28, bytes_per_access=4 * DTYPE_BYTES[task.dtype],
                  lane_util=min(1.0, block_elems(task) / th))


def block_per_pair_src(p, task, stop="E"):
    return f"""
#define THREADS {p['threads']}

// One block per (pair, cache): the mapping is read once; threads stride over the block's
// E elements, so each warp reads and writes 32 neighbouring elements.
{HEAD} {{
{PAIR}
    const scalar_t* from = cache + src * E;
    scalar_t* to = cache + dst * E;
    for (int64_t i = threadIdx.x; i < {stop}; i += THREADS) to[i] = from[i];
}}
{host(task, "dim3(M, 2)", "THREADS")}"""


# -- vectorized_uint4 --------------------------------------------------------------------------
def vectorized_uint4_launch(p, task):
    th, items = p["threads"], p["items"]
    # ITEMS times the uint4 loads in flight a thread; ptxas (sm_80..sm_120) gives 22-38 registers at
    # every ITEMS up to 4 (the copy has no other live values)
    return Launch(grid=2 * task["M"], threads=th, regs=30, bytes_per_access=32 * items,
                  lane_util=min(1.0, chunks16(task) / (th * items)))


def vectorized_uint4_src(p, task, stop="chunks"):
    return f"""
#define THREADS {p['threads']}
#define ITEMS {p['items']}                  // uint4 chunks a thread loads per pass before it stores any

// Block per (pair, cache), 16-byte uint4 copies: a block of E half-precision elements is E / 8 chunks.
// Source and destination are different blocks of one cache array, which the compiler cannot know: it
// keeps each load behind the previous store, so a thread's ITEMS loads of a pass are written first.
{HEAD} {{
{VEC_PAIR}
    for (int c0 = threadIdx.x; c0 < {stop}; c0 += THREADS * ITEMS) {{
        uint4 v[ITEMS];
#pragma unroll
        for (int j = 0; j < ITEMS; ++j)
            if (c0 + j * THREADS < {stop}) v[j] = from[c0 + j * THREADS];
#pragma unroll
        for (int j = 0; j < ITEMS; ++j)
            if (c0 + j * THREADS < {stop}) to[c0 + j * THREADS] = v[j];
    }}
}}
{host(task, "dim3(M, 2)", "THREADS")}"""


# -- persistent_grid_stride -----------------------------------------------------------------
def persistent_launch(p, task):
    th, unroll, gpu = p["threads"], p["unroll"], task.gpu
    work = 2 * task["M"] * chunks16(task)
    grid = min(gpu.sms * p["blocks_per_sm"], cdiv(work, th * unroll))
    return Launch(grid=grid, threads=th, regs=24 + 8 * unroll, bytes_per_access=16 * unroll,
                  lane_util=min(1.0, work / (grid * th * unroll)))


SMS = """
    static int sms = 0;
    if (!sms) { int dev; cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev); }
    const long long work = 2LL * M * ((long long)P * H * D * sizeof(scalar_t) / 16);
    const int grid = (int)min((long long)sms * BLOCKS_PER_SM, (work + THREADS * UNROLL - 1) / (THREADS * UNROLL));"""


def persistent_grid_stride_src(p, task, total="work"):
    return f"""
#define THREADS {p['threads']}
#define UNROLL {p['unroll']}                 // uint4 loads each thread keeps in flight
#define BLOCKS_PER_SM {p['blocks_per_sm']}

// Persistent: #SMs x BLOCKS_PER_SM blocks walk the flat list of (cache, pair, chunk) work in
// strides of the whole grid; each thread issues UNROLL independent 16-byte loads before storing.
{HEAD} {{
    const int64_t per = (int64_t)P * H * D * sizeof(scalar_t) / 16;   // chunks of one block
    const int64_t work = 2 * (int64_t)M * per;
    const int64_t stride = (int64_t)gridDim.x * THREADS * UNROLL;
    for (int64_t base = (int64_t)blockIdx.x * THREADS * UNROLL + threadIdx.x; base < work; base += stride) {{
        uint4 v[UNROLL];
        int64_t at[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {{
            const int64_t w = base + (int64_t)u * THREADS;
            at[u] = -1;
            if (w < {total}) {{
                const int64_t pair = w / per % M, c = w % per;
                const uint4* cache = reinterpret_cast<const uint4*>(w >= M * per ? value_cache : key_cache);
                at[u] = block_mapping[2 * pair + 1] * per + c;
                v[u] = cache[block_mapping[2 * pair] * per + c];
            }}
        }}
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {{
            const int64_t w = base + (int64_t)u * THREADS;
            if (at[u] >= 0) reinterpret_cast<uint4*>(w >= M * per ? value_cache : key_cache)[at[u]] = v[u];
        }}
    }}
}}
{host(task, "grid", "THREADS", pre=SMS)}"""


# -- cp_async_staged ---------------------------------------------------------------------------
def cp_async_launch(p, task):
    th, st = p["threads"], p["stages"]
    return Launch(grid=2 * task["M"], threads=th, smem_bytes=st * th * 16, regs=32, bytes_per_access=16 * st,
                  lane_util=min(1.0, chunks16(task) / th))


CP_ASYNC = """
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n"
                 :: "r"((uint32_t)__cvta_generic_to_shared(smem)), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\\n" ::); }
template <int PENDING> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\\n" :: "n"(PENDING) : "memory");
}
"""
WAIT = "cp_async_wait<STAGES - 1>();              // chunk i has landed in its slot"


def cp_async_staged_src(p, task, wait=WAIT, stop="n"):
    return f"""
#define THREADS {p['threads']}
#define STAGES {p['stages']}                 // chunks per thread in flight through shared memory
{CP_ASYNC}
// Block per (pair, cache): each thread streams its chunks global -> shared with cp.async
// (no register round trip, STAGES copies in flight), then shared -> global with 16-byte stores.
// A slot is only ever touched by the thread that owns it, so no block barrier is needed.
{HEAD} {{
    __shared__ __align__(16) uint4 ring[STAGES][THREADS];
{VEC_PAIR}
    const int n = (chunks - threadIdx.x + THREADS - 1) / THREADS;   // chunks this thread copies
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {{
        if (s < n) cp_async16(&ring[s][threadIdx.x], from + threadIdx.x + s * THREADS);
        cp_async_commit();
    }}
    for (int i = 0; i < {stop}; ++i) {{
        const int next = i + STAGES - 1;
        if (next < n) cp_async16(&ring[next % STAGES][threadIdx.x], from + threadIdx.x + next * THREADS);
        cp_async_commit();
        {wait}
        to[threadIdx.x + i * THREADS] = ring[i % STAGES][threadIdx.x];
    }}
}}
{host(task, "dim3(M, 2)", "THREADS")}"""


class PagedKvCopyCuda(PagedKvCopySpec):
    impl = "cuda"
    variants = (
        # issue-bound: a 64-bit divide, a mapping load and a 2-byte copy per element
        Rung("element_per_thread", "one thread per element: pair lookup and 64-bit div/mod per element",
             (Param("threads", (128, 256, 512), 256),), memory_eff=0.5, launch=element_per_thread_launch,
             render=element_per_thread_src, bugs={OFF_BY_ONE: {"total": "(int64_t)M * E - 1"}}),
        Rung("block_per_pair", "one block per (pair, cache) (vLLM's copy_blocks): mapping read once, scalar copies",
             (Param("threads", (128, 256, 512, 1024), 256),), memory_eff=0.45, launch=block_per_pair_launch,
             render=block_per_pair_src, bugs={OFF_BY_ONE: {"stop": "E - 1"}}),
        Rung("vectorized_uint4", "block per (pair, cache) moving 16-byte uint4 chunks",
             (THREADS, Param("items", (1, 2, 4), 1)), memory_eff=0.86, launch=vectorized_uint4_launch,
             render=vectorized_uint4_src,
             bugs={OFF_BY_ONE: {"stop": "chunks - 1"}}),
        Rung("persistent_grid_stride", "#SMs x k persistent blocks striding over all chunks, UNROLL uint4 loads in flight",
             (THREADS, Param("unroll", (1, 2, 4, 8), 4), Param("blocks_per_sm", (1, 2, 4, 8), 4)), memory_eff=0.92,
             launch=persistent_launch, render=persistent_grid_stride_src, bugs={OFF_BY_ONE: {"total": "work - 1"}}),
        Rung("cp_async_staged", "cp.async global -> shared ring STAGES deep per thread, then 16-byte stores",
             (THREADS, Param("stages", (2, 3, 4, 6), 4)), needs=frozenset({"cp_async"}), memory_eff=0.93,
             smem="static", launch=cp_async_launch, render=cp_async_staged_src,
             bugs={"missing_barrier": {"wait": "// (wait dropped: the slot is read before its copy lands)"},
                   OFF_BY_ONE: {"stop": "n - 1"}}),
    )
