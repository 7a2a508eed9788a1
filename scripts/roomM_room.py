"""Did sessions use a module's new room for real kept improvements? Per episode of a kernelinfer seed (the first
--per of each module in the plan's order, as scripts/room_table.py --modules takes them): its task, steps, keeps,
the keeps on the rungs named by --rungs, the final best's rung and parameters, its time and speedup over the baseline.
Run it on two trees (PYTHONPATH) to compare the same tasks before and after a change.

    python3 scripts/roomM_room.py --config kernelinfer --seed 7171 --modules min_p_triton --per 12 \
        --rungs split_last_combine
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import episodes  # noqa: E402
from kernelstrain.plan import make_plan  # noqa: E402
from kernelstrain.profiles import load_profile  # noqa: E402
from room_table import picks  # noqa: E402
from stop_reasons import AGENTS, Recorded  # noqa: E402


def lines(config: str, seed: int, modules: set, per: int, rungs: set) -> list[str]:
    agent, episodes.Agent = episodes.Agent, Recorded
    try:
        plan = make_plan(load_profile(config), seed)
        for i in picks(plan, modules, per):
            episodes.build_episode(plan, i)
        out = []
        for a, steps in AGENTS:
            best = a.best
            new_keeps = sum(s.kept and s.tag in rungs for s in steps)
            last = max((s.step for s in steps if s.kept), default=0)
            shape = ",".join(f"{k}={v}" for k, v in dict(a.task.shape).items())
            out.append(f"{a.m.name} {a.task.gpu.name} {shape}: {len(steps)} steps, tail {len(steps) - last}, "
                       f"{sum(s.kept for s in steps)} keeps ({new_keeps} on {'/'.join(sorted(rungs)) or '-'}); best "
                       f"{best.variant.tag} {best.params} {a.book.best_ms * 1e3:.2f} us, "
                       f"{a.baseline_ms / a.book.best_ms:.2f}x the baseline")
        return out
    finally:
        episodes.Agent = agent
        AGENTS.clear()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelinfer")
    ap.add_argument("--seed", type=int, default=7171)
    ap.add_argument("--modules", required=True, help="a comma list of modules")
    ap.add_argument("--per", type=int, default=8)
    ap.add_argument("--rungs", default="", help="a comma list of rung tags whose keeps are counted")
    args = ap.parse_args(argv)
    for line in lines(args.config, args.seed, set(args.modules.split(",")), args.per, set(filter(None, args.rungs.split(",")))):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
