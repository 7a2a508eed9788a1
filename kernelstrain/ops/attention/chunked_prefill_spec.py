"""Chunked prefill attention, the op chunked_prefill_cuda and chunked_prefill_triton implement: a
chunk of C new query tokens per sequence attends to its P cached prefix tokens and, causally, to
the chunk itself (KV = prefix ++ chunk, contiguous; grouped-query heads). Its entry point, dims,
shapes, minimum cost, PyTorch reference, and the tiling arithmetic both launch models use.
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, cdiv, kernelbench_program
from ..contract import Arg, Entry, Scalar

Q = ("B", "H", "C", "D")
KV = ("B", "KVH", "P + C", "D")
ENTRY = Entry("chunked_prefill", (
    Arg("q", "in", Q), Arg("k", "in", KV), Arg("v", "in", KV), Arg("o", "out", Q),
    Scalar("B"), Scalar("C"), Scalar("P")))


def pairs(c: int, p: int) -> int:
    """(query, key) pairs a head computes: every query sees the prefix and the chunk up to itself."""
    return c * p + c * (c + 1) // 2


def keys_visited(c: int, p: int, bm: int, bn: int, skip: bool) -> int:
    """Key positions the [bm]-row query tiles of one head visit: all P + C keys each, or (skip) the
    key blocks up to each tile's diagonal."""
    if not skip:
        return cdiv(c, bm) * bm * cdiv(p + c, bn) * bn
    return sum(bm * cdiv(p + min(m0 + bm, c), bn) * bn for m0 in range(0, c, bm))


def cost_of(task: Task) -> Cost:
    b, h, kvh, c, p, d = task["B"], task["H"], task["KVH"], task["C"], task["P"], task["D"]
    return Cost(flops=4 * b * h * d * pairs(c, p),
                bytes=(2 * b * h * c * d + 2 * b * kvh * (p + c) * d) * DTYPE_BYTES[task.dtype])


class ChunkedPrefillSpec(OpModule):
    op, family = "chunked_prefill", "attention"
    title = "Chunked prefill attention (cached prefix + causal chunk, GQA)"
    desc = ("o[b, h, i] = softmax_j(q[b, h, i] . k[b, g, j] * D^-0.5) v[b, g, j] over keys j <= P + i, g = h // (H / KVH); "
            "q, o [B, H, C, D] (the chunk's queries), k, v [B, KVH, P + C, D] (prefix then chunk); "
            "C and P multiples of 128; fp32 softmax statistics.")
    dims = {"B": "batch (sequences)", "H": "query heads", "KVH": "KV heads", "C": "chunk tokens (new queries)",
            "P": "cached prefix tokens", "D": "head dim"}
    shapes = ({"B": 1, "H": 32, "KVH": 8, "C": 512, "P": 3584, "D": 128},
              {"B": 4, "H": 32, "KVH": 8, "C": 1024, "P": 7168, "D": 128},
              {"B": 8, "H": 32, "KVH": 8, "C": 256, "P": 1792, "D": 128},
              {"B": 2, "H": 64, "KVH": 8, "C": 2048, "P": 14336, "D": 128},
              {"B": 16, "H": 28, "KVH": 4, "C": 512, "P": 512, "D": 128},
              {"B": 4, "H": 16, "KVH": 16, "C": 1024, "P": 3072, "D": 64})
    dtypes = ("fp16", "bf16")
    cost = staticmethod(cost_of)
    entry, inputs = ENTRY, ("q", "k", "v")
    check_shape = {"B": 2, "H": 16, "KVH": 4, "C": 512, "P": 1536, "D": 128}
    tolerance = "attn"

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="q, k, v",
            body="kk = k.float().repeat_interleave(H // KVH, 1)   # [B, H, P + C, D]\n"
                 "        vv = v.float().repeat_interleave(H // KVH, 1)\n"
                 "        s = q.float() @ kk.transpose(-1, -2) * D ** -0.5\n"
                 "        future = torch.arange(P + C, device=q.device)[None, :] > P + torch.arange(C, device=q.device)[:, None]\n"
                 "        return (s.masked_fill(future, float('-inf')).softmax(-1) @ vv).to(q.dtype)",
            inputs="[torch.randn(B, H, C, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randn(B, KVH, P + C, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randn(B, KVH, P + C, D, dtype=DTYPE, device='cuda')]")
