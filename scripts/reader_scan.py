"""A trainer's scripted read of a generated dataset (issue 26, reader pass of session 14): what qa's checks do not
all count, each with its count over the whole sample and example ids.

    python3 scripts/reader_scan.py DATA [--examples 3]

DATA is a generated dataset directory, either layout (episodes.jsonl + sft_multiturn.jsonl, or sessions.jsonl);
the train split is read. Counts:
- climbs_3x: first writes of a rung above the best that run and measure >= 3x the best (a climb no profile asked for);
- lower_rung_walks / lost_ways_reasked: behaviour.figures' (qa's checks of the same names);
- code_repeats: steps whose code was submitted before and is not the best's, by kind (a close call's candidate
  re-measured is deliberate; anything else is repeated code);
- converged_slower_than_eager: episodes ending `converged` with the best slower than the PyTorch eager reference;
- feedback_contradictions: qa.contradictions over every user turn (printed figures against the text beside them);
- post_best_tail: steps after the episode's final best, and the episodes whose tail is over 60% (10 steps or more).
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain import behaviour  # noqa: E402
from kernelstrain.episodes import replay  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.qa import contradictions  # noqa: E402


def episodes(data: Path):
    """(episode row, its conversations' messages) of the train split."""
    if (data / "episodes.jsonl").exists():
        chats = defaultdict(list)
        with open(data / "sft_multiturn.jsonl", encoding="utf-8") as f:
            for line in f:
                row = json.loads(line)
                chats[row["id"]].append(row["messages"])
        with open(data / "episodes.jsonl", encoding="utf-8") as f:
            for line in f:
                ep = json.loads(line)
                yield ep, chats.get(ep["id"], [])
        return
    from kernelstrain.sessions import episode_row
    with open(data / "sessions.jsonl", encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            yield episode_row(row), [row["messages"]]


def scan(data: Path) -> tuple[Counter, dict]:
    count, examples = Counter(), defaultdict(list)

    def hit(name: str, example: str, n: int = 1):
        count[name] += n
        examples[name].append(example)

    for ep, chats in episodes(data):
        count["episodes"] += 1
        count["steps"] += len(ep["steps"])
        pos = {v.tag: i for i, v in enumerate(REGISTRY[ep["module"]].variants)}
        best_tag, best_ms, best_code = ep["baseline"]["tag"], ep["baseline"]["time_ms"], ep["baseline"]["code"]
        written, first = {best_tag}, {ep["baseline"]["code"]: 0}
        for s, v in replay(ep):
            where = f"{ep['id']} step {s['step']}"
            if s["status"] == "ok" and s["tag"] not in written and pos[s["tag"]] > pos[best_tag] \
                    and s["time_ms"] >= 3 * best_ms:
                hit("climbs_3x", f"{where} {ep['module']} {s['tag']} {s['time_ms'] / best_ms:.1f}x")
            if s["code"] in first and s["code"] != best_code:
                earlier = first[s["code"]]
                hit("code_repeats_close_call" if s["status"] == "ok" and v.runs > 1 else "code_repeats_other",
                    f"{where} = step {earlier}")
            first.setdefault(s["code"], s["step"])
            written.add(s["tag"])
            if s["kept"]:
                best_tag, best_code = s["tag"], s["code"]
            best_ms = s["best_ms"]
        f = behaviour.figures(ep)
        for name in ("lower_rung_walks", "lost_ways_reasked"):
            if f[name]:
                hit(name, f"{ep['id']} ({f[name]})", f[name])
        tail = sum(1 for s in ep["steps"] if s["step"] > ep["best"]["step"])
        count["post_best_tail"] += tail
        if len(ep["steps"]) >= 10 and tail > 0.6 * len(ep["steps"]):
            hit("tail_over_60pct", f"{ep['id']} {tail}/{len(ep['steps'])}")
        vs = ep["best"].get("speedup_vs_torch")
        if ep["end"] == "converged" and vs is not None and vs < 1:
            hit("converged_slower_than_eager", f"{ep['id']} {ep['module']} {ep['gpu']} {vs:.2f}x")
        for messages in chats:
            n = sum(contradictions(m["content"]) for m in messages if m["role"] == "user")
            if n:
                hit("feedback_contradictions", ep["id"], n)
    return count, examples


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data", type=Path)
    ap.add_argument("--examples", type=int, default=3)
    a = ap.parse_args(argv)
    count, examples = scan(a.data)
    print(f"{a.data}: {count['episodes']} episodes, {count['steps']} steps, post-best tail "
          f"{count['post_best_tail'] / max(1, count['steps']):.3f}")
    for name in ("climbs_3x", "lower_rung_walks", "lost_ways_reasked", "code_repeats_close_call", "code_repeats_other",
                 "converged_slower_than_eager", "tail_over_60pct", "feedback_contradictions"):
        shown = "; ".join(examples[name][:a.examples])
        print(f"{count[name]:6d}  {name}" + (f"  e.g. {shown}" if shown else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
