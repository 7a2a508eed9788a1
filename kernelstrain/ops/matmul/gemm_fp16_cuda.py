"""FP16/BF16 GEMM in CUDA: C[M, N] = A[M, K] . B[N, K]^T, fp32 accumulate (B is an nn.Linear weight).

Ladder: one thread per output -> shared-memory tiles -> register micro-tiles -> tensor cores
(ldmatrix + mma.sync) -> multi-stage cp.async ring -> Hopper TMA + wgmma, warp-specialized -> the same on a
persistent grid of resident CTAs, or split over K for small M (fp32 partial slices and a reduce kernel).
"""
from functools import partial

from ..base import Launch, Param, Rung, cdiv
from ..dialect import prelude
from ._gemm_mma import mma_host, mma_kernel, one_launch_host
from ._gemm_tc import naive_launch, register_terms, tc_launch, tc_traffic
from ._gemm_wgmma import TMA_INCLUDES, wgmma_host, wgmma_kernel, wgmma_split_host
from .gemm_fp16_spec import ENTRY, GemmFp16Spec
from .gemm_splitk_spec import split_launch

TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
# The mma.sync rungs against every ok row of measurements/*.json (scripts/roomK_resid.py gemm_fp16_cuda
# mma_sync,cp_async_pipeline; _gemm_tc.register_terms): cp_async_pipeline's register-bound single CTA (128 x 256 x 8
# warps) ran 0.87x its model (sim/measured geomean of 7 rows: 2048^3 74.0 / 62.5 us, 4096^3 434.6-441.0, M=1000
# N=3000 K=776 35.8 against 34.7 at 128 x 128) where two CTAs an SM ran 1.03x (16 rows); mma_sync's register-staged
# 32-wide K slice (64 bytes) 0.92x (16 rows) and its 64-wide one 1.07x (11). ONE_CTA_SCALE takes the single CTA to
# 1.03x; SHORT_K splits the slices' 0.86 ratio between them (the 32-wide default and the 64-wide both ~1.0x).
ONE_CTA_SCALE, SHORT_K = 0.85, (0.925, 1.08)
BM, BN = Param("BM", (64, 128), 128), Param("BN", (64, 128, 256), 128)
WARPS = Param("warps", (4, 8), 8)
ARGS = "const scalar_t* __restrict__ A, const scalar_t* __restrict__ B, scalar_t* __restrict__ C, int M, int N, int K"


def host(task, grid: str, block: str) -> str:
    return one_launch_host(ENTRY, task, "gemm_fp16_kernel", grid, block)


# -- naive ---------------------------------------------------------------------------------
FP32_ACC = ("float", "acc += to_float(a[k]) * to_float(b[k]);")
HALF_ACC = ("scalar_t", "acc = from_float(to_float(acc) + to_float(a[k]) * to_float(b[k]));")


def naive_src(p, task, k_end="K", accum=FP32_ACC):
    acc, fma = accum
    return f"""
#define BLOCK_X {p['block_x']}
#define BLOCK_Y {p['block_y']}

// One thread per C element: all K products come straight from global memory (L1/L2 catch the reuse).
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_fp16_kernel({ARGS}) {{
    const int n = blockIdx.x * BLOCK_X + threadIdx.x, m = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (m >= M || n >= N) return;
    const scalar_t* a = A + (size_t)m * K;   // row m of A
    const scalar_t* b = B + (size_t)n * K;   // row n of B = column n of B^T
    {acc} acc = from_float(0.f);
    for (int k = 0; k < {k_end}; ++k) {fma}
    C[(size_t)m * N + n] = from_float((float)acc);
}}
{host(task, "dim3((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y)", "dim3(BLOCK_X, BLOCK_Y)")}"""

# -- smem_tiled ----------------------------------------------------------------------------
def smem_tiled_launch(p, task):   # 16x16 tiles: half the reuse per staged value, twice the barriers
    m, n, t = task["M"], task["N"], p["tile"]
    return Launch(grid=cdiv(m, t) * cdiv(n, t), threads=t * t, smem_bytes=(t * t + t * (t + 1)) * 4, regs=30,
                  bytes_per_access=2, traffic=tc_traffic(task, t, t, 0.02), compute_scale=1.0 if t == 32 else 0.75,
                  tile_quant=m * n / (cdiv(m, t) * t * cdiv(n, t) * t))


def smem_tiled_src(p, task, barrier="__syncthreads();", acc="float"):
    return f"""
#define TILE {p['tile']}

// Each block stages a TILE x TILE slice of A and of B per K step; every staged value is used TILE times.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_fp16_kernel({ARGS}) {{
    __shared__ float As[TILE][TILE];       // As[m][k]
    __shared__ float Bs[TILE][TILE + 1];   // Bs[k][n]; +1 keeps the transposed store conflict-free
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int m = blockIdx.y * TILE + ty, n = blockIdx.x * TILE + tx, bn = blockIdx.x * TILE + ty;
    {acc} acc = from_float(0.f);
    for (int k0 = 0; k0 < K; k0 += TILE) {{
        // threadIdx.x walks K in both loads: coalesced rows of A and of B
        As[ty][tx] = (m < M && k0 + tx < K) ? to_float(A[(size_t)m * K + k0 + tx]) : 0.f;
        Bs[tx][ty] = (bn < N && k0 + tx < K) ? to_float(B[(size_t)bn * K + k0 + tx]) : 0.f;
        {barrier}
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += As[ty][kk] * Bs[kk][tx];
        __syncthreads();
    }}
    if (m < M && n < N) C[(size_t)m * N + n] = from_float((float)acc);
}}
{host(task, "dim3((N + TILE - 1) / TILE, (M + TILE - 1) / TILE)", "dim3(TILE, TILE)")}"""

# -- register_blocked ----------------------------------------------------------------------
# The H100 (scripts/roomK_device.py plans k3 / k4, 2026-12-06 16:40 UTC, measurements/h100_roomK_k3.json and
# _k4.json; fp16, 2048^3, TM 8): 128 x 128 at BK 8 / 16 / 32 ran 522.1 / 557.0 / 1015.6 us, 128 x 256 515.3 / 525.4 /
# 630.1. BK 32 (offered for a session, modelled level) is not offered: twice as slow where the model had it level.
# BK 8 and 16 run level (BK 8 a little ahead, which the fit's BK exponent gives; the 0.92 this model had for BK 8
# put it behind, and is gone). The 256-wide tiles (512 threads of 120 registers: one CTA an SM) ran 1.01-1.05x
# faster than 128 x 128 (BM 256: 544.5, BN 256: 525.4 against 551.3) where the fit's BM / BN exponents alone made
# them 1.15-1.22x: ONE_CTA_FMA, on a CTA whose registers leave it alone on its SM (its 16 warps stall together at
# each barrier, where two 8-warp CTAs take turns), takes them to 0.98-1.05x of 128 x 128 (the device's order).
ONE_CTA_FMA = 0.87


def _register_blocked_model(p, task, bk8: float, one_cta: float) -> Launch:
    m, n = task["M"], task["N"]
    bm, bn, bk, t = p["BM"], p["BN"], p["BK"], p["TM"]
    threads = bm * bn // (t * t)
    regs = min(255, t * t + 2 * t + 40)
    scale = (1.0 if t == 8 else 0.6) * (bk8 if bk == 8 else 1.0) * (1.0 if bm * bn >= 8192 else 0.85)
    if task.gpu.regs_per_sm // (threads * regs) == 1:
        scale *= one_cta
    return Launch(grid=cdiv(m, bm) * cdiv(n, bn), threads=threads, smem_bytes=(bm + bn + 8) * bk * 4,
                  regs=regs, bytes_per_access=2, traffic=tc_traffic(task, bm, bn, 0.05),
                  compute_scale=scale, tile_quant=m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn))


def register_blocked_launch(p, task):
    """The model as it was before the H100 rows above (BK 8 at 0.92, no single-CTA term): fused_qkv_rope_cuda's
    register_blocked rung (another owner's) times its kernel with it."""
    return _register_blocked_model(p, task, 0.92, 1.0)


def gemm_register_blocked_launch(p, task):
    return _register_blocked_model(p, task, 1.0, ONE_CTA_FMA)


def register_blocked_src(p, task, barrier="__syncthreads();", k_end="BK"):
    return f"""
#define BM {p['BM']}
#define BN {p['BN']}
#define BK {p['BK']}
#define TM {p['TM']}                       // micro-tile TM x TN per thread
#define TN TM
#define THREADS ((BM / TM) * (BN / TN))

// Operands are staged K-major in shared memory so a thread's TM (TN) values are float4 runs;
// each K step then costs TM + TN shared loads for TM * TN FMAs.
extern "C" __global__ void __launch_bounds__(THREADS)
gemm_fp16_kernel({ARGS}) {{
    __shared__ __align__(16) float As[BK][BM + 4];
    __shared__ __align__(16) float Bs[BK][BN + 4];
    const int tid = threadIdx.x, tx = tid % (BN / TN), ty = tid / (BN / TN);
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][TN] = {{}};
    for (int k0 = 0; k0 < K; k0 += BK) {{
#pragma unroll
        for (int i = 0; i < BM * BK / THREADS; ++i) {{   // consecutive threads read consecutive k of a row
            const int idx = tid + i * THREADS, r = idx / BK, c = idx % BK;
            As[c][r] = (m0 + r < M && k0 + c < K) ? to_float(A[(size_t)(m0 + r) * K + k0 + c]) : 0.f;
        }}
#pragma unroll
        for (int i = 0; i < BN * BK / THREADS; ++i) {{
            const int idx = tid + i * THREADS, r = idx / BK, c = idx % BK;
            Bs[c][r] = (n0 + r < N && k0 + c < K) ? to_float(B[(size_t)(n0 + r) * K + k0 + c]) : 0.f;
        }}
        {barrier}
#pragma unroll
        for (int k = 0; k < {k_end}; ++k) {{
            float a[TM], b[TN];
#pragma unroll
            for (int i = 0; i < TM; i += 4) *reinterpret_cast<float4*>(&a[i]) = *reinterpret_cast<const float4*>(&As[k][ty * TM + i]);
#pragma unroll
            for (int j = 0; j < TN; j += 4) *reinterpret_cast<float4*>(&b[j]) = *reinterpret_cast<const float4*>(&Bs[k][tx * TN + j]);
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += a[i] * b[j];
        }}
        __syncthreads();
    }}
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) {{
            const int row = m0 + ty * TM + i, col = n0 + tx * TN + j;
            if (row < M && col < N) C[(size_t)row * N + col] = from_float(acc[i][j]);
        }}
}}
{host(task, "dim3((N + BN - 1) / BN, (M + BM - 1) / BM)", "THREADS")}"""


# -- tensor-core rungs (_gemm_mma.py, _gemm_wgmma.py) ---------------------------------------
MMA_SYNC_LAUNCH = register_terms(tc_launch("fp16", 2, 2), short_k=SHORT_K[0], deep_k=SHORT_K[1], chain=True)
RING_LAUNCH = register_terms(tc_launch("fp16", 2, 2), one_cta=ONE_CTA_SCALE)
def kind(task) -> str:
    return "bf16" if task.dtype == "bf16" else "f16"


def store(task) -> str:
    pair = "__floats2bfloat162_rn(v0, v1)" if task.dtype == "bf16" else "__floats2half2_rn(v0, v1)"
    t = "__nv_bfloat162" if task.dtype == "bf16" else "__half2"
    return f"*reinterpret_cast<{t}*>(C + (size_t)row * N + col) = {pair};   // cols col, col + 1"


def mma_src(pipelined: bool):
    def render(p, task, barrier=True, kt_end="KT"):
        return (mma_kernel("gemm_fp16", kind(task), p, args=ARGS, epilogue=store(task), pipelined=pipelined,
                           kt_end=kt_end, barrier=barrier)
                + mma_host("gemm_fp16", ENTRY.prototype(task), ENTRY.call_args(), p))
    return render


def wgmma_tma_src(p, task, wait_full=True, kt_end="KT", persistent=False):
    args = "scalar_t* __restrict__ C, int M, int N, int K"
    return (wgmma_kernel("gemm_fp16", kind(task), p, args=args, epilogue=store(task), kt_end=kt_end,
                         wait_full=wait_full, persistent=persistent)
            + wgmma_host("gemm_fp16", kind(task), ENTRY.prototype(task), "C, M, N, K", persistent=persistent))


# -- wgmma_split_k ---------------------------------------------------------------------------
SPLIT_STORE = ("*reinterpret_cast<float2*>(ws + ((size_t)blockIdx.y * M + row) * N + col) = "
               "make_float2(v0, v1);   // this split's fp32 partial")


def split_reduce_src(task, combine_end="SPLITS") -> str:
    """The reduce kernel: each output pair's SPLITS fp32 partials summed in a fixed order, one 16-bit rounding."""
    pair = "__floats2bfloat162_rn(t.x, t.y)" if task.dtype == "bf16" else "__floats2half2_rn(t.x, t.y)"
    t = "__nv_bfloat162" if task.dtype == "bf16" else "__half2"
    return f"""
__global__ void gemm_fp16_reduce(const float* __restrict__ ws, scalar_t* __restrict__ C, size_t MN) {{
    const size_t i = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * 2;   // N even: a pair never straddles rows
    if (i >= MN) return;
    float2 t = make_float2(0.f, 0.f);
    for (int s = 0; s < {combine_end}; ++s) {{
        const float2 v = *reinterpret_cast<const float2*>(ws + (size_t)s * MN + i);
        t.x += v.x;
        t.y += v.y;
    }}
    *reinterpret_cast<{t}*>(C + i) = {pair};
}}
"""


def wgmma_split_k_src(p, task, wait_full=True, combine_end="SPLITS"):
    return (f"#define SPLITS {p['SPLITS']}                  // K splits along blockIdx.y\n"
            + split_reduce_src(task, combine_end)
            + wgmma_kernel("gemm_fp16", kind(task), p, args="float* __restrict__ ws, int M, int N, int K",
                           epilogue=SPLIT_STORE, split_k=True, wait_full=wait_full)
            + wgmma_split_host("gemm_fp16", kind(task), ENTRY.prototype(task), "ws, M, N, K", "ws, C, MN"))


NO_BARRIER, SHORT_K = {"barrier": False}, {"kt_end": "KT - 1"}


class GemmFp16Cuda(GemmFp16Spec):
    impl = "cuda"
    shapes = ({"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096},
              {"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 14336, "K": 4096},
              {"M": 128, "N": 4096, "K": 14336}, {"M": 16, "N": 8192, "K": 8192})
    variants = (
        Rung("naive", "one thread per C element, fp32 FMAs reading A and B straight from global memory",
             (Param("block_x", (8, 16, 32), 16), Param("block_y", (4, 8, 16, 32), 16)),
             compute_eff=0.12, memory_eff=0.6, launch=naive_launch(), render=naive_src,
             bugs={"off_by_one": {"k_end": "K - 1"}, "half_accumulator": {"accum": HALF_ACC}}),
        Rung("smem_tiled", "TILE x TILE thread blocks stage A and B tiles in static shared memory",
             (Param("tile", (16, 32), 32),), compute_eff=0.22, memory_eff=0.7, smem="static",
             launch=smem_tiled_launch, render=smem_tiled_src,
             bugs={"missing_barrier": {"barrier": ""}, "half_accumulator": {"acc": "scalar_t"}}),
        Rung("register_blocked", "each thread accumulates a TM x TN micro-tile from float4 shared-memory reads",
             (Param("BM", (64, 128, 256), 128), Param("BN", (64, 128, 256), 128), Param("BK", (8, 16), 8),
              Param("TM", (4, 8), 8)),
             compute_eff=0.65, memory_eff=0.75, smem="static", launch=gemm_register_blocked_launch,
             render=register_blocked_src, bugs={"missing_barrier": {"barrier": ""}, "off_by_one": {"k_end": "BK - 1"}}),
        Rung("mma_sync", "tensor cores: ldmatrix.x4 fragments into mma.sync.m16n8k16, register-staged tiles",
             (BM, BN, Param("BK", (32, 64), 32), WARPS), needs=TC, path="fp16", compute_eff=0.52,
             memory_eff=0.8, smem="static", launch=MMA_SYNC_LAUNCH, render=mma_src(False),
             bugs={"missing_barrier": NO_BARRIER, "off_by_one": SHORT_K}),
        Rung("cp_async_pipeline", "STAGES-deep cp.async ring in dynamic shared memory feeding ldmatrix + mma.sync",
             (BM, BN, Param("BK", (32, 64), 32), Param("stages", (2, 3, 4), 3), WARPS),
             needs=TC | {"cp_async"}, path="fp16", compute_eff=0.85, memory_eff=0.85, smem="dynamic",
             launch=RING_LAUNCH, render=mma_src(True), bugs={"off_by_one": SHORT_K}),
        Rung("wgmma_tma", "sm_90a: TMA producer warp + wgmma consumer warpgroups on an mbarrier ring",
             (Param("BM", (64, 128, 256), 128), Param("BN", (64, 128, 256), 256), Param("stages", (2, 3, 4, 5, 6), 4)),
             needs=frozenset({"wgmma", "tma", "inline_ptx"}), path="fp16", compute_eff=0.77, memory_eff=0.88,
             smem="dynamic", launch=tc_launch("fp16", 2, 2, wgmma=True), render=wgmma_tma_src,
             bugs={"missing_barrier": {"wait_full": False}, "off_by_one": SHORT_K}, faults=("missing_barrier",)),
        # CUTLASS's sm90 persistent TMA kernels: a wave's worth of resident CTAs walks the output tiles, so the last
        # wave is not a partial one and a tile's epilogue overlaps the next tile's TMA loads (gemm_fp8_cuda's and
        # gemm_int8_cuda's rung of the same name, on the 16-bit wgmma)
        Rung("wgmma_tma_persistent", "sm_90a persistent: the wgmma_tma kernel on a grid of resident CTAs walking "
             "the output tiles round robin",
             (Param("BM", (64, 128, 256), 128), Param("BN", (64, 128, 256), 256), Param("stages", (2, 3, 4, 5, 6), 4)),
             needs=frozenset({"wgmma", "tma", "inline_ptx"}), path="fp16", compute_eff=0.77, memory_eff=0.88,
             smem="dynamic", launch=tc_launch("fp16", 2, 2, wgmma=True, persistent=True),
             render=partial(wgmma_tma_src, persistent=True), fit_as="wgmma_tma",
             bugs={"missing_barrier": {"wait_full": False}, "off_by_one": SHORT_K}, faults=("missing_barrier",)),
        # small M, long K (decode): 64 x 128 tiles leave SMs idle. BM 64 only: the H100 ran BM 128 slower, the model
        # faster (us, meas / model, BN 128): M=16 N=K=8192 6 stages 2 splits 56.2 / 51.2 vs 53.1 / 52.6, M=128 N=4096
        # K=14336 55.0 / 50.8 vs 53.4 / 54.2 (h100_roomK_k12), M=16 4 st 4 splits 68.5 / 55.3 vs 52.9 / 57.3 (s61717)
        Rung("wgmma_split_k", "sm_90a split-K: SPLITS CTAs per output tile each run the TMA + wgmma pipeline over a "
             "share of K into an fp32 partial slice; a reduce kernel sums the slices",
             (Param("BM", (64,), 64), Param("BN", (64, 128, 256), 128), Param("stages", (2, 3, 4, 5, 6), 4),
              Param("SPLITS", (2, 4, 8), 4)),
             needs=frozenset({"wgmma", "tma", "inline_ptx"}), path="fp16", compute_eff=0.77, memory_eff=0.88,
             smem="dynamic", launch=split_launch(tc_launch("fp16", 2, 2, wgmma=True), "partials", bk=64, reduce_later=True),
             render=wgmma_split_k_src, fit_as="wgmma_tma", bugs={"bad_combine_index": {"combine_end": "SPLITS - 1"}}),
        # (no missing_barrier: the H100 never finished its render, labels n1 / n8, where wgmma_tma's crashes at once)
    )

    def assemble(self, body, variant, params, task):
        return f"{prelude(task, TMA_INCLUDES if 'tma' in variant.needs else ())}\n{body}"
