"""Sliding-window decode attention, the op swa_decode_cuda and swa_decode_triton implement: its
entry point, dims, shapes, minimum cost and PyTorch reference. One new query token per sequence
attends to the last W tokens of a contiguous KV cache of S tokens (grouped-query heads).
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

KV = ("B", "KVH", "S", "D")
ENTRY = Entry("swa_decode", (
    Arg("q", "in", ("B", "H", "D")), Arg("k_cache", "in", KV), Arg("v_cache", "in", KV),
    Arg("o", "out", ("B", "H", "D")), Scalar("B"), Scalar("S"), Scalar("W")))


def cost_of(task: Task) -> Cost:
    b, h, kvh, w, d = task["B"], task["H"], task["KVH"], task["W"], task["D"]
    return Cost(flops=4 * b * h * w * d, bytes=(2 * b * kvh * w * d + 2 * b * h * d) * DTYPE_BYTES[task.dtype])


def head_defines(task: Task) -> dict:
    """Compile-time facts every render bakes in: head counts, head dim and the softmax scale."""
    return {"NUM_HEADS": task["H"], "NUM_KV_HEADS": task["KVH"], "GROUP": task["H"] // task["KVH"],
            "HEAD_DIM": task["D"], "SM_SCALE": f"{task['D'] ** -0.5!r}f"}


class SwaDecodeSpec(OpModule):
    op, family = "swa_decode", "attention"
    title = "Sliding-window decode attention (GQA, contiguous KV cache)"
    desc = ("o[b, h] = softmax(q[b, h] . K^T * D^-0.5) V over the last W cached tokens S - W <= t < S of KV head "
            "h // (H / KVH); q, o [B, H, D], k_cache, v_cache [B, KVH, S, D]; fp32 softmax statistics.")
    dims = {"B": "batch (sequences)", "H": "query heads", "KVH": "KV heads", "S": "cached tokens",
            "W": "window (keys attended, W <= S)", "D": "head dim"}
    shapes = ({"B": 1, "H": 32, "KVH": 8, "S": 8192, "W": 4096, "D": 128},
              {"B": 32, "H": 32, "KVH": 8, "S": 8192, "W": 4096, "D": 128},
              {"B": 64, "H": 32, "KVH": 8, "S": 4096, "W": 1024, "D": 128},
              {"B": 16, "H": 64, "KVH": 8, "S": 32768, "W": 4096, "D": 128},
              {"B": 8, "H": 28, "KVH": 4, "S": 16384, "W": 4096, "D": 128},
              {"B": 32, "H": 16, "KVH": 16, "S": 4096, "W": 2048, "D": 64})
    dtypes = ("fp16", "bf16")
    cost = staticmethod(cost_of)
    entry, inputs = ENTRY, ("q", "k_cache", "v_cache")
    check_shape = {"B": 8, "H": 32, "KVH": 8, "S": 4096, "W": 1000, "D": 128}   # W: ragged tail tiles
    tolerance = "attn"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="q, k_cache, v_cache",
            body="k = k_cache[:, :, S - W:].float().repeat_interleave(H // KVH, 1)   # [B, H, W, D]\n"
                 "        v = v_cache[:, :, S - W:].float().repeat_interleave(H // KVH, 1)\n"
                 "        s = torch.einsum('bhd,bhwd->bhw', q.float(), k) * D ** -0.5\n"
                 "        return torch.einsum('bhw,bhwd->bhd', s.softmax(-1), v).to(q.dtype)",
            inputs="[torch.randn(B, H, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randn(B, KVH, S, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randn(B, KVH, S, D, dtype=DTYPE, device='cuda')]")
