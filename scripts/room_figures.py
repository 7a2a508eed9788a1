"""Where a profile's episodes stop, per module: how far the engineer's best is from the fastest
configuration anywhere on the module's ladder (noise-free, over the rungs the task offers: what more search
could still find) and how far that configuration is from the task's floor (the roofline of its
path plus one launch: what a technique the ladder lacks could still gain). Issue 26 reads it
as where episode length must come from: a module whose best is near the ladder's fastest and
whose fastest is near the floor has no room for more purposeful steps; one whose fastest is far
from the floor lacks rungs; one whose best is far from its ladder's fastest is the engine's.

    python3 scripts/room_figures.py --config kernelstrain --seed 101 --sample 300 [--set search.x=y]

The sample is drawn as scripts/behaviour_figures.py draws it (same --sample-seed, same episodes).
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import feasibility, knobs  # noqa: E402
from kernelstrain.behaviour import figures  # noqa: E402
from kernelstrain.calibration import FIT  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import roofline_floor_ms, simulate, writable  # noqa: E402
from kernelstrain.tasks import param_grid  # noqa: E402


def fastest(module, task, knob_names: tuple):
    """(time, rung) of the fastest configuration an engineer could write for `task`: rungs the
    dtype offers, the GPU runs and the task's rows can align (engine.Episode.rungs), every
    writable configuration of each, the profile's launch knobs included (a noisy mean of the
    best can read a little under 1.0x of it)."""
    best = None
    for v in module.variants:
        if not v.offered(task.dtype) or v.needs - task.gpu.features \
                or feasibility.violation(module, v, v.defaults(), task) is not None:
            continue
        if knob_names:
            v = knobs.extend(v, module.impl, module.render(v, v.defaults(), task), knob_names)
        for params in param_grid(knobs.untuned(v)):
            if writable(module, v, params, task):
                r = simulate(module, v, params, task)
                if r.ok and (best is None or r.time_ms < best[0]):
                    best = (r.time_ms, v)
    return best


def room(config: str, seed: int, sample: int, sample_seed: int, settings: list[str]) -> dict:
    """module -> list of (steps, tail, best/ladder's fastest, ladder's fastest/its floor, end)."""
    from ki_tune import overridden
    from kernelstrain.episodes import build_episode
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    profile = overridden(load_profile(config), settings)
    plan = make_plan(profile, seed)
    out = defaultdict(list)
    for i in sorted(random.Random(sample_seed).sample(range(profile.episodes), min(sample, profile.episodes))):
        row = build_episode(plan, i).row()
        task, module = plan.task(i), REGISTRY[row["module"]]
        top_ms, variant = fastest(module, task, profile.search.knobs)
        floor = roofline_floor_ms(module, task, variant.path) + FIT.overhead_us(task.gpu.vendor, 1) * 1e-3
        f = figures(row)
        out[row["module"]].append((f["steps"], f["tail"], row["best"]["time_ms"] / top_ms, top_ms / floor, row["end"]))
    return out


def table(rows: dict) -> list[str]:
    lines = [f"{'module':30s} {'eps':>4s} {'steps':>6s} {'tail':>5s} {'best/fastest':>12s} {'fastest/floor':>13s}  ends"]
    for name, eps in sorted(rows.items(), key=lambda kv: statistics.mean(e[0] for e in kv[1])):
        steps = sum(e[0] for e in eps)
        lines.append(f"{name:30s} {len(eps):4d} {steps / len(eps):6.1f} {sum(e[1] for e in eps) / max(1, steps):5.2f} "
                     f"{statistics.median(e[2] for e in eps):12.3f} {statistics.median(e[3] for e in eps):13.2f}  "
                     f"{dict(Counter(e[4] for e in eps))}")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--seed", type=int, default=101)
    ap.add_argument("--sample", type=int, default=300)
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE")
    args = ap.parse_args(argv)
    rows = room(args.config, args.seed, args.sample, args.sample_seed, args.set)
    print("\n".join(table(rows)))
    every = [e for eps in rows.values() for e in eps]
    print(f"all {len(every)} episodes: median best/fastest {statistics.median(e[2] for e in every):.3f}, "
          f"median fastest/floor {statistics.median(e[3] for e in every):.2f}, "
          f"best within 5% of the ladder's fastest: {sum(e[2] <= 1.05 for e in every)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
