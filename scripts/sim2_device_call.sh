#!/usr/bin/env bash
# sim2's one device call (issue 30, decode attention): the decode1b plan of scripts/sim2_decode_check.py (held-out
# checks of this session's launch-model fixes and the room values), then gpu-check of the fresh seeds prepared by
# `scripts/gpu_check_final.py prepare data/gc_sim2 ... --modules <sim2's five>` on the frozen model, then the figures.
#   bash scripts/sim2_device_call.sh data/gc_sim2 [RUN_S] [BUDGET_S]
# Writes $OUT/sim2_call.tgz (decode/summary.txt, decode/knob_device.json, <profile>.json / .txt, figures.txt,
# env.txt, FROZEN.txt) and $OUT/summary.txt, $OUT/figures.txt (copies, readable without unpacking).
set -uo pipefail
dir=${1:?prepared folder}; run=${2:-22}; budget=${3:-28}
out=${OUT:-/tmp/sim2_call_out}; work=/tmp/sim2_call; rm -rf "$work"; mkdir -p "$work/decode" "$out"
cp "$dir/FROZEN.txt" "$work/"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv; } > "$work/env.txt" 2>&1
s=$(date +%s)
OUT="$work/decode" ROOM_PLAN=decode1b KNOBA_RUN_S="$run" timeout -k 5 $((run + 28)) python3 scripts/sim2_decode_check.py \
    > "$work/decode/log.txt" 2>&1
echo "decode1b rc=$? after $(( $(date +%s) - s )) s" >> "$work/env.txt"
for f in "$dir"/*/*.gz; do gunzip -kf "$f"; done
reports=()
while read -r profile sample; do
    s=$(date +%s)
    timeout -k 5 $((budget + 22)) python3 -m kernelstrain gpu-check "$dir/$profile" --sample "$sample" --jobs 16 \
        --build-dir /tmp/ks-cache --budget "$budget" --quiet --report "$work/$profile.json" > "$work/$profile.txt" 2>&1
    echo "$profile: gpu-check --sample $sample rc=$? after $(( $(date +%s) - s )) s" >> "$work/env.txt"
    [ -f "$work/$profile.json" ] && reports+=("$work/$profile.json")
done < "$dir/samples.txt"
[ ${#reports[@]} -gt 0 ] && python3 scripts/gpu_check_final.py figures "${reports[@]}" > "$work/figures.txt" 2>&1
date -u >> "$work/env.txt"
cp "$work/decode/summary.txt" "$out/summary.txt" 2>/dev/null; cp "$work/figures.txt" "$out/figures.txt" 2>/dev/null
tar -czf "$out/sim2_call.tgz" -C "$work" .
ls -la "$out"
