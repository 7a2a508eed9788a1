"""MoE combine, the op moe_combine_cuda implements: its entry point, what it computes, its
minimum cost and its PyTorch reference."""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("moe_combine", (
    Arg("expert_out", "in", ("T*topk", "K")), Arg("sorted_ids", "in", ("T*topk",), "int32"),
    Arg("topk_weights", "in", ("T", "topk"), "fp32"), Arg("y", "out", ("T", "K")),
    Scalar("T"), Scalar("K"), Scalar("topk")))


class MoeCombineSpec(OpModule):
    op, family = "moe_combine", "moe"
    title = "MoE combine (weighted top-k sum, back to token order)"
    desc = ("y[t, :] = sum_j topk_weights[t, j] * expert_out[p, :] where row p of the expert-sorted expert_out holds "
            "assignment t * topk + j (sorted_ids[p] = t * topk + j); fp32 weights and accumulation.")
    dims = {"T": "tokens", "topk": "experts per token", "K": "hidden size"}
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("expert_out", "sorted_ids", "topk_weights")
    check_shape = {"T": 2048, "topk": 6, "K": 2048}

    def cost(self, task: Task) -> Cost:
        t, topk, k, e = task["T"], task["topk"], task["K"], DTYPE_BYTES[task.dtype]
        return Cost(flops=2 * t * topk * k, bytes=t * topk * k * e + t * k * e + t * topk * 8)

    def reference(self, task: Task) -> str:
        body = ("rows = torch.empty_like(expert_out)\n"
                "        rows[sorted_ids.long()] = expert_out                    # back to assignment order\n"
                "        y = (rows.view(T, topk, K).float() * topk_weights.unsqueeze(-1)).sum(dim=1)\n"
                "        return y.to(expert_out.dtype)")
        inputs = ("[torch.randn(T * topk, K, dtype=DTYPE, device='cuda'),\n"
                  "            torch.randperm(T * topk, device='cuda').int(),   # any expert-sorted order\n"
                  "            torch.softmax(torch.randn(T, topk, device='cuda'), dim=-1)]")
        return kernelbench_program(task, self.title, args="expert_out, sorted_ids, topk_weights", body=body,
                                   inputs=inputs)
