"""CPU models of two kernels whose labels KernelBench's own evaluator disputed on the H200
(docs/kernelbench_official_h200.txt), on the inputs KernelBench itself draws.

KernelBench (`eval.run_and_check_correctness`) seeds torch with 42, draws one trial seed per
correctness trial with `torch.randint(0, 2**32 - 1, (1,))`, draws the problem's `get_inputs()` after
each, and fails a trial when ANY element is outside `torch.allclose(ref, new, atol=tol, rtol=tol)`
(tol 1e-4 at fp32, 1e-2 at fp16 / bf16). What the models compute:

- softmax: softmax_cuda's online_softmax kernel, block per row, THREADS threads; thread t reads the
  columns i with i % THREADS == t, warp w the threads 32w..32w+31; the (max, sum) partials of the
  warps are merged, the first `merged` of them (off_by_one merges WARPS - 1). Every output element
  is written: y = exp(x - m) / d with the merged m and d.
- fp8: gemm_fp8_blockwise_cuda's fp8 tensor-core path (wgmma m64nNk32 / mma.sync k32 fp8): per
  32-wide K step the 32 exact products and the running partial are aligned to the largest of them
  and cut to `bits` fraction bits (toward zero) before they are summed (the reduced-precision fp8
  accumulation DeepSeek-V3's report describes as "around 14 bits"); each 128-wide K block's partial
  is then promoted into fp32 with its two scales (acc += part * (row_scale * col_scale)), as the
  kernel does. The H200 run's bulk (mean |bf16 diff| 0.000805) lies between this model at 13 bits
  (0.00072) and at 12 bits (0.00185): 12 bits is the pessimistic bound the tests use.

    python3 scripts/kb_cpu_models.py softmax [--threads 512] [--R 4096 --C 32000] [--dtype bf16]
    python3 scripts/kb_cpu_models.py fp8 [--bits 13] [--M 64 --N 24576 --K 1536] [--columns 2048] [--trials 5]
"""
from __future__ import annotations

import argparse
import sys

TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}      # KernelBench's get_tolerance_for_precision
WARP = 32


def trial_seeds(trials: int = 5, seed: int = 42) -> list:
    """KernelBench's correctness-trial seeds (run_and_check_correctness)."""
    import torch
    torch.manual_seed(seed)
    return [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(trials)]


def outside(ref, new, tol: float) -> int:
    """Elements torch.allclose(ref, new, atol=tol, rtol=tol) refuses (KernelBench's comparison)."""
    return int((~(ref.float() - new.float()).abs().le(tol + tol * new.float().abs())).sum())


# -- softmax_cuda online_softmax -------------------------------------------------------------
def online_softmax(x, threads: int, merged: int):
    """The kernel's output for rows x (its storage dtype): the first `merged` warps' partials merged."""
    import torch
    xf = x.float()
    keep = (torch.arange(x.shape[-1]) % threads) < merged * WARP
    m = xf[:, keep].amax(-1, keepdim=True)
    d = torch.exp(xf[:, keep] - m).sum(-1, keepdim=True)
    return (torch.exp(xf - m) / d).to(x.dtype)


def softmax_trial(rows: int, cols: int, dtype: str, threads: int, merged: int, seed: int, chunk: int = 256) -> tuple:
    """(elements outside KernelBench's tolerance, rows checked) in one trial of the problem's input
    4 * randn(R, C); stops after the first chunk of rows with a failure (the trial has failed)."""
    import torch
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    torch.manual_seed(seed)
    x = 4 * torch.randn(rows, cols, dtype=dt)
    for r0 in range(0, rows, chunk):
        part = x[r0:r0 + chunk]
        ref = torch.softmax(part.float(), dim=-1).to(dt)
        bad = outside(ref, online_softmax(part, threads, merged), TOLERANCE[dtype])
        if bad:
            return bad, r0 + part.shape[0]
    return 0, rows


# -- gemm_fp8_blockwise_cuda: fp8 tensor-core accumulation ------------------------------------
def fp8_blockwise_inputs(m: int, n: int, k: int, b_shift: int):
    """The problem's inputs, drawn as its reference_inputs() draws them; `b_shift` the power of two
    its B scales carry on top of 2^-1..2^1."""
    import torch
    a = (2 * torch.randn(m, k)).to(torch.float8_e4m3fn)
    b = (2 * torch.randn(n, k)).to(torch.float8_e4m3fn)
    sa = torch.exp2(torch.randint(-1, 2, ((k + 127) // 128, m)).float())
    sb = torch.exp2(torch.randint(-1, 2, ((n + 127) // 128, (k + 127) // 128)).float() - b_shift)
    return a, b, sa, sb


def fp8_blockwise(a, b, sa, sb, bits: int, columns: int):
    """(kernel model, exact) fp32 / fp64 outputs [M, columns] of the first `columns` columns."""
    import torch
    af, bf = a.float(), b[:columns].float()
    m, k = af.shape
    acc = torch.zeros(m, columns)
    exact = torch.zeros(m, columns, dtype=torch.float64)
    one = torch.ones(())
    for kb in range(k // 128):
        part = torch.zeros(m, columns)
        for k0 in range(kb * 128, kb * 128 + 128, 32):
            terms = torch.cat([part[..., None], af[:, None, k0:k0 + 32] * bf[None, :, k0:k0 + 32]], -1)   # exact
            _, e = torch.frexp(terms.abs().amax(-1, keepdim=True))   # the largest term lies in [2^(e-1), 2^e)
            q = torch.ldexp(one, (e - 1 - bits).float())
            part = (torch.trunc(terms / q) * q).sum(-1)                 # exact: < 2^24 quanta
        scale = sa[kb][:, None] * sb[torch.arange(columns) // 128, kb][None, :]
        acc = torch.addcmul(acc, part, scale)                            # acc + part * (rs * cs), fp32
        block = slice(kb * 128, kb * 128 + 128)
        exact += (af[:, block].double() @ bf[:, block].double().t()) * scale.double()
    return acc, exact


def fp8_trial(m: int, n: int, k: int, b_shift: int, bits: int, columns: int, seed: int) -> dict:
    import torch
    torch.manual_seed(seed)
    acc, exact = fp8_blockwise(*fp8_blockwise_inputs(m, n, k, b_shift), bits, min(columns, n))
    ref, new = exact.float().to(torch.bfloat16), acc.to(torch.bfloat16)
    diff = (ref.float() - new.float()).abs()
    return {"max_fp32_error": float((acc.double() - exact).abs().max()), "rms": float(exact.pow(2).mean().sqrt()),
            "mean_bf16_diff": float(diff.mean()), "max_bf16_diff": float(diff.max()),
            "outside": outside(ref, new, TOLERANCE["bf16"])}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="model", required=True)
    s = sub.add_parser("softmax")
    s.add_argument("--threads", type=int, default=512)
    s.add_argument("--R", type=int, default=4096)
    s.add_argument("--C", type=int, default=32000)
    s.add_argument("--dtype", default="bf16", choices=sorted(TOLERANCE))
    s.add_argument("--merged", type=int, help="warps merged (default WARPS - 1: the off_by_one bug)")
    f = sub.add_parser("fp8")
    f.add_argument("--bits", type=int, default=13)
    f.add_argument("--M", type=int, default=64)
    f.add_argument("--N", type=int, default=24576)
    f.add_argument("--K", type=int, default=1536)
    f.add_argument("--b-shift", type=int, help="default: the module's reference")
    f.add_argument("--columns", type=int, default=2048)
    for p in (s, f):
        p.add_argument("--trials", type=int, default=5)
    args = ap.parse_args(argv)
    for i, seed in enumerate(trial_seeds(args.trials)):
        if args.model == "softmax":
            merged = args.merged if args.merged is not None else args.threads // WARP - 1
            bad, rows = softmax_trial(args.R, args.C, args.dtype, args.threads, merged, seed, chunk=args.R)
            print(f"trial {i} (seed {seed}): {bad} elements outside KernelBench's tolerance", flush=True)
        else:
            shift = args.b_shift if args.b_shift is not None else fp8_b_shift(args.K)
            r = fp8_trial(args.M, args.N, args.K, shift, args.bits, args.columns, seed)
            print(f"trial {i} (seed {seed}): " + ", ".join(f"{k} {v:.6g}" for k, v in r.items()), flush=True)
    return 0


def fp8_b_shift(k: int) -> int:
    """The power of two on top of B's scales in gemm_fp8_blockwise_cuda's reference today: its
    inputs drawn with every randint at its highest value (B's scales then 2^(1 - shift))."""
    from unittest import mock

    import torch

    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    m = REGISTRY["gemm_fp8_blockwise_cuda"]
    ns = {}
    ref = m.reference(make_task(m, "H100", "fp8", {"M": 16, "N": 128, "K": k}))
    exec(compile(ref.replace("device='cuda'", "device='cpu'"), "<reference>", "exec"), ns)  # noqa: S102 - our own reference
    with mock.patch("torch.randint", lambda low, high, size, **kw: torch.full(size, high - 1)):
        sb = ns["get_inputs"]()[3]
    return 1 - int(torch.log2(sb).max())


if __name__ == "__main__":
    sys.exit(main())
