"""Embedding lookup in CUDA: out[t, :] = table[ids[t], :] for a [V, D] table (inference, no grad).

Ladder: thread per element -> block per row -> 16-byte uint4 copies -> several rows a block,
a warp each, UNROLL loads in flight -> Hopper bulk-copy engine (cp.async.bulk global -> smem ->
global on an mbarrier ring, one thread per block issuing whole rows).
"""
from ..base import Cost, Launch, OpModule, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude, kernelbench_program


class EmbeddingGatherCuda(OpModule):
    op, impl, family = "embedding_gather", "cuda", "misc"
    title = "Embedding gather"
    desc = "out[t, :] = table[ids[t], :] for int64 token ids into a [V, D] table; D a multiple of 8."
    dims = {"T": "tokens", "V": "vocabulary rows", "D": "hidden size"}
    shapes = ({"T": 32, "V": 128256, "D": 4096}, {"T": 512, "V": 128256, "D": 4096},
              {"T": 4096, "V": 128256, "D": 4096}, {"T": 16384, "V": 128256, "D": 4096},
              {"T": 8192, "V": 152064, "D": 3584}, {"T": 4096, "V": 128256, "D": 8192})
    dtypes = ("fp16", "bf16")
    vendors = ("nvidia", "amd")
    variants = (
        Variant("scalar_per_element", "one thread per output element: 64-bit div/mod and an id load per element",
                (Param("threads", (128, 256, 512), 256),), memory_eff=0.5, bugs=("off_by_one",)),
        Variant("row_per_block", "one block per token: id read once, threads stride the row with 2-byte copies",
                (Param("threads", (128, 256, 512, 1024), 256),), memory_eff=0.85, bugs=("off_by_one",)),
        Variant("vectorized_uint4", "block per token, 16-byte uint4 copies",
                (Param("threads", (64, 128, 256, 512), 256),), memory_eff=0.9, bugs=("off_by_one",)),
        Variant("rows_per_block_ilp", "WARPS rows a block, a warp per row, UNROLL uint4 loads issued before the stores",
                (Param("warps", (2, 4, 8), 4), Param("unroll", (2, 4, 8), 4)), memory_eff=0.92, bugs=("off_by_one",)),
        Variant("tma_bulk_copy", "sm_90 bulk-copy engine: one thread streams ROWS rows through a STAGES-deep smem "
                "ring (cp.async.bulk + mbarrier, bulk stores)", (Param("rows", (4, 16, 32), 16), Param("stages", (2, 3, 4), 3)),
                needs=frozenset({"tma", "inline_ptx"}), memory_eff=0.9, smem="dynamic", bugs=("off_by_one",)),
    )

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=0, bytes=2 * t * d * e + 8 * t)

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        t, d, elt = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        chunks = d * elt // 16
        if variant.tag == "scalar_per_element":
            return Launch(grid=cdiv(t * d, params["threads"]), threads=params["threads"], regs=20, bytes_per_access=elt)
        if variant.tag == "row_per_block":   # nvcc unrolls the stride loop x4: four 2-byte loads in flight
            th = params["threads"]
            return Launch(grid=t, threads=th, regs=24, bytes_per_access=4 * elt, lane_util=d / (th * cdiv(d, th)))
        if variant.tag == "vectorized_uint4":
            th = params["threads"]
            return Launch(grid=t, threads=th, regs=32, bytes_per_access=16, lane_util=chunks / (th * cdiv(chunks, th)))
        if variant.tag == "rows_per_block_ilp":
            warps, unroll, w = params["warps"], params["unroll"], task.gpu.warp
            return Launch(grid=cdiv(t, warps), threads=warps * w, regs=20 + 4 * unroll, bytes_per_access=16 * unroll // 2,
                          lane_util=chunks / (w * unroll * cdiv(chunks, w * unroll)))
        rows, stages = params["rows"], params["stages"]
        # the copy engine keeps STAGES rows in flight per block: express that as bytes per thread
        return Launch(grid=cdiv(t, rows), threads=32, smem_bytes=stages * d * elt + 256, regs=12,
                      bytes_per_access=stages * d * elt // 64, lane_util=min(1.0, t / rows / cdiv(t, rows)))

    def signature(self, task: Task) -> str:
        return ("void embedding_gather(const int64_t* ids, const scalar_t* table, scalar_t* out, int T, int V, int D, "
                "cudaStream_t stream)")

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="ids, table", body="return torch.nn.functional.embedding(ids, table)",
            inputs="[torch.randint(0, V, (T,), device='cuda'), torch.randn(V, D, dtype=DTYPE, device='cuda')]")

    # -- renders -----------------------------------------------------------------
    ARGS = ("const int64_t* __restrict__ ids, const scalar_t* __restrict__ table, scalar_t* __restrict__ out, "
            "int T, int V, int D")

    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        return f"{cuda_prelude(task)}\n{body}"

    def _host(self, grid: str, block: str, smem: str = "0", setup: str = "") -> str:
        return f"""
void embedding_gather(const int64_t* ids, const scalar_t* table, scalar_t* out, int T, int V, int D,
                      cudaStream_t stream) {{
{setup}    embedding_gather_kernel<<<{grid}, {block}, {smem}, stream>>>(ids, table, out, T, V, D);
}}
"""

    def _scalar_per_element(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}

// One thread per output element: coalesced, but every 2-byte copy pays a 64-bit div/mod and an id load.
extern "C" __global__ void __launch_bounds__(THREADS) embedding_gather_kernel({self.ARGS}) {{
    const int64_t idx = (int64_t)blockIdx.x * THREADS + threadIdx.x;
    if (idx >= (int64_t)T * D{' - 1' if bug == 'off_by_one' else ''}) return;
    const int64_t t = idx / D, d = idx % D;
    out[idx] = table[ids[t] * D + d];
}}
{self._host("(int)(((int64_t)T * D + THREADS - 1) / THREADS)", "THREADS")}"""

    def _row_per_block(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}

// One block per token: the id is read once and the row is copied with a block-stride loop.
extern "C" __global__ void __launch_bounds__(THREADS) embedding_gather_kernel({self.ARGS}) {{
    const scalar_t* row = table + ids[blockIdx.x] * D;
    scalar_t* dst = out + (size_t)blockIdx.x * D;
    for (int i = threadIdx.x; i < {'D - 1' if bug == 'off_by_one' else 'D'}; i += THREADS) dst[i] = row[i];
}}
{self._host("T", "THREADS")}"""

    def _vectorized_uint4(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}

// Block per token; rows are 16-byte aligned (D % 8 == 0), so they move as uint4 chunks of 8 elements.
extern "C" __global__ void __launch_bounds__(THREADS) embedding_gather_kernel({self.ARGS}) {{
    const uint4* row = reinterpret_cast<const uint4*>(table + ids[blockIdx.x] * D);
    uint4* dst = reinterpret_cast<uint4*>(out + (size_t)blockIdx.x * D);
    const int chunks = D * (int)sizeof(scalar_t) / 16;
    for (int c = threadIdx.x; c < {'chunks - 1' if bug == 'off_by_one' else 'chunks'}; c += THREADS) dst[c] = row[c];
}}
{self._host("T", "THREADS")}"""

    def _rows_per_block_ilp(self, p, task, bug):
        return f"""
#define WARPS {p['warps']}      // rows per block, one warp each
#define UNROLL {p['unroll']}     // uint4 loads a lane issues before its first store

extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE) embedding_gather_kernel({self.ARGS}) {{
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
            if (base + u * WARP_SIZE < {'chunks - 1' if bug == 'off_by_one' else 'chunks'}) dst[base + u * WARP_SIZE] = r[u];
    }}
}}
{self._host("(T + WARPS - 1) / WARPS", "WARPS * WARP_SIZE")}"""

    _BULK_PTX = """
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

    def _tma_bulk_copy(self, p, task, bug):
        return f"""
#define ROWS {p['rows']}        // tokens per block
#define STAGES {p['stages']}      // rows in flight per block
{self._BULK_PTX}
// One thread drives the copy engine: row r always lives in slot r % STAGES; a slot is refilled
// once the bulk store that drains it has finished reading shared memory.
extern "C" __global__ void __launch_bounds__(32) embedding_gather_kernel({self.ARGS}) {{
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
    for (int i = 0; i < {'n - 1' if bug == 'off_by_one' else 'n'}; ++i) {{
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
{self._host("(T + ROWS - 1) / ROWS", "32", "smem", '''    const int smem = STAGES * D * (int)sizeof(scalar_t);
    cudaFuncSetAttribute(embedding_gather_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
''')}"""
