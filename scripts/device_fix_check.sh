#!/usr/bin/env bash
# One device call (S3-DEV, issues 15 + 17): gpu-check of a slim dataset, the tree_attention
# row_per_program diagnostic, then the KernelBench-style evaluation of kb/ (eager timing only), one
# after the other (the GPU used by one at a time; only the first CUDA extension build, CPU-only, runs
# beside the gpu-check). Results under $OUT. Layout (a carried copy): ROOT/scripts/{this, kb_eval.py,
# tree_attn_diag.py}, ROOT/kernelstrain/, ROOT/slim/episodes.jsonl, ROOT/kb/ (kb_eval --write-sample).
#   TOTAL: seconds the whole command may take (the KB budget is what is left of it)
#   DRY=1: no GPU (a CPU rehearsal): gpu-check --compile-only, kb_eval --dry, no diagnostic
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 OUT="${OUT:-/tmp/out}" TORCHINDUCTOR_COMPILE_THREADS=1
t0=$(date +%s); total=${TOTAL:-288}
mkdir -p "$OUT"
left() { echo $(( total - ($(date +%s) - t0) )); }
python3 -c 'import torch, triton, subprocess
print("torch", torch.__version__, "triton", triton.__version__, "| device",
      torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)",
      "| nvcc", subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.split()[-1])' > "$OUT/env.txt" 2>&1
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/env.txt" 2>&1
git_note="$(cat COMMIT 2>/dev/null)"; echo "code: $git_note" >> "$OUT/env.txt"
dry=(); compile_only=()
if [ "${DRY:-0}" = 1 ]; then dry=(--dry); compile_only=(--compile-only); fi
# the first CUDA extension build writes PyTorch's precompiled header (CPU only); the KB builds reuse it
export KS_USE_PCH=1 KS_WAIT_FOR=/tmp/ks_pch.ready
rm -f "$KS_WAIT_FOR"
first=$(python3 -c 'import json; print(next(s["file"] for s in json.load(open("kb/index.json"))["solutions"] if s["impl"] == "cuda"))')
(s=$(date +%s); timeout 150 python3 -c 'import importlib.util, sys
spec = importlib.util.spec_from_file_location("first", sys.argv[1]); m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m); m.build()' "kb/$first" > /tmp/first_build.log 2>&1
 echo "first build (kb/$first): rc $?, $(( $(date +%s) - s )) s" >> "$OUT/env.txt"; touch "$KS_WAIT_FOR") &
echo "gpu-check start: $(left) s left" >> "$OUT/env.txt"
timeout "${GC_TIMEOUT:-95}" python3 -m kernelstrain gpu-check slim --sample "${GC_SAMPLE:-150}" --jobs 14 \
    --build-dir /tmp/ks-cache --budget "${GC_BUDGET:-40}" "${compile_only[@]}" --report "$OUT/gpu_check.json" \
    > "$OUT/gpu_check.txt" 2>&1
echo "gpu-check rc=$?" >> "$OUT/gpu_check.txt"
if [ "${DRY:-0}" != 1 ]; then
    timeout 55 python3 scripts/tree_attn_diag.py --out "$OUT/tree_diag.jsonl" > "$OUT/tree_diag.log" 2>&1
    echo "tree diag rc=$?" >> "$OUT/tree_diag.log"
fi
kb_left=$(left); echo "kb_eval start: $kb_left s left" >> "$OUT/env.txt"
timeout $(( kb_left - 3 )) python3 scripts/kb_eval.py kb --sample ok=100,wrong_result=50 --gpu H100 --jobs 12 \
    --perf-trials 10 --compile-problems 0 --budget $(( kb_left - 75 )) --case-timeout 60 "${dry[@]}" \
    --out "$OUT/kb_eval.jsonl" > "$OUT/kb_eval.log" 2>&1
echo "kb_eval rc=$?, end: $(left) s left" >> "$OUT/env.txt"
wait
tail -n 25 "$OUT/gpu_check.txt"; tail -n 14 "$OUT/kb_eval.log"; cat "$OUT/env.txt"
