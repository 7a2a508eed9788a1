"""W4A16 GEMM in CUDA: y = x @ dequant(W)^T, int4 weights packed 8 per uint32, fp16/bf16 group scales.

Weight format: qweight [N, K/8] uint32, nibble j of word w holds k = 8w + j (unsigned, zero point 8);
scales [N, K/128]; W[n, k] = (q - 8) * scales[n, k / 128].
Ladder: dequantize all of W to a 16-bit buffer then a tiled GEMM (2 launches) -> one kernel that
dequantizes while staging tiles (CUDA cores) -> mma.sync tensor cores with in-register dequant
(prmt + lop3 magic-exponent trick) -> cp.async multi-stage pipeline -> split-K for small M; on Hopper at large
M, the 16-bit copy of W again, then the TMA + wgmma GEMM on it (_dequant_wgmma.py).
"""
from ..base import Cost, Launch, OpModule, Param, Rung, Task, DTYPE_BYTES, cdiv, kernelbench_program, unchecked
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ..fragments import REGISTER_TILE_FMA
from ..ktile import BARRIER_STALL, trip_scale
from ._dequant_wgmma import NEEDS as WGMMA, PARAMS as WGMMA_TILES, launch_model, wgmma_on_copies
from ._gemm_wgmma import TMA_INCLUDES
from ._int4_tc import BK, cp_async_pipeline_src, mma_lop3_dequant_src, split_k_small_m_src

ENTRY = Entry("gemm_int4", (
    Arg("x", "in", ("M", "K")), Arg("qweight", "in", ("N", "K // 8"), "uint32"),
    Arg("scales", "in", ("N", "K // 128")), Arg("y", "out", ("M", "N")), Scalar("M"), Scalar("N"), Scalar("K")))
GROUP = 128
MMA_BM = Param("BM", (16, 32, 64), 32)
MMA_BN = Param("BN", (64, 128), 64)
MMA_NEEDS = frozenset({"mma", "ldmatrix", "inline_ptx"})


# -- dequant_then_gemm ----------------------------------------------------------------------
def dequant_then_gemm_launch(p, task):
    m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
    tile = p["TILE"]
    # the 16-bit copy of W is written once and read back once per M tile (4x the packed bytes each)
    w16 = n * k * e
    extra = w16 + w16 * cdiv(m, tile) * 0.3 + m * k * e * cdiv(n, tile) * 0.1
    return Launch(grid=cdiv(n, tile) * cdiv(m, tile), threads=tile * tile, smem_bytes=2 * tile * (tile + 1) * 4,
                  regs=30, bytes_per_access=e, traffic=1 + extra / GemmInt4Cuda().cost(task).bytes,
                  lane_util=min(1.0, m / tile), launches=2)


def dequant_kernel(scale: str) -> str:
    """Kernel 1 of the dequant-first rungs: the 16-bit copy of W, one packed word a thread."""
    return f"""union Pack {{ uint4 u; scalar_t h[8]; }};

// Kernel 1: one thread per packed word -> 8 scaled 16-bit weights, one 16-byte store.
__global__ void dequant_int4(const uint32_t* __restrict__ qweight, const scalar_t* __restrict__ scales,
                             scalar_t* __restrict__ w, int N, int K) {{
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)N * (K / 8)) return;
    const size_t n = i / (K / 8);
    const int k = (int)(i % (K / 8)) * 8;
    const float s = to_float(scales[n * (K / GROUP) + k / GROUP]);
    const uint32_t q = qweight[i];
    Pack out;
#pragma unroll
    for (int j = 0; j < 8; ++j) out.h[j] = from_float((float)((int)((q >> (4 * j)) & 0xFu) - 8){scale});
    reinterpret_cast<uint4*>(w)[i] = out.u;
}}
"""


def dequant_then_gemm_src(p, task, scale=" * s", acc="float"):
    return f"""#define TILE {p['TILE']}
{dequant_kernel(scale)}
// Kernel 2: classic shared-memory tiled GEMM, one output per thread, y = x @ w^T.
extern "C" __global__ void __launch_bounds__(TILE * TILE)
gemm_int4_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ w, scalar_t* __restrict__ y,
                 int M, int N, int K) {{
    __shared__ float sx[TILE][TILE + 1];     // +1: column reads are bank-conflict free
    __shared__ float sw[TILE][TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty, n0 = blockIdx.x * TILE;
    {acc} acc = 0;
    for (int k0 = 0; k0 < K; k0 += TILE) {{
        sx[ty][tx] = row < M ? to_float(x[(size_t)row * K + k0 + tx]) : 0.f;
        sw[ty][tx] = to_float(w[(size_t)(n0 + ty) * K + k0 + tx]);
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < TILE; ++kk) acc += ({acc})(sx[ty][kk] * sw[tx][kk]);
        __syncthreads();
    }}
    if (row < M) y[(size_t)row * N + n0 + tx] = from_float((float)acc);
}}

void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {{
    scalar_t* w = nullptr;                   // N x K 16-bit copy: 4x the packed bytes, written then re-read
    cudaMallocAsync((void**)&w, (size_t)N * K * sizeof(scalar_t), stream);
    const size_t words = (size_t)N * (K / 8);
    dequant_int4<<<(unsigned)((words + 255) / 256), 256, 0, stream>>>(qweight, scales, w, N, K);
    gemm_int4_kernel<<<dim3(N / TILE, (M + TILE - 1) / TILE), dim3(TILE, TILE), 0, stream>>>(x, w, y, M, N, K);
    cudaFreeAsync(w, stream);
}}
"""

# -- dequant_then_wgmma ---------------------------------------------------------------------
def dequant_then_wgmma_src(p, task, scale=" * s", kt_end="KT"):
    return dequant_kernel(scale) + wgmma_on_copies("gemm_int4", p, task, kt_end) + """
void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {
    scalar_t* w = nullptr;                   // N x K 16-bit copy of W, K-major like x: both TMA operands
    cudaMallocAsync((void**)&w, (size_t)N * K * sizeof(scalar_t), stream);
    const size_t words = (size_t)N * (K / 8);
    dequant_int4<<<(unsigned)((words + 255) / 256), 256, 0, stream>>>(qweight, scales, w, N, K);
    gemm_int4_wgmma(x, w, y, M, N, K, stream);
    cudaFreeAsync(w, stream);
}
"""


# The H100 (plan k5, measurements/h100_roomK_k5.json) ran this rung 2.5x faster than split_k_small_m at M=1024 N=14336
# K=4096 (251.5-265.2 us against 660.1) and 3.5x at 4096^3 (220.3 against 760.8), 1.4x slower at M=128 N=K=4096
# (44.3 against 32.0); the module's fit (ceiling 3.18, from mma.sync kernels dequantizing in their main loop) put its
# 10 rows at 2.30x the device: WGMMA_LEVEL 3.0 takes them to 1.01x (0.87-1.21; scripts/roomK_level.py).
WGMMA_LEVEL = 3.0


def w_copy_bytes(task):
    """The copy pass: packed W and its scales read, the 16-bit copy written."""
    n, k, e = task["N"], task["K"], DTYPE_BYTES[task.dtype]
    return n * k // 2 + n * (k // GROUP) * e + n * k * e


# -- fused_dequant_tiled --------------------------------------------------------------------
def tiling(p, task):
    """(tiles, A/W re-read bytes, tile quantization) of BM x BN output tiles."""
    m, n, k, e, bm, bn = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype], p["BM"], p["BN"]
    rereads = m * k * e * (cdiv(n, bn) - 1) + n * k / 2 * (cdiv(m, bm) - 1)
    return cdiv(n, bn) * cdiv(m, bm), rereads, m * n / (cdiv(m, bm) * bm * cdiv(n, bn) * bn)


def fused_dequant_tiled_launch(p, task):
    bm, bn = p["BM"], p["BN"]
    tiles, rereads, quant = tiling(p, task)
    smem = 32 * (bm + 1) * 4 + 32 * bn * 4
    intensity = (bm // 16) * (bn // 16) / ((bm // 16) + (bn // 16))   # FMAs per smem load per thread
    return Launch(grid=tiles, threads=256, smem_bytes=smem, regs=28 + 3 * (bm // 16) * (bn // 16) // 2,
                  bytes_per_access=8, traffic=1 + 0.15 * rereads / GemmInt4Cuda().cost(task).bytes,
                  compute_scale=min(1.0, intensity / 2.7), tile_quant=quant)


def fused_dequant_tiled_src(p, task, barrier="\n        __syncthreads();", scale=" * s"):
    return f"""#define BM {p['BM']}
#define BN {p['BN']}
#define BK 32
#define TM (BM / 16)              // rows per thread (16 x 16 threads)
#define TN (BN / 16)              // columns per thread

extern "C" __global__ void __launch_bounds__(256)
gemm_int4_kernel(const scalar_t* __restrict__ x, const uint32_t* __restrict__ qweight,
                 const scalar_t* __restrict__ scales, scalar_t* __restrict__ y, int M, int N, int K) {{
    __shared__ float sx[BK][BM + 1];          // k-major: a thread's TM rows are one broadcast each
    __shared__ float sw[BK][BN];              // dequantized, k-major: lanes read consecutive columns
    const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    float acc[TM][TN] = {{}};
    for (int k0 = 0; k0 < K; k0 += BK) {{
        for (int i = tid; i < BM * BK; i += 256) {{          // k fastest: coalesced reads of x
            const int r = i / BK, c = i % BK;
            sx[c][r] = m0 + r < M ? to_float(x[(size_t)(m0 + r) * K + k0 + c]) : 0.f;
        }}
        for (int i = tid; i < BN * (BK / 8); i += 256) {{    // unpack 8 weights per word while staging
            const int r = i % BN, c = i / BN;
            const uint32_t q = qweight[(size_t)(n0 + r) * (K / 8) + k0 / 8 + c];
            const float s = to_float(scales[(size_t)(n0 + r) * (K / GROUP) + k0 / GROUP]);
#pragma unroll
            for (int j = 0; j < 8; ++j) sw[c * 8 + j][r] = to_float(from_float((float)((int)((q >> (4 * j)) & 0xFu) - 8){scale}));
        }}{barrier}{REGISTER_TILE_FMA}
        __syncthreads();
    }}
#pragma unroll
    for (int i = 0; i < TM; ++i) {{
        const int row = m0 + ty + 16 * i;
        if (row >= M) continue;
#pragma unroll
        for (int j = 0; j < TN; ++j) y[(size_t)row * N + n0 + tx + 16 * j] = from_float(acc[i][j]);
    }}
}}

void gemm_int4(const scalar_t* x, const uint32_t* qweight, const scalar_t* scales, scalar_t* y,
               int M, int N, int K, cudaStream_t stream) {{
    gemm_int4_kernel<<<dim3(N / BN, (M + BM - 1) / BM), 256, 0, stream>>>(x, qweight, scales, y, M, N, K);
}}
"""


# -- the tensor-core rungs (_int4_tc.py) ----------------------------------------------------
def mma_launch(p, task):
    m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
    bm, bn, bk = p["BM"], p["BN"], p.get(BK.name, BK.default)
    splits = p.get("SPLITS", 1)
    tiles, rereads, quant = tiling(p, task)
    warps_m = 2 if bm >= 64 else 1
    wm, wn = bm // warps_m, bn // (4 // warps_m)
    mt, nt = wm // 16, wn // 8
    regs = 44 + 5 * mt * nt + 6 * nt          # 4 fp32 accumulators per mma tile, scales, x fragments
    stage = bm * (bk + 8) * e + bn * bk // 2
    stages = p.get("STAGES", 1)
    scale = min(1.0, (wm * wn / (wm + wn)) / 21.3) ** 0.5      # a 32x64 warp tile reuses fragments fully
    scale *= task.gpu.mma_sync_scale("fp16") * trip_scale(bk, BK.default, BARRIER_STALL)   # Hopper: mma.sync below wgmma
    partial_bytes = 2 * m * n * 4 * splits if splits > 1 else 0
    return Launch(grid=tiles * splits, threads=128, smem_bytes=stage * stages, regs=regs,
                  bytes_per_access=max(16, stage * max(1, stages - 1) // 256),
                  traffic=1 + (0.1 * rereads + partial_bytes) / GemmInt4Cuda().cost(task).bytes, compute_scale=scale,
                  tile_quant=quant, lane_util=min(1.0, k / (bk * splits * 2)), launches=2 if splits > 1 else 1)


def check_args(d, model, x, ref, out_like):
    """gpu_check adapter: qweight and scales are buffers of the reference Model."""
    y = out_like(ref)
    return [x[0], model.qweight, model.scales, y, d["M"], d["N"], d["K"]], [("y", y, ref)]


NO_SCALE = {"scale": ""}


class GemmInt4Cuda(OpModule):
    op, impl, family = "gemm_int4", "cuda", "matmul"
    title = "W4A16 GEMM (int4 weights, group-128 scales)"
    desc = ("y[M, N] = x[M, K] @ W^T with W[n, k] = (q[n, k] - 8) * scales[n, k // 128]; q packed 8 per uint32 "
            "along K (nibble j of word w is k = 8w + j), each W rounded to the activation dtype (as a half2 multiply "
            "by the scale rounds it); fp32 accumulation, y in the activation dtype.")
    dims = {"M": "tokens (rows of x)", "N": "output features", "K": "input features (multiple of 128)"}
    shapes = ({"M": 1, "N": 4096, "K": 4096}, {"M": 1, "N": 14336, "K": 4096}, {"M": 16, "N": 4096, "K": 14336},
              {"M": 128, "N": 4096, "K": 4096}, {"M": 1024, "N": 14336, "K": 4096}, {"M": 4096, "N": 4096, "K": 4096})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"M": 16, "N": 4096, "K": 14336}                             # M < BM: masked rows
    tolerance = "quant"
    check_adapter = staticmethod(check_args)
    variants = (
        Rung("dequant_then_gemm", "kernel 1 writes W as 16-bit to a buffer, kernel 2 is a smem-tiled GEMM",
             (Param("TILE", (16, 32), 16),), path="fp32", compute_eff=0.25, memory_eff=0.75, smem="static",
             launch=dequant_then_gemm_launch, render=dequant_then_gemm_src,
             bugs={"missing_scale": NO_SCALE, "half_accumulator": {"acc": "scalar_t"}}),
        Rung("fused_dequant_tiled", "one kernel: W unpacked and scaled while staged to smem, register-blocked FMA",
             (Param("BM", (16, 32, 64), 32), Param("BN", (64, 128), 128)), path="fp32", compute_eff=0.5,
             memory_eff=0.8, smem="static", launch=fused_dequant_tiled_launch, render=fused_dequant_tiled_src,
             bugs={"missing_barrier": {"barrier": ""}, "missing_scale": NO_SCALE}),
        Rung("mma_lop3_dequant", "mma.sync m16n8k16 tensor cores, ldmatrix for x, W dequantized in registers (prmt/lop3)",
             (MMA_BM, MMA_BN, BK), needs=MMA_NEEDS, path="fp16", compute_eff=0.5, memory_eff=0.82, smem="static",
             launch=mma_launch, render=mma_lop3_dequant_src,
             bugs={"missing_scale": {"scale": False}, "missing_barrier": {"barrier": ""}}),
        Rung("cp_async_pipeline", "STAGES-deep cp.async ring of x and packed-W tiles overlapping loads with mma",
             (MMA_BM, MMA_BN, Param("STAGES", (2, 3, 4, 5), 3), BK), needs=MMA_NEEDS | {"cp_async"}, path="fp16",
             compute_eff=0.68, memory_eff=0.88, smem="dynamic", launch=mma_launch, render=cp_async_pipeline_src,
             bugs={"off_by_one": {"kt_end": "k_tiles - 1"}, "missing_scale": {"scale": False}}),
        Rung("split_k_small_m", "K split over blockIdx.z into fp32 partials plus a combine kernel: fills the GPU at small M",
             # 2 stages: H100 (measurements/h100_roomK_k12.json, BK 128) 32.7 / 33.2 / 36.1 us for 2 / 3 / 4 at M=16
             # N=4096 K=14336 (BM 32 BN 64, 8 splits), 32.0 / 33.7 / 34.3 at M=128 N=K=4096 (BM 64 BN 128, 4 splits);
             # model 23.5 / 26.2 / 28.3 and 24.2 / 26.9 / 29.1 (the order; the rung's level is ~25% fast on the H100)
             # BN 256 (room_table edge BN+; the model has it 1.02-1.13x ahead at M = 1 / 16 on 12 of 58 kernelinfer
             # tasks; ptxas sm_90a 120 / 155 registers at BM 16 / 32, no spill) stays off: correct on an H100 (roomC
             # j2, measurements/h100_roomC_v2.json), BM 32 2 stages BK 128, against BN 128: 28.5 vs 29.9 us at M=1
             # N=14336 K=4096 (16 splits) but 32.8 vs 30.2 at M=16 N=4096 K=14336 (8 splits), where the model has it
             # ahead at both (21.7 vs 23.5, 23.2 vs 24.9): on, it would credit M=16 tasks with a gain the H100 denies
             (MMA_BM, Param("BN", (64, 128, *unchecked(256)), 64), Param("STAGES", (2, 3, 4), 3),
              Param("SPLITS", (1, 2, 4, 8, 16), 4), BK),
             needs=MMA_NEEDS | {"cp_async"}, path="fp16", compute_eff=0.68, memory_eff=0.9, smem="dynamic",
             launch=mma_launch, render=split_k_small_m_src,
             bugs={"bad_combine_index": {"idx": "(size_t)i * SPLITS + s"}, "off_by_one": {"kt_end": "k_tiles - 1"}},
             # the combine's partial of split s at i * SPLITS + s, not s * M * N + i: the same with one split
             bug_params=(("bad_combine_index", "SPLITS", 2),)),
        Rung("dequant_then_wgmma", "sm_90a, large M: a vectorized pass writes W as 16-bit once, then a TMA producer "
             "warp + wgmma consumer warpgroups GEMM on x and the copy (2 launches)",
             WGMMA_TILES, needs=WGMMA, path="fp16", compute_eff=0.77, memory_eff=0.88, smem="dynamic",
             launch=launch_model(lambda task: GemmInt4Cuda().cost(task).bytes, w_copy_bytes, 2, WGMMA_LEVEL),
             render=dequant_then_wgmma_src, bugs={"missing_scale": NO_SCALE, "off_by_one": {"kt_end": "KT - 1"}}),
    )

    def cost(self, task: Task) -> Cost:
        m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * m * n * k, bytes=m * k * e + n * k // 2 + n * (k // GROUP) * e + m * n * e)

    def reference(self, task: Task) -> str:
        body = ("shifts = torch.arange(0, 32, 4, device=x.device, dtype=torch.int32)\n"
                "        q = (self.qweight.unsqueeze(-1) >> shifts) & 0xF            # [N, K/8, 8], k = 8w + j\n"
                "        s = self.scales.float().repeat_interleave(128, dim=1)      # [N, K]\n"
                "        w = ((q.reshape(N, K).float() - 8.0) * s).to(x.dtype).float()   # W in 16 bits, as the kernels\n"
                "        return (x.float() @ w.t()).to(x.dtype)")
        init = ("self.register_buffer('qweight', torch.randint(-2**31, 2**31 - 1, (N, K // 8), dtype=torch.int32))\n"
                "        self.register_buffer('scales', (torch.rand(N, K // 128) * 0.01 + 0.005).to(DTYPE))")
        return kernelbench_program(task, self.title, args="x", body=body, init=init,
                                   inputs="[torch.randn(M, K, dtype=DTYPE, device='cuda')]")

    def assemble(self, body, variant, params, task):
        includes = TMA_INCLUDES if "tma" in variant.needs else ()
        return f"{prelude(task, includes)}\n#define GROUP {GROUP}   // K elements per scale\n{body}"
