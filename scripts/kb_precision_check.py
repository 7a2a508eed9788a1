"""CPU check (torch on CPU) of two precision questions of issue 15, against KernelBench's allclose
(atol = rtol = 1e-2 for 16-bit outputs): gemm_int4 with W rounded to 16 bits (the kernels' half2
scale multiply) against a reference that keeps W in fp32, and embedding backward through 16-bit
atomics (a rounding at every add, emulated in token order) against the fp32-accumulating reference.
Then (S4-WD3) the GEMM half_accumulator: per-K-tile fp32 dots summed in the storage dtype (the
Triton rungs' ACC16) and every product summed in it (the CUDA rungs), and grad_clip's float total
of block sums (block_reduce_atomic before it became a double).

    python3 scripts/kb_precision_check.py [--gemm] [--grad-clip]
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


def half_acc_gemm(m, n, k, bk, dt):
    """bk: the K tile summed in fp32 before the 16-bit add (1: every product, the CUDA rungs)."""
    a, b = torch.randn(m, k).to(dt), (torch.randn(n, k) / k ** 0.5).to(dt)
    acc = torch.zeros(m, n, dtype=dt)
    for k0 in range(0, k, bk):
        acc = (acc.float() + (a[:, k0:k0 + bk].float() @ b[:, k0:k0 + bk].float().t()).to(dt).float()).to(dt)
    return outside(acc, (a.float() @ b.float().t()).to(dt))


def grad_clip_float_total(n, per_block):
    """Norm error of n / per_block block sums (chi-square of per_block squares of N(0, 1e-2))
    added one by one into a float, against the same sums added in double."""
    import numpy as np
    x = (np.random.default_rng(0).chisquare(per_block, n // per_block) * 1e-4).astype(np.float32)
    return float(np.sqrt(x.astype(np.float64).sum()) - np.sqrt(np.float64(np.cumsum(x, dtype=np.float32)[-1])))


def main(argv):
    if "--gemm" in argv:
        for m, n, k, bk in ((16, 8192, 8192, 64), (128, 1024, 14336, 32), (256, 512, 2048, 32), (64, 2048, 2048, 1)):
            for dt in (torch.float16, torch.bfloat16):
                print("half_accumulator M N K", (m, n, k), "tile", bk, dt, "max err %.4g, %d of %d outside"
                      % (*half_acc_gemm(m, n, k, bk, dt), m * n))
        return
    if "--grad-clip" in argv:
        print("grad_clip N 1235814400, 256 per block: float total off the norm by %.4f" %
              grad_clip_float_total(1235814400, 256))
        return
    for dt in (torch.bfloat16, torch.float16):
        print("gemm_int4 M 512 N 4096 K 4096", dt, "max err %.4g, %d elements outside" % gemm_int4(512, 4096, 4096, dt))
    for shape in ((4096, 4096, 32000), (65536, 1024, 128256)):
        for dt in (torch.bfloat16, torch.float16):
            print("embedding_bwd T D V", shape, dt, "max err %.4g, %d elements outside" % embedding_bwd(*shape, dt))


if __name__ == "__main__":
    import sys
    torch.manual_seed(0)
    main(sys.argv[1:])
