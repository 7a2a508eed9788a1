"""Clean and bug renders of one Triton rung in Triton's interpreter at given shapes, judged as label_audit.py judges
them (gpu-check's comparison, fp16 run, each 16-bit dtype's class):

    TRITON_INTERPRET=1 python3 scripts/label_interpret_one.py rope_triton flat_pairs broadcast_index \
        '[{"T": 1, "H": 32, "D": 128}, {"T": 16, "H": 32, "D": 128}]' [LABEL,...]      # bug '-': clean only
"""
import os, sys, time, json
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import torch
from kernelstrain.ops import REGISTRY
from label_audit import run_case, reference, run_task, summary
from label_device_check import configs
name, tag, bug = sys.argv[1:4]
shapes = json.loads(sys.argv[4])
labels = sys.argv[5].split(",") if len(sys.argv) > 5 else None
m = REGISTRY[name]; v = m.variant(tag)
rd = "fp16" if "fp32" not in m.dtypes or m.dtypes[0] != "fp32" else "fp32"
judged = [d for d in m.dtypes if d != "fp32"] or ["fp32"]
for shape in shapes:
    task = run_task(m, rd, shape)
    t0 = time.time()
    bundle = reference(torch, m, task)
    for label, params, _ in configs(v):
        if labels and label not in labels:
            continue
        for b in ([None] if bug == "-" else [None, bug]):
            res = {}
            for d in judged:
                per = run_case(torch, m, v, params, task, b, bundle + (d,))
                res[d] = (all(p.get("ok") for p in per.values()), summary(per))
            print(f"{name} {tag} {label} {shape} bug={b}: " + "; ".join(f"{d} {'ok' if ok else 'FAIL'} {s}" for d, (ok, s) in res.items()),
                  f"{time.time() - t0:.1f}s", flush=True)
