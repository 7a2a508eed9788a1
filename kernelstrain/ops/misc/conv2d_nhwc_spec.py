"""2-D convolution in NHWC / KRSC, the op conv2d_nhwc_cuda and conv2d_nhwc_triton implement: its
entry point, title, what it computes, dims and shapes, its minimum cost and its PyTorch reference.
As an implicit GEMM: M = N * P * Q output pixels, N_gemm = K filters, K_gemm = R * S * C, the
weight is already the K-major [K, R * S * C] operand and a row of A (one pixel, one (r, s))
is C contiguous input channels.
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

P_OF = "(H + 2 * PD - R) // U + 1"
Q_OF = "(W + 2 * PD - S) // U + 1"
ENTRY = Entry("conv2d_nhwc", (
    Arg("x", "in", ("N", "H", "W", "C")), Arg("weight", "in", ("K", "R", "S", "C")),
    Arg("y", "out", ("N", P_OF, Q_OF, "K")), Scalar("N"), Scalar("H"), Scalar("W"), Scalar("C"), Scalar("K"),
    Scalar("R"), Scalar("S"), Scalar("U"), Scalar("PD"), Scalar("P", value=P_OF), Scalar("Q", value=Q_OF)))


def out_hw(task: Task) -> tuple:
    """(P, Q): output height and width."""
    h, w, r, s, u, pd = (task[k] for k in ("H", "W", "R", "S", "U", "PD"))
    return (h + 2 * pd - r) // u + 1, (w + 2 * pd - s) // u + 1


def gemm_dims(task: Task) -> tuple:
    """(M, N_gemm, K_gemm) of the implicit GEMM."""
    p, q = out_hw(task)
    return task["N"] * p * q, task["K"], task["R"] * task["S"] * task["C"]


class Conv2dNhwcSpec(OpModule):
    op, family = "conv2d_nhwc", "misc"
    title = "2-D convolution, NHWC input, KRSC weight"
    desc = ("y[n, p, q, k] = sum over r, s, c of x[n, p*U - PD + r, q*U - PD + s, c] * weight[k, r, s, c] (zero "
            "padding PD, stride U); x [N, H, W, C], weight [K, R, S, C], y [N, P, Q, K]; fp32 accumulation; "
            "C a multiple of 32, K a multiple of 64.")
    dims = {"N": "batch", "H": "input height", "W": "input width", "C": "input channels", "K": "output channels",
            "R": "filter height", "S": "filter width", "U": "stride", "PD": "zero padding"}
    shapes = ({"N": 1, "H": 56, "W": 56, "C": 64, "K": 64, "R": 3, "S": 3, "U": 1, "PD": 1},
              {"N": 8, "H": 56, "W": 56, "C": 64, "K": 64, "R": 3, "S": 3, "U": 1, "PD": 1},
              {"N": 8, "H": 28, "W": 28, "C": 128, "K": 128, "R": 3, "S": 3, "U": 1, "PD": 1},
              {"N": 16, "H": 14, "W": 14, "C": 256, "K": 256, "R": 3, "S": 3, "U": 1, "PD": 1},
              {"N": 8, "H": 56, "W": 56, "C": 256, "K": 64, "R": 1, "S": 1, "U": 1, "PD": 0},
              {"N": 4, "H": 112, "W": 112, "C": 64, "K": 128, "R": 3, "S": 3, "U": 2, "PD": 1})
    dtypes = ("fp16", "bf16")
    entry, inputs = ENTRY, ("x", "weight")
    check_shape = {"N": 4, "H": 28, "W": 28, "C": 128, "K": 128, "R": 3, "S": 3, "U": 1, "PD": 1}

    def cost(self, task: Task) -> Cost:
        m, n, k = gemm_dims(task)
        e = DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * m * n * k, bytes=(task["N"] * task["H"] * task["W"] * task["C"] + n * k + m * n) * e)

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="x, weight",
            body=("y = torch.nn.functional.conv2d(x.permute(0, 3, 1, 2).float(), weight.permute(0, 3, 1, 2).float(),\n"
                  "                                       stride=U, padding=PD)\n"
                  "        return y.permute(0, 2, 3, 1).contiguous().to(x.dtype)"),
            inputs=("[torch.randn(N, H, W, C, dtype=DTYPE, device='cuda'),\n"
                    "            (torch.randn(K, R, S, C, device='cuda') / (R * S * C) ** 0.5).to(DTYPE)]"))
