"""scripts/room_table.py's per-module table for a chosen set of modules: up to N episodes of each, the first ones of
the plan's order whose task is that module's (the full run's episodes, built as generate builds them), so a module's
before/after figures compare the same tasks on the same seed.

    python3 scripts/roomS_table.py --config kernelinfer --seed 7171 --per 12 [--modules a,b,...] [--json out.json]

Default modules: helper roomS's short memory-bound modules (the brief of this session).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import episodes  # noqa: E402
from kernelstrain.plan import make_plan  # noqa: E402
from kernelstrain.profiles import load_profile  # noqa: E402
from room_table import row, table  # noqa: E402
from stop_reasons import AGENTS, Recorded  # noqa: E402

MODULES = ("embedding_fwd_cuda dropout_cuda swiglu_fwd_cuda swiglu_fwd_triton swiglu_bwd_triton rope_cuda rope_triton "
           "embedding_gather_cuda kv_append_cuda cross_entropy_bwd_triton bias_gelu_cuda add_rmsnorm_cuda "
           "add_rmsnorm_triton rmsnorm_cuda rmsnorm_triton fp8_quant_cuda fp8_quant_triton int8_kv_quant_triton "
           "paged_kv_copy_cuda paged_kv_copy_triton layernorm_bwd_triton cross_entropy_fwd_triton grad_clip_cuda "
           "adafactor_cuda adamw_cuda").split()


def picks(plan, modules: set, per: int) -> list[int]:
    """The first `per` episode indices of each module in the run's order."""
    taken, out = defaultdict(int), []
    for i in range(plan.profile.episodes):
        m = plan.task(i).module
        if m in modules and taken[m] < per:
            taken[m] += 1
            out.append(i)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--seed", type=int, default=7171)
    ap.add_argument("--per", type=int, default=12)
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--json", help="also write the per-episode rows here")
    args = ap.parse_args(argv)
    plan = make_plan(load_profile(args.config), args.seed)
    saved, episodes.Agent = episodes.Agent, Recorded
    try:
        for i in picks(plan, set(args.modules.split(",")), args.per):
            episodes.build_episode(plan, i)
        rows = [row(a, s) for a, s in AGENTS]
    finally:
        episodes.Agent = saved
        AGENTS.clear()
    if args.json:
        Path(args.json).write_text(json.dumps(rows))
    print(table(rows, f"{args.config} seed {args.seed}, first {args.per} episodes a module"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
