"""Whether any task of a fused dataset is solved by a kernel that writes zeros or one constant:
each task's program run with PyTorch (CPU is enough: the question is the output's values) on
KernelBench's seeds, its output checked as KernelBench checks a solution's
(torch.allclose(out, ref, atol, rtol) at the problem's precision) against all zeros and against the
output's median everywhere (execute.kb_trivial, the filter's own check).

    python3 scripts/fused_trivial.py DATA [--limit N] [--trials 2]
    python3 scripts/fused_trivial.py --all-tasks [--device cuda] [--budget S] [--part I/N]   (the profile's 6,000)
    python3 scripts/fused_trivial.py --all-tasks --seed 101 --programs 600    (a fresh stream's first 600 tasks)

Prints the count of tasks each trivial kernel passes (the goal: 0) and the closest calls: the
smallest ratio of the output's largest |y| (zeros) or largest |y - median| (constant) to the
tolerance that would let it pass.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))     # this checkout's kernelstrain
sys.path.insert(0, str(Path(__file__).resolve().parent))
from fused_figures import read_episodes  # noqa: E402 - a sibling script


def margins(y, tol: float) -> tuple[float, float]:
    """(zeros, constant): how far past the tolerance the trivial output's worst element lies (> 1: fails)."""
    import torch
    y = y.float()
    zero = float(((y.abs()) / (tol + tol * y.abs())).max())
    c = y.median().item()
    const = float(((y - c).abs() / (tol + tol * y.abs())).max())
    return zero, const


def _output(mod, device: str, dtype, trial: int):
    """The program's output, built and fed as KernelBench does (seeded, cast to the precision; integer
    inputs keep their dtype: execute.kb_inputs)."""
    import torch

    from kernelstrain.fused.execute import kb_inputs
    torch.manual_seed(42)
    model = mod.Model(*mod.get_init_inputs()).to(device, dtype)
    torch.manual_seed(1000 + trial)
    inputs = kb_inputs(mod.get_inputs(), device, dtype)
    with torch.no_grad():
        return model(*inputs)


def main(argv=None) -> int:
    import torch

    from kernelstrain.fused.execute import KB_TOLERANCE, _load, kb_trivial
    from kernelstrain.fused.module import fused_module
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", type=Path, nargs="?")
    ap.add_argument("--all-tasks", action="store_true", help="every task of the fused profile, not a dataset's")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--budget", type=float, default=0.0, help="seconds after which no further task starts")
    ap.add_argument("--part", default="1/1", help="I/N: every N-th task from the I-th (processes side by side)")
    ap.add_argument("--seed", type=int, help="with --all-tasks: the grammar stream's seed (the profile's: 0)")
    ap.add_argument("--programs", type=int, help="with --all-tasks: the stream's first N tasks (the profile's: 6,000)")
    args = ap.parse_args(argv)
    if args.all_tasks == (args.data is not None):
        ap.error("give a dataset directory or --all-tasks")
    if not args.all_tasks and (args.seed is not None or args.programs):
        ap.error("--seed and --programs choose the stream's tasks: they go with --all-tasks")
    torch.set_num_threads(1)
    if args.all_tasks:
        from dataclasses import replace

        from kernelstrain.fused.tasks import fused_tasks
        from kernelstrain.profiles import load_profile
        profile = load_profile("fused")
        fused = replace(profile.fused, seed=profile.fused.seed if args.seed is None else args.seed,
                        programs=args.programs or profile.fused.programs)
        modules = [t.module for t in fused_tasks(replace(profile, fused=fused))]
    else:
        modules = [ep["module"] for ep in read_episodes(args.data)]
    part, parts = map(int, args.part.split("/"))
    modules = modules[part - 1::parts]
    seen, rows, t0, fallbacks = set(), [], time.time(), set()
    for name in modules:
        m = fused_module(name)
        if m.op in seen:
            continue
        if (args.limit and len(rows) >= args.limit) or (args.budget and time.time() - t0 > args.budget):
            break
        seen.add(m.op)
        dtype = m.view.dtype
        mod = _load(m.view.row["source"], m.op)
        worst, verdicts = (float("inf"), float("inf")), []
        for trial in range(args.trials):
            try:
                y = _output(mod, args.device, torch.bfloat16 if dtype == "bf16" else torch.float32, trial)
            except (NotImplementedError, RuntimeError):
                # a bf16 kernel the CPU lacks (avg_pool3d): the values in fp32, checked at bf16's tolerance
                y = _output(mod, args.device, torch.float32, trial)
                fallbacks.add(m.op)
            verdicts.append(kb_trivial(y, dtype))
            z, c = margins(y, KB_TOLERANCE[dtype])
            worst = (min(worst[0], z), min(worst[1], c))
        rows.append({"op": m.op, "family": m.family, "dtype": dtype, "verdicts": verdicts,
                     "zero_margin": worst[0], "constant_margin": worst[1]})
    zero = [r for r in rows if any(v == "zero_passes" for v in r["verdicts"])]
    const = [r for r in rows if any(v == "constant_passes" for v in r["verdicts"])]
    total = len({fused_module(n).op for n in modules})
    print(f"{len(rows)} of {total} tasks run ({args.trials} seeds each, {time.time() - t0:.0f} s): a zeros kernel passes "
          f"{len(zero)}, a constant kernel passes {len(const)}")
    if fallbacks:
        print(f"run in fp32 (a bf16 kernel missing on {args.device}): {', '.join(sorted(fallbacks))}")
    for key in ("zero_margin", "constant_margin"):
        close = sorted(rows, key=lambda r: r[key])[:3]
        print(f"closest by {key} (worst element / tolerance; <= 1 passes): "
              + ", ".join(f"{r['op']} ({r['dtype']}) {r[key]:.3g}" for r in close))
    for r in zero + const:
        print(f"  PASSES: {r['op']} {r['verdicts']}")
    return 1 if zero or const else 0


if __name__ == "__main__":
    sys.exit(main())
