"""Block-scaled FP4 GEMM, the op gemm_fp4_cuda and gemm_fp4_triton implement: C = A . B^T with A
[M, K] and B [N, K] in e2m1 packed two per byte (low nibble = even k) and one scale byte per G
consecutive k of each row: G = 16 is nvfp4 (e4m3 scales), G = 32 is mxfp4 (ue8m0 scales). The
entry point, cost, reference and the decode helpers the CUDA rungs share.
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar
from ._gemm_ptx import E4M3_SOFT

ENTRY = Entry("gemm_fp4", (
    Arg("A", "in", ("M", "K // 2"), "uint8"), Arg("B", "in", ("N", "K // 2"), "uint8"),
    Arg("scale_a", "in", ("M", "K // G"), "uint8"), Arg("scale_b", "in", ("N", "K // G"), "uint8"),
    Arg("C", "out", ("M", "N")), Scalar("M"), Scalar("N"), Scalar("K")), py_name="gemm_fp4")

UE8M0 = """
// ue8m0 scale: the byte is a biased power-of-two exponent, 2^(s - 127)
__device__ __forceinline__ float scale_to_float(uint32_t s) { return __uint_as_float(s << 23); }
"""
UE4M3 = E4M3_SOFT.split("// 8 e4m3 bytes")[0] + """// ue4m3 scale: an e4m3 byte whose sign is zero
__device__ __forceinline__ float scale_to_float(uint32_t s) { return e4m3_to_float(s); }
"""


def fp4_decode(task: Task) -> str:
    """The e2m1 and scale decoders (in C) for the task's block size G."""
    return f"""#define G {task['G']}                  // K elements per scale byte ({'nvfp4, e4m3' if task['G'] == 16 else 'mxfp4, ue8m0'} scales)
// e2m1 nibble s.ee.m: 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives
__device__ __forceinline__ float e2m1_to_float(uint32_t q) {{
    const uint32_t e = (q >> 1) & 3u, m = q & 1u;
    const float mag = e ? __uint_as_float(((e + 126u) << 23) | (m << 22)) : 0.5f * (float)m;
    return (q & 8u) ? -mag : mag;
}}
{UE4M3 if task['G'] == 16 else UE8M0}"""


class GemmFp4Spec(OpModule):
    op, family = "gemm_fp4", "matmul"
    title = "Block-scaled FP4 GEMM (nvfp4 / mxfp4)"
    desc = ("C[M, N] = A . B^T, fp32 accumulation, 16-bit C: A [M, K/2] and B [N, K/2] hold e2m1 values two per "
            "byte (low nibble = even k); scale_a [M, K/G] and scale_b [N, K/G] hold one scale byte per G of K "
            "(G = 16: e4m3 scales, nvfp4 without its per-tensor scale; G = 32: ue8m0 scales, mxfp4); "
            "K a multiple of 128, N of 128.")
    dims = {"M": "rows of A and C (tokens)", "N": "rows of B, columns of C (output features, a multiple of 128)",
            "K": "reduction dim (input features, a multiple of 128)", "G": "K elements per scale (16: nvfp4, 32: mxfp4)"}
    dtypes = ("bf16", "fp16")
    vendors = ("nvidia",)
    entry, inputs = ENTRY, ("A", "B", "scale_a", "scale_b")
    check_shape = {"M": 1024, "N": 2048, "K": 4096, "G": 16}
    tolerance = "quant"

    def cost(self, task: Task) -> Cost:
        m, n, k, g, e = task["M"], task["N"], task["K"], task["G"], DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * m * n * k, bytes=(m + n) * (k // 2 + k // g) + m * n * e)

    def reference(self, task: Task) -> str:
        g = task["G"]
        decode = ("s.view(torch.float8_e4m3fn).float()" if g == 16 else "torch.exp2(s.float() - 127)")
        scales = ("(torch.rand(R, K // G, device='cuda') * 0.25 + 0.0625).to(torch.float8_e4m3fn).view(torch.uint8)"
                  if g == 16 else "torch.randint(123, 127, (R, K // G), device='cuda', dtype=torch.uint8)")
        body = ("lut = torch.tensor([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6], device=A.device)\n"
                "        def dequant(q, s):   # q [R, K/2] packed e2m1, s [R, K/G] scale bytes -> fp32 [R, K]\n"
                "            v = torch.stack((lut[(q & 15).long()], lut[(q >> 4).long()]), -1).reshape(q.shape[0], -1)\n"
                f"            return v * {decode}.repeat_interleave(G, 1)\n"
                "        return (dequant(A, scale_a) @ dequant(B, scale_b).t()).to(DTYPE)")
        inputs = ("[torch.randint(0, 256, (M, K // 2), device='cuda', dtype=torch.uint8),\n"
                  "            torch.randint(0, 256, (N, K // 2), device='cuda', dtype=torch.uint8),\n"
                  f"            *[{scales} for R in (M, N)]]")
        return kernelbench_program(task, self.title, args="A, B, scale_a, scale_b", body=body, inputs=inputs)
