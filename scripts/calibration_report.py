"""The simulator against H200 measurements: library anchors, our own kernels, held-out checks.

    python scripts/calibration_report.py [--anchors ../shared/anchors/h200_measured.json]

1. Library anchors: scripts/anchor_table.py's table (the simulator's best reachable time on the H200
   over every module of the op, beside the best-of-libraries time under the anchors' per-call floor).
2. Own kernels: the fit's figures (kernelstrain/calibration/h200_fit.json: before calibration,
   out of sample by episode, in sample) and the in-sample figures of the simulator as it is now.
3. The `gpu-check` runs: seeds 9191, 5151, 6262, 3131, 1717 and 8484 (h200_gpucheck_s9191.json ... s8484.json,
   fitted on since), the shape and parameter grids (h200_gpucheck_grid5.json, h200_gpucheck_pgrid.json, fitted on)
   and seed 6868 (h200_gpucheck_s6868.json: held out, never fitted on), each as at the run and re-simulated now.
4. PyTorch reference times: reference_ms on each catalog GPU over the H200's, geometric mean
   over every module x menu shape (the catalog's bandwidth and peaks do the scaling).
"""
import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GPU_CHECKS = ("h200_gpucheck_s9191.json", "h200_gpucheck_s5151.json", "h200_gpucheck_s6262.json",
              "h200_gpucheck_s3131.json", "h200_gpucheck_grid5.json", "h200_gpucheck_s1717.json",
              "h200_gpucheck_s8484.json", "h200_gpucheck_pgrid.json", "h200_gpucheck_s6868.json")

from kernelstrain.calibration import read_data  # noqa: E402
from kernelstrain.references import reference_ms  # noqa: E402
from kernelstrain.calibration.fit import FIT_FILES, read_measurement  # noqa: E402
from kernelstrain.calibration.metrics import agreement, geomean  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task  # noqa: E402

def main():
    from anchor_table import ANCHORS, anchor_rows, table      # scripts/anchor_table.py, beside this script
    ap = argparse.ArgumentParser()
    ap.add_argument("--anchors", default=str(ANCHORS))
    a = ap.parse_args()
    print("== 1. library anchors (best reachable simulated time vs best-of-libraries) ==")
    print(table(anchor_rows(json.loads(Path(a.anchors).read_text())["rows"])))
    print("\n== 2. own kernels (h200_kernels.json) ==")
    own_kernels()
    for name in GPU_CHECKS:
        fitted = "fitted on" if name in FIT_FILES else "held out"
        print(f"\n== 3. gpu-check ({name}, {fitted}) ==")
        try:
            held_out_check(name)
        except FileNotFoundError:
            print("  not shipped")
    print("\n== 4. PyTorch reference times: reference_ms on each GPU / on the H200 ==")
    reference_scaling()


def _line(name: str, fig: dict) -> str:
    keys = ("n", "geomean", "within_0.8_1.25", "within_0.5_2", "spearman_mean", "pair_agreement", "groups_nonpositive")
    return f"  {name:24} " + " ".join(f"{k}={fig[k]:.3f}" if isinstance(fig[k], float) else f"{k}={fig[k]}"
                                     for k in keys if k in fig)


def _sim_now(r: dict) -> float | None:
    m = REGISTRY[r["module"]]
    s = simulate(m, m.variant(r["variant"]), r["params"], make_task(m, "H200", r["dtype"], r["shape"]))
    return s.time_ms if s.ok else None


def own_kernels():
    fitted = read_data("h200_fit.json")
    for name, fig in fitted["figures"].items():
        print(_line(name + " (at fit)", fig))
    rows = [dict(k, sim_ms=_sim_now(k)) for k in read_measurement("h200_kernels.json")["kernels"]
            if k.get("matched") and k.get("measured_ms")]
    fig = agreement([r for r in rows if r["sim_ms"]])
    print(_line("simulator now", fig))
    worst = sorted(fig["module_spearman"].items(), key=lambda kv: kv[1])[:6]
    print("  lowest pooled module Spearman: " + ", ".join(f"{m} {v:.2f}" for m, v in worst))


def held_out_check(name: str):
    data = read_measurement(name)
    rows = [dict(r, measured_ms=r["time_ms"]) for r in data["rows"] if r["label"] == "ok" and r["ok"] and r["time_ms"]]
    print(_line("at the run", agreement([r for r in rows if r["sim_ms"]])))
    now = agreement([dict(r, sim_ms=s) for r in rows if (s := _sim_now(r))])
    print(_line("simulator now", now))
    repeat = agreement([dict(r, sim_ms=r["time_ms_2"]) for r in rows if r.get("time_ms_2")])
    print(_line("repeat ceiling", repeat))
    negative = [m for m, v in now["module_spearman"].items() if v < 0]
    print(f"  modules with a negative pooled Spearman now: {', '.join(negative) or 'none'}")


def reference_scaling():
    for gpu in GPUS.values():
        ratios = {"eager": [], "compiled": []}
        for m in REGISTRY.values():
            dtype = next((d for d in m.dtypes if m.supports(gpu, d)), None)
            if dtype is None or dtype != m.dtypes[0]:
                continue
            for shape in m.shapes:
                for mode, rs in ratios.items():
                    here, h200 = (reference_ms(m, make_task(m, g, dtype, shape), mode) for g in (gpu.name, "H200"))
                    if here and h200:
                        rs.append(here / h200)
        print(f"  {gpu.name:9} eager x{geomean(ratios['eager']):.2f} ({len(ratios['eager'])} rows), "
              f"compiled x{geomean(ratios['compiled']):.2f}; bandwidth ratio H200/{gpu.name} "
              f"{GPUS['H200'].bw_tbs / gpu.bw_tbs:.2f}")


if __name__ == "__main__":
    main()
