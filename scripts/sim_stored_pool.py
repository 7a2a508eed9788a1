"""Per module, the stored device rows (every measurements/*.json but the held-out gpu-check seeds) re-simulated by
this checkout: pair order (pairs > 3% apart), the groups' mean Spearman, sim/measured geomean and the share within
0.8-1.25x -- the "stored rows" figures of docs/sim_issue30_s8.md (scripts/simS_pool.py's pooling and groups).

    python3 scripts/sim_stored_pool.py layernorm_triton prefix_scan_cuda [--held-out s61717 s62828 ...]
"""
import glob
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import simS_pool  # noqa: E402

HELD_OUT = ("s61717", "s62828")


def main(argv: list) -> int:
    held = HELD_OUT
    if "--held-out" in argv:
        i = argv.index("--held-out")
        argv, held = argv[:i], tuple(argv[i + 1:])
    paths = [p for p in sorted(glob.glob(str(ROOT / "measurements" / "*.json"))) if not any(h in p for h in held)]
    rows, _ = simS_pool.load(paths, set(argv))
    per = simS_pool.score(simS_pool.groups(rows), "sim_now", 0.03)
    for module in sorted(per):
        logs = [math.log(r["sim_now"] / r["time_ms"]) for r in rows if r["module"] == module]
        within = sum(math.log(0.8) <= x <= math.log(1.25) for x in logs) / len(logs)
        m = per[module]
        rho = sum(m["rho"]) / len(m["rho"]) if m["rho"] else float("nan")
        print(f"{module:26} rows {len(logs):4d} pairs {m['pairs']:4d} order {m['good'] / max(1, m['pairs']):.3f} "
              f"rho {rho:+.3f} ({len(m['rho'])}g) gm {math.exp(sum(logs) / len(logs)):.3f} within {within:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
