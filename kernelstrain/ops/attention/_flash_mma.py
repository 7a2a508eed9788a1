"""The tensor-core rungs of flash_prefill_cuda (not an op module itself): the FA2 device helpers
(swizzle, ldmatrix, mma.m16n8k16, the per-tile online softmax), the mma.sync kernel and the
cp.async multi-stage pipeline, with the launch model they share and the literal host function.
"""
from ..base import Launch, DTYPE_BYTES
from .flash_prefill_spec import LOG2E, causal_work, query_tiles

SYNC = "        __syncthreads();\n"
STAGE_SYNC = "        __syncthreads();                        // ... and everyone's; stage (j-1) % STAGES is free\n"


def host(body: str) -> str:
    return f"""
void flash_prefill(const scalar_t* q, const scalar_t* k, const scalar_t* v, scalar_t* o, int B, int H, int S,
                   float scale, cudaStream_t stream) {{   // S must be a multiple of the tile sizes
{body}}}
"""


def warp_share(bm: int) -> float:
    """Efficiency of a block of bm / 16 warps: each K/V tile's smem fill, barrier and swizzled
    ldmatrix reads are paid once a block, so 2 warps (BLOCK_M 32) pay a 64-row block's share twice."""
    return {32: 0.8, 64: 0.9}.get(bm, 1.0)


def mma_launch(p, task):
    """mma_sync and cp_async_pipeline: one warp per 16 query rows, Q in registers, K/V tiles in smem
    (one buffer, or `stages` of them behind cp.async)."""
    s, d, elt, bm, bn = task["S"], task["D"], DTYPE_BYTES[task.dtype], p["BLOCK_M"], p["BLOCK_N"]
    tiles, balance, reread = query_tiles(task, bm)
    hopper = task.gpu.mma_sync_scale("fp16")    # mma.sync leaves part of Hopper's tensor rate idle
    threads = bm // 16 * 32
    # small tiles: more softmax and barrier overhead per mma, 4 warps share fewer K/V smem reads
    shape = min(1.0, bn / (bn + 16) * 1.25) * warp_share(bm)
    if "stages" not in p:
        return Launch(grid=tiles, threads=threads, smem_bytes=(bm + 2 * bn) * d * elt,
                      regs=min(255, 40 + d // 2 * 3 // 2 + bn // 2), bytes_per_access=16, traffic=reread,
                      tile_quant=causal_work(s, bm, bn), compute_scale=hopper * balance * shape)
    stages = p["stages"]
    return Launch(grid=tiles, threads=threads, smem_bytes=(bm + stages * 2 * bn) * d * elt,
                  regs=min(255, 85 + d // 2 * 3 // 2 + bn // 2), bytes_per_access=16, traffic=reread,
                  tile_quant=causal_work(s, bm, bn),
                  compute_scale=hopper * balance * shape * (0.9 if stages == 2 else 1.0))


def mma_common(p, task, mask=">", stages: int = 0) -> str:
    ty = "bf16" if task.dtype == "bf16" else "f16"
    pack = "__floats2bfloat162_rn" if task.dtype == "bf16" else "__floats2half2_rn"
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

MMA_PROLOGUE = """    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int m0 = (gridDim.y - 1 - blockIdx.y) * BLOCK_M;    // heaviest query tiles first
    const int row0 = m0 + warp * 16;
    const size_t base = (size_t)blockIdx.x * S * HEAD_DIM;
    unsigned qf[HEAD_DIM / 16][4];                           // Q stays in registers as A fragments
    float acc[HEAD_DIM / 8][4] = {}, m_i[2] = {M0, M0}, l_i[2] = {L0, L0};
"""
MMA_EPILOGUE = """#pragma unroll
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
LOAD_Q = """#pragma unroll
    for (int kk = 0; kk < HEAD_DIM / 16; ++kk) ldsm_x4(qf[kk], Qs + swz(warp * 16 + lane % 16, kk * 2 + lane / 16));
"""


def mma_sync_src(p, task, sync=SYNC, mask=">"):
    return mma_common(p, task, mask) + """\
    __shared__ __align__(128) scalar_t Qs[BLOCK_M * HEAD_DIM], Ks[BLOCK_N * HEAD_DIM], Vs[BLOCK_N * HEAD_DIM];
""" + MMA_PROLOGUE.replace("M0", "-INFINITY").replace("L0", "0.f") + """\
    auto load = [&](scalar_t* dst, const scalar_t* src, int rows) {   // 16 B per thread per step, swizzled
        for (int i = threadIdx.x; i < rows * CHUNKS; i += THREADS)
            *reinterpret_cast<uint4*>(dst + swz(i / CHUNKS, i % CHUNKS)) =
                *reinterpret_cast<const uint4*>(src + (size_t)i * 8);
    };
    load(Qs, q + base + (size_t)m0 * HEAD_DIM, BLOCK_M);
    __syncthreads();
""" + LOAD_Q + f"""\
    for (int n0 = 0; n0 < m0 + BLOCK_M; n0 += BLOCK_N) {{
{sync.replace(";", ";                        // every warp is done with the previous tile")}\
        load(Ks, k + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
        load(Vs, v + base + (size_t)n0 * HEAD_DIM, BLOCK_N);
{sync}        attend_tile(Ks, Vs, qf, acc, m_i, l_i, n0, row0, scale_log2);
    }}
""" + MMA_EPILOGUE + host(
            "    flash_prefill_kernel<<<dim3(B * H, S / BLOCK_M), THREADS, 0, stream>>>(q, k, v, o, S,\n"
            f"                                                                    scale * {LOG2E}f);\n")


def cp_async_pipeline_src(p, task, sync=STAGE_SYNC, m0="-INFINITY", l0="0.f", mask=">"):
    return mma_common(p, task, mask, stages=p["stages"]) + f"""\
    // dynamic smem: Q tile, then STAGES x (K tile, V tile), all swizzled
    extern __shared__ __align__(128) unsigned char smem_raw[];
    scalar_t* Qs = reinterpret_cast<scalar_t*>(smem_raw);
    scalar_t* KVs = Qs + BLOCK_M * HEAD_DIM;
""" + MMA_PROLOGUE.replace("M0", m0).replace("L0", l0) + """\
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
    // ceil: with BLOCK_N > BLOCK_M the last tile crosses the diagonal (attend_tile masks its future keys)
    const int ntiles = (m0 + BLOCK_M + BLOCK_N - 1) / BLOCK_N;
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
""" + MMA_EPILOGUE + host(f"""\
    const int smem = (BLOCK_M + STAGES * 2 * BLOCK_N) * HEAD_DIM * sizeof(scalar_t);
    cudaFuncSetAttribute(flash_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    flash_prefill_kernel<<<dim3(B * H, S / BLOCK_M), THREADS, smem, stream>>>(q, k, v, o, S, scale * {LOG2E}f);
""")
