"""Evaluate a KernelBench export (`kernelstrain export kernelbench`) the way KernelBench's
eval_kernel_against_ref is documented to: for each solution, import it next to its problem
(compiled = the import and its build succeed), run Model and ModelNew on seeded random inputs
over several trials (same seed for both constructors) and compare with torch.allclose at
atol = rtol = 1e-4 (fp32 outputs) or 1e-2 (16-bit and fp8 outputs; integer outputs exactly),
then time eager Model, torch.compile(Model) and ModelNew with CUDA events after an L2 flush.
Written from the documented contract; no KernelBench code.

    python3 scripts/kb_eval.py KB [--status ok,wrong_result] [--sample ok=200,wrong_result=50]
        [--gpu H100] [--jobs 8] [--trials 5] [--perf-trials 20] [--compile-sample 60]
        [--budget 300] [--out results.jsonl]

Every solution runs in a process of its own (a crash, hang or sticky CUDA error is that
solution's result); timing holds a lock file so parallel workers time one at a time. Prints a
table of compiled / correct rates and speedups (geometric means) by recorded status.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import random
import subprocess
import sys
import tempfile
import time
import traceback
from collections import defaultdict
from pathlib import Path

HARNESS = Path(__file__).resolve().parents[1] / "kernelstrain" / "workdir" / "templates" / "harness.py"
KB_TOL = {"torch.float32": 1e-4}            # everything else floating: 1e-2


def allclose(torch, out, ref) -> dict:
    if not torch.is_tensor(out) or out.shape != ref.shape:
        return {"ok": False, "error": f"output {getattr(out, 'shape', type(out).__name__)} != {tuple(ref.shape)}"}
    if not ref.is_floating_point():
        return {"ok": bool(torch.equal(out, ref)), "max_abs_err": None}
    tol = KB_TOL.get(str(ref.dtype), 1e-2)
    o, r = out.float(), ref.float()
    return {"ok": bool(torch.allclose(o, r, atol=tol, rtol=tol)),
            "max_abs_err": (o - r).abs().nan_to_num(float("inf")).max().item() if o.numel() else 0.0}


def evaluate_one(problem_path: str, solution_path: str, trials: int, perf_trials: int, compile_too: bool,
                 needs_grad: bool) -> dict:
    """Runs in the solution's own process."""
    import torch
    sys.path.insert(0, str(HARNESS.parent))
    import harness
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    res = {"compiled": False, "correct": False}
    t0 = time.time()
    try:
        problem = harness.load_module(problem_path, "ks_problem")
        solution = harness.load_module(solution_path, "ks_solution")
        if hasattr(solution, "build"):
            solution.build()
        res["compiled"], res["compile_s"] = True, round(time.time() - t0, 1)
    except Exception as e:  # noqa: BLE001 - the build's error is the result
        res["error"] = f"compile: {type(e).__name__}: {e}"[-1500:]
        return res
    init = problem.get_init_inputs()
    try:
        for t in range(trials):
            seed = 42 + t
            ref_model = harness.make_model(problem.Model, init, seed)
            new_model = harness.make_model(solution.ModelNew, init, seed)
            inputs = harness.make_inputs(problem, seed)
            mine = harness.clone(inputs)
            with harness.grad_mode(needs_grad):
                want = harness.as_tuple(ref_model(*inputs))
                got = harness.as_tuple(new_model(*mine))
            torch.cuda.synchronize()
            checks = [allclose(torch, g, w) for g, w in zip(got, want)] if len(got) == len(want) else \
                [{"ok": False, "error": f"{len(got)} outputs, reference {len(want)}"}]
            if not all(c["ok"] for c in checks):
                res.update(failed_trial=t, outputs=checks)
                return res
        res["correct"] = True
    except Exception as e:  # noqa: BLE001 - a launch or runtime error: incorrect
        res["error"] = f"runtime: {type(e).__name__}: {e}"[-1500:]
        return res
    try:
        inputs = harness.make_inputs(problem, 42)
        timer = harness.Timer()
        models = {"eager": harness.make_model(problem.Model, init, 42),
                  "custom": harness.make_model(solution.ModelNew, init, 42)}
        if compile_too:
            models["compile"] = torch.compile(harness.make_model(problem.Model, init, 42))
        with harness.grad_mode(needs_grad):
            for name, model in models.items():
                try:
                    model(*inputs)                   # torch.compile compiles here, outside the timing lock
                    res[f"{name}_ms"] = timer.time(lambda: model(*inputs), trials=perf_trials)["median_ms"]
                except Exception as e:  # noqa: BLE001
                    res[f"{name}_error"] = f"{type(e).__name__}: {e}"[-600:]
        for name in ("eager", "compile"):
            if res.get(f"{name}_ms") and res.get("custom_ms"):
                res[f"speedup_vs_{name}"] = res[f"{name}_ms"] / res["custom_ms"]
    except Exception as e:  # noqa: BLE001
        res["perf_error"] = f"{type(e).__name__}: {e}"[-600:]
    return res


def pick(index: dict, sample: dict, gpus: set | None, seed: int) -> list:
    """Solutions of each status, round-robin over modules (stratified), the first N of each."""
    rng = random.Random(seed)
    out = []
    for status, n in sample.items():
        by_module = defaultdict(list)
        for s in index["solutions"]:
            if s["status"] == status and (gpus is None or s["gpu"] in gpus):
                by_module[s["module"]].append(s)
        for rows in by_module.values():
            rng.shuffle(rows)
        order = sorted(by_module)
        chosen = [by_module[m][i] for i in range(max(map(len, by_module.values()), default=0))
                  for m in order if i < len(by_module[m])]
        out += [(i / n, status, row) for i, row in enumerate(chosen[:n])]
    # statuses interleaved in proportion, so a run cut short by its budget still has each
    return [row for _, _, row in sorted(out, key=lambda x: (x[0], x[1]))]


def write_sample(kb: Path, index: dict, chosen: list, out: Path) -> None:
    ids = {s["problem_id"] for s in chosen}
    problems = [p for p in index["problems"] if p["problem_id"] in ids]
    for row in problems + chosen:
        (out / row["file"]).parent.mkdir(parents=True, exist_ok=True)
        (out / row["file"]).write_text((kb / row["file"]).read_text())
    (out / "index.json").write_text(json.dumps({**index, "problems": problems, "solutions": chosen}, indent=1))


def run_one(kb: Path, sol: dict, problem: dict, args, compile_too: bool) -> dict:
    cmd = [sys.executable, __file__, "--one", str(kb / problem["file"]), str(kb / sol["file"]),
           json.dumps({"trials": args.trials, "perf_trials": args.perf_trials, "compile_too": compile_too,
                       "needs_grad": problem.get("needs_grad", False)})]
    row = {k: sol[k] for k in ("file", "status", "module", "impl", "episode", "step", "best")}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.case_timeout)
        line = next((x for x in reversed(p.stdout.splitlines()) if x.startswith("@@KB ")), None)
        row.update(json.loads(line[5:]) if line else
                   {"compiled": False, "correct": False, "error": f"exit {p.returncode}: {p.stderr[-800:]}"})
    except subprocess.TimeoutExpired:
        row.update(compiled=False, correct=False, error=f"timeout after {args.case_timeout} s")
    return row


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def table(rows: list) -> str:
    lines = ["| recorded status | impl | n | compiled | correct | speedup vs eager (geomean) | vs torch.compile (geomean, n) |",
             "|---|---|---|---|---|---|---|"]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["status"], r["impl"])].append(r)
        groups[(r["status"], "all")].append(r)
    for (status, impl), rs in sorted(groups.items()):
        n = len(rs)
        comp = sum(r["compiled"] for r in rs)
        corr = sum(r["correct"] for r in rs)
        ge = geomean([r.get("speedup_vs_eager") for r in rs if r["correct"]])
        gc_rows = [r.get("speedup_vs_compile") for r in rs if r["correct"] and r.get("speedup_vs_compile")]
        gc = geomean(gc_rows)
        lines.append(f"| {status} | {impl} | {n} | {comp / n:.1%} | {corr / n:.1%} | "
                     f"{'-' if ge is None else f'{ge:.2f}x'} | {'-' if gc is None else f'{gc:.2f}x'} ({len(gc_rows)}) |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb")
    ap.add_argument("--sample", default="ok=200,wrong_result=50", help="status=N,... (solutions of each status)")
    ap.add_argument("--gpu", default="H100", help="only solutions of these GPUs' tasks, comma-separated ('' for all)")
    ap.add_argument("--write-sample", help="copy the chosen solutions, their problems and an index to this "
                    "directory (to carry), and stop")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--perf-trials", type=int, default=20)
    ap.add_argument("--compile-sample", type=int, default=60, help="time torch.compile for the first N correct-status")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds after which no solution starts")
    ap.add_argument("--case-timeout", type=float, default=240.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="kb_eval.jsonl")
    args = ap.parse_args()
    kb = Path(args.kb)
    index = json.loads((kb / "index.json").read_text())
    problems = {p["problem_id"]: p for p in index["problems"]}
    sample = {k: int(v) for k, v in (x.split("=") for x in args.sample.split(","))}
    chosen = pick(index, sample, set(args.gpu.split(",")) if args.gpu else None, args.seed)
    if args.write_sample:
        write_sample(kb, index, chosen, Path(args.write_sample))
        print(f"wrote {len(chosen)} solutions to {args.write_sample}")
        return 0
    os.environ.setdefault("KS_GPU_LOCK", os.path.join(tempfile.gettempdir(), "ks_gpu.lock"))
    deadline = time.time() + args.budget
    timed_compile = {s["file"] for s in [s for s in chosen if s["status"] == "ok"][:args.compile_sample]}
    rows = []
    with open(args.out, "w") as fh, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        def job(sol):
            if time.time() > deadline:
                return {**{k: sol[k] for k in ("file", "status", "module", "impl", "episode", "step", "best")},
                        "compiled": False, "correct": False, "skipped": "budget spent"}
            return run_one(kb, sol, problems[sol["problem_id"]], args, sol["file"] in timed_compile)
        for row in pool.map(job, chosen):
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            print(f"[{len(rows)}/{len(chosen)}] {row['status']:12s} {'C' if row['compiled'] else '-'}"
                  f"{'V' if row['correct'] else '-'} {row['file']} {row.get('error', '')[:120]}", flush=True)
    ran = [r for r in rows if "skipped" not in r]
    print(f"\n{len(ran)} of {len(rows)} chosen solutions ran (the rest: budget spent)\n")
    print(table(ran))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        opts = json.loads(sys.argv[4])
        try:
            result = evaluate_one(sys.argv[2], sys.argv[3], opts["trials"], opts["perf_trials"], opts["compile_too"],
                                  opts["needs_grad"])
        except Exception as e:  # noqa: BLE001
            result = {"compiled": False, "correct": False, "error": f"{type(e).__name__}: {e}",
                      "traceback": traceback.format_exc()[-1500:]}
        print("@@KB " + json.dumps(result), flush=True)
        sys.exit(0)
    sys.exit(main())
