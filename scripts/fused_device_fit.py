"""Read a device run of scripts/fused_device_check.py against this checkout's timing model: every timed
candidate's call and its kernels re-simulated now (fused/timing.py, fused/cuda_gemm.py as they stand), the
within-episode Spearman of the calls (gpu-check's figure), and each GEMM kernel's own GPU time (the run's
torch.profiler rows) beside the model's.

    python3 scripts/fused_device_fit.py TIMING.jsonl [TIMING.jsonl ...] [--card H100]

Prints one line an episode (model / measured call, us), one line a GEMM kernel (model / measured, us, and the
tile), and the figures; exit 0 always (a reading, not a check: tests/test_fused_gpucheck.py holds the rows).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))     # this checkout's kernelstrain

GEMM_KERNEL = "_gemm_kernel"     # the fused renders name their GEMM kernels k<N>_gemm_kernel (CUDA and Triton)


def resimulated(row: dict, card: str) -> dict:
    """The row's call, its host side and its kernels as this checkout's model times them on `card`."""
    from kernelstrain.fused.module import fused_module
    from kernelstrain.tasks import make_task
    m = fused_module(row["module"])
    task = make_task(m, card, row["dtype"], dict(m.shapes[0]))
    tag, params = row["tag"], row["params"]
    kernels = m.kernels_ms(tag, params, task)
    models = m._kernel_models(tag, params, task)          # the custom kernels: the last of kernels_ms's
    own = kernels[len(kernels) - len(models):] if models else []
    gemm = [t for (_, _, _, analog), t in zip(models, own) if analog[0] in ("cuda_gemm", "triton_gemm")]
    return {"sim_ms": m.simulate(m.variant(tag), params, task).time_ms, "sim_host_ms": m.host_us(tag) * 1e-3,
            "sim_kernels_ms": sum(kernels), "sim_gemm_us": sum(gemm) * 1e3 if gemm else None}


def measured_gemm_us(row: dict) -> float | None:
    """The GEMM kernels' own time a call under the profiler, summed (None where the row has none)."""
    got = [us for name, (us, _) in row.get("kernels_us", {}).items() if GEMM_KERNEL in name]
    return sum(got) if got else None


def main(argv=None) -> int:
    from kernelstrain.calibration.metrics import agreement, spearman
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("timing", type=Path, nargs="+")
    ap.add_argument("--card", help="the device's card (default: each row's gpu)")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for f in args.timing for line in f.open() if line.strip()]
    rows = [r for r in rows if "measured_ms" in r and not r.get("probe")]      # probes: measurements, not candidates
    for r in rows:
        r.update(resimulated(r, args.card or r["gpu"]))
    by_ep = defaultdict(list)
    for r in rows:
        by_ep[r["episode"]].append(r)
    for ep, rs in sorted(by_ep.items()):
        rho = spearman([r["sim_ms"] for r in rs], [r["measured_ms"] for r in rs]) if len(rs) >= 3 else float("nan")
        print(f"{ep} {rs[0]['impl']:6s} {rs[0]['dtype']} rho={rho:5.2f} " + " ".join(
            f"{r['tag']}{'*' if r.get('variant') else ''}:{r['sim_ms'] * 1e3:.0f}/{r['measured_ms'] * 1e3:.0f}" for r in rs))
    print("GEMM kernels (model / measured us):")
    pairs = []
    for r in rows:
        got = measured_gemm_us(r)
        if got and r["sim_gemm_us"]:
            p = r["params"]
            tile = "x".join(str(p[k]) for k in ("BLOCK_M", "BLOCK_N", "BLOCK_K") if k in p)
            extra = f" {p['THREAD_M']}x{p['THREAD_N']}" if "THREAD_M" in p else f" w{p.get('gemm_warps')} s{p.get('num_stages')}"
            print(f"  {r['episode']} {r['impl']:6s} {r['dtype']} {r['module']} {tile}{extra}: {r['sim_gemm_us']:.1f} / {got:.1f}")
            pairs.append((r["impl"], r["sim_gemm_us"], got))
    for impl in ("cuda", "triton"):
        ps = [(s, g) for i, s, g in pairs if i == impl]
        if ps:
            print(f"  {impl}: {len(ps)} kernels, model/measured geomean "
                  f"{math.exp(sum(math.log(s / g) for s, g in ps) / len(ps)):.2f}")
    fig = agreement(rows, group="episode")
    def r3(x):
        return None if x is None else round(x, 3)
    print(f"calls: {len(rows)} timed, {fig['groups']} episodes of >= 3: within-episode Spearman mean "
          f"{r3(fig['spearman_mean'])}, median {r3(fig['spearman_median'])}, <= 0 in {fig['groups_nonpositive']}; "
          f"pair order {r3(fig['pair_agreement'])}; sim/measured geomean {r3(fig['geomean'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
