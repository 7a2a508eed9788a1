"""Decode attention over a contiguous KV cache, the op: its entry point, title, dims, shapes,
minimum cost, PyTorch reference and GPU check data (the Triton module keeps the ladder).
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

KV = ("B", "H", "S", "D")
ENTRY = Entry("flash_decode", (
    Arg("q", "in", ("B", "H", "D")), Arg("k", "in", KV), Arg("v", "in", KV), Arg("o", "out", ("B", "H", "D")),
    Scalar("B"), Scalar("H"), Scalar("S"), Scalar("scale", "float", source="D ** -0.5")))


def cost_of(task: Task) -> Cost:
    b, h, s, d = task["B"], task["H"], task["S"], task["D"]
    return Cost(flops=4 * b * h * s * d, bytes=(2 * b * h * s * d + 2 * b * h * d) * DTYPE_BYTES[task.dtype])


class FlashDecodeSpec(OpModule):
    op, family = "flash_decode", "attention"
    title = "Decode attention (contiguous KV)"
    desc = ("o[b, h, :] = softmax(q[b, h, :] . k[b, h, :, :]^T * D^-0.5) @ v[b, h, :, :]: one new token per "
            "sequence attends to all S cached tokens; q, o are [B, H, D], k, v are [B, H, S, D].")
    dims = {"B": "batch (sequences)", "H": "attention heads", "S": "cached tokens (context length)",
            "D": "head dim"}
    shapes = ({"B": 1, "H": 32, "S": 4096, "D": 128}, {"B": 32, "H": 32, "S": 4096, "D": 128},
              {"B": 16, "H": 16, "S": 1024, "D": 64}, {"B": 4, "H": 64, "S": 16384, "D": 128},
              {"B": 64, "H": 32, "S": 8192, "D": 128}, {"B": 8, "H": 32, "S": 2048, "D": 128})
    vendors = ("nvidia", "amd")
    cost = staticmethod(cost_of)
    entry, inputs = ENTRY, ("q", "k", "v")
    check_shape, tolerance = {"B": 8, "H": 32, "S": 2048, "D": 128}, "attn"

    torch_ref = TorchRef(
        body="s = torch.einsum('bhd,bhsd->bhs', q.float(), k.float()) * D ** -0.5\n"
             "        return torch.einsum('bhs,bhsd->bhd', s.softmax(-1), v.float()).to(q.dtype)",
        inputs="[torch.randn(B, H, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.randn(B, H, S, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.randn(B, H, S, D, dtype=DTYPE, device='cuda')]")
