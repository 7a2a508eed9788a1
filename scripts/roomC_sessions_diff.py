"""Compare two generate outputs of one profile and seed (rungs off vs on: KERNELSTRAIN_DEVICE_UNCHECKED=1) on the
episodes / sessions of chosen modules: steps, steps up to the final best, the best time and speedup, the rungs the
engineer tried (with how many steps each) and the rung of the final best; and how many episodes of the others are
byte-identical (the gate turns on other modules' unchecked values too, so only the chosen modules are compared).

    python3 scripts/roomC_sessions_diff.py OFF_DIR ON_DIR [--modules topk_cuda,top_p_cuda]
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path


def load(d: Path) -> dict:
    out = {}
    for name in ("sessions.jsonl", "sessions.validation.jsonl", "episodes.jsonl", "episodes.validation.jsonl"):
        if (d / name).exists():
            for line in (d / name).read_text().splitlines():
                e = json.loads(line)
                out[e["id"]] = e
    return out


def steps_of(e: dict) -> list:
    return e.get("trace") or e.get("steps") or []


def summary(e: dict) -> str:
    st = steps_of(e)
    tags = Counter(s["tag"] for s in st)
    best = e["best"]
    best_tag = next((s["tag"] for s in st if s["step"] == best["step"]), "baseline")
    shape = ",".join(f"{d['dim']}={d['value']}" for d in e["shape"])
    return (f"{len(st):3d} steps, best at {best['step']:3d}: {best['time_ms'] * 1e3:8.2f} us ({best_tag}), "
            f"{best['speedup']:.2f}x; {e['gpu']} {shape}; rungs " + " ".join(f"{t}:{n}" for t, n in tags.items()))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("off", type=Path)
    ap.add_argument("on", type=Path)
    ap.add_argument("--modules", default="topk_cuda,top_p_cuda")
    args = ap.parse_args(argv)
    mods = set(args.modules.split(","))
    off, on = load(args.off), load(args.on)
    others = [k for k in off if off[k]["module"] not in mods]
    same = sum(json.dumps(off[k], sort_keys=True) == json.dumps(on.get(k), sort_keys=True) for k in others)
    print(f"{len(off)} episodes; of the {len(others)} outside {sorted(mods)}: {same} identical")
    tot = {"off": [0, 0, 1.0], "on": [0, 0, 1.0]}
    n = 0
    for k in sorted(off):
        if off[k]["module"] not in mods:
            continue
        n += 1
        print(f"{k} {off[k]['module']}\n  off {summary(off[k])}\n  on  {summary(on[k])}")
        for side, e in (("off", off[k]), ("on", on[k])):
            tot[side][0] += len(steps_of(e))
            tot[side][1] += e["best"]["step"]
            tot[side][2] *= e["best"]["speedup"]
    if n:
        for side in ("off", "on"):
            s, b, g = tot[side]
            print(f"{side}: {n} episodes, mean steps {s / n:.1f}, mean step of the best {b / n:.1f}, "
                  f"geomean speedup {g ** (1 / n):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
