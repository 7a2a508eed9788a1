"""Fused QKV projection + rotary embedding, the op fused_qkv_rope_cuda and fused_qkv_rope_triton
implement: y = x . Wqkv^T split into q, k, v heads, q and k rotated (interleaved pairs) in the
epilogue. Its entry point, dims, shapes, minimum cost, PyTorch reference, and the GEMM view of a
task that the matmul launch models read.
"""
from dataclasses import replace

from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("fused_qkv_rope", (
    Arg("x", "in", ("T", "HID")), Arg("w", "in", ("(H + 2 * KVH) * D", "HID")),
    Arg("cos", "in", ("T", "D // 2"), "fp32"), Arg("sin", "in", ("T", "D // 2"), "fp32"),
    Arg("q", "out", ("T", "H", "D")), Arg("k", "out", ("T", "KVH", "D")), Arg("v", "out", ("T", "KVH", "D")),
    Scalar("T"), Scalar("HID")))


def qkv_cols(task: Task) -> int:
    return (task["H"] + 2 * task["KVH"]) * task["D"]


def gemm_view(task: Task) -> Task:
    """The task as the GEMM it is (M = T tokens, N = QKV columns, K = HID) for the matmul launch models."""
    return replace(task, shape=(("M", task["T"]), ("N", qkv_cols(task)), ("K", task["HID"])))


def cost_of(task: Task) -> Cost:
    t, hid, n, e = task["T"], task["HID"], qkv_cols(task), DTYPE_BYTES[task.dtype]
    rope = (task["H"] + task["KVH"]) * task["D"] // 2 * 6 * t      # 4 mul + 2 add a rotated pair
    return Cost(flops=2 * t * n * hid + rope, bytes=(t * hid + n * hid + t * n) * e + t * task["D"] * 4)


class FusedQkvRopeSpec(OpModule):
    op, family = "fused_qkv_rope", "attention"
    title = "Fused QKV projection + RoPE"
    desc = ("y = x . w^T (x [T, HID], w [(H + 2 KVH) D, HID], fp32 accumulate) split into q [T, H, D], k, v [T, KVH, D]; "
            "q and k rotated in interleaved pairs: (y[2i], y[2i+1]) -> (y0 cos[t, i] - y1 sin[t, i], y1 cos[t, i] + "
            "y0 sin[t, i]) with fp32 tables cos, sin [T, D/2]; HID a multiple of 64.")
    dims = {"T": "tokens", "HID": "hidden size (reduction dim)", "H": "query heads", "KVH": "KV heads", "D": "head dim"}
    shapes = ({"T": 4096, "HID": 4096, "H": 32, "KVH": 8, "D": 128},
              {"T": 2048, "HID": 5120, "H": 40, "KVH": 8, "D": 128},
              {"T": 8192, "HID": 4096, "H": 32, "KVH": 8, "D": 128},
              {"T": 512, "HID": 8192, "H": 64, "KVH": 8, "D": 128},
              {"T": 1024, "HID": 3584, "H": 28, "KVH": 4, "D": 128},
              {"T": 4096, "HID": 2048, "H": 16, "KVH": 16, "D": 64})
    dtypes = ("fp16", "bf16")
    cost = staticmethod(cost_of)
    entry, inputs = ENTRY, ("x", "w", "cos", "sin")
    check_shape = {"T": 1000, "HID": 2048, "H": 16, "KVH": 4, "D": 128}   # T: partial row tiles

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="x, w, cos, sin",
            body="y = x.float() @ w.float().t()              # [T, (H + 2 KVH) D]\n"
                 "        q, k, v = y.split([H * D, KVH * D, KVH * D], -1)\n"
                 "        c, s = cos[:, None, :], sin[:, None, :]\n"
                 "        def rope(z, n):                            # interleaved pairs (2i, 2i + 1)\n"
                 "            z = z.reshape(T, n, D // 2, 2)\n"
                 "            return torch.stack((z[..., 0] * c - z[..., 1] * s, z[..., 1] * c + z[..., 0] * s), -1)"
                 ".reshape(T, n, D)\n"
                 "        return rope(q, H).to(x.dtype), rope(k, KVH).to(x.dtype), v.reshape(T, KVH, D).to(x.dtype)",
            inputs="[torch.randn(T, HID, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randn((H + 2 * KVH) * D, HID, dtype=DTYPE, device='cuda') / HID ** 0.5,\n"
                   "            *rope_tables()]\n\n\n"
                   "def rope_tables():\n"
                   "    angle = (torch.arange(T, device='cuda') + 100.0)[:, None] * 10000.0 ** (-torch.arange(0, D, 2, "
                   "device='cuda') / D)\n"
                   "    return [angle.cos().float().contiguous(), angle.sin().float().contiguous()]")
