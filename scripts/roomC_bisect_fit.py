"""top_p_cuda pivot_bisect against the H100's rows of roomC j3 (plan v3 of scripts/roomC_device.py): per timed row the
device's time and the launch model's now, the geometric mean of model / device per rung, and per shape the best of the
new rung beside the best of the rungs below (device and model): whether it belongs on the menu and how its price sits.

    KERNELSTRAIN_DEVICE_UNCHECKED=1 python3 scripts/roomC_bisect_fit.py [measurements/h100_roomC_v3.json]
"""
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

ROWS = Path(__file__).resolve().parents[1] / "measurements" / "h100_roomC_v3.json"


def main(argv) -> int:
    data = json.loads(Path(argv[0] if argv else ROWS).read_text())
    gpu = data.get("sim_gpu", "H100")
    bad = [r["id"] for r in data["rows"] if (r["ok"] is not True) != bool(r["bug"])]
    print(f"{len(data['rows'])} rows on {data['device']}; label problems: {bad or 'none'}")
    ratios, best = defaultdict(list), defaultdict(dict)
    for r in data["rows"]:
        if r["bug"] or not r["time_ms"]:
            continue
        m = REGISTRY[r["module"]]
        v = m.variant(r["variant"])
        sim = simulate(m, v, r["params"], make_task(m, gpu, r["dtype"], r["shape"])).time_ms
        ratios[r["variant"]].append(sim / r["time_ms"])
        key = json.dumps(r["shape"])
        side = "new" if r["variant"] == "pivot_bisect" else "below"
        for who, t in (("device", r["time_ms"]), ("model", sim)):
            if t < best[key].get((side, who), (math.inf,))[0]:
                best[key][(side, who)] = (t, r["variant"], r["params"])
        print(f"  {r['variant']:18s} {json.dumps(r['params']):60s} {key:24s} device {r['time_ms'] * 1e3:7.1f} us"
              f"  model {sim * 1e3:7.1f}")
    for tag, rs in ratios.items():
        print(f"{tag}: model / device geomean {math.exp(sum(map(math.log, rs)) / len(rs)):.3f} over {len(rs)} rows")
    for key, b in best.items():
        line = []
        for who in ("device", "model"):
            new, below = b.get(("new", who)), b.get(("below", who))
            if new and below:
                line.append(f"{who}: new {new[0] * 1e3:.1f} vs below {below[0] * 1e3:.1f} us ({below[1]}) = "
                            f"{below[0] / new[0]:.2f}x")
        print(f"{key}: " + "; ".join(line))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
