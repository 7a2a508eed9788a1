"""Boundary grid for sim.TILE_VALUES_MAX: Triton register tiles of 512-2048 values a thread, as a gpu-check dataset.

    python3 scripts/tile_grid.py OUTDIR      then on the GPU: python3 -m kernelstrain gpu-check OUTDIR --sample 100
(docs/gpu_check_h200_tiles.txt is its run on the H200.)"""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from kernelstrain import knobs
from kernelstrain.ops import REGISTRY
from kernelstrain.tasks import make_task
from kernelstrain.sim import simulate
from kernelstrain.gpucheck.sample import sample_cases, fits
out = Path(sys.argv[1])
plan = [("rmsnorm_triton", "bf16", {"T": 16384, "D": 8192}, "multi_row_tile",
         [{"ROWS": 2, "num_warps": 1}, {"ROWS": 4, "num_warps": 1}, {"ROWS": 8, "num_warps": 2}, {"ROWS": 16, "num_warps": 4},
          {"ROWS": 8, "num_warps": 1}]),
        ("rmsnorm_triton", "bf16", {"T": 4096, "D": 8192}, "multi_row_tile",
         [{"ROWS": 4, "num_warps": 1}, {"ROWS": 16, "num_warps": 4}, {"ROWS": 8, "num_warps": 1}]),
        ("softmax_triton", "fp32", {"R": 256, "C": 151936}, "whole_row_registers", [{"num_warps": 16}, {"num_warps": 8}, {"num_warps": 4}]),
        ("softmax_triton", "fp32", {"R": 256, "C": 151936}, "persistent", [{"num_warps": 8, "programs_per_sm": 2}, {"num_warps": 4, "programs_per_sm": 2}])]
eps = []
for i, (m, dt, s, tag, ps) in enumerate(plan):
    mod = REGISTRY[m]; var = mod.variant(tag); t = make_task(mod, "H100", dt, s)
    print(m, s, "fits", fits(mod, dt, s))
    steps = []
    for p in ps:
        r = simulate(mod, var, p, t)
        print("  ", tag, p, "per", knobs.launch(mod, var, p, t).unrolled, "ok", r.ok, r.time_ms)
        steps.append({"step": len(steps) + 1, "kind": "structural", "tag": tag, "params": [{"name": k, "value": x} for k, x in p.items()],
                      "code": knobs.render(mod, var, p, t, None), "status": "ok", "failure": None, "bug": None, "typo": None,
                      "time_ms": r.time_ms})
    eps.append({"schema": "kernelstrain/episode@2", "id": f"kernelstrain-tiles-{m}-{i}", "module": m, "impl": mod.impl,
                "gpu": "H100", "arch": "sm_90a", "dtype": dt, "shape": [{"dim": d, "value": x} for d, x in s.items()], "steps": steps})
out.mkdir(parents=True, exist_ok=True)
(out / "episodes.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))
cases = sample_cases(eps, 100, 0)
print(len(cases), "cases", [(c["module"], c.get("at")) for c in cases][:20])
