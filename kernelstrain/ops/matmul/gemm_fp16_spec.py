"""FP16/BF16 GEMM, the op gemm_fp16_cuda and gemm_fp16_triton implement: C = A . B^T with B
stored [N, K] (an nn.Linear weight, K-major, as F.linear and every other GEMM of this family
take it). Its entry point, what it computes, its minimum cost and its PyTorch reference; each
module keeps its own shape menu.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("gemm_fp16", (
    Arg("A", "in", ("M", "K")), Arg("B", "in", ("N", "K")), Arg("C", "out", ("M", "N")),
    Scalar("M"), Scalar("N"), Scalar("K")), py_name="gemm")
# the dims of the C = A . B^T contract, and the shape menu of the 8-bit GEMMs (fp8, int8)
GEMM_DIMS = {"M": "rows of A and C (tokens)", "N": "rows of B, columns of C (output features)",
             "K": "reduction dim (input features)"}
GEMM_SHAPES_8BIT = ({"M": 2048, "N": 2048, "K": 2048}, {"M": 4096, "N": 4096, "K": 4096},
                    {"M": 8192, "N": 8192, "K": 8192}, {"M": 4096, "N": 14336, "K": 4096},
                    {"M": 128, "N": 4096, "K": 14336}, {"M": 16, "N": 8192, "K": 8192})


# half_accumulator (per-tile fp32 partials summed in the storage dtype; gemm_fp16_triton, grouped_gemm_triton)
# is bf16 only: with fp16's 11 bits the K / BLOCK_K roundings stay within KernelBench's 1e-2 at most menu
# shapes (H200 s2727: M 16 N 8192 K 8192 passed; CPU emulation: 0 of 131072 outside), bf16 fails at every one
HALF_BF16 = (("half_accumulator", ("bf16",)),)

class GemmFp16Spec(OpModule):
    op, family = "gemm_fp16", "matmul"
    title = "FP16/BF16 GEMM"
    desc = ("C[M, N] = A[M, K] . B[N, K]^T with fp32 accumulation and a 16-bit result; B is stored [N, K] "
            "(an nn.Linear weight, K-major), K a multiple of 16 and N even.")
    dims = GEMM_DIMS
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("A", "B")
    check_shape = {"M": 2048, "N": 2048, "K": 2048}

    def cost(self, task: Task) -> Cost:
        m, n, k, e = task["M"], task["N"], task["K"], DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * m * n * k, bytes=(m * k + n * k + m * n) * e)

    torch_ref = TorchRef(body="return torch.matmul(A, B.t())",
        inputs="[torch.randn(M, K, dtype=DTYPE, device='cuda'), torch.randn(N, K, dtype=DTYPE, device='cuda') / K ** 0.5]")
