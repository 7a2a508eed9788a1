"""The tensor-core rungs of gemm_int4_cuda: mma.sync m16n8k16 on x fragments from ldmatrix and
W dequantized in registers (prmt + lop3 magic-exponent trick), register-staged, cp.async-pipelined
or split over K with a combine kernel."""
from ..base import Param
from ._gemm_ptx import LDMATRIX_X4, SMEM_U32, cp_async16, mma_16816

# K per tensor-core tile, at most a quantization group (one scale per column per tile): a deeper tile
# stages more a trip and synchronises (and loads its scales) fewer times (ops/ktile.py)
BK = Param("BK", (32, 64, 128), 64)
SHARE = {32: "a quarter group", 64: "half a group", 128: "one group"}
TYPES = {"fp16": ("__half2", "f16", "0x64006400u", "0x64086408u", "__half2half2"),
         "bf16": ("__nv_bfloat162", "bf16", "0x43004300u", "0x43084308u", "__bfloat162bfloat162")}


def mma_common(p, task, scale: bool = True, stages: int = 0) -> str:
    """Tile macros, PTX helpers, the in-register dequant and the warp's mma over one K tile;
    scale=False is the missing_scale bug (the group scale is never applied)."""
    pair, ptx, magic, bias, splat = TYPES[task.dtype]
    scaled = f"__hmul2(v, *reinterpret_cast<const {pair}*>(&scale2))" if scale else "v"
    async_helpers = (cp_async16("src-size 0 zero-fills the 16 bytes: rows past M arrive as zeros without a branch")
                     if stages else "")
    warps_m, bk = 2 if p["BM"] >= 64 else 1, p.get(BK.name, BK.default)   # records measured before the knob lack BK
    return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK {bk}                   // K per tile: {SHARE[bk]}, so one scale per column per tile
#define WARPS_M {warps_m}
#define WARPS_N (4 / WARPS_M)
#define WM (BM / WARPS_M)         // warp tile
#define WN (BN / WARPS_N)
#define MT (WM / 16)              // m16n8k16 tiles per warp
#define NT (WN / 8)
#define XS (BK + 8)               // padded x row: {(bk + 8) * 2}-byte stride keeps ldmatrix conflict-free
typedef {pair} pair_t;
{SMEM_U32}{LDMATRIX_X4}{mma_16816(ptx)}
template <int LUT> __device__ __forceinline__ uint32_t lop3(uint32_t a, uint32_t b, uint32_t c) {{
    uint32_t d;
    asm("lop3.b32 %0, %1, %2, %3, %4;\\n" : "=r"(d) : "r"(a), "r"(b), "r"(c), "n"(LUT));
    return d;
}}

__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {{
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;\\n" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}}
{async_helpers}
// B fragment of m16n8k16 for lane (g, t): k = 2t, 2t+1 of each 8-wide half of the k16 step, which is
// byte t of the packed word. prmt moves that byte down; lop3 ((a & b) | c, LUT 0xEA) drops each nibble
// into the mantissa of a 16-bit float whose exponent makes it MAGIC + q exactly; one hsub2 removes
// MAGIC + 8 (the zero point) and one hmul2 applies the group scale.
__device__ __forceinline__ uint32_t dequant_pair(uint32_t word, uint32_t sel, uint32_t scale2) {{
    const uint32_t byte = prmt(word, 0u, sel);
    uint32_t h = lop3<0xEA>(byte, 0x0000000Fu, {magic});
    h = lop3<0xEA>(byte << 12, 0x000F0000u, h);
    const uint32_t bias = {bias};
    const pair_t v = __hsub2(*reinterpret_cast<const pair_t*>(&h), *reinterpret_cast<const pair_t*>(&bias));
    const pair_t r = {scaled};
    return *reinterpret_cast<const uint32_t*>(&r);
}}

// One BK tile from shared memory: x fragments by ldmatrix, W fragments dequantized in registers.
__device__ __forceinline__ void mma_tile(float (&acc)[MT][NT][4], const scalar_t* sx, const uint32_t* sw,
                                         const scalar_t* __restrict__ scales, int n0, int k0, int N, int K) {{
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N, g = lane / 4, t = lane % 4;
    const uint32_t sel = 0x4440u | t;        // prmt: byte t -> byte 0, zeros above
    uint32_t sc[NT];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {{
        const int n = min(n0 + wn * WN + nt * 8 + g, N - 1);
        const pair_t s2 = {splat}(scales[(size_t)n * (K / GROUP) + k0 / GROUP]);
        sc[nt] = *reinterpret_cast<const uint32_t*>(&s2);
    }}
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {{
        uint32_t a[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt)
            ldmatrix_x4(a[mt], sx + (wm * WM + mt * 16 + lane % 16) * XS + kk * 16 + (lane / 16) * 8);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {{
            const uint32_t* wrow = sw + (wn * WN + nt * 8 + g) * (BK / 8) + kk * 2;
            const uint32_t b[2] = {{dequant_pair(wrow[0], sel, sc[nt]), dequant_pair(wrow[1], sel, sc[nt])}};
#pragma unroll
            for (int mt = 0; mt < MT; ++mt) mma_16816(acc[mt][nt], a[mt], b);
        }}
    }}
}}
"""

def store(target: str) -> str:
    """Epilogue: c0,c1 are (row g, cols 2t, 2t+1), c2,c3 the same columns of row g + 8."""
    if target == "partials":
        put = ("*reinterpret_cast<float2*>(out + (size_t)row * N + col) = make_float2(acc[mt][nt][h * 2], "
               "acc[mt][nt][h * 2 + 1]);")
    else:
        put = ("*reinterpret_cast<pair_t*>(y + (size_t)row * N + col) = "
               "pair_t(from_float(acc[mt][nt][h * 2]), from_float(acc[mt][nt][h * 2 + 1]));")
    return f"""    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int wm = warp / WARPS_N, wn = warp % WARPS_N;
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {{
                const int row = m0 + wm * WM + mt * 16 + lane / 4 + h * 8;
                const int col = n0 + wn * WN + nt * 8 + (lane % 4) * 2;
                if (row < M && col < N) {put}
            }}"""

# -- mma_lop3_dequant ----------------------------------------------------------------------
def mma_lop3_dequant_src(p, task, scale=True, barrier="\n        __syncthreads();"):
    return mma_common(p, task, scale) + f"""
extern "C" __global__ void __launch_bounds__(128)
gemm_int4_kernel(const scalar_t* __restrict__ x, const uint32_t* __restrict__ qweight,
                 const scalar_t* __restrict__ scales, scalar_t* __restrict__ y, int M, int N, int K) {{
    __shared__ __align__(16) scalar_t sx[BM * XS];
    __shared__ __align__(16) uint32_t sw[BN * (BK / 8)];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[MT][NT][4] = {{}};
    for (int k0 = 0; k0 < K; k0 += BK) {{
        for (int i = threadIdx.x; i < BM * (BK / 8); i += 128) {{     // x tile, 16 bytes a thread
            const int r = i / (BK / 8), c = i % (BK / 8);
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (m0 + r < M) v = *reinterpret_cast<const uint4*>(x + (size_t)(m0 + r) * K + k0 + c * 8);
            *reinterpret_cast<uint4*>(sx + r * XS + c * 8) = v;
        }}
        for (int i = threadIdx.x; i < BN * (BK / 32); i += 128) {{    // packed W tile, still 4-bit
            const int r = i / (BK / 32), c = i % (BK / 32);
            *reinterpret_cast<uint4*>(sw + r * (BK / 8) + c * 4) =
                *reinterpret_cast<const uint4*>(qweight + (size_t)(n0 + r) * (K / 8) + k0 / 8 + c * 4);
        }}{barrier}
        mma_tile(acc, sx, sw, scales, n0, k0, N, K);
        __syncthreads();
    }}
{store("y")}
}}

void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {{
    gemm_int4_kernel<<<dim3(N / BN, (M + BM - 1) / BM), 128, 0, stream>>>(x, qweight, scales, y, M, N, K);
}}
"""

# -- cp_async_pipeline, split_k_small_m --------------------------------------------------
def pipelined_kernel(p, task, splits: int, kt_end: str, scale: bool) -> str:
    """kt_end "k_tiles - 1" is the off_by_one bug: the last tile is loaded but never multiplied."""
    stages = p["STAGES"]
    out = "partials" if splits > 1 else "y"   # partials: the epilogue writes this split's fp32 slice
    out_arg = "float* __restrict__ partials" if splits > 1 else "scalar_t* __restrict__ y"
    k_range = ("    const int tiles_per_split = (K / BK + SPLITS - 1) / SPLITS;\n"
               "    const int kt_begin = blockIdx.z * tiles_per_split;\n"
               "    const int k_tiles = min(K / BK - kt_begin, tiles_per_split);\n"
               "    float* out = partials + (size_t)blockIdx.z * M * N;   // this split's [M][N] slice\n"
               if splits > 1 else "    const int kt_begin = 0, k_tiles = K / BK;\n")
    return mma_common(p, task, scale, stages) + f"""#define STAGES {stages}
#define SPLITS {splits}
#define STAGE_BYTES (BM * XS * 2 + BN * (BK / 8) * 4)

// Issue the cp.async copies of one K tile into ring slot `slot` (16 bytes a copy, no register staging).
__device__ __forceinline__ void load_tile(unsigned char* smem, int slot, const scalar_t* __restrict__ x,
                                          const uint32_t* __restrict__ qweight, int m0, int n0, int k0, int M, int K) {{
    scalar_t* sx = reinterpret_cast<scalar_t*>(smem + slot * STAGE_BYTES);
    uint32_t* sw = reinterpret_cast<uint32_t*>(smem + slot * STAGE_BYTES + BM * XS * 2);
    for (int i = threadIdx.x; i < BM * (BK / 8); i += 128) {{
        const int r = i / (BK / 8), c = i % (BK / 8);
        const bool valid = m0 + r < M;
        cp_async16(sx + r * XS + c * 8, x + (size_t)(valid ? m0 + r : 0) * K + k0 + c * 8, valid);
    }}
    for (int i = threadIdx.x; i < BN * (BK / 32); i += 128) {{
        const int r = i / (BK / 32), c = i % (BK / 32);
        cp_async16(sw + r * (BK / 8) + c * 4, qweight + (size_t)(n0 + r) * (K / 8) + k0 / 8 + c * 4, true);
    }}
}}

extern "C" __global__ void __launch_bounds__(128)
gemm_int4_kernel(const scalar_t* __restrict__ x, const uint32_t* __restrict__ qweight,
                 const scalar_t* __restrict__ scales, {out_arg}, int M, int N, int K) {{
    extern __shared__ __align__(16) unsigned char smem[];
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
{k_range}    float acc[MT][NT][4] = {{}};
    // prologue: STAGES - 1 tiles in flight before the first mma
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {{
        if (s < k_tiles) load_tile(smem, s, x, qweight, m0, n0, (kt_begin + s) * BK, M, K);
        cp_async_commit();
    }}
    for (int kt = 0; kt < {kt_end}; ++kt) {{
        cp_async_wait<STAGES - 2>();   // this thread's copies of tile kt have landed
        __syncthreads();                   // everyone's have; slot (kt - 1) % STAGES is free again
        const int next = kt + STAGES - 1;
        if (next < k_tiles) load_tile(smem, next % STAGES, x, qweight, m0, n0, (kt_begin + next) * BK, M, K);
        cp_async_commit();
        const unsigned char* stage = smem + (kt % STAGES) * STAGE_BYTES;
        mma_tile(acc, reinterpret_cast<const scalar_t*>(stage), reinterpret_cast<const uint32_t*>(stage + BM * XS * 2),
                 scales, n0, (kt_begin + kt) * BK, N, K);
    }}
{store(out)}
}}
"""

def cp_async_pipeline_src(p, task, kt_end="k_tiles", scale=True):
    return pipelined_kernel(p, task, 1, kt_end, scale) + """
void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {
    const int smem = STAGES * STAGE_BYTES;
    cudaFuncSetAttribute(gemm_int4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    gemm_int4_kernel<<<dim3(N / BN, (M + BM - 1) / BM), 128, smem, stream>>>(x, qweight, scales, y, M, N, K);
}
"""

def split_k_small_m_src(p, task, idx="(size_t)s * M * N + i", kt_end="k_tiles"):
    """idx "(size_t)i * SPLITS + s" is the bad_combine_index bug (SPLITS = 1 has no combine to get wrong)."""
    splits = p["SPLITS"]
    if splits == 1:
        return cp_async_pipeline_src(p, task, kt_end)
    return pipelined_kernel(p, task, splits, kt_end, True) + f"""
// Combine: sum the SPLITS fp32 partial tiles of each output in a fixed order (deterministic).
__global__ void gemm_int4_combine(const float* __restrict__ partials, scalar_t* __restrict__ y, int M, int N) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)M * N) return;
    float total = 0.f;
#pragma unroll
    for (int s = 0; s < SPLITS; ++s) total += partials[{idx}];
    y[i] = from_float(total);
}}

void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {{
    const int smem = STAGES * STAGE_BYTES;
    float* partials = nullptr;                // [SPLITS][M][N] fp32, stream-ordered scratch
    cudaMallocAsync((void**)&partials, (size_t)SPLITS * M * N * sizeof(float), stream);
    cudaFuncSetAttribute(gemm_int4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    gemm_int4_kernel<<<dim3(N / BN, (M + BM - 1) / BM, SPLITS), 128, smem, stream>>>(x, qweight, scales, partials, M, N, K);
    const size_t outputs = (size_t)M * N;
    gemm_int4_combine<<<(unsigned)((outputs + 255) / 256), 256, 0, stream>>>(partials, y, M, N);
    cudaFreeAsync(partials, stream);
}}
"""
