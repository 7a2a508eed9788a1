"""simB (issue 30): every held-out gpu-check seed pooled per module, re-simulated by this checkout, so that a module
consistently misordered across seeds stands apart from a noisy 5-point sample.

    python3 scripts/simB_pool.py [--modules a b ...] [--rows] [--files s91331 s93553 ...] [--json OUT]
    python3 scripts/simB_pool.py --before BEFORE.json      # a markdown table: BEFORE (another checkout's --json) -> now

Held out (never in FIT_FILES / MODULE_FIT_FILES): the gpu-check seeds below. Per module: episodes with >= 3 timed
ok rows, their mean within-episode Spearman, pair order (simulator ties 1/2), sim/measured geomean, and the
hardware's own repeat pair order where rows were re-timed (time_ms_2). --rows prints each episode's rows.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.calibration.metrics import pair_counts, spearman  # noqa: E402
from kernelstrain.gpucheck import _sim_ms  # noqa: E402

HELD = ("s61717", "s62828", "s73737", "s84317", "s91331", "s92442", "s93553", "s94664", "s95151", "s95252", "s98181",
        "s98282", "s99595", "s99696", "s88339", "s88440", "s86113", "s86224")


def load(files) -> list:
    rows = []
    for seed in files:
        path = ROOT / "measurements" / f"h100_gpucheck_{seed}.json"
        data = json.loads(path.read_text())
        gpu = data.get("sim_gpu") or data.get("meta", {}).get("sim_gpu") or "H100"
        for r in data["rows"]:
            if r.get("label") != "ok" or not r.get("ok") or not r.get("time_ms"):
                continue
            try:
                sim = _sim_ms(r, gpu)
            except Exception:  # a variant or param this checkout no longer has
                sim = None
            if sim:
                rows.append(dict(r, sim_now=sim, seed=seed))
    return rows


def per_module(rows: list) -> dict:
    eps = {}
    for r in rows:
        eps.setdefault((r["module"], r["seed"], r["episode"]), []).append(r)
    out = {}
    for (module, seed, ep), members in eps.items():
        m = out.setdefault(module, {"rho": [], "good": 0.0, "pairs": 0, "logs": [], "rgood": 0.0, "rpairs": 0,
                                    "seeds": set(), "eps": []})
        m["logs"] += [math.log(r["sim_now"] / r["time_ms"]) for r in members]
        if len(members) < 3:
            continue
        sim, meas = [r["sim_now"] for r in members], [r["time_ms"] for r in members]
        m["rho"].append(spearman(sim, meas))
        g, n = pair_counts(sim, meas)
        m["good"], m["pairs"] = m["good"] + g, m["pairs"] + n
        again = [r for r in members if r.get("time_ms_2")]
        if len(again) >= 2:
            g, n = pair_counts([r["time_ms_2"] for r in again], [r["time_ms"] for r in again])
            m["rgood"], m["rpairs"] = m["rgood"] + g, m["rpairs"] + n
        m["seeds"].add(seed)
        m["eps"].append((seed, ep, members))
    return out


def figures(per: dict) -> dict:
    """{module: episodes, mean within-episode Spearman, pair order, geomean} of per_module's pools."""
    return {module: {"episodes": len(m["rho"]), "rho": sum(m["rho"]) / len(m["rho"]),
                     "pairs": m["good"] / max(1, m["pairs"]), "geomean": math.exp(sum(m["logs"]) / len(m["logs"]))}
            for module, m in per.items() if m["rho"]}


def table(before: dict, after: dict) -> str:
    """Markdown rows of the modules whose figures moved (before -> after)."""
    lines = ["| module | episodes | Spearman | pair order | geomean |", "|---|---|---|---|---|"]
    for module in sorted(after):
        b, n = before.get(module), after[module]
        if b and all(round(b[k], 3) == round(n[k], 3) for k in ("rho", "pairs", "geomean")):
            continue
        b = b or {"rho": float("nan"), "pairs": float("nan"), "geomean": float("nan")}
        lines.append(f"| {module} | {n['episodes']} | {b['rho']:.3f} -> {n['rho']:.3f} | {b['pairs']:.3f} -> "
                     f"{n['pairs']:.3f} | {b['geomean']:.3f} -> {n['geomean']:.3f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", nargs="*", default=list(HELD))
    ap.add_argument("--modules", nargs="*")
    ap.add_argument("--rows", action="store_true")
    ap.add_argument("--json", type=Path, help="write the per-module figures here")
    ap.add_argument("--before", type=Path, help="print a markdown table of the modules whose figures moved")
    a = ap.parse_args(argv)
    rows = [r for r in load(a.files) if not a.modules or r["module"] in a.modules]
    figs = figures(per_module(rows))
    if a.json:
        a.json.write_text(json.dumps(figs, indent=1, sort_keys=True))
    if a.before:
        print(table(json.loads(a.before.read_text()), figs))
        return 0
    for module, m in sorted(per_module(rows).items(), key=lambda kv: sum(kv[1]["rho"]) / max(1, len(kv[1]["rho"]))):
        if not m["rho"]:
            continue
        rho, gm = figs[module]["rho"], figs[module]["geomean"]
        rep = f"{m['rgood'] / m['rpairs']:.2f}" if m["rpairs"] else "-"
        print(f"{module:28} eps {len(m['rho']):2d} seeds {len(m['seeds'])} rho {rho:+.3f} "
              f"pairs {m['good'] / max(1, m['pairs']):.3f} ({m['pairs']:3d}) gm {gm:.3f} repeat {rep}")
        if a.rows:
            for seed, ep, members in m["eps"]:
                print(f"   {seed} {ep} {members[0].get('dtype')} {members[0].get('shape')}")
                for r in sorted(members, key=lambda r: r["time_ms"]):
                    print(f"      meas {r['time_ms'] * 1e3:9.2f} us  sim {r['sim_now'] * 1e3:9.2f}  "
                          f"{r['variant']} {r.get('params')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
