"""Causal attention prefill in CUDA, from materialised scores to a FlashAttention-2 kernel.

Ladder: three kernels through a global fp32 score buffer -> one fused kernel with smem tiles
and a two-pass softmax (scores recomputed) -> single-pass online softmax -> FA2-style
mma.sync tensor cores (ldmatrix, P kept in registers) -> cp.async multi-stage K/V pipeline ->
Hopper wgmma (FlashAttention-3's core: S and O on warpgroup MMAs, P as the register operand) ->
FA3's warp specialization (a TMA producer warpgroup, mbarrier ring, wgmma consumer warpgroups).
The tensor-core rungs' renders and launch models live in _flash_mma, _flash_wgmma and _flash_ws.
"""
from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude, shfl_xor_macro
from ._attn_check import cuda_check
from ._flash_mma import SYNC, STAGE_SYNC, cp_async_pipeline_src, host, mma_launch, mma_sync_src
from ._flash_wgmma import WARPGROUP_ROWS, wgmma_launch, wgmma_src
from ._flash_ws import TMA_INCLUDES, flash_ws_src, ws_rung
from .flash_prefill_spec import ENTRY, FlashPrefillSpec, causal_work, query_tiles

FP32_TILES = (Param("BLOCK_M", (16, 32, 64), 32), Param("BLOCK_N", (32, 64), 32), Param("threads", (128, 256), 128))
MMA_SYNC = frozenset({"mma", "ldmatrix", "inline_ptx"})
RESCALE = """#pragma unroll
        for (int i = 0; i < DPT; ++i) acc[i] *= alpha;
"""
WRONG_INIT = {"m0": "0.f", "l0": "1.f"}   # (m, l) start at (0, 1): a phantom key of score 0 and value 0


# -- naive_three_pass ----------------------------------------------------------------------
def naive_three_pass_launch(p, task):
    b, h, s, d, elt, t = task["B"], task["H"], task["S"], task["D"], DTYPE_BYTES[task.dtype], p["tile"]
    heads = max(1, (1 << 30) // (s * s * 4))
    # fp32 scores: written, read and rewritten by the softmax, read (lower half) by PV
    return Launch(grid=b * h * cdiv(s, t) ** 2, threads=t * t, regs=32, bytes_per_access=4,
                  traffic=1 + 14 * s * s / (4 * s * d * elt), launches=3 * cdiv(b * h, heads))


def naive_three_pass_src(p, task, scale=" * scale", causal="<="):
    return f"""#define TILE {p['tile']}
#define SOFTMAX_THREADS {p['softmax_threads']}

// 1) one thread per score, dot product straight from global memory; future keys are -inf.
extern "C" __global__ void attn_scores_kernel(const scalar_t* __restrict__ q, const scalar_t* __restrict__ k,
                                              float* __restrict__ scores, int S, float scale) {{
    const int j = blockIdx.x * TILE + threadIdx.x, i = blockIdx.y * TILE + threadIdx.y;
    const size_t head = blockIdx.z;
    if (i >= S || j >= S) return;
    float s = -INFINITY;
    if (j {causal} i) {{
        const scalar_t* qi = q + (head * S + i) * HEAD_DIM;
        const scalar_t* kj = k + (head * S + j) * HEAD_DIM;
        float dot = 0.f;
        for (int d = 0; d < HEAD_DIM; ++d) dot += to_float(qi[d]) * to_float(kj[d]);
        s = dot{scale};
    }}
    scores[(head * S + i) * S + j] = s;
}}

__device__ __forceinline__ float block_reduce(float v, float* red, bool is_max) {{
    const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
    v = is_max ? warp_max(v) : warp_sum(v);
    __syncthreads();                        // red[] may still be read by the previous reduction
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < SOFTMAX_THREADS / WARP_SIZE ? red[lane] : (is_max ? -INFINITY : 0.f);
    return is_max ? warp_max(v) : warp_sum(v);
}}

// 2) one block per score row: max, exp and sum, normalise in place.
extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS) attn_softmax_kernel(float* scores, int S) {{
    __shared__ float red[32];
    float* row = scores + (size_t)blockIdx.x * S;
    float mx = -INFINITY, sum = 0.f;
    for (int j = threadIdx.x; j < S; j += SOFTMAX_THREADS) mx = fmaxf(mx, row[j]);
    mx = block_reduce(mx, red, true);
    for (int j = threadIdx.x; j < S; j += SOFTMAX_THREADS) {{ row[j] = __expf(row[j] - mx); sum += row[j]; }}
    const float inv = 1.f / block_reduce(sum, red, false);
    for (int j = threadIdx.x; j < S; j += SOFTMAX_THREADS) row[j] *= inv;
}}

// 3) O = P V: one thread per (query, d), walking the keys up to the diagonal.
extern "C" __global__ void flash_prefill_kernel(const float* __restrict__ probs, const scalar_t* __restrict__ v,
                                                scalar_t* __restrict__ o, int S) {{
    const int i = blockIdx.x, d = threadIdx.x;
    const size_t head = blockIdx.y;
    const float* p = probs + (head * S + i) * S;
    float acc = 0.f;
    for (int j = 0; j <= i; ++j) acc += p[j] * to_float(v[(head * S + j) * HEAD_DIM + d]);
    o[(head * S + i) * HEAD_DIM + d] = from_float(acc);
}}
""" + host("""    const size_t per_head = (size_t)S * S;
    const size_t fit = ((size_t)1 << 30) / (per_head * sizeof(float));    // heads whose scores fit in 1 GB
    const int chunk = fit < 1 ? 1 : fit < (size_t)(B * H) ? (int)fit : B * H;
    float* scores;
    cudaMallocAsync((void**)&scores, (size_t)chunk * per_head * sizeof(float), stream);
    for (int h0 = 0; h0 < B * H; h0 += chunk) {
        const int n = B * H - h0 < chunk ? B * H - h0 : chunk;
        const size_t off = (size_t)h0 * S * HEAD_DIM;
        attn_scores_kernel<<<dim3((S + TILE - 1) / TILE, (S + TILE - 1) / TILE, n), dim3(TILE, TILE), 0, stream>>>(
            q + off, k + off, scores, S, scale);
        attn_softmax_kernel<<<n * S, SOFTMAX_THREADS, 0, stream>>>(scores, S);
        flash_prefill_kernel<<<dim3(S, n), HEAD_DIM, 0, stream>>>(scores, v + off, o + off, S);
    }
    cudaFreeAsync(scores, stream);
""")



# -- smem_tiled, online_softmax: fp32 CUDA-core tiles ----------------------------------------
def fp32_launch(passes: float):
    """smem_tiled (passes 2/3: QK^T computed twice) and online_softmax (1)."""
    return lambda p, task: _fp32_launch(p, task, passes)


def _fp32_launch(p, task, passes):
    s, d, elt, bm, bn, t = task["S"], task["D"], DTYPE_BYTES[task.dtype], p["BLOCK_M"], p["BLOCK_N"], p["threads"]
    tiles, balance, reread = query_tiles(task, bm)
    tpr = t // bm
    npt, dpt = max(1, bn // tpr), d // tpr
    smem = (bm + 2 * bn) * (d + 2) * elt + bm * (bn + 1) * 4
    return Launch(grid=tiles, threads=t, smem_bytes=smem, regs=min(255, 40 + npt + dpt),
                  bytes_per_access=4, traffic=reread, tile_quant=causal_work(s, bm, bn),
                  compute_scale=passes * balance * npt / (npt + 1), lane_util=min(1.0, tpr * npt / bn))


def fp32_common(p, m0="-INFINITY", l0="0.f") -> str:
    return f"""#define BLOCK_M {p['BLOCK_M']}
#define BLOCK_N {p['BLOCK_N']}
#define THREADS {p['threads']}
constexpr int TPR = THREADS / BLOCK_M;       // threads per query row, adjacent lanes of one warp
constexpr int NPT = BLOCK_N / TPR;           // scores per thread per tile: each q element reused NPT times
constexpr int DPT = HEAD_DIM / TPR;          // output dims per thread (d = c0 + i * TPR)
constexpr int LD = HEAD_DIM + 2;             // padded smem rows: successive rows start in different banks
static_assert(TPR >= 1 && TPR <= 32 && NPT >= 1, "tile shape");

__device__ __forceinline__ float row_max(float v) {{
    for (int o = TPR / 2; o > 0; o >>= 1) v = fmaxf(v, SHFL_XOR(v, o));
    return v;
}}
__device__ __forceinline__ float row_sum(float v) {{
    for (int o = TPR / 2; o > 0; o >>= 1) v += SHFL_XOR(v, o);
    return v;
}}
// rows x HEAD_DIM elements -> padded smem, 4 bytes per thread per step (coalesced along the row)
__device__ __forceinline__ void load_rows(scalar_t* dst, const scalar_t* src, int rows) {{
    for (int i = threadIdx.x; i < rows * HEAD_DIM / 2; i += THREADS) {{
        const int r = i / (HEAD_DIM / 2), c = i % (HEAD_DIM / 2) * 2;
        *reinterpret_cast<uint32_t*>(dst + r * LD + c) = *reinterpret_cast<const uint32_t*>(src + (size_t)r * HEAD_DIM + c);
    }}
}}
// s[n] = scale * q_r . k_(c0 + n * TPR), keys past the query masked to -inf
__device__ __forceinline__ void tile_scores(float* s, const scalar_t* Qs, const scalar_t* Ks, int r, int c0,
                                            int row, int n0, float scale) {{
#pragma unroll
    for (int n = 0; n < NPT; ++n) s[n] = 0.f;
    for (int d = 0; d < HEAD_DIM; ++d) {{
        const float qd = to_float(Qs[r * LD + d]);
#pragma unroll
        for (int n = 0; n < NPT; ++n) s[n] += qd * to_float(Ks[(c0 + n * TPR) * LD + d]);
    }}
#pragma unroll
    for (int n = 0; n < NPT; ++n) s[n] = n0 + c0 + n * TPR > row ? -INFINITY : s[n] * scale;
}}

extern "C" __global__ void __launch_bounds__(THREADS)
flash_prefill_kernel(const scalar_t* __restrict__ q, const scalar_t* __restrict__ k, const scalar_t* __restrict__ v,
                     scalar_t* __restrict__ o, int S, float scale) {{
    __shared__ __align__(16) scalar_t Qs[BLOCK_M * LD], Ks[BLOCK_N * LD], Vs[BLOCK_N * LD];
    __shared__ float Ps[BLOCK_M][BLOCK_N + 1];
    const int m0 = (gridDim.y - 1 - blockIdx.y) * BLOCK_M;     // heaviest (longest) query tiles first
    const size_t base = (size_t)blockIdx.x * S * HEAD_DIM;
    const int r = threadIdx.x / TPR, c0 = threadIdx.x % TPR, row = m0 + r;
    load_rows(Qs, q + base + (size_t)m0 * HEAD_DIM, BLOCK_M);
    float acc[DPT], s[NPT], m = {m0}, l = {l0};
#pragma unroll
    for (int i = 0; i < DPT; ++i) acc[i] = 0.f;
"""

PV = """#pragma unroll 4
        for (int j = 0; j < BLOCK_N; ++j) {
            const float pj = Ps[r][j];
#pragma unroll
            for (int i = 0; i < DPT; ++i) acc[i] += pj * to_float(Vs[j * LD + c0 + i * TPR]);
        }
    }
"""
FP32_HOST = """    flash_prefill_kernel<<<dim3(B * H, S / BLOCK_M), THREADS, 0, stream>>>(q, k, v, o, S, scale);
"""


def smem_tiled_src(p, task, sync=SYNC, m0="-INFINITY", l0="0.f"):
    return fp32_common(p, m0, l0) + f"""\
    // pass 1: row max and normaliser only (the sum is rescaled whenever the max grows)
    for (int n0 = 0; n0 < m0 + BLOCK_M; n0 += BLOCK_N) {{
        __syncthreads();                       // previous tile consumed; Q visible on the first trip
        load_rows(Ks, k + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
{sync}        tile_scores(s, Qs, Ks, r, c0, row, n0, scale);
        float mx = m, rs = 0.f;
#pragma unroll
        for (int n = 0; n < NPT; ++n) mx = fmaxf(mx, s[n]);
        mx = row_max(mx);
#pragma unroll
        for (int n = 0; n < NPT; ++n) rs += __expf(s[n] - mx);
        l = l * __expf(m - mx) + row_sum(rs);
        m = mx;
    }}
    const float inv_l = 1.f / l;
    // pass 2: K is read again and QK^T recomputed to form normalised probabilities for V
    for (int n0 = 0; n0 < m0 + BLOCK_M; n0 += BLOCK_N) {{
        __syncthreads();
        load_rows(Ks, k + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
        load_rows(Vs, v + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
{sync}        tile_scores(s, Qs, Ks, r, c0, row, n0, scale);
#pragma unroll
        for (int n = 0; n < NPT; ++n) Ps[r][c0 + n * TPR] = __expf(s[n] - m) * inv_l;
        __syncthreads();
{PV}#pragma unroll
    for (int i = 0; i < DPT; ++i) o[base + (size_t)row * HEAD_DIM + c0 + i * TPR] = from_float(acc[i]);
}}
""" + host(FP32_HOST)


def online_softmax_src(p, task, rescale=RESCALE, m0="-INFINITY", l0="0.f"):
    return fp32_common(p, m0, l0) + f"""\
    for (int n0 = 0; n0 < m0 + BLOCK_M; n0 += BLOCK_N) {{
        __syncthreads();                       // previous tile consumed; Q visible on the first trip
        load_rows(Ks, k + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
        load_rows(Vs, v + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
        __syncthreads();
        tile_scores(s, Qs, Ks, r, c0, row, n0, scale);
        float mx = m, rs = 0.f;
#pragma unroll
        for (int n = 0; n < NPT; ++n) mx = fmaxf(mx, s[n]);
        mx = row_max(mx);
        const float alpha = __expf(m - mx);    // rescales what was accumulated under the old max
#pragma unroll
        for (int n = 0; n < NPT; ++n) {{ Ps[r][c0 + n * TPR] = __expf(s[n] - mx); rs += Ps[r][c0 + n * TPR]; }}
        l = l * alpha + row_sum(rs);
        m = mx;
{rescale}        __syncthreads();
{PV}#pragma unroll
    for (int i = 0; i < DPT; ++i) o[base + (size_t)row * HEAD_DIM + c0 + i * TPR] = from_float(acc[i] / l);
}}
""" + host(FP32_HOST)



class FlashPrefillCuda(FlashPrefillSpec):
    impl = "cuda"
    check_adapter = staticmethod(cuda_check(ENTRY, ("q", "k", "v")))
    variants = (
        Rung("naive_three_pass", "scores kernel -> global fp32 S, row-softmax kernel, PV kernel",
             (Param("tile", (8, 16, 32), 16), Param("softmax_threads", (128, 256, 512), 256)),
             compute_eff=0.03, memory_eff=0.8, launch=naive_three_pass_launch, render=naive_three_pass_src,
             bugs={"missing_scale": {"scale": ""}, "off_by_one": {"causal": "<"}}),
        Rung("smem_tiled", "one kernel, Q/K/V tiles in static smem; pass 1 max/sum, pass 2 recomputes S",
             FP32_TILES, compute_eff=0.3, smem="static", launch=fp32_launch(2 / 3), render=smem_tiled_src,
             bugs={"missing_barrier": {"sync": ""}, "wrong_init": WRONG_INIT}),
        Rung("online_softmax", "single pass: running max/sum per row, accumulator rescaled per K/V tile",
             FP32_TILES, compute_eff=0.3, smem="static", launch=fp32_launch(1.0), render=online_softmax_src,
             bugs={"missing_scale": {"rescale": ""}, "wrong_init": WRONG_INIT}),
        Rung("mma_sync", "FA2 on tensor cores: mma.m16n8k16 via ldmatrix, P re-packed in registers",
             (Param("BLOCK_M", (64, 128), 64), Param("BLOCK_N", (32, 64, 128), 64)), needs=MMA_SYNC, path="fp16",
             compute_eff=0.45, smem="static", launch=mma_launch, render=mma_sync_src,
             bugs={"missing_barrier": {"sync": ""}, "off_by_one": {"mask": ">="}},
             # the missing barrier races the next key tile's load: at B 1, H 32, S 512 (256 CTAs) with 128-key tiles
             # (4 a row block) an H100 passed it 1 of 3 runs (labels j1); more tiles or CTAs failed every time
             bug_tasks=(("missing_barrier", lambda t, p: t["S"] // p["BLOCK_N"] > 4
                         or t["B"] * t["H"] * t["S"] // p["BLOCK_M"] > 256),)),
        Rung("cp_async_pipeline", "K/V tiles streamed by a cp.async ring of STAGES buffers (dynamic smem)",
             (Param("BLOCK_M", (32, 64, 128), 128), Param("BLOCK_N", (32, 64, 128), 64), Param("stages", (2, 3, 4), 2)),
             needs=MMA_SYNC | {"cp_async"}, path="fp16", compute_eff=0.68, smem="dynamic", launch=mma_launch,
             # not missing_barrier: without the stage barrier the race needs another warp's cp.async to land
             # late, and on an H200 (BM64 BN128 stages 2, B1 H32 S512 D128) it matched 3 times in 3; a
             # diagonal mask off by one (each query hides its own key) is wrong at every shape
             render=cp_async_pipeline_src, bugs={"off_by_one": {"mask": ">="}, "wrong_init": WRONG_INIT}),
        # calibrated as the cp.async rung (the same double-buffered FA loop) until measured; the gain is
        # wgmma's rate, which mma.sync reaches only in part on Hopper (gpus.mma_sync_rate)
        # compute_eff 0.37: on an H100 (2026-12-05, gpu_check, B=1 H=32 S=2048 D=128 bf16, default params) this rung
        # ran 0.1364 ms against cp_async_pipeline's 0.1578 ms; at 0.62 the model said 0.081 ms (sim/measured 0.59)
        Rung("wgmma_warpgroup", "sm_90a: one or two warpgroups (64 query rows each), S = Q K^T and O += P V on wgmma "
             "(swizzled smem descriptors, P as the register operand, V read transposed), STAGES-deep cp.async K/V ring",
             (*WARPGROUP_ROWS, Param("BLOCK_N", (64, 128), 64), Param("stages", (2, 3), 2)),
             needs=frozenset({"wgmma", "inline_ptx", "cp_async"}),
             path="fp16",
             compute_eff=0.37, smem="dynamic", launch=wgmma_launch, render=wgmma_src, fit_as="cp_async_pipeline",
             bugs={"off_by_one": {"mask": ">="}, "wrong_init": WRONG_INIT}),
        # power 1.5: this module's fit (wgmma_warpgroup's compute_scale, threads exponents) damps a launch gain in log
        *ws_rung(flash_ws_src, wgmma_launch, 0.37, {"off_by_one": {"mask": ">="}, "wrong_init": WRONG_INIT},
                 "wgmma_warpgroup", power=1.5),
    )

    def assemble(self, body, variant, params, task) -> str:
        return prelude(task, TMA_INCLUDES if "tma" in variant.needs else ()) + shfl_xor_macro(task) + f"#define HEAD_DIM {task['D']}\n" + body
