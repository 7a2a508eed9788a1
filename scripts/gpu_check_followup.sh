#!/usr/bin/env bash
# On an H100 or H200 (the `run` tool, repository root): the sim session's follow-up device check in one call.
#   bash scripts/gpu_check_followup.sh DIR [UNROLL_S] [BUDGET_S]
# 1. scripts/gpu_check_unroll.py (ROOM_PLAN: its plan, default unroll): the rows the model's fixes change (Triton loop_unroll at few rows, layernorm_cuda's
#    words at 1,024 threads, gemv_cuda at one and eight rows of x), each checked and timed beside the simulator
#    (UNROLL_S: its run pass's budget, default 40 s);
# 2. scripts/gpu_check_final.sh DIR BUDGET_S: gpu-check of a fresh seed prepared by `scripts/gpu_check_final.py prepare`
#    on the fixed model (default 55 s of passes).
# Writes $OUT/unroll_summary.txt, $OUT/figures.txt (the two reports' heads) and $OUT/followup.tgz (everything).
set -uo pipefail
dir=${1:?prepared folder}; unroll_s=${2:-40}; budget=${3:-55}
out=${OUT:-/tmp/gc_followup}; mkdir -p "$out/unroll" "$out/check"
s=$(date +%s)
OUT="$out/unroll" KNOBA_RUN_S="$unroll_s" ROOM_PLAN="${ROOM_PLAN:-unroll}" timeout -k 5 $(( unroll_s + 50 )) python3 scripts/gpu_check_unroll.py \
    > "$out/unroll/log.txt" 2>&1
echo "gpu_check_unroll rc=$? after $(( $(date +%s) - s )) s" >> "$out/unroll/log.txt"
OUT="$out/check" bash scripts/gpu_check_final.sh "$dir" "$budget" > "$out/check/log.txt" 2>&1
cp "$out/unroll/summary.txt" "$out/unroll_summary.txt" 2>/dev/null
cp "$out/check/figures.txt" "$out/figures.txt" 2>/dev/null
tar -czf "$out/followup.tgz" -C "$out" unroll check && rm -rf "$out/unroll" "$out/check"
ls -la "$out"
