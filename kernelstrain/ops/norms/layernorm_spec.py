"""LayerNorm forward, the op both LayerNorm modules implement: its entry point, title, dims,
shapes, dtypes, vendors, its minimum cost, its PyTorch reference and its GPU check shape. Each
module words its own desc.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("layernorm_forward", (
    Arg("x", "in", ("T", "D")), Arg("weight", "in", ("D",)), Arg("bias", "in", ("D",)), Arg("y", "out", ("T", "D")),
    Scalar("T"), Scalar("D"), Scalar("eps", "float", "1e-5")), py_name="layernorm")


class LayerNormSpec(OpModule):
    op, family = "layernorm", "norms"
    title = "LayerNorm forward"
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 1, "D": 4096}, {"T": 64, "D": 4096}, {"T": 4096, "D": 4096},
              {"T": 8192, "D": 5120}, {"T": 16384, "D": 8192}, {"T": 8192, "D": 1024})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"T": 4096, "D": 5120}

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=7 * t * d, bytes=(2 * t * d + 2 * d) * e)

    torch_ref = TorchRef(
        body="y = torch.nn.functional.layer_norm(x.float(), (D,), self.weight.float(), self.bias.float(), self.eps)\n"
             "        return y.to(x.dtype)",
        init="self.eps = 1e-5\n        self.weight = nn.Parameter(1 + 0.1 * torch.randn(D).to(DTYPE))\n"
             "        self.bias = nn.Parameter(0.1 * torch.randn(D).to(DTYPE))",
        inputs="[torch.randn(T, D, dtype=DTYPE, device='cuda')]", init_inputs="[]")
