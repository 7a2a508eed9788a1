"""Per-module figures of the held-out gpu-check files under this checkout's model, and a before/after table.

    python3 scripts/sim_heldout_table.py --json OUT.json [FILES...]       # this checkout's model, every file
    python3 scripts/sim_heldout_table.py --compare BEFORE.json AFTER.json   # overall + every module that moved

FILES default to the held-out fresh seeds (HELD_OUT). Run the first form from two checkouts (e.g. main exported to
/tmp and this branch) and compare: a module's sim/measured geomean and pooled Spearman per file.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

HELD_OUT = ("h100_gpucheck_s91331.json", "h100_gpucheck_s92442.json", "h100_gpucheck_s93553.json",
            "h100_gpucheck_s94664.json")
OVERALL = ("spearman_mean", "pair_agreement", "within_0.8_1.25", "geomean")


def figures(path: Path) -> dict:
    from kernelstrain.gpucheck import report as report_mod
    from gpu_check_rescore import rescored  # noqa: E402  (this script's folder)
    data = json.loads(path.read_text())
    gpu = data.get("sim_gpu") or data.get("meta", {}).get("sim_gpu")
    s = report_mod.summarize(rescored(data["rows"], gpu))
    return {"overall": {k: s["timing"][k] for k in OVERALL},
            "modules": {m: {"geomean": v["geomean"], "rho": v["spearman_pooled"], "n": v["timed"]}
                        for m, v in s["modules"].items()}}


def compare(before: dict, after: dict) -> None:
    for name in after:
        b, a = before[name], after[name]
        print(f"{name}: " + "  ".join(f"{k} {b['overall'][k]:.3f} -> {a['overall'][k]:.3f}" for k in OVERALL))
        for m in sorted(a["modules"]):
            x, y = b["modules"].get(m, {}), a["modules"][m]
            if any(round(x.get(k) or 0, 3) != round(y.get(k) or 0, 3) for k in ("geomean", "rho")):
                def f(v):
                    return "  -  " if v is None else f"{v:.3f}"
                print(f"  {m:28} geomean {f(x.get('geomean'))} -> {f(y['geomean'])}  rho {f(x.get('rho'))} -> {f(y['rho'])}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path)
    a = ap.parse_args(argv)
    if a.compare:
        compare(*(json.loads(p.read_text()) for p in a.compare))
        return 0
    paths = [Path(f) for f in a.files] or [ROOT / "measurements" / f for f in HELD_OUT]
    out = {p.name: figures(p) for p in paths}
    text = json.dumps(out, indent=1, sort_keys=True)
    if a.json:
        a.json.write_text(text + "\n")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
