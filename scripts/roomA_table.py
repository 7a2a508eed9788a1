"""scripts/room_table.py's per-module table for chosen modules only: the first N episodes of a seed's plan on each
(built as generate builds them), so a module's before/after figures come from a fair, fixed sample.

    python3 scripts/roomA_table.py --config kernelinfer --seed 7171 --per 6 [--modules swa_decode_cuda,topk_cuda]

Default modules: roomA's (attention prefill, SSM, samplers, scans).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import episodes  # noqa: E402
from room_table import row, table  # noqa: E402
from stop_reasons import AGENTS, Recorded  # noqa: E402

MODULES = ("flash_prefill_cuda flash_prefill_triton chunked_prefill_cuda chunked_prefill_triton swa_decode_cuda "
           "swa_decode_triton tree_attention_triton fused_qkv_rope_cuda fused_qkv_rope_triton "
           "sliding_window_attn_triton flash_attn_bwd_triton selective_scan_cuda selective_scan_triton "
           "mamba_step_cuda mamba_step_triton causal_conv1d_cuda topk_cuda top_p_cuda min_p_cuda min_p_triton "
           "prefix_scan_cuda").split()


def picks(plan, modules: set, per: int) -> list[int]:
    """The first `per` episode indexes of the plan on each module (the plan's own order)."""
    seen, out = {}, []
    for i in range(plan.profile.episodes):
        m = plan.task(i).module
        if m in modules and seen.get(m, 0) < per:
            seen[m] = seen.get(m, 0) + 1
            out.append(i)
        if len(out) >= per * len(modules):
            break
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelinfer")
    ap.add_argument("--seed", type=int, default=7171)
    ap.add_argument("--per", type=int, default=6)
    ap.add_argument("--modules", default=",".join(MODULES))
    args = ap.parse_args(argv)
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    plan = make_plan(load_profile(args.config), args.seed)
    agent, episodes.Agent = episodes.Agent, Recorded
    try:
        for i in picks(plan, set(args.modules.split(",")), args.per):
            episodes.build_episode(plan, i)
        rows = [row(a, s) for a, s in AGENTS]
    finally:
        episodes.Agent = agent
        AGENTS.clear()
    print(table(rows, f"{args.config} seed {args.seed} first {args.per} a module"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
