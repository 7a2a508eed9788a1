"""Row softmax, the op both softmax modules implement: its entry point, title, what it computes,
dims, shapes, dtypes, vendors, its minimum cost, its PyTorch reference and its check shape.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("softmax_forward", (Arg("x", "in", ("R", "C")), Arg("y", "out", ("R", "C")), Scalar("R"), Scalar("C")),
              py_name="softmax")


class SoftmaxSpec(OpModule):
    op, family = "softmax", "activations"
    title = "Row softmax"
    desc = "y[r, :] = softmax(x[r, :]) over the last dim (C columns) of an R x C matrix; fp32 max/sum."
    dims = {"R": "rows (tokens x heads, or batch for LM-head logits)", "C": "columns (vocab or key length)"}
    shapes = ({"R": 32, "C": 32000}, {"R": 32, "C": 128256}, {"R": 256, "C": 151936},
              {"R": 4096, "C": 32000}, {"R": 2048, "C": 4096}, {"R": 16384, "C": 1024})
    dtypes = ("fp32", "fp16", "bf16")
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x",)
    check_shape = {"R": 256, "C": 151936}       # Qwen vocab rows

    def cost(self, task: Task) -> Cost:
        r, c, e = task["R"], task["C"], DTYPE_BYTES[task.dtype]
        return Cost(flops=5 * r * c, bytes=2 * r * c * e)

    torch_ref = TorchRef(body="return torch.softmax(x.float(), dim=-1).to(x.dtype)",
        inputs="[4 * torch.randn(R, C, dtype=DTYPE, device='cuda')]")
