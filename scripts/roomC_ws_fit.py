"""Device rows of roomC's plans beside the model: per row measured / modelled, per rung the geomean, per shape the
order of every pair more than 5% apart on the device. Default: grouped_gemm_cuda's g1 / g2
(measurements/h100_roomC_ws.json, h100_roomC_ws_j2.json); any other knob_device.json files given (w1: conv2d_nhwc_cuda's
wgmma_ws, s1: selective_scan_cuda's state_group_scan).

    python3 scripts/roomC_ws_fit.py [FILE ...]
"""
from __future__ import annotations

import json
import math
import os
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MEASUREMENTS = Path(__file__).resolve().parents[1] / "measurements"
ROWS = (MEASUREMENTS / "h100_roomC_ws.json", MEASUREMENTS / "h100_roomC_ws_j2.json")      # plans g1, g2


def timed_rows(paths=ROWS) -> list:
    """The correct, timed rows (no bug renders) of the files."""
    out = []
    for path in paths:
        for r in json.loads(Path(path).read_text())["rows"]:
            if r.get("bug") is None and r.get("ok") and r.get("time_ms"):
                out.append(r)
    return out


def modelled_ms(r: dict) -> float:
    from kernelstrain.ops import REGISTRY
    from kernelstrain.sim import simulate
    from kernelstrain.tasks import make_task
    m = REGISTRY[r["module"]]
    return simulate(m, m.variant(r["variant"]), r["params"], make_task(m, "H100", r["dtype"], r["shape"])).time_ms


def pairs(rows: list, gap: float = 1.05) -> tuple:
    """(pairs the model orders as the device, pairs) among rows of one shape more than `gap` apart on the device."""
    agree = total = 0
    groups = defaultdict(list)
    for r in rows:
        groups[(r["dtype"], json.dumps(r["shape"], sort_keys=True))].append(r)
    for rs in groups.values():
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                if max(a["time_ms"], b["time_ms"]) / min(a["time_ms"], b["time_ms"]) < gap:
                    continue
                total += 1
                agree += (a["time_ms"] < b["time_ms"]) == (a["sim"] < b["sim"])
    return agree, total


def main(argv: list) -> int:
    rows = timed_rows([Path(a) for a in argv] or ROWS)
    for r in rows:
        r["sim"] = modelled_ms(r)
    rows.sort(key=lambda r: (json.dumps(r["shape"], sort_keys=True), r["time_ms"]))
    for r in rows:
        print(f"{json.dumps(r['shape'], sort_keys=True):60s} {r['variant']:18s} {json.dumps(r['params'], sort_keys=True):58s} "
              f"measured {r['time_ms'] * 1e3:8.1f} us  model {r['sim'] * 1e3:8.1f}  model/measured {r['sim'] / r['time_ms']:.2f}")
    for rung in sorted({(r["module"], r["variant"]) for r in rows}):
        ratios = [r["sim"] / r["time_ms"] for r in rows if (r["module"], r["variant"]) == rung]
        print(f"{rung[0]} {rung[1]} rows {len(ratios)}: model/measured geomean "
              f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}, range {min(ratios):.2f}-{max(ratios):.2f}")
    agree, total = pairs(rows)
    print(f"pairs > 5% apart ordered as the device: {agree} / {total}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("KERNELSTRAIN_DEVICE_UNCHECKED", "1")    # before kernelstrain's import (in modelled_ms)
    sys.exit(main(sys.argv[1:]))
