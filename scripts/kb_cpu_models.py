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
- split: cross_entropy_fwd_triton's split_v_combine (SPLIT slices each leave a (max, sum) pair, a
  combine merges them), with its missing_scale / bad_combine_index bug or none.
- the draws: a problem's normal inputs drawn in fp32 and rounded to the dtype (`--draw fp32`, what
  the export's problems do), or as torch 2.11's CPU randn draws them at a 16-bit dtype (`--draw
  cpu16`: within +-3.33 sigma at bf16, the largest values recurring), which is what hid both labels'
  bugs from KernelBench on the H100 calls of seed 7373 (docs/kernelbench_h200.md).
- fp8: gemm_fp8_blockwise_cuda's fp8 tensor-core path (wgmma m64nNk32 / mma.sync k32 fp8): per
  32-wide K step the 32 exact products and the running partial are aligned to the largest of them
  and cut to `bits` fraction bits (toward zero) before they are summed (the reduced-precision fp8
  accumulation DeepSeek-V3's report describes as "around 14 bits"); each 128-wide K block's partial
  is then promoted into fp32 with its two scales (acc += part * (row_scale * col_scale)), as the
  kernel does. The H200 run's bulk (mean |bf16 diff| 0.000805) lies between this model at 13 bits
  (0.00072) and at 12 bits (0.00185): 12 bits is the pessimistic bound the tests use.
- flash_bwd: flash_attn_bwd_triton's backward (FA2's arithmetic: P = exp(S - lse) and
  dS = P (dO V^T - rowsum(dO o)) in fp32, each rounded to bf16 before its dot, fp32 accumulation)
  against SDPA's bf16 backward (the same arithmetic on its own forward's O, S summed in another
  order), per head the largest |ref - new| / (tol + tol |new|) of dq, dk, dv, with the o the problem
  gives the kernel: `--o cpu` torch's CPU bf16 attention of the inputs (get_inputs() on the CPU: the
  export before the fix), `--o derived` the reference forward's own O (the export's problem now).

    python3 scripts/kb_cpu_models.py softmax [--threads 512] [--R 4096 --C 32000] [--dtype bf16] [--draw cpu16]
    python3 scripts/kb_cpu_models.py split [--T 16 --V 128256] [--split 4] [--bug missing_scale] [--draw cpu16]
    python3 scripts/kb_cpu_models.py fp8 [--bits 13] [--M 64 --N 24576 --K 1536] [--columns 2048] [--trials 5]
    python3 scripts/kb_cpu_models.py flash_bwd [--o cpu|derived] [--heads 4] [--B 4 --H 32 --S 2048 --D 128] [--draw cpu16]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))     # kernelstrain, for the module's reference

TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}      # KernelBench's get_tolerance_for_precision
DRAWS = ("fp32", "cpu16")                                    # draw(): how a problem's normal inputs are drawn
WARP = 32


def trial_seeds(trials: int = 5, seed: int = 42) -> list:
    """KernelBench's correctness-trial seeds (run_and_check_correctness)."""
    import torch
    torch.manual_seed(seed)
    return [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(trials)]


def outside(ref, new, tol: float) -> int:
    """Elements torch.allclose(ref, new, atol=tol, rtol=tol) refuses (KernelBench's comparison)."""
    return int((~(ref.float() - new.float()).abs().le(tol + tol * new.float().abs())).sum())


# -- the inputs ---------------------------------------------------------------------------------
def torch_dtype(name: str):
    import torch
    return {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]


def randn_cpu16(shape: tuple, dtype: str):
    """A normal draw built as torch's CPU randn builds one at a 16-bit dtype through 2.11
    (aten/src/ATen/native/cpu/DistributionTemplates.h normal_fill; pytorch/pytorch#166853):
    uniforms of the dtype's `digits` bits (256 levels at bf16), then Box-Muller computed in the
    dtype on blocks of 16 (8 radii, 8 angles), so |x| <= sqrt(2 ln 256) = 3.33 at bf16 and the
    largest values recur. Its uniforms are the generator's words masked to `digits` bits, as
    randint(0, 2^digits) reads them, so this gives torch 2.11's values: with it, the export's
    cross-entropy problem (T 16 V 128256 bf16) gives the H100's reference loss of KernelBench's
    first trial, row 14, 17.60543 (the device's 17.605433, its logsumexp on the GPU)."""
    import math

    import torch
    dt = torch_dtype(dtype)
    digits = {"bf16": 8, "fp16": 11}[dtype]
    n = math.prod(shape)
    assert n % 16 == 0, "the 16-element blocks only"
    u = (torch.randint(0, 1 << digits, (n,)).float() / (1 << digits)).view(-1, 2, 8)

    def r(t):
        return t.to(dt).float()
    radius = r(torch.sqrt(r(-2 * r(torch.log(r(1 - u[:, 0]))))))
    theta = r(2 * math.pi * u[:, 1])
    return torch.stack([r(radius * r(torch.cos(theta))), r(radius * r(torch.sin(theta)))], 1).reshape(shape).to(dt)


def draw(shape: tuple, dtype: str, how: str = "fp32"):
    """A problem's randn(shape) at `dtype`: 'fp32' drawn in fp32 and rounded (the export's problems,
    a GPU draw, torch's CPU draw from 2.13) or 'cpu16' (randn_cpu16: the H100 calls' torch 2.11)."""
    import torch
    return torch.randn(*shape).to(torch_dtype(dtype)) if how == "fp32" or dtype == "fp32" else randn_cpu16(shape, dtype)


# -- softmax_cuda online_softmax -------------------------------------------------------------
def online_softmax(x, threads: int, merged: int):
    """The kernel's output for rows x (its storage dtype): the first `merged` warps' partials merged."""
    import torch
    xf = x.float()
    keep = (torch.arange(x.shape[-1]) % threads) < merged * WARP
    m = xf[:, keep].amax(-1, keepdim=True)
    d = torch.exp(xf[:, keep] - m).sum(-1, keepdim=True)
    return (torch.exp(xf - m) / d).to(x.dtype)


def softmax_trial(rows: int, cols: int, dtype: str, threads: int, merged: int, seed: int, chunk: int = 256,
                  how: str = "fp32") -> tuple:
    """(elements outside KernelBench's tolerance, rows checked) in one trial of the problem's input
    4 * randn(R, C) (drawn `how`: draw()); stops after the first chunk of rows with a failure (the
    trial has failed)."""
    import torch
    torch.manual_seed(seed)
    dt = torch_dtype(dtype)
    x = 4 * draw((rows, cols), dtype, how)
    for r0 in range(0, rows, chunk):
        part = x[r0:r0 + chunk]
        ref = torch.softmax(part.float(), dim=-1).to(dt)
        bad = outside(ref, online_softmax(part, threads, merged), TOLERANCE[dtype])
        if bad:
            return bad, r0 + part.shape[0]
    return 0, rows


# -- cross_entropy_fwd_triton split_v_combine --------------------------------------------------
def split_combine_lse(x, split: int, bug: str = None):
    """Per row of x (fp32) the kernel's logsumexp: program k reduces the k-th slice of cdiv(V, SPLIT)
    columns to (m_k, s_k = sum exp(x - m_k)); the combine returns M + log(sum_k s_k exp(m_k - M)),
    M = max m_k. missing_scale drops exp(m_k - M); bad_combine_index reads m_(k+1) % SPLIT beside s_k."""
    import torch
    chunk = -(-x.shape[1] // split)
    parts = x.split(chunk, dim=1)
    m = torch.stack([p.amax(1) for p in parts], 1)
    s = torch.stack([torch.exp(p - p.amax(1, keepdim=True)).sum(1) for p in parts], 1)
    if bug == "bad_combine_index":
        m = m.roll(-1, 1)
    top = m.amax(1)
    scale = 1 if bug == "missing_scale" else torch.exp(m - top[:, None])
    return top + torch.log((s * scale).sum(1))


def split_trial(t: int, v: int, split: int, bug: str, dtype: str, seed: int, how: str = "fp32") -> tuple:
    """(max |loss difference|, losses outside KernelBench's tolerance) in one trial of the problem's
    2 * randn(T, V) logits (drawn `how`) and its labels."""
    import torch
    torch.manual_seed(seed)
    x = (2 * draw((t, v), dtype, how)).float()
    labels = torch.randint(0, v, (t,))
    picked = x.gather(1, labels[:, None])[:, 0]
    ref, new = torch.logsumexp(x, 1) - picked, split_combine_lse(x, split, bug) - picked
    return float((ref - new).abs().max()), outside(ref, new, TOLERANCE[dtype])


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


# -- flash_attn_bwd_triton: the o a backward is given -----------------------------------------
def flash_bwd_grads(q, k, v, do, o, s, lse) -> list:
    """[dq, dk, dv] of one head ([S, D] at q's dtype) as FA2's backward computes them from o and the
    fp32 scores s (scaled, masked) and lse: P and dS in fp32, rounded to the dtype before each dot."""
    import torch
    dt, scale = q.dtype, q.shape[-1] ** -0.5
    p = torch.exp(s - lse)
    ds = (p * (do.float() @ v.float().T - (o.float() * do.float()).sum(-1, keepdim=True))).to(dt).float()
    return [(ds @ k.float() * scale).to(dt), (ds.T @ q.float() * scale).to(dt), (p.to(dt).float().T @ do.float()).to(dt)]


def flash_bwd_head(q, k, v, do, o_from: str) -> list:
    """Per output (dq, dk, dv) of one causal head the largest |ref - new| / (tol + tol |new|) (above
    1: outside KernelBench's comparison): ref SDPA's bf16 backward (its own forward's O, its scores
    summed in another order: fp64, rounded), new the candidate given o `o_from` ('cpu': torch's CPU
    attention of the head at the dtype, 'derived': the reference forward's O)."""
    import torch
    n, scale = q.shape[0], q.shape[-1] ** -0.5
    mask = torch.ones(n, n, dtype=torch.bool).triu(1)
    s_ref = (q.double() @ k.double().T * scale).float().masked_fill(mask, float("-inf"))
    lse_ref = s_ref.logsumexp(-1, keepdim=True)
    own = (torch.exp(s_ref - lse_ref) @ v.float()).to(q.dtype)
    s_new = (q.float() @ k.float().T * scale).masked_fill(mask, float("-inf"))
    o = own if o_from == "derived" else torch.nn.functional.scaled_dot_product_attention(
        q[None, None], k[None, None], v[None, None], is_causal=True)[0, 0]
    ref = flash_bwd_grads(q, k, v, do, own, s_ref, lse_ref)
    new = flash_bwd_grads(q, k, v, do, o, s_new, s_new.logsumexp(-1, keepdim=True))
    tol = TOLERANCE["bf16" if q.dtype == torch.bfloat16 else "fp16"]
    return [float(((a.double() - b.double()).abs() / (tol + tol * b.double().abs())).max()) for a, b in zip(ref, new)]


def flash_bwd_trial(shape: tuple, heads: int, o_from: str, seed: int, how: str = "fp32") -> list:
    """flash_bwd_head over the first `heads` heads of the problem's inputs in one trial: q drawn in
    fp32 and rounded to bf16, k, v and dO as its randn_like draws them (`how`: draw())."""
    import torch
    torch.manual_seed(seed)
    q = draw(shape, "bf16", "fp32")
    k, v = draw(shape, "bf16", how), draw(shape, "bf16", how)
    do = draw(shape, "bf16", how)           # (o and lse, between v and dO, draw nothing)
    flat = [t.reshape(-1, *shape[2:]) for t in (q, k, v, do)]
    return [flash_bwd_head(*(t[i] for t in flat), o_from) for i in range(heads)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="model", required=True)
    s = sub.add_parser("softmax")
    s.add_argument("--threads", type=int, default=512)
    s.add_argument("--R", type=int, default=4096)
    s.add_argument("--C", type=int, default=32000)
    s.add_argument("--dtype", default="bf16", choices=sorted(TOLERANCE))
    s.add_argument("--merged", type=int, help="warps merged (default WARPS - 1: the off_by_one bug)")
    c = sub.add_parser("split")
    c.add_argument("--T", type=int, default=16)
    c.add_argument("--V", type=int, default=128256)
    c.add_argument("--split", type=int, default=4)
    c.add_argument("--bug", default="missing_scale", choices=("missing_scale", "bad_combine_index", "none"))
    c.add_argument("--dtype", default="bf16", choices=sorted(TOLERANCE))
    for p in (s, c):
        p.add_argument("--draw", default="fp32", choices=DRAWS,
                       help="fp32: drawn in fp32, rounded (the export); cpu16: torch 2.11's CPU draw (randn_cpu16)")
    f = sub.add_parser("fp8")
    f.add_argument("--bits", type=int, default=13)
    f.add_argument("--M", type=int, default=64)
    f.add_argument("--N", type=int, default=24576)
    f.add_argument("--K", type=int, default=1536)
    f.add_argument("--b-shift", type=int, help="default: the module's reference")
    f.add_argument("--columns", type=int, default=2048)
    a = sub.add_parser("flash_bwd")
    for dim, size in (("B", 4), ("H", 32), ("S", 2048), ("D", 128)):
        a.add_argument(f"--{dim}", type=int, default=size)
    a.add_argument("--heads", type=int, default=4, help="the first heads of each trial (a head takes seconds)")
    a.add_argument("--o", default="derived", choices=("derived", "cpu"))
    a.add_argument("--draw", default="fp32", choices=DRAWS, help="k, v, dO's draw (cpu16: the randn_like of torch 2.11)")
    for p in (s, c, f, a):
        p.add_argument("--trials", type=int, default=5)
    args = ap.parse_args(argv)
    for i, seed in enumerate(trial_seeds(args.trials)):
        if args.model == "softmax":
            merged = args.merged if args.merged is not None else args.threads // WARP - 1
            bad, rows = softmax_trial(args.R, args.C, args.dtype, args.threads, merged, seed, chunk=args.R, how=args.draw)
            print(f"trial {i} (seed {seed}): {bad} elements outside KernelBench's tolerance", flush=True)
        elif args.model == "split":
            worst, bad = split_trial(args.T, args.V, args.split, None if args.bug == "none" else args.bug, args.dtype,
                                     seed, args.draw)
            print(f"trial {i} (seed {seed}): loss off by up to {worst:.4f}, {bad} of {args.T} outside "
                  f"KernelBench's tolerance", flush=True)
        elif args.model == "flash_bwd":
            ratios = flash_bwd_trial((args.B, args.H, args.S, args.D), args.heads, args.o, seed, args.draw)
            worst = [max(r[j] for r in ratios) for j in range(3)]
            print(f"trial {i} (seed {seed}): the largest |ref - new| / tolerance over {args.heads} heads: "
                  + ", ".join(f"{g} {w:.3f}" for g, w in zip(("dq", "dk", "dv"), worst)), flush=True)
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
