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
    ratios = []
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
        flag = "" if 0.67 <= ratio <= 1.5 else "  <-- outside 0.67-1.5"
        print(f"{row['op']:12} {str(row['shape']):22} {row['dtype']:6} {row['best_ms']:>12.4f} {best[0]:>12.4f} "
              f"{ratio:>7.2f}  {best[1]}{flag}")
    if ratios:
        gm = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        inside = sum(0.67 <= r <= 1.5 for r in ratios)
        print(f"\n{len(ratios)} rows; geometric mean ratio {gm:.3f}; {inside}/{len(ratios)} within 0.67-1.5")


if __name__ == "__main__":
    main()
