"""The launch-tuning sweeps a device run of scripts/fused_device_check.py timed (extend --variants): each custom
kernel's own GPU time under the profiler (the run's kernels_us) beside this checkout's model of it (fused/module.py
kernels_ms), for the episode's candidate of that rung and every variant of it, so a launch parameter's effect on the
kernel -- not on the host-bound call -- is checked.

    python3 scripts/fused_sweep_kernels.py TIMING.jsonl [--card H200]

Prints one line a candidate: its launch parameters, then each custom kernel `name model/measured` in us; and the
share of kernel pairs (same kernel, two parameter sets of one rung) whose order the model and the device agree on
where the device measured them more than 5 % apart.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))     # this checkout's kernelstrain
KERNEL = re.compile(r"^(k\d+_[a-z]+_kernel)(\(|$)")      # Triton: the name; CUDA: the demangled signature
APART = 0.05


def modelled(row: dict, card: str) -> dict:
    """{kernel name: model us} of the row's custom kernels (k<N>_<kind>_kernel, N from 1 in the plan's order)."""
    from kernelstrain.fused.module import fused_module
    from kernelstrain.tasks import make_task
    m = fused_module(row["module"])
    task = make_task(m, card, row["dtype"], dict(m.shapes[0]))
    models = m._kernel_models(row["tag"], row["params"], task)
    times = m.kernels_ms(row["tag"], row["params"], task)[-len(models):] if models else []
    return {f"k{n}_{k.kind}_kernel": t * 1e3 for n, ((k, _, _, _), t) in enumerate(zip(models, times), 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("timing", type=Path)
    ap.add_argument("--card", default="H200")
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.timing.open() if line.strip()]
    rows = [r for r in rows if "kernels_us" in r and r["tag"] != "eager" and r.get("probe") in (None, "sweep")]
    swept = {(r["episode"].removeprefix("probe-"), r["tag"]) for r in rows if r.get("probe") == "sweep" or r.get("variant")}
    groups = defaultdict(list)
    for r in rows:
        key = (r["episode"].removeprefix("probe-"), r["tag"])
        if key in swept:
            groups[key].append(r)
    agree = total = 0
    for (episode, tag), rs in sorted(groups.items()):
        print(f"{episode} {tag}")
        per_kernel = defaultdict(list)
        for r in rs:
            model = modelled(r, args.card)
            got = {KERNEL.match(k).group(1): us for k, (us, _) in r["kernels_us"].items() if KERNEL.match(k)}
            p = {k: v for k, v in r["params"].items()}
            print(f"  {p}: " + "  ".join(f"{k} {model.get(k, float('nan')):.1f}/{got[k]:.1f}" for k in sorted(got)))
            for k in got:
                if k in model:
                    per_kernel[k].append((model[k], got[k]))
        for pairs in per_kernel.values():
            for i in range(len(pairs)):
                for j in range(i + 1, len(pairs)):
                    (m1, g1), (m2, g2) = pairs[i], pairs[j]
                    if abs(g1 - g2) > APART * min(g1, g2):
                        total += 1
                        agree += (m1 - m2) * (g1 - g2) > 0
    print(f"kernel pairs measured > {APART:.0%} apart: {total}; the model orders {agree} of them as the device")
    return 0


if __name__ == "__main__":
    sys.exit(main())
