"""Pieces of the paged_decode_cuda renders (not an op module itself): the block-table row
lookup, the kernel argument lists, the literal host function, and the uint4 key-slot machinery
(Pack, key scores, online update, merge rows) with the split-KV combine kernel and its host.
The renders of the first three rungs are here too, and the gqa_cp_async rung's constants and tile
loop (`gqa_head`, `gqa_tiles`), which swa_decode_cuda shares. Bug slots are arguments: `vec(acc)`,
`load_q(pair, scale)`, `slots(lo, hi, scale)`, `combine(idx)`.

Two knobs a real kernel of this shape tunes (issue 26 item 2), with `in_flight` their launch effect:
- keys_per_step (U): keys a lane group loads and reduces per step; each holds a K and a V uint4
  (8 registers) and a score until the step's online update, and the shuffle chains of the U keys
  interleave. Where the rung loads K/V rows straight from DRAM into registers (vectorized_uint4,
  split_kv), U is the loads a lane keeps in flight; behind a cp.async ring it only sets the ILP
  of the smem reads.
- stages (gqa_cp_async): K/V tiles of the cp.async ring; STAGES - 1 tiles in flight ahead of
  the one being reduced, for a tile's smem each.
"""

from ...records import replaced
from ..base import Launch, Param

KEYS = Param("keys_per_step", (2, 4, 8), 4)
STAGES = Param("stages", (2, 3, 4), 2)
KEY_REGS = 9              # a K and a V uint4 and a score a key, live until the step's update

ROW = """
// Row of token t in [num_pages, PAGE_SIZE, NUM_KV_HEADS] (times HEAD_DIM for elements).
__device__ __forceinline__ size_t kv_row(const int* table, int t, int kvh) {
    return ((size_t)table[t / PAGE_SIZE] * PAGE_SIZE + t % PAGE_SIZE) * NUM_KV_HEADS + kvh;
}
"""
ARGS = ("const scalar_t* __restrict__ q, const scalar_t* __restrict__ k_cache,\n        const scalar_t* "
         "__restrict__ v_cache, const int* __restrict__ block_table, const int* __restrict__ seq_lens")
OUT = "\n        scalar_t* __restrict__ out, int batch, int max_pages, float scale"
PART = "\n        float* __restrict__ part_out, float* __restrict__ part_ml, int max_pages, int num_parts, float scale"


def host(launch: str) -> str:
    return f"""
void paged_decode(const scalar_t* q, const scalar_t* k_cache, const scalar_t* v_cache, const int* block_table,
                  const int* seq_lens, scalar_t* out, int batch, int max_pages, float scale, cudaStream_t stream) {{
{launch}}}
"""


def thread_per_head_src(p, task, acc_t="float", scale="        s *= scale;\n"):
    return f"""
#define THREADS {p['threads']}
typedef {acc_t} acc_t;   // running-sum type
// One thread per (b, h): neighbouring lanes read different rows, and only B*H threads exist.
extern "C" __global__ void paged_decode_kernel({ARGS},{OUT}) {{
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
""" + host("    paged_decode_kernel<<<(batch * NUM_HEADS + THREADS - 1) / THREADS, THREADS, 0, stream>>>(\n"
                 "        q, k_cache, v_cache, block_table, seq_lens, out, batch, max_pages, scale);\n")


def warp_shuffle_src(p, task, acc_t="float", scale=" * scale"):
    return f"""
#define WARPS {p['warps']}
typedef {acc_t} acc_t;   // running-sum type
constexpr int PER_LANE = HEAD_DIM / WARP_SIZE;   // lane owns d = lane + i * WARP_SIZE: coalesced rows

extern "C" __global__ void __launch_bounds__(WARPS * WARP_SIZE) paged_decode_kernel({ARGS},{OUT}) {{
    const int lane = threadIdx.x % WARP_SIZE;
    const int pair = blockIdx.x * WARPS + threadIdx.x / WARP_SIZE;   // one warp per (b, h)
    if (pair >= batch * NUM_HEADS) return;                            // whole warps leave together
    const int b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP, len = seq_lens[b];
    const int* table = block_table + (size_t)b * max_pages;
    float qv[PER_LANE], m = -INFINITY;
    acc_t acc[PER_LANE], l = acc_t(0.f);
#pragma unroll
    for (int i = 0; i < PER_LANE; ++i) {{   // the softmax scale folded into q once
        qv[i] = to_float(q[(size_t)pair * HEAD_DIM + lane + i * WARP_SIZE]){scale};
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
""" + host("    paged_decode_kernel<<<(batch * NUM_HEADS + WARPS - 1) / WARPS, WARPS * WARP_SIZE, 0, stream>>>(\n"
                 "        q, k_cache, v_cache, block_table, seq_lens, out, batch, max_pages, scale);\n")


def in_flight(launch: Launch, p: dict, tile_bytes: int = 0) -> Launch:
    """`launch` (modelled at U = 4 and, behind a ring, 2 stages) at the candidate's keys_per_step
    and stages: direct loads (tile_bytes 0) keep U / 4 times the bytes in flight; a ring of
    `tile_bytes` K/V tiles keeps stages - 1 of them in flight, for a tile of smem a stage more."""
    u, stages = p.get(KEYS.name, KEYS.default), p.get(STAGES.name, STAGES.default)
    out = replaced(launch, regs=launch.regs + KEY_REGS * (u - KEYS.default))
    if not tile_bytes:
        return replaced(out, bytes_per_access=launch.bytes_per_access * u // KEYS.default)
    return replaced(out, smem_bytes=launch.smem_bytes + (stages - 2) * tile_bytes,
                   bytes_per_access=launch.bytes_per_access * (stages - 1))


def vec(acc="row[d]", u: int = 4) -> str:
    return """
constexpr int VEC = 8;                              // 8 x 16-bit elements = one uint4
constexpr int LANES_PER_KEY = HEAD_DIM / VEC;       // lanes sharing one key row
constexpr int ROWS = THREADS / LANES_PER_KEY;       // key rows handled side by side
constexpr int STRIDE = HEAD_DIM + 2;                // a merge row: acc[HEAD_DIM], m, l
constexpr int U = @U@;                                // keys per lane group per step: loads and shuffle chains in flight
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
""".replace("ACC", acc).replace("@U@", str(u))


def load_q(pair: str, scale=" * scale") -> str:
    return f"""    float qv[VEC], acc[VEC], s[U];
    Pack qp, kp[U], vp[U];
    qp.u = reinterpret_cast<const uint4*>(q + (size_t){pair} * HEAD_DIM)[chunk];
#pragma unroll
    for (int i = 0; i < VEC; ++i) {{ qv[i] = to_float(qp.h[i]){scale}; acc[i] = 0.f; }}
"""


def slots(lo: str, hi: str, scale=" * scale") -> str:
    return f"""    __shared__ float merge[ROWS * STRIDE];
    const int slot = threadIdx.x / LANES_PER_KEY, chunk = threadIdx.x % LANES_PER_KEY;
    const int* table = block_table + (size_t)b * max_pages;
{load_q("pair", scale)}    float m = -INFINITY, l = 0.f;
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


def vectorized_uint4_src(p, task, acc="row[d]", scale=" * scale"):
    return f"""
#define THREADS {p['threads']}
{vec(acc, p.get(KEYS.name, KEYS.default))}
// One block per (b, h): ROWS keys at a time, each read by LANES_PER_KEY lanes as uint4 chunks.
extern "C" __global__ void __launch_bounds__(THREADS) paged_decode_kernel({ARGS},{OUT}) {{
    const int pair = blockIdx.x, b = pair / NUM_HEADS, kvh = pair % NUM_HEADS / GROUP;
{slots("0", "seq_lens[b]", scale)}    for (int d = threadIdx.x; d < HEAD_DIM; d += THREADS) {{
        const float3 r = merge_rows(merge, 0, ROWS, 1, d);
        out[(size_t)pair * HEAD_DIM + d] = from_float(r.y / r.z);
    }}
}}
""" + host("    paged_decode_kernel<<<batch * NUM_HEADS, THREADS, 0, stream>>>(\n"
                 "        q, k_cache, v_cache, block_table, seq_lens, out, batch, max_pages, scale);\n")


def combine(idx="((size_t)pair * num_parts + p)") -> str:
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


def split_host(grid: str, smem: str, pre: str = "") -> str:
    return host(f"""    const int num_parts = (max_pages * PAGE_SIZE + PARTITION - 1) / PARTITION;
    const size_t n = (size_t)batch * NUM_HEADS * num_parts;
    float* ws;                                   // fp32 partials: acc [n, HEAD_DIM], then (m, l) [n, 2]
    cudaMallocAsync((void**)&ws, n * (HEAD_DIM + 2) * sizeof(float), stream);
{pre}    paged_decode_kernel<<<{grid}, THREADS, {smem}, stream>>>(q, k_cache, v_cache, block_table, seq_lens, ws,
        ws + n * HEAD_DIM, max_pages, num_parts, scale);
    paged_decode_combine_kernel<<<batch * NUM_HEADS, HEAD_DIM, 0, stream>>>(ws, ws + n * HEAD_DIM, seq_lens,
                                                                          out, num_parts);
    cudaFreeAsync(ws, stream);
""")


STORE = """        const size_t part = (size_t)(@PAIR@) * num_parts + blockIdx.y;
        part_out[part * HEAD_DIM + d] = r.y;        // unnormalised, relative to m_max = r.x
        if (d == 0) { part_ml[2 * part] = r.x; part_ml[2 * part + 1] = r.z; }
    }
}
"""


def gqa_head(p, unit: str) -> str:
    """The gqa_cp_async rung's constants and cp.async helper; `unit` names what a tile holds."""
    return f"""#define THREADS {p['threads']}
#define TILE_N {p['tile_n']}            // {unit} per cp.async stage
#define PARTITION {p['partition']}
{vec(u=p.get(KEYS.name, KEYS.default))}constexpr int SLICES = ROWS / GROUP;   // a row = (query head g, key slice): slices per head
static_assert(SLICES >= 1, "THREADS too small for the query-head group");
constexpr int STAGES = {p.get(STAGES.name, STAGES.default)}, TILE_CHUNKS = TILE_N * LANES_PER_KEY;
constexpr int SMEM_BYTES = STAGES * 2 * TILE_CHUNKS * 16 + ROWS * STRIDE * 4;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {{
    const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: "r"(dst), "l"(gmem));
}}
"""


def landed(sync: str, stages: int) -> str:
    """The ring's wait: all but the newest stages - 1 commit groups have landed."""
    text = sync.replace("@AHEAD@", str(stages - 1))
    return text if stages == 2 else text.replace("the newest group have", f"the newest {stages - 1} groups have")


def gqa_tiles(sync: str, stages: int) -> str:
    """The gqa_cp_async main loop after the kernel has set up lo/hi/ntiles, load_tile and the
    query: a ring of `stages` cp.async K/V tiles (double-buffered: one tile ahead), the key slots'
    online softmax, then each row's partial written to the merge rows; it ends inside the merge
    loop over GROUP * HEAD_DIM. `sync` waits for the tile (its @AHEAD@: the groups left in flight)."""
    commit = 'asm volatile("cp.async.commit_group;\\n" ::);'
    if stages == 2:
        prologue, ahead = f"    load_tile(0, 0);\n    {commit}\n", "1"
    else:
        prologue, ahead = f"""#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {{     // prologue: STAGES - 1 tiles in flight
        if (s < ntiles) load_tile(s, s);
        {commit}
    }}
""", "STAGES - 1"
    return f"""{prologue}    for (int tile = 0; tile < ntiles; ++tile) {{
        if (tile + {ahead} < ntiles) load_tile(tile + {ahead}, (tile + {ahead}) % STAGES);
        {commit}  // possibly empty: keeps the group count uniform
{landed(sync, stages)}        const uint4* ks = smem + (tile % STAGES) * 2 * TILE_CHUNKS;
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
"""
