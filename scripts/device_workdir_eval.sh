#!/usr/bin/env bash
# One device call for issue 15: build + verify + profile every workspace under wd/ (their own
# scripts) and the KernelBench-style evaluation of the solutions under kb/, side by side, the
# GPU timed by one process at a time (KS_GPU_LOCK). Results under $OUT.
#   layout (a carried copy): ROOT/scripts/{this, check_workdirs.py, kb_eval.py},
#   ROOT/kernelstrain/workdir/templates/harness.py, ROOT/wd/ (kernelstrain workdir outputs),
#   ROOT/kb/ (a sample of an export: kb_eval.py --write-sample)
set -u
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1 KS_GPU_LOCK=/tmp/ks_gpu.lock OUT="${OUT:-/tmp/out}"
python3 -c 'import torch, inspect; from torch.utils.cpp_extension import load_inline as l
print(torch.__version__, torch.cuda.get_device_name(), "no_implicit_headers" in inspect.signature(l).parameters,
      "use_pch" in inspect.signature(l).parameters)' | tee "$OUT/env.txt"
# one build first: it also writes PyTorch's precompiled torch/extension.h, which the parallel builds reuse
export KS_USE_PCH=1
first=$(ls -d wd/w*_cuda_s* | head -1)
t0=$(date +%s)
(cd "$first" && timeout 150 python3 build.py) >> "$OUT/env.txt" 2>&1 || export KS_USE_PCH=0
echo "first build: $(( $(date +%s) - t0 )) s, KS_USE_PCH=$KS_USE_PCH" | tee -a "$OUT/env.txt"
python3 scripts/check_workdirs.py wd --jobs "${WD_JOBS:-6}" --budget "${WD_BUDGET:-190}" --timeout 120 \
    --out "$OUT/workdirs.jsonl" > "$OUT/workdirs.log" 2>&1 &
python3 scripts/kb_eval.py kb --sample ok=200,wrong_result=50 --gpu '' --jobs "${KB_JOBS:-10}" --budget "${KB_BUDGET:-200}" \
    --compile-sample 60 --case-timeout 120 --out "$OUT/kb_eval.jsonl" > "$OUT/kb_eval.log" 2>&1
wait
tail -n 8 "$OUT/workdirs.log"
tail -n 14 "$OUT/kb_eval.log"
