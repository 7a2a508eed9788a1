"""The tensor-core implicit-GEMM kernel of conv2d_nhwc_cuda (not an op module): im2col tiles of
the NHWC input gathered in 16-byte chunks (zero-filled in the padding), weight tiles straight
from the KRSC layout, ldmatrix fragments and m16n8k16 mma.sync; register-staged static shared
memory, or a STAGES-deep cp.async ring. The PTX wrappers come from matmul/_gemm_ptx.py.
"""
from ..base import Param
from ..matmul._gemm_ptx import PTX_MMA, mma_fn

# channels of one filter tap a GEMM-K slice takes (C is a multiple of 64 in every shape of the menu)
KSLICE = Param("BK", (16, 32, 64), 32)

ARGS = """const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight, scalar_t* __restrict__ y,
                   int N, int H, int W, int C, int K, int R, int S, int U, int PD, int P, int Q"""

# One BK-wide slice kt of the GEMM's K = R * S * C: filter tap (r, s) and channels c0 .. c0 + BK.
TILE_LOADS = """
// A tile: BM output pixels x BK channels of filter tap (r, s); 16-byte chunks, zeros in the padding.
__device__ __forceinline__ void load_a(scalar_t* As, const scalar_t* x, int m0, int kt, int H, int W, int C,
                                       int S, int U, int PD, int P, int Q, int M) {
    const int taps_c = C / BK, rs = kt / taps_c, c0 = (kt % taps_c) * BK, r = rs / S, s = rs % S;
#pragma unroll
    for (int i = threadIdx.x; i < BM * (BK / 8); i += THREADS) {
        const int m = i / (BK / 8), ch = i % (BK / 8), pix = m0 + m;
        const int q = pix % Q, p = (pix / Q) % P, n = pix / (P * Q);
        const int ih = p * U - PD + r, iw = q * U - PD + s;
        const bool ok = pix < M && ih >= 0 && ih < H && iw >= 0 && iw < W;
        const scalar_t* src = x + (((size_t)n * H + ih) * W + iw) * C + c0 + ch * 8;
        {LOAD}
    }
}
// B tile: BN filters x the same BK slice: rows of the KRSC weight are the GEMM's K-major operand.
__device__ __forceinline__ void load_b(scalar_t* Bs, const scalar_t* weight, int n0, int kt, int K, int RSC) {
#pragma unroll
    for (int i = threadIdx.x; i < BN * (BK / 8); i += THREADS) {
        const int nn = i / (BK / 8), ch = i % (BK / 8);
        const bool ok = n0 + nn < K;
        const scalar_t* src = weight + (size_t)(n0 + nn) * RSC + kt * BK + ch * 8;
        scalar_t* dst_ = Bs + nn * LDS + ch * 8;
        {LOAD_B}
    }
}
"""
REG_LOAD = ("uint4 v = make_uint4(0u, 0u, 0u, 0u);\n        if (ok) v = *reinterpret_cast<const uint4*>(src);\n"
            "        *reinterpret_cast<uint4*>({dst}) = v;")
ASYNC_LOAD = "cp_async_16({dst}, ok ? (const void*)src : (const void*)x_or_w, ok ? 16 : 0);"

WARP_MMA = """
// One warp's WM x WN share of a BK slice: ldmatrix.x4 fragments, MI x NI m16n8k16 mmas per k-step.
__device__ __forceinline__ void warp_mma(float (&acc)[MI][NI][4], const scalar_t* As, const scalar_t* Bs,
                                         int wm, int wn, int lane) {
#pragma unroll
    for (int ks = 0; ks < BK / 16; ++ks) {
        uint32_t a[MI][4], b[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
            ldmatrix_x4(a[mi], As + (wm * WM + mi * 16 + (lane & 15)) * LDS + ks * 16 + (lane >> 4) * 8);
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {
            uint32_t r4[4];
            ldmatrix_x4(r4, Bs + (wn * WN + nj * 16 + (lane & 7) + ((lane >> 4) << 3)) * LDS + ks * 16 + ((lane >> 3) & 1) * 8);
            b[2 * nj][0] = r4[0]; b[2 * nj][1] = r4[1]; b[2 * nj + 1][0] = r4[2]; b[2 * nj + 1][1] = r4[3];
        }
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma_tile(acc[mi][ni], a[mi], b[ni]);
    }
}
"""


def conv_mma_kernel(task, p: dict, pipelined: bool, kt_end: str = "KT", init: str = "0.f",
                    wait: str = "cp_async_wait<STAGES - 2>();") -> str:
    """The whole kernel source (defines, loads, warp mma, kernel) of one tensor-core rung."""
    kind, bk = "bf16" if task.dtype == "bf16" else "f16", p.get(KSLICE.name, KSLICE.default)
    if pipelined:
        load_a = ASYNC_LOAD.format(dst="As + m * LDS + ch * 8").replace("x_or_w", "x")
        load_b = ASYNC_LOAD.format(dst="dst_").replace("x_or_w", "weight")
        smem = ("    extern __shared__ __align__(16) scalar_t smem[];   // STAGES x (A tile, B tile)\n"
                "#define A_AT(st) (smem + (st) * STAGE_ELEMS)\n#define B_AT(st) (smem + (st) * STAGE_ELEMS + BM * LDS)\n")
        body = f"""#pragma unroll
    for (int st = 0; st < STAGES - 1; ++st) {{                // STAGES - 1 slices in flight first
        if (st < KT) {{ load_a(A_AT(st), x, m0, st, H, W, C, S, U, PD, P, Q, M); load_b(B_AT(st), weight, n0, st, K, RSC); }}
        cp_async_commit();
    }}
    for (int kt = 0; kt < {kt_end}; ++kt) {{
        {wait}        // slice kt has landed (this thread's copies)
        __syncthreads();                     // ... everyone's, and slot (kt - 1) % STAGES is free
        const int nt = kt + STAGES - 1;
        if (nt < KT) {{ load_a(A_AT(nt % STAGES), x, m0, nt, H, W, C, S, U, PD, P, Q, M);
                       load_b(B_AT(nt % STAGES), weight, n0, nt, K, RSC); }}
        cp_async_commit();
        warp_mma(acc, A_AT(kt % STAGES), B_AT(kt % STAGES), wm, wn, lane);
    }}"""
    else:
        load_a = REG_LOAD.format(dst="As + m * LDS + ch * 8")
        load_b = REG_LOAD.format(dst="dst_")
        smem = ("    __shared__ __align__(16) scalar_t As[BM * LDS];\n"
                "    __shared__ __align__(16) scalar_t Bs[BN * LDS];\n")
        body = f"""    for (int kt = 0; kt < {kt_end}; ++kt) {{
        load_a(As, x, m0, kt, H, W, C, S, U, PD, P, Q, M);
        load_b(Bs, weight, n0, kt, K, RSC);
        __syncthreads();                     // tiles visible to every warp
        warp_mma(acc, As, Bs, wm, wn, lane);
        __syncthreads();                     // all warps done before the next slice overwrites them
    }}"""
    return f"""
#define BM {p['BM']}                       // output pixels per block
#define BN {p['BN']}                       // filters per block
#define BK {bk}                        // GEMM-K slice: {bk} channels of one filter tap
#define THREADS 128                  // 4 warps, 2 x 2 over the tile
#define WM (BM / 2)
#define WN (BN / 2)
#define MI (WM / 16)
#define NI (WN / 8)
#define LDS (BK + 8)                 // smem row in elements: 16-byte pad, ldmatrix rows in distinct banks
#define STAGES {p.get('stages', 1)}
#define STAGE_ELEMS ((BM + BN) * LDS)
{PTX_MMA}{mma_fn(kind)}{TILE_LOADS.replace('{LOAD}', load_a).replace('{LOAD_B}', load_b)}{WARP_MMA}
extern "C" __global__ void __launch_bounds__(THREADS) conv2d_nhwc_kernel({ARGS}) {{
{smem}    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
    const int M = N * P * Q, RSC = R * S * C, KT = RSC / BK;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    float acc[MI][NI][4];
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mi][ni][e] = {init};
{body}
    // epilogue: c0, c1 at (row lane / 4, cols 2 (lane % 4) + 0, 1); c2, c3 eight rows below
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h) {{
                const int row = m0 + wm * WM + mi * 16 + (lane >> 2) + h * 8;
                const int col = n0 + wn * WN + ni * 8 + (lane & 3) * 2;
                if (row < M && col < K) {{
                    y[(size_t)row * K + col] = from_float(acc[mi][ni][2 * h]);
                    y[(size_t)row * K + col + 1] = from_float(acc[mi][ni][2 * h + 1]);
                }}
            }}
}}
"""
