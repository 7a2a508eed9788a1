"""What grouped_gemm_cuda and grouped_gemm_triton share: the entry point and the op description
(dims, shapes, dtypes, cost, PyTorch reference, check shape) in `GroupedGemmSpec`, and the uniform top-k routing model
(`routing`) both launch models size their tiles by.
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("grouped_gemm", (
    Arg("x", "in", ("T", "K")), Arg("w", "in", ("E", "N", "K")), Arg("sorted_ids", "in", ("T*topk",), "int32"),
    Arg("expert_offsets", "in", ("E+1",), "int32"), Arg("y", "out", ("T*topk", "N")),
    Scalar("T"), Scalar("E"), Scalar("K"), Scalar("N"), Scalar("topk")))


def short_runs(run_bytes: int) -> float:
    """DRAM traffic factor of weight rows read in runs of `run_bytes` (a K tile's width): runs
    under a 128-byte line stream at ~0.6 of the bandwidth (H200, grouped_gemm_triton: BLOCK_K 32
    fp16 325 us, BLOCK_K 64 200 us, same shape and grid)."""
    return 1.6 if run_bytes < 128 else 1.0


def routing(task: Task) -> tuple:
    """(rows, experts that receive rows, rows per active expert) under uniform top-k routing."""
    t, e, topk = task["T"], task["E"], task["topk"]
    active = e * (1 - (1 - topk / e) ** t)
    return t * topk, active, t * topk / active


class GroupedGemmSpec(OpModule):
    op, family = "grouped_gemm", "moe"
    title = "MoE grouped GEMM (expert-sorted rows)"
    desc = ("y[a, :] = x[a // topk, :] @ w[e, :, :]^T for every assignment a = t * topk + j routed to expert e; "
            "rows come expert-sorted (sorted_ids int32, expert_offsets int32 [E + 1]); fp32 accumulation.")
    dims = {"T": "tokens", "E": "experts", "K": "hidden size (reduction)", "N": "expert output features",
            "topk": "experts per token"}
    shapes = ({"T": 16, "E": 8, "K": 4096, "N": 14336, "topk": 2}, {"T": 512, "E": 8, "K": 4096, "N": 14336, "topk": 2},
              {"T": 4096, "E": 8, "K": 4096, "N": 14336, "topk": 2}, {"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6},
              {"T": 2048, "E": 64, "K": 2048, "N": 2816, "topk": 6}, {"T": 8192, "E": 128, "K": 2048, "N": 1536, "topk": 8})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("x", "sorted_ids", "expert_offsets")     # w: the Model's weight
    check_shape = {"T": 64, "E": 64, "K": 2048, "N": 2816, "topk": 6}    # ~6 rows an expert

    def cost(self, task: Task) -> Cost:
        k, n, e = task["K"], task["N"], DTYPE_BYTES[task.dtype]
        rows, active, _ = routing(task)
        return Cost(flops=2 * rows * k * n, bytes=(task["T"] * k + active * n * k + rows * n) * e + rows * 4)

    def reference(self, task: Task) -> str:
        body = ("y = x.new_empty(T * topk, N)\n"
                "        ids = sorted_ids.long()\n"
                "        for e in range(E):\n"
                "            a = ids[expert_offsets[e]:expert_offsets[e + 1]]\n"
                "            y[a] = (x[a // topk].float() @ self.w[e].float().t()).to(x.dtype)\n"
                "        return y")
        inputs = ("[torch.randn(T, K, dtype=DTYPE, device='cuda'), *_route()]\n\n\n"
                  "def _route():\n"
                  "    topk_ids = torch.rand(T, E).argsort(dim=1)[:, :topk].flatten()   # distinct experts per token\n"
                  "    sorted_ids = torch.argsort(topk_ids, stable=True).int()\n"
                  "    counts = torch.bincount(topk_ids, minlength=E)\n"
                  "    offsets = torch.cat([torch.zeros(1, dtype=torch.long), counts.cumsum(0)]).int()\n"
                  "    return [sorted_ids.cuda(), offsets.cuda()]")
        return kernelbench_program(task, self.title, args="x, sorted_ids, expert_offsets", body=body,
                                   init="self.w = nn.Parameter(torch.randn(E, N, K, dtype=DTYPE))",
                                   inputs=inputs)
