"""The dequant_then_wgmma rungs' measured level (_dequant_wgmma.launch_model's `level`): for each module, the
device rows of a plan's knob_device.json against the model at a range of levels, with the geomean sim / measured,
its spread and the rows' pair order within each shape.

    python3 scripts/roomK_level.py measurements/h100_roomK_k5.json
"""
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.ops.matmul import _dequant_wgmma  # noqa: E402
from kernelstrain.sim import time_ms  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

MODELS = {"gemm_fp4_cuda": ("copy_bytes", 3), "gemm_int4_cuda": ("w_copy_bytes", 2)}


def sim_at(m, row, gpu, level):
    v = m.variant("dequant_then_wgmma")
    params = {**v.defaults(), **row["params"]}
    task = make_task(m, gpu, row["dtype"], row["shape"])
    mod = sys.modules[type(m).__module__]
    name, launches = MODELS[m.name]
    launch = _dequant_wgmma.launch_model(lambda t: m.cost(t).bytes, getattr(mod, name), launches, level)(params, task)
    return time_ms(m, v, launch, task, params)


def pair_order(rows, sims):
    by, good, total = {}, 0, 0
    for r, s in zip(rows, sims):
        by.setdefault(json.dumps(r["shape"], sort_keys=True), []).append((r["time_ms"], s))
    for xs in by.values():
        for i in range(len(xs)):
            for j in range(i + 1, len(xs)):
                total += 1
                good += (xs[i][0] - xs[j][0]) * (xs[i][1] - xs[j][1]) > 0
    return good / max(1, total), total


def main(path):
    d = json.loads(Path(path).read_text())
    gpu = "H200" if "H200" in d["device"] else "H100"
    for name in MODELS:
        m = REGISTRY[name]
        rows = [r for r in d["rows"] if r["module"] == name and r["variant"] == "dequant_then_wgmma" and not r["bug"]
                and r["ok"] and r["time_ms"]]
        for level in (1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2, 2.4, 2.6, 2.8, 3.0):
            sims = [sim_at(m, r, gpu, level) for r in rows]
            logs = [math.log(s / r["time_ms"]) for s, r in zip(sims, rows)]
            mean = sum(logs) / len(logs)
            sd = math.sqrt(sum((x - mean) ** 2 for x in logs) / len(logs))
            order, pairs = pair_order(rows, sims)
            print(f"{name} level {level:.1f}: {len(rows)} rows, sim/meas geomean {math.exp(mean):.3f} "
                  f"(log sd {sd:.3f}, range {math.exp(min(logs)):.2f}-{math.exp(max(logs)):.2f}), pair order {order:.3f} of {pairs}")


if __name__ == "__main__":
    main(sys.argv[1])
