#!/usr/bin/env bash
# sim2's device call of the fourth session (issue 30, decode attention): scripts/sim2_decode_check.py ROOM_PLAN=decode3
# (mla split_kv BLOCK_N 128 / 3 stages timed; the paged-decode rows of seeds 98181 / 98282 on full-length and ragged
# contexts, scripts/sim2_lens.py).   bash scripts/sim2_device_call2.sh [RUN_S] [PLAN: decode3 | decode4, the follow-up]
# Writes $OUT/sim2_<PLAN>.tgz (decode/summary.txt, decode/knob_device.json, decode/log.txt, env.txt) and
# $OUT/summary.txt (a copy, readable without unpacking).
set -uo pipefail
run=${1:-90}; plan=${2:-decode3}
out=${OUT:-/tmp/sim2_call2_out}; work=/tmp/sim2_call2; rm -rf "$work"; mkdir -p "$work/decode" "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$work/env.txt" 2>&1
s=$(date +%s)
OUT="$work/decode" ROOM_PLAN="$plan" KNOBA_RUN_S="$run" SIM2_SITE="$work/site" timeout -k 5 $((run + 40)) \
    python3 scripts/sim2_decode_check.py > "$work/decode/log.txt" 2>&1
echo "$plan rc=$? after $(( $(date +%s) - s )) s" >> "$work/env.txt"
date -u >> "$work/env.txt"
cp "$work/decode/summary.txt" "$out/summary.txt" 2>/dev/null
tar -czf "$out/sim2_$plan.tgz" -C "$work" --exclude=site .
ls -la "$out"
