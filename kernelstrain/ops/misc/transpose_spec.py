"""2-D transpose, the op transpose_cuda implements: its entry point, title, what it computes,
dims and shapes, dtypes and vendors, its minimum cost, its PyTorch reference and its check.
The input is `x`, the reference's name (the renders' kernels still call it `in`).
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("transpose", (Arg("x", "in", ("R", "C")), Arg("out", "out", ("C", "R")), Scalar("R"), Scalar("C")))


class TransposeSpec(OpModule):
    op, family = "transpose", "misc"
    title = "2-D matrix transpose"
    desc = "out[c, r] = in[r, c] for a contiguous [R, C] input; out is a contiguous [C, R] matrix."
    dims = {"R": "rows of the input", "C": "columns of the input (rows of the output)"}
    shapes = ({"R": 1024, "C": 1024}, {"R": 2048, "C": 5120}, {"R": 4096, "C": 4096},
              {"R": 4096, "C": 14336}, {"R": 8192, "C": 8192}, {"R": 32000, "C": 4096})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"R": 2048, "C": 5120}
    tolerance = "exact"

    def cost(self, task: Task) -> Cost:
        return Cost(flops=0, bytes=2 * task["R"] * task["C"] * DTYPE_BYTES[task.dtype])

    torch_ref = TorchRef(body="return x.t().contiguous()",
                               inputs="[torch.randn(R, C, dtype=DTYPE, device='cuda')]")
