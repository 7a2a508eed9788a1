"""What flash_prefill_cuda and flash_prefill_triton share: the op description (dims, shapes,
dtypes, cost, PyTorch reference) in `FlashPrefillSpec`, and the causal tiling model used by
both launch models (`causal_work`, `causal_balance`, `query_tiles`); the entry point `ENTRY`.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES, cdiv
from ..contract import Arg, Entry, Scalar

LOG2E = 1.4426950408889634
QKV = ("B", "H", "S", "D")
ENTRY = Entry("flash_prefill", (
    Arg("q", "in", QKV), Arg("k", "in", QKV), Arg("v", "in", QKV), Arg("o", "out", QKV),
    Scalar("B"), Scalar("H"), Scalar("S"), Scalar("scale", "float", source="D ** -0.5")))


def causal_work(s: int, bm: int, bn: int, skip: bool = True) -> float:
    """Useful fraction of the score tiles computed: S(S+1)/2 scores over what the tiling computes.

    With `skip` the key tiles stop at each query tile's diagonal; without it every key tile is
    computed (and masked)."""
    if not skip:
        return (s + 1) / (2 * s)
    computed = sum(cdiv(min(s, (i + 1) * bm), bn) * bn for i in range(cdiv(s, bm))) * bm
    return s * (s + 1) / 2 / computed


def query_tiles(task, bm: int) -> tuple:
    """(query tiles, causal balance over the SMs, K/V re-read factor) of a grid of [bm] query tiles
    (heaviest first); K/V are re-read by every query tile, mostly from L2."""
    tiles, num_m = task["B"] * task["H"] * cdiv(task["S"], bm), cdiv(task["S"], bm)
    return tiles, causal_balance(tiles, num_m, task.gpu.sms), 1 + num_m / 32


def causal_balance(tiles: int, blocks: int, slots: int, heavy_first: bool = True) -> float:
    """Makespan of equal tiles over that of causal tiles costing 1..blocks, on `slots` workers."""
    avg = (blocks + 1) / 2
    tail = 1 if heavy_first else blocks / 2           # LPT ends on the cheapest tiles
    makespan = max(blocks, tiles * avg / slots + tail)
    return min(1.0, cdiv(tiles, slots) * avg / makespan)


class FlashPrefillSpec(OpModule):
    op, family = "flash_prefill", "attention"
    title = "Causal attention prefill (FlashAttention forward)"
    desc = ("o[b, h] = softmax(mask(q[b, h] k[b, h]^T * D^-0.5)) v[b, h] with a causal mask (key j <= query i); "
            "q, k, v, o are [B, H, S, D].")
    dims = {"B": "batch", "H": "heads", "S": "sequence length", "D": "head dim"}
    shapes = ({"B": 1, "H": 32, "S": 512, "D": 128}, {"B": 8, "H": 16, "S": 1024, "D": 64},
              {"B": 1, "H": 32, "S": 2048, "D": 128}, {"B": 4, "H": 32, "S": 4096, "D": 128},
              {"B": 2, "H": 32, "S": 8192, "D": 128}, {"B": 16, "H": 12, "S": 512, "D": 64})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("q", "k", "v")
    check_shape, tolerance = {"B": 1, "H": 32, "S": 2048, "D": 128}, "attn"

    def cost(self, task: Task) -> Cost:
        b, h, s, d = task["B"], task["H"], task["S"], task["D"]
        return Cost(flops=2 * b * h * s * s * d, bytes=4 * b * h * s * d * DTYPE_BYTES[task.dtype])

    torch_ref = TorchRef(
        body="s = (q.float() @ k.float().transpose(-1, -2)) * D ** -0.5\n"
             "        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool, device=q.device).triu(1), float('-inf'))\n"
             "        return (s.softmax(-1) @ v.float()).to(q.dtype)",
        inputs="[torch.randn(B, H, S, D, dtype=DTYPE, device='cuda') for _ in range(3)]")
