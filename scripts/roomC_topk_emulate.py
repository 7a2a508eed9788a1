"""Emulate topk_cuda pivot_count (kernelstrain/ops/sampling/_topk_bisect.py) on the CPU (torch, float32 as the kernel
compares and sums) on the module's inputs: pass 0's bound (the least of 64 lane-group maxima, with the kernel's
thread-to-float4 mapping), how many logits it leaves, the count-only pivot search where more than CAP do (forced
here with CAP 64 / 128 / 256, which no menu offers, so that the fallback's algorithm is checked too), the exact K-th
largest among the candidates, the gather and pick_by_rank; the tokens against the PyTorch reference's check
(topk_spec.check_adapter), and the wrong-row share of the rung's two bugs (missing_scale: u = 1; off_by_one: the
gather keeps k > thresh). It checks the algorithm, not the CUDA text (that is the device job's).

    python3 scripts/roomC_topk_emulate.py [--rows 64] [--seed 1]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kernelstrain.ops.sampling._topk_bisect import GROUPS, KCAP, PIVOTS, SEARCH_PASSES  # noqa: E402
from kernelstrain.ops.sampling.topk_spec import TopkSpec, check_adapter  # noqa: E402

F32 = torch.float32


def bound_of(x: torch.Tensor, threads: int) -> torch.Tensor:
    """Pass 0's bound: thread t reads float4 chunks t, t + THREADS, ...; the least of GROUPS lane-group maxima."""
    v4 = x.numel() // 4
    chunk_max = x[: 4 * v4].view(v4, 4).max(1).values
    waves = -(-v4 // threads)
    pad = torch.full((waves * threads,), float("-inf"), dtype=F32)
    pad[:v4] = chunk_max
    thread_max = pad.view(waves, threads).max(0).values
    return thread_max.view(GROUPS, threads // GROUPS).max(1).values.min()


def search(x: torch.Tensor, k: int, lo: torch.Tensor, cap: int):
    """The count-only pivot search from [lo, +inf) while more than CAP logits are >= lo: (lo, passes)."""
    M = x.max()
    hi = torch.tensor(float("inf"), dtype=F32)
    above, inside = 0, int((x >= lo).sum())
    passes = 0
    while passes < SEARCH_PASSES and above + inside > cap:
        passes += 1
        top = torch.minimum(hi, M)
        piv = torch.stack([lo + (top - lo) * torch.tensor(float(j + 1), dtype=F32) / torch.tensor(float(PIVOTS + 1),
                                                                                                   dtype=F32)
                           for j in range(PIVOTS)])
        xs = x[(x >= lo) & (x < hi)]
        tot = [int((xs >= piv[j]).sum()) for j in range(PIVOTS)]
        j = PIVOTS - 1
        while j >= 0 and above + tot[j] < k:
            j -= 1
        if j == PIVOTS - 1:
            lo, inside = piv[j], tot[j]
        elif j >= 0:
            lo, hi, above, inside = piv[j], piv[j + 1], above + tot[j + 1], tot[j] - tot[j + 1]
        else:
            hi, above, inside = piv[0], above + tot[0], inside - tot[0]
    return lo, passes


def row_token(x: torch.Tensor, k: int, u: float, threads: int, cap: int, bug: str | None = None):
    """One row as the kernel runs it: (token, logits >= the bound, search passes, candidates the select took)."""
    lo = bound_of(x, threads)
    first = int((x >= lo).sum())
    passes = 0
    if first > cap:
        lo, passes = search(x, k, lo, cap)
    cand_idx = (x >= lo).nonzero()[:, 0]
    if cand_idx.numel() > cap:                          # the select reads the row
        cand_idx = torch.arange(x.numel())
    cand = x[cand_idx]
    thresh = cand.topk(k).values[-1]                    # the K-th largest key among the candidates
    keep = cand > thresh if bug == "off_by_one" else cand >= thresh
    kept_idx, kept = cand_idx[keep][:KCAP], cand[keep][:KCAP]
    w = torch.exp(kept - kept.max())                    # pick_by_rank, float32
    target = (1.0 if bug == "missing_scale" else u) * w.sum()
    below = torch.stack([w[kept_idx < t].sum() for t in kept_idx])
    ok = below < target
    return int(kept_idx[ok].max()), first, passes, cand_idx.numel()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    bad_total = 0
    shapes = sorted({(s["V"], s["K"]) for s in TopkSpec.shapes})
    for V, K in shapes:
        logits = torch.randn(args.rows, V) * 2           # the module's inputs (topk_spec.torch_ref)
        uniform = torch.rand(args.rows)
        d = {"B": args.rows, "V": V, "K": K}
        for threads in (256, 512, 1024):
            for cap in (64, 128, 256, 1024, 4096):
                if cap in (128, 256) and threads != 512:
                    continue
                runs = [row_token(logits[r], K, float(uniform[r]), threads, cap) for r in range(args.rows)]
                toks = torch.tensor([r[0] for r in runs], dtype=torch.int32)
                _, checks = check_adapter(d, None, [logits, uniform], toks, lambda ref: ref.clone())
                res = checks[0][3](torch, toks, toks)
                bad_total += res["nbad"]
                firsts = [r[1] for r in runs]
                print(f"V {V} K {K} threads {threads:4d} cap {cap:4d}: >= bound mean {sum(firsts) / len(firsts):.0f} "
                      f"max {max(firsts)}, search passes mean {sum(r[2] for r in runs) / len(runs):.2f} "
                      f"max {max(r[2] for r in runs)}, candidates max {max(r[3] for r in runs)}, "
                      f"wrong tokens {res['nbad']} of {args.rows}")
        for bug in ("missing_scale", "off_by_one"):
            toks = torch.tensor([row_token(logits[r], K, float(uniform[r]), 512, 2048, bug)[0]
                                 for r in range(args.rows)], dtype=torch.int32)
            _, checks = check_adapter(d, None, [logits, uniform], toks, lambda ref: ref.clone())
            res = checks[0][3](torch, toks, toks)
            print(f"V {V} K {K} bug {bug}: wrong rows {res['nbad']} of {args.rows} ({res['nbad'] / args.rows:.0%})")
    print("ALL RIGHT" if bad_total == 0 else f"WRONG: {bad_total}")
    return 0 if bad_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
