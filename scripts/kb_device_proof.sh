#!/usr/bin/env bash
# Issue 29's device proof: KernelBench's OWN eval_kernel_against_ref (ScalingIntelligence/KernelBench,
# fetched, never copied into the project) over every module of both profiles — per export, module and
# recorded status one solution among H100/H200 tasks, CUDA and Triton, ok and wrong_result, and a
# rendered case for each module and status the sample lacks — plus the pinned cases of the two labels
# the first H200 run disputed (scripts/kb_pinned.py); a case whose
# verdict disagrees with its label is diagnosed in its own process (scripts/kb_official_eval.py).
#
#   bash scripts/kb_device_proof.sh prepare [SEED]     here, no GPU: fresh seeds of both profiles,
#        exported (ok, wrong_result), KernelBench's static checker over every exported solution
#        (build/kb_proof/static.txt), the sample's files, the pinned cases and KernelBench's src/
#        under build/kb_proof/ (ignored by git; a few MB). KB=/path/to/KernelBench (default
#        /tmp/kb/KernelBench, a clone of the fetched repository); WORK=/tmp/kb_proof for the data.
#   DRY=1 bash scripts/kb_device_proof.sh run          here: KernelBench's loading of every sampled
#        problem and solution, both models built, nothing on a device (the rehearsal)
#   bash scripts/kb_device_proof.sh run [EXPORT ...]   on the device (run tool: carry ["build/kb_proof"]);
#        $OUT/table.txt, $OUT/rows.jsonl, $OUT/env.txt. EXPORT: ex_ks, ex_ki (the sample), pinned (the
#        disputed cases), filled (kb_pinned.py --fill: a case for each module and status the sample
#        lacks; default all); three calls stay inside 600 s each: "run ex_ks pinned", "run ex_ki", "run filled".
set -euo pipefail
cd "$(dirname "$0")/.."
PROOF=build/kb_proof
mode="${1:-}"; shift || true
case "$mode" in
prepare)
    seed="${1:-4141}"; kb="${KB:-/tmp/kb/KernelBench}"; work="${WORK:-/tmp/kb_proof}"
    [ -f "$kb/src/kernelbench/eval.py" ] || { echo "no KernelBench checkout at $kb (KB=...)" >&2; exit 2; }
    rm -rf "$PROOF" "$work" && mkdir -p "$PROOF/KernelBench" "$work"
    python3 -m kernelstrain generate --seed "$seed" --episodes 400 --workers 1 --quiet --out "$work/ds_ks"
    python3 -m kernelstrain generate --seed "$seed" --episodes 120 --workers 1 --quiet --config kernelinfer --out "$work/ds_ki"
    for p in ks ki; do
        python3 -m kernelstrain export kernelbench "$work/ds_$p" --out "$work/ex_$p" --status ok,wrong_result
    done
    cp -r "$kb/src" "$kb/LICENSE" "$PROOF/KernelBench/"
    git -C "$kb" rev-parse HEAD > "$PROOF/KernelBench/COMMIT" 2>/dev/null || true
    python3 scripts/kb_official_eval.py "$PROOF/KernelBench" "$work/ex_ks" "$work/ex_ki" --static-only \
        --table "$PROOF/static.txt" > /dev/null
    head -1 "$PROOF/static.txt"
    python3 scripts/kb_official_eval.py "$PROOF/KernelBench" "$work/ex_ks" "$work/ex_ki" --write-sample "$PROOF/exports"
    python3 scripts/kb_pinned.py "$PROOF/exports/pinned"
    python3 scripts/kb_pinned.py "$PROOF/exports/filled" --fill "$PROOF/exports/ex_ks" "$PROOF/exports/ex_ki"
    echo "seed $seed; $(du -sh "$PROOF" | cut -f1) under $PROOF"
    ;;
run)
    export PYTHONUNBUFFERED=1 OUT="${OUT:-/tmp/kb_proof_out}" TORCHINDUCTOR_COMPILE_THREADS=1
    mkdir -p "$OUT"
    exports=()
    for e in "${@:-ex_ks ex_ki pinned filled}"; do for x in $e; do exports+=("$PROOF/exports/$x"); done; done
    python3 -c 'import torch; print("torch", torch.__version__, "| device",
          torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)")' | tee "$OUT/env.txt"
    echo "KernelBench $(cat "$PROOF/KernelBench/COMMIT" 2>/dev/null || echo '?')" >> "$OUT/env.txt"
    dry=(); jobs="${JOBS:-14}"
    if [ "${DRY:-0}" = 1 ]; then dry=(--dry); jobs="${JOBS:-1}"; fi
    python3 scripts/kb_official_eval.py "$PROOF/KernelBench" "${exports[@]}" --jobs "$jobs" \
        --timeout "${TIMEOUT:-400}" --out "$OUT/rows.jsonl" --table "$OUT/table.txt" "${dry[@]}" > "$OUT/log.txt" 2>&1
    cat "$OUT/table.txt"
    ;;
*)
    sed -n '2,19p' "$0" >&2; exit 2
    ;;
esac
