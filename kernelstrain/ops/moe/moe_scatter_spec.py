"""MoE token dispatch, the op moe_scatter_cuda implements: its entry point, what it computes,
its minimum cost and its PyTorch reference."""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("moe_scatter", (
    Arg("x", "in", ("T", "K")), Arg("topk_ids", "in", ("T", "topk"), "int32"),
    Arg("x_sorted", "out", ("T*topk", "K")), Arg("sorted_ids", "out", ("T*topk",), "int32"),
    Arg("expert_offsets", "out", ("E+1",), "int32"),
    Scalar("T"), Scalar("E"), Scalar("K"), Scalar("topk")))


class MoeScatterSpec(OpModule):
    op, family = "moe_scatter", "moe"
    title = "MoE token dispatch (expert-sorted permutation)"
    desc = ("From topk_ids [T, topk] int32: expert_offsets [E + 1], sorted_ids (assignments a = t * topk + j "
            "grouped by expert, stable) and x_sorted[p, :] = x[sorted_ids[p] // topk, :].")
    dims = {"T": "tokens", "E": "experts", "topk": "experts per token", "K": "hidden size"}
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x", "topk_ids")
    check_shape = {"T": 2048, "E": 64, "topk": 6, "K": 2048}
    tolerance = "exact"

    def cost(self, task: Task) -> Cost:
        t, e, topk, k, elt = task["T"], task["E"], task["topk"], task["K"], DTYPE_BYTES[task.dtype]
        return Cost(flops=0, bytes=t * k * elt + t * topk * k * elt + t * topk * 8 + (e + 1) * 4)

    def reference(self, task: Task) -> str:
        body = ("flat = topk_ids.flatten().long()\n"
                "        sorted_ids = torch.argsort(flat, stable=True)\n"
                "        counts = torch.bincount(flat, minlength=E)\n"
                "        offsets = torch.cat([counts.new_zeros(1), counts.cumsum(0)])\n"
                "        return x[sorted_ids // topk], sorted_ids.int(), offsets.int()")
        inputs = ("[torch.randn(T, K, dtype=DTYPE, device='cuda'),\n"
                  "            torch.rand(T, E, device='cuda').argsort(dim=1)[:, :topk].int().contiguous()]")
        return kernelbench_program(task, self.title, args="x, topk_ids", body=body, inputs=inputs)
