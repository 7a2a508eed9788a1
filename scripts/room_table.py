"""Room per module: how much a task's ladder leaves an engineer to do, beside what the engine did
with it, for a sample of a profile's episodes built as generate builds them.

    python3 scripts/room_table.py --config kernelinfer --seed 5353 --sample 80 [--set search.spread=3 ...]
    python3 scripts/room_table.py --config kernelinfer --seed 7171 --modules compute --per 8 [--by-rung] [--json F]

`--modules` (a comma list of module names, or a set of SETS: short, attention, compute, decode) with `--per N`
takes the first N episodes of each chosen module in the plan's order (`--shuffle-seed S`: of a seeded shuffle of
it) instead of a sample of every module, so a module's before/after figures compare the same tasks on one seed.

Per module (one row each, sorted by mean steps): episodes; mean steps, steps up to and including
the final best (`before`), steps after it (`tail`); runnable rungs of the task (from its starting
rung up) and the tunable parameters of the best's rung; `configs`: the writable configs of every
runnable rung that run here (the oracle's grid); `near1.25`: how many of them are within 1.25x of
the fastest (the oracle best, the simulator's answer, which the engineer does not have);
`keeps`: configs on the engineer's path that improved on the best before them (the keeps);
`best/oracle`: the episode's best against that fastest (median); `floor_L`: the task's roofline in
kernel launches (plan.floor_launches, median; under 1 the best kernel is launch-bound);
`lb`: share of episodes whose best ended launch-bound (engine.Episode.launch_bound); then the
stop rules (engine.Episode.stop_rule, or `exhausted`, `time`, `budget`) by count; `edges`: the
parameters of the final best at an end of their value list whose inward neighbour runs slower (`+` the
top, `-` the bottom: the best may lie past the list), by count of episodes (the four most common).
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import episodes  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.plan import floor_launches  # noqa: E402
from stop_reasons import AGENTS, Recorded, median  # noqa: E402

NEAR = 1.25
SETS = {
    "short": "embedding_fwd_cuda dropout_cuda swiglu_fwd_cuda swiglu_fwd_triton swiglu_bwd_triton rope_cuda rope_triton "
             "embedding_gather_cuda kv_append_cuda cross_entropy_bwd_triton bias_gelu_cuda add_rmsnorm_cuda "
             "add_rmsnorm_triton rmsnorm_cuda rmsnorm_triton fp8_quant_cuda fp8_quant_triton int8_kv_quant_triton "
             "paged_kv_copy_cuda paged_kv_copy_triton layernorm_bwd_triton cross_entropy_fwd_triton grad_clip_cuda "
             "adafactor_cuda adamw_cuda",
    "attention": "flash_prefill_cuda flash_prefill_triton chunked_prefill_cuda chunked_prefill_triton swa_decode_cuda "
                 "swa_decode_triton tree_attention_triton fused_qkv_rope_cuda fused_qkv_rope_triton "
                 "sliding_window_attn_triton flash_attn_bwd_triton selective_scan_cuda selective_scan_triton "
                 "mamba_step_cuda mamba_step_triton causal_conv1d_cuda topk_cuda top_p_cuda min_p_cuda min_p_triton "
                 "prefix_scan_cuda",
    "compute": "gemm_fp16_cuda gemm_splitk_cuda gemm_splitk_triton gemm_int4_cuda gemm_int8_cuda gemm_fp8_cuda "
               "gemm_fp8_blockwise_cuda gemm_fp4_cuda gemm_fp4_triton grouped_gemm_cuda grouped_gemm_triton "
               "conv2d_nhwc_cuda conv2d_nhwc_triton moe_combine_cuda moe_scatter_cuda",
    "decode": "paged_decode_cuda paged_decode_triton flash_decode_triton mla_decode_triton cross_attention_triton",
}
STOPS = {"patience": "pat", "flat": "flat", "exhausted": "exh", "roofline": "roof", "launch": "lnch", "time": "time", "budget": "bud"}
_ORACLE: dict = {}          # task key -> (runnable configs, within NEAR of the fastest, fastest ms)


def oracle(agent) -> tuple[int, int, float]:
    """(runnable configs of every runnable rung, how many within NEAR x the fastest, the fastest)."""
    key = (agent.task.key, tuple(v.tag for v in agent.rungs))
    if key not in _ORACLE:
        times = [t for v in agent.rungs for c in agent.grid(v) if (t := agent.true_ms(c)) is not None]
        fastest = min(times)
        _ORACLE[key] = (len(times), sum(t <= NEAR * fastest for t in times), fastest)
    return _ORACLE[key]


def edges(agent) -> list[str]:
    """Parameters of the episode's best at an end of their value list whose one inward neighbour
    runs slower (the simulator's answer): the best may lie past the list (`name+` at its top,
    `name-` at its bottom), where a ladder's author could add values."""
    from kernelstrain import knobs
    from kernelstrain.engine import Candidate
    best, out = agent.best, []
    here = agent.true_ms(best)
    for name in agent.tunable(best.variant):
        values = knobs.param(best.variant, name).values
        i = values.index(best.params[name])
        for end, inward, mark in ((len(values) - 1, -1, "+"), (0, 1, "-")):
            if i == end and not (mark == "-" and name in knobs.KNOBS):     # a knob's 0 is the code as written
                t = agent.true_ms(Candidate(best.variant, {**best.params, name: values[i + inward]}))
                if t is None or t > here:
                    out.append(name + mark)
    return out


def row(agent, steps, by_rung: bool = False) -> dict:
    """One episode's figures; `by_rung`: the edges named with the best's rung (where a list could grow)."""
    last_best = max((s.step for s in steps if s.kept), default=0)
    runnable, near, fastest = oracle(agent)
    return {
        "module": agent.m.name, "steps": len(steps), "before": last_best, "tail": len(steps) - last_best,
        "rungs": len(agent.rungs), "tunable": len(agent.tunable(agent.best.variant)), "configs": runnable,
        "near": near, "keeps": sum(s.kept for s in steps), "oracle_x": agent.true_ms(agent.best) / fastest,
        "floor_L": floor_launches(agent.m, agent.task), "lb": agent.launch_bound(),
        "stop": agent.stop if agent.end == "converged" else agent.end,
        "edges": [f"{agent.best.variant.tag}.{e}" for e in edges(agent)] if by_rung else edges(agent),
    }


def table(rows: list[dict], title: str) -> str:
    """The markdown table, one row per module (sorted by mean steps) and one for all."""
    by = defaultdict(list)
    for r in rows:
        by[r["module"]].append(r)
    head = ["module", "eps", "steps", "before", "tail", "tail%", "rungs", "tunable", "configs", "near1.25",
            "keeps", "best/oracle", "floor_L", "lb", "stops", "edges"]
    out = [title, "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def line(name, rs):
        def mean(k):
            return sum(r[k] for r in rs) / len(rs)
        stops = Counter(r["stop"] for r in rs)
        cells = [name, len(rs), f"{mean('steps'):.1f}", f"{mean('before'):.1f}", f"{mean('tail'):.1f}",
                 f"{sum(r['tail'] for r in rs) / max(1, sum(r['steps'] for r in rs)):.2f}",
                 f"{mean('rungs'):.1f}", f"{mean('tunable'):.1f}", f"{mean('configs'):.0f}", f"{mean('near'):.1f}",
                 f"{mean('keeps'):.1f}", f"{median([r['oracle_x'] for r in rs]):.3f}",
                 f"{median([r['floor_L'] for r in rs]):.1f}", f"{mean('lb'):.2f}",
                 " ".join(f"{STOPS.get(k, k)}:{n}" for k, n in stops.most_common()),
                 " ".join(f"{k}:{n}" for k, n in Counter(e for r in rs for e in r["edges"]).most_common(4))]
        out.append("| " + " | ".join(map(str, cells)) + " |")
    for name, rs in sorted(by.items(), key=lambda kv: sum(r["steps"] for r in kv[1]) / len(kv[1])):
        line(name, rs)
    line("ALL", rows)
    return "\n".join(out)


def modules_of(text: str) -> set:
    """A set of SETS by name, or a comma list of module names."""
    return set(SETS[text].split()) if text in SETS else set(text.split(","))


def picks(plan, modules: set, per: int, shuffle_seed: int | None = None) -> list[int]:
    """Up to `per` episode indices of each module: the first ones of the plan's order (or of a seeded shuffle of it)."""
    order = list(range(plan.profile.episodes))
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(order)
    taken, out = defaultdict(int), []
    for i in order:
        name = plan.task(i).module
        if name in modules and taken[name] < per:
            taken[name] += 1
            out.append(i)
        if len(out) >= per * len(modules):
            break
    return sorted(out)


def build(config: str, seed: int, sample: int, sample_seed: int, settings: list[str],
          modules: set | None = None, per: int = 0, shuffle_seed: int | None = None, by_rung: bool = False) -> list[dict]:
    """Rows of a sample of every module (behaviour_figures.built_rows), or of `per` episodes of each of `modules`."""
    from behaviour_figures import built_rows
    agent, episodes.Agent = episodes.Agent, Recorded
    try:
        if modules:
            from kernelstrain.plan import make_plan
            from kernelstrain.profiles import load_profile
            plan = make_plan(load_profile(config), seed)
            for i in picks(plan, modules, per, shuffle_seed):
                episodes.build_episode(plan, i)
        else:
            for _ in built_rows(config, seed, sample, sample_seed, settings):
                pass
        return [row(a, s, by_rung) for a, s in AGENTS]
    finally:
        episodes.Agent = agent
        AGENTS.clear()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--seed", type=int, default=5353)
    ap.add_argument("--sample", type=int, default=150)
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE")
    ap.add_argument("--modules", help="a set of SETS or a comma list of modules (with --per)")
    ap.add_argument("--per", type=int, default=8, help="episodes of each of --modules")
    ap.add_argument("--shuffle-seed", type=int, help="take --per of a seeded shuffle of the plan, not its first ones")
    ap.add_argument("--by-rung", action="store_true", help="name the best's rung in the edges column")
    ap.add_argument("--json", help="also write the per-episode rows here")
    args = ap.parse_args(argv)
    if args.modules and args.set:
        ap.error("--set applies to the sample of every module, not to --modules")
    modules = modules_of(args.modules) if args.modules else None
    if modules and (unknown := sorted(modules - set(REGISTRY))):
        ap.error(f"unknown modules: {', '.join(unknown)}")
    rows = build(args.config, args.seed, args.sample, args.sample_seed, args.set, modules, args.per, args.shuffle_seed,
                 args.by_rung)
    if args.json:
        Path(args.json).write_text(json.dumps(rows))
    title = (f"{args.config} seed {args.seed}, first {args.per} episodes a module" if modules else
             f"{args.config} seed {args.seed} sample {len(rows)} {' '.join(args.set)}".strip())
    print(table(rows, title))
    return 0


if __name__ == "__main__":
    sys.exit(main())
