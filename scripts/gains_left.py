"""Where the gains a session left behind sit, at each stop (issue 26, horizons): the fresh joint
neighbours of the best (two parameters one value each) that beat it past 2 sigma of the noise,
split into coupled pairs (engine.coupled: one profiler group, or ACROSS), those in the group the
best's profile points at, and the rest; and the rungs measured within 1.5x of the best whose own
grid beats it past the noise (runner-ups), above or below the best. True times: the simulator's
answer, which the engineer does not have.

    python3 scripts/gains_left.py --config kernelinfer --seed 5151 --sample 100 [--set search.coupled=0] [--pin-key]

Episodes are built as generate builds them (scripts/stop_reasons.py's sample).
"""
from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import stop_reasons as sr  # noqa: E402
from kernelstrain import engine, episodes  # noqa: E402
from kernelstrain.sim import noise_cv  # noqa: E402

RUNNER_UP = 1.5      # a rung measured within this of the best is a runner-up


def joint_gains(agent) -> dict:
    """Counts of the fresh joint neighbours of the best that beat it past 2 sigma, by kind of pair."""
    best, out = agent.best, {"coupled": 0, "pointed": 0, "other": 0, "halves_close": 0}
    true_best = agent.true_ms(best)
    pointed = engine.POINTS_AT[agent.bottleneck(best)]
    for c in agent.neighbours(best, 2):
        moved = [n for n in c.params if c.params[n] != best.params[n]]
        t = agent.true_ms(c) if len(moved) == 2 and agent.fresh(c) else None
        if t is None or true_best / t - 1 <= 2 * noise_cv(true_best):
            continue
        if not engine.coupled(*moved):
            out["other"] += 1
            continue
        out["coupled"] += 1
        out["pointed"] += any(pointed.search(n) for n in moved)
        losses = [agent.way_loss(agent.line, n, c.params[n]) for n in moved]
        out["halves_close"] += None not in losses and max(losses) <= engine.INTERACT_LOSS
    return out


def runner_ups(agent) -> dict:
    """Rungs measured within RUNNER_UP of the best whose grid's fastest config beats it past 2 sigma."""
    best, out = agent.best, {"above": 0, "below": 0}
    true_best = agent.true_ms(best)
    for v in agent.rungs:
        if v.tag == best.variant.tag or agent.rung_ms.get(v.tag, float("inf")) > RUNNER_UP * agent.book.best_ms:
            continue
        times = [t for t in (agent.true_ms(c) for c in agent.grid(v)) if t is not None]
        if times and true_best / min(times) - 1 > 2 * noise_cv(true_best):
            out["above" if agent.pos[v.tag] > agent.pos[best.variant.tag] else "below"] += 1
    return out


def main(argv=None) -> int:
    ap = sr.sample_parser(__doc__.splitlines()[0])
    ap.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE")
    ap.add_argument("--pin-key", action="store_true", help="draw from the profile's own key (a paired A/B of --set)")
    args = ap.parse_args(argv)
    from behaviour_figures import built_rows
    agent, episodes.Agent = episodes.Agent, sr.Recorded
    try:
        for _ in built_rows(args.config, args.seed, args.sample, args.sample_seed, args.set, args.pin_key):
            pass
        rows = [(a.stop if a.end == "converged" else a.end, joint_gains(a), runner_ups(a)) for a, _ in sr.AGENTS]
    finally:
        episodes.Agent = agent
        sr.AGENTS.clear()
    by = defaultdict(list)
    for row in rows:
        by[row[0]].append(row)
    print(f"{args.config} seed {args.seed} sample {len(rows)}: stops with a gain left past 2 sigma")
    print("| stop | stops | coupled joint (pointed; halves each measured within 25%) | other joint | runner-up above | below |")
    print("|---|---|---|---|---|---|")
    for stop, rs in sorted(by.items(), key=lambda kv: -len(kv[1])) + [("all", rows)]:
        def n(part, key):
            return sum(r[part][key] > 0 for r in rs)
        print(f"| {stop} | {len(rs)} | {n(1, 'coupled')} ({n(1, 'pointed')}; {n(1, 'halves_close')}) | {n(1, 'other')} "
              f"| {n(2, 'above')} | {n(2, 'below')} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
