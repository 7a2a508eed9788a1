"""AdamW step, the op adamw_cuda implements: its entry point (pointer arrays, one pointer per
tensor), title, what it computes, dtypes and shapes, its minimum cost, its PyTorch reference
(the T tensors as views of four flat [N] buffers) and how a GPU check runs it.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, HostI64, HostPtrs, Scalar

# pointer arrays in host memory, one pointer per tensor; numels[t] the tensor's size
ENTRY = Entry("adamw_step", (
    Arg("params", "inout", ("N",), "fp32", ctype="float* const*"),
    Arg("grads", "in", ("N",), ctype="const scalar_t* const*"),
    Arg("exp_avgs", "inout", ("N",), "fp32", ctype="float* const*"),
    Arg("exp_avg_sqs", "inout", ("N",), "fp32", ctype="float* const*"),
    Arg("numels", "in", ("T",), "int64"), Scalar("num_tensors", value="T"),
    Scalar("lr", "float"), Scalar("beta1", "float", source="self.b1"), Scalar("beta2", "float", source="self.b2"),
    Scalar("eps", "float"), Scalar("weight_decay", "float", source="self.wd"), Scalar("step")))


def sizes(d) -> list:
    """numel of each of the T tensors: N split as evenly as possible (ragged)."""
    return [d["N"] // d["T"] + (i < d["N"] % d["T"]) for i in range(d["T"])]


def check_adapter(d, model, x, ref, out_like):
    """gpu_check: the pointer arrays hold views of the flat inputs, one per tensor (the check
    shape keeps every view 16-byte aligned); the updates are compared in place."""
    n = sizes(d)
    p, g, m, v = (t.split(n) for t in x)
    if any(t.data_ptr() % 16 for t in p):
        raise ValueError(f"adamw check shape {d}: a tensor view is not 16-byte aligned")
    return ([HostPtrs(p), HostPtrs(g), HostPtrs(m), HostPtrs(v), HostI64(n), d["T"],
             model.lr, model.b1, model.b2, model.eps, model.wd, model.step],
            [("params", x[0], ref[0], "fp32"), ("exp_avg", x[2], ref[1], "fp32"),
             ("exp_avg_sq", x[3], ref[2], "fp32")])


class AdamwSpec(OpModule):
    op, family = "adamw", "training"
    title = "AdamW optimizer step"
    desc = ("In place over T tensors of N fp32 params in total: p *= 1 - lr*wd; m = b1*m + (1-b1)*g; "
            "v = b2*v + (1-b2)*g^2; p -= lr/(1-b1^k) * m / (sqrt(v)/sqrt(1-b2^k) + eps). "
            "Grads g are in the task dtype, moments m, v fp32.")
    dims = {"N": "parameters in all tensors", "T": "number of tensors"}
    shapes = ({"N": 16777216, "T": 1}, {"N": 4194304, "T": 256}, {"N": 124439808, "T": 148},
              {"N": 218112000, "T": 9}, {"N": 1003520000, "T": 33}, {"N": 1235814400, "T": 146})
    dtypes = ("bf16", "fp32")
    vendors = ("nvidia", "amd")
    entry = ENTRY
    inputs = ("params", "grads", "exp_avgs", "exp_avg_sqs")
    check_shape = {"N": 16777259, "T": 9}    # ragged tensors: numels not multiples of 4 (vector tails)
    check_adapter = staticmethod(check_adapter)

    def cost(self, task: Task) -> Cost:
        n, g = task["N"], DTYPE_BYTES[task.dtype]
        return Cost(flops=16 * n, bytes=n * (24 + g))     # p, m, v read + written, g read

    torch_ref = TorchRef(
        body=("sizes = [N // T + (i < N % T) for i in range(T)]   # T ragged tensors, flat\n"
              "        bc1, bc2 = 1 - self.b1 ** self.step, 1 - self.b2 ** self.step\n"
              "        for pi, gi, mi, vi in zip(*(x.split(sizes) for x in (params, grads, exp_avgs, exp_avg_sqs))):\n"
              "            pi.mul_(1 - self.lr * self.wd)\n"
              "            mi.lerp_(gi.float(), 1 - self.b1)\n"
              "            vi.mul_(self.b2).addcmul_(gi.float(), gi.float(), value=1 - self.b2)\n"
              "            pi.addcdiv_(mi, vi.sqrt() / bc2 ** 0.5 + self.eps, value=-self.lr / bc1)\n"
              "        return params, exp_avgs, exp_avg_sqs"),
        init="self.lr, self.b1, self.b2, self.eps, self.wd, self.step = 1e-3, 0.9, 0.999, 1e-8, 0.01, 3",
        inputs=("[torch.randn(N, device='cuda'), torch.randn(N, dtype=DTYPE, device='cuda'),\n"
                "            torch.randn(N, device='cuda') * 0.1, torch.randn(N, device='cuda').abs() * 0.01]"),
        init_inputs="[]")
