"""fused_rows (Triton) under TRITON_INTERPRET=1 on the CPU: each program's rung at its defaults and at another
launch shape (row_warps 1, ROWS 2) against the reference Model, KernelBench's tolerance, TRIALS seeded trials
through one instance, and against the rung below it (the same row steps in separate kernels, at the same
parameters: the outputs must be bitwise equal, the merged kernel computing each value as the split ones do);
and each bug the rung offers at its defaults, which must fail. One JSON line a render, then "N problems" (a
render not bitwise equal to the split plan's, a correct render failing where the split plan passes, or a bug
render that passes).

    TRITON_INTERPRET=1 python3 scripts/fused_rows_interpret.py --index 9211,10682 [--seed 0]
"""
from __future__ import annotations

import argparse
import json
import sys
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
TRIALS = 2


def _load(src: str, name: str):
    module = types.ModuleType(name)
    exec(compile(src, name, "exec"), module.__dict__)
    return module


def _model(m, cls, dtype):
    import torch
    prob = _load(m.view.row["source"], "problem")
    torch.manual_seed(42)
    return cls(*prob.get_init_inputs()).to(dtype=dtype)


def check(m, params: dict, bug: str | None) -> dict:
    """One render against the reference and the split plan: trials passed (each), largest difference, bitwise
    equal to the split plan."""
    import torch
    from kernelstrain.fused.execute import KB_TOLERANCE, kb_inputs
    from kernelstrain.tasks import make_task
    task, dtype = make_task(m, "H100", m.dtypes[0], m.shapes[0]), {"fp32": torch.float32, "bf16": torch.bfloat16}[m.view.dtype]
    tags = [v.tag for v in m.variants]
    below = m.variant(tags[tags.index("fused_rows") - 1])
    split_params = {p.name: params[p.name] for p in below.params}
    prob = _load(m.view.row["source"], "problem")
    models = {"ref": _model(m, prob.Model, dtype),
              "new": _model(m, _load(m.variant("fused_rows").source(params, task, bug), "cand").ModelNew, dtype),
              "split": _model(m, _load(below.source(split_params, task), "split").ModelNew, dtype)}
    tol, ok, split_ok, diff, same = KB_TOLERANCE[m.view.dtype], 0, 0, 0.0, True
    with torch.no_grad():
        for trial in range(TRIALS):
            torch.manual_seed(100 + trial)
            inputs = kb_inputs(prob.get_inputs(), "cpu", dtype)
            want, got, split = (models[k](*inputs) for k in ("ref", "new", "split"))
            ok += bool(torch.allclose(got, want, atol=tol, rtol=tol))
            split_ok += bool(torch.allclose(split, want, atol=tol, rtol=tol))
            same = same and bool(torch.equal(got, split))
            diff = max(diff, float((got.float() - want.float()).abs().max()))
    return {"module": m.name, "dtype": m.view.dtype, "ops": m.view.ops, "params": params, "bug": bug,
            "kernels": [list(k.steps) for k in m._plans["fused_rows"] if not isinstance(k, int)], "split": below.tag,
            "trials_ok": ok, "split_trials_ok": split_ok, "same_as_split": same, "max_diff": diff}


def main(argv=None) -> int:
    from kernelstrain.fused.module import fused_module, module_name
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, help="stream indices, comma-separated")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    problems = 0
    for index in (int(x) for x in args.index.split(",")):
        m = fused_module(module_name(args.seed, index, "triton"))
        if "fused_rows" not in [v.tag for v in m.variants]:
            print(f"{m.name}: no fused_rows rung")
            continue
        v = m.variant("fused_rows")
        other = {**v.defaults(), "row_warps": 1, **({"ROWS": 2} if "ROWS" in v.defaults() else {})}
        for params, bug in [(v.defaults(), None), (other, None)] + [(v.defaults(), b) for b in v.bugs_for(m.view.dtype, v.defaults())]:
            row = check(m, params, bug)
            bad = (not row["same_as_split"] or row["trials_ok"] < row["split_trials_ok"]) if bug is None \
                else row["trials_ok"] == TRIALS
            problems += bad
            print(json.dumps({**row, "problem": bad}), flush=True)
    print(f"{problems} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
