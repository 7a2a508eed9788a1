"""Score the simulator by leave-episodes-out cross-validation on every shipped H200 measurement.

    python3 scripts/calibration_cv.py [--folds 5] [--module NAME ...] [--worst 12] [--json F]

Each record (a matched, timed ok candidate of h200_kernels.json and the h200_gpucheck_s*.json
files the fit reads) gets its uncalibrated roofline terms from the current op launch models; the
fit (kernelstrain.calibration.fit) runs once per fold on the other folds' episodes and predicts the
held-out episodes. The figures are gpu-check's own (calibration.metrics.agreement): within-episode
Spearman mean over episodes with >= 3 timed, same-episode pair-order agreement, share within
0.8-1.25x, geomean sim/measured, and per-module pooled and episode Spearman. Use it to judge any
simulator change (a launch model, a fit term) before the refit: the same command before and after.
--module prints that module's held-out rows episode by episode (measured, predicted, params).
--rungs M:rung,... scores the refit of those rungs' ceilings alone (calibration.fit.refit_variants).
--refit M1,M2 scores the module refit (calibration.fit.refit_modules: those modules' terms fitted on their rows of
MODULE_FIT_FILES, the shipped fit's shared terms held), as scripts/refit_calibration.py --modules makes it.
--pairs N prints where the within-episode order goes wrong: the misordered pairs by how far apart the hardware
put them, and the N (module, rung, rung) or (module, rung, parameters moved) kinds with the most misordered pairs.
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

from kernelstrain.calibration import FIT  # noqa: E402
from kernelstrain.calibration.fit import FIT_FILES, MODULE_FIT_FILES, PARAM_RIDGE, measured_records, out_of_fold  # noqa: E402
from kernelstrain.calibration.metrics import agreement  # noqa: E402

KEYS = ("n", "geomean", "within_0.8_1.25", "within_0.5_2", "groups", "spearman_mean", "spearman_median",
        "groups_nonpositive", "pair_agreement")


def module_table(rows: list) -> dict:
    """module -> (rows, episode Spearman mean, same-episode pair order, pooled Spearman, share within 0.8-1.25x, geomean)."""
    pooled = agreement(rows)["module_spearman"]
    table = {}
    for m in sorted({r["module"] for r in rows}):
        a = agreement([r for r in rows if r["module"] == m])
        table[m] = {"n": a["n"], "rho_episode": a["spearman_mean"], "pairs": a["pair_agreement"],
                    "rho_pooled": pooled.get(m), "band": a["within_0.8_1.25"], "geomean": a["geomean"]}
    return table


TIE_BINS = (0.02, 0.05, 0.1, 0.2, 0.4, math.inf)     # |log measured ratio| of a pair


def pair_kind(a: dict, b: dict) -> tuple:
    """(module, rung, rung) of two rows of an episode, or (module, rung, 'params: the ones that differ')."""
    if a["variant"] != b["variant"]:
        return (a["module"], *sorted((a["variant"], b["variant"])))
    moved = sorted(p for p in set(a["params"]) | set(b["params"]) if a["params"].get(p) != b["params"].get(p))
    return a["module"], a["variant"], "params: " + ",".join(moved)


def misordered(rows: list) -> tuple[dict, dict, dict]:
    """(pairs by kind, misordered pairs by kind, (pairs, misordered) by TIE_BINS bin) over the same-episode
    pairs whose measured times differ (calibration.metrics.pair_counts' pairs)."""
    episodes = {}
    for r in rows:
        episodes.setdefault(r["episode"], []).append(r)
    pairs, wrong, bins = {}, {}, {b: [0, 0] for b in TIE_BINS}
    for members in (m for m in episodes.values() if len(m) >= 3):
        for a, b in itertools.combinations(members, 2):
            if a["measured_ms"] == b["measured_ms"]:
                continue
            kind, apart = pair_kind(a, b), abs(math.log(a["measured_ms"] / b["measured_ms"]))
            bad = (a["sim_ms"] - b["sim_ms"]) * (a["measured_ms"] - b["measured_ms"]) <= 0
            pairs[kind] = pairs.get(kind, 0) + 1
            wrong[kind] = wrong.get(kind, 0) + bad
            edge = next(x for x in TIE_BINS if apart <= x)
            bins[edge][0] += 1
            bins[edge][1] += bad
    return pairs, wrong, bins


def print_pairs(rows: list, top: int):
    pairs, wrong, bins = misordered(rows)
    print(f"\nmisordered pairs: {sum(wrong.values())} of {sum(pairs.values())}; by how far apart the hardware put them:")
    for edge, (n, bad) in bins.items():
        apart = f"<= {edge:.0%}" if edge < math.inf else "> 40%"
        print(f"  measured apart {apart:>6}: {n:6} pairs, {bad:5} misordered ({bad / max(n, 1):.2f})")
    print("kinds with the most misordered pairs (misordered/pairs):")
    for kind in sorted(wrong, key=lambda k: -wrong[k])[:top]:
        print(f"  {wrong[kind]:4}/{pairs[kind]:<4} {' | '.join(kind)}")


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}" if isinstance(x, float) else str(x)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--module", nargs="*", default=[], help="print these modules' held-out rows")
    ap.add_argument("--worst", type=int, default=12, help="modules listed, lowest episode Spearman first")
    ap.add_argument("--k-param", default=str(PARAM_RIDGE),
                    help="shrinkage of the parameter exponents ('none': no parameter terms)")
    ap.add_argument("--pairs", type=int, default=0, help="print the N pair kinds most often misordered")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--jobs", type=int, default=1, help="folds fitted in parallel processes (same figures)")
    ap.add_argument("--refit", help="comma-separated modules: score their module refit (the shipped shared terms held)")
    ap.add_argument("--rungs", help="comma-separated module:rung: score the refit of those rungs' ceilings alone")
    a = ap.parse_args(argv)
    k_param = None if a.k_param == "none" else float(a.k_param)
    files = MODULE_FIT_FILES if a.refit or a.rungs else FIT_FILES
    if a.rungs:
        rungs = {}
        for item in a.rungs.split(","):
            rungs.setdefault(item.split(":")[0], []).append(item.split(":")[1])
        rows = out_of_fold(measured_records(files, set(rungs)), a.folds, a.jobs, base=FIT, variants=rungs)
    elif a.refit:
        modules = a.refit.split(",")
        rows = out_of_fold(measured_records(files, set(modules)), a.folds, a.jobs, base=FIT, modules=modules,
                           k_param=k_param)
    else:
        rows = out_of_fold(measured_records(files), a.folds, a.jobs, k_param=k_param)
    overall = agreement(rows)
    print(f"pooled {len(rows)} rows ({', '.join(files)}), {a.folds} folds by episode, k_param {k_param}, "
          "held-out figures:")
    print("  all      " + " ".join(f"{k}={_f(overall[k])}" for k in KEYS))
    by_source = {}
    for name in sorted({r["source"] for r in rows}, key=files.index):
        s = agreement([r for r in rows if r["source"] == name])
        by_source[name] = {k: s[k] for k in KEYS}
        print(f"  {name:24} " + " ".join(f"{k}={_f(s[k])}" for k in ("n", "geomean", "within_0.8_1.25",
                                                                     "spearman_mean", "pair_agreement")))
    table = module_table(rows)
    neg = sorted(m for m, v in table.items() if v["rho_pooled"] is not None and v["rho_pooled"] < 0)
    print(f"modules with a negative pooled Spearman: {neg or 0}")
    print(f"{'module':30} {'n':>4} {'rho ep':>7} {'pooled':>7} {'band':>6} {'gm':>6}")
    ranked = sorted(table.items(), key=lambda kv: (kv[1]["rho_episode"] is None, kv[1]["rho_episode"] or 0))
    for m, v in ranked[:a.worst]:
        print(f"{m:30} {v['n']:>4} {_f(v['rho_episode']):>7} {_f(v['rho_pooled']):>7} "
              f"{_f(v['band']):>6} {_f(v['geomean']):>6}")
    if a.pairs:
        print_pairs(rows, a.pairs)
    for m in a.module:
        print(f"\n{m}: held-out rows by episode (measured ms, predicted ms, ratio, variant, params)")
        for ep in sorted({r["episode"] for r in rows if r["module"] == m}):
            members = sorted((r for r in rows if r["module"] == m and r["episode"] == ep),
                             key=lambda r: r["measured_ms"])
            print(f"  {ep} {members[0]['dtype']} {members[0]['shape']}")
            for r in members:
                print(f"    {r['measured_ms']:9.4f} {r['sim_ms']:9.4f} {r['sim_ms'] / r['measured_ms']:5.2f} "
                      f"{r['variant']:26} {r['params']}")
    if a.json:
        Path(a.json).write_text(json.dumps({"overall": {k: overall[k] for k in KEYS}, "sources": by_source,
                                            "modules": table}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
