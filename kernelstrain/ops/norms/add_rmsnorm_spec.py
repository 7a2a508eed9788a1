"""Fused residual add + RMSNorm, the op both add_rmsnorm modules implement: its entry point,
title, what it computes, dims, shapes, dtypes, vendors, its minimum cost, its PyTorch reference
and its GPU check shape.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

# the residual stream is updated in place: residual = x + residual; y and it are the results
ENTRY = Entry("add_rmsnorm_forward", (
    Arg("x", "in", ("T", "D")), Arg("residual", "inout", ("T", "D")), Arg("weight", "in", ("D",)),
    Arg("y", "out", ("T", "D")), Scalar("T"), Scalar("D"), Scalar("eps", "float", "1e-6")),
    py_name="add_rmsnorm", returns=("y", "residual"))


class AddRMSNormSpec(OpModule):
    op, family = "add_rmsnorm", "norms"
    title = "Fused residual add + RMSNorm"
    desc = ("residual[t, :] += x[t, :] (in place), then y[t, :] = residual[t, :] * rsqrt(mean(residual[t, :]^2) "
            "+ eps) * weight, eps = 1e-6; fp32 statistics. Returns y and the updated residual.")
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 1, "D": 4096}, {"T": 64, "D": 4096}, {"T": 4096, "D": 4096},
              {"T": 8192, "D": 5120}, {"T": 16384, "D": 8192}, {"T": 2048, "D": 2048})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x", "residual")
    check_shape = {"T": 4096, "D": 5120}

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=5 * t * d, bytes=(4 * t * d + d) * e)   # read x, residual; write residual, y

    torch_ref = TorchRef(
        body="h = (x.float() + residual.float()).to(x.dtype)\n        h32 = h.float()\n"
             "        y = h32 * torch.rsqrt(h32.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight.float()\n"
             "        return y.to(x.dtype), h",
        init="self.eps = 1e-6\n        self.weight = nn.Parameter(1 + 0.1 * torch.randn(D).to(DTYPE))",
        inputs="[torch.randn(T, D, dtype=DTYPE, device='cuda'), torch.randn(T, D, dtype=DTYPE, device='cuda')]")
