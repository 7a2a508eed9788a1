"""Embedding lookup in CUDA: out[t, :] = table[ids[t], :] for a [V, D] table (inference, no grad).

Ladder: thread per element -> block per row -> 16-byte uint4 copies -> several rows a block,
a warp each, UNROLL loads in flight -> Hopper bulk-copy engine (cp.async.bulk global -> smem ->
global on an mbarrier ring, one thread per block issuing whole rows).
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..unroll import PRAGMA_UNROLL, launch_of, render_of, row_trips
from ..words import VEC, WORD, narrow_of, word_regs, word_trips
from .embedding_gather_spec import EmbeddingGatherSpec

ARGS = ("const int64_t* __restrict__ ids, const scalar_t* __restrict__ table, scalar_t* __restrict__ out, "
        "int T, int V, int D")


def host(grid: str, block: str, smem: str = "0", setup: str = "") -> str:
    return f"""
void embedding_gather(const int64_t* ids, const scalar_t* table, scalar_t* out, int T, int V, int D,
                      cudaStream_t stream) {{
{setup}    embedding_gather_kernel<<<{grid}, {block}, {smem}, stream>>>(ids, table, out, T, V, D);
}}
"""


# -- scalar_per_element --------------------------------------------------------------------
def scalar_per_element_launch(p, task):
    return Launch(grid=cdiv(task["T"] * task["D"], p["threads"]), threads=p["threads"], regs=20,
                  bytes_per_access=DTYPE_BYTES[task.dtype])


def scalar_per_element_src(p, task, tail=""):
    return f"""
#define THREADS {p['threads']}

// One thread per output element: coalesced, but every 2-byte copy pays a 64-bit div/mod and an id load.
extern "C" __global__ void __launch_bounds__(THREADS) embedding_gather_kernel({ARGS}) {{
    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= (int64_t)T * D{tail}) return;
    const int64_t t = idx / D, d = idx % D;
    out[idx] = table[ids[t] * D + d];
}}
{host("(int)(((int64_t)T * D + THREADS - 1) / THREADS)", "THREADS")}"""


# -- row_per_block -------------------------------------------------------------------------
def row_per_block_launch(p, task):
    # nvcc unrolls the stride loop x4: four loads of VEC values (words.VEC: 2, 4 or 8 bytes) in flight
    th, vec = p["threads"], p.get("vec", 1)
    words = task["D"] // vec
    return Launch(grid=task["T"], threads=th, regs=24, bytes_per_access=4 * vec * DTYPE_BYTES[task.dtype],
                  lane_util=words / (th * cdiv(words, th)))


def row_per_block_src(p, task, stop="D"):
    vec = p.get("vec", 1)
    if vec == 1:
        return f"""
#define THREADS {p['threads']}

// One block per token: the id is read once and the row is copied with a block-stride loop.
extern "C" __global__ void __launch_bounds__(THREADS) embedding_gather_kernel({ARGS}) {{
    const scalar_t* row = table + ids[blockIdx.x] * D;
    scalar_t* dst = out + (size_t)blockIdx.x * D;
    for (int i = threadIdx.x; i < {stop}; i += THREADS) dst[i] = row[i];
}}
{host("T", "THREADS")}"""
    word = WORD[vec]
    return f"""
#define THREADS {p['threads']}
#define VEC {vec}  // adjacent values a thread copies as one {vec * 2}-byte {word}; D % VEC == 0

// One block per token: the id is read once and the row is copied a {word} word at a time.
extern "C" __global__ void __launch_bounds__(THREADS) embedding_gather_kernel({ARGS}) {{
    const {word}* row = reinterpret_cast<const {word}*>(table + ids[blockIdx.x] * D);
    {word}* dst = reinterpret_cast<{word}*>(out + (size_t)blockIdx.x * D);
    for (int c = threadIdx.x; c < ({stop}) / VEC; c += THREADS) dst[c] = row[c];
}}
{host("T", "THREADS")}"""


# -- vectorized_uint4 ----------------------------------------------------------------------
def chunks_of(task) -> int:
    """16-byte chunks of one row."""
    return task["D"] * DTYPE_BYTES[task.dtype] // 16


def vectorized_uint4_launch(p, task):
    th, chunks = p["threads"], chunks_of(task)
    return Launch(grid=task["T"], threads=th, regs=32, bytes_per_access=16, lane_util=chunks / (th * cdiv(chunks, th)))


def vectorized_uint4_src(p, task, stop="chunks"):
    return f"""
#define THREADS {p['threads']}

// Block per token; rows are 16-byte aligned (D % 8 == 0), so they move as uint4 chunks of 8 elements.
extern "C" __global__ void __launch_bounds__(THREADS) embedding_gather_kernel({ARGS}) {{
    const uint4* row = reinterpret_cast<const uint4*>(table + ids[blockIdx.x] * D);
    uint4* dst = reinterpret_cast<uint4*>(out + (size_t)blockIdx.x * D);
    const int chunks = D * (int)sizeof(scalar_t) / 16;
    for (int c = threadIdx.x; c < {stop}; c += THREADS) dst[c] = row[c];
}}
{host("T", "THREADS")}"""


# -- rows_per_block_ilp --------------------------------------------------------------------
def rows_per_block_ilp_launch(p, task):
    warps, unroll, w, chunks = p["warps"], p["unroll"], task.gpu.warp, chunks_of(task)
    return Launch(grid=cdiv(task["T"], warps), threads=warps * w, regs=20 + 4 * unroll, bytes_per_access=16 * unroll // 2,
                  lane_util=chunks / (w * unroll * cdiv(chunks, w * unroll)))


def rows_per_block_ilp_src(p, task, stop="chunks"):
    return f"""
#define WARPS {p['warps']}      // rows per block, one warp each
#define UNROLL {p['unroll']}     // uint4 loads a lane issues before its first store

extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE) embedding_gather_kernel({ARGS}) {{
    const int lane = threadIdx.x % WARP_SIZE, t = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;
    if (t >= T) return;
    const uint4* row = reinterpret_cast<const uint4*>(table + ids[t] * D);
    uint4* dst = reinterpret_cast<uint4*>(out + (size_t)t * D);
    const int chunks = D * (int)sizeof(scalar_t) / 16;
    for (int base = lane; base < chunks; base += WARP_SIZE * UNROLL) {{
        uint4 r[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)   // independent loads first: UNROLL x 16 bytes in flight per lane
            if (base + u * WARP_SIZE < chunks) r[u] = row[base + u * WARP_SIZE];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            if (base + u * WARP_SIZE < {stop}) dst[base + u * WARP_SIZE] = r[u];
    }}
}}
{host("(T + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")}"""


# -- tma_bulk_copy -------------------------------------------------------------------------
BULK_PTX = """
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\nselp.u32 %0, 1, 0, p;\\n}\\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
}
// global -> shared through the bulk-copy engine; the mbarrier counts the bytes as they land
__device__ __forceinline__ void bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\\n"
                 :: "r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
}
// shared -> global, tracked as a bulk group
__device__ __forceinline__ void bulk_store(void* dst, const void* src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\\n" :: "l"(dst), "r"(smem_u32(src)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.commit_group;\\n" ::: "memory");
}
"""


def tma_bulk_copy_launch(p, task):
    t, d, elt, rows, stages = task["T"], task["D"], DTYPE_BYTES[task.dtype], p["rows"], p["stages"]
    # the copy engine keeps STAGES rows in flight per block: express that as bytes per thread
    return Launch(grid=cdiv(t, rows), threads=32, smem_bytes=stages * d * elt + 256, regs=12,
                  bytes_per_access=stages * d * elt // 64, lane_util=min(1.0, t / rows / cdiv(t, rows)))


def tma_bulk_copy_src(p, task, stop="n"):
    return f"""
#define ROWS {p['rows']}        // tokens per block
#define STAGES {p['stages']}      // rows in flight per block
{BULK_PTX}
// One thread drives the copy engine: row r always lives in slot r % STAGES; a slot is refilled
// once the bulk store that drains it has finished reading shared memory.
extern "C" __global__ void __launch_bounds__(32) embedding_gather_kernel({ARGS}) {{
    extern __shared__ __align__(128) uint8_t buf[];   // STAGES rows of D elements
    __shared__ __align__(8) uint64_t full[STAGES];
    __shared__ int64_t row_id[ROWS];
    const int t0 = blockIdx.x * ROWS, n = min(ROWS, T - t0);
    if (threadIdx.x < n) row_id[threadIdx.x] = ids[t0 + threadIdx.x];   // one coalesced load of the ids
    __syncwarp();
    if (threadIdx.x != 0) return;
    const uint32_t bytes = D * sizeof(scalar_t);
    for (int s = 0; s < STAGES; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\\n" :: "r"(smem_u32(&full[s])));
    asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");
    for (int r = 0; r < STAGES && r < n; ++r) bulk_load(buf + r * bytes, table + row_id[r] * D, bytes, &full[r]);
    for (int i = 0; i < {stop}; ++i) {{
        const int s = i % STAGES;
        mbar_wait(&full[s], (i / STAGES) & 1);   // row i has landed
        bulk_store(out + (size_t)(t0 + i) * D, buf + s * bytes, bytes);
        const int r = i - 1 + STAGES;   // next row for the slot row i - 1 used
        if (i > 0 && r < n) {{
            asm volatile("cp.async.bulk.wait_group.read 1;\\n" ::: "memory");   // store of row i - 1 has read its slot
            bulk_load(buf + (r % STAGES) * bytes, table + row_id[r] * D, bytes, &full[r % STAGES]);
        }}
    }}
    asm volatile("cp.async.bulk.wait_group 0;\\n" ::: "memory");   // every store complete before the block retires
}}
{host("(T + ROWS - 1) / ROWS", "32", "smem", '''    const int smem = STAGES * D * (int)sizeof(scalar_t);
    cudaFuncSetAttribute(embedding_gather_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
''')}"""


class EmbeddingGatherCuda(EmbeddingGatherSpec):
    impl = "cuda"
    variants = (
        Rung("scalar_per_element", "one thread per output element: 64-bit div/mod and an id load per element",
             (Param("threads", (128, 256, 512), 256),), memory_eff=0.5, launch=scalar_per_element_launch,
             render=scalar_per_element_src, bugs={"off_by_one": {"tail": " - 1"}}),
        Rung("row_per_block", "one block per token: id read once, threads stride the row with 2-byte copies",
             (Param("threads", (128, 256, 512, 1024), 256), PRAGMA_UNROLL, VEC), memory_eff=0.85,
             launch=narrow_of(launch_of(row_per_block_launch, word_trips(), word_regs)), render=render_of(row_per_block_src),
             bugs={"off_by_one": {"stop": "D - 1"}}),
        Rung("vectorized_uint4", "block per token, 16-byte uint4 copies",
             (Param("threads", (64, 128, 256, 512), 256), PRAGMA_UNROLL), memory_eff=0.9,
             launch=launch_of(vectorized_uint4_launch, row_trips(vec=True), 4), render=render_of(vectorized_uint4_src),
             bugs={"off_by_one": {"stop": "chunks - 1"}}),
        Rung("rows_per_block_ilp", "WARPS rows a block, a warp per row, UNROLL uint4 loads issued before the stores",
             (Param("warps", (2, 4, 8), 4), Param("unroll", (2, 4, 8), 4)), memory_eff=0.92,
             launch=rows_per_block_ilp_launch, render=rows_per_block_ilp_src, bugs={"off_by_one": {"stop": "chunks - 1"}}),
        Rung("tma_bulk_copy", "sm_90 bulk-copy engine: one thread streams ROWS rows through a STAGES-deep smem "
             "ring (cp.async.bulk + mbarrier, bulk stores)", (Param("rows", (4, 16, 32), 16), Param("stages", (2, 3, 4), 3)),
             needs=frozenset({"tma", "inline_ptx"}), memory_eff=0.9, smem="dynamic",
             launch=tma_bulk_copy_launch, render=tma_bulk_copy_src, bugs={"off_by_one": {"stop": "n - 1"}}),
    )
