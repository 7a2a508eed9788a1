"""Behaviour figures (kernelstrain/behaviour.py) beside the cards' step, status, time and speedup
figures, for generated datasets or for a sample of a profile's episodes built in memory.

    python3 scripts/behaviour_figures.py DIR [DIR ...]          # episodes.jsonl or sessions.jsonl
    python3 scripts/behaviour_figures.py --config kernelinfer --seed 101 --sample 60 \
        [--set search.patience_min=20 --set profile.min_floor_launches=1 ...] [--pin-key]  # built as generate builds them

The sample is drawn at random over the run (seeded by --sample-seed), as scripts/ki_tune.py draws it.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from kernelstrain.behaviour import figures, tail_share  # noqa: E402


def rows_of(data: Path):
    """Public episode rows of a dataset, either layout."""
    if (data / "episodes.jsonl").exists():
        with open(data / "episodes.jsonl", encoding="utf-8") as f:
            for line in f:
                yield json.loads(line)
        return
    from kernelstrain.sessions import episode_row
    with open(data / "sessions.jsonl", encoding="utf-8") as f:
        for line in f:
            yield episode_row(json.loads(line))


def built_rows(config: str, seed: int, sample: int, sample_seed: int, settings: list[str], pin_key: bool = False):
    """The sampled episodes' public rows, built as generate builds them; `pin_key`: their random
    streams drawn from the profile's own key, not the one the settings give (a paired A/B of
    engine settings: each episode starts from the same draws, so only what a setting changes differs)."""
    from ki_tune import overridden
    from kernelstrain.episodes import build_episode
    from kernelstrain.plan import make_plan
    from kernelstrain.profiles import load_profile
    own = load_profile(config)
    profile = with_profile_settings(overridden(own, [s for s in settings if not s.startswith("profile.")]),
                                    [s for s in settings if s.startswith("profile.")])
    if pin_key:
        profile.__dict__["key"] = own.key        # a cached_property: set once, before anything reads it
    plan = make_plan(profile, seed)
    picks = sorted(random.Random(sample_seed).sample(range(profile.episodes), min(sample, profile.episodes)))
    for i in picks:
        yield build_episode(plan, i).row()


def with_profile_settings(profile, settings: list[str]):
    """The profile with `profile.key=value` settings of its [profile] table applied (a float
    setting such as min_floor_launches), its keys re-derived as the TOML would give them."""
    if not settings:
        return profile
    from kernelstrain.profiles import profile_from_tables, profile_tables
    tables = profile_tables(profile)
    for item in settings:
        key, _, value = item.partition("=")
        tables["profile"][key.partition(".")[2]] = float(value)
    return profile_from_tables(tables, profile.path)


def summary(rows) -> dict:
    total, status, ends, steps, hours, speedups = Counter(), Counter(), Counter(), [], [], []
    for ep in rows:
        ends[ep["end"]] += 1
        total.update(figures(ep))
        status.update(s["status"] for s in ep["steps"])
        steps.append(len(ep["steps"]))
        hours.append(ep["elapsed_s"] / 3600)
        speedups.append(ep["best"]["speedup"])
    n, m = max(1, len(steps)), max(1, sum(steps))
    return {
        "episodes": len(steps), "steps_mean": round(sum(steps) / n, 2), "steps_min": min(steps, default=0),
        "steps_median": sorted(steps)[len(steps) // 2] if steps else 0,
        "steps_max": max(steps, default=0),
        "status_pct": {k: round(100 * status[k] / m, 2) for k in ("ok", "wrong_result", "compile_error")},
        "ends": dict(sorted(ends.items())),
        "tail_share": tail_share(total), "slow_rung_returns": total["slow_rung_returns"],
        "reproposed": total["reproposed"], "one_sided_remeasures": total["one_sided_remeasures"],
        "remeasures": total["remeasures"], "close_call_reruns": total["close_call_reruns"],
        "bugs_remade": total["bugs_remade"],
        "first_tweaks_failed": f"{total['first_tweaks_failed']}/{total['first_tweaks']}",
        "converged_far": f"{total['converged_far']}/{total['converged']}",
        "converged_on_failure": f"{total['converged_on_failure']}/{total['converged']}",
        "hours_mean": round(sum(hours) / n, 3), "hours_min": round(min(hours, default=0), 3),
        "hours_max": round(max(hours, default=0), 3),
        "speedup_mean": round(sum(speedups) / n, 2), "speedup_over_100": sum(x > 100 for x in speedups),
        "speedup_over_1000": sum(x > 1000 for x in speedups),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", nargs="*", type=Path)
    ap.add_argument("--config", default="kernelstrain")
    ap.add_argument("--seed", type=int, default=101)
    ap.add_argument("--sample", type=int, default=0, help="build N episodes in memory instead of reading DIRs")
    ap.add_argument("--sample-seed", type=int, default=0)
    ap.add_argument("--set", action="append", default=[], metavar="TABLE.KEY=VALUE")
    ap.add_argument("--pin-key", action="store_true", help="draw from the profile's own key (a paired A/B of --set)")
    args = ap.parse_args(argv)
    if args.sample:
        label = f"{args.config} seed {args.seed} sample {args.sample} {' '.join(args.set)}{' (key pinned)' if args.pin_key else ''}".strip()
        print(label, json.dumps(summary(built_rows(args.config, args.seed, args.sample, args.sample_seed, args.set,
                                                   args.pin_key))))
    for d in args.data:
        print(d, json.dumps(summary(rows_of(d))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
