#!/usr/bin/env bash
# On the H200 (the `run` tool, repository root): gpu-check of the unfitted modules' parameter grid, in two
# commands on one warm machine (each under the tool's 600 s; the build cache under /tmp stays between them):
#   bash scripts/h200_unfitted.sh GRID STEPS build    # nvcc of every CUDA source, 16 jobs (~200 s)
#   bash scripts/h200_unfitted.sh GRID STEPS run      # correctness, timing, repeat (~250 s at 862 cases)
# GRID and STEPS come from `python3 scripts/h200_unfitted.py prepare GRID`; GRID must travel with the
# worktree: prepare it under data/ (ignored by git) and name it in the tool's `carry`.
# run writes $OUT/kigrid.json (gpu-check --report), $OUT/kigrid.txt (the printed report), $OUT/env.txt.
set -euo pipefail
grid=${1:?grid folder}; steps=${2:?steps}; stage=${3:?build or run}
out=${OUT:-/tmp/kigrid_out}; mkdir -p "$out"
common=(--sample "$steps" --jobs 16 --build-dir /tmp/ks-cache)
if [ "$stage" = build ]; then
    python3 -m kernelstrain gpu-check "$grid" "${common[@]}" --compile-only 2>&1 | tail -5
    exit "${PIPESTATUS[0]}"
fi
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  nvcc --version | tail -2; nproc; } > "$out/env.txt" 2>&1
python3 -m kernelstrain gpu-check "$grid" "${common[@]}" --budget 420 --report "$out/kigrid.json" 2>&1 | tee "$out/kigrid.txt"
echo "gpu-check rc=${PIPESTATUS[0]}; $(date -u)" >> "$out/env.txt"
