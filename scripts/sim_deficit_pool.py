"""Where the within-episode Spearman / pair order is lost (issue 30), pooled over every held-out gpu-check seed and
re-simulated by this checkout.

    python3 scripts/sim_deficit_pool.py [--files s61717 ...] [--top 40] [--pairs 60] [--json OUT] [--md OUT]

Per module: its share of the Spearman deficit (sum over its episodes of 1 - rho, over all episodes: the pooled
Spearman mean is 1 minus the sum of the shares), the pairs it misorders and their weight. A misordered pair's weight
is how far apart the hardware has the two rows beyond its own repeat noise: max(0, |log(t_a / t_b)| - noise), noise
the p90 of |log(time_ms_2 / time_ms)| over every re-timed row of the pooled files; a tie of the simulator counts
half (pair_counts' convention). Per rung pair (module, rung a vs rung b, or one rung's two parameter settings): the
same weight summed, the largest first. Rows: measurements/h100_gpucheck_<seed>.json (held out: in no fit list).
"""
from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from kernelstrain.calibration.metrics import spearman  # noqa: E402
from simB_pool import HELD, load  # noqa: E402  (this script's folder)

# the pairs of seeds the lead ran during the eleventh and twelfth sessions (2026-12-07), held out like the twelve before
NEW = ("s99595", "s99696", "s88339", "s88440", "s86113", "s86224")


def held_files() -> list:
    seeds = dict.fromkeys(HELD + NEW)        # simB_pool's HELD has the pair too since main aa0e8e0: each seed once
    return [s for s in seeds if (ROOT / "measurements" / f"h100_gpucheck_{s}.json").exists()]


def repeat_noise(rows: list) -> float:
    """p90 of |log(second timing / first)| over the re-timed rows."""
    logs = sorted(abs(math.log(r["time_ms_2"] / r["time_ms"])) for r in rows if r.get("time_ms_2"))
    return logs[int(0.9 * len(logs))] if logs else 0.0


def rung_key(a: dict, b: dict) -> str:
    """'rung_a vs rung_b' (sorted), or 'rung: param=x vs param=y' for one rung's two settings (the params that differ)."""
    if a["variant"] != b["variant"]:
        return " vs ".join(sorted((a["variant"], b["variant"])))
    pa, pb = a.get("params") or {}, b.get("params") or {}
    diff = sorted(k for k in set(pa) | set(pb) if pa.get(k) != pb.get(k))
    return f"{a['variant']}: " + ",".join(diff)


def tally(rows: list, noise: float) -> tuple[dict, dict, int]:
    """(module -> figures, (module, rung pair) -> figures, episodes) of the episodes with >= 3 rows."""
    eps = {}
    for r in rows:
        eps.setdefault((r["module"], r["seed"], r["episode"]), []).append(r)
    mods, pairs, n_eps = {}, {}, 0
    for (module, seed, ep), members in eps.items():
        if len(members) < 3:
            continue
        n_eps += 1
        m = mods.setdefault(module, {"episodes": 0, "deficit": 0.0, "pairs": 0, "wrong": 0.0, "weight": 0.0,
                                      "resolvable": 0, "logs": []})
        sim, meas = [r["sim_now"] for r in members], [r["time_ms"] for r in members]
        m["episodes"] += 1
        m["deficit"] += 1.0 - spearman(sim, meas)
        m["logs"] += [math.log(s / t) for s, t in zip(sim, meas)]
        for i, j in itertools.combinations(range(len(members)), 2):
            if meas[i] == meas[j]:
                continue
            gap = abs(math.log(meas[i] / meas[j]))
            agree = (sim[i] - sim[j]) * (meas[i] - meas[j])
            wrong = 0.5 if agree == 0 else float(agree < 0)
            w = wrong * max(0.0, gap - noise)
            m["pairs"] += 1
            m["wrong"] += wrong
            m["weight"] += w
            m["resolvable"] += gap > noise
            if wrong:
                p = pairs.setdefault((module, rung_key(members[i], members[j])),
                                     {"wrong": 0.0, "weight": 0.0, "examples": []})
                p["wrong"] += wrong
                p["weight"] += w
                fast, slow = (i, j) if meas[i] < meas[j] else (j, i)
                p["examples"].append((w, seed, members[fast]["shape"], members[fast]["variant"], members[fast]["params"],
                                      meas[fast] * 1e3, sim[fast] * 1e3, members[slow]["variant"],
                                      members[slow]["params"], meas[slow] * 1e3, sim[slow] * 1e3))
    return mods, pairs, n_eps


GAPS = (0.05, 0.10, 0.25)      # the measured-gap bands of by_gap (past the repeat noise's band)


def by_gap(rows: list, noise: float) -> str:
    """Markdown: the pairs of episodes with >= 3 rows by how far apart the hardware has them, and the share the
    simulator misorders in each band (ties half)."""
    eps, bands = {}, {}
    for r in rows:
        eps.setdefault((r["module"], r["seed"], r["episode"]), []).append(r)
    edges = (noise,) + GAPS
    names = [f"< {100 * noise:.1f}% (the repeat noise p90)"] + \
        [f"{100 * a:.1f}-{100 * b:.0f}%" for a, b in zip(edges, edges[1:])] + [f">= {100 * GAPS[-1]:.0f}%"]
    for members in eps.values():
        if len(members) < 3:
            continue
        for a, b in itertools.combinations(members, 2):
            gap = abs(math.log(a["time_ms"] / b["time_ms"]))
            if gap == 0:
                continue
            agree = (a["sim_now"] - b["sim_now"]) * (a["time_ms"] - b["time_ms"])
            wrong = 0.5 if agree == 0 else float(agree < 0)
            kind = 2 if a["variant"] == b["variant"] else 4      # one rung's two settings, or two rungs
            band = bands.setdefault(names[sum(gap >= e for e in edges)], [0, 0.0, 0, 0.0, 0, 0.0])
            band[0] += 1
            band[1] += wrong
            band[kind] += 1
            band[kind + 1] += wrong
    out = ["| measured gap | pairs | misordered | share | one rung's settings: pairs, misordered | two rungs: pairs, "
           "misordered |", "|---|---|---|---|---|---|"]
    return "\n".join(out + [f"| {n} | {b[0]} | {b[1]:.1f} | {b[1] / b[0]:.3f} | {b[2]}, {b[3]:.1f} | {b[4]}, {b[5]:.1f} |"
                            for n, b in ((n, bands[n]) for n in names if n in bands)])


def markdown(mods: dict, pairs: dict, n_eps: int, noise: float, files: list, top: int, npairs: int) -> str:
    total_w = sum(m["weight"] for m in mods.values())
    deficit = sum(m["deficit"] for m in mods.values())
    npairs_all = sum(m["pairs"] for m in mods.values())
    wrong_all = sum(m["wrong"] for m in mods.values())
    out = [f"Pooled over {len(files)} held-out files ({', '.join(files)}): {n_eps} episodes of >= 3 timed rows, "
           f"Spearman mean {1 - deficit / n_eps:.3f}, pair order {1 - wrong_all / npairs_all:.3f} ({npairs_all} pairs); "
           f"repeat noise p90 |log t2/t1| = {noise:.4f}; misordered weight past the noise {total_w:.2f}.", "",
           "| module | episodes | rho | share of Spearman deficit | pairs | misordered | weight past noise | share of weight | geomean |",
           "|---|---|---|---|---|---|---|---|---|"]
    for name, m in sorted(mods.items(), key=lambda kv: -kv[1]["weight"])[:top]:
        gm = math.exp(sum(m["logs"]) / len(m["logs"]))
        out.append(f"| {name} | {m['episodes']} | {1 - m['deficit'] / m['episodes']:.3f} | {m['deficit'] / n_eps:.4f} | "
                   f"{m['pairs']} | {m['wrong']:.1f} | {m['weight']:.2f} | {m['weight'] / total_w:.3f} | {gm:.3f} |")
    out += ["", "Rung pairs by misordered weight (fast row first: measured / simulated us):", "",
            "| module | pair | misordered | weight | heaviest example |", "|---|---|---|---|---|"]
    for (name, key), p in sorted(pairs.items(), key=lambda kv: -kv[1]["weight"])[:npairs]:
        w, seed, shape, va, pa, ma, sa, vb, pb, mb, sb = max(p["examples"], key=lambda e: e[0])
        out.append(f"| {name} | {key} | {p['wrong']:.1f} | {p['weight']:.2f} | {seed} {shape}: {va} {pa} "
                   f"{ma:.1f}/{sa:.1f} < {vb} {pb} {mb:.1f}/{sb:.1f} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="*", default=None)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--pairs", type=int, default=60)
    ap.add_argument("--json", type=Path, help="write per-module figures here")
    ap.add_argument("--md", type=Path, help="write the markdown tables here")
    a = ap.parse_args(argv)
    files = a.files or held_files()
    rows = load(files)
    noise = repeat_noise(rows)
    mods, pairs, n_eps = tally(rows, noise)
    text = markdown(mods, pairs, n_eps, noise, files, a.top, a.pairs) + "\n\nBy the measured gap:\n\n" + by_gap(rows, noise)
    print(text)
    if a.md:
        a.md.write_text(text + "\n")
    if a.json:
        a.json.write_text(json.dumps({k: {x: y for x, y in v.items() if x != "logs"} for k, v in mods.items()},
                                     indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
