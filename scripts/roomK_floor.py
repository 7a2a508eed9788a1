"""Where roomK's modules leave room: per episode of a profile's plan (the first --per of each module, as
scripts/room_table.py --modules picks them), the task, the episode's best (rung, parameters) and the fastest
runnable configuration of the task's ladder (the simulator's answer), each against the task's floor
(engine.Episode.floor_ms of that rung: the roofline the engine stops at).

    python3 scripts/roomK_floor.py --config kernelinfer --seed 8383 --per 6 [--modules gemm_fp16_cuda,...]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import episodes  # noqa: E402
from room_table import modules_of, picks  # noqa: E402
from stop_reasons import AGENTS, Recorded  # noqa: E402

ROOMK = ("gemm_fp16_cuda,gemm_splitk_cuda,gemm_splitk_triton,gemm_int4_cuda,gemm_int8_cuda,gemm_fp8_cuda,"
         "gemm_fp8_blockwise_cuda,gemm_fp4_cuda,gemm_fp4_triton,grouped_gemm_cuda,grouped_gemm_triton")


def fastest(agent):
    """(ms, candidate) of the fastest runnable configuration of every runnable rung."""
    best = None
    for v in agent.rungs:
        for c in agent.grid(v):
            t = agent.true_ms(c)
            if t is not None and (best is None or t < best[0]):
                best = (t, c)
    return best


def line(agent, steps) -> str:
    b = agent.best
    t_best = agent.true_ms(b)
    t_or, c_or = fastest(agent)
    shape = ",".join(f"{k}={v}" for k, v in agent.task.shape)
    return (f"{agent.m.name} {agent.task.gpu.name} {agent.task.dtype} {shape} steps={len(steps)} "
            f"best={b.variant.tag}{b.params} best/floor={t_best / agent.floor_ms(b.variant):.2f} "
            f"oracle={c_or.variant.tag}{c_or.params} oracle/floor={t_or / agent.floor_ms(c_or.variant):.2f} "
            f"oracle_ms={t_or:.4g} speedup={agent.true_ms(agent.base) / t_best:.2f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelinfer")
    ap.add_argument("--seed", type=int, default=8383)
    ap.add_argument("--per", type=int, default=6)
    ap.add_argument("--modules", default=ROOMK)
    args = ap.parse_args(argv)
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    plan = make_plan(load_profile(args.config), args.seed)
    agent, episodes.Agent = episodes.Agent, Recorded
    try:
        for i in picks(plan, modules_of(args.modules), args.per):
            episodes.build_episode(plan, i)
            print(line(*AGENTS[-1]), flush=True)
    finally:
        episodes.Agent = agent
        AGENTS.clear()
    return 0


if __name__ == "__main__":
    sys.exit(main())
