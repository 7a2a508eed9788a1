"""Sliding-window causal attention prefill, the op: its entry point, title, dims, shapes, minimum
cost, PyTorch reference and GPU check data (the Triton module keeps the ladder).
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

QKV = ("B", "H", "S", "D")
ENTRY = Entry("sliding_window_attn", (
    Arg("q", "in", QKV), Arg("k", "in", QKV), Arg("v", "in", QKV), Arg("o", "out", QKV),
    Scalar("B"), Scalar("H"), Scalar("S"), Scalar("window")))


def pairs(s: int, w: int) -> int:
    """(query, key) pairs inside the causal window: sum over i of min(i + 1, W)."""
    return s * (s + 1) // 2 if w >= s else w * (w + 1) // 2 + (s - w) * w


def cost_of(task: Task) -> Cost:
    b, h, s, d, w, e = task["B"], task["H"], task["S"], task["D"], task["W"], DTYPE_BYTES[task.dtype]
    return Cost(flops=4 * b * h * d * pairs(s, w), bytes=4 * b * h * s * d * e)


class SlidingWindowSpec(OpModule):
    op, family = "sliding_window_attn", "attention"
    title = "Sliding-window causal attention prefill"
    desc = ("o[b, h, i] = softmax_j(q[b, h, i] . k[b, h, j] / sqrt(D)) v[b, h, j] over i - W < j <= i; "
            "q, k, v, o [B, H, S, D]; fp32 softmax statistics.")
    dims = {"B": "batch", "H": "heads", "S": "sequence length", "D": "head dim", "W": "window (keys per query)"}
    shapes = ({"B": 1, "H": 32, "S": 16384, "D": 128, "W": 4096}, {"B": 4, "H": 32, "S": 8192, "D": 128, "W": 4096},
              {"B": 2, "H": 16, "S": 16384, "D": 128, "W": 1024}, {"B": 8, "H": 32, "S": 3000, "D": 128, "W": 1024},
              {"B": 4, "H": 16, "S": 8192, "D": 256, "W": 4096}, {"B": 16, "H": 32, "S": 2048, "D": 128, "W": 512})
    dtypes, vendors = ("bf16", "fp16"), ("nvidia", "amd")
    cost = staticmethod(cost_of)
    entry, inputs = ENTRY, ("q", "k", "v")     # the window is the reference Model's attribute
    check_shape = {"B": 2, "H": 16, "S": 3000, "D": 128, "W": 1024}   # S: partial tiles
    tolerance = "attn"

    torch_ref = TorchRef(
        body="i = torch.arange(q.shape[2], device=q.device)\n"
             "        keep = (i[None, :] <= i[:, None]) & (i[None, :] > i[:, None] - self.window)\n"
             "        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)",
        init="self.window = W",
        inputs="[torch.randn(B, H, S, D, dtype=DTYPE, device='cuda') for _ in range(3)]")
