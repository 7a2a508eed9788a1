"""Paged-KV decode attention in CUDA (vLLM-style block table, grouped-query heads).

Ladder: one thread per (b, h) -> one warp per (b, h), lanes split D, warp-shuffle dot
products -> a block per (b, h) with 16-byte uint4 K/V loads and a shared-memory merge ->
split-KV over the sequence plus a combine kernel -> a block per (b, KV head) whose cp.async
double-buffered K/V tiles in shared memory serve every query head of the group.
"""
from ..base import Launch, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude
from .paged_decode_spec import PagedDecodeSpec

THREADS = Param("threads", (64, 128, 256), 128)
PARTITION = Param("partition", (256, 512, 1024), 512)
HIP_COMPAT = """typedef hipStream_t cudaStream_t;
#define cudaMallocAsync hipMallocAsync
#define cudaFreeAsync hipFreeAsync
#define cudaFuncSetAttribute hipFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize hipFuncAttributeMaxDynamicSharedMemorySize
#define SHFL_XOR(v, o) __shfl_xor(v, o)
"""
CUDA_COMPAT = "#define SHFL_XOR(v, o) __shfl_xor_sync(0xffffffffu, v, o)\n"


class PagedDecodeCuda(PagedDecodeSpec):
    impl = "cuda"
    variants = (
        Variant("thread_per_head", "one thread per (b, h) walks every token: scalar, uncoalesced, few threads",
                (Param("threads", (32, 64, 128), 64),), memory_eff=0.3, bugs=("half_accumulator", "missing_scale")),
        Variant("warp_shuffle", "one warp per (b, h): lanes split D, the dot product reduced with shuffles",
                (Param("warps", (1, 2, 4, 8), 4),), memory_eff=0.6, bugs=("half_accumulator", "missing_scale")),
        Variant("vectorized_uint4", "block per (b, h): D/8 lanes per key, uint4 K/V loads of 4 keys in flight, "
                "smem merge of the key slots", (THREADS,), memory_eff=0.85, smem="static",
                bugs=("bad_combine_index", "missing_scale")),
        Variant("split_kv", "grid also over sequence partitions; a combine kernel merges the partials",
                (THREADS, PARTITION), memory_eff=0.9, smem="static", bugs=("bad_combine_index", "missing_scale")),
        Variant("gqa_cp_async", "block per (b, KV head, partition): cp.async double-buffered K/V tiles in smem "
                "shared by the whole query-head group", (Param("threads", (128, 256), 128),
                Param("tile_n", (16, 32, 64), 32), PARTITION), needs=frozenset({"cp_async", "inline_ptx"}),
                memory_eff=0.92, smem="dynamic", bugs=("missing_barrier", "bad_combine_index")),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, h, kvh, s, d, elt = task["B"], task["H"], task["KVH"], task["S"], task["D"], DTYPE_BYTES[task.dtype]
        warp, group = task.gpu.warp, h // kvh
        reread = group ** 0.65     # sibling query heads re-stream their KV head through L2 (measured)
        if variant.tag == "thread_per_head":
            t = params["threads"]
            # every lane its own row: sector-sized pieces of one K and one V row in flight per lane
            return Launch(grid=cdiv(b * h, t), threads=t, regs=min(255, 40 + d), bytes_per_access=64,
                          traffic=1.1, lane_util=b * h / (cdiv(b * h, t) * t))
        if variant.tag == "warp_shuffle":
            w = params["warps"]
            return Launch(grid=cdiv(b * h, w), threads=w * warp, regs=40, bytes_per_access=d // warp * elt,
                          traffic=reread, lane_util=b * h / (cdiv(b * h, w) * w))
        t, lanes = params["threads"], d // 8
        slots = t // lanes
        if variant.tag == "vectorized_uint4":
            return Launch(grid=b * h, threads=t, smem_bytes=(2 + d) * slots * 4, regs=72, bytes_per_access=64,
                          traffic=reread)
        part = params["partition"]
        parts = cdiv(s, part)
        partials = b * h * parts * (d + 2) * 4 * 2 / self.cost(task).bytes
        if variant.tag == "split_kv":
            return Launch(grid=b * h * parts, threads=t, smem_bytes=(2 + d) * slots * 4, regs=72,
                          bytes_per_access=64, traffic=reread + partials, launches=2)
        tile_n = params["tile_n"]
        smem = 2 * 2 * tile_n * d * elt + t // lanes * (d + 2) * 4
        return Launch(grid=b * kvh * parts, threads=t, smem_bytes=smem, regs=60,
                      bytes_per_access=min(128, 2 * tile_n * d * elt // t), traffic=1 + partials, launches=2)

    def signature(self, task: Task) -> str:
        return ("void paged_decode(const scalar_t* q, const scalar_t* k_cache, const scalar_t* v_cache, "
                "const int* block_table, const int* seq_lens, scalar_t* out, int batch, int max_pages, "
                "float scale, cudaStream_t stream)")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        defs = (f"#define NUM_HEADS {task['H']}\n#define NUM_KV_HEADS {task['KVH']}\n#define GROUP (NUM_HEADS / "
                f"NUM_KV_HEADS)\n#define HEAD_DIM {task['D']}\n#define PAGE_SIZE {task['P']}\n")
        return (cuda_prelude(task) + (HIP_COMPAT if task.is_hip else CUDA_COMPAT) + defs + self._ROW
                + getattr(self, "_" + variant.tag)(params, task, bug))

    _ROW = """
// Row of token t in [num_pages, PAGE_SIZE, NUM_KV_HEADS] (times HEAD_DIM for elements).
__device__ __forceinline__ size_t kv_row(const int* table, int t, int kvh) {
    return ((size_t)table[t / PAGE_SIZE] * PAGE_SIZE + t % PAGE_SIZE) * NUM_KV_HEADS + kvh;
}
"""
    _ARGS = ("const scalar_t* __restrict__ q, const scalar_t* __restrict__ k_cache,\n        const scalar_t* "
             "__restrict__ v_cache, const int* __restrict__ block_table, const int* __restrict__ seq_lens")
    _OUT = "\n        scalar_t* __restrict__ out, int batch, int max_pages, float scale"
    _PART = "\n        float* __restrict__ part_out, float* __restrict__ part_ml, int max_pages, int num_parts, float scale"

    @staticmethod
    def _host(launch: str) -> str:
        return f"""
void paged_decode(const scalar_t* q, const scalar_t* k_cache, const scalar_t* v_cache, const int* block_table,
                  const int* seq_lens, scalar_t* out, int batch, int max_pages, float scale, cudaStream_t stream) {{
{launch}}}
"""

    def _thread_per_head(self, p, task, bug):
        scale = "" if bug == "missing_scale" else "        s *= scale;\n"
        return f"""
#define THREADS {p['threads']}
typedef {"scalar_t" if bug == "half_accumulator" else "float"} acc_t;   // running-sum type
// One thread per (b, h): neighbouring lanes read different rows, and only B*H threads exist.
extern "C" __global__ void paged_decode_kernel({self._ARGS},{self._OUT}) {{
    const int pair = blockIdx.x * THREADS + threadIdx.x;          // b * NUM_HEADS + h
    if (pair >= batch * NUM_HEADS) return;
    const int b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP, len = seq_lens[b];
    const int* table = block_table + (size_t)b * max_pages;
    const scalar_t* qh = q + (size_t)pair * HEAD_DIM;
    acc_t acc[HEAD_DIM], l = acc_t(0.f);
    float m = -INFINITY;
    for (int d = 0; d < HEAD_DIM; ++d) acc[d] = acc_t(0.f);
    for (int t = 0; t < len; ++t) {{
        const size_t row = kv_row(table, t, kvh) * HEAD_DIM;
        float s = 0.f;
        for (int d = 0; d < HEAD_DIM; ++d) s += to_float(qh[d]) * to_float(k_cache[row + d]);
{scale}        const float m_new = fmaxf(m, s), alpha = __expf(m - m_new), pr = __expf(s - m_new);
        for (int d = 0; d < HEAD_DIM; ++d) acc[d] = acc_t(float(acc[d]) * alpha + pr * to_float(v_cache[row + d]));
        l = acc_t(float(l) * alpha + pr);
        m = m_new;
    }}
    for (int d = 0; d < HEAD_DIM; ++d) out[(size_t)pair * HEAD_DIM + d] = from_float(float(acc[d]) / float(l));
}}
""" + self._host("    paged_decode_kernel<<<(batch * NUM_HEADS + THREADS - 1) / THREADS, THREADS, 0, stream>>>(\n"
                 "        q, k_cache, v_cache, block_table, seq_lens, out, batch, max_pages, scale);\n")

    def _warp_shuffle(self, p, task, bug):
        return f"""
#define WARPS {p['warps']}
typedef {"scalar_t" if bug == "half_accumulator" else "float"} acc_t;   // running-sum type
constexpr int PER_LANE = HEAD_DIM / WARP_SIZE;   // lane owns d = lane + i * WARP_SIZE: coalesced rows

extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE) paged_decode_kernel({self._ARGS},{self._OUT}) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int pair = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;   // one warp per (b, h)
    if (pair >= batch * NUM_HEADS) return;                            // whole warps leave together
    const int b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP, len = seq_lens[b];
    const int* table = block_table + (size_t)b * max_pages;
    float qv[PER_LANE], m = -INFINITY;
    acc_t acc[PER_LANE], l = acc_t(0.f);
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {{   // the softmax scale folded into q once
        qv[i] = to_float(q[(size_t)pair * HEAD_DIM + lane + i * WARP_SIZE]){"" if bug == "missing_scale" else " * scale"};
        acc[i] = acc_t(0.f);
    }}
    for (int t = 0; t < len; ++t) {{
        const size_t row = kv_row(table, t, kvh) * HEAD_DIM + lane;
        float s = 0.f;
#pragma unroll
        for (int i = 0; i < PER_LANE; ++i) s += qv[i] * to_float(k_cache[row + i * WARP_SIZE]);
        s = warp_sum(s);                                  // butterfly: every lane holds the score
        const float m_new = fmaxf(m, s), alpha = __expf(m - m_new), pr = __expf(s - m_new);
#pragma unroll
        for (int i = 0; i < PER_LANE; ++i)
            acc[i] = acc_t(float(acc[i]) * alpha + pr * to_float(v_cache[row + i * WARP_SIZE]));
        l = acc_t(float(l) * alpha + pr);
        m = m_new;
    }}
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i)
        out[(size_t)pair * HEAD_DIM + lane + i * WARP_SIZE] = from_float(float(acc[i]) / float(l));
}}
""" + self._host("    paged_decode_kernel<<<(batch * NUM_HEADS + WARPS - 1) / WARPS, WARPS * WARP_SIZE, 0, stream>>>(\n"
                 "        q, k_cache, v_cache, block_table, seq_lens, out, batch, max_pages, scale);\n")

    @staticmethod
    def _vec(bug) -> str:
        acc = "rows[first * STRIDE + d]" if bug == "bad_combine_index" else "row[d]"
        return """
constexpr int VEC = 8;                              // 8 x 16-bit elements = one uint4
constexpr int LANES_PER_KEY = HEAD_DIM / VEC;       // lanes sharing one key row
constexpr int ROWS = THREADS / LANES_PER_KEY;       // key rows handled side by side
constexpr int STRIDE = HEAD_DIM + 2;                // a merge row: acc[HEAD_DIM], m, l
constexpr int U = 4;                                // keys per lane group per step: loads and shuffle chains in flight
union Pack { uint4 u; scalar_t h[VEC]; };

// Scores of U keys: 8-wide partial dots, summed over each key's aligned lane group (U chains interleaved).
__device__ __forceinline__ void key_scores(float* s, const float* qv, const Pack* k) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        s[u] = 0.f;
#pragma unroll
        for (int i = 0; i < VEC; ++i) s[u] += qv[i] * to_float(k[u].h[i]);
    }
#pragma unroll
    for (int o = LANES_PER_KEY / 2; o > 0; o >>= 1)
#pragma unroll
        for (int u = 0; u < U; ++u) s[u] += SHFL_XOR(s[u], o);
}

// Online softmax over U keys (dead keys carry s = -inf): one rescale by e^(m - m_new) per step.
__device__ __forceinline__ void online_update(const float* s, const Pack* v, float& m, float& l, float* acc) {
    float m_new = m;
#pragma unroll
    for (int u = 0; u < U; ++u) m_new = fmaxf(m_new, s[u]);
    if (m_new == -INFINITY) return;                 // no live key seen yet
    const float alpha = __expf(m - m_new);
    l *= alpha;
#pragma unroll
    for (int i = 0; i < VEC; ++i) acc[i] *= alpha;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const float pr = __expf(s[u] - m_new);
        l += pr;
#pragma unroll
        for (int i = 0; i < VEC; ++i) acc[i] += pr * to_float(v[u].h[i]);
    }
    m = m_new;
}

// Merge running softmaxes kept as rows {acc, m, l}: (m_max, sum e^(m_r - m_max) acc_rd, sum e^(.) l_r).
__device__ __forceinline__ float3 merge_rows(const float* rows, int first, int count, int step, int d) {
    float m_max = -INFINITY, num = 0.f, den = 0.f;
    for (int r = 0; r < count; ++r) m_max = fmaxf(m_max, rows[(first + r * step) * STRIDE + HEAD_DIM]);
    for (int r = 0; r < count; ++r) {   // rows that saw no key have m = -inf and weigh 0
        const float* row = rows + (first + r * step) * STRIDE;
        const float w = __expf(row[HEAD_DIM] - m_max);
        num += w * ACC;
        den += w * row[HEAD_DIM + 1];
    }
    return make_float3(m_max, num, den);
}
""".replace("ACC", acc)

    @staticmethod
    def _load_q(pair: str, bug=None) -> str:
        scale = "" if bug == "missing_scale" else " * scale"
        return f"""    float qv[VEC], acc[VEC], s[U];
    Pack qp, kp[U], vp[U];
    qp.u = reinterpret_cast<const uint4*>(q + (size_t){pair} * HEAD_DIM)[chunk];
#pragma unroll
    for (int i = 0; i < VEC; ++i) {{ qv[i] = to_float(qp.h[i]){scale}; acc[i] = 0.f; }}
"""

    def _slots(self, lo: str, hi: str, bug) -> str:
        return f"""    __shared__ float merge[ROWS * STRIDE];
    const int slot = threadIdx.x / LANES_PER_KEY, chunk = threadIdx.x % LANES_PER_KEY;
    const int* table = block_table + (size_t)b * max_pages;
{self._load_q("pair", bug)}    float m = -INFINITY, l = 0.f;
    // uniform trip count across the warp, so the lane-group shuffles never miss a lane
    for (int base = {lo}; base < {hi}; base += ROWS * U) {{
#pragma unroll
        for (int u = 0; u < U; ++u) {{       // 2U independent 16-B loads in flight per lane
            const int t = base + u * ROWS + slot;
            kp[u].u = vp[u].u = make_uint4(0u, 0u, 0u, 0u);
            if (t < {hi}) {{
                const size_t row = kv_row(table, t, kvh) * HEAD_DIM;
                kp[u].u = reinterpret_cast<const uint4*>(k_cache + row)[chunk];
                vp[u].u = reinterpret_cast<const uint4*>(v_cache + row)[chunk];
            }}
        }}
        key_scores(s, qv, kp);
#pragma unroll
        for (int u = 0; u < U; ++u) if (base + u * ROWS + slot >= {hi}) s[u] = -INFINITY;
        online_update(s, vp, m, l, acc);
    }}
    float* mine = merge + slot * STRIDE;
#pragma unroll
    for (int i = 0; i < VEC; ++i) mine[chunk * VEC + i] = acc[i];
    if (chunk == 0) {{ mine[HEAD_DIM] = m; mine[HEAD_DIM + 1] = l; }}
    __syncthreads();
"""

    def _vectorized_uint4(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}
{self._vec(bug)}
// One block per (b, h): ROWS keys at a time, each read by LANES_PER_KEY lanes as uint4 chunks.
extern "C" __global__ void __launch_bounds__(THREADS) paged_decode_kernel({self._ARGS},{self._OUT}) {{
    const int pair = blockIdx.x, b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP;
{self._slots("0", "seq_lens[b]", bug)}    for (int d = threadIdx.x; d < HEAD_DIM; d += THREADS) {{
        const float3 r = merge_rows(merge, 0, ROWS, 1, d);
        out[(size_t)pair * HEAD_DIM + d] = from_float(r.y / r.z);
    }}
}}
""" + self._host("    paged_decode_kernel<<<batch * NUM_HEADS, THREADS, 0, stream>>>(\n"
                 "        q, k_cache, v_cache, block_table, seq_lens, out, batch, max_pages, scale);\n")

    def _combine(self, bug) -> str:
        idx = "((size_t)pair + p)" if bug == "bad_combine_index" else "((size_t)pair * num_parts + p)"
        return f"""
// Merge one head's partitions: o = sum_p e^(m_p - m) acc_p / sum_p e^(m_p - m) l_p.
extern "C" __global__ void paged_decode_combine_kernel(const float* __restrict__ part_out,
        const float* __restrict__ part_ml, const int* __restrict__ seq_lens, scalar_t* __restrict__ out, int num_parts) {{
    const int pair = blockIdx.x, parts = (seq_lens[pair / NUM_HEADS] + PARTITION - 1) / PARTITION;
    const float* ml = part_ml + (size_t)pair * num_parts * 2;
    float m_max = -INFINITY;
    for (int p = 0; p < parts; ++p) m_max = fmaxf(m_max, ml[2 * p]);
    for (int d = threadIdx.x; d < HEAD_DIM; d += blockDim.x) {{
        float num = 0.f, den = 0.f;
        for (int p = 0; p < parts; ++p) {{
            const float w = __expf(ml[2 * p] - m_max);
            num += w * part_out[{idx} * HEAD_DIM + d];
            den += w * ml[2 * p + 1];
        }}
        out[(size_t)pair * HEAD_DIM + d] = from_float(num / den);
    }}
}}
"""

    def _split_host(self, grid: str, smem: str, pre: str = "") -> str:
        return self._host(f"""    const int num_parts = (max_pages * PAGE_SIZE + PARTITION - 1) / PARTITION;
    const size_t n = (size_t)batch * NUM_HEADS * num_parts;
    float* ws;                                   // fp32 partials: acc [n, HEAD_DIM], then (m, l) [n, 2]
    cudaMallocAsync((void**)&ws, n * (HEAD_DIM + 2) * sizeof(float), stream);
{pre}    paged_decode_kernel<<<{grid}, THREADS, {smem}, stream>>>(q, k_cache, v_cache, block_table, seq_lens, ws,
        ws + n * HEAD_DIM, max_pages, num_parts, scale);
    paged_decode_combine_kernel<<<batch * NUM_HEADS, HEAD_DIM, 0, stream>>>(ws, ws + n * HEAD_DIM, seq_lens,
                                                                          out, num_parts);
    cudaFreeAsync(ws, stream);
""")

    _STORE = """        const size_t part = (size_t)(@PAIR@) * num_parts + blockIdx.y;
        part_out[part * HEAD_DIM + d] = r.y;        // unnormalised, relative to m_max = r.x
        if (d == 0) { part_ml[2 * part] = r.x; part_ml[2 * part + 1] = r.z; }
    }
}
"""

    def _split_kv(self, p, task, bug):
        return f"""
#define THREADS {p['threads']}
#define PARTITION {p['partition']}
{self._vec(None)}
// grid (B * H, partitions): each block reduces PARTITION tokens of one head to (m, l, acc).
extern "C" __global__ void __launch_bounds__(THREADS) paged_decode_kernel({self._ARGS},{self._PART}) {{
    const int pair = blockIdx.x, b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP;
    const int len = seq_lens[b], lo = blockIdx.y * PARTITION;
    if (lo >= len) return;                          // past this sequence: the combine never reads it
    const int hi = min(lo + PARTITION, len);
{self._slots("lo", "hi", bug)}\
    for (int d = threadIdx.x; d < HEAD_DIM; d += THREADS) {{
        const float3 r = merge_rows(merge, 0, ROWS, 1, d);
{self._STORE.replace("@PAIR@", "pair")}{self._combine(bug)}""" + \
            self._split_host("dim3(batch * NUM_HEADS, num_parts)", "0")

    def _gqa_cp_async(self, p, task, bug):
        # the missing_barrier bug reads the stage without waiting for its copies or for the other threads
        sync = "" if bug == "missing_barrier" else ("        asm volatile(\"cp.async.wait_group 1;\\n\" ::);  "
                                                    "// all but the newest group have landed\n        __syncthreads();\n")
        return f"""
#define THREADS {p['threads']}
#define TILE_N {p['tile_n']}            // tokens per cp.async stage
#define PARTITION {p['partition']}
{self._vec(None)}constexpr int SLICES = ROWS / GROUP;   // a row = (query head g, key slice): slices per head
static_assert(SLICES >= 1, "THREADS too small for the query-head group");
constexpr int STAGES = 2, TILE_CHUNKS = TILE_N * LANES_PER_KEY;
constexpr int SMEM_BYTES = STAGES * 2 * TILE_CHUNKS * 16 + ROWS * STRIDE * 4;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {{
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: "r"(dst), "l"(gmem));
}}

// grid (B * KVH, partitions): K/V tiles of one KV head are staged once in smem and read by all GROUP
// query heads, so DRAM sees each KV byte once; cp.async keeps the next tile in flight meanwhile.
extern "C" __global__ void __launch_bounds__(THREADS) paged_decode_kernel({self._ARGS},{self._PART}) {{
    extern __shared__ uint4 smem[];              // [STAGES][K | V][TILE_CHUNKS], then ROWS merge rows
    float* merge = reinterpret_cast<float*>(smem + STAGES * 2 * TILE_CHUNKS);
    const int b = blockIdx.x / NUM_KV_HEADS, kvh = blockIdx.x % NUM_KV_HEADS;
    const int len = seq_lens[b], lo = blockIdx.y * PARTITION;
    if (lo >= len) return;
    const int hi = min(lo + PARTITION, len), ntiles = (hi - lo + TILE_N - 1) / TILE_N;
    const int chunk = threadIdx.x % LANES_PER_KEY, row = threadIdx.x / LANES_PER_KEY;
    const int g = row % GROUP, slice = row / GROUP;
    const int* table = block_table + (size_t)b * max_pages;
{self._load_q("(b * NUM_HEADS + kvh * GROUP + g)")}    float m = -INFINITY, l = 0.f;
    auto load_tile = [&](int tile, int stage) {{   // rows past hi repeat the last token; masked below
        uint4* ks = smem + stage * 2 * TILE_CHUNKS;
        for (int i = threadIdx.x; i < TILE_CHUNKS; i += THREADS) {{
            const size_t r = kv_row(table, min(lo + tile * TILE_N + i / LANES_PER_KEY, hi - 1), kvh) * HEAD_DIM;
            cp_async16(ks + i, reinterpret_cast<const uint4*>(k_cache + r) + i % LANES_PER_KEY);
            cp_async16(ks + TILE_CHUNKS + i, reinterpret_cast<const uint4*>(v_cache + r) + i % LANES_PER_KEY);
        }}
    }};
    load_tile(0, 0);
    asm volatile("cp.async.commit_group;\\n" ::);
    for (int tile = 0; tile < ntiles; ++tile) {{
        if (tile + 1 < ntiles) load_tile(tile + 1, (tile + 1) % STAGES);
        asm volatile("cp.async.commit_group;\\n" ::);  // possibly empty: keeps the group count uniform
{sync}        const uint4* ks = smem + (tile % STAGES) * 2 * TILE_CHUNKS;
        const int valid = min(TILE_N, hi - lo - tile * TILE_N);
        for (int n0 = 0; n0 < valid; n0 += SLICES * U) {{   // uniform trip count: full lane groups shuffle
#pragma unroll
            for (int u = 0; u < U; ++u) {{
                const int n = n0 + u * SLICES + slice;
                const bool live = slice < SLICES && n < valid;
                kp[u].u = live ? ks[n * LANES_PER_KEY + chunk] : make_uint4(0u, 0u, 0u, 0u);
                vp[u].u = live ? ks[TILE_CHUNKS + n * LANES_PER_KEY + chunk] : kp[u].u;
            }}
            key_scores(s, qv, kp);
#pragma unroll
            for (int u = 0; u < U; ++u) if (slice >= SLICES || n0 + u * SLICES + slice >= valid) s[u] = -INFINITY;
            online_update(s, vp, m, l, acc);
        }}
        __syncthreads();                            // stage fully read before it is refilled
    }}
    float* mine = merge + row * STRIDE;
#pragma unroll
    for (int i = 0; i < VEC; ++i) mine[chunk * VEC + i] = acc[i];
    if (chunk == 0) {{ mine[HEAD_DIM] = m; mine[HEAD_DIM + 1] = l; }}
    __syncthreads();
    for (int i = threadIdx.x; i < GROUP * HEAD_DIM; i += THREADS) {{
        const int gg = i / HEAD_DIM, d = i % HEAD_DIM;
        const float3 r = merge_rows(merge, gg, SLICES, GROUP, d);
{self._STORE.replace("@PAIR@", "b * NUM_HEADS + kvh * GROUP + gg")}{self._combine(bug)}""" + self._split_host(
            "dim3(batch * NUM_KV_HEADS, num_parts)", "SMEM_BYTES",
            "    cudaFuncSetAttribute(paged_decode_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);\n")
