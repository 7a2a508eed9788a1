"""What selective_scan_cuda and selective_scan_triton share: the entry point and the op description
(dims, shapes, dtypes, cost, PyTorch reference, check shape) in `SelectiveScanSpec`. `desc` stays per impl (the CUDA
kernels also require L to be a multiple of 16).
"""
from ..base import Cost, OpModule, Task, TorchRef, DTYPE_BYTES
from ..contract import Arg, Entry, Scalar

ENTRY = Entry("selective_scan_fwd", (
    Arg("u", "in", ("B", "D", "L")), Arg("delta", "in", ("B", "D", "L")), Arg("A", "in", ("D", "N"), "fp32"),
    Arg("Bs", "in", ("B", "N", "L")), Arg("Cs", "in", ("B", "N", "L")), Arg("Dskip", "in", ("D",), "fp32"),
    Arg("z", "in", ("B", "D", "L")), Arg("delta_bias", "in", ("D",), "fp32"), Arg("y", "out", ("B", "D", "L")),
    Scalar("B"), Scalar("D"), Scalar("L")), py_name="selective_scan")


class SelectiveScanSpec(OpModule):
    op, family = "selective_scan", "ssm"
    title = "Mamba selective scan forward"
    dims = {"B": "batch", "L": "sequence length", "D": "channels (d_inner)", "N": "state size"}
    shapes = ({"B": 1, "L": 2048, "D": 1536, "N": 16}, {"B": 8, "L": 2048, "D": 5120, "N": 16},
              {"B": 2, "L": 8192, "D": 4096, "N": 16}, {"B": 16, "L": 1024, "D": 2048, "N": 16},
              {"B": 4, "L": 4096, "D": 5120, "N": 16}, {"B": 64, "L": 256, "D": 2048, "N": 16})
    vendors = ("nvidia", "amd")
    entry, inputs = ENTRY, ("u", "delta", "A", "Bs", "Cs", "Dskip", "z", "delta_bias")
    check_shape = {"B": 1, "L": 2048, "D": 1536, "N": 16}

    def cost(self, task: Task) -> Cost:
        b, l, d, n, e = task["B"], task["L"], task["D"], task["N"], DTYPE_BYTES[task.dtype]
        return Cost(flops=b * d * l * (7 * n + 15), bytes=4 * b * d * l * e + 2 * b * n * l * e + d * (n + 2) * 4)

    torch_ref = TorchRef(
        body=("dt = torch.nn.functional.softplus(delta.float() + delta_bias[None, :, None])\n"
              "        u32, Bf, Cf = u.float(), Bs.float(), Cs.float()\n"
              "        x = torch.zeros(u.shape[0], D, N, device=u.device)\n"
              "        ys = []\n"
              "        for t in range(L):\n"
              "            x = torch.exp(dt[:, :, t, None] * A) * x + (dt[:, :, t] * u32[:, :, t])[..., None] * Bf[:, None, :, t]\n"
              "            ys.append((x * Cf[:, None, :, t]).sum(-1))\n"
              "        y = torch.stack(ys, -1) + Dskip[None, :, None] * u32\n"
              "        return (y * torch.nn.functional.silu(z.float())).to(u.dtype)"),
        inputs=("[torch.randn(B, D, L, dtype=DTYPE, device='cuda'), (torch.randn(B, D, L, device='cuda') * 0.5).to(DTYPE),\n"
                "            -torch.arange(1, N + 1, dtype=torch.float32, device='cuda').repeat(D, 1),\n"
                "            torch.randn(B, N, L, dtype=DTYPE, device='cuda'), torch.randn(B, N, L, dtype=DTYPE, device='cuda'),\n"
                "            torch.randn(D, device='cuda'), torch.randn(B, D, L, dtype=DTYPE, device='cuda'),\n"
                "            torch.rand(D, device='cuda') * -4 - 1]"))
