"""FP8 (e4m3) GEMM in CUDA with per-tensor scales: C = (A . B^T) * scale_a * scale_b, bf16 out.

Ladder: thread per output with software e4m3 decode -> e4m3 widened to bf16 while staging,
bf16 mma.sync (runs on A100) -> Marlin-style Ampere kernel: e4m3 bytes through a cp.async ring,
widened to fp16 in registers -> native fp8 mma.sync.m16n8k32 (sm_89+) -> cp.async ring ->
Hopper TMA + fp8 wgmma -> persistent (CTAs walk the tiles) -> split-K over blockIdx.y with fp32
partial slices and a reduce kernel (small M: too few output tiles to fill the SMs). fp8 arrives as bytes, so A100 is a task too: only the fp8 rungs fail there.
"""
from ..base import Cost, OpModule, Param, Rung, Task, TorchRef
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ._gemm_mma import mma_host, mma_kernel
from ._gemm_ptx import E4M3_SOFT
from ._gemm_tc import naive_launch, tc_launch
from ._gemm_wgmma import TMA_INCLUDES, UNSCALED, split_reduce, wgmma_host, wgmma_kernel, wgmma_split_host
from .gemm_fp16_spec import GEMM_DIMS, GEMM_SHAPES_8BIT
from .gemm_splitk_spec import split_launch

ENTRY = Entry("gemm_fp8", (
    Arg("A", "in", ("M", "K"), "fp8"), Arg("B", "in", ("N", "K"), "fp8"), Arg("scale_a", "in", (1,), "fp32"),
    Arg("scale_b", "in", (1,), "fp32"), Arg("C", "out", ("M", "N"), "bf16"), Scalar("M"), Scalar("N"), Scalar("K")))
TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
BM, BN, BN_SMALL = Param("BM", (64, 128), 128), Param("BN", (64, 128, 256), 128), Param("BN", (64, 128), 128)
WARPS = Param("warps", (4, 8), 8)
OPERANDS = "const __nv_fp8_e4m3* __restrict__ A, const __nv_fp8_e4m3* __restrict__ B, "
ARGS = ("const float* __restrict__ scale_a, const float* __restrict__ scale_b, __nv_bfloat16* __restrict__ C, "
        "int M, int N, int K")
ALPHA = "__ldg(scale_a) * __ldg(scale_b)"          # missing_scale drops scale_b
NO_SCALE_B = {"alpha": "__ldg(scale_a)"}
STORE = ("*reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + col) = "
         "__floats2bfloat162_rn((float)v0 * alpha, (float)v1 * alpha);")


# -- naive_dequant -------------------------------------------------------------------------
def naive_dequant_src(p, task, alpha=ALPHA, k_end="K"):
    return f"""{E4M3_SOFT}
#define BLOCK_X {p['block_x']}
#define BLOCK_Y {p['block_y']}

// One thread per output: every product decodes two e4m3 bytes in software (works on any target).
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_fp8_kernel({OPERANDS}{ARGS}) {{
    const int n = blockIdx.x * BLOCK_X + threadIdx.x, m = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (m >= M || n >= N) return;
    const uint8_t* a = reinterpret_cast<const uint8_t*>(A) + (size_t)m * K;
    const uint8_t* b = reinterpret_cast<const uint8_t*>(B) + (size_t)n * K;
    float acc = 0.f;
    for (int k = 0; k < {k_end}; ++k) acc += e4m3_to_float(a[k]) * e4m3_to_float(b[k]);
    C[(size_t)m * N + n] = __float2bfloat16(acc * {alpha});
}}

{ENTRY.prototype(task)} {{
    const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
    gemm_fp8_kernel<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, stream>>>(A, B, scale_a, scale_b, C, M, N, K);
}}
"""


# -- tensor-core rungs (_gemm_mma.py, _gemm_wgmma.py) ---------------------------------------
def mma_src(kind: str, pipelined: bool, dequant: bool = False, reg_dequant: bool = False):
    def render(p, task, alpha=ALPHA, barrier=True, kt_end="KT", bias="256.f"):
        prologue = f"\n    const float alpha = {alpha};   // per-tensor scales, applied once in the epilogue"
        return ((E4M3_SOFT if dequant else "")
                + mma_kernel("gemm_fp8", kind, p, args=OPERANDS + ARGS, epilogue=STORE, pipelined=pipelined,
                             dequant=dequant, prologue=prologue, kt_end=kt_end, barrier=barrier,
                             reg_dequant=reg_dequant, bias=bias)
                + mma_host("gemm_fp8", ENTRY.prototype(task), ENTRY.call_args(), p))
    return render


def wgmma_src(persistent: bool):
    # promoted: fp8 wgmma accumulates with reduced precision (an H200 failed K = 14336 with 9 of 524288
    # outputs off), so each 128-wide K block's partial is added into fp32 registers, as CUTLASS does;
    # acc + partial must fit a consumer's registers, hence BM, BN <= 128 (256 spilled ~1.3 KB)
    def render(p, task, alpha=ALPHA, wait_full=True):
        return (wgmma_kernel("gemm_fp8", "e4m3", p, args=ARGS, epilogue=STORE, prologue=f"\nconst float alpha = {alpha};",
                             wait_full=wait_full, promote=UNSCALED, persistent=persistent)
                + wgmma_host("gemm_fp8", "e4m3", ENTRY.prototype(task), "scale_a, scale_b, C, M, N, K", persistent=persistent))
    return render


# split-K: each split's promoted fp32 partial goes to its own [M, N] slice of the workspace
SPLIT_STORE = ("*reinterpret_cast<float2*>(ws + ((size_t)blockIdx.y * M + row) * N + col) = "
               "make_float2(v0, v1);   // this split's fp32 partial")
SHORT_COMBINE = {"combine_end": "SPLITS - 1"}    # bad_combine_index: the reduce skips the last slice


def wgmma_split_k_src(p, task, alpha=ALPHA, combine_end="SPLITS"):
    return (f"#define SPLITS {p['SPLITS']}                  // K splits along blockIdx.y\n"
            + split_reduce("gemm_fp8", "const float* __restrict__ ws, const float* __restrict__ scale_a, "
                           "const float* __restrict__ scale_b", alpha, combine_end)
            + wgmma_kernel("gemm_fp8", "e4m3", p, args="float* __restrict__ ws, int M, int N, int K",
                           epilogue=SPLIT_STORE, promote=UNSCALED, split_k=True)
            + wgmma_split_host("gemm_fp8", "e4m3", ENTRY.prototype(task), "ws, M, N, K", "ws, scale_a, scale_b, C, MN"))


WGMMA_NEEDS = frozenset({"wgmma", "tma", "inline_ptx", "fp8"})
WGMMA_STAGES = Param("stages", (2, 3, 4, 5, 6), 4)
SPLITS = Param("SPLITS", (2, 4, 8), 4)


NO_BARRIER, SHORT_K = {"barrier": False}, {"kt_end": "KT - 1"}
# missing_scale of the register-dequant rungs: the x 2^8 exponent-bias restore forgotten (every
# product 2^-16 too small)
NO_BIAS = {"bias": "1.f"}
REG_DEQUANT_NEEDS = frozenset({"mma", "inline_ptx", "cp_async"})


class GemmFp8Cuda(OpModule):
    op, impl, family = "gemm_fp8", "cuda", "matmul"
    title = "FP8 GEMM, per-tensor scales"
    desc = ("C[M, N] = bf16((A[M, K] . B[N, K]^T) * scale_a * scale_b): e4m3 operands (B K-major, as "
            "torch._scaled_mm wants it), one fp32 scale each, fp32 accumulation; K a multiple of 16, N even.")
    dims = GEMM_DIMS
    shapes = GEMM_SHAPES_8BIT
    dtypes = ("fp8",)
    vendors = ("nvidia",)
    entry, inputs = ENTRY, ("A", "B", "scale_a", "scale_b")
    check_shape, tolerance = {"M": 2048, "N": 2048, "K": 2048}, "quant"
    variants = (
        Rung("naive_dequant", "one thread per output, e4m3 decoded in software, fp32 FMAs",
             (Param("block_x", (8, 16, 32), 16), Param("block_y", (4, 8, 16, 32), 16)),
             compute_eff=0.09, memory_eff=0.6, launch=naive_launch(regs=32, elt=1), render=naive_dequant_src,
             bugs={"missing_scale": NO_SCALE_B, "off_by_one": {"k_end": "K - 1"}}),
        Rung("dequant_mma", "e4m3 widened to bf16 while staging to smem, ldmatrix + bf16 mma.sync.m16n8k16",
             (BM, BN_SMALL, Param("BK", (32, 64), 64), WARPS), needs=TC | {"bf16"},
             path="fp16", compute_eff=0.3, memory_eff=0.75, smem="static",
             launch=tc_launch("fp16", 1, 2, smem_elt=2), render=mma_src("bf16", False, dequant=True),
             bugs={"missing_scale": NO_SCALE_B, "missing_barrier": NO_BARRIER}),
        # vLLM's fp8 Marlin path for GPUs without fp8 tensor cores: half the bytes of a widened tile
        # through DRAM and smem, loads asynchronous and multi-staged, conversion in registers
        Rung("cp_async_reg_dequant", "Ampere fp8 (Marlin-style): e4m3 bytes through a STAGES-deep cp.async ring, "
             "each fragment widened to fp16 in registers (bit moves + one x 2^8), fp16 mma.sync.m16n8k16",
             (BM, BN_SMALL, Param("BK", (64, 128), 64), Param("stages", (2, 3, 4), 3), WARPS),   # defaults fit sm_86's 99 KB
             needs=REG_DEQUANT_NEEDS, path="fp16", compute_eff=0.55, memory_eff=0.85, smem="dynamic",
             launch=tc_launch("fp16", 1, 2, smem_elt=1), render=mma_src("f16", True, reg_dequant=True),
             bugs={"missing_scale": NO_BIAS, "off_by_one": SHORT_K}),
        Rung("fp8_mma_sync", "native fp8 tensor cores: ldmatrix + mma.sync.m16n8k32.e4m3, register-staged tiles",
             (BM, BN, Param("BK", (64, 128), 128), WARPS), needs=TC | {"fp8"}, path="fp8", compute_eff=0.52,
             memory_eff=0.8, smem="static", launch=tc_launch("fp8", 1, 2, smem_elt=1), render=mma_src("e4m3", False),
             bugs={"missing_barrier": NO_BARRIER, "off_by_one": SHORT_K}),
        Rung("cp_async_pipeline", "STAGES-deep cp.async ring in dynamic smem feeding fp8 mma.sync",
             (BM, Param("BN", (128, 256), 128), Param("BK", (64, 128), 64), Param("stages", (2, 3, 4), 3), WARPS),
             needs=TC | {"fp8", "cp_async"}, path="fp8", compute_eff=0.85, memory_eff=0.85, smem="dynamic",
             launch=tc_launch("fp8", 1, 2, smem_elt=1), render=mma_src("e4m3", True),
             bugs={"off_by_one": SHORT_K, "missing_scale": NO_SCALE_B}),
        # missing_barrier: consumers read the ring before TMA lands; on a real H200 this faults
        # (illegal address / launch failure) instead of giving wrong numbers
        Rung("wgmma_tma", "sm_90a: TMA producer warp + fp8 wgmma (m64nNk32.e4m3) consumers on an mbarrier ring, "
             "fp32 promotion per 128-wide K block",
             (BM, BN_SMALL, WGMMA_STAGES), needs=WGMMA_NEEDS, path="fp8", compute_eff=0.69,
             memory_eff=0.88, smem="dynamic", launch=tc_launch("fp8", 1, 2, wgmma=True, promote=True, smem_elt=1),
             render=wgmma_src(False), bugs={"missing_barrier": {"wait_full": False}, "missing_scale": NO_SCALE_B},
             faults=("missing_barrier",)),
        # CUTLASS's persistent TMA kernels: a wave's worth of resident CTAs walks the tiles, so the
        # last wave is not a partial one and a tile's epilogue overlaps the next tile's TMA loads
        Rung("wgmma_tma_persistent", "sm_90a persistent: the wgmma_tma kernel on a grid of resident CTAs "
             "walking the output tiles round robin", (BM, BN_SMALL, WGMMA_STAGES), needs=WGMMA_NEEDS, path="fp8",
             compute_eff=0.69, memory_eff=0.88, smem="dynamic",
             launch=tc_launch("fp8", 1, 2, wgmma=True, promote=True, smem_elt=1, persistent=True),
             render=wgmma_src(True), fit_as="wgmma_tma", bugs={"missing_barrier": {"wait_full": False}, "missing_scale": NO_SCALE_B},
             faults=("missing_barrier",)),
        # small M, long K (decode, MoE down-projections): M x N in 128 x 128 tiles leaves most SMs idle
        Rung("wgmma_split_k", "sm_90a split-K: SPLITS CTAs per output tile each run the TMA + wgmma pipeline "
             "over a share of K into an fp32 partial slice; a reduce kernel sums the slices and scales",
             (BM, BN_SMALL, WGMMA_STAGES, SPLITS), needs=WGMMA_NEEDS, path="fp8", compute_eff=0.69,
             memory_eff=0.88, smem="dynamic",
             launch=split_launch(tc_launch("fp8", 1, 2, wgmma=True, promote=True, smem_elt=1), "partials", bk=128),
             render=wgmma_split_k_src, fit_as="wgmma_tma", bugs={"bad_combine_index": SHORT_COMBINE, "missing_scale": NO_SCALE_B}),
    )

    def supports(self, gpu, dtype: str) -> bool:
        # e4m3 is stored as bytes and the baseline decodes it in software, so any NVIDIA part is a task;
        # the rungs that need fp8 tensor cores are the ones that fail on A100.
        return gpu.vendor in self.vendors and not (self.variants[0].needs - gpu.features)

    def cost(self, task: Task) -> Cost:
        m, n, k = task["M"], task["N"], task["K"]
        return Cost(flops=2 * m * n * k, bytes=m * k + n * k + 2 * m * n + 8)

    torch_ref = TorchRef(
        body="return (torch.matmul(A.float(), B.float().t()) * (scale_a * scale_b)).to(torch.bfloat16)",
        inputs="[(2 * torch.randn(M, K, device='cuda')).to(DTYPE), (2 * torch.randn(N, K, device='cuda')).to(DTYPE),\n"
               "            torch.tensor([0.5], device='cuda'), torch.tensor([K ** -0.5], device='cuda')]")

    def assemble(self, body, variant, params, task):
        return f"{prelude(task, TMA_INCLUDES if 'tma' in variant.needs else ())}\n{body}"
