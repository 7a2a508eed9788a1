"""Causal flash-attention backward, the op: its entry point, title, dims, shapes, minimum cost,
PyTorch reference and GPU check data (the Triton module keeps the ladder).
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

QKV = ("B", "H", "S", "D")
ENTRY = Entry("flash_attn_bwd", (
    Arg("q", "in", QKV), Arg("k", "in", QKV), Arg("v", "in", QKV), Arg("o", "in", QKV),
    Arg("lse", "in", ("B", "H", "S"), "fp32"), Arg("do", "in", QKV),
    Arg("dq", "out", QKV), Arg("dk", "out", QKV), Arg("dv", "out", QKV),
    Scalar("B"), Scalar("H"), Scalar("S")))


def cost_of(task: Task) -> Cost:   # 5 matmuls over the S(S+1)/2 causal pairs
    b, h, s, d = (task[k] for k in ("B", "H", "S", "D"))
    return Cost(flops=10 * b * h * d * s * (s + 1) // 2, bytes=8 * b * h * s * d * DTYPE_BYTES[task.dtype] + 4 * b * h * s)


class FlashAttnBwdSpec(OpModule):
    op, family = "flash_attn_bwd", "attention"
    title = "Flash attention backward (causal)"
    desc = ("Given q, k, v, o, dO [B, H, S, D] and lse [B, H, S] (fp32, natural log) of causal softmax attention "
            "with scale D^-0.5, compute dQ, dK, dV [B, H, S, D]: P = exp(QK^T*scale - lse), dV = P^T dO, "
            "dS = P * (dO V^T - rowsum(dO*O)), dQ = scale dS K, dK = scale dS^T Q. S is a multiple of 128.")
    dims = {"B": "batch", "H": "heads", "S": "sequence length", "D": "head dim"}
    shapes = ({"B": 4, "H": 32, "S": 2048, "D": 128}, {"B": 2, "H": 32, "S": 4096, "D": 128},
              {"B": 1, "H": 32, "S": 8192, "D": 128}, {"B": 8, "H": 16, "S": 1024, "D": 64},
              {"B": 16, "H": 16, "S": 512, "D": 64}, {"B": 2, "H": 16, "S": 4096, "D": 64})
    dtypes, vendors = ("bf16", "fp16"), ("nvidia", "amd")
    cost = staticmethod(cost_of)
    entry, inputs = ENTRY, ("q", "k", "v", "o", "lse", "do")
    check_shape, tolerance = {"B": 2, "H": 16, "S": 2048, "D": 128}, "attn"

    torch_ref = TorchRef(
        body="q, k, v = (t.detach().requires_grad_() for t in (q, k, v))\n"
             "        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
             "        out.backward(do)\n"
             "        return q.grad, k.grad, v.grad",
        # o and lse come from the same causal forward the kernel differentiates
        inputs="[q := torch.randn(B, H, S, D, dtype=DTYPE, device='cuda'), k := torch.randn_like(q),\n"
               "            v := torch.randn_like(q), torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True),\n"
               "            (q.float() @ k.float().transpose(-1, -2) * D ** -0.5).masked_fill(\n"
               "                torch.ones(S, S, dtype=torch.bool, device='cuda').triu(1), float('-inf')).logsumexp(-1),\n"
               "            torch.randn_like(q)]")
