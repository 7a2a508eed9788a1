"""Re-score gpu-check rows with the current model: each timed row's simulated time recomputed (the card the rows
were measured on, the model of this checkout), then gpu-check's figures beside the ones the rows were written with.

    python3 scripts/gpu_check_rescore.py measurements/h100_gpucheck_s96969.json [--profile default] [--modules]

Rows: a gpu-check --report file or a measurements/ file of them (meta.sim_gpu names the card). Use it to see what a
model change does to a fresh seed's rows after the check ran; rows a change was tuned on are no longer held out.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.gpucheck import _sim_ms  # noqa: E402
from kernelstrain.gpucheck import report as report_mod  # noqa: E402

FIGURES = (("spearman_mean", "Spearman mean"), ("spearman_median", "Spearman median"),
           ("pair_agreement", "pair order"), ("within_0.8_1.25", "within 0.8-1.25x"), ("geomean", "geomean"))


def rescored(rows: list, gpu: str) -> list:
    return [dict(r, sim_ms=_sim_ms(r, gpu)) if r.get("time_ms") else dict(r) for r in rows]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", type=Path)
    ap.add_argument("--profile", help="only the rows of this profile (measurement files of both)")
    ap.add_argument("--modules", action="store_true", help="print the modules whose figures moved")
    a = ap.parse_args(argv)
    data = json.loads(a.rows.read_text())
    gpu = data.get("sim_gpu") or data.get("meta", {}).get("sim_gpu")
    rows = [r for r in data["rows"] if not a.profile or r.get("profile", a.profile) == a.profile]
    before, after = report_mod.summarize(rows), report_mod.summarize(rescored(rows, gpu))
    print(f"{a.rows.name}{' ' + a.profile if a.profile else ''}: {len(rows)} rows, simulated as {gpu}")
    for key, label in FIGURES:
        print(f"  {label:18} {before['timing'][key]:.3f} -> {after['timing'][key]:.3f}")
    if a.modules:
        for name in sorted(after["modules"]):
            b, n = before["modules"][name], after["modules"][name]
            if any(round(b[k] or 0, 3) != round(n[k] or 0, 3) for k in ("geomean", "spearman_pooled")):
                print(f"  {name:28} geomean {b['geomean']:.3f} -> {n['geomean']:.3f}  "
                      f"rho pooled {b['spearman_pooled']:.3f} -> {n['spearman_pooled']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
