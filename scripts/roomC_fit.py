"""How the persistent_prefetch launch model (kernelstrain/ops/persistent_rows.py) orders the H100's rows of roomC's
device jobs (measurements/h100_roomC_persistent.json: the rung at 1-8 CTAs an SM, several threads and rows a CTA,
beside the rung it climbs from). Prints, per module and over all: the geometric mean of sim / device on the
persistent rows, the share of pairs >5% apart (same module and shape) the model orders as the device does, and
per shape the best persistent time over the rung below's, device and model.

    python3 scripts/roomC_fit.py
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

ROWS = Path(__file__).resolve().parents[1] / "measurements" / "h100_roomC_persistent.json"


def timed_rows() -> list:
    """The correct, timed rows of the file with the model's time now."""
    out = []
    for r in json.loads(ROWS.read_text())["rows"]:
        if r["bug"] or not r["time_ms"]:
            continue
        m = REGISTRY[r["module"]]
        task = make_task(m, "H100", r["dtype"], r["shape"])
        out.append({**r, "model_ms": simulate(m, m.variant(r["variant"]), r["params"], task).time_ms})
    return out


def report(rows: list) -> str:
    lines, groups = [], defaultdict(list)
    for r in rows:
        groups[(r["module"], r["dtype"], json.dumps(r["shape"]))].append(r)
    agree = total = 0
    by_module = defaultdict(list)
    for (module, dtype, shape), rs in sorted(groups.items()):
        for i, a in enumerate(rs):
            for b in rs[i + 1:]:
                if max(a["time_ms"], b["time_ms"]) / min(a["time_ms"], b["time_ms"]) < 1.05:
                    continue
                total += 1
                agree += (a["time_ms"] < b["time_ms"]) == (a["model_ms"] < b["model_ms"])
        pers = [r for r in rs if r["variant"] == "persistent_prefetch"]
        below = [r for r in rs if r["variant"] != "persistent_prefetch"]
        for r in pers:
            by_module[module].append(math.log(r["model_ms"] / r["time_ms"]))
        if pers and below:
            dev = min(r["time_ms"] for r in pers) / min(r["time_ms"] for r in below)
            mod = min(r["model_ms"] for r in pers) / min(r["model_ms"] for r in below)
            lines.append(f"{module:17} {dtype} {shape:24} best persistent / rung below: device {dev:.3f} model {mod:.3f}")
    for module, logs in sorted(by_module.items()):
        lines.append(f"{module:17} persistent rows {len(logs):2}: sim/device geomean {math.exp(sum(logs) / len(logs)):.3f}")
    lines.append(f"pairs >5% apart ordered as the device: {agree}/{total} = {agree / max(1, total):.3f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(report(timed_rows()))
