"""Check the custom kernel against the reference: several seeded random inputs, every output
the kernel allocates poisoned (NaN / 0xFF) before its launch, the task's tolerance from
task.json, the first failing index reported. Read-only: do not edit (see SKILL.md).

    python3 verify.py [--trials 5] [--seed 0] [--json]

Exit 0 when every trial matches, 1 when one does not (or the kernel fails), 2 on bad usage.
"""
import argparse
import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch  # noqa: E402

import harness  # noqa: E402


def trial(problem, solution, task, seed):
    init = problem.get_init_inputs()
    ref_model = harness.make_model(problem.Model, init, seed)
    new_model = harness.make_model(solution.ModelNew, init, seed)
    inputs = harness.make_inputs(problem, seed)
    mine = harness.clone(inputs)
    with harness.grad_mode(task["needs_grad"]), harness.gpu_lock(shared=True):
        want = harness.as_tuple(ref_model(*inputs))
        solution.set_poison(True)
        try:
            got = harness.as_tuple(new_model(*mine))
            torch.cuda.synchronize()            # an asynchronous kernel error surfaces here
        finally:
            solution.set_poison(False)
        if len(got) != len(want):
            return [{"ok": False, "error": f"{len(got)} outputs, the reference has {len(want)}"}]
        tols = task.get("output_tolerances") or [task["tolerance"]] * len(want)
        return [harness.compare(*harness.viewed(g, w, t), t) for g, w, t in zip(got, want, tols)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False        # references in true fp32
    torch.backends.cudnn.allow_tf32 = False
    task = json.loads((HERE / "task.json").read_text())
    problem = harness.load_module(HERE / "model.py", "model")
    report = {"task_id": task["task_id"], "candidate": task["candidate"]["label"], "trials": []}
    try:
        solution = harness.load_module(HERE / "model_new.py", "model_new")
        solution.build()
        with harness.gpu_slot():
            with harness.grad_mode(task["needs_grad"]):     # JIT compiles and module loads, outside the GPU lock
                harness.make_model(solution.ModelNew, problem.get_init_inputs(), a.seed)(
                    *harness.make_inputs(problem, a.seed))
                torch.cuda.synchronize()
            for t in range(a.trials):
                outs = trial(problem, solution, task, a.seed + t)     # its tensors are freed on return
                report["trials"].append({"seed": a.seed + t, "outputs": outs})
                if not all(o["ok"] for o in outs):
                    break
    except Exception as e:  # noqa: BLE001 - a build, launch or kernel error is this check's result
        report["error"] = f"{type(e).__name__}: {e}"[-3000:]
        report["traceback"] = traceback.format_exc()[-3000:]
    report["ok"] = "error" not in report and all(o["ok"] for t in report["trials"] for o in t["outputs"])
    if a.json:
        print(json.dumps(report))
    else:
        for t in report["trials"]:
            for i, o in enumerate(t["outputs"]):
                where = f" first bad element {o['first_bad']}: got {o['got']!r}, want {o['want']!r}" \
                    if "first_bad" in o else ""
                err = f" {o['error']}" if o.get("error") else ""
                figures = (f" max_abs_err={o['max_abs_err']:.3g} rel_l2_err={o['rel_l2_err']:.3g} "
                           f"bad={o['nbad']}/{o['numel']}") if "nbad" in o else ""
                print(f"seed {t['seed']} output {i}: {'ok' if o['ok'] else 'FAIL'}{figures}{where}{err}")
        if "error" in report:
            print(report["error"])
        print("verify: PASS" if report["ok"] else "verify: FAIL")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
