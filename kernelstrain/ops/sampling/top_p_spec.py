"""Top-p (nucleus) sampling, the op top_p_cuda implements: its entry point, title, what it
computes, dims and shapes, its minimum cost, its PyTorch reference and its GPU check (a sampled
token is right when it lies in the kept nucleus at the row's uniform, see _sampling.sample_check).
"""
from ..base import Cost, Task, TorchRef
from ..contract import Arg, Entry, Scalar
from ._sampling import SamplingSpec, sample_check

ENTRY = Entry("top_p_sampling", (
    Arg("logits", "in", ("B", "V"), "fp32"), Arg("top_p", "in", ("B",), "fp32"), Arg("uniform", "in", ("B",), "fp32"),
    Arg("tokens", "out", ("B",), "int32"), Scalar("B"), Scalar("V")))


def check_adapter(d, model, x, ref, out_like):
    """The candidate's token must be one the renormalised nucleus allows at uniform x kept mass."""
    import torch
    probs = torch.softmax(x[0].double(), dim=-1)
    sp = probs.sort(dim=-1, descending=True).values
    last = (sp.cumsum(-1) < x[1].double()[:, None]).sum(-1, keepdim=True).clamp(max=d["V"] - 1)
    kept = probs.masked_fill(probs < sp.gather(-1, last), 0.0)
    tok = out_like(ref)
    return ([x[0], x[1], x[2], tok, d["B"], d["V"]],
            [("tokens", tok, ref, sample_check(kept, x[2].double() * kept.sum(-1)))])


class TopPSpec(SamplingSpec):
    op = "top_p"
    title = "top-p (nucleus) sampling"
    desc = ("p = softmax(logits[b]); sort p descending, keep every token with p >= the first sorted p at which the "
            "cumulative mass reaches top_p[b]; tokens[b] = inverse-CDF sample in vocabulary order of the kept, "
            "renormalised mass with uniform[b]. fp32 logits [B, V] (finite, |x| < 256), V a multiple of 4.")
    dims = {"B": "batch rows", "V": "vocabulary size"}
    shapes = ({"B": 1, "V": 32000}, {"B": 8, "V": 128256}, {"B": 32, "V": 32000}, {"B": 64, "V": 128256},
              {"B": 128, "V": 32000}, {"B": 256, "V": 128256})
    entry, inputs = ENTRY, ("logits", "top_p", "uniform")
    check_shape = {"B": 256, "V": 128256}              # 256 rows so that a bug touching few rows still shows
    check_adapter = staticmethod(check_adapter)

    def cost(self, task: Task) -> Cost:
        b, v = task["B"], task["V"]
        return Cost(flops=10 * b * v, bytes=b * v * 4 + b * 12)

    torch_ref = TorchRef(
        body=("probs = torch.softmax(logits, dim=-1)\n"
              "        sp = probs.sort(dim=-1, descending=True).values\n"
              "        last = (sp.cumsum(-1) < top_p[:, None]).sum(-1, keepdim=True).clamp(max=V - 1)\n"
              "        kept = probs.masked_fill(probs < sp.gather(-1, last), 0.0)\n"
              "        cdf = kept.cumsum(-1)\n"
              "        return (cdf < uniform[:, None] * cdf[:, -1:]).sum(-1).clamp(max=V - 1).to(torch.int32)"),
        inputs=("[torch.randn(B, V, dtype=DTYPE, device='cuda') * 4, torch.rand(B, device='cuda') * 0.45 + 0.5,\n"
                "            torch.rand(B, device='cuda')]"))
