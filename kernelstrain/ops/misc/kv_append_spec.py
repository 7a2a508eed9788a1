"""Paged KV-cache append, the op kv_append_cuda implements: its entry point, title, what it
computes, dims and shapes, dtypes and vendors, its minimum cost, its PyTorch reference and how a
GPU check prepares the caches.
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("kv_append", (
    Arg("key", "in", ("T", "H", "D")), Arg("value", "in", ("T", "H", "D")),
    Arg("key_cache", "inout", ("2 * T // P + 2", "H", "P", "D")),
    Arg("value_cache", "inout", ("2 * T // P + 2", "H", "P", "D")),
    Arg("slot_mapping", "in", ("T",), "int64"), Scalar("T"), Scalar("H"), Scalar("D"), Scalar("P")))


def check_prepare(dims, inputs):
    """Random caches (never zeros: an unwritten slot keeps random data) and padding tokens
    (slot -1, skipped) every 37th token from the 4th; the last token is real."""
    import torch
    inputs[2].copy_(torch.randn_like(inputs[2]))
    inputs[3].copy_(torch.randn_like(inputs[3]))
    inputs[4][3::37] = -1


class KvAppendSpec(OpModule):
    op, family = "kv_append", "misc"
    title = "Paged KV-cache append"
    desc = ("key_cache[s / P, h, s % P, :] = key[t, h, :] and likewise for value, s = slot_mapping[t] "
            "(int64, negative = padding token, skipped); caches are [pages, H, P, D], D a multiple of 8.")
    dims = {"T": "new tokens this step", "H": "KV heads", "D": "head dim", "P": "page size (tokens per page)"}
    shapes = ({"T": 32, "H": 8, "D": 128, "P": 16}, {"T": 256, "H": 8, "D": 128, "P": 16},
              {"T": 4096, "H": 8, "D": 128, "P": 16}, {"T": 16384, "H": 8, "D": 128, "P": 16},
              {"T": 8192, "H": 32, "D": 128, "P": 16}, {"T": 4096, "H": 16, "D": 256, "P": 32})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("key", "value", "key_cache", "value_cache", "slot_mapping")
    check_shape = {"T": 4096, "H": 16, "D": 256, "P": 32}
    tolerance = "exact"
    check_prepare = staticmethod(check_prepare)

    def cost(self, task: Task) -> Cost:
        t, h, d, e = task["T"], task["H"], task["D"], DTYPE_BYTES[task.dtype]
        return Cost(flops=0, bytes=4 * t * h * d * e + 8 * t)

    torch_ref = TorchRef(
        body="keep = slot_mapping >= 0   # negative slots are padding\n"
             "        page, off = slot_mapping[keep] // P, slot_mapping[keep] % P\n"
             "        key_cache[page, :, off, :] = key[keep]   # HND pages: [page, head, offset, dim]\n"
             "        value_cache[page, :, off, :] = value[keep]\n"
             "        return key_cache, value_cache",
        inputs="[torch.randn(T, H, D, dtype=DTYPE, device='cuda'), torch.randn(T, H, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.zeros(2 * T // P + 2, H, P, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.zeros(2 * T // P + 2, H, P, D, dtype=DTYPE, device='cuda'),\n"
               "            torch.randperm((2 * T // P + 2) * P, device='cuda')[:T]]")
