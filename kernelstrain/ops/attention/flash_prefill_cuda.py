"""Causal attention prefill in CUDA, from materialised scores to a FlashAttention-2 kernel.

Ladder: three kernels through a global fp32 score buffer -> one fused kernel with smem tiles
and a two-pass softmax (scores recomputed) -> single-pass online softmax -> FA2-style
mma.sync tensor cores (ldmatrix, P kept in registers) -> cp.async multi-stage K/V pipeline.
"""
from ..base import Launch, Param, Task, Variant, DTYPE_BYTES, cdiv, cuda_prelude
from .flash_prefill_spec import LOG2E, FlashPrefillSpec, causal_balance, causal_work

FP32_TILES = (Param("BLOCK_M", (16, 32, 64), 32), Param("BLOCK_N", (32, 64), 32), Param("threads", (128, 256), 128))
MMA_SYNC = frozenset({"mma", "ldmatrix", "inline_ptx"})
HIP_COMPAT = """typedef hipStream_t cudaStream_t;
#define cudaMallocAsync hipMallocAsync
#define cudaFreeAsync hipFreeAsync
#define SHFL_XOR(v, o) __shfl_xor(v, o)
"""


class FlashPrefillCuda(FlashPrefillSpec):
    impl = "cuda"
    variants = (
        Variant("naive_three_pass", "scores kernel -> global fp32 S, row-softmax kernel, PV kernel",
                (Param("tile", (8, 16, 32), 16), Param("softmax_threads", (128, 256, 512), 256)),
                compute_eff=0.03, memory_eff=0.8, bugs=("missing_scale", "off_by_one")),
        Variant("smem_tiled", "one kernel, Q/K/V tiles in static smem; pass 1 max/sum, pass 2 recomputes S",
                FP32_TILES, compute_eff=0.3, smem="static", bugs=("missing_barrier", "wrong_init")),
        Variant("online_softmax", "single pass: running max/sum per row, accumulator rescaled per K/V tile",
                FP32_TILES, compute_eff=0.3, smem="static", bugs=("missing_scale", "wrong_init")),
        Variant("mma_sync", "FA2 on tensor cores: mma.m16n8k16 via ldmatrix, P re-packed in registers",
                (Param("BLOCK_M", (64, 128), 64), Param("BLOCK_N", (32, 64), 64)), needs=MMA_SYNC, path="fp16",
                compute_eff=0.45, smem="static", bugs=("missing_barrier", "off_by_one")),
        Variant("cp_async_pipeline", "K/V tiles streamed by a cp.async ring of STAGES buffers (dynamic smem)",
                (Param("BLOCK_M", (64, 128), 128), Param("BLOCK_N", (32, 64, 128), 64), Param("stages", (2, 3), 2)),
                needs=MMA_SYNC | {"cp_async"}, path="fp16", compute_eff=0.68, smem="dynamic",
                bugs=("missing_barrier", "wrong_init")),
    )

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        b, h, s, d, elt = task["B"], task["H"], task["S"], task["D"], DTYPE_BYTES[task.dtype]
        if variant.tag == "naive_three_pass":
            t = params["tile"]
            heads = max(1, (1 << 30) // (s * s * 4))
            # fp32 scores: written, read and rewritten by the softmax, read (lower half) by PV
            return Launch(grid=b * h * cdiv(s, t) ** 2, threads=t * t, regs=32, bytes_per_access=4,
                          traffic=1 + 14 * s * s / (4 * s * d * elt), launches=3 * cdiv(b * h, heads))
        bm, bn = params["BLOCK_M"], params["BLOCK_N"]
        tiles, num_m = b * h * cdiv(s, bm), cdiv(s, bm)
        balance = causal_balance(tiles, num_m, task.gpu.sms)
        reread = 1 + num_m / 32                          # K/V re-read by every query tile, mostly from L2
        if variant.tag in ("smem_tiled", "online_softmax"):
            t = params["threads"]
            tpr = t // bm
            npt, dpt = max(1, bn // tpr), d // tpr
            smem = (bm + 2 * bn) * (d + 2) * elt + bm * (bn + 1) * 4
            passes = 2 / 3 if variant.tag == "smem_tiled" else 1.0     # QK^T computed twice
            return Launch(grid=tiles, threads=t, smem_bytes=smem, regs=min(255, 40 + npt + dpt),
                          bytes_per_access=4, traffic=reread, tile_quant=causal_work(s, bm, bn),
                          compute_scale=passes * balance * npt / (npt + 1), lane_util=min(1.0, tpr * npt / bn))
        hopper = task.gpu.mma_sync_scale(variant.path)   # mma.sync leaves part of Hopper's tensor rate idle
        threads = bm // 16 * 32
        # small tiles: more softmax and barrier overhead per mma, 4 warps share fewer K/V smem reads
        shape = min(1.0, bn / (bn + 16) * 1.25) * (0.9 if bm == 64 else 1.0)
        if variant.tag == "mma_sync":
            return Launch(grid=tiles, threads=threads, smem_bytes=(bm + 2 * bn) * d * elt,
                          regs=min(255, 40 + d // 2 * 3 // 2 + bn // 2), bytes_per_access=16, traffic=reread,
                          tile_quant=causal_work(s, bm, bn), compute_scale=hopper * balance * shape)
        stages = params["stages"]
        return Launch(grid=tiles, threads=threads, smem_bytes=(bm + stages * 2 * bn) * d * elt,
                      regs=min(255, 85 + d // 2 * 3 // 2 + bn // 2), bytes_per_access=16, traffic=reread,
                      tile_quant=causal_work(s, bm, bn),
                      compute_scale=hopper * balance * shape * (0.9 if stages == 2 else 1.0))

    def signature(self, task: Task) -> str:
        return ("void flash_prefill(const scalar_t* q, const scalar_t* k, const scalar_t* v, scalar_t* o, "
                "int B, int H, int S, float scale, cudaStream_t stream)   // [B, H, S, D], causal")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        compat = HIP_COMPAT if task.is_hip else "#define SHFL_XOR(v, o) __shfl_xor_sync(0xffffffffu, v, o)\n"
        return (cuda_prelude(task) + compat + f"#define HEAD_DIM {task['D']}\n"
                + getattr(self, "_" + variant.tag)(params, task, bug))

    @staticmethod
    def _host(body: str) -> str:
        return f"""
void flash_prefill(const scalar_t* q, const scalar_t* k, const scalar_t* v, scalar_t* o, int B, int H, int S,
                   float scale, cudaStream_t stream) {{   // S must be a multiple of the tile sizes
{body}}}
"""

    def _naive_three_pass(self, p, task, bug):
        scale = "" if bug == "missing_scale" else " * scale"
        return f"""#define TILE {p['tile']}
#define SOFTMAX_THREADS {p['softmax_threads']}

// 1) one thread per score, dot product straight from global memory; future keys are -inf.
extern "C" __global__ void attn_scores_kernel(const scalar_t* __restrict__ q, const scalar_t* __restrict__ k,
                                              float* __restrict__ scores, int S, float scale) {{
    const int j = blockIdx.x * TILE + threadIdx.x, i = blockIdx.y * TILE + threadIdx.y;
    const size_t head = blockIdx.z;
    if (i >= S || j >= S) return;
    float s = -INFINITY;
    if (j {"<" if bug == "off_by_one" else "<="} i) {{
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
""" + self._host("""    const size_t per_head = (size_t)S * S;
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

    @staticmethod
    def _fp32_common(p, wrong_init: bool) -> str:
        # wrong_init starts (m, l) at (0, 1) instead of (-inf, 0): a phantom key of score 0 and value 0
        m0, l0 = ("0.f", "1.f") if wrong_init else ("-INFINITY", "0.f")
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

    _PV = """#pragma unroll 4
        for (int j = 0; j < BLOCK_N; ++j) {
            const float pj = Ps[r][j];
#pragma unroll
            for (int i = 0; i < DPT; ++i) acc[i] += pj * to_float(Vs[j * LD + c0 + i * TPR]);
        }
    }
"""
    _FP32_HOST = """    flash_prefill_kernel<<<dim3(B * H, S / BLOCK_M), THREADS, 0, stream>>>(q, k, v, o, S, scale);
"""

    def _smem_tiled(self, p, task, bug):
        sync = "" if bug == "missing_barrier" else "        __syncthreads();\n"
        return self._fp32_common(p, bug == "wrong_init") + f"""\
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
{self._PV}#pragma unroll
    for (int i = 0; i < DPT; ++i) o[base + (size_t)row * HEAD_DIM + c0 + i * TPR] = from_float(acc[i]);
}}
""" + self._host(self._FP32_HOST)

    def _online_softmax(self, p, task, bug):
        rescale = "" if bug == "missing_scale" else """#pragma unroll
        for (int i = 0; i < DPT; ++i) acc[i] *= alpha;
"""
        return self._fp32_common(p, bug == "wrong_init") + f"""\
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
{self._PV}#pragma unroll
    for (int i = 0; i < DPT; ++i) o[base + (size_t)row * HEAD_DIM + c0 + i * TPR] = from_float(acc[i] / l);
}}
""" + self._host(self._FP32_HOST)

    # -- tensor-core variants ----------------------------------------------------
    def _mma_common(self, p, task, bug, stages: int = 0) -> str:
        ty = "bf16" if task.dtype == "bf16" else "f16"
        pack = "__floats2bfloat162_rn" if task.dtype == "bf16" else "__floats2half2_rn"
        mask = ">=" if bug == "off_by_one" else ">"
        return f"""#define BLOCK_M {p['BLOCK_M']}
#define BLOCK_N {p['BLOCK_N']}
constexpr int THREADS = BLOCK_M / 16 * 32;   // one warp per 16 query rows
constexpr int CHUNKS = HEAD_DIM / 8;         // 16-byte chunks per row
{f"constexpr int STAGES = {stages};           // K/V tiles in flight" if stages else ""}

// XOR swizzle: chunk c of row r lives at chunk c ^ (r % 8), so the 8 rows an ldmatrix reads
// (and the 16-byte stores that fill them) fall in 8 different bank groups.
__device__ __forceinline__ int swz(int r, int c) {{ return r * HEAD_DIM + ((c ^ (r & 7)) << 3); }}
__device__ __forceinline__ unsigned smem_u32(const void* p) {{
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}}
__device__ __forceinline__ void ldsm_x4(unsigned* f, const void* p) {{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {{%0,%1,%2,%3}}, [%4];\\n"
                 : "=r"(f[0]), "=r"(f[1]), "=r"(f[2]), "=r"(f[3]) : "r"(smem_u32(p)));
}}
__device__ __forceinline__ void ldsm_x4_trans(unsigned* f, const void* p) {{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {{%0,%1,%2,%3}}, [%4];\\n"
                 : "=r"(f[0]), "=r"(f[1]), "=r"(f[2]), "=r"(f[3]) : "r"(smem_u32(p)));
}}
// c[16x8] += a[16x16] . b[16x8], fp32 accumulate
__device__ __forceinline__ void mma16816(float* c, const unsigned* a, const unsigned* b) {{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.{ty}.{ty}.f32 {{%0,%1,%2,%3}}, {{%4,%5,%6,%7}}, {{%8,%9}}, "
                 "{{%0,%1,%2,%3}};\\n" : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}}
__device__ __forceinline__ unsigned pack2(float lo, float hi) {{
    auto h = {pack}(lo, hi);
    return *reinterpret_cast<unsigned*>(&h);
}}

// One K/V tile against this warp's 16 query rows: S = Q K^T, online softmax in registers, O += P V.
__device__ __forceinline__ void attend_tile(const scalar_t* Ks, const scalar_t* Vs, unsigned (*qf)[4],
        float (*acc)[4], float* m_i, float* l_i, int n0, int row0, float scale_log2) {{
    const int lane = threadIdx.x % 32;
    float s[BLOCK_N / 8][4] = {{}};
#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
#pragma unroll
        for (int nn = 0; nn < BLOCK_N / 16; ++nn) {{
            unsigned kf[4];    // B fragments of key tiles 2nn and 2nn+1 (K rows are B's columns)
            ldsm_x4(kf, Ks + swz(nn * 16 + lane / 16 * 8 + lane % 8, kk * 2 + lane / 8 % 2));
            mma16816(s[2 * nn], qf[kk], kf);
            mma16816(s[2 * nn + 1], qf[kk], kf + 2);
        }}
    // thread holds rows row0 + lane/4 (e < 2) and +8 (e >= 2), keys n0 + 8 nt + 2 (lane % 4) + e % 2
    const bool diagonal = n0 + BLOCK_N - 1 > row0;   // only tiles crossing the warp's diagonal need a mask
    float mx[2] = {{m_i[0], m_i[1]}}, rs[2] = {{0.f, 0.f}};
#pragma unroll
    for (int nt = 0; nt < BLOCK_N / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {{
            if (diagonal && n0 + nt * 8 + lane % 4 * 2 + e % 2 {mask} row0 + lane / 4 + e / 2 * 8) s[nt][e] = -INFINITY;
            mx[e / 2] = fmaxf(mx[e / 2], s[nt][e] * scale_log2);
        }}
#pragma unroll
    for (int h = 0; h < 2; ++h) {{            // the 4 lanes of a quad share a row
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        const float alpha = exp2f(m_i[h] - mx[h]);
        l_i[h] *= alpha;                      // l stays a per-lane partial; quads are summed at the end
#pragma unroll
        for (int dt = 0; dt < HEAD_DIM / 8; ++dt) {{ acc[dt][2 * h] *= alpha; acc[dt][2 * h + 1] *= alpha; }}
        m_i[h] = mx[h];
    }}
#pragma unroll
    for (int nt = 0; nt < BLOCK_N / 8; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {{ s[nt][e] = exp2f(s[nt][e] * scale_log2 - mx[e / 2]); rs[e / 2] += s[nt][e]; }}
    l_i[0] += rs[0];
    l_i[1] += rs[1];
#pragma unroll
    for (int kk = 0; kk < BLOCK_N / 16; ++kk) {{
        // the S accumulators of key tiles 2kk, 2kk+1 are exactly the A fragment of P[:, 16kk:16kk+16]
        const unsigned pa[4] = {{pack2(s[2 * kk][0], s[2 * kk][1]), pack2(s[2 * kk][2], s[2 * kk][3]),
                                pack2(s[2 * kk + 1][0], s[2 * kk + 1][1]), pack2(s[2 * kk + 1][2], s[2 * kk + 1][3])}};
#pragma unroll
        for (int dd = 0; dd < HEAD_DIM / 16; ++dd) {{
            unsigned vf[4];    // V rows are keys: .trans turns them into B fragments of d tiles 2dd, 2dd+1
            ldsm_x4_trans(vf, Vs + swz(kk * 16 + lane / 8 % 2 * 8 + lane % 8, dd * 2 + lane / 16));
            mma16816(acc[2 * dd], pa, vf);
            mma16816(acc[2 * dd + 1], pa, vf + 2);
        }}
    }}
}}

extern "C" __global__ void __launch_bounds__(THREADS)
flash_prefill_kernel(const scalar_t* __restrict__ q, const scalar_t* __restrict__ k, const scalar_t* __restrict__ v,
                     scalar_t* __restrict__ o, int S, float scale_log2) {{
"""

    _MMA_PROLOGUE = """    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int m0 = (gridDim.y - 1 - blockIdx.y) * BLOCK_M;    // heaviest query tiles first
    const int row0 = m0 + warp * 16;
    const size_t base = (size_t)blockIdx.x * S * HEAD_DIM;
    unsigned qf[HEAD_DIM / 16][4];                           // Q stays in registers as A fragments
    float acc[HEAD_DIM / 8][4] = {}, m_i[2] = {M0, M0}, l_i[2] = {L0, L0};
"""
    _MMA_EPILOGUE = """#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l_i[h] += __shfl_xor_sync(0xffffffffu, l_i[h], 1);
        l_i[h] += __shfl_xor_sync(0xffffffffu, l_i[h], 2);
        scalar_t* out = o + base + (size_t)(row0 + lane / 4 + h * 8) * HEAD_DIM + lane % 4 * 2;
#pragma unroll
        for (int dt = 0; dt < HEAD_DIM / 8; ++dt)
            *reinterpret_cast<unsigned*>(out + dt * 8) = pack2(acc[dt][2 * h] / l_i[h], acc[dt][2 * h + 1] / l_i[h]);
    }
}
"""
    _LOAD_Q = """#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) ldsm_x4(qf[kk], Qs + swz(warp * 16 + lane % 16, kk * 2 + lane / 16));
"""

    def _mma_sync(self, p, task, bug):
        sync = "" if bug == "missing_barrier" else "        __syncthreads();\n"
        return self._mma_common(p, task, bug) + """\
    __shared__ __align__(128) scalar_t Qs[BLOCK_M * HEAD_DIM], Ks[BLOCK_N * HEAD_DIM], Vs[BLOCK_N * HEAD_DIM];
""" + self._MMA_PROLOGUE.replace("M0", "-INFINITY").replace("L0", "0.f") + """\
    auto load = [&](scalar_t* dst, const scalar_t* src, int rows) {   // 16 B per thread per step, swizzled
        for (int i = threadIdx.x; i < rows * CHUNKS; i += THREADS)
            *reinterpret_cast<uint4*>(dst + swz(i / CHUNKS, i % CHUNKS)) =
                *reinterpret_cast<const uint4*>(src + (size_t)i * 8);
    };
    load(Qs, q + base + (size_t)m0 * HEAD_DIM, BLOCK_M);
    __syncthreads();
""" + self._LOAD_Q + f"""\
    for (int n0 = 0; n0 < m0 + BLOCK_M; n0 += BLOCK_N) {{
{sync.replace(";", ";                        // every warp is done with the previous tile")}\
        load(Ks, k + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
        load(Vs, v + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
{sync}        attend_tile(Ks, Vs, qf, acc, m_i, l_i, n0, row0, scale_log2);
    }}
""" + self._MMA_EPILOGUE + self._host(
            "    flash_prefill_kernel<<<dim3(B * H, S / BLOCK_M), THREADS, 0, stream>>>(q, k, v, o, S,\n"
            f"                                                                    scale * {LOG2E}f);\n")

    def _cp_async_pipeline(self, p, task, bug):
        sync = "" if bug == "missing_barrier" else "        __syncthreads();                        " \
                                                    "// ... and everyone's; stage (j-1) % STAGES is free\n"
        return self._mma_common(p, task, bug, p["stages"]) + f"""\
    // dynamic smem: Q tile, then STAGES x (K tile, V tile), all swizzled
    extern __shared__ __align__(128) unsigned char smem_raw[];
    scalar_t* Qs = reinterpret_cast<scalar_t*>(smem_raw);
    scalar_t* KVs = Qs + BLOCK_M * HEAD_DIM;
""" + self._MMA_PROLOGUE.replace("M0", "0.f" if bug == "wrong_init" else "-INFINITY").replace(
            "L0", "1.f" if bug == "wrong_init" else "0.f") + """\
    auto load_async = [&](scalar_t* dst, const scalar_t* src, int rows) {   // global -> smem, no registers
        for (int i = threadIdx.x; i < rows * CHUNKS; i += THREADS)
            asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n"
                         :: "r"(smem_u32(dst + swz(i / CHUNKS, i % CHUNKS))), "l"(src + (size_t)i * 8));
    };
    auto issue = [&](int j) {                  // K and V tile j into stage j % STAGES, one commit group
        scalar_t* st = KVs + (j % STAGES) * 2 * BLOCK_N * HEAD_DIM;
        load_async(st, k + base + (size_t)j * BLOCK_N * HEAD_DIM, BLOCK_N);
        load_async(st + BLOCK_N * HEAD_DIM, v + base + (size_t)j * BLOCK_N * HEAD_DIM, BLOCK_N);
    };
    const int ntiles = (m0 + BLOCK_M) / BLOCK_N;
    load_async(Qs, q + base + (size_t)m0 * HEAD_DIM, BLOCK_M);
#pragma unroll
    for (int j = 0; j < STAGES - 1; ++j) {     // prologue: Q rides in group 0, then STAGES - 1 tiles
        if (j < ntiles) issue(j);
        asm volatile("cp.async.commit_group;\\n" ::);
    }
    for (int j = 0; j < ntiles; ++j) {
        asm volatile("cp.async.wait_group %0;\\n" :: "n"(STAGES - 2));   // this thread's copies of tile j landed
""" + sync + """\
        if (j == 0)                             // Q arrived with group 0: into registers once
            for (int kk = 0; kk < HEAD_DIM / 16; ++kk)
                ldsm_x4(qf[kk], Qs + swz(warp * 16 + lane % 16, kk * 2 + lane / 16));
        if (j + STAGES - 1 < ntiles) issue(j + STAGES - 1);
        asm volatile("cp.async.commit_group;\\n" ::);                   // possibly empty: uniform counting
        const scalar_t* st = KVs + (j % STAGES) * 2 * BLOCK_N * HEAD_DIM;
        attend_tile(st, st + BLOCK_N * HEAD_DIM, qf, acc, m_i, l_i, j * BLOCK_N, row0, scale_log2);
    }
""" + self._MMA_EPILOGUE + self._host(f"""\
    const int smem = (BLOCK_M + STAGES * 2 * BLOCK_N) * HEAD_DIM * sizeof(scalar_t);
    cudaFuncSetAttribute(flash_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    flash_prefill_kernel<<<dim3(B * H, S / BLOCK_M), THREADS, smem, stream>>>(q, k, v, o, S, scale * {LOG2E}f);
""")
