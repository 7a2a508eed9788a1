"""INT8 GEMM in CUDA: int32 accumulation, dequantized to fp16 with per-row (token) and per-column
(channel) scales: C[m, n] = half(sum_k A[m, k] B[n, k] * scale_a[m] * scale_b[n]).

Ladder: thread per output -> shared-memory tiles with __dp4a (4 MACs an instruction) ->
tensor cores mma.sync.m16n8k32.s8 -> cp.async ring -> split-K over blockIdx.z (int32 partial slices and
a reduce kernel: decode GEMMs) -> Hopper TMA + wgmma s8 -> persistent (the resident CTAs walk the output tiles).
"""
from dataclasses import replace

from ..base import Cost, Launch, OpModule, Param, Rung, Task, TorchRef, cdiv
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ._gemm_mma import mma_host, mma_kernel, one_launch_host
from ._gemm_tc import naive_launch, register_terms, tc_launch, tc_traffic
from ._gemm_wgmma import TMA_INCLUDES, wgmma_host, wgmma_kernel
from ._int8_split import SHORT_COMBINE, SPLIT_PARAMS, split_launch_int8, split_src
from .gemm_fp16_spec import GEMM_DIMS, GEMM_SHAPES_8BIT

ENTRY = Entry("gemm_int8", (
    Arg("A", "in", ("M", "K"), "int8"), Arg("B", "in", ("N", "K"), "int8"), Arg("scale_a", "in", ("M",), "fp32"),
    Arg("scale_b", "in", ("N",), "fp32"), Arg("C", "out", ("M", "N"), "fp16"), Scalar("M"), Scalar("N"), Scalar("K")))
TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
# BM 256 (CUTLASS's 256 x 128 int8 threadblock) was tried and taken out: on this kernel's 2 x WN warp grid its
# 128 x 32 warp tiles ran slower on the H100 (ROOM_PLAN=edges, 10:11 UTC: mma_sync 78.3 vs 50.2 us at 2048^3,
# 556.9 vs 356.2 at 4096^3; cp_async_pipeline 37.3 vs 36.2, 241.0 vs 236.5) where the model had 0.6-0.75x
BM, BN = Param("BM", (64, 128), 128), Param("BN", (64, 128, 256), 128)
WARPS = Param("warps", (4, 8), 8)
OPERANDS = "const int8_t* __restrict__ A, const int8_t* __restrict__ B, "
ARGS = "const float* __restrict__ scale_a, const float* __restrict__ scale_b, half* __restrict__ C, int M, int N, int K"
COL_SCALE = " * __ldg(scale_b + {col})"        # the per-channel scale; missing_scale drops it
NO_COL_SCALE = {"col_scale": ""}


def host(task, grid: str, block: str) -> str:
    return one_launch_host(ENTRY, task, "gemm_int8_kernel", grid, block)


# -- naive ---------------------------------------------------------------------------------
def naive_src(p, task, k_end="K", col_scale=COL_SCALE):
    return f"""
#define BLOCK_X {p['block_x']}
#define BLOCK_Y {p['block_y']}

// One thread per output: exact int32 sum of K int8 products, dequantized once at the end.
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_int8_kernel({OPERANDS}{ARGS}) {{
    const int n = blockIdx.x * BLOCK_X + threadIdx.x, m = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (m >= M || n >= N) return;
    const int8_t* a = A + (size_t)m * K;
    const int8_t* b = B + (size_t)n * K;
    int acc = 0;
    for (int k = 0; k < {k_end}; ++k) acc += (int)a[k] * (int)b[k];
    C[(size_t)m * N + n] = __float2half((float)acc * scale_a[m]{col_scale.format(col='n')});
}}
{host(task, "dim3((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y)", "dim3(BLOCK_X, BLOCK_Y)")}"""

# -- dp4a_tiled ----------------------------------------------------------------------------
# dp4a does 4 MACs per issue slot: its fraction of the fp32 FMA peak can reach ~4x a scalar kernel's
def dp4a_tiled_launch(p, task):
    m, n, t = task["M"], task["N"], p["tile"]
    return Launch(grid=cdiv(m, t) * cdiv(n, t), threads=t * t, smem_bytes=(t * t + t * (t + 1)) * 4, regs=30,
                  bytes_per_access=4, traffic=tc_traffic(task, t, t, 0.02, 1), compute_scale=1.0 if t == 32 else 0.75,
                  tile_quant=m * n / (cdiv(m, t) * t * cdiv(n, t) * t))


def dp4a_tiled_src(p, task, barrier="__syncthreads();", col_scale=COL_SCALE):
    return f"""
#define TILE {p['tile']}

// K travels as 4-byte words (4 int8); each __dp4a folds one word pair into the int32 sum.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_int8_kernel({OPERANDS}{ARGS}) {{
    __shared__ int As[TILE][TILE];       // As[m][k word]
    __shared__ int Bs[TILE][TILE + 1];   // Bs[k word][n]; +1 keeps the transposed store conflict-free
    const int tx = threadIdx.x, ty = threadIdx.y, KW = K / 4;
    const int m = blockIdx.y * TILE + ty, n = blockIdx.x * TILE + tx, bn = blockIdx.x * TILE + ty;
    const int* Aw = reinterpret_cast<const int*>(A);
    const int* Bw = reinterpret_cast<const int*>(B);
    int acc = 0;
    for (int w0 = 0; w0 < KW; w0 += TILE) {{
        As[ty][tx] = (m < M && w0 + tx < KW) ? Aw[(size_t)m * KW + w0 + tx] : 0;   // coalesced along K
        Bs[tx][ty] = (bn < N && w0 + tx < KW) ? Bw[(size_t)bn * KW + w0 + tx] : 0;
        {barrier}
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc = __dp4a(As[ty][kk], Bs[kk][tx], acc);
        __syncthreads();
    }}
    if (m < M && n < N) C[(size_t)m * N + n] = __float2half((float)acc * scale_a[m]{col_scale.format(col='n')});
}}
{host(task, "dim3((N + TILE - 1) / TILE, (M + TILE - 1) / TILE)", "dim3(TILE, TILE)")}"""


# -- tensor-core rungs (_gemm_mma.py, _gemm_wgmma.py) ---------------------------------------
# The mma.sync rungs' order at the big tiles (issue 30): _gemm_tc's model gave the 128 x 256 tile of 8 warps (64 x 64
# warp tiles, ~200 registers a thread, so ONE resident CTA an SM) and the 64-wide K slice of the register-staged loop
# more than the H100/H200 show. Every ok row of measurements/*.json (gpu-check seeds and ROOM_PLAN=edges, scripts/
# roomK_resid.py) against the model before this change: mma_sync at 2 CTAs an SM and BK 128 ran 1.06x its model
# (median of 18 rows); 128 x 256 x 8 warps (1 CTA) 0.83-0.85x at BK 128 and 0.61-0.62x at BK 64 (2048^3: 46.6 /
# 63.2 us against 128 x 128's 39.9 / 50.2; 4096^3 BK 64: 407.4 vs 356.2); 128 x 128 at BK 64 0.80-0.89x (the K loop
# of a register-staged tile waits a global load, a barrier and a store to smem each trip, twice as often at BK 64:
# 1.26-1.31x BK 128's time measured, 0.98x modelled). cp_async_pipeline's 128 x 256 x 8 warps ran 0.81-0.92x its
# model (4 rows) against 1.01x (median of 24) where two CTAs fit; a ring one CTA an SM for want of shared memory (128
# x 128, BK 128, 4 stages) ran level with 3 stages under a wave (110.9 vs 110.7 us at M=128, H200 58.4 vs 59.4 at
# M=16) and 1.17x slower over many (273.6 vs 234.5 us at 4096^3, plan k3, measurements/h100_roomK_k3.json): a single
# CTA an SM on a grid of waves runs slow, every __syncthreads of its K loop stalling all the SM's warps. The
# factors below (_gemm_tc.register_terms) take the model to those rows and plan k3's (through the fit's compute_scale
# exponent): sim/measured geomean 1.05 at one CTA and 0.99 at two (cp_async_pipeline), 1.05 / 1.03 (mma_sync), BK 64
# 1.05 / BK 128 1.04 (mma_sync); pair order within a GPU and shape 0.884 -> 0.946 (258 pairs); the 2048^3 mma_sync
# rows (six tiles) rank as the device ranks them (python3 scripts/roomK_resid.py gemm_int8_cuda
# mma_sync,cp_async_pipeline --rows).
MMA_SYNC_LAUNCH = register_terms(tc_launch("int8", 1, 2), one_cta=0.78, short_k=0.8, elt=1)
RING_LAUNCH = register_terms(tc_launch("int8", 1, 2), one_cta=0.82, elt=1)


def store(col_scale: str) -> str:
    return ("const float sa = __ldg(scale_a + row);\n"
            "            *reinterpret_cast<__half2*>(C + (size_t)row * N + col) = __floats2half2_rn("
            f"(float)v0 * sa{col_scale.format(col='col')}, (float)v1 * sa{col_scale.format(col='col + 1')});")


def mma_src(pipelined: bool):
    def render(p, task, barrier=True, kt_end="KT", col_scale=COL_SCALE):
        return (mma_kernel("gemm_int8", "s8", p, args=OPERANDS + ARGS, epilogue=store(col_scale),
                           pipelined=pipelined, kt_end=kt_end, barrier=barrier)
                + mma_host("gemm_int8", ENTRY.prototype(task), ENTRY.call_args(), p))
    return render


def wgmma_src(persistent: bool):
    # int32 wgmma sums are exact: no per-K-block promotion (fp8's), the accumulator stays in the wgmma registers
    def render(p, task, kt_end="KT", col_scale=COL_SCALE):
        return (wgmma_kernel("gemm_int8", "s8", p, args=ARGS, epilogue=store(col_scale), kt_end=kt_end,
                             persistent=persistent)
                + wgmma_host("gemm_int8", "s8", ENTRY.prototype(task), "scale_a, scale_b, C, M, N, K",
                             persistent=persistent))
    return render


NO_BARRIER, SHORT_K = {"barrier": False}, {"kt_end": "KT - 1"}
# The H100 (scripts/room_device_check.py ROOM_PLAN=int8p, 2026-12-06 09:40 UTC, 30 cases, every label held) ran the
# persistent s8 kernel level with wgmma_tma where the tiles fill one wave (2048^3: 23.8 / 25.3 / 29.6 us against
# 23.9 / 25.2 / 29.2 at 4 / 3 / 2 stages; M=16: 31.6-47.1 both) and 0.97x where they leave a ragged last wave
# (4096^3: 119.2 / 124.2 vs 122.5 / 127.9): the ragged wave's gain, none of _gemm_tc's 1.04 for an epilogue
# overlapping the next tile's loads (the int32 epilogue is short)
PERSISTENT_OVERLAP = 1.04


def persistent_launch(p, task):
    launch = tc_launch("int8", 1, 2, wgmma=True, persistent=True)(p, task)
    return replace(launch, compute_scale=launch.compute_scale / PERSISTENT_OVERLAP)
WGMMA_PARAMS = (Param("BM", (64, 128, 256), 128), Param("BN", (64, 128, 256), 256), Param("stages", (2, 3, 4, 5, 6), 4))
WGMMA_NEEDS = frozenset({"wgmma", "tma", "inline_ptx"})


class GemmInt8Cuda(OpModule):
    op, impl, family = "gemm_int8", "cuda", "matmul"
    title = "INT8 GEMM with per-token / per-channel dequant"
    desc = ("C[M, N] = fp16((A[M, K] . B[N, K]^T) * scale_a[M, 1] * scale_b[1, N]) for int8 A and B (B K-major), "
            "exact int32 accumulation, fp32 scales; K a multiple of 16, N even.")
    dims = {**GEMM_DIMS, "N": "rows of B, columns of C (output channels)"}
    shapes = GEMM_SHAPES_8BIT
    dtypes = ("int8",)
    vendors = ("nvidia",)   # __dp4a and every later rung are NVIDIA-only
    entry, inputs = ENTRY, ("A", "B", "scale_a", "scale_b")
    check_shape = {"M": 2048, "N": 2048, "K": 2048}
    tolerance = "fp16"            # exact int32 sums, two fp32 scale multiplies, half output
    variants = (
        Rung("naive", "one thread per output, scalar int8 loads, int32 multiply-adds",
             (Param("block_x", (8, 16, 32), 16), Param("block_y", (4, 8, 16, 32), 16)),
             compute_eff=0.1, memory_eff=0.6, launch=naive_launch(elt=1), render=naive_src,
             bugs={"off_by_one": {"k_end": "K - 1"}, "missing_scale": NO_COL_SCALE}),
        Rung("dp4a_tiled", "TILE x TILE blocks stage 4-byte words in static smem, __dp4a dot products",
             (Param("tile", (16, 32), 32),), compute_eff=0.6, memory_eff=0.7, smem="static",
             launch=dp4a_tiled_launch, render=dp4a_tiled_src,
             bugs={"missing_barrier": {"barrier": ""}, "missing_scale": NO_COL_SCALE}),
        Rung("mma_sync", "int8 tensor cores: ldmatrix + mma.sync.m16n8k32.s32.s8.s8, register-staged tiles",
             (BM, BN, Param("BK", (64, 128), 128), WARPS), needs=TC, path="int8", compute_eff=0.52,
             memory_eff=0.8, smem="static", launch=MMA_SYNC_LAUNCH, render=mma_src(False),
             bugs={"missing_barrier": NO_BARRIER, "off_by_one": SHORT_K}),
        Rung("cp_async_pipeline", "STAGES-deep cp.async ring in dynamic smem feeding int8 mma.sync",
             (BM, Param("BN", (128, 256), 128), Param("BK", (64, 128), 64), Param("stages", (2, 3, 4), 3), WARPS),
             needs=TC | {"cp_async"}, path="int8", compute_eff=0.85, memory_eff=0.85, smem="dynamic",
             launch=RING_LAUNCH, render=mma_src(True),
             bugs={"off_by_one": SHORT_K, "missing_scale": NO_COL_SCALE}),
        # small M, long K: N / BN output tiles leave SMs idle, so K is cut over blockIdx.z (_int8_split.py)
        Rung("cp_async_split_k", "the cp.async + int8 mma.sync kernel with K split over blockIdx.z into exact int32 "
             "partial slices; a reduce kernel adds them and dequantizes", SPLIT_PARAMS, needs=TC | {"cp_async"},
             path="int8", compute_eff=0.85, memory_eff=0.85, smem="dynamic",
             launch=split_launch_int8, fit_as="cp_async_pipeline",
             render=split_src(OPERANDS, ENTRY, COL_SCALE),
             bugs={"bad_combine_index": SHORT_COMBINE, "off_by_one": SHORT_K, "missing_scale": NO_COL_SCALE}),
        Rung("wgmma_tma", "sm_90a: TMA producer warp + wgmma m64nNk32.s32.s8.s8 consumers on an mbarrier ring",
             WGMMA_PARAMS, needs=WGMMA_NEEDS, path="int8", compute_eff=0.69, memory_eff=0.88,
             smem="dynamic", launch=tc_launch("int8", 1, 2, wgmma=True), render=wgmma_src(False),
             bugs={"off_by_one": SHORT_K, "missing_scale": NO_COL_SCALE}),
        # CUTLASS's persistent TMA kernels: the resident CTAs walk the output tiles, so no partial last wave
        # and one tile's epilogue overlaps the next tile's TMA loads (gemm_fp8_cuda's rung, int32 accumulators)
        Rung("wgmma_tma_persistent", "sm_90a persistent: the wgmma_tma kernel on a grid of resident CTAs "
             "walking the output tiles round robin", WGMMA_PARAMS, needs=WGMMA_NEEDS, path="int8",
             compute_eff=0.69, memory_eff=0.88, smem="dynamic",
             launch=persistent_launch, render=wgmma_src(True), fit_as="wgmma_tma",
             bugs={"off_by_one": SHORT_K, "missing_scale": NO_COL_SCALE}),
    )

    def cost(self, task: Task) -> Cost:
        m, n, k = task["M"], task["N"], task["K"]
        return Cost(flops=2 * m * n * k, bytes=m * k + n * k + 2 * m * n + 4 * (m + n))

    torch_ref = TorchRef(
        body="acc = torch.matmul(A.double(), B.double().t())   # exact int32 sums\n"
             "        return (acc * scale_a.double()[:, None] * scale_b.double()[None, :]).half()",
        inputs="[torch.randint(-128, 128, (M, K), dtype=DTYPE, device='cuda'),\n"
               "            torch.randint(-128, 128, (N, K), dtype=DTYPE, device='cuda'),\n"
               "            torch.rand(M, device='cuda') / 64, torch.rand(N, device='cuda') / (64 * K ** 0.5)]")

    def assemble(self, body, variant, params, task):
        return f"{prelude(task, TMA_INCLUDES if 'tma' in variant.needs else ())}\n{body}"
