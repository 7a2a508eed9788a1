"""The tensor-core rungs of gemm_fp4_cuda: packed e2m1 tiles in shared memory, fragments by
ldmatrix (the 8-bit m16n8k32 byte layout, two fp4 a byte), then either dequantized in registers
into fp16/bf16 m16n8k16 mma.sync or fed as-is to sm_120a's block-scaled m16n8k64 mma."""
from ._gemm_ptx import LDMATRIX_X4, SMEM_U32, cp_async16, mma_16816

BK = 128                       # K per smem tile: 64 bytes a row, two 64-wide mma k-steps
ROWB = 80                      # padded tile row: 80-byte stride keeps the 8 rows of an ldmatrix conflict-free
NATIVE = {16: "scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3", 32: "scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0"}
PAIR = {"fp16": ("__half2", "__floats2half2_rn", "f16"), "bf16": ("__nv_bfloat162", "__floats2bfloat162_rn", "bf16")}


def common(p, task, native: bool, stages: int) -> str:
    pair, make, kind = PAIR[task.dtype]
    g = task["G"]
    mma = (f"""
// sm_120a block-scaled mma: 64 k of e2m1 per step; each lane passes its A row's and B column's 64 / G
// scale bytes (thread-id 0: A row r from lane 4 * (r % 8) + r / 8, B column n from lane 4 * n)
__device__ __forceinline__ void mma_fp4(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                        uint32_t sfa, uint32_t sfb) {{
    asm volatile("mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.{NATIVE[g]} "
                 "{{%0, %1, %2, %3}}, {{%4, %5, %6, %7}}, {{%8, %9}}, {{%0, %1, %2, %3}}, %10, {{0, 0}}, %11, {{0, 0}};\\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(sfa), "r"(sfb));
}}
""" if native else mma_16816(kind) + f"""
// byte j of a packed word (k, k + 1) -> a {pair} of scaled values, lower k in the low half
__device__ __forceinline__ uint32_t dequant_pair(uint32_t word, int j, float scale) {{
    const uint32_t q = (word >> (8 * j)) & 0xFFu;
    const {pair} v = {make}(e2m1_to_float(q & 15u) * scale, e2m1_to_float(q >> 4) * scale);
    return *reinterpret_cast<const uint32_t*>(&v);
}}
""")
    return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK {BK}                   // K per tile (64 bytes of packed e2m1 a row)
#define ROWB {ROWB}                  // smem bytes per tile row (64 + 16 pad)
#define WM (BM / 2)               // 2 x 2 warps
#define WN (BN / 2)
#define MI (WM / 16)
#define NI (WN / 8)
#define STAGES {stages}
#define STAGE_BYTES ((BM + BN) * ROWB)
{SMEM_U32}{LDMATRIX_X4}{cp_async16("valid = false zero-fills the chunk: A rows past M arrive as zeros") if stages > 1 else ""}{mma}"""


def warp_tile(native: bool, scale: str) -> str:
    """One warp's share of a BK tile; `scale` is the expression of a fragment's scale (missing_scale: 1.f)."""
    if native:
        inner = """#pragma unroll
        for (int mi = 0; mi < MI; ++mi) {   // this lane's A row: 4 * (r % 8) + r / 8 = lane
            const int row = min(m0 + wm * WM + mi * 16 + (lane >> 2) + 8 * (lane & 1), M - 1);
            sfa[mi] = load_scales(scale_a + (size_t)row * (K / G) + kb / G);
        }
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
            sfb[ni] = load_scales(scale_b + (size_t)(n0 + wn * WN + ni * 8 + (lane >> 2)) * (K / G) + kb / G);
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) mma_fp4(acc[mi][ni], a[mi], b[ni], sfa[mi], sfb[ni]);"""
        decl = "        uint32_t sfa[MI], sfb[NI];\n"
    else:
        inner = f"""// scales of this lane's words: A rows g, g + 8 x k halves, B column g x k halves
        float sa[MI][4], sb[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
#pragma unroll
            for (int q = 0; q < 4; ++q) {{
                const int row = min(m0 + wm * WM + mi * 16 + (lane >> 2) + 8 * (q & 1), M - 1);
                sa[mi][q] = {scale.format(s="scale_a + (size_t)row * (K / G) + (kb + 32 * (q >> 1) + 8 * (lane & 3)) / G")};
            }}
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h)
                sb[ni][h] = {scale.format(s="scale_b + (size_t)(n0 + wn * WN + ni * 8 + (lane >> 2)) * (K / G) + (kb + 32 * h + 8 * (lane & 3)) / G")};
        // byte j of every word feeds one m16n8k16: the same k permutation for A and B, so the sum is exact
#pragma unroll
        for (int j = 0; j < 4; ++j) {{
            uint32_t af[MI][4], bf[NI][2];
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int q = 0; q < 4; ++q) af[mi][q] = dequant_pair(a[mi][q], j, sa[mi][q]);
#pragma unroll
            for (int ni = 0; ni < NI; ++ni) {{ bf[ni][0] = dequant_pair(b[ni][0], j, sb[ni][0]); bf[ni][1] = dequant_pair(b[ni][1], j, sb[ni][1]); }}
#pragma unroll
            for (int mi = 0; mi < MI; ++mi)
#pragma unroll
                for (int ni = 0; ni < NI; ++ni) mma_16816(acc[mi][ni], af[mi], bf[ni]);
        }}"""
        decl = ""
    return f"""
// ldmatrix.x4 of packed bytes: lane (g, t) gets bytes 4t..4t+3 (k 8t..8t+7) of rows g and g + 8 and
// the same 16 bytes on: the m16n8k32 8-bit fragment, each byte two e2m1 values
__device__ __forceinline__ void warp_tile(float (&acc)[MI][NI][4], const uint8_t* As, const uint8_t* Bs,
                                          const uint8_t* __restrict__ scale_a, const uint8_t* __restrict__ scale_b,
                                          int m0, int n0, int k0, int M, int K) {{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {{            // two 64-wide k-steps (32 bytes each) per tile
        const int kb = k0 + ks * 64;
        uint32_t a[MI][4], b[NI][2];
#pragma unroll
        for (int mi = 0; mi < MI; ++mi)
            ldmatrix_x4(a[mi], As + (wm * WM + mi * 16 + (lane & 15)) * ROWB + ks * 32 + (lane >> 4) * 16);
#pragma unroll
        for (int nj = 0; nj < NI / 2; ++nj) {{
            uint32_t r[4];
            ldmatrix_x4(r, Bs + (wn * WN + nj * 16 + ((lane >> 4) << 3) + (lane & 7)) * ROWB + ks * 32 + ((lane >> 3) & 1) * 16);
            b[2 * nj][0] = r[0]; b[2 * nj][1] = r[1]; b[2 * nj + 1][0] = r[2]; b[2 * nj + 1][1] = r[3];
        }}
{decl}        {inner}
    }}
}}
"""


def load_scales_fn(task) -> str:
    word = "uint32_t" if task["G"] == 16 else "uint16_t"
    return f"""
// the 64 / G scale bytes of one row for one 64-wide k-step, byte 0 = lowest k (K % 64 == 0: aligned)
__device__ __forceinline__ uint32_t load_scales(const uint8_t* p) {{ return *reinterpret_cast<const {word}*>(p); }}
"""


def kernel(p, task, native: bool, pipelined: bool, scale: str, kt_end: str, barrier: str) -> str:
    pair = PAIR[task.dtype][0]
    load = ("cp_async16(dst, ok ? src : base, ok);" if pipelined else
            "*reinterpret_cast<uint4*>(dst) = ok ? *reinterpret_cast<const uint4*>(src) : make_uint4(0u, 0u, 0u, 0u);")
    if pipelined:
        loop = f"""    extern __shared__ __align__(16) uint8_t smem[];   // STAGES x (A tile, B tile)
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {{    // prologue: STAGES - 1 tiles in flight
        if (s < KT) load_tile(smem + s * STAGE_BYTES, A, B, m0, n0, s * BK, M, K);
        cp_async_commit();
    }}
    for (int kt = 0; kt < {kt_end}; ++kt) {{
        cp_async_wait<STAGES - 2>();           // tile kt has landed (this thread's copies)
        __syncthreads();                       // ... and everyone's; slot (kt - 1) % STAGES is free
        const int nt = kt + STAGES - 1;
        if (nt < KT) load_tile(smem + (nt % STAGES) * STAGE_BYTES, A, B, m0, n0, nt * BK, M, K);
        cp_async_commit();
        const uint8_t* st = smem + (kt % STAGES) * STAGE_BYTES;
        warp_tile(acc, st, st + BM * ROWB, scale_a, scale_b, m0, n0, kt * BK, M, K);
    }}"""
    else:
        loop = f"""    __shared__ __align__(16) uint8_t smem[STAGE_BYTES];
    for (int kt = 0; kt < {kt_end}; ++kt) {{
        load_tile(smem, A, B, m0, n0, kt * BK, M, K);{barrier}
        warp_tile(acc, smem, smem + BM * ROWB, scale_a, scale_b, m0, n0, kt * BK, M, K);
        __syncthreads();                       // all warps done before the next tile overwrites it
    }}"""
    return (common(p, task, native, p.get("stages", 1)) + (load_scales_fn(task) if native else "")
            + warp_tile(native, scale) + f"""
// BM + BN packed rows of 64 bytes, four 16-byte chunks each
__device__ __forceinline__ void load_tile(uint8_t* tile, const uint8_t* __restrict__ A, const uint8_t* __restrict__ B,
                                          int m0, int n0, int k0, int M, int K) {{
    for (int i = threadIdx.x; i < (BM + BN) * 4; i += 128) {{
        const int r = i / 4, c = i % 4;
        const bool is_a = r < BM, ok = !is_a || m0 + r < M;
        const uint8_t* base = is_a ? A : B;
        const uint8_t* src = base + (size_t)(is_a ? m0 + r : n0 + r - BM) * (K / 2) + k0 / 2 + c * 16;
        uint8_t* dst = tile + r * ROWB + c * 16;
        {load}
    }}
}}

extern "C" __global__ void __launch_bounds__(128)
gemm_fp4_kernel(const uint8_t* __restrict__ A, const uint8_t* __restrict__ B, const uint8_t* __restrict__ scale_a,
                const uint8_t* __restrict__ scale_b, scalar_t* __restrict__ C, int M, int N, int K) {{
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, KT = K / BK;
    float acc[MI][NI][4] = {{}};
{loop}
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, wm = warp / 2, wn = warp % 2;
#pragma unroll
    for (int mi = 0; mi < MI; ++mi)
#pragma unroll
        for (int ni = 0; ni < NI; ++ni)
#pragma unroll
            for (int h = 0; h < 2; ++h) {{          // c0,c1: row g, cols 2t, 2t+1; c2,c3: row g + 8
                const int row = m0 + wm * WM + mi * 16 + (lane >> 2) + h * 8, col = n0 + wn * WN + ni * 8 + (lane & 3) * 2;
                if (row < M) *reinterpret_cast<{pair}*>(C + (size_t)row * N + col) =
                    {PAIR[task.dtype][1]}(acc[mi][ni][2 * h], acc[mi][ni][2 * h + 1]);
            }}
}}
""")
