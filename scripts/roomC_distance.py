"""Rank CUDA modules by sessions x distance: per module of a profile's sample, the share of sessions,
the median best/floor (the final best's simulated time over the task's roofline floor) and the ladder's
oracle/floor (the fastest writable config of every runnable rung over the floor), and their product
`share x log2(oracle/floor)`: where new code, not a longer search, has the most to give.

    python3 scripts/roomC_distance.py --config kernelinfer --seed 9494 --sample 200 [--impl cuda]
"""
from __future__ import annotations

import argparse
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_table  # noqa: E402
from kernelstrain.plan import floor_launches  # noqa: E402
from kernelstrain.calibration import FIT  # noqa: E402


def with_distance(agent, steps, by_rung=False):
    """room_table's row plus the floor in ms, best/floor and oracle/floor."""
    r = base_row(agent, steps, by_rung)
    floor_ms = floor_launches(agent.m, agent.task) * FIT.overhead_us(agent.task.gpu.vendor, 1) * 1e-3
    best = agent.true_ms(agent.best)
    r.update(floor_ms=floor_ms, best_floor=best / floor_ms, oracle_floor=best / r["oracle_x"] / floor_ms,
             gpu=agent.task.gpu.name, shape=dict(agent.task.shape), rung=agent.best.variant.tag)
    return r


base_row = room_table.row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelinfer")
    ap.add_argument("--seed", type=int, default=9494)
    ap.add_argument("--sample", type=int, default=200)
    ap.add_argument("--impl", default="cuda")
    args = ap.parse_args(argv)
    room_table.row = with_distance
    rows = room_table.build(args.config, args.seed, args.sample, 0, [])
    by = defaultdict(list)
    for r in rows:
        if r["module"].endswith("_" + args.impl):
            by[r["module"]].append(r)
    n = len(rows)
    out = []
    for mod, rs in by.items():
        med = lambda k: sorted(x[k] for x in rs)[len(rs) // 2]  # noqa: E731
        share = len(rs) / n
        out.append((share * math.log2(max(med("oracle_floor"), 1.0)), mod, len(rs), share, med("best_floor"),
                    med("oracle_floor"), sum(x["steps"] for x in rs) / len(rs)))
    print(f"{args.config} seed {args.seed} sample {n}: {args.impl} modules by share x log2(oracle/floor)")
    print("| module | sessions | share% | steps | best/floor | oracle/floor | score |")
    print("|---|---|---|---|---|---|---|")
    for score, mod, k, share, bf, of, steps in sorted(out, reverse=True):
        print(f"| {mod} | {k} | {100 * share:.1f} | {steps:.1f} | {bf:.2f} | {of:.2f} | {100 * score:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
