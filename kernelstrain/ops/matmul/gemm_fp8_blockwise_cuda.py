"""DeepGEMM-style block-scaled FP8 GEMM in CUDA: e4m3 A with one scale per token per 128 K
(1x128), e4m3 B with one scale per 128x128 block; partial sums of each 128-wide K block are
promoted into an fp32 accumulator with their two scales; bf16 out. Scales are powers of two
(UE8M0-representable, as DeepSeek-V3.1-style checkpoints store them).

Ladder: thread per output -> e4m3 widened to bf16 in smem + bf16 mma.sync (A100) -> fp8
mma.sync.m16n8k32 -> cp.async ring -> persistent Hopper kernel: TMA producer warp, fp8 wgmma
consumers promoting per K block, grid-stride tile scheduler -> sm_120a block-scaled mma.sync
(kind::mxf8f6f4 with ue8m0 scales: the tensor core applies the scales, no promotion). The last
rung exists only on sm_120a; on Ampere/Ada/Hopper it is the "fp4 off sm_120" compile error.
"""
from ..base import Cost, Launch, OpModule, Param, Task, Variant, cdiv, cuda_prelude, kernelbench_program
from ._gemm_tc import (E4M3_SOFT, TMA_INCLUDES, mma_host, mma_kernel, naive_launch, tc_launch, wgmma_host,
                       wgmma_kernel)

TC = frozenset({"mma", "ldmatrix", "inline_ptx"})
BM, BN = Param("BM", (64, 128), 128), Param("BN", (64, 128), 128)
WARPS = Param("warps", (4, 8), 8)


class GemmFp8BlockwiseCuda(OpModule):
    op, impl, family = "gemm_fp8_blockwise", "cuda", "matmul"
    title = "Block-scaled FP8 GEMM (1x128 activations, 128x128 weights)"
    desc = ("C[M, N] = bf16(sum over 128-wide K blocks kb of (A[:, kb] . B[:, kb]^T) * scale_a[kb, m] * "
            "scale_b[n / 128, kb]): e4m3 A [M, K] and B [N, K], fp32 scales scale_a [K/128, M] (token-contiguous) "
            "and scale_b [N/128, K/128], all powers of two, fp32 promotion per K block; K a multiple of 16, N even.")
    dims = {"M": "rows of A and C (tokens)", "N": "rows of B, columns of C (output features)",
            "K": "reduction dim (input features)"}
    shapes = ({"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096},
              {"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 7168, "K": 2048},
              {"M": 128, "N": 4096, "K": 7168}, {"M": 64, "N": 24576, "K": 1536})
    dtypes = ("fp8",)
    vendors = ("nvidia",)
    variants = (
        Variant("naive_promote", "one thread per output: software e4m3 decode, fp32 partial per 128-wide K block",
                (Param("block_x", (8, 16, 32), 16), Param("block_y", (4, 8, 16, 32), 16)),
                compute_eff=0.09, memory_eff=0.6, bugs=("missing_scale", "wrong_init")),
        Variant("dequant_mma_promote", "e4m3 widened to bf16 while staging, bf16 mma.sync, promotion every 128 of K",
                (BM, BN, Param("BK", (32, 64), 64), WARPS), needs=TC | {"bf16"}, path="fp16", compute_eff=0.18,
                memory_eff=0.75, smem="static", bugs=("missing_barrier", "missing_scale")),
        Variant("fp8_mma_promote", "fp8 tensor cores: mma.sync.m16n8k32.e4m3 into a per-block partial, scaled promotion",
                (BM, Param("BN", (64, 128, 256), 128), WARPS), needs=TC | {"fp8"}, path="fp8",
                compute_eff=0.52, memory_eff=0.8, smem="static", bugs=("missing_scale", "off_by_one")),
        Variant("cp_async_pipeline", "STAGES-deep cp.async ring in dynamic smem feeding fp8 mma.sync + promotion",
                (BM, Param("BN", (64, 128, 256), 128), Param("stages", (2, 3, 4, 5), 2), WARPS),
                needs=TC | {"fp8", "cp_async"}, path="fp8", compute_eff=0.85, memory_eff=0.85, smem="dynamic",
                bugs=("off_by_one", "wrong_init")),
        Variant("wgmma_tma_persistent", "sm_90a persistent: TMA producer warp, fp8 wgmma consumers promoting per K block, "
                "grid of resident CTAs walking the tiles", (BM, BN, Param("stages", (2, 3, 4, 5, 6), 5)),
                needs=frozenset({"wgmma", "tma", "inline_ptx", "fp8"}), path="fp8", compute_eff=0.69,
                memory_eff=0.88, smem="dynamic", bugs=("wrong_init", "missing_scale")),
        Variant("mxf8f6f4_block_scaled", "sm_120a block-scaled mma.sync.kind::mxf8f6f4: ue8m0 scales applied by the "
                "tensor core (one per 32 of K), no promotion step, cp.async ring",
                (BM, Param("BN", (64, 128, 256), 128), Param("stages", (2, 3, 4), 2), WARPS),
                needs=TC | {"fp8", "cp_async", "fp4"}, path="fp8", compute_eff=0.88, memory_eff=0.85,
                smem="dynamic", bugs=("missing_scale", "off_by_one")),
    )

    def supports(self, gpu, dtype: str) -> bool:
        # e4m3 arrives as bytes; the baseline decodes it in software, so A100 is a task (fp8 rungs fail there)
        return gpu.vendor in self.vendors and not (self.variants[0].needs - gpu.features)

    def cost(self, task: Task) -> Cost:
        m, n, k = task["M"], task["N"], task["K"]
        kb = cdiv(k, 128)
        return Cost(flops=2 * m * n * k, bytes=m * k + n * k + 2 * m * n + 4 * kb * (m + cdiv(n, 128)))

    def launch(self, variant: Variant, params: dict, task: Task) -> Launch:
        if variant.tag == "naive_promote":
            return naive_launch(task, params["block_x"], params["block_y"], regs=34, elt=1)
        return tc_launch(variant, self._tile(variant.tag, params), task, elt=1, out_elt=2,
                         promote=variant.tag != "mxf8f6f4_block_scaled",
                         smem_elt=2 if variant.tag == "dequant_mma_promote" else 1,
                         persistent=variant.tag == "wgmma_tma_persistent")

    SIG = ("const __nv_fp8_e4m3* A, const __nv_fp8_e4m3* B, const float* scale_a, const float* scale_b, "
           "__nv_bfloat16* C, int M, int N, int K, cudaStream_t stream")
    OPERANDS = "const __nv_fp8_e4m3* __restrict__ A, const __nv_fp8_e4m3* __restrict__ B, "
    ARGS = ("const float* __restrict__ scale_a, const float* __restrict__ scale_b, __nv_bfloat16* __restrict__ C, "
            "int M, int N, int K")
    STORE = ("*reinterpret_cast<__nv_bfloat162*>(C + (size_t)row * N + col) = __floats2bfloat162_rn(v0, v1);")

    def signature(self, task: Task) -> str:
        return f"void gemm_fp8_blockwise({self.SIG})"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="A, B, scale_a, scale_b",
            body="sa = scale_a.t().repeat_interleave(128, 1)[:, :K]   # [M, K]: per token, per 128 of K\n"
                 "        sb = scale_b.repeat_interleave(128, 0)[:N].repeat_interleave(128, 1)[:, :K]   # 128x128 blocks\n"
                 "        return torch.matmul(A.float() * sa, (B.float() * sb).t()).to(torch.bfloat16)",
            inputs="[(2 * torch.randn(M, K, device='cuda')).to(DTYPE), (2 * torch.randn(N, K, device='cuda')).to(DTYPE),\n"
                   "            # power-of-two scales (UE8M0): 2^-1..2^1 for A, and 1/~sqrt(K) on top for B\n"
                   "            torch.exp2(torch.randint(-1, 2, ((K + 127) // 128, M), device='cuda').float()),\n"
                   "            torch.exp2(torch.randint(-1, 2, ((N + 127) // 128, (K + 127) // 128), device='cuda').float()\n"
                   "                       - (K.bit_length() // 2))]")

    # -- renders -----------------------------------------------------------------
    def render(self, variant: Variant, params: dict, task: Task, bug: str | None = None) -> str:
        body = getattr(self, "_" + variant.tag)(params, task, bug)
        extra = TMA_INCLUDES if variant.tag == "wgmma_tma_persistent" else ()
        return f"{cuda_prelude(task, extra)}\n{body}"

    def _scales(self, bug):
        row = "1.f" if bug == "missing_scale" else "__ldg(scale_a + (size_t)kb * M + min(row, M - 1))"
        return row, "__ldg(scale_b + (size_t)(min(col, N - 1) / 128) * KB + kb)"

    def _naive_promote(self, p, task, bug):
        sa = "" if bug == "missing_scale" else " * scale_a[(size_t)kb * M + m]"
        return f"""{E4M3_SOFT}
#define BLOCK_X {p['block_x']}
#define BLOCK_Y {p['block_y']}

// One thread per output; each 128-wide K block is summed on its own, then promoted with its scales.
extern "C" __global__ void __launch_bounds__(BLOCK_X * BLOCK_Y)
gemm_fp8_blockwise_kernel({self.OPERANDS}{self.ARGS}) {{
    const int n = blockIdx.x * BLOCK_X + threadIdx.x, m = blockIdx.y * BLOCK_Y + threadIdx.y;
    if (m >= M || n >= N) return;
    const uint8_t* a = reinterpret_cast<const uint8_t*>(A) + (size_t)m * K;
    const uint8_t* b = reinterpret_cast<const uint8_t*>(B) + (size_t)n * K;
    const int KB = (K + 127) / 128;
    float acc = 0.f, part = 0.f;
    for (int kb = 0; kb < KB; ++kb) {{{'' if bug == 'wrong_init' else chr(10) + '        part = 0.f;'}
        for (int k = kb * 128; k < min(K, kb * 128 + 128); ++k) part += e4m3_to_float(a[k]) * e4m3_to_float(b[k]);
        acc += part{sa} * scale_b[(size_t)(n / 128) * KB + kb];
    }}
    C[(size_t)m * N + n] = __float2bfloat16(acc);
}}

void gemm_fp8_blockwise({self.SIG}) {{
    const dim3 grid((N + BLOCK_X - 1) / BLOCK_X, (M + BLOCK_Y - 1) / BLOCK_Y);
    gemm_fp8_blockwise_kernel<<<grid, dim3(BLOCK_X, BLOCK_Y), 0, stream>>>(A, B, scale_a, scale_b, C, M, N, K);
}}
"""

    @staticmethod
    def _tile(tag, p):
        """fp8 mma rungs take K in 128-wide tiles: one tile is exactly one scale block."""
        return p if "BK" in p or tag.startswith("wgmma") else dict(p, BK=128)

    def _mma(self, p, bug, kind, pipelined, dequant=False):
        p = self._tile("mma", p)
        scales = self._scales(bug)
        return ((E4M3_SOFT if dequant else "")
                + mma_kernel(self.op, kind, p, args=self.OPERANDS + self.ARGS, epilogue=self.STORE, pipelined=pipelined,
                             dequant=dequant, promote=None if kind == "mxf8" else scales,
                             block_scale=scales if kind == "mxf8" else None, bug=bug)
                + mma_host(self.op, self.SIG, "A, B, scale_a, scale_b, C, M, N, K", p))

    def _dequant_mma_promote(self, p, task, bug):
        return self._mma(p, bug, "bf16", pipelined=False, dequant=True)

    def _fp8_mma_promote(self, p, task, bug):
        return self._mma(p, bug, "e4m3", pipelined=False)

    def _cp_async_pipeline(self, p, task, bug):
        return self._mma(p, bug, "e4m3", pipelined=True)

    def _mxf8f6f4_block_scaled(self, p, task, bug):
        return self._mma(p, bug, "mxf8", pipelined=True)

    def _wgmma_tma_persistent(self, p, task, bug):
        return (wgmma_kernel(self.op, "e4m3", p, args=self.ARGS, epilogue=self.STORE, promote=self._scales(bug),
                             persistent=True, bug=bug)
                + wgmma_host(self.op, "e4m3", self.SIG, "scale_a, scale_b, C, M, N, K", persistent=True))
