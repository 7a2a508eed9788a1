"""Speculative-decoding tree attention, the op: its entry point, title, dims, shapes, minimum
cost, PyTorch reference and GPU check data (the Triton module keeps the ladder).
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

NODE, CACHE = ("B", "H", "N", "D"), ("B", "H", "P", "D")
ENTRY = Entry("tree_attention", (
    Arg("q", "in", NODE), Arg("k_cache", "in", CACHE), Arg("v_cache", "in", CACHE), Arg("k_tree", "in", NODE),
    Arg("v_tree", "in", NODE), Arg("tree_mask", "in", ("B", "N"), "int64"), Arg("o", "out", NODE),
    Scalar("B"), Scalar("H"), Scalar("P"), Scalar("N")))


def nodes_pad(n: int) -> int:   # rows of the node tile: N up to a power of two, >= 16 (tl.dot's minimum M)
    return max(16, 1 << (n - 1).bit_length())


def tree_pairs(n: int) -> int:   # (node, ancestor-or-self) pairs of the reference's heap-ordered binary tree
    return sum((i + 1).bit_length() for i in range(n))


def cost_of(task: Task) -> Cost:
    b, h, p, n, d = (task[k] for k in ("B", "H", "P", "N", "D"))
    return Cost(flops=4 * b * h * d * (n * p + tree_pairs(n)),
                bytes=(2 * p + 4 * n) * b * h * d * DTYPE_BYTES[task.dtype] + b * n * 8)


class TreeAttentionSpec(OpModule):
    op, family = "tree_attention", "attention"
    title = "Speculative-decoding tree attention"
    desc = ("o[b, h, i] = softmax(q[b, h, i] . [k_cache[b, h]; k_tree[b, h]]^T / sqrt(D)) [v_cache; v_tree] where "
            "draft node i sees all P prefix keys and tree key j only if bit j of tree_mask[b, i] (int64) is set; "
            "q, k_tree, v_tree, o [B, H, N, D], k_cache, v_cache [B, H, P, D].")
    dims = {"B": "batch", "H": "heads", "P": "cached prefix length", "N": "draft tree nodes (<= 64)", "D": "head dim"}
    shapes = ({"B": 1, "H": 32, "P": 4093, "N": 64, "D": 128}, {"B": 8, "H": 32, "P": 2011, "N": 32, "D": 128},
              {"B": 32, "H": 32, "P": 1021, "N": 16, "D": 128}, {"B": 4, "H": 32, "P": 16001, "N": 64, "D": 128},
              {"B": 16, "H": 32, "P": 8190, "N": 8, "D": 128}, {"B": 2, "H": 40, "P": 31999, "N": 64, "D": 128})
    dtypes, vendors = ("bf16", "fp16"), ("nvidia", "amd")
    cost = staticmethod(cost_of)
    entry = ENTRY
    inputs = ("q", "k_cache", "v_cache", "k_tree", "v_tree", "tree_mask")
    check_shape = {"B": 8, "H": 32, "P": 2011, "N": 32, "D": 128}       # P: partial prefix tile
    tolerance = "attn"

    torch_ref = TorchRef(
        body="tree = ((tree_mask[:, :, None] >> torch.arange(N, device=q.device)) & 1).bool()      # [B, N, N]\n"
             "        keep = torch.cat([torch.ones(B, N, P, dtype=torch.bool, device=q.device), tree], 2)[:, None]\n"
             "        k, v = torch.cat([k_cache, k_tree], 2), torch.cat([v_cache, v_tree], 2)\n"
             "        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)",
        # draft tree in binary-heap order: the ancestors of node n (1-based) are n >> s
        inputs="[torch.randn(B, H, n, D, dtype=DTYPE, device='cuda') for n in (N, P, P, N, N)] + [\n"
               "            (((torch.arange(1, N + 1)[:, None, None] >> torch.arange(7)[None, :, None])\n"
               "              == torch.arange(1, N + 1)[None, None, :]).any(1).long() << torch.arange(N))\n"
               "            .sum(1).expand(B, N).contiguous().cuda()]")
