"""Rank a profile's CUDA modules by where room could add purposeful steps, from scripts/room_table.py's per-episode rows
(`--by-rung --json F`): per module its share of the sample (how often the profile draws it), mean steps, tail share,
best/oracle (median), the stop rules, and the episodes not stopped at the roofline whose final best sits at an edge of a
value list with the inward neighbour slower (room_table.edges: the best may lie past the list). Modules are sorted by `edge/100`: episodes per 100
of the profile that stop at such an edge (share x the module's edge fraction), the most a list extension can reach.

    python3 scripts/room_table.py --config kernelinfer --seed 9191 --sample 300 --by-rung --json /tmp/ki.json
    python3 scripts/roomC_rank.py /tmp/ki.json [--impl cuda] [--top 25]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.ops import REGISTRY  # noqa: E402

STOPS = {"patience": "pat", "flat": "flat", "exhausted": "exh", "roofline": "roof", "launch": "lnch", "budget": "bud"}


def median(xs: list) -> float:
    s = sorted(xs)
    return (s[len(s) // 2] + s[(len(s) - 1) // 2]) / 2


def rank(rows: list[dict], impl: str) -> list[tuple]:
    """(module, figures) of the modules of `impl`, most edge stops per 100 episodes of the whole sample first."""
    by = defaultdict(list)
    for r in rows:
        by[r["module"]].append(r)
    out = []
    for name, rs in by.items():
        if impl and REGISTRY[name].impl != impl:
            continue
        n = len(rs)
        # a best at its roofline has no room past the list whatever its edges say
        at_edge = sum(bool(r["edges"]) and r["stop"] != "roofline" for r in rs)
        out.append((name, {
            "eps": n, "share": n / len(rows), "steps": sum(r["steps"] for r in rs) / n,
            "tail": sum(r["tail"] for r in rs) / max(1, sum(r["steps"] for r in rs)),
            "oracle": median([r["oracle_x"] for r in rs]), "edge_eps": at_edge,
            "edge100": 100 * at_edge / len(rows),
            "stops": Counter(r["stop"] for r in rs), "edges": Counter(e for r in rs if r["stop"] != "roofline" for e in r["edges"])}))
    return sorted(out, key=lambda kv: (-kv[1]["edge100"], kv[0]))


def table(ranked: list[tuple], title: str, top: int) -> str:
    head = ["module", "eps", "share%", "steps", "tail%", "best/oracle", "stops", "at edge", "edge/100", "edges (count)"]
    out = [title, "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, f in ranked[:top]:
        cells = [name, f["eps"], f"{100 * f['share']:.1f}", f"{f['steps']:.1f}", f"{100 * f['tail']:.0f}",
                 f"{f['oracle']:.3f}", " ".join(f"{STOPS.get(k, k)}:{n}" for k, n in f["stops"].most_common()),
                 f["edge_eps"], f"{f['edge100']:.1f}",
                 " ".join(f"{k}:{n}" for k, n in f["edges"].most_common(5))]
        out.append("| " + " | ".join(map(str, cells)) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rows", nargs="+", help="room_table --json files (pooled)")
    ap.add_argument("--impl", default="cuda", help="cuda | triton | '' for all")
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    rows = [r for f in args.rows for r in json.loads(Path(f).read_text())]
    print(table(rank(rows, args.impl), f"{' + '.join(Path(f).name for f in args.rows)}: {len(rows)} episodes", args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
