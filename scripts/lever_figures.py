"""What an engine lever for the horizon could find at each episode's stop, measured before it is built
(docs/issue26_engineer.md, item 4): the simulator's answer, which the engineer does not have.

- trend: the parameter whose move made the last keep on the best's rung, one value on in the
  direction that paid (Episode.trend): untried at the stop, and faster than the best beyond 2 sigma;
- two steps: fresh configurations two value-steps from the best (one parameter two values, or two
  parameters one each) faster beyond 2 sigma, by the rule that stopped the search;
- runner-up: rungs above the best already measured whose fastest time is within the best's own
  tuning gain of it (its rung's first time / the best), and whether any configuration of such a
  rung beats the best beyond 2 sigma.

    python3 scripts/lever_figures.py --config kernelstrain --seed 9191 --sample 200

Episodes are built as generate builds them (episodes.build_episode), drawn as
scripts/behaviour_figures.py draws its sample.
"""
from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain import episodes  # noqa: E402
from kernelstrain.sim import noise_cv  # noqa: E402
from stop_reasons import AGENTS, Recorded, sample_parser  # noqa: E402


def gains(agent, c) -> bool:
    """`c` runs faster than the best beyond 2 sigma of a run (true times)."""
    t, b = agent.true_ms(c), agent.true_ms(agent.best)
    return t is not None and b / t - 1 > 2 * noise_cv(b)


def levers(agent, steps) -> Counter:
    c, stop = Counter(), agent.stop if agent.end == "converged" else agent.end
    c["episodes"] += 1
    if agent.trend is not None:
        nxt = agent.moved(*agent.trend)
        c["trend_open"] += nxt is not None
        c["trend_gains"] += nxt is not None and gains(agent, nxt)
    two = [o for o in agent.neighbours(agent.best, 2) if agent.fresh(o) and gains(agent, o)]
    if two:
        moved = max(sum(o.params[n] != agent.best.params[n] for n in o.params) for o in two)
        c[f"two_steps_{stop}_{'one_param' if moved == 1 else 'two_params'}"] += 1
    tag = agent.best.variant.tag
    first = next((s.time_ms for s in steps if s.tag == tag and s.status == "ok"), agent.baseline_ms)
    reach = first / agent.book.best_ms
    won = False
    for v in agent.rungs:
        if v.tag == tag or v.tag not in agent.rung_ms or agent.pos[v.tag] < agent.pos[tag] \
                or agent.rung_ms[v.tag] > agent.book.best_ms * reach:
            continue
        c["runner_ups"] += 1
        c["runner_ups_within_contender"] += agent.rung_ms[v.tag] <= agent.search.contender * agent.book.best_ms
        beat = any(gains(agent, o) for o in agent.grid(v))
        c["runner_ups_that_win"] += beat
        won |= beat
    c["episodes_with_a_winning_runner_up"] += won
    return c


def main(argv=None) -> int:
    args = sample_parser(__doc__.splitlines()[0]).parse_args(argv)
    from behaviour_figures import built_rows
    agent, episodes.Agent = episodes.Agent, Recorded
    total = Counter()
    try:
        for _ in built_rows(args.config, args.seed, args.sample, args.sample_seed, []):
            pass
        for a, s in AGENTS:
            total.update(levers(a, s))
    finally:
        episodes.Agent = agent
        AGENTS.clear()
    print(f"{args.config} seed {args.seed} sample {args.sample}:")
    for k in sorted(total):
        print(f"  {k}: {total[k]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
