#!/usr/bin/env bash
# On an H100 or H200 (the `run` tool, repository root, carry ["data/gc_final"]; gpu-check simulates the card it finds
# and refuses others): gpu-check of both profiles' fresh seeds
# prepared by `python3 scripts/gpu_check_final.py prepare DIR --seed S`, then the done-when figures side by side.
#   bash scripts/gpu_check_final.sh DIR [BUDGET_S]     BUDGET_S: gpu-check's --budget per profile (default 100)
# Writes $OUT/env.txt, $OUT/<profile>.json (gpu-check --report), $OUT/<profile>.txt (its printed report),
# $OUT/figures.txt and $OUT/figures.md (scripts/gpu_check_final.py figures), $OUT/FROZEN.txt (what was frozen).
set -uo pipefail
dir=${1:?prepared folder}; budget=${2:-100}
out=${OUT:-/tmp/gc_final_out}; mkdir -p "$out"
cp "$dir/FROZEN.txt" "$out/"
for f in "$dir"/*/*.gz; do gunzip -kf "$f"; done        # prepare packs the rows (the carry's 64 MiB)
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  nvcc --version | tail -2; nproc; } > "$out/env.txt" 2>&1
reports=()
while read -r profile sample; do
    s=$(date +%s)
    # exit 1 = a label the hardware contradicts: the report is written all the same
    python3 -m kernelstrain gpu-check "$dir/$profile" --sample "$sample" --jobs 16 --build-dir /tmp/ks-cache \
        --budget "$budget" --quiet --report "$out/$profile.json" > "$out/$profile.txt" 2>&1
    echo "$profile: gpu-check --sample $sample rc=$? after $(( $(date +%s) - s )) s" >> "$out/env.txt"
    [ -f "$out/$profile.json" ] && reports+=("$out/$profile.json")
done < "$dir/samples.txt"
date -u >> "$out/env.txt"
python3 scripts/gpu_check_final.py figures "${reports[@]}" --markdown "$out/figures.md" | tee "$out/figures.txt"
