"""RMSNorm forward, the op both RMSNorm modules implement: its entry point, title, what it
computes, dtypes and vendors, its minimum cost, its PyTorch reference and how a GPU check runs
it. Dims and shapes differ per impl (the Triton menu adds q/k-norm rows of D = 128), so each
module keeps its own.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("rmsnorm_forward", (
    Arg("x", "in", ("T", "D")), Arg("weight", "in", ("D",)), Arg("y", "out", ("T", "D")),
    Scalar("T"), Scalar("D"), Scalar("eps", "float", "1e-6")), py_name="rmsnorm")


class RMSNormSpec(OpModule):
    op, family = "rmsnorm", "norms"
    title = "RMSNorm forward"
    desc = "y[t, :] = x[t, :] * rsqrt(mean(x[t, :]^2) + eps) * weight, eps = 1e-6; fp32 statistics."
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"T": 4096, "D": 5120}

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=4 * t * d, bytes=(2 * t * d + d) * e)

    torch_ref = TorchRef(body="x32 = x.float()\n        y = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)\n"
                   "        return (y * self.weight.float()).to(x.dtype)",
        init="self.eps = 1e-6\n        self.weight = nn.Parameter(1 + 0.1 * torch.randn(D).to(DTYPE))",
        inputs="[torch.randn(T, D, dtype=DTYPE, device='cuda')]", init_inputs="[]")
