"""Block-scaled FP4 GEMM in CUDA (nvfp4 / mxfp4 operands, fp32 accumulate, 16-bit C).

Ladder: dequantize A and B to 16-bit buffers, then a smem-tiled GEMM (3 launches) -> one kernel
that dequantizes while staging tiles, register-blocked FMA -> packed tiles in smem, ldmatrix
fragments dequantized in registers into fp16/bf16 mma.sync -> the same fed by a cp.async ring ->
on Hopper (no fp4 tensor-core path), the 16-bit copies again, written by a vectorized pass, then the
TMA + wgmma GEMM on them (what vLLM's nvfp4 emulation does off Blackwell) -> sm_120a's block-scaled
mma.sync (kind::mxf4nvf4): the tensor core reads e2m1 and the scales itself. The last rung exists only
on sm_120a; elsewhere it is the "fp4 off sm_120" compile error.
"""
from dataclasses import replace

from ..base import Launch, Param, Rung, DTYPE_BYTES, cdiv
from ..dialect import prelude
from ._gemm_ptx import smem_fma_tail
from ._fp4_tc import BK, kernel
from ._gemm_tc import tc_launch, tc_traffic
from ._dequant_wgmma import NEEDS as WGMMA, PARAMS as WGMMA_TILES, launch_model, wgmma_on_copies
from ._gemm_wgmma import TMA_INCLUDES
from .gemm_fp4_spec import ENTRY, GemmFp4Spec, fp4_decode

SCALE = "scale_to_float(__ldg({s}))"
NO_SCALE = {"scale": "1.f"}


def dequant_kernel(scale: str = " * s") -> str:
    return f"""
// One thread per packed byte: two e2m1 values times their row's block scale -> two 16-bit values.
__global__ void fp4_dequant(const uint8_t* __restrict__ q, const uint8_t* __restrict__ scales,
                            scalar_t* __restrict__ w, int rows, int K) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * (K / 2)) return;
    const size_t r = i / (K / 2);
    const int k = (int)(i % (K / 2)) * 2;
    const float s = scale_to_float(scales[r * (K / G) + k / G]);
    const uint32_t b = q[i];
    w[r * K + k] = from_float(e2m1_to_float(b & 15u){scale});
    w[r * K + k + 1] = from_float(e2m1_to_float(b >> 4){scale});
}}
"""


# -- dequant_then_gemm -----------------------------------------------------------------------
def dequant_then_gemm_launch(p, task):
    m, n, k, e, t = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype], p["TILE"]
    floor = GemmFp4Cuda().cost(task).bytes
    extra = 2 * (m + n) * k * e + (m * k * e * cdiv(n, t) + n * k * e * cdiv(m, t)) * 0.04   # 16-bit copies
    return Launch(grid=cdiv(m, t) * cdiv(n, t), threads=t * t, smem_bytes=2 * t * (t + 1) * 4, regs=30,
                  bytes_per_access=e, traffic=1 + extra / floor, compute_scale=1.0 if t == 32 else 0.75,
                  tile_quant=m * n / (cdiv(m, t) * t * cdiv(n, t) * t), launches=3)


def dequant_then_gemm_src(p, task, scale=" * s", k_end="K"):
    return dequant_kernel(scale) + f"""
#define TILE {p['TILE']}
// Shared-memory tiled GEMM on the 16-bit copies, one output per thread: C = a . b^T.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_fp4_kernel(const scalar_t* __restrict__ a, const scalar_t* __restrict__ b, scalar_t* __restrict__ C,
                int M, int N, int K) {{
    __shared__ float sa[TILE][TILE + 1];       // +1: the column reads below are conflict-free
    __shared__ float sb[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, n0 = blockIdx.x * TILE;
    float acc = 0.f;
    for (int k0 = 0; k0 < {k_end}; k0 += TILE) {{
        sa[ty][tx] = row < M ? to_float(a[(size_t)row * K + k0 + tx]) : 0.f;
        sb[ty][tx] = to_float(b[(size_t)(n0 + ty) * K + k0 + tx]);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += sa[ty][kk] * sb[tx][kk];
        __syncthreads();
    }}
    if (row < M) C[(size_t)row * N + n0 + tx] = from_float(acc);
}}

{ENTRY.prototype(task)} {{
    scalar_t *a = nullptr, *b = nullptr;       // 16-bit copies: 4x the packed bytes, written then re-read
    cudaMallocAsync((void**)&a, (size_t)M * K * sizeof(scalar_t), stream);
    cudaMallocAsync((void**)&b, (size_t)N * K * sizeof(scalar_t), stream);
    fp4_dequant<<<(unsigned)(((size_t)M * K / 2 + 255) / 256), 256, 0, stream>>>(A, scale_a, a, M, K);
    fp4_dequant<<<(unsigned)(((size_t)N * K / 2 + 255) / 256), 256, 0, stream>>>(B, scale_b, b, N, K);
    gemm_fp4_kernel<<<dim3(N / TILE, (M + TILE - 1) / TILE), dim3(TILE, TILE), 0, stream>>>(a, b, C, M, N, K);
    cudaFreeAsync(a, stream);
    cudaFreeAsync(b, stream);
}}
"""


# -- fused_dequant_smem ----------------------------------------------------------------------
def fused_dequant_launch(p, task):
    m, n, bm, bn = task["M"], task["N"], p["BM"], p["BN"]
    tm, tn = bm // 16, bn // 16
    return Launch(grid=cdiv(m, bm) * cdiv(n, bn), threads=256, smem_bytes=32 * (bm + 1) * 4 + 32 * bn * 4,
                  regs=min(255, 30 + tm * tn + tm + tn), bytes_per_access=4,
                  traffic=tc_traffic(task, bm, bn, 0.1, elt=0.5),
                  compute_scale=min(1.0, (tm * tn / (tm + tn)) / 2.7) * 0.85,   # unpacking shares the issue slots
                  tile_quant=m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn))


def fused_dequant_smem_src(p, task, barrier="\n        __syncthreads();", scale=" * s"):
    return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK 32
#define TM (BM / 16)              // 16 x 16 threads, TM x TN outputs each
#define TN (BN / 16)

// One kernel: each packed byte is decoded and scaled once, while its tile is staged in smem.
extern "C" __global__ void __launch_bounds__(256)
gemm_fp4_kernel(const uint8_t* __restrict__ A, const uint8_t* __restrict__ B, const uint8_t* __restrict__ scale_a,
                const uint8_t* __restrict__ scale_b, scalar_t* __restrict__ C, int M, int N, int K) {{
    __shared__ float sa[BK][BM + 1];          // k-major: a thread's TM rows are broadcasts
    __shared__ float sb[BK][BN];              // k-major: lanes read consecutive columns
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][TN] = {{}};
    for (int k0 = 0; k0 < K; k0 += BK) {{
        for (int i = tid; i < (BM + BN) * (BK / 2); i += 256) {{    // byte fastest: coalesced rows
            const int r = i / (BK / 2), c = i % (BK / 2), k = k0 + 2 * c;
            const bool is_a = r < BM, ok = !is_a || m0 + r < M;
            const size_t row = is_a ? m0 + r : n0 + r - BM;
            float lo = 0.f, hi = 0.f;
            if (ok) {{
                const uint32_t q = (is_a ? A : B)[row * (K / 2) + k / 2];
                const float s = scale_to_float((is_a ? scale_a : scale_b)[row * (K / G) + k / G]);
                lo = e2m1_to_float(q & 15u){scale};
                hi = e2m1_to_float(q >> 4){scale};
            }}
            if (is_a) {{ sa[2 * c][r] = lo; sa[2 * c + 1][r] = hi; }}
            else {{ sb[2 * c][r - BM] = lo; sb[2 * c + 1][r - BM] = hi; }}
        }}{barrier}
{smem_fma_tail("sa", "sb", "C")}
}}
{host(task, "0", 256)}"""


# -- tensor-core rungs (_fp4_tc.py) -----------------------------------------------------------
def tc_src(native: bool, pipelined: bool):
    def render(p, task, scale=SCALE, kt_end="KT", barrier="\n        __syncthreads();   // tile visible to every warp"):
        smem = "STAGES * STAGE_BYTES" if pipelined else "0"
        return kernel(p, task, native, pipelined, scale, kt_end, barrier) + host(task, smem, 128)
    return render


def host(task, smem: str, threads: int) -> str:
    """One launch per BM x BN tile; the cp.async ring opts into its dynamic shared memory."""
    setup = (f"    cudaFuncSetAttribute(gemm_fp4_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, {smem});\n"
             if smem != "0" else "")
    return f"""
{ENTRY.prototype(task)} {{
{setup}    gemm_fp4_kernel<<<dim3(N / BN, (M + BM - 1) / BM), {threads}, {smem}, stream>>>(A, B, scale_a, scale_b, C, M, N, K);
}}
"""


def fp4_tc_launch(path: str, dequant: float):
    """tc_launch on the packed layout (0.5 byte an element, 80-byte rows); `dequant`: the share
    of issue slots the register dequant leaves to the mma."""
    base = tc_launch(path, 0.5, 2, smem_elt=0.5, tile=lambda p: dict(p, BK=BK, warps=4))

    def launch(p, task):
        one = base(p, task)
        acc = p["BM"] * p["BN"] // 128                       # fp32 accumulators a thread
        regs = one.regs if dequant == 1.0 else min(255, int(2.3 * acc) + 100)   # + words, scales, pairs
        return replace(one, compute_scale=one.compute_scale * dequant, threads=128, regs=regs,
                       smem_bytes=int(one.smem_bytes))   # half-byte elements: a whole number of bytes
    return launch


# -- dequant_then_wgmma ----------------------------------------------------------------------
def copies_kernel(scale: str = " * s") -> str:
    return f"""
// 16 e2m1 values a thread: 8 packed bytes in one 8-byte load, one scale (G is 16 or 32), two 16-byte stores.
__global__ void fp4_to_16bit(const uint8_t* __restrict__ q, const uint8_t* __restrict__ scales,
                             scalar_t* __restrict__ w, int rows, int K) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;   // chunk i: bytes 8i..8i+7
    if (i >= (size_t)rows * (K / 16)) return;
    const size_t r = i / (K / 16);
    const int k = (int)(i % (K / 16)) * 16;
    const float s = scale_to_float(scales[r * (K / G) + k / G]);
    const uint2 b = reinterpret_cast<const uint2*>(q)[i];
    uint4 out[2];
    scalar_t* o = reinterpret_cast<scalar_t*>(out);
#pragma unroll
    for (int j = 0; j < 8; ++j) {{
        const uint32_t byte = ((j < 4 ? b.x : b.y) >> (8 * (j & 3))) & 0xFFu;
        o[2 * j] = from_float(e2m1_to_float(byte & 15u){scale});
        o[2 * j + 1] = from_float(e2m1_to_float(byte >> 4){scale});
    }}
    uint4* dst = reinterpret_cast<uint4*>(w + r * K + k);
    dst[0] = out[0];
    dst[1] = out[1];
}}
"""


def copies_wgmma_src(p, task, scale=" * s", kt_end="KT"):
    return copies_kernel(scale) + wgmma_on_copies("gemm_fp4", p, task, kt_end) + f"""
{ENTRY.prototype(task)} {{
    scalar_t *a = nullptr, *b = nullptr;       // 16-bit K-major copies: TMA boxes of 64 elements (128 bytes)
    cudaMallocAsync((void**)&a, (size_t)M * K * sizeof(scalar_t), stream);
    cudaMallocAsync((void**)&b, (size_t)N * K * sizeof(scalar_t), stream);
    fp4_to_16bit<<<(unsigned)(((size_t)M * K / 16 + 255) / 256), 256, 0, stream>>>(A, scale_a, a, M, K);
    fp4_to_16bit<<<(unsigned)(((size_t)N * K / 16 + 255) / 256), 256, 0, stream>>>(B, scale_b, b, N, K);
    gemm_fp4_wgmma(a, b, C, M, N, K, stream);
    cudaFreeAsync(a, stream);
    cudaFreeAsync(b, stream);
}}
"""


# The H100 (scripts/roomK_device.py plan k5, 2026-12-06 19:14 UTC, measurements/h100_roomK_k5.json; 53 cases, every
# value right, every bug caught) ran this rung 9.1-9.6x faster than cp_async_dequant (44.7 / 234.2 us against 406.9 /
# 2244.5 at M=1024 N=2048 K=4096 and 4096^3), 3.6x at M=128 and 1.8x at M=16; the module's fit, which never timed a
# wgmma kernel, put its 19 rows at 1.22x the device (scripts/roomK_level.py): WGMMA_LEVEL 1.4 takes them to 0.97x,
# pair order within a shape 0.82 at both.
WGMMA_LEVEL = 1.4


def copy_bytes(task):
    """The copy pass: packed values and scales read, 16-bit copies of A and B written."""
    m, n, k = task["M"], task["N"], task["K"]
    return (m + n) * (k // 2 + k // task["G"] + k * DTYPE_BYTES[task.dtype])


TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
BM, BN = Param("BM", (32, 64, 128), 64), Param("BN", (64, 128), 128)
STAGES = Param("stages", (2, 3, 4), 3)
# the register-dequant ring: deeper rings keep more packed tiles in flight at small M, where the
# kernel streams B (sm_120a's native rung keeps the measured range)
RING = Param("stages", (2, 3, 4, 5, 6), 3)
RING_BN = Param("BN", (32, 64, 128), 128)     # 2 x 2 warps of 16 columns: N-thin tiles for small M
SHORT_K = {"kt_end": "KT - 1"}


class GemmFp4Cuda(GemmFp4Spec):
    impl = "cuda"
    shapes = ({"M": 1024, "N": 2048, "K": 4096, "G": 16}, {"M": 4096, "N": 4096, "K": 4096, "G": 16},
              {"M": 8192, "N": 8192, "K": 8192, "G": 16}, {"M": 128, "N": 14336, "K": 4096, "G": 16},
              {"M": 2048, "N": 4096, "K": 4096, "G": 32}, {"M": 8192, "N": 5120, "K": 8192, "G": 32},
              {"M": 16, "N": 7168, "K": 2048, "G": 32})
    variants = (
        Rung("dequant_then_gemm", "two dequant kernels write 16-bit A and B, then a smem-tiled fp32-FMA GEMM",
             (Param("TILE", (16, 32), 16),), compute_eff=0.25, memory_eff=0.7, smem="static",
             launch=dequant_then_gemm_launch, render=dequant_then_gemm_src,
             bugs={"missing_scale": {"scale": ""}, "off_by_one": {"k_end": "K - TILE"}}),
        Rung("fused_dequant_smem", "one kernel: e2m1 decoded and block-scaled while staged to smem, register-blocked FMA",
             (Param("BM", (32, 64), 64), Param("BN", (64, 128), 128)), compute_eff=0.5, memory_eff=0.8,
             smem="static", launch=fused_dequant_launch, render=fused_dequant_smem_src,
             bugs={"missing_barrier": {"barrier": ""}, "missing_scale": {"scale": ""}}),
        Rung("mma_reg_dequant", "packed tiles in smem, ldmatrix.x4 fragments dequantized in registers into mma.sync.m16n8k16",
             (BM, BN), needs=TC, path="fp16", compute_eff=0.55, memory_eff=0.8, smem="static",
             launch=fp4_tc_launch("fp16", 0.3), render=tc_src(False, False),
             bugs={"missing_scale": NO_SCALE, "missing_barrier": {"barrier": ""}}),
        Rung("cp_async_dequant", "STAGES-deep cp.async ring of packed tiles feeding the register-dequant mma.sync",
             (BM, RING_BN, RING), needs=TC | {"cp_async"}, path="fp16", compute_eff=0.7, memory_eff=0.88,
             smem="dynamic", launch=fp4_tc_launch("fp16", 0.3), render=tc_src(False, True),
             bugs={"off_by_one": SHORT_K, "missing_scale": NO_SCALE}),
        Rung("dequant_then_wgmma", "sm_90a: a vectorized pass writes 16-bit copies of A and B, then a TMA producer "
             "warp + wgmma consumer warpgroups GEMM on them (3 launches)",
             WGMMA_TILES, needs=WGMMA, path="fp16", compute_eff=0.77, memory_eff=0.88, smem="dynamic",
             launch=launch_model(lambda task: GemmFp4Cuda().cost(task).bytes, copy_bytes, 3, WGMMA_LEVEL), render=copies_wgmma_src,
             bugs={"missing_scale": {"scale": ""}, "off_by_one": SHORT_K}),
        Rung("mxf4nvf4_block_scaled", "sm_120a mma.sync.m16n8k64.kind::mxf4nvf4.block_scale: e2m1 operands and their "
             "scales go to the tensor core as-is, cp.async ring", (BM, BN, STAGES),
             needs=TC | {"cp_async", "fp4"}, path="fp4", compute_eff=0.75, memory_eff=0.88, smem="dynamic",
             launch=fp4_tc_launch("fp4", 1.0), render=tc_src(True, True), bugs={"off_by_one": SHORT_K}),
    )

    def assemble(self, body, variant, params, task):
        return f"{prelude(task, TMA_INCLUDES if 'tma' in variant.needs else ())}\n{fp4_decode(task)}{body}"
