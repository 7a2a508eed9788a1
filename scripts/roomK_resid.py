"""The simulator against every timed ok row of measurements/*.json for some modules' rungs (issue 30): per row the
model's time now, the device's, and how many CTAs of the candidate the model keeps resident on an SM; then the
geometric-mean sim/measured ratio by (module, rung, CTAs an SM) and by (module, rung, K-slice bytes). Rows whose
parameters are off the rung's menu now (a value since taken out) are left out.

    python3 scripts/roomK_resid.py gemm_int8_cuda mma_sync,cp_async_pipeline [--rows]
"""
import glob
import json
import math
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.ops.occupancy import blocks_per_sm  # noqa: E402
from kernelstrain.sim import modelled_launch, simulate  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

KNOB_KEYS = ("main_unroll", "min_blocks", "bound", "optin")     # generic knobs (kernelstrain/knobs.py): left out
ELT = {"gemm_int8_cuda": 1, "gemm_fp8_cuda": 1}                  # operand bytes (BK bytes = BK x this)


def measured(modules: set, rungs: set) -> dict:
    """(gpu, module, rung, params, shape, dtype) -> the fastest device time of that candidate (ms)."""
    rows = {}
    root = Path(__file__).resolve().parents[1] / "measurements"
    for f in sorted(glob.glob(str(root / "*.json"))):
        data = json.load(open(f))
        data = data.get("rows") or [] if isinstance(data, dict) else data
        gpu = "H200" if "h200" in Path(f).name else "H100"
        for r in data:
            if (r.get("module") not in modules or r.get("variant") not in rungs or r.get("bug") or not r.get("ok")
                    or not r.get("time_ms") or r.get("label") not in (None, "ok")):
                continue
            p = {k: v for k, v in r["params"].items() if k not in KNOB_KEYS}
            key = (gpu, r["module"], r["variant"], json.dumps(p, sort_keys=True), json.dumps(r["shape"], sort_keys=True),
                   r["dtype"])
            rows[key] = min(rows.get(key, 1e9), r["time_ms"])
    return rows


def residuals(modules: set, rungs: set) -> list:
    out = []
    for (gpu, name, tag, p, s, dtype), t in measured(modules, rungs).items():
        m = REGISTRY[name]
        v = m.variant(tag)
        params = {**v.defaults(), **json.loads(p)}
        if any(x.name in params and params[x.name] not in x.values for x in v.params):
            continue
        task = make_task(m, gpu, dtype, json.loads(s))
        r = simulate(m, v, params, task)
        if not r.ok:
            continue
        launch = modelled_launch(m, v, params, task)
        out.append({"gpu": gpu, "module": name, "rung": tag, "params": params, "shape": json.loads(s), "meas_ms": t,
                    "sim_ms": r.time_ms, "ctas": blocks_per_sm(launch, task.gpu),
                    "bk_bytes": params.get("BK", 0) * ELT.get(name, 2)})
    return out


def table(rows: list, key) -> str:
    groups = {}
    for r in rows:
        groups.setdefault(key(r), []).append(math.log(r["sim_ms"] / r["meas_ms"]))
    return "\n".join(f"{str(k):60} rows {len(v):3}  sim/meas geomean {math.exp(statistics.mean(v)):.3f}  "
                     f"median {math.exp(statistics.median(v)):.3f}" for k, v in sorted(groups.items(), key=str))


def main(argv: list) -> int:
    modules, rungs = set(argv[0].split(",")), set(argv[1].split(","))
    rows = residuals(modules, rungs)
    if "--rows" in argv:
        for r in sorted(rows, key=lambda r: (r["module"], r["rung"], str(r["shape"]), str(r["params"]))):
            print(f"{r['gpu']} {r['module']} {r['rung']:18} {json.dumps(r['shape']):36} {json.dumps(r['params']):70} "
                  f"ctas {r['ctas']} meas {r['meas_ms'] * 1e3:8.1f} sim {r['sim_ms'] * 1e3:8.1f} "
                  f"s/m {r['sim_ms'] / r['meas_ms']:.2f}")
    print("by (module, rung, CTAs an SM)")
    print(table(rows, lambda r: (r["module"], r["rung"], r["ctas"])))
    print("by (module, rung, K-slice bytes)")
    print(table(rows, lambda r: (r["module"], r["rung"], r["bk_bytes"])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
