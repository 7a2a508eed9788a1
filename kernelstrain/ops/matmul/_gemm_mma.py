"""mma.sync GEMM mainloop (register-staged static smem or a cp.async ring) and its host wrapper,
shared by the CUDA matmul modules; operands K-major (see _gemm_ptx.py)."""
from __future__ import annotations

from ._gemm_ptx import KINDS, PTX_MMA, mma_fn


def mma_kernel(op: str, kind: str, p: dict, *, args: str, epilogue: str, pipelined: bool, dequant: bool = False,
               promote: tuple | None = None, block_scale: tuple | None = None, prologue: str = "",
               kt_end: str = "KT", barrier: bool = True, fresh: bool = True, split_k: bool = False,
               reg_dequant: bool = False, bias: str = "256.f") -> str:
    """mma.sync GEMM: register-staged static smem (pipelined=False) or a multi-stage cp.async ring.

    dequant: A and B arrive as e4m3 bytes and are widened to bf16 on the way into shared memory.
    promote: (row_scale, col_scale) C expressions of row, col, kb; partial sums of each 128-wide
    K block are scaled into the fp32 accumulator (DeepGEMM-style promotion).
    block_scale: the same expressions for kind "mxf8" (BK = 128): the tensor core applies the
    scales itself, so there is no partial accumulator and no promotion step.
    split_k: blockIdx.z takes an equal share of the K tiles (K a multiple of BK); the epilogue
    writes that split's partial sums wherever `epilogue` puts them.
    reg_dequant (kind "f16"): A and B stay e4m3 bytes through the cp.async ring and shared memory
    (half the bytes of a widened tile); each lane widens its own fragment pairs to fp16 in
    registers (Marlin-style bit moves, then x `bias` restores the exponent bias) before the
    m16n8k16 mma.
    """
    k = KINDS[kind]
    assert not reg_dequant or (kind == "f16" and pipelined), "register dequant: fp16 mma behind a cp.async ring"
    assert (kind == "mxf8") == (block_scale is not None), "block_scale goes with the mxf8 kind"
    scales = promote or block_scale
    sf_args = ", sfa, sfb" if block_scale else ""
    sb, gb = (1, 1) if reg_dequant else (k.elt, 1 if dequant else k.elt)
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
        {'__syncthreads();            // ... and everyone else: slot (kt-1) % STAGES is free again' if barrier else ''}
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
        {'__syncthreads();   // tile visible to every warp' if barrier else ''}
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
        zero = "\n                part[mi][ni][e] = 0;" if fresh else ""
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
{PTX_MMA}{mma_fn(kind)}{e4m3_widen(bias) if reg_dequant else ""}
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

{warp_mma_dequant(sf_params, sf_elems) if reg_dequant else warp_mma_ldmatrix(sf_params, sf_elems)}
extern "C" __global__ void __launch_bounds__(THREADS) {op}_kernel({args}) {{
{smem}    const uint8_t* Ab = reinterpret_cast<const uint8_t*>(A);
    const uint8_t* Bb = reinterpret_cast<const uint8_t*>(B);
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp / WN, wn = warp % WN;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    {split_range(k.elt) if split_k else f"const int KT = (K + BK - 1) / BK{', KB = (K + 127) / 128' if scales else ''};"}{prologue}
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



def warp_mma_ldmatrix(sf_params: str, sf_elems: str) -> str:
    """warp_mma of operands stored in the mma's own type: ldmatrix.x4 fragments."""
    return f"""// One warp's WTM x WTN share of a BK slice: ldmatrix.x4 fragments, then MI x NI tensor-core mmas.
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
"""


def warp_mma_dequant(sf_params: str, sf_elems: str) -> str:
    """warp_mma of e4m3 bytes in shared memory feeding fp16 mma.m16n8k16: each lane reads the byte
    pairs of its own fragment slots (A: rows g, g + 8 x K 2t, 2t + 8; B: column g x the same K)
    and widens them in registers; rows are BK + 16 bytes apart, so the 8 rows of a read hit
    distinct banks."""
    return f"""// One warp's WTM x WTN share of a BK slice: e4m3 byte pairs widened to fp16 fragments, MI x NI mmas.
__device__ __forceinline__ void warp_mma(acc_t (&acc)[MI][NI][4], const uint8_t* As, const uint8_t* Bs,{sf_params} int wm, int wn, int lane) {{
    const int g = lane >> 2, t2 = (lane & 3) * 2;
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {{   // one m16n8k16 step = 16 bytes of K
        uint32_t a[MI][4], b[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {{
            const uint8_t* r = As + (wm * WTM + mi * 16 + g) * ROW_BYTES + ks * 16 + t2;
            a[mi][0] = e4m3x2_to_f16x2(*reinterpret_cast<const uint16_t*>(r));
            a[mi][1] = e4m3x2_to_f16x2(*reinterpret_cast<const uint16_t*>(r + 8 * ROW_BYTES));
            a[mi][2] = e4m3x2_to_f16x2(*reinterpret_cast<const uint16_t*>(r + 8));
            a[mi][3] = e4m3x2_to_f16x2(*reinterpret_cast<const uint16_t*>(r + 8 * ROW_BYTES + 8));
        }}
#pragma unroll
        for (int ni = 0; ni < NI; ++ni) {{
            const uint8_t* c = Bs + (wn * WTN + ni * 8 + g) * ROW_BYTES + ks * 16 + t2;
            b[ni][0] = e4m3x2_to_f16x2(*reinterpret_cast<const uint16_t*>(c));
            b[ni][1] = e4m3x2_to_f16x2(*reinterpret_cast<const uint16_t*>(c + 8));
        }}
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma_tile(acc[mi][ni], a[mi], b[ni]{sf_elems});
    }}
}}
"""


def e4m3_widen(bias: str) -> str:
    """e4m3x2_to_f16x2: two e4m3 bytes -> two fp16, exact. fp16's exponent bias is e4m3's + 8, so
    the sign moves to bit 15 and exponent|mantissa to bits 13..7, and one multiply by 2^8 (`bias`)
    restores the value; e4m3 subnormals land on fp16 subnormals and scale the same way."""
    return f"""
__device__ __forceinline__ uint32_t e4m3x2_to_f16x2(uint32_t pair) {{
    const uint32_t x = __byte_perm(pair, 0u, 0x4140);    // byte 0 -> bits 0..7, byte 1 -> bits 16..23
    const uint32_t h = ((x & 0x00800080u) << 8) | ((x & 0x007F007Fu) << 7);
    const __half2 v = __hmul2(*reinterpret_cast<const __half2*>(&h), __float2half2_rn({bias}));
    return *reinterpret_cast<const uint32_t*>(&v);
}}
"""


def split_range(elt: int) -> str:
    """K range of split blockIdx.z: KT tiles from tile KT0 on; A and B start at that K."""
    return f"""// split-K: this CTA owns K tiles [KT0, KT0 + KT) of its output tile
    const int KT_ALL = K / BK, KT_PER = (KT_ALL + gridDim.z - 1) / gridDim.z, KT0 = blockIdx.z * KT_PER;
    const int KT = max(0, min(KT_ALL - KT0, KT_PER));
    Ab += (size_t)KT0 * BK * {elt};
    Bb += (size_t)KT0 * BK * {elt};"""


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


def mma_host(op: str, proto: str, call: str, p: dict) -> str:
    """Host wrapper of mma_kernel: one CTA per BM x BN tile; the cp.async ring opts into dynamic smem."""
    smem = "0"
    setup = ""
    if "stages" in p:
        smem = "smem"
        setup = ("    const int smem = STAGES * STAGE_BYTES;   // past 48 KB only with the opt-in below\n"
                 f"    cudaFuncSetAttribute({op}_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);\n")
    return f"""
{proto} {{
{setup}    const dim3 grid((M + BM - 1) / BM, (N + BN - 1) / BN);
    {op}_kernel<<<grid, THREADS, {smem}, stream>>>({call});
}}
"""


def one_launch_host(entry, task, kernel: str, grid: str, block: str) -> str:
    """Host function of a single-kernel rung: the entry's prototype on one line, one launch."""
    return f"""
{entry.prototype(task)} {{
    {kernel}<<<{grid}, {block}, 0, stream>>>({entry.call_args()});
}}
"""
