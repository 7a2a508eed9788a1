"""Emulate top_p_cuda pivot_bisect's search on the CPU (torch, float32 as the kernel sums) on the module's inputs:
the search passes it takes (the launch model's EMULATED_PASSES), how many logits the bracket leaves for the exact
refine, and the token its threshold + inverse-CDF pick gives against the PyTorch reference's check
(top_p_spec.check_adapter). It checks the algorithm, not the CUDA text (that is the device job's).

    python3 scripts/roomC_bisect_emulate.py [--rows 64] [--seed 1]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from kernelstrain.ops.sampling._top_p_bisect import SEARCH_PASSES  # noqa: E402
from kernelstrain.ops.sampling.top_p_spec import TopPSpec, check_adapter  # noqa: E402


def search(x: torch.Tensor, top_p: float, pivots: int, cap: int):
    """One row: (passes, logits left in the bracket, threshold value, kept mass) as the kernel finds them."""
    M = x.max()
    w = torch.exp(x - M)
    Z = w.sum()
    need = top_p * Z
    lo, hi, above, inside = torch.tensor(-256.0), torch.tensor(float("inf")), torch.tensor(0.0), float(x.numel())
    passes = 0
    while passes < SEARCH_PASSES and inside > cap:
        passes += 1
        top = torch.minimum(hi, M)
        piv = torch.stack([lo + (top - lo) * float(j + 1) / float(pivots + 1) for j in range(pivots)])
        inb = (x >= lo) & (x < hi)
        xs, ws = x[inb], w[inb]
        ge = xs[None, :] >= piv[:, None]
        tot_m = (ge * ws[None, :]).sum(1)
        tot_c = ge.sum(1).float()
        j = pivots - 1
        while j >= 0 and above + tot_m[j] < need:
            j -= 1
        if j == pivots - 1:
            lo, inside = piv[j], float(tot_c[j])
        elif j >= 0:
            lo, hi, above, inside = piv[j], piv[j + 1], above + tot_m[j + 1], float(tot_c[j] - tot_c[j + 1])
        else:
            hi, above, inside = piv[0], above + tot_m[0], inside - float(tot_c[0])
    # exact threshold among the bracket's logits: the largest t with above + mass(bracket x >= t) >= need
    inb = (x >= lo) & (x < hi)
    cand = x[inb].sort(descending=True).values
    cm = above + torch.exp(cand - M).cumsum(0)
    k = int((cm < need).sum().clamp(max=cand.numel() - 1))
    t = cand[k]
    kept = float(above + torch.exp(cand[cand >= t] - M).sum())
    return passes, int(inb.sum()), t, kept


def pick(x, t, kept, u):
    """The inverse-CDF pick in vocabulary order over x >= t at u * kept (the kernel's cdf_pick_row)."""
    w = torch.where(x >= t, torch.exp(x - x.max()), torch.zeros(()))
    excl = w.cumsum(0) - w
    ok = (w > 0) & (excl < u * kept)
    return int(ok.nonzero().max())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    torch.manual_seed(args.seed)
    bad_total = 0
    for V in (32000, 128256):
        logits = torch.randn(args.rows, V) * 4            # the module's inputs (top_p_spec.torch_ref)
        top_p = torch.rand(args.rows) * 0.45 + 0.5
        uniform = torch.rand(args.rows)
        for pivots in (4, 8, 16):
            for cap in (1024, 2048, 4096):
                runs = [search(logits[r], float(top_p[r]), pivots, cap) for r in range(args.rows)]
                toks = torch.tensor([pick(logits[r], runs[r][2], runs[r][3], float(uniform[r]))
                                     for r in range(args.rows)], dtype=torch.int32)
                d = {"B": args.rows, "V": V}
                _, checks = check_adapter(d, None, [logits, top_p, uniform], toks, lambda ref: ref.clone())
                res = checks[0][3](torch, toks, toks)
                bad_total += res["nbad"]
                print(f"V {V} pivots {pivots:2d} cap {cap}: passes {sum(r[0] for r in runs) / len(runs):.2f} "
                      f"(max {max(r[0] for r in runs)}), bracket logits mean {sum(r[1] for r in runs) / len(runs):.0f} "
                      f"max {max(r[1] for r in runs)}, wrong tokens {res['nbad']} of {args.rows}")
    print("ALL RIGHT" if bad_total == 0 else f"WRONG: {bad_total}")
    return 0 if bad_total == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
