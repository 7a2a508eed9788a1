"""DeepGEMM-style block-scaled FP8 GEMM in CUDA: e4m3 A with one scale per token per 128 K
(1x128), e4m3 B with one scale per 128x128 block; partial sums of each 128-wide K block are
promoted into an fp32 accumulator with their two scales; bf16 out. Scales are powers of two
(UE8M0-representable, as DeepSeek-V3.1-style checkpoints store them).

Ladder: thread per output -> e4m3 widened to bf16 in smem + bf16 mma.sync (A100) -> Marlin-style
Ampere kernel (e4m3 bytes through a cp.async ring, widened to fp16 in registers) -> fp8
mma.sync.m16n8k32 -> cp.async ring -> persistent Hopper kernel: TMA producer warp, fp8 wgmma
consumers promoting per K block, grid-stride tile scheduler -> split-K over blockIdx.y (promoted fp32
partial slices, a reduce kernel: small M) -> sm_120a block-scaled mma.sync
(kind::mxf8f6f4 with ue8m0 scales: the tensor core applies the scales, no promotion). The last
rung exists only on sm_120a; on Ampere/Ada/Hopper it is the "fp4 off sm_120" compile error.
"""
from ..base import Cost, OpModule, Param, Rung, Task, TorchRef, cdiv
from ..contract import Arg, Entry, Scalar
from ..dialect import prelude
from ._gemm_mma import mma_host, mma_kernel
from ._gemm_ptx import E4M3_SOFT
from ._gemm_tc import naive_launch, tc_launch
from ._gemm_wgmma import TMA_INCLUDES, split_reduce, wgmma_host, wgmma_kernel, wgmma_split_host
from .gemm_fp16_spec import GEMM_DIMS
from .gemm_fp8_cuda import NO_BIAS, REG_DEQUANT_NEEDS, SHORT_COMBINE, SPLIT_STORE, SPLITS
from .gemm_splitk_spec import split_launch

ENTRY = Entry("gemm_fp8_blockwise", (
    Arg("A", "in", ("M", "K"), "fp8"), Arg("B", "in", ("N", "K"), "fp8"),
    Arg("scale_a", "in", ("(K + 127) // 128", "M"), "fp32"),
    Arg("scale_b", "in", ("(N + 127) // 128", "(K + 127) // 128"), "fp32"),
    Arg("C", "out", ("M", "N"), "bf16"), Scalar("M"), Scalar("N"), Scalar("K")))
TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
BM, BN = Param("BM", (64, 128), 128), Param("BN", (64, 128), 128)
WARPS = Param("warps", (4, 8), 8)
OPERANDS = "const __nv_fp8_e4m3* __restrict__ A, const __nv_fp8_e4m3* __restrict__ B, "
ARGS = ("const float* __restrict__ scale_a, const float* __restrict__ scale_b, __nv_bfloat16* __restrict__ C, "
        "int M, int N, int K")
STORE = ("*reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + col) = __floats2bfloat162_rn(v0, v1);")
# the scale expressions (row, col) of 128-wide K block kb; missing_scale drops the row scale
ROW_SCALE = "__ldg(scale_a + (size_t)kb * M + min(row, M - 1))"
COL_SCALE = "__ldg(scale_b + (size_t)(min(col, N - 1) / 128) * KB + kb)"
NO_ROW_SCALE = {"row_scale": "1.f"}
RESET = chr(10) + "        part = 0.f;"      # a fresh partial per K block; wrong_init drops it


# -- naive_promote -------------------------------------------------------------------------
def naive_promote_src(p, task, sa=" * scale_a[(size_t)kb * M + m]", reset=RESET):
    return f"""{E4M3_SOFT}
#define BLOCK_X {p['block_x']}
#define BLOCK_Y {p['block_y']}

// One thread per output; each 128-wide K block is summed on its own, then promoted with its scales.
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_fp8_blockwise_kernel({OPERANDS}{ARGS}) {{
    const int n = blockIdx.x * BLOCK_X + threadIdx.x, m = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (m >= M || n >= N) return;
    const uint8_t* a = reinterpret_cast<const uint8_t*>(A) + (size_t)m * K;
    const uint8_t* b = reinterpret_cast<const uint8_t*>(B) + (size_t)n * K;
    const int KB = (K + 127) / 128;
    float acc = 0.f, part = 0.f;
    for (int kb = 0; kb < KB; ++kb) {{{reset}
        for (int k = kb * 128; k < min(K, kb * 128 + 128); ++k) part += e4m3_to_float(a[k]) * e4m3_to_float(b[k]);
        acc += part{sa} * scale_b[(size_t)(n / 128) * KB + kb];
    }}
    C[(size_t)m * N + n] = __float2bfloat16(acc);
}}

{ENTRY.prototype(task)} {{
    const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
    gemm_fp8_blockwise_kernel<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, stream>>>(A, B, scale_a, scale_b, C, M, N, K);
}}
"""


# -- tensor-core rungs (_gemm_mma.py, _gemm_wgmma.py) ---------------------------------------
def bk128(p: dict) -> dict:
    """fp8 mma rungs take K in 128-wide tiles: one tile is exactly one scale block."""
    return p if "BK" in p else dict(p, BK=128)


def mma_src(kind: str, pipelined: bool, dequant: bool = False, reg_dequant: bool = False):
    def render(p, task, row_scale=ROW_SCALE, barrier=True, kt_end="KT", fresh=True, bias="256.f"):
        p, scales = bk128(p), (row_scale, COL_SCALE)
        return ((E4M3_SOFT if dequant else "")
                + mma_kernel("gemm_fp8_blockwise", kind, p, args=OPERANDS + ARGS, epilogue=STORE, pipelined=pipelined,
                             dequant=dequant, promote=None if kind == "mxf8" else scales,
                             block_scale=scales if kind == "mxf8" else None, kt_end=kt_end, barrier=barrier, fresh=fresh,
                             reg_dequant=reg_dequant, bias=bias)
                + mma_host("gemm_fp8_blockwise", ENTRY.prototype(task), ENTRY.call_args(), p))
    return render


def wgmma_tma_persistent_src(p, task, fresh=True, row_scale=ROW_SCALE):
    return (wgmma_kernel("gemm_fp8_blockwise", "e4m3", p, args=ARGS, epilogue=STORE, promote=(row_scale, COL_SCALE),
                         persistent=True, fresh=fresh)
            + wgmma_host("gemm_fp8_blockwise", "e4m3", ENTRY.prototype(task), "scale_a, scale_b, C, M, N, K",
                         persistent=True))


def wgmma_split_k_src(p, task, row_scale=ROW_SCALE, combine_end="SPLITS"):
    # partials are promoted with their scales in the mainloop (kb = the global K tile), so the reduce only sums
    return (f"#define SPLITS {p['SPLITS']}                  // K splits along blockIdx.y\n"
            + split_reduce("gemm_fp8_blockwise", "const float* __restrict__ ws", "", combine_end)
            + wgmma_kernel("gemm_fp8_blockwise", "e4m3", p, args=ARGS.replace("__nv_bfloat16* __restrict__ C", "float* __restrict__ ws"),
                           epilogue=SPLIT_STORE, promote=(row_scale, COL_SCALE), split_k=True)
            + wgmma_split_host("gemm_fp8_blockwise", "e4m3", ENTRY.prototype(task), "scale_a, scale_b, ws, M, N, K",
                               "ws, C, MN"))


def fp8_launch(smem_elt: int = 1, promote: bool = True):
    return tc_launch("fp8", 1, 2, promote=promote, smem_elt=smem_elt, tile=bk128)


SHORT_K, STALE_PART = {"kt_end": "KT - 1"}, {"fresh": False}


class GemmFp8BlockwiseCuda(OpModule):
    op, impl, family = "gemm_fp8_blockwise", "cuda", "matmul"
    title = "Block-scaled FP8 GEMM (1x128 activations, 128x128 weights)"
    desc = ("C[M, N] = bf16(sum over 128-wide K blocks kb of (A[:, kb] . B[:, kb]^T) * scale_a[kb, m] * "
            "scale_b[n / 128, kb]): e4m3 A [M, K] and B [N, K], fp32 scales scale_a [K/128, M] (token-contiguous) "
            "and scale_b [N/128, K/128], all powers of two, fp32 promotion per K block; K a multiple of 16, N even.")
    dims = GEMM_DIMS
    shapes = ({"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096},
              {"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 7168, "K": 2048},
              {"M": 128, "N": 4096, "K": 7168}, {"M": 64, "N": 24576, "K": 1536})
    dtypes = ("fp8",)
    vendors = ("nvidia",)
    entry, inputs = ENTRY, ("A", "B", "scale_a", "scale_b")
    check_shape = {"M": 2048, "N": 2048, "K": 2048}                   # 256 tiles: persistent loop
    tolerance = "quant"
    variants = (
        Rung("naive_promote", "one thread per output: software e4m3 decode, fp32 partial per 128-wide K block",
             (Param("block_x", (8, 16, 32), 16), Param("block_y", (4, 8, 16, 32), 16)),
             compute_eff=0.09, memory_eff=0.6, launch=naive_launch(regs=34, elt=1), render=naive_promote_src,
             bugs={"missing_scale": {"sa": ""}, "wrong_init": {"reset": ""}}),
        Rung("dequant_mma_promote", "e4m3 widened to bf16 while staging, bf16 mma.sync, promotion every 128 of K",
             (BM, BN, Param("BK", (32, 64), 64), WARPS), needs=TC | {"bf16"}, path="fp16", compute_eff=0.18,
             memory_eff=0.75, smem="static", launch=tc_launch("fp16", 1, 2, promote=True, smem_elt=2, tile=bk128),
             render=mma_src("bf16", False, dequant=True),
             bugs={"missing_barrier": {"barrier": False}, "missing_scale": NO_ROW_SCALE}),
        Rung("cp_async_reg_dequant", "Ampere fp8 (Marlin-style): e4m3 bytes through a STAGES-deep cp.async ring, "
             "widened to fp16 in registers, fp16 mma.sync into a per-block partial, scaled promotion",
             (BM, BN, Param("stages", (2, 3, 4), 2), WARPS), needs=REG_DEQUANT_NEEDS, path="fp16",   # 2: sm_86's 99 KB
             compute_eff=0.5, memory_eff=0.85, smem="dynamic",
             launch=tc_launch("fp16", 1, 2, promote=True, smem_elt=1, tile=bk128),
             render=mma_src("f16", True, reg_dequant=True), bugs={"missing_scale": NO_BIAS, "off_by_one": SHORT_K}),
        Rung("fp8_mma_promote", "fp8 tensor cores: mma.sync.m16n8k32.e4m3 into a per-block partial, scaled promotion",
             (BM, Param("BN", (64, 128, 256), 128), WARPS), needs=TC | {"fp8"}, path="fp8",
             compute_eff=0.52, memory_eff=0.8, smem="static", launch=fp8_launch(), render=mma_src("e4m3", False),
             bugs={"missing_scale": NO_ROW_SCALE, "off_by_one": SHORT_K}),
        Rung("cp_async_pipeline", "STAGES-deep cp.async ring in dynamic smem feeding fp8 mma.sync + promotion",
             (BM, Param("BN", (64, 128, 256), 128), Param("stages", (2, 3, 4, 5), 2), WARPS),
             needs=TC | {"fp8", "cp_async"}, path="fp8", compute_eff=0.85, memory_eff=0.85, smem="dynamic",
             launch=fp8_launch(), render=mma_src("e4m3", True), bugs={"off_by_one": SHORT_K, "wrong_init": STALE_PART}),
        Rung("wgmma_tma_persistent", "sm_90a persistent: TMA producer warp, fp8 wgmma consumers promoting per K block, "
             "grid of resident CTAs walking the tiles", (BM, BN, Param("stages", (2, 3, 4, 5, 6), 5)),
             needs=frozenset({"wgmma", "tma", "inline_ptx", "fp8"}), path="fp8", compute_eff=0.69,
             memory_eff=0.88, smem="dynamic", launch=tc_launch("fp8", 1, 2, wgmma=True, promote=True, smem_elt=1,
                                                               persistent=True),
             render=wgmma_tma_persistent_src, bugs={"wrong_init": STALE_PART, "missing_scale": NO_ROW_SCALE}),
        Rung("wgmma_split_k", "sm_90a split-K: SPLITS CTAs per output tile each run the TMA + fp8 wgmma pipeline over "
             "a share of K, promoting per K block into an fp32 partial slice; a reduce kernel sums the slices",
             (BM, BN, Param("stages", (2, 3, 4, 5, 6), 4), SPLITS), needs=frozenset({"wgmma", "tma", "inline_ptx", "fp8"}),
             path="fp8", compute_eff=0.69, memory_eff=0.88, smem="dynamic",
             launch=split_launch(tc_launch("fp8", 1, 2, wgmma=True, promote=True, smem_elt=1), "partials", bk=128),
             render=wgmma_split_k_src, fit_as="wgmma_tma_persistent", bugs={"bad_combine_index": SHORT_COMBINE, "missing_scale": NO_ROW_SCALE}),
        Rung("mxf8f6f4_block_scaled", "sm_120a block-scaled mma.sync.kind::mxf8f6f4: ue8m0 scales applied by the "
             "tensor core (one per 32 of K), no promotion step, cp.async ring",
             (BM, Param("BN", (64, 128, 256), 128), Param("stages", (2, 3, 4), 2), WARPS),
             needs=TC | {"fp8", "cp_async", "fp4"}, path="fp8", compute_eff=0.88, memory_eff=0.85,
             smem="dynamic", launch=fp8_launch(promote=False), render=mma_src("mxf8", True),
             bugs={"missing_scale": NO_ROW_SCALE, "off_by_one": SHORT_K}),
    )

    def supports(self, gpu, dtype: str) -> bool:
        # e4m3 arrives as bytes; the baseline decodes it in software, so A100 is a task (fp8 rungs fail there)
        return gpu.vendor in self.vendors and not (self.variants[0].needs - gpu.features)

    def cost(self, task: Task) -> Cost:
        m, n, k = task["M"], task["N"], task["K"]
        kb = cdiv(k, 128)
        return Cost(flops=2 * m * n * k, bytes=m * k + n * k + 2 * m * n + 4 * kb * (m + cdiv(n, 128)))

    torch_ref = TorchRef(
        body="sa = scale_a.t().repeat_interleave(128, 1)[:, :K]   # [M, K]: per token, per 128 of K\n"
             "        sb = scale_b.repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]   # 128x128 blocks\n"
             "        return torch.matmul(A.float() * sa, (B.float() * sb).t()).to(torch.bfloat16)",
        inputs="[(2 * torch.randn(M, K, device='cuda')).to(DTYPE), (2 * torch.randn(N, K, device='cuda')).to(DTYPE),\n"
               "            # power-of-two scales (UE8M0): 2^-1..2^1 for A, and ~1/(8 sqrt(K)) on top for B, so C has\n"
               "            # RMS ~1 (std-2 operands, scales of RMS 1.3), the scale a fixed 1e-2 tolerance is written for\n"
               "            torch.exp2(torch.randint(-1, 2, ((K + 127) // 128, M), device='cuda').float()),\n"
               "            torch.exp2(torch.randint(-1, 2, ((N + 127) // 128, (K + 127) // 128), device='cuda').float()\n"
               "                       - (K.bit_length() // 2) - 3)]")

    def assemble(self, body, variant, params, task):
        return f"{prelude(task, TMA_INCLUDES if 'tma' in variant.needs else ())}\n{body}"
