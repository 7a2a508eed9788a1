"""Score a KernelBench export (`kernelstrain export kernelbench`) with KernelBench's OWN code: its
static checker (`kernel_static_checker.validate_kernel_static`) on every solution of the export,
and `eval.eval_kernel_against_ref` on a sample: per export and module (tasks of the chosen GPUs),
one solution of each recorded status, with `backend` the solution's impl and `precision` the
problem's (index.json). KernelBench is not part of this project: pass the path of a checkout
(ScalingIntelligence/KernelBench) and it is imported from there.

    python3 scripts/kb_official_eval.py KERNELBENCH EXPORT [EXPORT ...] [--gpu H100,H200]
        [--status ok,wrong_result] [--trials 5] [--jobs 12] [--seed 0] [--out results.jsonl]
    python3 scripts/kb_official_eval.py KERNELBENCH EXPORT --static-only

Each evaluation runs in a process of its own (a crash or a sticky CUDA error is that case's
result). KernelBench's `utils` module imports LLM clients (openai, litellm) at the top that its
evaluation never calls; where they are not installed, that child process gives them empty
stand-in modules. Prints the table of compiled / correct by recorded status and impl.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import random
import subprocess
import sys
import time
import types
from collections import defaultdict
from pathlib import Path

PRECISION = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def _import_kernelbench(root: Path):
    sys.path.insert(0, str(root / "src"))
    for name in ("openai", "litellm"):          # LLM clients: imported by kernelbench.utils, unused by eval
        try:
            __import__(name)
        except ImportError:
            stand_in = types.ModuleType(name)
            stand_in.OpenAI = stand_in.completion = None
            sys.modules[name] = stand_in
    from kernelbench import eval as kb_eval
    from kernelbench import kernel_static_checker
    return kb_eval, kernel_static_checker


def evaluate(root: Path, problem: Path, solution: Path, backend: str, precision: str, trials: int) -> dict:
    """One solution through eval_kernel_against_ref (in this process)."""
    import torch
    kb_eval, _ = _import_kernelbench(root)
    t0 = time.time()
    result = kb_eval.eval_kernel_against_ref(
        problem.read_text(), solution.read_text(), seed_num=42, num_correct_trials=trials,
        measure_performance=False, device=0, backend=backend, precision=getattr(torch, PRECISION[precision]))
    if result is None:                       # KernelBench's "lock file error, please retry"
        return {"compiled": None, "correct": None, "error": "retry (lock file)", "eval_s": round(time.time() - t0, 1)}
    meta = {k: str(v)[:600] for k, v in result.metadata.items() if k not in ("hardware", "device")}
    return {"compiled": result.compiled, "correct": result.correctness, "metadata": meta,
            "hardware": result.metadata.get("hardware"), "eval_s": round(time.time() - t0, 1)}


def static_checks(root: Path, exports: list) -> dict:
    """{(export, file): (valid, errors)} for every solution of every export."""
    _, checker = _import_kernelbench(root)
    out = {}
    for ex in exports:
        index = json.loads((ex / "index.json").read_text())
        precision = {p["problem_id"]: p.get("precision", p["dtype"]) for p in index["problems"]}
        for s in index["solutions"]:
            valid, errors, _ = checker.validate_kernel_static((ex / s["file"]).read_text(), backend=s["impl"],
                                                              precision=precision[s["problem_id"]])
            out[(str(ex), s["file"])] = (valid, errors)
    return out


def sample(exports: list, gpus: set, statuses: tuple, seed: int) -> list:
    """Per export, module and status: one solution (of the chosen GPUs), picked by `seed`."""
    rng, picked = random.Random(seed), []
    for ex in exports:
        index = json.loads((ex / "index.json").read_text())
        problems = {p["problem_id"]: p for p in index["problems"]}
        groups = defaultdict(list)
        for s in index["solutions"]:
            if s["gpu"] in gpus and s["status"] in statuses:
                groups[(s["module"], s["status"])].append(s)
        for key in sorted(groups):
            s = rng.choice(groups[key])
            p = problems[s["problem_id"]]
            picked.append({"export": str(ex), "module": s["module"], "impl": s["impl"], "status": s["status"],
                           "tag": s["tag"], "gpu": s["gpu"], "file": s["file"], "problem": p["file"],
                           "precision": p.get("precision", p["dtype"]), "unsupported": s.get("unsupported")})
    return picked


def _child(root: Path, row: dict, trials: int, timeout: int) -> dict:
    ex = Path(row["export"])
    cmd = [sys.executable, __file__, "--one", str(root), str(ex / row["problem"]), str(ex / row["file"]),
           row["impl"], row["precision"], str(trials)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {**row, "compiled": None, "correct": None, "error": f"timeout {timeout} s"}
    last = p.stdout.strip().splitlines()[-1:] or [""]
    try:
        return {**row, **json.loads(last[0])}
    except json.JSONDecodeError:
        return {**row, "compiled": None, "correct": None, "error": f"exit {p.returncode}: {p.stderr[-1500:]}"}


def table(rows: list, checks: dict) -> str:
    lines = [f"static checker (validate_kernel_static, strict checks): "
             f"{sum(v for v, _ in checks.values())}/{len(checks)} solutions valid"]
    for (ex, f), (valid, errors) in sorted(checks.items()):
        if not valid:
            lines.append(f"  refused: {ex}/{f}: {'; '.join(errors)}")
    lines.append(f"{'status':14s} {'impl':7s} {'n':>4s} {'compiled':>9s} {'correct':>8s}")
    groups = defaultdict(list)
    for r in rows:
        groups[(r["status"], r["impl"])].append(r)
    for (status, impl), rs in sorted(groups.items()):
        lines.append(f"{status:14s} {impl:7s} {len(rs):4d} {sum(bool(r['compiled']) for r in rs):9d} "
                     f"{sum(bool(r['correct']) for r in rs):8d}")
    misses = [r for r in rows if bool(r["correct"]) != (r["status"] == "ok")]
    lines.append(f"label disagreements (ok not correct, or wrong_result correct): {len(misses)}")
    for r in misses:
        why = r.get("error") or r.get("metadata", {})
        lines.append(f"  {r['status']:12s} {r['module']:28s} {r['tag']:24s} {r['file']}: {str(why)[:300]}")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["--one"]:
        root, problem, solution, backend, precision, trials = sys.argv[2:8]
        print(json.dumps(evaluate(Path(root), Path(problem), Path(solution), backend, precision, int(trials)),
                         default=str))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("exports", type=Path, nargs="+")
    ap.add_argument("--gpu", default="H100,H200")
    ap.add_argument("--status", default="ok,wrong_result")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2))
    ap.add_argument("--timeout", type=int, default=540)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--static-only", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    checks = static_checks(args.kernelbench, args.exports)
    rows = [] if args.static_only else sample(args.exports, set(args.gpu.split(",")), tuple(args.status.split(",")),
                                              args.seed)
    todo = [r for r in rows if not r["unsupported"]]
    os.environ.setdefault("MAX_JOBS", "2")      # ninja jobs per extension build: the builds run side by side
    done = [{**r, "compiled": None, "correct": None, "error": f"unsupported: {r['unsupported']}"}
            for r in rows if r["unsupported"]]
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        for res in pool.map(lambda r: _child(args.kernelbench, r, args.trials, args.timeout), todo):
            done.append(res)
            print(f"{res['status']:12s} {res['impl']:6s} {res['module']:28s} compiled={res['compiled']} "
                  f"correct={res['correct']} {res.get('eval_s', '')}", flush=True)
            if args.out:
                with args.out.open("a") as f:
                    f.write(json.dumps(res, default=str) + "\n")
    print(table(done, checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
