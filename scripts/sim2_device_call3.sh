#!/usr/bin/env bash
# sim2's device call of the sixth session (issue 30, decode attention): scripts/sim2_decode_check.py ROOM_PLAN=decode8
# (held out: paged_decode_cuda's split rungs at one sequence, register_prefetch's bf16 / fp16 twins, issue 26's room),
# then the ptxas figures of the device's Triton for register_prefetch BLOCK_N 64 / 128 on 2 / 4 warps in fp16 and
# bf16 (scripts/sim2_ptxas_regs.py).   bash scripts/sim2_device_call3.sh [RUN_S]
# Writes $OUT/sim2_decode8.tgz (decode/summary.txt, decode/knob_device.json, decode/log.txt, ptxas.jsonl, env.txt)
# and $OUT/summary.txt, $OUT/ptxas.jsonl (copies, readable without unpacking).
set -uo pipefail
run=${1:-55}
out=${OUT:-/tmp/sim2_call3_out}; work=/tmp/sim2_call3; rm -rf "$work"; mkdir -p "$work/decode" "$out"
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv
  python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"; } > "$work/env.txt" 2>&1
s=$(date +%s)
OUT="$work/decode" ROOM_PLAN=decode8 KNOBA_RUN_S="$run" SIM2_SITE="$work/site" timeout -k 5 $((run + 45)) \
    python3 scripts/sim2_decode_check.py > "$work/decode/log.txt" 2>&1
echo "decode8 rc=$? after $(( $(date +%s) - s )) s" >> "$work/env.txt"
s=$(date +%s)
timeout -k 5 30 python3 scripts/sim2_ptxas_regs.py flash_decode_triton register_prefetch \
    --grid 'BLOCK_N=64,128;num_warps=2,4' --dtypes fp16,bf16 > "$work/ptxas.jsonl" 2> "$work/ptxas.log"
echo "ptxas rc=$? after $(( $(date +%s) - s )) s" >> "$work/env.txt"
date -u >> "$work/env.txt"
cp "$work/decode/summary.txt" "$out/summary.txt" 2>/dev/null; cp "$work/ptxas.jsonl" "$out/ptxas.jsonl" 2>/dev/null
tar -czf "$out/sim2_decode8.tgz" -C "$work" --exclude=site .
ls -la "$out"
