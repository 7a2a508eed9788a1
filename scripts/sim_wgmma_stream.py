"""grouped_gemm_cuda wgmma_pipeline's stored rows (every measurements/*.json, held-out seeds marked): the rate at which
the busiest SM pulled its blocks' real operand bytes (the expert's x rows, zero-filled rows not counted, and the w
tile, every trip), and the model's time beside the measured one -- the figures behind
grouped_gemm_cuda.WGMMA_STREAM_BPS_SM.

    python3 scripts/sim_wgmma_stream.py [--held-out s61717 s62828 s91331 s92442]
"""
import glob
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]

import simS_pool  # noqa: E402
from kernelstrain.gpucheck import make_task  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.ops.base import DTYPE_BYTES, cdiv  # noqa: E402
from kernelstrain.ops.moe.grouped_gemm_cuda import tiling, traffic_of  # noqa: E402

HELD_OUT = ("s61717", "s62828", "s91331", "s92442")


def stream_rate(r: dict) -> float:
    """Real operand bytes the busiest SM pulled a second (GB/s) in one measured row."""
    m = REGISTRY["grouped_gemm_cuda"]
    task = make_task(m, r["gpu"], r["dtype"], r["shape"])
    p = {**m.variant("wgmma_pipeline").defaults(), **r["params"]}
    bm, bk = p.get("BM", 64), p["BK"]
    rows, active, per_expert, *_ = traffic_of(task)
    tiles = tiling(p, task, bm)[0]
    real_rows = rows / (active * cdiv(math.ceil(per_expert), bm))
    sm_bytes = cdiv(tiles, task.gpu.sms) * task["K"] / bk * (real_rows + p["BN"]) * bk * DTYPE_BYTES[r["dtype"]]
    return sm_bytes / r["time_ms"] * 1e3 / 1e9


def main(argv: list) -> int:
    held = tuple(argv[argv.index("--held-out") + 1:]) if "--held-out" in argv else HELD_OUT
    rows, _ = simS_pool.load(sorted(glob.glob(str(ROOT / "measurements" / "*.json"))), {"grouped_gemm_cuda"})
    rows = [r for r in rows if r["variant"] == "wgmma_pipeline"]
    defaults = REGISTRY["grouped_gemm_cuda"].variant("wgmma_pipeline").defaults()
    for r in sorted(rows, key=stream_rate):
        p = {**defaults, **r["params"]}
        tag = "held-out" if any(h in r["file"] for h in held) else ""
        print(f"{r['file'][:24]:24} {r['gpu']} T={r['shape']['T']:<5} E={r['shape']['E']:<3} BM {p.get('BM', 64):<3} "
              f"BN {p['BN']:<3} BK {p['BK']:<3} st {p['STAGES']}  {r['time_ms'] * 1e3:8.1f} us  sim/meas "
              f"{r['sim_now'] / r['time_ms']:.2f}  {stream_rate(r):5.1f} GB/s an SM {tag}")
    kept = [r for r in rows if not any(h in r["file"] for h in held)]
    logs = [math.log(r["sim_now"] / r["time_ms"]) for r in kept]
    rates = [math.log(stream_rate(r)) for r in kept]
    print(f"{len(kept)} rows outside the held-out seeds: stream rate geomean {math.exp(sum(rates) / len(rates)):.1f} "
          f"GB/s an SM, sim/measured geomean {math.exp(sum(logs) / len(logs)):.3f}, "
          f"within 0.8-1.25x {sum(abs(x) <= math.log(1.25) for x in logs) / len(logs):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
