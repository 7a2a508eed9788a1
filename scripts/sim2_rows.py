"""sim2's decode modules against every timed row of measurements/: per module, the simulated time recomputed with this
checkout's model (on the card each file was measured on), then within each group (an episode of a gpu-check file;
module x dtype x shape of a device plan) the Spearman and pair order against the device, and over all rows the
geomean and rms of log(sim / measured).

    python3 scripts/sim2_rows.py [--modules a,b] [--files 'measurements/h100*.json']

Run it in a checkout of another commit (git archive) for a before / after table on the same rows.
"""
from __future__ import annotations

import argparse
import glob
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from kernelstrain.calibration.metrics import spearman  # noqa: E402
from kernelstrain.gpucheck import _sim_ms  # noqa: E402
from sim2_device_check import pair_order  # noqa: E402
from room_table import SETS  # noqa: E402

MODULES = tuple(SETS["decode"].split())


def groups(files: list, modules: tuple) -> dict:
    """{module: {group: [(measured, simulated), ...]}}."""
    out: dict = {m: {} for m in modules}
    for f in files:
        data = json.loads(Path(f).read_text())
        gpu = data.get("sim_gpu") or ("H100" if "h100" in Path(f).name else "H200")
        for r in data.get("rows") or []:
            if r.get("module") not in out or not r.get("time_ms") or r.get("bug") or r.get("lens") == "ragged":
                continue        # ragged: gpu-check's contexts beside full-length twins (sim2_lens), not the task's
            sim = _sim_ms(r, gpu)
            if sim is None:
                continue
            key = (Path(f).name, r.get("episode") or (r["dtype"], json.dumps(r["shape"], sort_keys=True)))
            out[r["module"]].setdefault(key, []).append((r["time_ms"], sim))
    return out


def figures(by_group: dict) -> dict:
    rhos, agree, pairs, logs = [], 0, 0, []
    for rows in by_group.values():
        dev, sim = [d for d, _ in rows], [s for _, s in rows]
        logs += [math.log(s / d) for d, s in rows]
        if len(rows) >= 3:
            rhos.append(spearman(dev, sim))
        a, n = pair_order(dev, sim)
        agree, pairs = agree + a, pairs + n
    n = len(logs)
    return {"rows": n, "groups": len(rhos), "spearman": sum(rhos) / len(rhos) if rhos else float("nan"),
            "pairs": agree / pairs if pairs else float("nan"), "geomean": math.exp(sum(logs) / n) if n else float("nan"),
            "rms_log": (sum(x * x for x in logs) / n) ** 0.5 if n else float("nan")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--modules", default=",".join(MODULES))
    ap.add_argument("--files", default="measurements/*.json")
    args = ap.parse_args(argv)
    files = sorted(glob.glob(str(ROOT / args.files)))
    print("| module | rows | groups of >= 3 | Spearman mean | pair order | geomean sim/meas | rms log |")
    print("|---|---|---|---|---|---|---|")
    for module, by_group in groups(files, tuple(args.modules.split(","))).items():
        f = figures(by_group)
        print(f"| {module} | {f['rows']} | {f['groups']} | {f['spearman']:.3f} | {f['pairs']:.3f} | {f['geomean']:.3f} "
              f"| {f['rms_log']:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
