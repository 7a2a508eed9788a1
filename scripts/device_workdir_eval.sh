#!/usr/bin/env bash
# One device call for issue 15: build + verify + profile every workspace under wd/ (their own
# scripts) and the KernelBench-style evaluation of the solutions under kb/, side by side. At most
# KS_GPU_SLOTS processes hold GPU memory at once; timing takes the GPU alone (KS_GPU_LOCK).
# Results under $OUT.
#   layout (a carried copy): ROOT/scripts/{this, check_workdirs.py, kb_eval.py},
#   ROOT/kernelstrain/ (the package: templates, and workdir.dry for DRY=1), ROOT/wd/
#   (scripts/sample_workdirs.py output), ROOT/kb/ (a sample of an export: kb_eval.py --write-sample)
#   DRY=1: no GPU (a CPU machine's rehearsal): build.py --dry, ModelNew's calls, nvcc without linking
#   SKIP=FILE: kb_eval rows of an earlier call, not run again; WD_ONLY=a,b: only these workdirs;
#   KB_ARGS: more kb_eval options (e.g. --eager-in-solution --compile-problems 12: eager timed in each
#   solution's process, torch.compile for 12 problems on a pool of its own); WD_ARGS: more
#   check_workdirs options (e.g. --compile-count 20)
set -u
cd "$(dirname "$0")/.."
# 8 slots, each allowed 30% of the GPU's memory (most cases need a few GB; kb_eval re-runs the ones
# that ran out of their share): seed 2727's call with 3 slots (0.95 / 3 each) spent its 325 s
# budget with the slots full of torch.compile and Triton JIT (CPU work inside a slot) and ran 27
# of 250 solutions and 15 of 60 workspaces
export PYTHONUNBUFFERED=1 KS_GPU_LOCK=/tmp/ks_gpu.lock KS_GPU_SLOTS="${KS_GPU_SLOTS:-8}" OUT="${OUT:-/tmp/out}"
export KS_GPU_MEM_FRACTION="${KS_GPU_MEM_FRACTION:-0.3}"
export TORCHINDUCTOR_COMPILE_THREADS=1           # torch.compile in many processes at once: no worker pools each
mkdir -p "$OUT"
dry=()
if [ "${DRY:-0}" = 1 ]; then dry=(--dry); fi
python3 -c 'import torch, inspect, subprocess; from torch.utils.cpp_extension import load_inline as l
cuda = torch.cuda.is_available()
print("torch", torch.__version__, "| device", torch.cuda.get_device_name() if cuda else "none (CPU)",
      "| driver/nvcc", subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.split()[-1],
      "| no_implicit_headers", "no_implicit_headers" in inspect.signature(l).parameters,
      "| use_pch", "use_pch" in inspect.signature(l).parameters)' | tee "$OUT/env.txt"
if [ "${DRY:-0}" != 1 ]; then
    nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >> "$OUT/env.txt" 2>&1
    # one build first: it writes PyTorch's precompiled torch/extension.h, which the other builds
    # reuse; they wait for KS_WAIT_FOR meanwhile, while the jobs that need no CUDA build run
    export KS_USE_PCH=1 KS_WAIT_FOR=/tmp/ks_pch.ready
    rm -f "$KS_WAIT_FOR"
    (first=$(ls -d wd/w*_cuda_s* | head -1); t0=$(date +%s)
     (cd "$first" && timeout 150 python3 build.py -v > /tmp/first_build.log 2>&1); rc=$?
     echo "first build ($first): rc $rc, $(( $(date +%s) - t0 )) s" >> "$OUT/env.txt"; touch "$KS_WAIT_FOR") &
fi
wd_root=wd
if [ -n "${WD_ONLY:-}" ]; then
    wd_root=/tmp/wd_only && mkdir -p "$wd_root"
    for w in ${WD_ONLY//,/ }; do ln -sfn "$PWD/wd/$w" "$wd_root/$w"; done
fi
python3 scripts/check_workdirs.py "$wd_root" --jobs "${WD_JOBS:-5}" --budget "${WD_BUDGET:-240}" --timeout 150 ${WD_ARGS:-} \
    "${dry[@]}" --out "$OUT/workdirs.jsonl" > "$OUT/workdirs.log" 2>&1 &
skip=()
if [ -n "${SKIP:-}" ]; then skip=(--skip "$SKIP"); fi
python3 scripts/kb_eval.py kb --sample "${KB_SAMPLE:-ok=200,wrong_result=50}" --gpu '' --jobs "${KB_JOBS:-10}" \
    --budget "${KB_BUDGET:-270}" --case-timeout 120 "${skip[@]}" "${dry[@]}" ${KB_ARGS:-} \
    --out "$OUT/kb_eval.jsonl" > "$OUT/kb_eval.log" 2>&1
wait
tail -n 6 "$OUT/workdirs.log"
tail -n 14 "$OUT/kb_eval.log"
