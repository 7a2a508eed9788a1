"""Write a stratified sample of agent workspaces for a device check (scripts/check_workdirs.py):
N single-op workdirs of a dataset's episodes on the given GPUs, round-robin over modules (one
episode per module first), alternating the baseline and the episode's best candidate, plus
one workdir per fused task of a fused-task directory.

    python3 scripts/sample_workdirs.py DATA --out ROOT [--count 50] [--gpu H100,H200] [--fused DIR] [--fused-count 10]
        [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kernelstrain.fused.dataset import CANDIDATES, TASKS  # noqa: E402
from kernelstrain.dataset import episode_source  # noqa: E402
from kernelstrain.workdir import build_workdir  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data")
    ap.add_argument("--out", required=True)
    ap.add_argument("--count", type=int, default=50)
    ap.add_argument("--gpu", default="H100,H200")
    ap.add_argument("--fused")
    ap.add_argument("--fused-count", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    data, out, gpus = Path(a.data), Path(a.out), set(a.gpu.split(","))
    path, _, _ = episode_source(data)
    by_module = defaultdict(list)
    for line in path.open():
        row = json.loads(line)
        if row["gpu"] in gpus:
            by_module[row["module"]].append(row)
    rng = random.Random(a.seed)
    for rows in by_module.values():
        rng.shuffle(rows)
    order = sorted(by_module)
    picks = [by_module[m][i] for i in range(max(map(len, by_module.values()))) for m in order if i < len(by_module[m])]
    for n, row in enumerate(picks[:a.count]):
        step = 0 if n % 2 == 0 else row["best"]["step"]
        build_workdir(data, row["task_id"], out / f"w{n:02d}_{row['module']}_s{step}", step=step, episode=row["id"])
    fused = []
    if a.fused:
        src = Path(a.fused) / TASKS if (Path(a.fused) / TASKS).exists() else Path(a.fused) / CANDIDATES
        fused = [json.loads(line)["id"] for line in src.open()][:a.fused_count]
        for n, tid in enumerate(fused):
            build_workdir(Path(a.fused), tid, out / f"f{n:02d}_{tid}")
    print(f"wrote {min(a.count, len(picks))} single-op workdirs ({len(order)} modules) and {len(fused)} fused "
          f"to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
