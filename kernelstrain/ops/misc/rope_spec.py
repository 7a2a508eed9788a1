"""What rope_cuda and rope_triton share: the entry point (q and k rotated in place, the cos/sin
cache a Model buffer of MAX_POS positions) and the op description (dims, shapes, dtypes, cost,
PyTorch reference, check shape) in `RopeSpec`.
"""
import math

from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

# A rope off_by_one leaves some rotations undone. At position 0 a rotation is the identity, and the reference draws a
# token's position uniform in [0, 8192): with one token the bug passes 1 run in 8192 (more where only low-frequency
# pairs are skipped); offered only with >= 2 tokens (two positions: 1.5e-8). A bug skipping one pair of the whole
# output (its angle pos / 10000^(126/128) mostly small) passed gpu-check's tolerance in 0.4-0.6% of draws: none.
SEVERAL_POSITIONS = (("off_by_one", lambda t, p: t["T"] >= 2),)
# The flat rungs' broadcast_index decomposes the (token, head) row r = t * H + h as if heads were outer ([H, T, D], the
# attention layout's habit): the position is read at r % T, not r / H. With one token r % 1 = 0 is right; with T >= 2
# most rows rotate by another token's position (uniform in [0, 8192): equal to its own 1 in 8192): offered at T >= 2.
HEAD_MAJOR = (("broadcast_index", lambda t, p: t["T"] >= 2),)


def wrong_position_error(d: int, positions: int = 8192) -> float:
    """RMS error over the reference's RMS of a head rotated by another token's position (broadcast_index): pair i
    turns by (p - p') f_i, f_i = 10000^(-2i/D), p and p' uniform on [0, positions): its error x1 (c - c') - x2 (s - s')
    has variance 2 (1 - E cos((p - p') f_i)) = 2 (1 - (sin(N f/2) / (N sin(f/2)))^2) for unit x (N = positions).
    Interpreted (TRITON_INTERPRET=1, T 16 H 32 D 128, 6% of rows at their own position): rel_l2 1.28 / sqrt(0.94) = 1.32.

    >>> round(wrong_position_error(128), 3), round(wrong_position_error(256), 3)
    (1.329, 1.326)
    """
    half, total = d // 2, 0.0
    for i in range(half):
        f = 10000 ** (-2 * i / d)
        total += 2 * (1 - (math.sin(positions * f / 2) / (positions * math.sin(f / 2))) ** 2)
    return math.sqrt(total / half)

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
