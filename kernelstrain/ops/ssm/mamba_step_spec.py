"""Mamba single decode step (selective state update), the op mamba_step_cuda and mamba_step_triton
implement: its entry point, title, what it computes, dims and shapes, its minimum cost and its
PyTorch reference. The fp32 state is updated in place and returned after y.
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("mamba_step", (
    Arg("state", "inout", ("B", "D", "N"), "fp32"), Arg("x", "in", ("B", "D")), Arg("dt", "in", ("B", "D")),
    Arg("dt_bias", "in", ("D",), "fp32"), Arg("A", "in", ("D", "N"), "fp32"), Arg("Bs", "in", ("B", "N")),
    Arg("Cs", "in", ("B", "N")), Arg("Dskip", "in", ("D",), "fp32"), Arg("z", "in", ("B", "D")),
    Arg("y", "out", ("B", "D")), Scalar("B"), Scalar("D"), Scalar("N")), returns=("y", "state"))

SOFTPLUS = "(v <= 20.f ? log1pf(expf(v)) : v)"     # CUDA: softplus of a float v


class MambaStepSpec(OpModule):
    op, family = "mamba_step", "ssm"
    title = "Mamba selective state update (one decode step)"
    desc = ("dtv = softplus(dt + dt_bias); state[b, d, :] = exp(dtv * A[d, :]) * state[b, d, :] + dtv * x[b, d] * Bs[b, :] "
            "(fp32 state [B, D, N], updated in place); y[b, d] = (sum_n Cs[b, n] * state[b, d, n] + Dskip[d] * x[b, d]) "
            "* silu(z[b, d]); N a multiple of 16, at most 128.")
    dims = {"B": "batch (sequences decoding)", "D": "channels (d_inner)", "N": "state size"}
    shapes = ({"B": 1, "D": 5120, "N": 16}, {"B": 16, "D": 4096, "N": 16}, {"B": 64, "D": 5120, "N": 16},
              {"B": 256, "D": 2048, "N": 16}, {"B": 8, "D": 4096, "N": 128}, {"B": 32, "D": 8192, "N": 64})
    dtypes = ("fp16", "bf16")
    entry, inputs = ENTRY, ("state", "x", "dt", "dt_bias", "A", "Bs", "Cs", "Dskip", "z")
    check_shape = {"B": 64, "D": 4096, "N": 16}

    def cost(self, task: Task) -> Cost:
        b, d, n, e = task["B"], task["D"], task["N"], DTYPE_BYTES[task.dtype]
        return Cost(flops=b * d * (6 * n + 20), bytes=8 * b * d * n + 4 * b * d * e + 2 * b * n * e + 4 * d * (n + 2))

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="state, x, dt, dt_bias, A, Bs, Cs, Dskip, z",
            body=("dtv = torch.nn.functional.softplus(dt.float() + dt_bias)\n"
                  "        xf = x.float()\n"
                  "        state.copy_(torch.exp(dtv[..., None] * A) * state + (dtv * xf)[..., None] * Bs.float()[:, None, :])\n"
                  "        y = (state * Cs.float()[:, None, :]).sum(-1) + Dskip * xf\n"
                  "        return (y * torch.nn.functional.silu(z.float())).to(x.dtype), state"),
            inputs=("[torch.randn(B, D, N, device='cuda'), torch.randn(B, D, dtype=DTYPE, device='cuda'),\n"
                    "            (torch.randn(B, D, device='cuda') * 0.5).to(DTYPE), torch.rand(D, device='cuda') * -4 - 1,\n"
                    "            -torch.arange(1, N + 1, dtype=torch.float32, device='cuda').repeat(D, 1),\n"
                    "            torch.randn(B, N, dtype=DTYPE, device='cuda'), torch.randn(B, N, dtype=DTYPE, device='cuda'),\n"
                    "            torch.randn(D, device='cuda'), torch.randn(B, D, dtype=DTYPE, device='cuda')]"))
