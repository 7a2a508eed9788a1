"""Tensor-core GEMM mainloops shared by the CUDA matmul modules (not an op module itself).

Every operand is K-major (A [M, K], B [N, K], the nn.Linear layout), so one byte layout serves
every type: an mma.sync consumes a 16x32-byte A and an 8x32-byte B fragment (m16n8k16 for
16-bit, m16n8k32 for 8-bit operands) and a wgmma k-step reads 32 bytes of a 128-byte swizzled
row. Kernels differ only in the instruction, the accumulator type and the module's epilogue.

>>> KINDS["e4m3"].elt, KINDS["bf16"].acc
(1, 'float')
"""
from __future__ import annotations

from dataclasses import dataclass

from ..base import Launch, Task, cdiv


@dataclass(frozen=True)
class Kind:
    elt: int          # bytes per operand element
    acc: str          # accumulator C type
    mma: str          # mma.sync instruction
    wgmma: str        # wgmma suffix after m64nN
    wgmma_tail: str   # scale-d predicate and immediates
    tma_type: str     # CUtensorMapDataType


KINDS = {
    "f16": Kind(2, "float", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", "k16.f32.f16.f16", "p, 1, 1, 0, 0",
                "CU_TENSOR_MAP_DATA_TYPE_FLOAT16"),
    "bf16": Kind(2, "float", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", "k16.f32.bf16.bf16",
                 "p, 1, 1, 0, 0", "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16"),
    "e4m3": Kind(1, "float", "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32", "k32.f32.e4m3.e4m3", "p, 1, 1",
                 "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
    "s8": Kind(1, "int", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "k32.s32.s8.s8", "p",
               "CU_TENSOR_MAP_DATA_TYPE_UINT8"),
    # sm_120a block-scaled MMA (the FP4-generation tensor-core instruction, here on e4m3 operands):
    # each row of A and column of B carries one ue8m0 exponent per 32 of K; mma.sync only (no wgmma)
    "mxf8": Kind(1, "float", "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X"
                 ".f32.e4m3.e4m3.f32.ue8m0", "", "", ""),
}

# Software e4m3 -> float/bf16: runs on every target (no cvt.e4m3x2 before sm_89).
E4M3_SOFT = """
// e4m3: s.eeee.mmm, bias 7; subnormals are m * 2^-9 (NaN encodings are not expected in inputs)
__device__ __forceinline__ float e4m3_to_float(uint32_t v) {
    const uint32_t e = (v >> 3) & 0xFu, m = v & 0x7u;
    const float mag = e ? __uint_as_float(((e + 120u) << 23) | (m << 20)) : (float)m * 0.001953125f;
    return (v & 0x80u) ? -mag : mag;
}
// 8 e4m3 bytes -> 8 bf16 (exact: 3 mantissa bits fit bf16's 7)
__device__ __forceinline__ uint4 dequant8(uint2 raw) {
    uint32_t out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const uint32_t w = i < 2 ? raw.x : raw.y, sh = (i & 1) * 16;
        __nv_bfloat162 p = __floats2bfloat162_rn(e4m3_to_float((w >> sh) & 0xFFu), e4m3_to_float((w >> (sh + 8)) & 0xFFu));
        out[i] = *reinterpret_cast<uint32_t*>(&p);
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
}
"""

SMEM_U32 = """
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return (uint32_t)__cvta_generic_to_shared(p); }
"""

# The PTX wrappers below are also rendered by modules outside the mma_kernel path (gemm_int4_cuda,
# moe/grouped_gemm_cuda): each piece starts and ends with a newline so they concatenate cleanly.
LDMATRIX_X4 = """
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_u32(p)));
}
"""

CP_ASYNC_COMMIT = """__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\\n" ::); }
"""

PTX_MMA = SMEM_U32 + LDMATRIX_X4 + """
// 16 bytes global -> shared without a register round trip; src_bytes = 0 zero-fills
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n" :: "r"(smem_u32(dst)), "l"(src), "r"(src_bytes));
}
""" + CP_ASYNC_COMMIT + """template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\\n" :: "n"(N)); }
"""


def cp_async16(note: str) -> str:
    """cp_async16(smem, gmem, valid) (16 bytes; valid = false zero-fills), cp_async_commit() and
    cp_async_wait<PENDING>(). `note` is the comment inside cp_async16: what the zero-fill covers."""
    return """
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
    // """ + note + """
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\\n"
                 :: "r"(smem_u32(smem)), "l"(gmem), "r"(valid ? 16 : 0));
}
""" + CP_ASYNC_COMMIT + """template <int PENDING> __device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\\n" :: "n"(PENDING));
}
"""


def mma_16816(kind: str, b_regs: bool = False) -> str:
    """mma_16816(d, a, b): one m16n8k16 mma.sync (kind "f16" or "bf16") into 4 fp32 accumulators;
    B is a uint32_t[2], or with b_regs two scalar registers b0, b1."""
    b_arg, b_in = (("uint32_t b0, uint32_t b1", '"r"(b0), "r"(b1)') if b_regs else
                   ("const uint32_t (&b)[2]", '"r"(b[0]), "r"(b[1])'))
    return f"""
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], {b_arg}) {{
    asm volatile("{KINDS[kind].mma} "
                 "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), {b_in});
}}
"""


def mma_fn(kind: str) -> str:
    k = KINDS[kind]
    c = "r" if k.acc == "int" else "f"
    if kind == "mxf8":
        return f"""
// ue8m0 of a power-of-two fp32 scale: its biased exponent byte
__device__ __forceinline__ uint32_t ue8m0(float s) {{ return (__float_as_uint(s) >> 23) & 0xFFu; }}
// Block-scaled mma (scale_vec::1X, byte 0, thread-id 0): the scale of A row r is read from lane
// 4 * (r % 8) + r / 8 and the scale of B column n from lane 4 * n (the main loop loads them so).
__device__ __forceinline__ void mma_tile(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                         uint32_t sfa, uint32_t sfb) {{
    asm volatile("{k.mma} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}}, "
                 "%10, {{0, 0}}, %11, {{0, 0}};\\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sfa), "r"(sfb));
}}
"""
    return f"""
__device__ __forceinline__ void mma_tile({k.acc} (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {{
    asm volatile("{k.mma} {{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}};\\n"
                 : "+{c}"(d[0]), "+{c}"(d[1]), "+{c}"(d[2]), "+{c}"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}}
"""


def mma_kernel(op: str, kind: str, p: dict, *, args: str, epilogue: str, pipelined: bool, dequant: bool = False,
               promote: tuple | None = None, block_scale: tuple | None = None, prologue: str = "",
               bug: str | None = None) -> str:
    """mma.sync GEMM: register-staged static smem (pipelined=False) or a multi-stage cp.async ring.

    dequant: A and B arrive as e4m3 bytes and are widened to bf16 on the way into shared memory.
    promote: (row_scale, col_scale) C expressions of row, col, kb; partial sums of each 128-wide
    K block are scaled into the fp32 accumulator (DeepGEMM-style promotion).
    block_scale: the same expressions for kind "mxf8" (BK = 128): the tensor core applies the
    scales itself, so there is no partial accumulator and no promotion step.
    """
    k = KINDS[kind]
    assert (kind == "mxf8") == (block_scale is not None), "block_scale goes with the mxf8 kind"
    scales = promote or block_scale
    sf_args = ", sfa, sfb" if block_scale else ""
    sb, gb = k.elt, (1 if dequant else k.elt)
    wn = p["warps"] // 2
    if pipelined:
        load = "cp_async_16(dst, ok ? gsrc : src, ok ? 16 : 0);"
    elif dequant:
        load = ("uint4 v = make_uint4(0u, 0u, 0u, 0u);\n        if (ok) v = dequant8(*reinterpret_cast<const uint2*>(gsrc));\n"
                "        *reinterpret_cast<uint4*>(dst) = v;")
    else:
        load = ("uint4 v = make_uint4(0u, 0u, 0u, 0u);\n        if (ok) v = *reinterpret_cast<const uint4*>(gsrc);\n"
                "        *reinterpret_cast<uint4*>(dst) = v;")
    target = "part" if promote else "acc"
    kt_end = "KT - 1" if bug == "off_by_one" else "KT"
    if pipelined:
        wait = "cp_async_wait<STAGES - 2>();"
        smem = ("    extern __shared__ __align__(16) uint8_t smem[];   // STAGES x (A tile, B tile)\n"
                "#define A_AT(s) (smem + (s) * STAGE_BYTES)\n#define B_AT(s) (smem + (s) * STAGE_BYTES + BM * ROW_BYTES)\n")
        body = f"""    // prologue: STAGES - 1 tiles in flight before the first mma
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {{
        if (s < KT) {{ load_rows<BM>(A_AT(s), Ab, m0, M, s * BK, K); load_rows<BN>(B_AT(s), Bb, n0, N, s * BK, K); }}
        cp_async_commit();
    }}
    for (int kt = 0; kt < {kt_end}; ++kt) {{
        {wait}   // tile kt has landed (this thread's copies)
        {'' if bug == 'missing_barrier' else '__syncthreads();            // ... and everyone else: slot (kt-1) % STAGES is free again'}
        const int nt = kt + STAGES - 1;
        if (nt < KT) {{ load_rows<BM>(A_AT(nt % STAGES), Ab, m0, M, nt * BK, K); load_rows<BN>(B_AT(nt % STAGES), Bb, n0, N, nt * BK, K); }}
        cp_async_commit();
{block_scale_regs(block_scale) if block_scale else ""}        warp_mma({target}, A_AT(kt % STAGES), B_AT(kt % STAGES){sf_args}, wm, wn, lane);"""
    else:
        smem = ("    __shared__ __align__(16) uint8_t As[BM * ROW_BYTES];\n"
                "    __shared__ __align__(16) uint8_t Bs[BN * ROW_BYTES];\n")
        body = f"""    for (int kt = 0; kt < {kt_end}; ++kt) {{
        load_rows<BM>(As, Ab, m0, M, kt * BK, K);
        load_rows<BN>(Bs, Bb, n0, N, kt * BK, K);
        {'' if bug == 'missing_barrier' else '__syncthreads();   // tile visible to every warp'}
{block_scale_regs(block_scale) if block_scale else ""}        warp_mma({target}, As, Bs{sf_args}, wm, wn, lane);
        __syncthreads();   // every warp done reading before the next tile overwrites it"""
    sf_params = "\n                                         const uint32_t (&sfa)[MI], const uint32_t (&sfb)[NI]," \
        if block_scale else ""
    sf_elems = ", sfa[mi], sfb[ni]" if block_scale else ""
    frag_row = "m0 + wm * WTM + mi * 16 + (lane >> 2) + h * 8"
    frag_col = "n0 + wn * WTN + ni * 8 + (lane & 3) * 2"
    loops = ("#pragma unroll\n            for (int mi = 0; mi < MI; ++mi)\n#pragma unroll\n            for (int ni = 0; ni < NI; ++ni)\n"
             "#pragma unroll\n            for (int h = 0; h < 2; ++h) {")
    if promote:
        zero = "" if bug == "wrong_init" else "\n                part[mi][ni][e] = 0;"
        body += f"""
        if ((kt + 1) % PROMOTE_EVERY == 0 || kt == KT - 1) {{   // end of a 128-wide K block: promote
            const int kb = kt / PROMOTE_EVERY;
            float rs[MI][2], cs[NI];   // this thread's row and column scales (cols 2t, 2t+1 share a block)
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int h = 0; h < 2; ++h) {{ const int row = {frag_row}; rs[mi][h] = {promote[0]}; }}
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {{ const int col = {frag_col}; cs[ni] = {promote[1]}; }}
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni)
#pragma unroll
                for (int e = 0; e < 4; ++e) {{
                acc[mi][ni][e] += part[mi][ni][e] * (rs[mi][e >> 1] * cs[ni]);{zero}
            }}
        }}"""
    body += "\n    }"
    return f"""
#define BM {p['BM']}
#define BN {p['BN']}
#define BK {p['BK']}                   // K elements per tile
#define THREADS ({p['warps']} * 32)
#define WN {wn}                        // warps along N (2 along M)
#define WTM (BM / 2)                // warp tile
#define WTN (BN / WN)
#define MI (WTM / 16)               // m16 fragments per warp
#define NI (WTN / 8)                // n8 fragments per warp
#define TILE_BYTES (BK * {sb})          // shared bytes of one tile row
#define ROW_BYTES (TILE_BYTES + 16) // 16-byte pad: the 8 rows one ldmatrix reads sit in distinct banks
#define CHUNKS (TILE_BYTES / 16)    // 16-byte chunks per tile row
#define CHUNK_K (16 / {sb})             // K elements per chunk
#define STAGES {p.get('stages', 1)}
#define STAGE_BYTES ((BM + BN) * ROW_BYTES)
#define PROMOTE_EVERY (128 / BK)    // tiles per 128-wide scale block
typedef {k.acc} acc_t;
{PTX_MMA}{mma_fn(kind)}
// Copy ROWS x BK of a K-major operand into shared memory; chunks past the last row or K read as zero.
template <int ROWS>
__device__ __forceinline__ void load_rows(uint8_t* tile, const uint8_t* src, int row0, int rows, int k0, int K) {{
#pragma unroll
    for (int i = 0; i < ROWS * CHUNKS / THREADS; ++i) {{
        const int c = threadIdx.x + i * THREADS, r = c / CHUNKS, kc = c % CHUNKS;
        const int row = row0 + r, kk = k0 + kc * CHUNK_K;
        const bool ok = row < rows && kk < K;
        const uint8_t* gsrc = src + ((size_t)row * K + kk) * {gb};
        uint8_t* dst = tile + r * ROW_BYTES + kc * 16;
        {load}
    }}
}}

// One warp's WTM x WTN share of a BK slice: ldmatrix.x4 fragments, then MI x NI tensor-core mmas.
__device__ __forceinline__ void warp_mma(acc_t (&acc)[MI][NI][4], const uint8_t* As, const uint8_t* Bs,{sf_params} int wm, int wn, int lane) {{
#pragma unroll
    for (int ks = 0; ks < TILE_BYTES / 32; ++ks) {{   // one mma k-step = 32 bytes of K
        uint32_t a[MI][4], b[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)   // x4: rows 0-15 x bytes 0-15, then bytes 16-31 -> a0..a3
            ldmatrix_x4(a[mi], As + (wm * WTM + mi * 16 + (lane & 15)) * ROW_BYTES + ks * 32 + (lane >> 4) * 16);
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {{   // x4: two n8 fragments, each b0 (bytes 0-15) and b1 (16-31)
            uint32_t r[4];
            ldmatrix_x4(r, Bs + (wn * WTN + nj * 16 + ((lane >> 4) << 3) + (lane & 7)) * ROW_BYTES + ks * 32 + ((lane >> 3) & 1) * 16);
            b[2 * nj][0] = r[0]; b[2 * nj][1] = r[1]; b[2 * nj + 1][0] = r[2]; b[2 * nj + 1][1] = r[3];
        }}
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma_tile(acc[mi][ni], a[mi], b[ni]{sf_elems});
    }}
}}

extern "C" __global__ void __launch_bounds__(THREADS) {op}_kernel({args}) {{
{smem}    const uint8_t* Ab = reinterpret_cast<const uint8_t*>(A);
    const uint8_t* Bb = reinterpret_cast<const uint8_t*>(B);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp / WN, wn = warp % WN;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int KT = (K + BK - 1) / BK{', KB = (K + 127) / 128' if scales else ''};{prologue}
    {'float' if promote else 'acc_t'} acc[MI][NI][4] = {{}};{chr(10) + '    acc_t part[MI][NI][4] = {};   // partial sums of the current 128-wide K block' if promote else ''}
{body}
    // epilogue: c0,c1 at (row g, cols 2t, 2t+1); c2,c3 eight rows below
    {loops.replace('            ', '    ')}
        const int row = {frag_row}, col = {frag_col};
        if (row < M && col < N) {{
            const auto v0 = acc[mi][ni][2 * h], v1 = acc[mi][ni][2 * h + 1];
            {epilogue}
        }}
    }}
}}
"""



def block_scale_regs(scales: tuple) -> str:
    """This lane's ue8m0 scale registers for 128-wide K block kt (BK = 128, so kb = kt): with
    thread-id 0 the mma reads A row r's scale from lane 4 * (r % 8) + r / 8 and B column n's from
    lane 4 * n; every lane computes its own row and column, and the mma ignores the rest."""
    return f"""        uint32_t sfa[MI], sfb[NI];
        {{
            const int kb = kt;
#pragma unroll
            for (int mi = 0; mi < MI; ++mi) {{
                const int row = m0 + wm * WTM + mi * 16 + (lane >> 2) + 8 * (lane & 1);
                sfa[mi] = ue8m0({scales[0]});
            }}
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {{
                const int col = n0 + wn * WTN + ni * 8 + (lane >> 2);
                sfb[ni] = ue8m0({scales[1]});
            }}
        }}
"""


def mma_host(op: str, sig: str, call: str, p: dict) -> str:
    """Host wrapper of mma_kernel: one CTA per BM x BN tile; the cp.async ring opts into dynamic smem."""
    smem = "0"
    setup = ""
    if "stages" in p:
        smem = "smem"
        setup = ("    const int smem = STAGES * STAGE_BYTES;   // past 48 KB only with the opt-in below\n"
                 f"    cudaFuncSetAttribute({op}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);\n")
    return f"""
void {op}({sig}) {{
{setup}    const dim3 grid((M + BM - 1) / BM, (N + BN - 1) / BN);
    {op}_kernel<<<grid, THREADS, {smem}, stream>>>({call});
}}
"""


HOPPER_PTX = """
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\\n" :: "r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\\n" :: "r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\\n" :: "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
    uint32_t done = 0;
    while (!done)
        asm volatile("{\\n.reg .pred p;\\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\nselp.u32 %0, 1, 0, p;\\n}\\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
}
// TMA: one box of a 2-D tensor map into shared memory; completion is counted in bytes on `bar`
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\\n"
                 :: "r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\\n" :: "n"(N) : "memory"); }
// K-major operand in TMA's 128-byte swizzle: 8-row core groups 1024 B apart (SBO), LBO unused
__device__ __forceinline__ uint64_t sw128_desc(const void* tile) {
    return (uint64_t)((smem_u32(tile) & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
"""


def wgmma_fn(kind: str, bn: int) -> str:
    """One m64nBNk(16|32) wgmma from shared-memory descriptors into BN/2 accumulator registers."""
    k = KINDS[kind]
    n, c = bn // 2, ("r" if k.acc == "int" else "f")
    regs = ", ".join(f"%{i}" for i in range(n))
    outs = ",\n                   ".join(", ".join(f'"+{c}"(d[{i}])' for i in range(j, min(n, j + 8))) for j in range(0, n, 8))
    return f"""
__device__ __forceinline__ void wgmma_tile({k.acc} (&d)[{n}], uint64_t da, uint64_t db, int scale_d) {{
    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{n + 2}, 0;\\n"
                 "wgmma.mma_async.sync.aligned.m64n{bn}{k.wgmma} {{{regs}}}, %{n}, %{n + 1}, {k.wgmma_tail};\\n}}\\n"
                 : {outs}
                 : "l"(da), "l"(db), "r"(scale_d));
}}
// keep the compiler from touching accumulators while an async wgmma owns them
__device__ __forceinline__ void fence_acc({k.acc} (&d)[{n}]) {{
#pragma unroll
    for (int i = 0; i < {n}; ++i) asm volatile("" : "+{c}"(d[i]) :: "memory");
}}
"""


def wgmma_consumers(p: dict) -> int:
    """Consumer warpgroups of the wgmma kernel: BM 64 -> one, else two (each BM/2 rows)."""
    return 1 if p["BM"] == 64 else 2


def wgmma_kernel(op: str, kind: str, p: dict, *, args: str, epilogue: str, promote: tuple | None = None,
                 persistent: bool = False, prologue: str = "", bug: str | None = None) -> str:
    """Warp-specialized Hopper GEMM: a producer warp streams A/B boxes with TMA into a STAGES-deep
    ring (full/empty mbarriers); consumer warpgroups run wgmma from the swizzled tiles.

    promote: (row_scale, col_scale) as in mma_kernel, evaluated per 128-wide K block (BK = 128 here);
    col_scale is taken at n0, so BN must divide 128.
    """
    k = KINDS[kind]
    consumers = wgmma_consumers(p)
    mb = p["BM"] // consumers // 64
    tile_loop = ("for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {   // persistent: static round robin"
                 if persistent else "{\n        const int tile = blockIdx.x;")
    kb = "\n        const int KB = (K + 127) / 128;   // 128-wide scale blocks along K" if promote else ""
    tiles = "\n    const int tiles = tiles_m * ((N + BN - 1) / BN);" if persistent else ""
    tile_loop_c = tile_loop.replace("\n        ", "\n            ")
    wait_full = "" if bug == "missing_barrier" else "mbar_wait(&full[s], (it / STAGES) & 1);   // TMA bytes landed"
    kt_end = "KT - 1" if bug == "off_by_one" else "KT"
    regs = ("        asm volatile(\"setmaxnreg.dec.sync.aligned.u32 40;\\n\");    // producer keeps few registers\n",
            "        asm volatile(\"setmaxnreg.inc.sync.aligned.u32 232;\\n\");   // ... consumers take them\n"
            ) if consumers == 2 else ("", "")
    acc_t = "float" if promote else k.acc
    if promote:
        scale_d = "1" if bug == "wrong_init" else "ks > 0"
        mainloop = f"""                wgmma_fence();
#pragma unroll
                for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                    for (int ks = 0; ks < 4; ++ks)   // ks == 0 overwrites: a fresh partial per 128-wide K block
                        wgmma_tile(part[mb], sw128_desc(a_tile + mb * 64 * 128) + 2 * ks, db + 2 * ks, {scale_d});
                wgmma_commit();
                float rs[MB][2];   // row scales load while the wgmmas run
#pragma unroll
                for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {{
                        const int row = m0 + c * WG_M + mb * 64 + warp * 16 + (lane >> 2) + h * 8, kb = kt;
                        rs[mb][h] = {promote[0]};
                    }}
                const float cs = [&] {{ const int col = n0, kb = kt; return {promote[1]}; }}();
                wgmma_wait<0>();
#pragma unroll
                for (int mb = 0; mb < MB; ++mb) fence_acc(part[mb]);
                if (lane == 0) mbar_arrive(&empty[s]);   // tiles consumed: TMA may refill while we promote
#pragma unroll
                for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                    for (int i = 0; i < BN / 2; ++i) acc[mb][i] += part[mb][i] * (rs[mb][(i >> 1) & 1] * cs);"""
        tail = ""
        decl = "\n            float part[MB][BN / 2];"
    else:
        mainloop = """                wgmma_fence();
#pragma unroll
                for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                    for (int ks = 0; ks < 4; ++ks)   // 4 k-steps of 32 bytes across the 128-byte row
                        wgmma_tile(acc[mb], sw128_desc(a_tile + mb * 64 * 128) + 2 * ks, db + 2 * ks, 1);
                wgmma_commit();
                wgmma_wait<1>();   // k-tile kt-1 has retired: hand its slot back to the producer
                if (kt > 0 && lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);"""
        tail = """
            wgmma_wait<0>();
            if (lane == 0) mbar_arrive(&empty[(it - 1) % STAGES]);"""
        decl = ""
    return f"""
#define BM {p['BM']}
#define BN {p['BN']}
#define BK {128 // k.elt}                   // K elements per 128-byte swizzled row
#define STAGES {p['stages']}
#define CONSUMERS {consumers}             // consumer warpgroups, WG_M rows each
#define WG_M (BM / CONSUMERS)
#define MB (WG_M / 64)              // m64 wgmma blocks per consumer
#define A_STAGE (BM * 128)
#define STAGE_BYTES ((BM + BN) * 128)
#define THREADS (128 * (CONSUMERS + 1))
{SMEM_U32}{HOPPER_PTX}{wgmma_fn(kind, p['BN'])}
extern "C" __global__ void __launch_bounds__(THREADS, 1)
{op}_kernel(const __grid_constant__ CUtensorMap tmA, const __grid_constant__ CUtensorMap tmB, {args}) {{
    extern __shared__ uint8_t smem_raw[];
    __shared__ __align__(8) uint64_t full[STAGES], empty[STAGES];
    // 128-byte-swizzled TMA boxes need 1024-byte aligned buffers
    uint8_t* smem = smem_raw + ((1024u - (smem_u32(smem_raw) & 1023u)) & 1023u);
    const int wg = threadIdx.x / 128, tid = threadIdx.x % 128;
    const int KT = (K + BK - 1) / BK, tiles_m = (M + BM - 1) / BM;{tiles}
    if (threadIdx.x == 0) {{
        for (int s = 0; s < STAGES; ++s) {{ mbar_init(&full[s], 1); mbar_init(&empty[s], CONSUMERS * 4); }}
        asm volatile("fence.mbarrier_init.release.cluster;\\n" ::: "memory");
    }}
    __syncthreads();
    if (wg == 0) {{   // producer warpgroup: one thread drives the copy engine
{regs[0]}        if (tid != 0) return;
        int it = 0;
        {tile_loop}
            const int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * BN;
            for (int kt = 0; kt < KT; ++kt, ++it) {{
                const int s = it % STAGES;
                if (it >= STAGES) mbar_wait(&empty[s], (it / STAGES - 1) & 1);   // consumers freed the slot
                mbar_expect_tx(&full[s], STAGE_BYTES);
                tma_load_2d(smem + s * STAGE_BYTES, &tmA, kt * BK, m0, &full[s]);
                tma_load_2d(smem + s * STAGE_BYTES + A_STAGE, &tmB, kt * BK, n0, &full[s]);
            }}
        }}
    }} else {{   // consumer warpgroups
{regs[1]}        const int c = wg - 1, warp = tid / 32, lane = tid % 32;{kb}{prologue.replace(chr(10), chr(10) + '    ')}
        int it = 0;
        {tile_loop_c}
            const int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * BN;
            {acc_t} acc[MB][BN / 2] = {{}};{decl}
            for (int kt = 0; kt < {kt_end}; ++kt, ++it) {{
                const int s = it % STAGES;
                {wait_full}
                const uint8_t* a_tile = smem + s * STAGE_BYTES + c * WG_M * 128;
                const uint64_t db = sw128_desc(smem + s * STAGE_BYTES + A_STAGE);
{mainloop}
            }}{tail}
#pragma unroll
            for (int mb = 0; mb < MB; ++mb) fence_acc(acc[mb]);
            // epilogue: warp w owns rows 16w..16w+15 of each m64 block; d[4j..4j+3] as in mma.sync's C
#pragma unroll
            for (int mb = 0; mb < MB; ++mb)
#pragma unroll
                for (int j = 0; j < BN / 8; ++j)
#pragma unroll
                    for (int h = 0; h < 2; ++h) {{
                        const int row = m0 + c * WG_M + mb * 64 + warp * 16 + (lane >> 2) + h * 8;
                        const int col = n0 + j * 8 + (lane & 3) * 2;
                        if (row < M && col < N) {{
                            const auto v0 = acc[mb][4 * j + 2 * h], v1 = acc[mb][4 * j + 2 * h + 1];
                            {epilogue}
                        }}
                    }}
        }}
    }}
}}
"""


TMA_INCLUDES = ("#include <cuda.h>", "#include <cudaTypedefs.h>")


def wgmma_host(op: str, kind: str, sig: str, call: str, persistent: bool = False) -> str:
    """Host wrapper of wgmma_kernel: tensor maps for A and B, smem opt-in, grid of tiles (or of SMs)."""
    k = KINDS[kind]
    grid = ("    int dev = 0, sms = 0, per_sm = 0;\n    cudaGetDevice(&dev);\n"
            "    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);\n"
            f"    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, {op}_kernel, THREADS, smem);\n"
            "    // persistent: exactly the CTAs that fit at once, each walking tiles grid-stride\n"
            "    const int grid = tiles < sms * per_sm ? tiles : sms * per_sm;\n"
            if persistent else "    const int grid = tiles;\n")
    return f"""
// The driver's tensor-map encoder, reached through the runtime (no -lcuda needed).
static PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {{
    static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
    if (!fn) {{
        cudaDriverEntryPointQueryResult q;
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", reinterpret_cast<void**>(&fn), 12000, cudaEnableDefault, &q);
    }}
    return fn;
}}

// rows x K, K-major: boxes of box_rows x 128 bytes, swizzled the way wgmma's descriptors expect
static CUtensorMap kmajor_map(const void* base, int rows, int K, int box_rows) {{
    CUtensorMap map;
    const cuuint64_t dims[2] = {{(cuuint64_t)K, (cuuint64_t)rows}}, strides[1] = {{(cuuint64_t)K * {k.elt}}};
    const cuuint32_t box[2] = {{BK, (cuuint32_t)box_rows}}, unit[2] = {{1, 1}};
    tensor_map_encoder()(&map, {k.tma_type}, 2, const_cast<void*>(base), dims, strides, box, unit,
                         CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                         CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return map;
}}

void {op}({sig}) {{
    const CUtensorMap ta = kmajor_map(A, M, K, BM), tb = kmajor_map(B, N, K, BN);
    const int smem = STAGES * STAGE_BYTES + 1024;   // + slack for the 1024-byte alignment
    cudaFuncSetAttribute({op}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
{grid}    {op}_kernel<<<grid, THREADS, smem, stream>>>(ta, tb, {call});
}}
"""


# -- launch model shared by the tensor-core rungs ------------------------------------

def tc_traffic(task: Task, bm: int, bn: int, miss: float, elt: float = 2, out_elt: float = 2) -> float:
    """DRAM bytes / minimum bytes: A is re-read once per N tile and B once per M tile, L2 catching 1 - miss."""
    m, n, k = task["M"], task["N"], task["K"]
    a, b, c = m * k * elt, n * k * elt, m * n * out_elt
    return (a * (1 + (cdiv(n, bn) - 1) * miss) + b * (1 + (cdiv(m, bm) - 1) * miss) + c) / (a + b + c)


def tc_launch(variant, p: dict, task: Task, elt: float, out_elt: float, promote: bool = False,
              smem_elt: float | None = None, persistent: bool = False) -> Launch:
    """Launch model of mma_kernel / wgmma_kernel candidates.

    compute_scale: operand reuse of the warp (warpgroup) tile and of the CTA tile, pipeline depth,
    the BK slice per barrier, mma.sync's lower issue rate on Hopper, and spills past ~200
    accumulator registers a thread. bytes_per_access carries the bytes each thread keeps in flight.
    """
    gpu, bm, bn, tag = task.gpu, p["BM"], p["BN"], variant.tag
    m, n = task["M"], task["N"]
    quant = m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn)
    stages = p.get("stages", 1)
    if tag.startswith("wgmma"):
        consumers = wgmma_consumers(p)
        threads, wtm, wtn = 128 * (consumers + 1), bm // consumers, bn
        acc = wtm * bn // 128 * (2 if promote else 1)
        smem = stages * (bm + bn) * 128 + 1024
        stage_bytes = (bm + bn) * 128
        pipe = {2: 0.8, 3: 0.93}.get(stages, 1.0)
        regs = min(168 if consumers == 2 else 255, acc + 40)
        scale = pipe * min(1.0, (wtm * wtn / (wtm + wtn) / 48) ** 0.3)
    else:
        warps = p["warps"]
        threads, wtm, wtn = warps * 32, bm // 2, bn // (warps // 2)
        acc = wtm * wtn // 32 * (2 if promote else 1)
        stage_bytes = (bm + bn) * (p["BK"] * (smem_elt or elt) + 16)
        smem = stage_bytes * stages
        pipe = {2: 0.82, 3: 0.95}.get(stages, 1.0) if "stages" in p else 1.0
        bk = 1.0 if p["BK"] * (smem_elt or elt) >= 128 else 0.93
        hopper = gpu.mma_sync_scale(variant.path)    # sm_90: mma.sync below wgmma's rate (catalog)
        regs = min(255, acc + wtm // 4 + wtn // 4 + (72 if promote else 40))   # + the promotion's scale arrays
        scale = pipe * bk * hopper * min(1.0, (wtm * wtn / (wtm + wtn) / 32) ** 0.3)
    scale *= min(1.0, (bm * bn / (bm + bn) / 80) ** 0.2)
    if acc > 200:
        scale *= 0.35   # accumulators spill to local memory
    if promote:         # scale loads + FMAs every 128-wide K block; wgmma also drains its queue per block
        scale *= 0.75 if tag.startswith("wgmma") else 0.9
    grid = tiles = cdiv(m, bm) * cdiv(n, bn)
    if persistent:      # host sizes the grid to the resident CTAs; leftover tiles form a ragged last round
        slots = gpu.sms * max(1, min(gpu.smem_per_sm // smem, gpu.max_threads_per_sm // threads,
                                     gpu.regs_per_sm // (threads * regs)))
        grid = min(tiles, slots)
        scale *= tiles / (cdiv(tiles, grid) * grid) * 1.04   # epilogue overlaps the next tile's TMA
    in_flight = max(1, stages - 1) * stage_bytes / threads / 2
    return Launch(grid=grid, threads=threads, smem_bytes=smem, regs=regs,
                  bytes_per_access=max(16, int(in_flight)), traffic=tc_traffic(task, bm, bn, 0.05, elt, out_elt),
                  compute_scale=scale, tile_quant=quant)


def naive_launch(task: Task, bx: int, by: int, regs: int = 30, elt: float = 2, out_elt: float = 2) -> Launch:
    """Thread-per-output kernels: a warp load touches 32/bx rows of A and bx rows of B (both K-major),
    so square-ish warp footprints touch the fewest cache lines."""
    m, n = task["M"], task["N"]
    bx32 = min(bx, 32)
    return Launch(grid=cdiv(m, by) * cdiv(n, bx), threads=bx * by, regs=regs, bytes_per_access=int(elt) or 1,
                  traffic=tc_traffic(task, by, bx, 0.02, elt, out_elt),
                  compute_scale=min(1.0, (12 / (32 // bx32 + bx32)) ** 0.5),
                  tile_quant=m * n / (cdiv(m, by) * by * cdiv(n, bx) * bx))
