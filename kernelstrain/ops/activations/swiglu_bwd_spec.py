"""SwiGLU backward, the op: its entry point (dx from dy and the saved gate|up input), title,
dims, shapes, dtypes, vendors, minimum cost, PyTorch reference and check shape.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("swiglu_bwd", (Arg("dy", "in", ("T", "I")), Arg("x", "in", ("T", "2*I")),
                             Arg("dx", "out", ("T", "2*I")), Scalar("T"), Scalar("I")))


class SwigluBwdSpec(OpModule):
    op, family = "swiglu_bwd", "activations"
    title = "SwiGLU backward"
    desc = ("Given dy [T, I] and the saved fused input x = [gate | up] [T, 2*I], writes "
            "dx = [dy * up * s * (1 + g * (1 - s)) | dy * g * s] with s = sigmoid(gate), in fp32.")
    dims = {"T": "tokens (rows)", "I": "intermediate size (width of dy; x and dx are 2*I wide)"}
    shapes = ({"T": 1, "I": 14336}, {"T": 64, "I": 11008}, {"T": 1024, "I": 13824},
              {"T": 4096, "I": 11008}, {"T": 8192, "I": 14336}, {"T": 16384, "I": 13824})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("dy", "x")
    check_shape = {"T": 1024, "I": 13824}

    def cost(self, task: Task) -> Cost:
        t, i, e = task["T"], task["I"], DTYPE_BYTES[task.dtype]
        return Cost(flops=12 * t * i, bytes=5 * t * i * e)     # read dy, gate, up; write d_gate, d_up

    torch_ref = TorchRef(
        body="g, u = x.float().chunk(2, dim=-1)\n        s = torch.sigmoid(g)\n        dy32 = dy.float()\n"
             "        d_gate = dy32 * u * s * (1 + g * (1 - s))\n"
             "        return torch.cat([d_gate, dy32 * g * s], dim=-1).to(x.dtype)",
        inputs="[torch.randn(T, I, dtype=DTYPE, device='cuda'), torch.randn(T, 2 * I, dtype=DTYPE, device='cuda')]")
