"""Room of sim2's decode-attention modules: scripts/room_table.py's per-module table for the episodes of a fresh seed
whose task is one of the given modules (room_table samples every module; this takes the first N of each), so a
module's before/after steps can be read on the same tasks.

    python3 scripts/sim2_room.py --config kernelinfer --seed 71717 --per-module 12 [--modules a,b]
"""
from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import episodes  # noqa: E402
from stop_reasons import AGENTS, Recorded  # noqa: E402
from room_table import row, table  # noqa: E402

MODULES = ("paged_decode_cuda", "paged_decode_triton", "flash_decode_triton", "mla_decode_triton",
           "cross_attention_triton")


@contextmanager
def recorded():
    """episodes.Agent swapped for stop_reasons.Recorded while episodes are built: yields what they record."""
    agent, episodes.Agent = episodes.Agent, Recorded
    try:
        yield AGENTS
    finally:
        episodes.Agent = agent
        AGENTS.clear()


def build(config: str, seed: int, per_module: int, modules: tuple) -> list[dict]:
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    plan = make_plan(load_profile(config), seed)
    taken = dict.fromkeys(modules, 0)
    with recorded() as agents:
        for i in range(plan.profile.episodes):
            if taken.get(plan.task(i).module, per_module) < per_module:
                taken[plan.task(i).module] += 1
                episodes.build_episode(plan, i)
            if min(taken.values()) >= per_module:
                break
        return [row(a, s) for a, s in agents]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelinfer")
    ap.add_argument("--seed", type=int, default=71717)
    ap.add_argument("--per-module", type=int, default=12)
    ap.add_argument("--modules", default=",".join(MODULES))
    args = ap.parse_args(argv)
    rows = build(args.config, args.seed, args.per_module, tuple(args.modules.split(",")))
    print(table(rows, f"{args.config} seed {args.seed}, first {args.per_module} episodes of each module"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
