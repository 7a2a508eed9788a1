"""Non-causal cross attention, the op: its entry point, title, dims, shapes, minimum cost,
PyTorch reference and GPU check data (the Triton module keeps the ladder).
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

Q, KV = ("B", "H", "Sq", "D"), ("B", "H", "Skv", "D")
ENTRY = Entry("cross_attention", (
    Arg("q", "in", Q), Arg("k", "in", KV), Arg("v", "in", KV), Arg("o", "out", Q),
    Scalar("B"), Scalar("H"), Scalar("Sq"), Scalar("Skv")))


def cost_of(task: Task) -> Cost:
    b, h, sq, skv, d = (task[k] for k in ("B", "H", "Sq", "Skv", "D"))
    return Cost(flops=4 * b * h * sq * skv * d, bytes=(2 * sq + 2 * skv) * b * h * d * DTYPE_BYTES[task.dtype])


class CrossAttentionSpec(OpModule):
    op, family = "cross_attention", "attention"
    title = "Cross attention (non-causal, encoder keys)"
    desc = ("o[b, h, i] = softmax_j(q[b, h, i] . k[b, h, j] / sqrt(D)) v[b, h, j] over all Skv encoder "
            "positions; q, o [B, H, Sq, D], k, v [B, H, Skv, D]; no mask; fp32 softmax statistics.")
    dims = {"B": "batch", "H": "heads", "Sq": "query (decoder) positions", "Skv": "encoder positions",
            "D": "head dim"}
    shapes = ({"B": 16, "H": 20, "Sq": 448, "Skv": 1500, "D": 64}, {"B": 2, "H": 10, "Sq": 4096, "Skv": 77, "D": 64},
              {"B": 8, "H": 16, "Sq": 1024, "Skv": 4096, "D": 128}, {"B": 1, "H": 32, "Sq": 2048, "Skv": 6404, "D": 128},
              {"B": 1, "H": 32, "Sq": 1, "Skv": 6404, "D": 128}, {"B": 4, "H": 20, "Sq": 1, "Skv": 1500, "D": 64})
    dtypes, vendors = ("bf16", "fp16"), ("nvidia", "amd")
    cost = staticmethod(cost_of)
    entry, inputs = ENTRY, ("q", "k", "v")
    check_shape = {"B": 4, "H": 20, "Sq": 448, "Skv": 1500, "D": 64}    # Whisper: both lengths ragged
    tolerance = "attn"

    torch_ref = TorchRef(body="return torch.nn.functional.scaled_dot_product_attention(q, k, v)",
        inputs="[torch.randn(B, H, Sq, D, dtype=DTYPE, device='cuda'), "
               "torch.randn(B, H, Skv, D, dtype=DTYPE, device='cuda'), "
               "torch.randn(B, H, Skv, D, dtype=DTYPE, device='cuda')]")
