"""Time the reference in eager mode, under torch.compile, and the custom kernel (ModelNew):
CUDA events around each call, the L2 flushed before every trial, median and spread.
Read-only: do not edit (see SKILL.md).

    python3 profile.py [--trials 30] [--modes eager,compile,custom] [--json]
"""
import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
# this file shares its name with the standard library's `profile`, which PyTorch imports (through
# cProfile): keep this directory off the import path and load harness.py by its path instead
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]

import importlib.util  # noqa: E402

import torch  # noqa: E402

_spec = importlib.util.spec_from_file_location("harness", HERE / "harness.py")
harness = importlib.util.module_from_spec(_spec)
sys.modules["harness"] = harness
_spec.loader.exec_module(harness)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--modes", default="eager,compile,custom")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    task = json.loads((HERE / "task.json").read_text())
    problem = harness.load_module(HERE / "model.py", "model")
    solution = harness.load_module(HERE / "model_new.py", "model_new")
    solution.build()
    init = problem.get_init_inputs()
    report = {"task_id": task["task_id"], "candidate": task["candidate"]["label"], "modes": {}}
    with harness.gpu_slot():
        inputs = harness.make_inputs(problem, a.seed)
        timer = harness.Timer()
        for mode in a.modes.split(","):
            cls = solution.ModelNew if mode == "custom" else problem.Model
            model = harness.make_model(cls, init, a.seed)
            if mode == "compile":
                model = torch.compile(model)
            try:
                with harness.grad_mode(task["needs_grad"]):
                    model(*inputs)       # torch.compile compiles here (and Triton JITs), not while timing
                    torch.cuda.synchronize()
                    report["modes"][mode] = timer.time(lambda: model(*inputs), trials=a.trials)
            except Exception as e:  # noqa: BLE001 - e.g. torch.compile failing on this program
                report["modes"][mode] = {"error": f"{type(e).__name__}: {e}"[-1500:]}
    custom = report["modes"].get("custom", {}).get("median_ms")
    for mode in ("eager", "compile"):
        base = report["modes"].get(mode, {}).get("median_ms")
        if custom and base:
            report[f"speedup_vs_{mode}"] = base / custom
    if a.json:
        print(json.dumps(report))
    else:
        for mode, r in report["modes"].items():
            print(f"{mode:8s} " + (r["error"] if "error" in r else
                                   f"median {r['median_ms']:.4f} ms  iqr {r['iqr_ms']:.4f}  "
                                   f"min {r['min_ms']:.4f}  max {r['max_ms']:.4f}  ({r['trials']} trials)"))
        for mode in ("eager", "compile"):
            if f"speedup_vs_{mode}" in report:
                print(f"custom speedup over {mode}: {report[f'speedup_vs_{mode}']:.3f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
