"""The simulator against H200 measurements: library anchors, our own kernels, held-out checks.

    python scripts/calibration_report.py [--anchors ../shared/anchors/h200_measured.json] [--min-us 20]

1. Library anchors: for every measured row of an op KernelStrain implements (rows >= 20 us by
   default; below that launch and framework overhead dominate), the simulator's best reachable
   time on the H200 over every module of that op (all variants and parameters, noise-free), the
   measured best-of-libraries time, their ratio, and the geometric mean of the ratios.
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
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
GPU_CHECKS = ("h200_gpucheck_s9191.json", "h200_gpucheck_s5151.json", "h200_gpucheck_s6262.json",
              "h200_gpucheck_s3131.json", "h200_gpucheck_grid5.json", "h200_gpucheck_s1717.json",
              "h200_gpucheck_s8484.json", "h200_gpucheck_pgrid.json", "h200_gpucheck_s6868.json")

from kernelstrain.calibration import read_data  # noqa: E402
from kernelstrain.references import reference_ms  # noqa: E402
from kernelstrain.calibration.fit import FIT_FILES  # noqa: E402
from kernelstrain.calibration.metrics import agreement, geomean  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import best_config, make_task  # noqa: E402

DTYPES = {"fp16": "fp16", "bf16": "bf16", "fp32": "fp32", "fp8": "fp8", "int8": "int8"}

# Rows whose measured implementation is far from what the hardware can do, so the ratio
# measures PyTorch, not the simulator. They are printed but kept out of the second mean.
REFERENCE_LIMITED = {
    ("gemm", "int8"): "torch._int_mm reaches ~126 TOPS at 4096^3, ~6% of the 1979 TOPS int8 peak",
    ("transpose", "fp16"): "eager .t().contiguous() is a strided copy at ~0.6 TB/s; our tiled TMA "
                           "transpose measured 0.079 ms at 8192^2 on the same H200 model",
}


def shapes_for(op: str, shape: list) -> list:
    """(module, shape dict) candidates for an anchor row."""
    if op == "gemm":
        m, n, k = shape
        if m == 1:
            return [("gemv_cuda", {"M": 1, "N": n, "K": k})]
        return [(name, {"M": m, "N": n, "K": k}) for name in
                ("gemm_fp16_cuda", "gemm_fp16_triton", "gemm_fp8_cuda", "gemm_int8_cuda")]
    if op in ("rmsnorm", "layernorm"):
        t, d = shape
        return [(f"{op}_cuda", {"T": t, "D": d}), (f"{op}_triton", {"T": t, "D": d})]
    if op == "softmax":
        r, c = shape
        return [("softmax_cuda", {"R": r, "C": c}), ("softmax_triton", {"R": r, "C": c})]
    if op == "transpose":
        r, c = shape
        return [("transpose_cuda", {"R": r, "C": c})]
    if op == "decode_attn":
        b, h, s, d = shape
        return [("flash_decode_triton", {"B": b, "H": h, "S": s, "D": d})]
    return []


def main():
    ap = argparse.ArgumentParser()
    shared = ROOT.parent / "shared"
    if not shared.is_dir():          # a worktree under /work/wt/: the shared folder sits beside /work/main
        shared = ROOT.parents[1] / "shared"
    ap.add_argument("--anchors", default=str(shared / "anchors" / "h200_measured.json"))
    ap.add_argument("--min-us", type=float, default=20.0)
    a = ap.parse_args()
    print("== 1. library anchors (best reachable simulated time vs best-of-libraries) ==")
    library_anchors(json.loads(Path(a.anchors).read_text())["rows"], a.min_us)
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
    rows = [dict(k, sim_ms=_sim_now(k)) for k in read_data("h200_kernels.json")["kernels"]
            if k.get("matched") and k.get("measured_ms")]
    fig = agreement([r for r in rows if r["sim_ms"]])
    print(_line("simulator now", fig))
    worst = sorted(fig["module_spearman"].items(), key=lambda kv: kv[1])[:6]
    print("  lowest pooled module Spearman: " + ", ".join(f"{m} {v:.2f}" for m, v in worst))


def held_out_check(name: str):
    data = read_data(name)
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


def library_anchors(rows: list, min_us: float):
    ratios, tuned = [], []
    print(f"{'op':12} {'shape':22} {'dtype':6} {'measured_ms':>12} {'sim_best_ms':>12} {'ratio':>7}  best candidate")
    for row in rows:
        if row["best_ms"] * 1000 < min_us:
            continue
        best = None
        for name, shape in shapes_for(row["op"], row["shape"]):
            m = REGISTRY.get(name)
            dtype = DTYPES.get(row["dtype"])
            if m is None or dtype not in m.dtypes:
                continue
            try:
                task = make_task(m, "H200", dtype, shape)
            except ValueError:
                continue
            if not m.supports(task.gpu, dtype):
                continue
            t, v, p = best_config(m, task)
            if best is None or t < best[0]:
                best = (t, f"{name}:{v.tag} {p}")
        if best is None:
            continue
        ratio = best[0] / row["best_ms"]
        ratios.append(ratio)
        limited = REFERENCE_LIMITED.get((row["op"], row["dtype"]))
        if not limited:
            tuned.append(ratio)
        flag = "" if 0.67 <= ratio <= 1.5 else ("  (reference-limited)" if limited else "  <-- outside 0.67-1.5")
        print(f"{row['op']:12} {str(row['shape']):22} {row['dtype']:6} {row['best_ms']:>12.4f} {best[0]:>12.4f} "
              f"{ratio:>7.2f}  {best[1]}{flag}")
    for name, rs in (("all rows", ratios), ("rows measured with a tuned library", tuned)):
        if rs:
            gm = math.exp(sum(math.log(r) for r in rs) / len(rs))
            inside = sum(0.67 <= r <= 1.5 for r in rs)
            print(f"{name}: {len(rs)}; geometric mean ratio {gm:.3f}; {inside}/{len(rs)} within 0.67-1.5")
    print("reference-limited rows:")
    for (op, dtype), why in REFERENCE_LIMITED.items():
        print(f"  {op} {dtype}: {why}")


if __name__ == "__main__":
    main()
