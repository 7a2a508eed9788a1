"""room_table.py's per-module table for a chosen set of modules only (default: roomK's compute-heavy ones): the
episodes of a profile's plan whose task is one of them, `--per` a module (the first ones of a seeded shuffle of
the plan), built as generate builds them.

    python3 scripts/roomK_table.py --config kernelinfer --seed 7171 --per 6 [--modules gemm_int8_cuda,...]
"""
from __future__ import annotations

import argparse
import random
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import room_table  # noqa: E402
from kernelstrain import episodes  # noqa: E402
from stop_reasons import AGENTS, Recorded  # noqa: E402

ROOMK = ("gemm_fp16_cuda gemm_splitk_cuda gemm_splitk_triton gemm_int4_cuda gemm_int8_cuda gemm_fp8_cuda "
         "gemm_fp8_blockwise_cuda gemm_fp4_cuda gemm_fp4_triton grouped_gemm_cuda grouped_gemm_triton "
         "conv2d_nhwc_cuda conv2d_nhwc_triton moe_combine_cuda moe_scatter_cuda").split()


def picks(plan, modules: set, per: int, sample_seed: int) -> list[int]:
    """Up to `per` episode indices of each module, from a seeded shuffle of the plan."""
    order = list(range(plan.profile.episodes))
    random.Random(sample_seed).shuffle(order)
    chosen, count = [], defaultdict(int)
    for i in order:
        name = plan.task(i).module
        if name in modules and count[name] < per:
            count[name] += 1
            chosen.append(i)
    return sorted(chosen)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelinfer")
    ap.add_argument("--seed", type=int, default=7171)
    ap.add_argument("--per", type=int, default=6)
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument("--modules", default=",".join(ROOMK))
    ap.add_argument("--by-rung", action="store_true", help="name the best's rung in the edges column")
    args = ap.parse_args(argv)
    from kernelstrain.episodes import build_episode
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    plan = make_plan(load_profile(args.config), args.seed)
    agent, episodes.Agent = episodes.Agent, Recorded
    try:
        for i in picks(plan, set(args.modules.split(",")), args.per, args.sample_seed):
            build_episode(plan, i)
        rows = [room_table.row(a, s) for a, s in AGENTS]
        for r, (a, _) in zip(rows, AGENTS):     # the edges by rung: where a list could grow
            r["edges"] = [f"{a.best.variant.tag}.{e}" for e in r["edges"]] if args.by_rung else r["edges"]
    finally:
        episodes.Agent = agent
        AGENTS.clear()
    print(room_table.table(rows, f"{args.config} seed {args.seed} per-module {args.per}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
