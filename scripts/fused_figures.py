"""Figures of a `--config fused` dataset: steps, status mix, and per family of program the best
speedup over PyTorch eager and over torch.compile (the bar to beat), as a Markdown table.

    python3 scripts/fused_figures.py DATA
"""
from __future__ import annotations

import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))     # this checkout's kernelstrain


def geomean(xs: list) -> float:
    return math.exp(statistics.mean(math.log(x) for x in xs)) if xs else float("nan")


def read_episodes(data: Path) -> list:
    """Every episode of a dataset: the training file and the validation split beside it."""
    files = [data / "episodes.jsonl", data / "episodes.validation.jsonl"]
    return [json.loads(line) for f in files if f.exists() for line in f.read_text().splitlines()]


def main(argv=None) -> int:
    import kernelstrain.fused.module  # noqa: F401 - registers the fused programs' modules with REGISTRY
    from kernelstrain.ops import REGISTRY
    data = Path((argv or sys.argv[1:])[0])
    eps = read_episodes(data)
    steps = [s for ep in eps for s in ep["steps"]]
    status = Counter(s["status"] for s in steps)
    print(f"{len(eps)} episodes, {len(steps)} steps (mean {len(steps) / len(eps):.2f}, median "
          f"{statistics.median(len(ep['steps']) for ep in eps)}, max {max(len(ep['steps']) for ep in eps)})")
    print("status: " + ", ".join(f"{k} {v} ({100 * v / len(steps):.1f}%)" for k, v in status.most_common()))
    print("ends: " + ", ".join(f"{k} {v}" for k, v in Counter(ep["end"] for ep in eps).most_common()))
    fams = defaultdict(list)
    for ep in eps:
        fams[REGISTRY[ep["module"]].family].append(ep)
    print("\n| family | episodes | best vs eager: geomean (max) | best vs torch.compile: geomean (max) | beat compile |")
    print("|---|---|---|---|---|")
    for fam, rows in sorted(fams.items()) + [("all", eps)]:
        vs_eager = [ep["torch_eager_ms"] / ep["best"]["time_ms"] for ep in rows]
        vs_comp = [ep["torch_compile_ms"] / ep["best"]["time_ms"] for ep in rows]
        beat = sum(v > 1 for v in vs_comp)
        print(f"| {fam} | {len(rows)} | {geomean(vs_eager):.2f}x ({max(vs_eager):.2f}x) | "
              f"{geomean(vs_comp):.2f}x ({max(vs_comp):.2f}x) | {beat}/{len(rows)} |")
    by_tag = Counter(ep["steps"][ep["best"]["step"] - 1]["tag"] if ep["best"]["step"] else "eager" for ep in eps)
    print("\nbest rung: " + ", ".join(f"{k} {v}" for k, v in by_tag.most_common()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
