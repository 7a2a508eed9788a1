"""Chunked prefill attention in CUDA: the chunk's C queries of each (b, h) attend to the P cached
prefix keys and, causally, to the chunk (grouped-query heads read KV head h // GROUP).

Ladder: scores materialized in global fp32 (scores, row-softmax and PV kernels) -> one kernel, a
thread per query row, K/V tiles in shared memory, online softmax, every block masked -> prefix
blocks without a mask and only the diagonal blocks masked, future blocks skipped -> tensor cores
(ldmatrix + mma.m16n8k16, FA2 register softmax; _flash_mma's device helpers) -> K/V streamed by
a cp.async ring -> on sm_90a, wgmma from 128-byte-swizzled smem (flash_prefill_cuda's warpgroup
kernel, _flash_wgmma, with the chunk's prefix offset and the KV-head base) -> FA3's TMA producer
warpgroup feeding it (_flash_ws). C and P are multiples of 128, so every tile is whole."""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from ._flash_mma import LOAD_Q, MMA_EPILOGUE, MMA_PROLOGUE, SYNC, mma_common, warp_share
from ._chunked_wgmma import ARGS, KV_BASE, host, wgmma_launch, wgmma_src, ws_src
from ._flash_ws import TMA_INCLUDES, ws_rung
from ._flash_wgmma import WARPGROUP_ROWS
from .chunked_prefill_spec import ENTRY, ChunkedPrefillSpec, cost_of, keys_visited, pairs
from .flash_prefill_spec import LOG2E


def scores_launch(p, task):
    # S is written, read twice by the softmax (max/sum, then normalise in place) and read by PV
    b, h, c, pf = task["B"], task["H"], task["C"], task["P"]
    scores = b * h * c * (pf + c) * 4 * 4
    return Launch(grid=b * h * c * cdiv(pf + c, p["threads"]), threads=p["threads"], regs=32, bytes_per_access=2,
                  traffic=1 + scores / cost_of(task).bytes, compute_scale=0.25, launches=3,
                  tile_quant=pairs(c, pf) / (c * (pf + c)))


def row_launch(skip: bool):
    """A thread per query row, BN-key tiles of K/V in smem: q and the accumulator are 2 D floats a
    thread, past the register file: they spill to local memory (L1)."""
    def launch(p, task):
        b, h, c, pf, d, bm, bn = task["B"], task["H"], task["C"], task["P"], task["D"], p["BM"], p["BN"]
        return Launch(grid=b * h * c // bm, threads=bm, smem_bytes=2 * bn * d * DTYPE_BYTES[task.dtype], regs=255,
                      bytes_per_access=4, traffic=1 + 0.1 * b * h * keys_visited(c, pf, bm, bn, skip) // bm * 2 * d
                      * DTYPE_BYTES[task.dtype] / cost_of(task).bytes,
                      compute_scale=0.55 * (1.0 if bm >= 128 else 0.85), tile_quant=pairs(c, pf) / keys_visited(c, pf, bm, bn, skip))
    return launch


def mma_launch(p, task):
    """One warp per 16 query rows, Q in registers as A fragments, K/V tiles in smem (one buffer, or
    `stages` behind cp.async); tiles stop at the diagonal."""
    b, h, c, pf, d, e, bm, bn = task["B"], task["H"], task["C"], task["P"], task["D"], DTYPE_BYTES[task.dtype], p["BLOCK_M"], p["BLOCK_N"]
    stages = p.get("stages", 1)
    tiles = b * h * c // bm
    resident = {32: 4, 64: 2}.get(bm, 1)       # blocks of bm / 16 warps an SM keeps busy
    waves = cdiv(tiles, task.gpu.sms * resident)
    balance = tiles / (waves * task.gpu.sms * resident) if waves < 4 else 1.0
    shape = min(1.0, bn / (bn + 16) * 1.25) * warp_share(bm) * ({1: 1.0, 2: 0.9}.get(stages, 1.0) if stages > 1 else 0.85)
    reread = b * h * keys_visited(c, pf, bm, bn, True) // bm * 2 * d * e / cost_of(task).bytes
    return Launch(grid=tiles, threads=bm // 16 * 32, smem_bytes=(bm + max(1, stages) * 2 * bn) * d * e,
                  regs=min(255, (85 if stages > 1 else 75) + d // 2 * 3 // 2 + bn // 2), bytes_per_access=16,
                  traffic=1 + 0.06 * reread, tile_quant=pairs(c, pf) / keys_visited(c, pf, bm, bn, True),
                  compute_scale=task.gpu.mma_sync_scale("fp16") * max(0.6, balance) * shape)


def materialized_scores_src(p, task, scale=" * SM_SCALE", causal="<="):
    return f"""
#define THREADS {p['threads']}

// Kernel 1: one thread per score S[bh, i, j] = q_i . k_j (fp32, global); future keys j > P + i are -inf.
extern "C" __global__ void __launch_bounds__(THREADS) chunked_prefill_scores(const scalar_t* __restrict__ q,
        const scalar_t* __restrict__ k, float* __restrict__ s, int C, int P) {{
    const int j = blockIdx.x * THREADS + threadIdx.x, i = blockIdx.y, bh = blockIdx.z, L = P + C;
    if (j >= L) return;
    const scalar_t* qr = q + ((size_t)bh * C + i) * HEAD_DIM;
    const scalar_t* kr = k + ((size_t)(bh / GROUP) * L + j) * HEAD_DIM;
    float dot = 0.f;
    for (int d = 0; d < HEAD_DIM; ++d) dot += to_float(qr[d]) * to_float(kr[d]);
    s[((size_t)bh * C + i) * L + j] = j {causal} P + i ? dot{scale} : -INFINITY;
}}

__device__ __forceinline__ float block_reduce(float x, float* red, bool is_max) {{
    x = is_max ? warp_max(x) : warp_sum(x);
    __syncthreads();                              // red is reused by the next reduction
    if (threadIdx.x % WARP_SIZE == 0) red[threadIdx.x / WARP_SIZE] = x;
    __syncthreads();
    x = red[0];
    for (int w = 1; w < THREADS / WARP_SIZE; ++w) x = is_max ? fmaxf(x, red[w]) : x + red[w];
    return x;
}}

// Kernel 2: a block per score row: max, sum of exponentials, probabilities written in place.
extern "C" __global__ void __launch_bounds__(THREADS) chunked_prefill_softmax(float* __restrict__ s, int L) {{
    __shared__ float red[THREADS / WARP_SIZE];
    float* row = s + (size_t)blockIdx.x * L;
    float mx = -INFINITY, sum = 0.f;
    for (int j = threadIdx.x; j < L; j += THREADS) mx = fmaxf(mx, row[j]);
    mx = block_reduce(mx, red, true);
    for (int j = threadIdx.x; j < L; j += THREADS) sum += __expf(row[j] - mx);
    const float inv = 1.f / block_reduce(sum, red, false);
    for (int j = threadIdx.x; j < L; j += THREADS) row[j] = __expf(row[j] - mx) * inv;
}}

// Kernel 3: one thread per output element o[bh, i, d] = sum_j p_ij v_jd (d fastest: coalesced V rows).
extern "C" __global__ void chunked_prefill_kernel(const float* __restrict__ s, const scalar_t* __restrict__ v,
        scalar_t* __restrict__ o, int C, int P) {{
    const int i = blockIdx.x, bh = blockIdx.y, d = threadIdx.x, L = P + C;
    const float* pr = s + ((size_t)bh * C + i) * L;
    const scalar_t* vb = v + (size_t)(bh / GROUP) * L * HEAD_DIM + d;
    float acc = 0.f;
    for (int j = 0; j <= P + i; ++j) acc += pr[j] * to_float(vb[(size_t)j * HEAD_DIM]);
    o[((size_t)bh * C + i) * HEAD_DIM + d] = from_float(acc);
}}

{ENTRY.host_head(task)} {{
    float* s;                                     // [B * H, C, P + C] fp32 scores, then probabilities
    const size_t rows = (size_t)B * NUM_HEADS * C;
    cudaMallocAsync((void**)&s, rows * (P + C) * sizeof(float), stream);
    chunked_prefill_scores<<<dim3((P + C + THREADS - 1) / THREADS, C, B * NUM_HEADS), THREADS, 0, stream>>>(q, k, s, C, P);
    chunked_prefill_softmax<<<rows, THREADS, 0, stream>>>(s, P + C);
    chunked_prefill_kernel<<<dim3(C, B * NUM_HEADS), HEAD_DIM, 0, stream>>>(s, v, o, C, P);
    cudaFreeAsync(s, stream);
}}
"""


def row_common(p, scale: str, causal: str = "<=") -> str:
    return f"""
#define BM {p['BM']}                      // query rows per block = threads
#define BN {p['BN']}                      // keys per shared-memory tile

// One K/V tile against this thread's query row: BN scores, one rescale, BN accumulations.
// MASKED: the tile crosses the causal diagonal, keys past `pos` are dropped.
template <bool MASKED>
__device__ __forceinline__ void attend(const scalar_t* kb, const scalar_t* vb, scalar_t* Ks, scalar_t* Vs,
        const float* qv, float* acc, float& m, float& l, int n0, int pos) {{
    __syncthreads();                              // every thread is done with the previous tile
    for (int i = threadIdx.x; i < BN * HEAD_DIM; i += BM) {{   // coalesced: consecutive threads, consecutive d
        Ks[i] = kb[(size_t)n0 * HEAD_DIM + i];
        Vs[i] = vb[(size_t)n0 * HEAD_DIM + i];
    }}
    __syncthreads();                              // the tile is visible to every thread
    float s[BN], m_new = m;
#pragma unroll
    for (int j = 0; j < BN; ++j) {{                 // every thread reads the same key: smem broadcast
        float dot = 0.f;
#pragma unroll 16
        for (int d = 0; d < HEAD_DIM; ++d) dot += qv[d] * to_float(Ks[j * HEAD_DIM + d]);
        s[j] = (!MASKED || n0 + j {causal} pos) ? dot : -INFINITY;
        m_new = fmaxf(m_new, s[j]);
    }}
    const float alpha = exp2f(m - m_new);            // the first tile always holds key 0: m_new is finite
    l *= alpha;
#pragma unroll 16
    for (int d = 0; d < HEAD_DIM; ++d) acc[d] *= alpha;
#pragma unroll
    for (int j = 0; j < BN; ++j) {{
        const float pj = exp2f(s[j] - m_new);
        l += pj;
#pragma unroll 16
        for (int d = 0; d < HEAD_DIM; ++d) acc[d] += pj * to_float(Vs[j * HEAD_DIM + d]);
    }}
    m = m_new;
}}

extern "C" __global__ void __launch_bounds__(BM) chunked_prefill_kernel({ARGS}) {{
    __shared__ __align__(16) scalar_t Ks[BN * HEAD_DIM], Vs[BN * HEAD_DIM];
    const int bh = blockIdx.x, m0 = blockIdx.y * BM, row = m0 + threadIdx.x, pos = P + row;
{KV_BASE}    float qv[HEAD_DIM], acc[HEAD_DIM], m = -INFINITY, l = 0.f;
    for (int d = 0; d < HEAD_DIM; ++d) {{ qv[d] = to_float(q[((size_t)bh * C + row) * HEAD_DIM + d]){scale}; acc[d] = 0.f; }}
"""


def row_tail(task):
    return """    for (int d = 0; d < HEAD_DIM; ++d) o[((size_t)bh * C + row) * HEAD_DIM + d] = from_float(acc[d] / l);
}
""" + host(task, "dim3(B * NUM_HEADS, C / BM)", "BM")


def smem_online_src(p, task, scale=" * SCALE_LOG2", causal="<="):
    return row_common(p, scale, causal) + """    // every key block of prefix and chunk is loaded; causality is a mask on each of them
    for (int n0 = 0; n0 < P + C; n0 += BN) attend<true>(kb, vb, Ks, Vs, qv, acc, m, l, n0, pos);
""" + row_tail(task)


def prefix_causal_split_src(p, task, scale=" * SCALE_LOG2", diag="P + m0"):
    return row_common(p, scale) + f"""    // prefix / causal split: keys before P + m0 (prefix, earlier chunk tokens) are seen by every row: no mask;
    // the block's own BM chunk keys cross the diagonal; later chunk keys are never loaded
    const int diag = {diag};
    for (int n0 = 0; n0 < diag; n0 += BN) attend<false>(kb, vb, Ks, Vs, qv, acc, m, l, n0, pos);
    for (int n0 = diag; n0 < P + m0 + BM; n0 += BN) attend<true>(kb, vb, Ks, Vs, qv, acc, m, l, n0, pos);
""" + row_tail(task)


def mma_helpers(p, task, mask=">", stages=0) -> str:
    """_flash_mma's swizzle / ldmatrix / mma / attend_tile helpers, without its kernel's header."""
    return mma_common(p, task, mask, stages).split('extern "C" __global__')[0]


PROLOGUE = MMA_PROLOGUE.replace("(size_t)blockIdx.x * S * HEAD_DIM", "(size_t)blockIdx.x * C * HEAD_DIM") \
    .replace("-INFINITY", "-INFINITY").replace("M0", "-INFINITY").replace("L0", "0.f")


def mma_sync_src(p, task, mask=">"):
    return mma_helpers(p, task, mask) + f"""
extern "C" __global__ void __launch_bounds__(THREADS) chunked_prefill_kernel({ARGS}) {{
    __shared__ __align__(128) scalar_t Qs[BLOCK_M * HEAD_DIM], Ks[BLOCK_N * HEAD_DIM], Vs[BLOCK_N * HEAD_DIM];
    const int bh = blockIdx.x;
{KV_BASE}{PROLOGUE}    auto load = [&](scalar_t* dst, const scalar_t* src, int rows) {{   // 16 B per thread per step, swizzled
        for (int i = threadIdx.x; i < rows * CHUNKS; i += THREADS)
            *reinterpret_cast<uint4*>(dst + swz(i / CHUNKS, i % CHUNKS)) = *reinterpret_cast<const uint4*>(src + (size_t)i * 8);
    }};
    load(Qs, q + base + (size_t)m0 * HEAD_DIM, BLOCK_M);
    __syncthreads();
{LOAD_Q}    // query row r of the chunk sits at position P + r: attend_tile masks only tiles crossing P + row0
    for (int n0 = 0; n0 < P + m0 + BLOCK_M; n0 += BLOCK_N) {{
        __syncthreads();                        // every warp is done with the previous tile
        load(Ks, kb + (size_t)n0 * HEAD_DIM, BLOCK_N);
        load(Vs, vb + (size_t)n0 * HEAD_DIM, BLOCK_N);
{SYNC}        attend_tile(Ks, Vs, qf, acc, m_i, l_i, n0, P + row0, SCALE_LOG2);
    }}
""" + MMA_EPILOGUE + host(task, "dim3(B * NUM_HEADS, C / BLOCK_M)", "THREADS")


def cp_async_pipeline_src(p, task, mask=">"):
    return mma_helpers(p, task, mask, p["stages"]) + f"""
extern "C" __global__ void __launch_bounds__(THREADS) chunked_prefill_kernel({ARGS}) {{
    extern __shared__ __align__(128) unsigned char smem_raw[];   // Q tile, then STAGES x (K tile, V tile)
    scalar_t* Qs = reinterpret_cast<scalar_t*>(smem_raw);
    scalar_t* KVs = Qs + BLOCK_M * HEAD_DIM;
    const int bh = blockIdx.x;
{KV_BASE}{PROLOGUE}    auto copy = [&](scalar_t* dst, const scalar_t* src, int rows) {{   // global -> smem, no registers
        for (int i = threadIdx.x; i < rows * CHUNKS; i += THREADS)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n"
                         :: "r"(smem_u32(dst + swz(i / CHUNKS, i % CHUNKS))), "l"(src + (size_t)i * 8));
    }};
    auto stage = [&](int j) {{ return KVs + (j % STAGES) * 2 * BLOCK_N * HEAD_DIM; }};
    auto issue = [&](int j) {{                 // K and V tile j into stage j % STAGES
        copy(stage(j), kb + (size_t)j * BLOCK_N * HEAD_DIM, BLOCK_N);
        copy(stage(j) + BLOCK_N * HEAD_DIM, vb + (size_t)j * BLOCK_N * HEAD_DIM, BLOCK_N);
    }};
    // through the diagonal, rounded up: at BLOCK_N > BLOCK_M the block's own keys may end mid-tile (the
    // tile's later keys are masked; P + C, a multiple of 128, bounds the last one)
    const int ntiles = (P + m0 + BLOCK_M + BLOCK_N - 1) / BLOCK_N;
    copy(Qs, q + base + (size_t)m0 * HEAD_DIM, BLOCK_M);
#pragma unroll
    for (int j = 0; j < STAGES - 1; ++j) {{     // prologue: Q rides in group 0, then STAGES - 1 tiles
        if (j < ntiles) issue(j);
        asm volatile("cp.async.commit_group;\\n" ::);
    }}
    for (int j = 0; j < ntiles; ++j) {{
        asm volatile("cp.async.wait_group %0;\\n" :: "n"(STAGES - 2));   // this thread's copies of tile j landed
{SYNC}        if (j == 0)                             // Q came with group 0: into registers once
{LOAD_Q.replace("    for", "        for")}        if (j + STAGES - 1 < ntiles) issue(j + STAGES - 1);   // refills the stage read at j - 1
        asm volatile("cp.async.commit_group;\\n" ::);
        attend_tile(stage(j), stage(j) + BLOCK_N * HEAD_DIM, qf, acc, m_i, l_i, j * BLOCK_N, P + row0, SCALE_LOG2);
    }}
""" + MMA_EPILOGUE + host(task, "dim3(B * NUM_HEADS, C / BLOCK_M)", "THREADS", "smem", """
    const int smem = (BLOCK_M + STAGES * 2 * BLOCK_N) * HEAD_DIM * sizeof(scalar_t);
    cudaFuncSetAttribute(chunked_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);""")



TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
ROW_PARAMS = (Param("BM", (64, 128), 128), Param("BN", (8, 16, 32), 16))
MMA_TILES = (Param("BLOCK_M", (32, 64, 128), 64), Param("BLOCK_N", (32, 64, 128), 64))


class ChunkedPrefillCuda(ChunkedPrefillSpec):
    impl = "cuda"
    variants = (
        Rung("materialized_scores", "scores kernel -> global fp32 S [B*H, C, P+C], row-softmax kernel, PV kernel",
             (Param("threads", (128, 256), 256),), compute_eff=0.12, memory_eff=0.7, launch=scores_launch,
             render=materialized_scores_src, bugs={"missing_scale": {"scale": ""}, "off_by_one": {"causal": "<"}}),
        Rung("smem_online", "one kernel, a thread per query row, K/V tiles in static smem, online softmax, "
             "every key block masked", ROW_PARAMS, compute_eff=0.3, memory_eff=0.7, smem="static",
             launch=row_launch(False), render=smem_online_src, bugs={"missing_scale": {"scale": ""}, "off_by_one": {"causal": "<"}}),
        Rung("prefix_causal_split", "prefix blocks without a mask, only the diagonal blocks masked, future blocks skipped",
             ROW_PARAMS, compute_eff=0.3, memory_eff=0.75, smem="static", launch=row_launch(True),
             render=prefix_causal_split_src, bugs={"missing_scale": {"scale": ""}, "off_by_one": {"diag": "P + m0 + BN"}}),
        # no missing_barrier in mma_sync (the K/V tile read before the other warps' stores land): on an H100
        # it passed KernelBench's 5 trials (seed 6161, C 2048), the race showing in 0-12 of 2M outputs a run;
        # nor in cp_async_pipeline, where tile j was prefetched STAGES - 1 tiles earlier (its race is rarer still)
        Rung("mma_sync", "FA2 on tensor cores: mma.m16n8k16 via ldmatrix, P re-packed in registers, diagonal tiles masked",
             MMA_TILES, needs=TC, path="fp16", compute_eff=0.55, memory_eff=0.8, smem="static", launch=mma_launch,
             render=mma_sync_src, bugs={"off_by_one": {"mask": ">="}}),
        Rung("cp_async_pipeline", "K/V tiles streamed by a cp.async ring of STAGES buffers (dynamic smem)",
             (*MMA_TILES, Param("stages", (2, 3, 4), 3)), needs=TC | {"cp_async"}, path="fp16", compute_eff=0.6,
             memory_eff=0.85, smem="dynamic", launch=mma_launch, render=cp_async_pipeline_src,
             bugs={"off_by_one": {"mask": ">="}}),
        # compute_eff as flash_prefill_cuda's wgmma rung against its cp.async one (0.37 / 0.68 of 0.6), fitted as
        # the cp.async rung until the fit measures it; the H100's times (_flash_wgmma.WARPGROUP_ROWS) within 0.97-1.14
        # of the model's. No wrong_init: a phantom key of score 0 hides behind P >= 512 prefix keys (the H100 matched
        # it at B=2 H=16 C=512 P=1536, 3 renders of 3), as the module's other rungs leave it out
        Rung("wgmma_warpgroup", "sm_90a: one or two warpgroups (64 chunk rows each), S = Q K^T and O += P V on wgmma "
             "(swizzled smem descriptors, P as the register operand, V read transposed), STAGES-deep cp.async K/V ring",
             (*WARPGROUP_ROWS, Param("BLOCK_N", (64, 128), 64), Param("stages", (2, 3), 2)),
             needs=frozenset({"wgmma", "inline_ptx", "cp_async"}), path="fp16", compute_eff=0.33, memory_eff=0.85,
             smem="dynamic", launch=wgmma_launch, render=wgmma_src, fit_as="cp_async_pipeline",
             bugs={"off_by_one": {"mask": ">="}}),
        *ws_rung(ws_src, wgmma_launch, 0.33, {"off_by_one": {"mask": ">="}}, "cp_async_pipeline", memory_eff=0.85),
    )

    def assemble(self, body, variant, params, task) -> str:
        defs = (f"#define NUM_HEADS {task['H']}\n#define GROUP {task['H'] // task['KVH']}\n#define HEAD_DIM {task['D']}\n"
                f"#define SM_SCALE {task['D'] ** -0.5!r}f\n#define SCALE_LOG2 {task['D'] ** -0.5 * LOG2E!r}f   // D^-0.5 log2(e)\n")
        return prelude(task, TMA_INCLUDES if "tma" in variant.needs else ()) + defs + body
