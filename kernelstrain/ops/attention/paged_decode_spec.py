"""What paged_decode_cuda and paged_decode_triton share: the entry point, the op description
(dims, shapes, dtypes, cost, PyTorch reference) and the GPU check's shape, tolerance and input
preparation in `PagedDecodeSpec`.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES, cdiv
from ..contract import Arg, Entry, Scalar

CACHE = ("B * (S // P)", "P", "KVH", "D")
ENTRY = Entry("paged_decode", (
    Arg("q", "in", ("B", "H", "D")), Arg("k_cache", "in", CACHE), Arg("v_cache", "in", CACHE),
    Arg("block_table", "in", ("B", "S // P"), "int32"), Arg("seq_lens", "in", ("B",), "int32"),
    Arg("out", "out", ("B", "H", "D")), Scalar("batch", value="B"), Scalar("max_pages", value="S // P"),
    Scalar("scale", "float", source="D ** -0.5")))


def cost_of(task: Task) -> Cost:
    b, h, kvh, s, d = task["B"], task["H"], task["KVH"], task["S"], task["D"]
    kv = 2 * b * kvh * s * d + 2 * b * h * d
    return Cost(flops=4 * b * h * s * d, bytes=kv * DTYPE_BYTES[task.dtype] + b * cdiv(s, task["P"]) * 4)


def ragged_lens(d, inputs):
    """gpu_check: ragged contexts, as in serving: lengths in [S/2, S], most not a multiple of the
    page size; the first sequence keeps the full S."""
    import torch
    lens = torch.randint(d["S"] // 2, d["S"] + 1, (d["B"],), device=inputs[4].device, dtype=torch.int32)
    lens[0] = d["S"]
    inputs[4].copy_(lens)


class PagedDecodeSpec(OpModule):
    op, family = "paged_decode", "attention"
    title = "Paged-KV decode attention"
    desc = ("o[b, h] = softmax(q[b, h] . K_b^T * D^-0.5) V_b for one new token per sequence, where token t of "
            "sequence b lives in page block_table[b, t // P], slot t % P of k_cache/v_cache "
            "[num_pages, P, KVH, D]; query head h reads KV head h // (H / KVH).")
    dims = {"B": "batch (sequences)", "H": "query heads", "KVH": "KV heads", "S": "context length (tokens)",
            "D": "head dim", "P": "page size (tokens per page)"}
    shapes = ({"B": 1, "H": 32, "KVH": 8, "S": 4096, "D": 128, "P": 16},
              {"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16},
              {"B": 64, "H": 64, "KVH": 8, "S": 4096, "D": 128, "P": 16},
              {"B": 16, "H": 32, "KVH": 32, "S": 4096, "D": 128, "P": 16},
              {"B": 128, "H": 32, "KVH": 8, "S": 1024, "D": 128, "P": 32},
              {"B": 8, "H": 28, "KVH": 4, "S": 8192, "D": 128, "P": 16})
    vendors = ("nvidia", "amd")
    cost = staticmethod(cost_of)
    entry, inputs = ENTRY, ("q", "k_cache", "v_cache", "block_table", "seq_lens")
    check_shape = {"B": 32, "H": 32, "KVH": 8, "S": 2048, "D": 128, "P": 16}     # + ragged seq_lens
    tolerance, check_prepare = "attn", staticmethod(ragged_lens)

    torch_ref = TorchRef(
        body="k = k_cache[block_table].flatten(1, 2)[:, :S].float()   # [B, S, KVH, D]\n"
             "        v = v_cache[block_table].flatten(1, 2)[:, :S].float()\n"
             "        s = torch.einsum('bkgd,bskd->bkgs', q.float().view(B, KVH, H // KVH, D), k) * D ** -0.5\n"
             "        s = s.masked_fill(torch.arange(S, device=q.device) >= seq_lens[:, None, None, None], "
             "float('-inf'))\n"
             "        return torch.einsum('bkgs,bskd->bkgd', s.softmax(-1), v).reshape(B, H, D).to(q.dtype)",
        inputs="[torch.randn(B, H, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.randn(B * (S // P), P, KVH, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.randn(B * (S // P), P, KVH, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.randperm(B * (S // P), device='cuda').int().view(B, S // P),\n"
               "            torch.full((B,), S, dtype=torch.int32, device='cuda')]")
