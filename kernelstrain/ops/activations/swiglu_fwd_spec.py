"""SwiGLU forward, the op both swiglu_fwd modules implement: its entry point, title, what it
computes, dims, shapes, dtypes, vendors, its minimum cost, its PyTorch reference and check shape.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("swiglu_fwd", (Arg("x", "in", ("T", "2*I")), Arg("y", "out", ("T", "I")), Scalar("T"), Scalar("I")))


class SwigluFwdSpec(OpModule):
    op, family = "swiglu_fwd", "activations"
    title = "SwiGLU forward (silu(gate) * up)"
    desc = ("x is the fused [T, 2*I] gate|up projection; y[t, i] = silu(x[t, i]) * x[t, I + i] "
            "with silu(g) = g * sigmoid(g), computed in fp32.")
    dims = {"T": "tokens (rows)", "I": "intermediate size (width of y; x is 2*I wide)"}
    shapes = ({"T": 1, "I": 14336}, {"T": 32, "I": 11008}, {"T": 512, "I": 13824},
              {"T": 4096, "I": 11008}, {"T": 8192, "I": 14336}, {"T": 16384, "I": 28672})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"T": 1024, "I": 13824}

    def cost(self, task: Task) -> Cost:
        t, i, e = task["T"], task["I"], DTYPE_BYTES[task.dtype]
        return Cost(flops=6 * t * i, bytes=3 * t * i * e)    # exp, add, div, 2 mul; read 2*I, write I

    torch_ref = TorchRef(
        body="gate, up = x.float().chunk(2, dim=-1)\n        return (torch.nn.functional.silu(gate) * up).to(x.dtype)",
        inputs="[torch.randn(T, 2 * I, dtype=DTYPE, device='cuda')]")
