#!/usr/bin/env bash
# Issue 29's device proof: KernelBench's OWN eval_kernel_against_ref (ScalingIntelligence/KernelBench,
# fetched, its tree exported into the carried folder, never into the project) over every module of the
# bundled profiles: fresh seeds of the default, kernelinfer and fused profiles, exported (ok,
# wrong_result); per module and status one solution among H100/H200 tasks (fused programs: a few per
# impl and status), CUDA and Triton; a rendered case for each module and status the sample lacks; and
# the pinned cases of the labels the first H200 run disputed (scripts/kb_pinned.py). A case whose
# verdict disagrees with its label is diagnosed in its own process (scripts/kb_official_eval.py).
#
#   bash scripts/kb_device_proof.sh prepare [SEED]   here, no GPU: the datasets and exports (WORK,
#        default /tmp/kb_proof), KernelBench's static checker over every exported solution
#        (build/kb_proof/static.txt), the sample, pinned and filled cases and KernelBench's src/
#        (git archive of KBGIT, default the fetched mirror) under build/kb_proof/ (ignored by git);
#        PINNED=0 leaves out the pinned cases (scripts/kb_pinned.py's DISAGREEMENTS, diagnosed: slow)
#   DRY=1 bash scripts/kb_device_proof.sh run        here: KernelBench's loading of every case, both
#        models built, nothing on a device (the rehearsal)
#   bash scripts/kb_device_proof.sh run              on the device (run tool: carry ["build/kb_proof"]),
#        one call: $OUT/table.txt, rows.jsonl, log.txt, env.txt, static_full.txt; no case starts after
#        DEADLINE seconds (default 320) and none runs past it; IMPL=cuda or IMPL=triton runs only those,
#        PART=K/N every N-th case from the K-th (two calls of PART=1/2 and 2/2 share the CUDA builds
#        evenly), JOBS evaluations side by side (default 8; TRITON_JOBS of them at most Triton ones), PREBUILD CUDA builds side by side (default
#        the cores; KernelBench's own build_compile_cache into a build_dir a case under BUILD_ROOT, then
#        eval_kernel_against_ref with that build_dir, as KernelBench's batch evaluation does; 0: each
#        evaluation builds its own). Pinned cases start first; rows.jsonl is written case by case.
#        DONE="rows.jsonl ..." (earlier calls' rows): the cases with a verdict there are not run again.
#        FIRST=module,...: those modules' cases ('fused': the fused programs') start right after the pinned ones.
#   bash scripts/kb_device_proof.sh table ROWS...      here: the table of one or more calls' rows.jsonl
#   bash scripts/kb_device_proof.sh workspaces [WORK]   here (prepare does it): agent workspaces (`kernelstrain workdir`)
#        of two CUDA and two Triton fused episodes of H100/H200 tasks, each at its best candidate, under
#        build/kb_proof/workspaces
#   bash scripts/kb_device_proof.sh verify               on the device: each workspace's build.py and verify.py
#        -> $OUT/workspaces.txt
set -euo pipefail
cd "$(dirname "$0")/.."
PROOF=build/kb_proof
mode="${1:-}"; shift || true
case "$mode" in
prepare)
    seed="${1:-5151}"; work="${WORK:-/tmp/kb_proof}"
    kbgit="${KBGIT:-/work/.mirror/ScalingIntelligence+KernelBench/repo}"
    git --git-dir="$kbgit" rev-parse --verify -q HEAD > /dev/null || { echo "no KernelBench git dir at $kbgit (KBGIT=...)" >&2; exit 2; }
    rm -rf "$PROOF" "$work" && mkdir -p "$PROOF/KernelBench" "$work"
    git --git-dir="$kbgit" archive HEAD src LICENSE | tar -x -C "$PROOF/KernelBench"
    git --git-dir="$kbgit" rev-parse HEAD > "$PROOF/KernelBench/COMMIT"
    python3 -m kernelstrain generate --seed "$seed" --episodes 400 --workers 1 --quiet --out "$work/ds_ks"
    python3 -m kernelstrain generate --seed "$seed" --episodes 120 --workers 1 --quiet --config kernelinfer --out "$work/ds_ki"
    python3 -m kernelstrain generate --seed "$seed" --episodes 40 --workers 1 --quiet --config fused --out "$work/ds_fu"
    for p in ks ki fu; do
        python3 -m kernelstrain export kernelbench "$work/ds_$p" --out "$work/ex_$p" --status ok,wrong_result
    done
    python3 scripts/kb_official_eval.py "$PROOF/KernelBench" "$work/ex_ks" "$work/ex_ki" "$work/ex_fu" --static-only \
        --table "$PROOF/static.txt" > /dev/null
    head -1 "$PROOF/static.txt"
    python3 scripts/kb_official_eval.py "$PROOF/KernelBench" "$work/ex_ks" "$work/ex_ki" "$work/ex_fu" \
        --write-sample "$PROOF/exports"
    if [ "${PINNED:-1}" != 0 ]; then python3 scripts/kb_pinned.py "$PROOF/exports/pinned"; fi
    python3 scripts/kb_pinned.py "$PROOF/exports/filled" --fill "$PROOF"/exports/ex_*
    bash "$0" workspaces "$work"
    echo "seed $seed; $(du -sh "$PROOF" | cut -f1) under $PROOF"
    ;;
workspaces)
    work="${1:-${WORK:-/tmp/kb_proof}}"
    rm -rf "$PROOF/workspaces"
    python3 - "$work/ds_fu/episodes.jsonl" <<'PY' | while read -r task; do
import json, sys
picked = {"cuda": [], "triton": []}
for line in open(sys.argv[1]):
    r = json.loads(line)
    impl = r["module"].rsplit("_", 1)[1]
    if r["gpu"] in ("H100", "H200") and r["best"] and len(picked[impl]) < 2:
        picked[impl].append(r["task_id"])
print("\n".join(picked["cuda"] + picked["triton"]))
PY
        python3 -m kernelstrain workdir "$task" --data "$work/ds_fu" --out "$PROOF/workspaces/$task"
    done
    ;;
verify)
    OUT="${OUT:-/tmp/kb_proof_out}"; mkdir -p "$OUT"
    for w in "$PROOF"/workspaces/*/; do
        b=0; v=0
        echo "== $(basename "$w"): $(head -1 "$w/model_new.py" | cut -c1-160)" >> "$OUT/workspaces.txt"
        (cd "$w" && timeout 150 python3 build.py) > /tmp/kb_ws.log 2>&1 || b=$?
        tail -3 /tmp/kb_ws.log >> "$OUT/workspaces.txt"
        (cd "$w" && timeout 120 python3 verify.py) > /tmp/kb_ws.log 2>&1 || v=$?
        tail -6 /tmp/kb_ws.log >> "$OUT/workspaces.txt"
        echo "build.py exit $b, verify.py exit $v" >> "$OUT/workspaces.txt"
    done
    cat "$OUT/workspaces.txt"
    ;;
run)
    export PYTHONUNBUFFERED=1 OUT="${OUT:-/tmp/kb_proof_out}" TORCHINDUCTOR_COMPILE_THREADS=1
    mkdir -p "$OUT"
    python3 -c 'import torch; print("torch", torch.__version__, "| device",
          torch.cuda.get_device_name() if torch.cuda.is_available() else "none (CPU)")' | tee "$OUT/env.txt"
    echo "KernelBench $(cat "$PROOF/KernelBench/COMMIT")" >> "$OUT/env.txt"
    echo "cores $(nproc)" >> "$OUT/env.txt"
    cp "$PROOF/static.txt" "$OUT/static_full.txt"     # the static checker over every exported solution (prepare)
    dry=(); jobs="${JOBS:-8}"
    if [ "${DRY:-0}" = 1 ]; then dry=(--dry); jobs=1; fi
    python3 scripts/kb_official_eval.py "$PROOF/KernelBench" "$PROOF"/exports/* --jobs "$jobs" --timeout 240 \
        ${TRITON_JOBS:+--triton-jobs "$TRITON_JOBS"} \
        --prebuild "${PREBUILD:-$(nproc)}" --build-root "${BUILD_ROOT:-/tmp/kb_build}" \
        --deadline "${DEADLINE:-320}" ${IMPL:+--impl "$IMPL"} ${PART:+--part "$PART"} ${DONE:+--done $DONE} \
        ${FIRST:+--first "$FIRST"} \
        --out "$OUT/rows.jsonl" --table "$OUT/table.txt" "${dry[@]}" \
        > "$OUT/log.txt" 2>&1
    cat "$OUT/table.txt"
    ;;
table)
    python3 scripts/kb_official_eval.py "$PROOF/KernelBench" "$PROOF"/exports/* --rows "$@"
    ;;
*)
    sed -n '2,20p' "$0" >&2; exit 2
    ;;
esac
