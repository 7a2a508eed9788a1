"""The benchmark noise the simulator draws (sim.noise_cv) against the hardware's: every candidate
gpu-check timed twice on the same machine (measurements/*_gpucheck_*.json: time_ms, time_ms_2,
the second a harness re-run minutes later) gives one log ratio; per time band, the CV of one
run is the robust spread of those ratios over sqrt(2) (two noisy runs per ratio).

    python3 scripts/noise_fit.py            # per band: pairs, measured CV, the model's CV

The model sits at the low ends of SPEC's ranges, the nearest to these bands;
tests/test_noise_model.py holds it between them and 2.5x them.
"""
from __future__ import annotations

import glob
import json
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.sim import noise_cv  # noqa: E402

BANDS_US = ((0, 5), (5, 10), (10, 20), (20, 50), (50, 200), (200, math.inf))


def pairs(root: Path = ROOT) -> list[tuple[float, float]]:
    """(geometric mean time in ms, log(t1/t2)) of every candidate timed twice."""
    out = []
    for f in sorted(glob.glob(str(root / "measurements" / "*_gpucheck_*.json"))):
        for r in json.loads(Path(f).read_text())["rows"]:
            a, b = r.get("time_ms"), r.get("time_ms_2")
            if a and b and a > 0 and b > 0:
                out.append((math.sqrt(a * b), math.log(a / b)))
    return out


def band_cv(logs: list[float]) -> float:
    """The CV of one run from log ratios of two: the median absolute ratio read as a normal's
    (0.6745 sigma), over sqrt(2). Robust to the rare run a busy machine slowed."""
    return statistics.median(abs(x) for x in logs) / 0.6745 / math.sqrt(2)


def bands(points) -> list[dict]:
    rows = []
    for lo, hi in BANDS_US:
        inside = [(t, x) for t, x in points if lo <= t * 1e3 < hi]
        if inside:
            mid_ms = math.exp(statistics.median(math.log(t) for t, _ in inside))
            rows.append({"band_us": (lo, hi), "pairs": len(inside), "measured_cv": band_cv([x for _, x in inside]),
                         "sd_cv": statistics.pstdev([x for _, x in inside]) / math.sqrt(2),
                         "model_cv": noise_cv(mid_ms), "median_ms": mid_ms})
    return rows


def main() -> int:
    print(f"{'band (us)':>12} {'pairs':>6} {'median us':>10} {'measured cv':>12} {'sd cv':>7} {'model cv':>9}")
    for r in bands(pairs()):
        lo, hi = r["band_us"]
        print(f"{lo:>5}-{hi:<6} {r['pairs']:>6} {r['median_ms'] * 1e3:>10.1f} {100 * r['measured_cv']:>11.2f}% "
              f"{100 * r['sd_cv']:>6.2f}% {100 * r['model_cv']:>8.2f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())
