"""LayerNorm backward, the op: its entry point (dx, dweight, dbias from dy, x, weight and the
saved fp32 mean / rstd), title, dims, shapes, minimum cost, PyTorch reference and check shape.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("layernorm_bwd", (
    Arg("dy", "in", ("T", "D")), Arg("x", "in", ("T", "D")), Arg("weight", "in", ("D",)),
    Arg("mean", "in", ("T",), "fp32"), Arg("rstd", "in", ("T",), "fp32"),
    Arg("dx", "out", ("T", "D")), Arg("dweight", "out", ("D",)), Arg("dbias", "out", ("D",)),
    Scalar("T"), Scalar("D")))


class LayerNormBwdSpec(OpModule):
    op, family = "layernorm_bwd", "norms"
    title = "LayerNorm backward"
    desc = ("Given dy, x, weight and the saved per-row mean and rstd (fp32): dx = rstd * (w*dy - mean(w*dy) "
            "- xhat * mean(w*dy*xhat)) with xhat = (x - mean) * rstd; dweight = sum_t dy*xhat, dbias = sum_t dy.")
    dims = {"T": "tokens (rows)", "D": "hidden size (row length)"}
    shapes = ({"T": 2048, "D": 2048}, {"T": 4096, "D": 4096}, {"T": 8192, "D": 5120},
              {"T": 16384, "D": 8192}, {"T": 32768, "D": 1024}, {"T": 1024, "D": 8192})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("dy", "x", "mean", "rstd")
    check_shape = {"T": 4096, "D": 5120}

    def cost(self, task: Task) -> Cost:
        t, d, e = task["T"], task["D"], DTYPE_BYTES[task.dtype]
        # read dy, x, weight, mean, rstd; write dx, dweight, dbias
        return Cost(flops=12 * t * d, bytes=3 * t * d * e + 3 * d * e + 8 * t)

    torch_ref = TorchRef(
        body="x32, dy32, w = x.float(), dy.float(), self.weight.float()\n"
             "        xhat = (x32 - mean[:, None]) * rstd[:, None]\n        wdy = w * dy32\n"
             "        dx = (wdy - xhat * (wdy * xhat).mean(-1, keepdim=True) - wdy.mean(-1, keepdim=True)) * rstd[:, None]\n"
             "        return dx.to(x.dtype), (dy32 * xhat).sum(0).to(x.dtype), dy32.sum(0).to(x.dtype)",
        init="self.weight = nn.Parameter(1 + 0.1 * torch.randn(D).to(DTYPE))",
        inputs="(lambda x: [torch.randn(T, D, dtype=DTYPE, device='cuda'), x, x.float().mean(-1),\n"
               "            torch.rsqrt(x.float().var(-1, unbiased=False) + 1e-5)])(torch.randn(T, D, dtype=DTYPE, device='cuda'))")
