"""Embedding gather, the op embedding_gather_cuda implements: its entry point, title, what it
computes, dims and shapes, dtypes and vendors, its minimum cost, its PyTorch reference and its check.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("embedding_gather", (
    Arg("ids", "in", ("T",), "int64"), Arg("table", "in", ("V", "D")), Arg("out", "out", ("T", "D")),
    Scalar("T"), Scalar("V"), Scalar("D")))


class EmbeddingGatherSpec(OpModule):
    op, family = "embedding_gather", "misc"
    title = "Embedding gather"
    desc = "out[t, :] = table[ids[t], :] for int64 token ids into a [V, D] table; D a multiple of 8."
    dims = {"T": "tokens", "V": "vocabulary rows", "D": "hidden size"}
    shapes = ({"T": 32, "V": 128256, "D": 4096}, {"T": 512, "V": 128256, "D": 4096},
              {"T": 4096, "V": 128256, "D": 4096}, {"T": 16384, "V": 128256, "D": 4096},
              {"T": 8192, "V": 152064, "D": 3584}, {"T": 4096, "V": 128256, "D": 8192})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("ids", "table")
    check_shape = {"T": 4096, "V": 152064, "D": 3584}
    tolerance = "exact"

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=0, bytes=2 * t * d * e + 8 * t)

    torch_ref = TorchRef(body="return torch.nn.functional.embedding(ids, table)",
        inputs="[torch.randint(0, V, (T,), device='cuda'), torch.randn(V, D, dtype=DTYPE, device='cuda')]")
