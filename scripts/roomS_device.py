"""roomS's device call: the rung order of the modules with a negative fresh-seed Spearman, and the value probes past
their lists' ends (room_device_check.ORDER_*), CUDA then Triton, each into a folder of $OUT, with each group's device
and simulator orders and their Spearman correlation.

    python3 scripts/roomS_device.py                      # on a CUDA machine: $OUT/cuda/*, $OUT/triton/* (6 files)
    KNOBA_REHEARSE=3 python3 scripts/roomS_device.py     # no GPU: 3 cases of each through every path but the GPU's
    ROOMS_CUDA_S=60 ROOMS_TRITON_S=50 ...                # the run passes' budgets (build time comes on top)

Exit 1 if either harness found a problem (a value that fails, a bug that passes).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def spearman(a: list, b: list) -> float:
    """Spearman's rho of two orderings of the same labels (no ties)."""
    n = len(a)
    if n < 2:
        return 1.0
    rank = {x: i for i, x in enumerate(b)}
    return 1 - 6 * sum((i - rank[x]) ** 2 for i, x in enumerate(a)) / (n * (n * n - 1))


def rhos(folder: Path) -> str:
    """Per (module, shape) over every ok timed row: Spearman of the device's and the simulator's times."""
    rows = json.loads((folder / "knob_device.json").read_text())["rows"]
    groups = {}
    for r in rows:
        if r["bug"] is None and r.get("ok") and r.get("time_ms") and r.get("sim_ms"):
            groups.setdefault((r["module"], json.dumps(r["shape"])), []).append(r)
    lines = []
    for (module, shape), rs in sorted(groups.items()):
        dev = [r["id"] for r in sorted(rs, key=lambda r: r["time_ms"])]
        sim = [r["id"] for r in sorted(rs, key=lambda r: r["sim_ms"])]
        lines.append(f"rho {spearman(dev, sim):+.3f}  n={len(rs):2d}  {module} {shape}")
    return "\n".join(lines) + "\n"


def main() -> int:
    out = Path(os.environ.get("OUT", "/tmp/roomS_device_out"))
    rc = 0
    for impl, script, env in (("cuda", "room_device_check.py", {"ROOM_PLAN": "order", "KNOBA_RUN_S": os.environ.get("ROOMS_CUDA_S", "60")}),
                              ("triton", "room_device_check_triton.py", {"KNOBT_SET": "order", "KNOBA_RUN_S": os.environ.get("ROOMS_TRITON_S", "50")})):
        folder = out / impl
        folder.mkdir(parents=True, exist_ok=True)
        rc |= subprocess.run([sys.executable, str(HERE / script)], env={**os.environ, **env, "OUT": str(folder)}).returncode
        if (folder / "knob_device.json").exists():
            from room_device_check_triton import ranking
            text = rhos(folder) + "\n" + ranking(folder, across=True) + "\n" + ranking(folder)
            (folder / "ranking.txt").write_text(text)
            print(text)
    return 1 if rc else 0


if __name__ == "__main__":
    sys.exit(main())
