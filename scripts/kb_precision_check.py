"""CPU check (torch on CPU) of two precision questions of issue 15, against KernelBench's allclose
(atol = rtol = 1e-2 for 16-bit outputs): gemm_int4 with W rounded to 16 bits (the kernels' half2
scale multiply) against a reference that keeps W in fp32, and embedding backward through 16-bit
atomics (a rounding at every add, emulated in token order) against the fp32-accumulating reference.

    python3 scripts/kb_precision_check.py
"""
import torch


def outside(got, want) -> tuple:
    err = (got.float() - want.float()).abs()
    return err.max().item(), int((err > 1e-2 + 1e-2 * want.float().abs()).sum().item())


def gemm_int4(m, n, k, dt):
    qw = torch.randint(-2**31, 2**31 - 1, (n, k // 8), dtype=torch.int32)
    scales = (torch.rand(n, k // 128) * 0.01 + 0.005).to(dt)
    x = torch.randn(m, k, dtype=dt)
    q = ((qw.unsqueeze(-1) >> torch.arange(0, 32, 4, dtype=torch.int32)) & 0xF).reshape(n, k).float()
    w32 = (q - 8.0) * scales.float().repeat_interleave(128, dim=1)
    return outside((x.float() @ w32.to(dt).float().t()).to(dt), (x.float() @ w32.t()).to(dt))


def embedding_bwd(t, d, v, dt):
    ids = torch.where(torch.arange(t) % 8 == 0, 0, torch.randint(0, v, (t,)))
    g, gw = torch.randn(t, d, dtype=dt), torch.randn(v, d, dtype=dt) * 0.1
    keep = ids != 0
    want = gw.float().index_add(0, ids[keep], g[keep].float()).to(dt)
    got = gw.clone()
    for i in torch.nonzero(keep).flatten().tolist():
        got[ids[i]] = (got[ids[i]].float() + g[i].float()).to(dt)
    return outside(got, want)


if __name__ == "__main__":
    torch.manual_seed(0)
    for dt in (torch.bfloat16, torch.float16):
        print("gemm_int4 M 512 N 4096 K 4096", dt, "max err %.4g, %d elements outside" % gemm_int4(512, 4096, 4096, dt))
    for shape in ((4096, 4096, 32000), (65536, 1024, 128256)):
        for dt in (torch.bfloat16, torch.float16):
            print("embedding_bwd T D V", shape, dt, "max err %.4g, %d elements outside" % embedding_bwd(*shape, dt))
