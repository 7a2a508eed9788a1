"""Which modules the simulator's fit has measurements of (H200 rows; the H100 rows of h100_gpucheck_kigrid.json),
per module of both bundled profiles.

    python3 scripts/fit_coverage.py [--cv CV.json] > docs/calibration_modules.md

One markdown row per registered module: the profiles that use it, its timed rows and episodes in the
fit files (calibration.fit.FIT_FILES) and which files, its rows in the shipped files the fit does not
read (held-out gpu-check seeds), and, with --cv (the --json of scripts/calibration_cv.py), its
held-out figures: rows, within-episode Spearman, pooled Spearman, share within 0.8-1.25x, geomean
sim/measured. A module without fit rows runs on the analytic model and its impl's fitted exponents
alone (calibration: ceiling 1.0, no module terms).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.calibration.fit import FIT_FILES, MEASUREMENTS, timed_rows  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.profiles import load_profile  # noqa: E402

def held_out_files() -> list:
    """The shipped gpu-check files the fit does not read."""
    return sorted(p.name for p in MEASUREMENTS.glob("h200_gpucheck_*.json") if p.name not in FIT_FILES)


def coverage() -> dict:
    """module -> {rows, episodes, files, held_out}."""
    out = {m: {"rows": 0, "episodes": set(), "files": [], "held_out": 0} for m in REGISTRY}
    for name in FIT_FILES:
        for k in timed_rows(name):
            if k["module"] in out:
                c = out[k["module"]]
                c["rows"] += 1
                c["episodes"].add(k["episode"])
                if name not in c["files"]:
                    c["files"].append(name)
    for name in held_out_files():
        for k in timed_rows(name):
            if k["module"] in out:
                out[k["module"]]["held_out"] += 1
    return out


def _f(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def table(cv: dict | None) -> str:
    profiles = {name: set(load_profile(name).modules) for name in ("kernelstrain", "kernelinfer")}
    cov = coverage()
    short = {name: name.replace("h200_", "").replace("gpucheck_", "").replace(".json", "") for name in FIT_FILES}
    fitted = sum(1 for c in cov.values() if c["rows"])
    lines = [f"# GPU measurements behind the simulator, per module\n",
             f"Written by `python3 scripts/fit_coverage.py{' --cv CV.json' if cv else ''}`. Fit files "
             f"(calibration.fit.FIT_FILES): {', '.join(FIT_FILES)}; held out (never fitted): "
             f"{', '.join(held_out_files()) or 'none'}. {fitted} of {len(cov)} modules have fitted rows; "
             "the others run on the analytic model with their impl's fitted exponents only (ceiling 1.0, no "
             "module terms) until `scripts/h200_unfitted.py` measures them. Every file is H200 rows but "
             "h100_gpucheck_kigrid.json (files column `h100_kigrid`), timed on an H100 and fitted on the H100's profile "
             "(no H200 could be had that day). CV columns: scripts/calibration_cv.py, 5 folds by episode; a module "
             "measured in 2 episodes (the kigrid's 2 shapes) is predicted at a shape its fold never saw.\n",
             "| module | profiles | fitted rows | episodes | files | held-out rows | CV rows | rho episode | "
             "rho pooled | within 0.8-1.25 | sim/meas |", "|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for m in sorted(cov, key=lambda m: (cov[m]["rows"] > 0, m)):
        c, v = cov[m], (cv or {}).get(m, {})
        uses = "+".join(p for p in ("kernelstrain", "kernelinfer") if m in profiles[p]) or "-"
        files = " ".join(short[f] for f in c["files"]) or "**not fitted**"
        lines.append(f"| {m} | {uses} | {c['rows']} | {len(c['episodes'])} | {files} | {c['held_out']} | "
                     f"{v.get('n', '-')} | {_f(v.get('rho_episode'))} | {_f(v.get('rho_pooled'))} | "
                     f"{_f(v.get('band'))} | {_f(v.get('geomean'))} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cv", help="scripts/calibration_cv.py --json output: per-module held-out figures")
    a = ap.parse_args(argv)
    cv = json.loads(Path(a.cv).read_text())["modules"] if a.cv else None
    sys.stdout.write(table(cv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
