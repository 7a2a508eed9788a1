"""Why each episode of a sample stops, and what was left when it did: the rule that ended the
search (engine.Episode.stop_rule, or `exhausted`: no idea left), the rungs never tried, the
untried neighbours of the best, how far the best is from its floor and from the best
configuration of any runnable rung (--oracle: the simulator's answer, which the engineer does not
have), and how much the best untried neighbour of the best would have gained (one parameter one
value away: the coordinate search's next moves), and how often beyond the noise.

    python3 scripts/stop_reasons.py --config kernelinfer --seed 5151 --sample 60 [--oracle] [--list]
        [--set search.skip_max=0.3 ...] [--pin-key]

Episodes are built as generate builds them (episodes.build_episode), drawn as
scripts/behaviour_figures.py draws its sample.
"""
from __future__ import annotations

import argparse
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import engine, episodes  # noqa: E402
from kernelstrain.sim import noise_cv  # noqa: E402

AGENTS = []


class Recorded(engine.Episode):
    """The engine's agent, kept after its run for a look at its state."""

    def run(self):
        steps = super().run()
        AGENTS.append((self, steps))
        return steps


def state(agent: engine.Episode, steps, oracle: bool) -> dict:
    """What the agent had left when it stopped."""
    best, pos = agent.best, agent.pos
    here = pos[best.variant.tag]
    fresh = [c for c in agent.neighbours(best, 1) if agent.fresh(c)]
    changed = {n for c in fresh for n in c.params if c.params[n] != best.params.get(n)}
    last_best = max((s.step for s in steps if s.kept), default=0)
    first = steps[0] if steps else None
    row = {
        "module": agent.m.name, "gpu": agent.task.gpu.name, "end": agent.end,
        "stop": agent.stop if agent.end == "converged" else agent.end, "steps": len(steps),
        "tail": sum(1 for s in steps if s.step > last_best), "keeps": sum(s.kept for s in steps),
        "rungs": len(agent.rungs), "rungs_tried": sum(v.tag in agent.rung_tried for v in agent.rungs),
        "untried_above": sum(pos[v.tag] > here and v.tag not in agent.rung_tried for v in agent.rungs),
        "skipped_below": sum(pos[v.tag] < here and v.tag not in agent.rung_tried for v in agent.rungs),
        "best_rung_from_top": sum(pos[v.tag] > here for v in agent.rungs),
        "first_jump": (sum(pos[agent.base.variant.tag] < pos[v.tag] <= pos[first.tag] for v in agent.rungs)
                       if first is not None else 0),
        "fresh_neighbours": len(fresh), "params_unprobed": len(changed),
        "tunable": len(agent.tunable(best.variant)), "settled": len(agent.line.settled),
        "floor_x": agent.book.best_ms / agent.floor_ms(best.variant),
    }
    if oracle:
        times = [agent.true_ms(c) for v in agent.rungs for c in agent.grid(v)]
        row["oracle_x"] = agent.true_ms(best) / min(t for t in times if t is not None)
        left = [agent.true_ms(c) for c in fresh]
        row["nbr_gain"] = max(0.0, agent.true_ms(best) / min(left) - 1.0) if left else 0.0
        row["nbr_missed"] = row["nbr_gain"] > 2 * noise_cv(agent.true_ms(best))
    return row


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def table(rows: list[dict], oracle: bool) -> str:
    by = defaultdict(list)
    for r in rows:
        by[r["stop"]].append(r)
    cols = ["episodes", "steps", "tail", "keeps", "rungs tried/runnable", "untried above", "skipped below",
            "first jump", "fresh nbrs", "params unprobed", "settled/tunable", "best/floor"] + (["best/oracle", "nbr gain > noise"] if oracle else [])
    lines = ["| stop | " + " | ".join(cols) + " |", "|" + "---|" * (len(cols) + 1)]
    for stop, rs in sorted(by.items(), key=lambda kv: -len(kv[1])) + [("all", rows)]:
        def mean(k):
            return sum(r[k] for r in rs) / len(rs)
        cells = [len(rs), f"{mean('steps'):.1f}", f"{mean('tail'):.1f}", f"{mean('keeps'):.1f}",
                 f"{mean('rungs_tried'):.1f}/{mean('rungs'):.1f}", f"{mean('untried_above'):.2f}",
                 f"{mean('skipped_below'):.2f}", f"{mean('first_jump'):.2f}", f"{mean('fresh_neighbours'):.1f}",
                 f"{mean('params_unprobed'):.1f}", f"{mean('settled'):.1f}/{mean('tunable'):.1f}",
                 f"{median([r['floor_x'] for r in rs]):.2f}"]
        if oracle:
            cells += [f"{median([r['oracle_x'] for r in rs]):.3f}", f"{mean('nbr_missed'):.2f}"]
        lines.append(f"| {stop} | " + " | ".join(map(str, cells)) + " |")
    return "\n".join(lines)


def sample_parser(description: str) -> argparse.ArgumentParser:
    """The arguments that draw a sample of a profile's episodes (behaviour_figures.built_rows)."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--seed", type=int, default=101)
    ap.add_argument("--sample", type=int, default=60)
    ap.add_argument("--sample-seed", type=int, default=0)
    return ap


def main(argv=None) -> int:
    ap = sample_parser(__doc__.splitlines()[0])
    ap.add_argument("--oracle", action="store_true", help="simulate every runnable rung's grid (slow)")
    ap.add_argument("--list", action="store_true", help="one line per episode")
    ap.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE")
    ap.add_argument("--pin-key", action="store_true", help="draw from the profile's own key (a paired A/B of --set)")
    args = ap.parse_args(argv)
    from behaviour_figures import built_rows
    agent, episodes.Agent = episodes.Agent, Recorded
    try:
        for _ in built_rows(args.config, args.seed, args.sample, args.sample_seed, args.set, args.pin_key):
            pass
        rows = [state(a, s, args.oracle) for a, s in AGENTS]
    finally:
        episodes.Agent = agent
        AGENTS.clear()
    if args.list:
        for r in rows:
            print(" ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in r.items()))
    print(f"{args.config} seed {args.seed} sample {len(rows)}: stops {dict(Counter(r['stop'] for r in rows))}")
    print(table(rows, args.oracle))
    return 0


if __name__ == "__main__":
    sys.exit(main())
