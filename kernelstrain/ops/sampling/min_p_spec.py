"""Min-p sampling, the op min_p_cuda and min_p_triton implement: its entry point, title, what it
computes, dims and shapes, its minimum cost, its PyTorch reference and its GPU check (a sampled
token is right when it is kept and lies at the row's uniform x kept mass, _sampling.sample_check).

p >= min_p * p_max is x >= M + log(min_p) (M the row max): the kernels never need the softmax
denominator, only the max, the kept mass and a cumulative sum.
"""
from ..base import Cost, Task, kernelbench_program
from ..contract import Arg, Entry, Scalar
from ._sampling import SamplingSpec, rows_to_fail, sample_check

ENTRY = Entry("min_p_sampling", (
    Arg("logits", "in", ("B", "V"), "fp32"), Arg("min_p", "in", ("B",), "fp32"), Arg("uniform", "in", ("B",), "fp32"),
    Arg("tokens", "out", ("B",), "int32"), Scalar("B"), Scalar("V")))


# missing_scale keeps only the row's max token (min_p dropped), which the inverse-CDF sample picks anyway on about
# half the rows (CPU emulation on the module's inputs, randn * 4 logits, min_p 0.02-0.22: 48% wrong at V 32000,
# 56% at 128256; tests/test_label_truth.py). An H100 ran min_p_triton split_row_combine's render at B = 1 and it
# passed three times (roomM j2, 2026-12-07): offered only where B rows make a pass a one-in-a-million chance.
NO_MIN_P_ROWS = (("missing_scale", rows_to_fail(0.45)),)


def kept_check(x):
    """sample_check over the kept mass (p >= min_p * p_max) at uniform x kept mass, in float64."""
    probs = x[0].double().softmax(dim=-1)
    kept = probs.masked_fill(probs < x[1].double()[:, None] * probs.amax(-1, keepdim=True), 0.0)
    return sample_check(kept, x[2].double() * kept.sum(-1))


def check_adapter(d, model, x, ref, out_like):
    """CUDA: the candidate's token must be kept and sit at uniform x kept mass."""
    tok = out_like(ref)
    return [x[0], x[1], x[2], tok, d["B"], d["V"]], [("tokens", tok, ref, kept_check(x))]


def triton_check_adapter(d, model, x):
    """Triton: the wrapper returns the tokens; the same check."""
    check = kept_check(x)
    return [x[0], x[1], x[2]], lambda ret, ref: [("tokens", ret, ref, check)]


class MinPSpec(SamplingSpec):
    op = "min_p"
    title = "min-p sampling"
    desc = ("p = softmax(logits[b]); keep every token with p >= min_p[b] * max(p), renormalise the kept mass and "
            "return tokens[b] = the inverse-CDF sample in vocabulary order with uniform[b] (int32). fp32 logits "
            "[B, V] (finite), V a multiple of 4.")
    vendors = ("nvidia",)
    dims = {"B": "batch rows", "V": "vocabulary size"}
    shapes = ({"B": 1, "V": 128256}, {"B": 4, "V": 32000}, {"B": 16, "V": 151936}, {"B": 64, "V": 128256},
              {"B": 128, "V": 32000}, {"B": 256, "V": 128256})
    entry, inputs = ENTRY, ("logits", "min_p", "uniform")
    check_shape = {"B": 256, "V": 128256}
    check_adapter = staticmethod(check_adapter)

    def cost(self, task: Task) -> Cost:
        b, v = task["B"], task["V"]
        return Cost(flops=6 * b * v, bytes=b * v * 4 + b * 12)

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="logits, min_p, uniform",
            body=("probs = torch.softmax(logits, dim=-1)\n"
                  "        kept = probs.masked_fill(probs < min_p[:, None] * probs.amax(-1, keepdim=True), 0.0)\n"
                  "        cdf = kept.cumsum(-1)\n"
                  "        return (cdf < uniform[:, None] * cdf[:, -1:]).sum(-1).clamp(max=V - 1).to(torch.int32)"),
            inputs=("[torch.randn(B, V, dtype=DTYPE, device='cuda') * 4, torch.rand(B, device='cuda') * 0.2 + 0.02,\n"
                    "            torch.rand(B, device='cuda')]"))
