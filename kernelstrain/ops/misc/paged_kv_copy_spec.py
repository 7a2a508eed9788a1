"""Paged KV-cache block copy (vLLM's copy_blocks), the op paged_kv_copy_cuda and paged_kv_copy_triton
implement: its entry point, title, what it computes, dims and shapes, its minimum cost and its
PyTorch reference. Each cache block is P x H x D contiguous elements (E = P * H * D), so a copy
is a memcpy of E elements per (src, dst) pair, for the K and the V cache.
"""
from ..base import Cost, OpModule, Task, DTYPE_BYTES, kernelbench_program
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("paged_kv_copy", (
    Arg("key_cache", "inout", ("NB", "P", "H", "D")), Arg("value_cache", "inout", ("NB", "P", "H", "D")),
    Arg("block_mapping", "in", ("M", 2), "int64"), Scalar("M"), Scalar("P"), Scalar("H"), Scalar("D")))


def block_elems(task: Task) -> int:
    """E: elements of one cache block (P tokens x H heads x D)."""
    return task["P"] * task["H"] * task["D"]


def chunks16(task: Task) -> int:
    """16-byte chunks of one cache block."""
    return block_elems(task) * DTYPE_BYTES[task.dtype] // 16


class PagedKvCopySpec(OpModule):
    op, family = "paged_kv_copy", "misc"
    title = "Paged KV-cache block copy"
    desc = ("For every pair m: key_cache[dst] = key_cache[src] and value_cache[dst] = value_cache[src], "
            "(src, dst) = block_mapping[m] (int64); caches are [NB, P, H, D] (vLLM's copy_blocks for "
            "prefix-cache forks / beam search); the M destination blocks are distinct and no source is a "
            "destination; H * D a multiple of 8.")
    dims = {"NB": "blocks in each cache", "M": "(src, dst) pairs to copy", "P": "block size (tokens per block)",
            "H": "KV heads", "D": "head dim"}
    shapes = ({"NB": 1024, "M": 32, "P": 16, "H": 8, "D": 128}, {"NB": 2048, "M": 256, "P": 16, "H": 8, "D": 128},
              {"NB": 4096, "M": 1024, "P": 16, "H": 8, "D": 128}, {"NB": 1024, "M": 128, "P": 16, "H": 32, "D": 128},
              {"NB": 2048, "M": 512, "P": 32, "H": 8, "D": 64}, {"NB": 1024, "M": 8, "P": 16, "H": 4, "D": 256})
    dtypes = ("fp16", "bf16")
    entry, inputs = ENTRY, ("key_cache", "value_cache", "block_mapping")
    check_shape = {"NB": 2048, "M": 256, "P": 16, "H": 8, "D": 128}
    tolerance = "exact"

    def cost(self, task: Task) -> Cost:
        return Cost(flops=0, bytes=4 * task["M"] * block_elems(task) * DTYPE_BYTES[task.dtype] + 16 * task["M"])

    def reference(self, task: Task) -> str:
        return kernelbench_program(
            task, self.title, args="key_cache, value_cache, block_mapping",
            body="src, dst = block_mapping[:, 0], block_mapping[:, 1]\n"
                 "        key_cache[dst] = key_cache[src]\n"
                 "        value_cache[dst] = value_cache[src]\n"
                 "        return key_cache, value_cache",
            inputs="[torch.randn(NB, P, H, D, dtype=DTYPE, device='cuda'), torch.randn(NB, P, H, D, dtype=DTYPE, device='cuda'),\n"
                   "            torch.randperm(NB, device='cuda')[:2 * M].view(2, M).t().contiguous()]")
