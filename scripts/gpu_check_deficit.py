"""Where a gpu-check report's within-episode ranking deficit comes from (issue 30): the hardware's own noise
against the simulator's wrong orders, by module and by how far apart the measured times are.

    python3 scripts/gpu_check_deficit.py default.json [kernelinfer.json ...]   # gpu-check --report files

For each report:
- the repeat noise: |log(second timing / first)| of the re-timed rows (gpu-check re-times every third episode);
- a noise ceiling over ALL its episodes (the report's repeat ceiling covers a third of them): the Spearman mean
  and pair order of the measured times against themselves times a repeat ratio drawn from the re-timed rows
  (400 draws, seed 0): what a simulator that knew every true time would score against one timing;
- the pairs within 2x the repeat p90 of each other (the hardware cannot order them from one timing), their
  share and the simulator's agreement there, against its agreement on the pairs past it;
- the pairs the simulator ties (pair_agreement counts them 1/2, pair_agreement_ties_wrong 0);
- each module's share of the gap between the Spearman mean and the ceiling (its episodes' ceiling - rho, over
  the episodes), largest first, and the resolvable pairs it orders wrong.
"""
from __future__ import annotations

import itertools
import json
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.calibration.metrics import pair_counts, spearman  # noqa: E402

DRAWS = 400


def timed(report: dict) -> list:
    return [r for r in report["rows"] if r["label"] == "ok" and r.get("ok") and r.get("time_ms") and r.get("sim_ms")]


def episodes(rows: list, min_group: int = 3) -> dict:
    groups = {}
    for r in rows:
        groups.setdefault(r["episode"], []).append(r)
    return {e: ms for e, ms in groups.items() if len(ms) >= min_group}


def analyse(report: dict) -> dict:
    rows = timed(report)
    logs = [math.log(r["time_ms_2"] / r["time_ms"]) for r in rows if r.get("time_ms_2")]
    if not logs:
        return {"n": len(rows), "error": "no re-timed rows"}
    absl = sorted(abs(x) for x in logs)
    p90 = absl[int(0.9 * len(absl))]
    eps = episodes(rows)
    rng = random.Random(0)
    out = {"n": len(rows), "episodes": len(eps), "repeat_n": len(logs), "repeat_median": absl[len(absl) // 2],
           "repeat_p90": p90}
    rho, ceil, ceil_pairs = {}, {}, [0.0, 0]
    near = [0.0, 0]
    far = [0.0, 0]
    ties = pairs = 0
    alike = strict = 0.0
    far_wrong = {}
    for e, ms in eps.items():
        t, s = [m["time_ms"] for m in ms], [m["sim_ms"] for m in ms]
        rho[e] = spearman(s, t)
        draws = [[x * math.exp(rng.choice(logs)) for x in t] for _ in range(DRAWS)]
        ceil[e] = sum(spearman(d, t) for d in draws) / DRAWS
        for d in draws:
            a, n = pair_counts(d, t)
            ceil_pairs[0] += a / DRAWS
            ceil_pairs[1] += n / DRAWS
        a, n = pair_counts(s, t)
        alike, strict, pairs = alike + a, strict + pair_counts(s, t, tie=0.0)[0], pairs + n
        for i, j in itertools.combinations(range(len(ms)), 2):
            if t[i] == t[j]:
                continue
            ties += s[i] == s[j]
            got = 1.0 if (s[i] - s[j]) * (t[i] - t[j]) > 0 else 0.5 if s[i] == s[j] else 0.0
            bucket = near if abs(math.log(t[i] / t[j])) < 2 * p90 else far
            bucket[0] += got
            bucket[1] += 1
            if bucket is far and got < 1:
                far_wrong[ms[0]["module"]] = far_wrong.get(ms[0]["module"], 0) + 1 - got
    n = len(eps)
    deficit = {}
    for e, ms in eps.items():
        deficit[ms[0]["module"]] = deficit.get(ms[0]["module"], 0.0) + (ceil[e] - rho[e]) / n
    out.update({"spearman_mean": sum(rho.values()) / n, "ceiling_spearman": sum(ceil.values()) / n,
                "pair_agreement": alike / pairs, "pair_agreement_ties_wrong": strict / pairs,
                "ceiling_pairs": ceil_pairs[0] / ceil_pairs[1], "pairs": pairs, "sim_ties": ties,
                "near_pairs": near[1], "near_agreement": near[0] / near[1] if near[1] else None,
                "far_pairs": far[1], "far_agreement": far[0] / far[1] if far[1] else None,
                "deficit": dict(sorted(deficit.items(), key=lambda kv: -kv[1])),
                "far_wrong": dict(sorted(far_wrong.items(), key=lambda kv: -kv[1]))})
    return out


def render(name: str, a: dict) -> str:
    if "error" in a:
        return f"{name}: {a['error']}"
    lines = [f"{name}: {a['n']} timed candidates in {a['episodes']} episodes of >= 3",
             f"  repeat noise |log(t2/t1)|: median {a['repeat_median']:.4f}, p90 {a['repeat_p90']:.4f} ({a['repeat_n']} re-timed)",
             f"  Spearman mean {a['spearman_mean']:.3f}; noise ceiling over every episode {a['ceiling_spearman']:.3f} "
             f"(gap {a['ceiling_spearman'] - a['spearman_mean']:.3f})",
             f"  pair order {a['pair_agreement']:.3f} (simulator ties as wrong {a['pair_agreement_ties_wrong']:.3f}, "
             f"{a['sim_ties']} tied of {a['pairs']}); noise ceiling {a['ceiling_pairs']:.3f}",
             f"  pairs within 2x the repeat p90 ({200 * a['repeat_p90']:.1f}%): {a['near_pairs']} of {a['pairs']} "
             f"({a['near_pairs'] / a['pairs']:.0%}), agreement {a['near_agreement']:.3f}; past it {a['far_pairs']}, "
             f"agreement {a['far_agreement']:.3f}",
             "  share of the Spearman gap by module (ceiling - rho over the episodes; >= 0.004):"]
    lines += [f"    {m:28} {d:+.3f}  resolvable pairs ordered wrong {a['far_wrong'].get(m, 0):g}"
              for m, d in a["deficit"].items() if d >= 0.004]
    return "\n".join(lines)


def main(argv=None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    if not paths:
        print(__doc__)
        return 2
    for p in paths:
        print(render(p.stem, analyse(json.loads(p.read_text()))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
