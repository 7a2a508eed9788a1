#!/usr/bin/env bash
# Named rungs on the local GPU at several shapes a module: scripts/gpu_check.py once per round, each
# round giving every module one shape (gpu_check takes one shape a module), only the VARIANTS named
# (default params, one alternative, every bug, the fp16 default); builds are shared between rounds
# (cached by source hash). Results of all rounds under $OUT: results.jsonl, summary.txt, log.txt.
#   VARIANTS=a,b scripts/gpu_check_rounds.sh 'topk_cuda:B=1,V=32000,K=50+softmax_cuda:R=32,C=32000' ...
#   GC_ARGS='--compile-only': build only (no GPU); BUDGET: seconds a round may run cases (default 70)
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/gpu_check_rounds}"
mkdir -p "$OUT"
for round in "$@"; do
    modules=() shapes=()
    IFS=+ read -ra specs <<< "$round"
    for spec in "${specs[@]}"; do modules+=("${spec%%:*}"); shapes+=(--shape "$spec"); done
    dir=$(mktemp -d)
    timeout $(( ${BUDGET:-70} + 90 )) python3 scripts/gpu_check.py --modules "$(IFS=,; echo "${modules[*]}")" \
        --variants "$VARIANTS" "${shapes[@]}" --out "$dir" --build-dir /tmp/ks_rounds_build \
        --budget "${BUDGET:-70}" ${GC_ARGS:-} >> "$OUT/log.txt" 2>&1
    echo "round $round: rc=$?" >> "$OUT/log.txt"
    cat "$dir/results.jsonl" >> "$OUT/results.jsonl" 2>/dev/null
    { echo "== round $round"; cat "$dir/summary.txt" 2>/dev/null; } >> "$OUT/summary.txt"
done
grep "rc=" "$OUT/log.txt"
cat "$OUT/summary.txt"
