"""Top-k sampling, the op topk_cuda implements: its entry point, title, what it computes, dims
and shapes, its minimum cost, its PyTorch reference and its GPU check (a sampled token is right
when it lies in the kept set at the row's uniform, see _sampling.sample_check).
"""
from ..base import Cost, Task, TorchRef
from ..contract import Arg, Entry, Scalar
from ._sampling import SamplingSpec, sample_check

ENTRY = Entry("topk_sampling", (
    Arg("logits", "in", ("B", "V"), "fp32"), Arg("uniform", "in", ("B",), "fp32"), Arg("tokens", "out", ("B",), "int32"),
    Scalar("B"), Scalar("V"), Scalar("K")))


def check_adapter(d, model, x, ref, out_like):
    """The candidate's token must be one the softmax over the K largest logits allows at u."""
    import torch
    logits, u = x[0].double(), x[1].double()
    thresh = torch.topk(logits, d["K"], dim=-1).values[:, -1:]
    kept = torch.softmax(logits.masked_fill(logits < thresh, float("-inf")), dim=-1)
    tok = out_like(ref)
    return [x[0], x[1], tok, d["B"], d["V"], d["K"]], [("tokens", tok, ref, sample_check(kept, u))]


class TopkSpec(SamplingSpec):
    op = "topk"
    title = "top-k sampling"
    desc = ("tokens[b] = inverse-CDF sample, in vocabulary order, of softmax over the K largest logits of row b "
            "(logits below the K-th largest are masked; ties with it kept), using uniform[b] in [0, 1). "
            "fp32 logits [B, V], K <= 64, V a multiple of 4; int32 tokens.")
    dims = {"B": "batch rows", "V": "vocabulary size", "K": "top-k"}
    shapes = ({"B": 1, "V": 32000, "K": 50}, {"B": 8, "V": 128256, "K": 50}, {"B": 32, "V": 32000, "K": 40},
              {"B": 64, "V": 128256, "K": 20}, {"B": 128, "V": 32000, "K": 50}, {"B": 256, "V": 128256, "K": 50})
    entry, inputs = ENTRY, ("logits", "uniform")
    check_shape = {"B": 256, "V": 128256, "K": 50}     # 256 rows so that a bug touching few rows still shows
    check_adapter = staticmethod(check_adapter)

    def cost(self, task: Task) -> Cost:
        b, v = task["B"], task["V"]
        return Cost(flops=6 * b * v, bytes=b * v * 4 + b * 8)

    torch_ref = TorchRef(
        body=("thresh = torch.topk(logits, K, dim=-1).values[:, -1:]\n"
              "        probs = torch.softmax(logits.masked_fill(logits < thresh, float('-inf')), dim=-1)\n"
              "        cdf = probs.cumsum(-1)\n"
              "        return (cdf < uniform[:, None]).sum(-1).clamp(max=V - 1).to(torch.int32)"),
        inputs="[torch.randn(B, V, dtype=DTYPE, device='cuda') * 2, torch.rand(B, device='cuda')]")
