"""Simulated best reachable time vs. measured H200 times, per anchor row.

    python scripts/calibration_report.py [--anchors ../shared/anchors/h200_measured.json] [--min-us 20]

For every measured row of an op KernelStrain implements (rows >= 20 us by default; below
that launch and framework overhead dominate), prints the simulator's best reachable time
on the H200 over every module of that op (all variants and parameters, noise-free), the
measured best-of-libraries time, their ratio, and the geometric mean of the ratios.
"""
import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.ops import REGISTRY  # noqa: E402
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
    ap.add_argument("--anchors", default=str(ROOT.parent / "shared" / "anchors" / "h200_measured.json"))
    ap.add_argument("--min-us", type=float, default=20.0)
    a = ap.parse_args()
    rows = json.loads(Path(a.anchors).read_text())["rows"]
    ratios, tuned = [], []
    print(f"{'op':12} {'shape':22} {'dtype':6} {'measured_ms':>12} {'sim_best_ms':>12} {'ratio':>7}  best candidate")
    for row in rows:
        if row["best_ms"] * 1000 < a.min_us:
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
