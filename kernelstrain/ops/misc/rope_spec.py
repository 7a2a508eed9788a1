"""What rope_cuda and rope_triton share: the entry point (q and k rotated in place, the cos/sin
cache a Model buffer of MAX_POS positions) and the op description (dims, shapes, dtypes, cost,
PyTorch reference, check shape) in `RopeSpec`.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

# A rope off_by_one leaves some rotations undone. At position 0 a rotation is the identity, and the reference draws a
# token's position uniform in [0, 8192): with one token the bug passes 1 run in 8192 (more where only low-frequency
# pairs are skipped); offered only with >= 2 tokens (two positions: 1.5e-8). A bug skipping one pair of the whole
# output (its angle pos / 10000^(126/128) mostly small) passed gpu-check's tolerance in 0.4-0.6% of draws: none.
SEVERAL_POSITIONS = (("off_by_one", lambda t, p: t["T"] >= 2),)

MAX_POS = 8192
ENTRY = Entry("rope", (
    Arg("positions", "in", ("T",), "int64"), Arg("q", "inout", ("T", "H", "D")), Arg("k", "inout", ("T", "H", "D")),
    Arg("cos_sin_cache", "in", (MAX_POS, "D")), Scalar("T"), Scalar("H"), Scalar("D")))


class RopeSpec(OpModule):
    op, family = "rope", "misc"
    title = "Rotary embedding (NeoX) on q and k, in place"
    desc = ("q, k [T, H, D] are rotated in place: for i < D/2, x[i], x[i+D/2] <- x1 cos - x2 sin, x2 cos + x1 sin "
            f"with cos = cache[pos, i], sin = cache[pos, D/2 + i], pos = positions[t] (int64, < {MAX_POS}); fp32 math.")
    dims = {"T": "tokens", "H": "heads (q and k alike)", "D": "head dim (rotary dim)"}
    shapes = ({"T": 1, "H": 32, "D": 128}, {"T": 64, "H": 32, "D": 128}, {"T": 512, "H": 64, "D": 128},
              {"T": 2048, "H": 16, "D": 256}, {"T": 4096, "H": 32, "D": 128}, {"T": 16384, "H": 32, "D": 128})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("positions", "q", "k")
    check_shape = {"T": 2048, "H": 16, "D": 256}

    def cost(self, task: Task) -> Cost:
        t, h, d, e = task["T"], task["H"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=6 * t * h * d, bytes=(4 * t * h * d + t * d) * e + 8 * t)

    torch_ref = TorchRef(
        body="cs = self.cos_sin_cache[positions].float()[:, None, :]   # [T, 1, D]\n"
             "        cos, sin = cs[..., : D // 2], cs[..., D // 2 :]\n"
             "        for x in (q, k):\n"
             "            x1, x2 = x[..., : D // 2].float(), x[..., D // 2 :].float()\n"
             "            x.copy_(torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1))\n"
             "        return q, k",
        init=f"inv_freq = 1.0 / 10000 ** (torch.arange(0, D, 2, dtype=torch.float32) / D)\n"
             f"        freqs = torch.outer(torch.arange({MAX_POS}, dtype=torch.float32), inv_freq)\n"
             "        self.register_buffer('cos_sin_cache', torch.cat([freqs.cos(), freqs.sin()], -1).to(DTYPE))",
        inputs=f"[torch.randint(0, {MAX_POS}, (T,), device='cuda'), torch.randn(T, H, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.randn(T, H, D, dtype=DTYPE, device='cuda')]")
