"""Evaluate a KernelBench export (`kernelstrain export kernelbench`) the way KernelBench's
eval_kernel_against_ref is documented to: for each solution, import it next to its problem
(compiled = the import and its build succeed), run Model and ModelNew on seeded random inputs
over several trials (same seed for both constructors) and compare with torch.allclose at
atol = rtol = 1e-4 (fp32 outputs) or 1e-2 (16-bit and fp8 outputs; integer outputs exactly),
then time ModelNew with CUDA events after an L2 flush; eager Model and torch.compile(Model) are
timed once per problem and shared by its solutions. Written from the documented contract; no
KernelBench code.

    python3 scripts/kb_eval.py KB [--sample ok=200,wrong_result=50] [--gpu H100,H200] [--jobs 12]
        [--gpu-slots 4] [--trials 5] [--perf-trials 20] [--budget 300] [--skip previous.jsonl]
        [--out results.jsonl]

Every solution and every problem's reference timing runs in a process of its own (a crash,
hang or sticky CUDA error is that case's result). Builds run in parallel without the GPU; at
most --gpu-slots processes hold GPU memory at once (each capped to its share), checking
shares the GPU, timing takes it alone (harness.gpu_lock). `--skip` resumes a run cut by its
budget. Prints a table of compiled / correct rates and speedups by recorded status and impl.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import random
import statistics
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
            "max_abs_err": (o - r).abs_().nan_to_num_(float("inf")).max().item() if o.numel() else 0.0}


def _load(problem_path, solution_path=None):
    import importlib.util
    import torch
    # by its path: the templates directory also holds profile.py, which must not shadow the
    # standard library's profile (torch.compile and Triton import cProfile)
    spec = importlib.util.spec_from_file_location("harness", HARNESS)
    harness = importlib.util.module_from_spec(spec)
    sys.modules["harness"] = harness
    spec.loader.exec_module(harness)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    problem = harness.load_module(problem_path, "ks_problem")
    return torch, harness, problem, solution_path and harness.load_module(solution_path, "ks_solution")


def evaluate_one(problem_path: str, solution_path: str, trials: int, perf_trials: int, needs_grad: bool,
                 tol: dict | list | None, time_eager: bool = False) -> dict:
    """Runs in the solution's own process: build (no GPU), then correctness over `trials` seeds
    and the custom timing (and eager Model's, with `time_eager`: no process of its own per
    problem), inside one GPU slot. `tol` (the op's own class, or one per output) is reported
    beside KernelBench's verdict (task_tol_ok), to tell a precision difference from a bug."""
    t0 = time.time()
    res = {"compiled": False, "correct": False}
    phase("build")
    try:
        torch, harness, problem, solution = _load(problem_path, solution_path)
        if hasattr(solution, "build"):
            solution.build()
        res["compiled"], res["compile_s"] = True, round(time.time() - t0, 1)
    except Exception as e:  # noqa: BLE001 - the build's error is the result
        res["error"] = f"compile: {type(e).__name__}: {e}"[-1500:]
        return res
    init = problem.get_init_inputs()
    phase("waiting for a GPU slot")
    with harness.gpu_slot():
        phase("first call (JIT, module load)")
        try:
            with harness.grad_mode(needs_grad):     # JIT compiles (Triton) and module loads, outside the GPU lock
                harness.make_model(solution.ModelNew, init, 42)(*harness.make_inputs(problem, 42))
                torch.cuda.synchronize()
            for t in range(trials):
                seed = 42 + t
                phase(f"trial {t}")
                with harness.gpu_lock(shared=True), harness.grad_mode(needs_grad):
                    ref_model = harness.make_model(problem.Model, init, seed)
                    new_model = harness.make_model(solution.ModelNew, init, seed)
                    inputs = harness.make_inputs(problem, seed)
                    mine = harness.clone(inputs)
                    want = harness.as_tuple(ref_model(*inputs))
                    got = harness.as_tuple(new_model(*mine))
                    torch.cuda.synchronize()
                    # the inputs are not needed past the calls (an in-place output is held by got):
                    # freed before the comparisons, which need room of their own at 10^9 elements
                    del inputs, mine
                    checks = [allclose(torch, g, w) for g, w in zip(got, want)] if len(got) == len(want) else \
                        [{"ok": False, "error": f"{len(got)} outputs, reference {len(want)}"}]
                    if tol and len(got) == len(want):    # the op's own tolerance classes, beside KernelBench's
                        tols = tol if isinstance(tol, list) else [tol] * len(want)
                        res["task_tol_ok"] = all(harness.compare(*harness.viewed(g, w, t), t)["ok"]
                                                 for g, w, t in zip(got, want, tols)) and res.get("task_tol_ok", True)
                    if not all(c["ok"] for c in checks):
                        res.update(failed_trial=t, outputs=checks)
                        # the reference against itself (fresh inputs, same seed): an op whose reference
                        # is not reproducible within allclose (16-bit atomics) cannot pass KernelBench
                        del ref_model, new_model, got
                        torch.cuda.empty_cache()
                        again = harness.as_tuple(harness.make_model(problem.Model, init, seed)(
                            *harness.make_inputs(problem, seed)))
                        res["ref_self_ok"] = all(allclose(torch, a, w)["ok"] for a, w in zip(again, want))
                        return res
                    del ref_model, new_model, want, got
                torch.cuda.empty_cache()
            res["correct"] = True
        except Exception as e:  # noqa: BLE001 - a launch or runtime error: incorrect
            res["error"] = f"runtime: {type(e).__name__}: {e}"[-1500:]
            return res
        phase("timing")
        try:
            with harness.grad_mode(needs_grad):
                inputs = harness.make_inputs(problem, 42)
                model = harness.make_model(solution.ModelNew, init, 42)
                timer = harness.Timer()
                res["custom_ms"] = timer.time(lambda: model(*inputs), trials=perf_trials)["median_ms"]
                if time_eager:
                    del model
                    ref_model = harness.make_model(problem.Model, init, 42)
                    res["eager_ms"] = timer.time(lambda: ref_model(*inputs), trials=perf_trials)["median_ms"]
        except Exception as e:  # noqa: BLE001
            res["perf_error"] = f"{type(e).__name__}: {e}"[-600:]
    return res


def phase(name: str) -> None:
    """A progress line for run_sub: a case that times out says where it was (a build, the wait for
    the GPU, a trial: a kernel that never returns)."""
    print(f"@@PHASE {time.time():.1f} {name}", flush=True)


def reference_times(problem_path: str, perf_trials: int, needs_grad: bool, compile_too: bool) -> dict:
    """Runs in a process of its own, once per problem: eager Model and torch.compile(Model)."""
    torch, harness, problem, _ = _load(problem_path)
    init, res = problem.get_init_inputs(), {}
    with harness.gpu_slot(), harness.grad_mode(needs_grad):
        inputs = harness.make_inputs(problem, 42)
        timer = harness.Timer()
        for name in ("eager", "compile") if compile_too else ("eager",):
            try:
                model = harness.make_model(problem.Model, init, 42)
                if name == "compile":
                    model = torch.compile(model)
                model(*inputs)                   # torch.compile compiles here: outside the GPU lock
                torch.cuda.synchronize()
                res[f"{name}_ms"] = timer.time(lambda: model(*inputs), trials=perf_trials)["median_ms"]
            except Exception as e:  # noqa: BLE001
                res[f"{name}_error"] = f"{type(e).__name__}: {e}"[-600:]
    return res


def dry_one(problem_path: str, solution_path: str, row: dict) -> dict:
    """--dry (no GPU): import both files, run ModelNew against a stand-in of the kernel on the
    meta device (kernelstrain.workdir.dry) and compile a CUDA solution's units (no link)."""
    sys.path.insert(0, str(HARNESS.parents[3]))
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    from kernelstrain.workdir.dry import dry_call
    from kernelstrain.workdir.subject import Candidate, Subject
    torch, harness, problem, solution = _load(problem_path, solution_path)
    module = REGISTRY[row["module"]]
    text = Path(solution_path).read_text()
    subject = Subject(task_id=row["task_id"], kind="single", split=row["split"],
                      reference=Path(problem_path).read_text(),
                      dtype=row["dtype"], title=row["title"], desc="", module=module,
                      task=make_task(module, row["gpu"], row["dtype"], row["shape"]), gpu=row["gpu"], arch=row["arch"],
                      candidate=Candidate(text, "dry", "ok", None))
    res = {"compiled": True, "correct": False, "dry": dry_call(subject, text)}
    if res["dry"] is None and hasattr(solution, "_sources"):
        try:
            harness.dry_build(solution, Path(tempfile.mkdtemp(prefix="ks_dry_")))
        except RuntimeError as e:
            res.update(compiled=False, error=str(e))
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


def run_sub(mode: str, args: list, timeout: float) -> dict:
    """This script's `--one` / `--ref` in a process of its own: its @@KB result line."""
    try:
        p = subprocess.run([sys.executable, __file__, mode, *map(str, args)], capture_output=True, text=True,
                           timeout=timeout)
        line = next((x for x in reversed(p.stdout.splitlines()) if x.startswith("@@KB ")), None)
        return json.loads(line[5:]) if line else {"error": f"exit {p.returncode}: {p.stderr[-800:]}"}
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        phases = [x.split(" ", 2)[1:] for x in out.splitlines() if x.startswith("@@PHASE ")]
        where = f" in '{phases[-1][1]}' (for {time.time() - float(phases[-1][0]):.0f} s)" if phases else ""
        return {"error": f"timeout after {timeout} s{where}", "timeout": True}


def wait_for_pch(impl: str) -> None:
    """A CUDA build waits for the file KS_WAIT_FOR (the device script's first build, which writes
    PyTorch's precompiled header, touches it), so no two builds write that header at once."""
    flag = os.environ.get("KS_WAIT_FOR")
    while impl == "cuda" and flag and not os.path.exists(flag):
        time.sleep(1)


def delay_builds(jobs: list, by: int) -> list:
    """Each CUDA solution moved `by` places later (the first build writes PyTorch's precompiled
    header meanwhile), not behind every other job: a run cut by its budget still has them.

    >>> cu, tr = {"impl": "cuda"}, {"impl": "triton"}
    >>> [j[0] + j[1].get("impl", "")[:1] for j in delay_builds([("sol", cu), ("ref", {}), ("sol", tr), ("sol", cu)], 2)]
    ['ref', 'solc', 'solt', 'solc']
    """
    return [j for _, j in sorted(((i + (by if j[0] == "sol" and j[1]["impl"] == "cuda" else 0), i), j)
                                 for i, j in enumerate(jobs))]


def oom(row: dict) -> bool:
    return "out of memory" in (row.get("error") or "").lower()


KEYS = ("file", "status", "module", "impl", "episode", "step", "best", "problem_id")


def join_speedups(sols: list, refs: dict) -> None:
    """speedup_vs_eager / _compile of each correct, timed solution: its own eager timing first,
    else its problem's in refs (problem_id -> {eager_ms, compile_ms})."""
    for r in sols:
        for base in ("eager", "compile"):
            r.pop(f"speedup_vs_{base}", None)
            b = (r.get("eager_ms") if base == "eager" else None) or refs.get(r["problem_id"], {}).get(f"{base}_ms")
            if r.get("correct") and r.get("custom_ms") and b:
                r[f"speedup_vs_{base}"] = b / r["custom_ms"]


def write_rows(path, rows: list) -> None:
    with open(path, "w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _ratio(xs, f):
    v = f(xs) if xs else None
    return "-" if v is None else f"{v:.2f}x"


def table(rows: list) -> str:
    lines = ["| recorded status | impl | n | compiled | correct | vs eager: geomean / median (n) "
             "| vs torch.compile: geomean / median (n) |", "|---|---|---|---|---|---|---|"]
    groups = defaultdict(list)
    for r in rows:
        groups[(r["status"], r["impl"])].append(r)
        groups[(r["status"], "all")].append(r)
    for (status, impl), rs in sorted(groups.items()):
        n = len(rs)
        comp = sum(r["compiled"] for r in rs)
        corr = sum(r["correct"] for r in rs)
        cells = []
        for base in ("eager", "compile"):
            xs = [r[f"speedup_vs_{base}"] for r in rs if r["correct"] and r.get(f"speedup_vs_{base}")]
            cells.append(f"{_ratio(xs, geomean)} / {_ratio(xs, statistics.median)} ({len(xs)})")
        hung = sum(bool(r.get("timeout")) for r in rs)     # not a verified result either way
        note = f" ({hung} timed out)" if hung else ""
        lines.append(f"| {status} | {impl} | {n} | {comp}/{n} = {comp / n:.1%} | {corr}/{n} = {corr / n:.1%}{note} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kb")
    ap.add_argument("--sample", default="ok=200,wrong_result=50", help="status=N,... (solutions of each status)")
    ap.add_argument("--gpu", default="H100,H200", help="only solutions of these GPUs' tasks, comma-separated ('' for all)")
    ap.add_argument("--write-sample", help="copy the chosen solutions, their problems and an index to this "
                    "directory (to carry), and stop")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1), help="processes at once")
    ap.add_argument("--gpu-slots", type=int, default=4, help="processes holding GPU memory at once")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--perf-trials", type=int, default=20)
    ap.add_argument("--compile-problems", type=int, default=10 ** 6,
                    help="time torch.compile for the first N problems only")
    ap.add_argument("--budget", type=float, default=300.0, help="seconds after which no solution starts")
    ap.add_argument("--case-timeout", type=float, default=240.0)
    ap.add_argument("--skip", help="a previous results file: solutions and problems it has are not run again")
    ap.add_argument("--first", help="a file of solution paths to run before the others")
    ap.add_argument("--build-delay", type=int, default=40,
                    help="with KS_WAIT_FOR: CUDA solutions start this many jobs later (see delay_builds)")
    ap.add_argument("--oom-retry", type=float, default=60.0,
                    help="solutions that ran out of their memory share run again, one at a time with most of "
                    "the GPU, until this many seconds after --budget")
    ap.add_argument("--eager-in-solution", action="store_true",
                    help="each solution times eager Model in its own process; reference processes only for "
                    "torch.compile, for the first --compile-problems problems not timed in --skip, --ref-jobs at once")
    ap.add_argument("--ref-jobs", type=int, default=3, help="with --eager-in-solution: torch.compile timings at once "
                    "(CPU work inside a GPU slot)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dry", action="store_true", help="no GPU: check imports, ModelNew's calls and the CUDA "
                    "compiles of the chosen solutions (kernelstrain.workdir.dry)")
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
    if args.first:     # a re-run: these solutions (earlier misses) first, in case the budget ends the run
        first = set(Path(args.first).read_text().split())
        chosen = [s for s in chosen if s["file"] in first] + [s for s in chosen if s["file"] not in first]
    done = [json.loads(x) for x in open(args.skip)] if args.skip else []
    have = {r.get("file") for r in done if "skipped" not in r}
    os.environ.setdefault("KS_GPU_LOCK", os.path.join(tempfile.gettempdir(), "ks_gpu.lock"))
    os.environ.setdefault("KS_GPU_SLOTS", str(args.gpu_slots))
    deadline = time.time() + args.budget
    pids = list(dict.fromkeys(s["problem_id"] for s in chosen))
    compiled_refs = [p for p in pids if f"ref:{p}" not in have][:args.compile_problems]
    jobs = []          # each problem's reference timing just before its first solution
    for s in chosen:
        wanted = s["problem_id"] in compiled_refs if args.eager_in_solution else f"ref:{s['problem_id']}" not in have
        if not args.dry and wanted and ("ref", s["problem_id"]) not in jobs:
            jobs.append(("ref", s["problem_id"]))
        if s["file"] not in have:
            jobs.append(("sol", s))
    if os.environ.get("KS_WAIT_FOR"):  # while the first build writes the header: the jobs that need no build
        jobs = delay_builds(jobs, args.build_delay)

    def job(item, force=False):
        kind, x = item
        if kind == "ref":
            if time.time() > deadline:
                return {"file": f"ref:{x}", "kind": "reference", "problem_id": x, "skipped": "budget spent"}
            p = problems[x]
            compile_too = x in compiled_refs if args.eager_in_solution else pids.index(x) < args.compile_problems
            res = run_sub("--ref", [kb / p["file"], json.dumps({"perf_trials": args.perf_trials, "compile_too": compile_too,
                          "needs_grad": p.get("needs_grad", False)})], args.case_timeout)
            return {"file": f"ref:{x}", "kind": "reference", "problem_id": x, **res}
        row = {k: x.get(k) for k in KEYS}
        wait_for_pch(x["impl"])
        if time.time() > deadline and not force:
            return {**row, "compiled": False, "correct": False, "skipped": "budget spent"}
        p = problems[x["problem_id"]]
        opts = {"trials": args.trials, "perf_trials": args.perf_trials, "needs_grad": p.get("needs_grad", False),
                "tol": p.get("output_tolerances") or p.get("tolerance"), "time_eager": args.eager_in_solution}
        if args.dry:
            res = run_sub("--dry-one", [kb / p["file"], kb / x["file"], json.dumps({"row": p})], args.case_timeout)
        else:
            res = run_sub("--one", [kb / p["file"], kb / x["file"], json.dumps(opts)], args.case_timeout)
        return {**row, "compiled": False, "correct": False, **res}
    rows = [r for r in done if "skipped" not in r]
    with open(args.out, "w") as fh, concurrent.futures.ThreadPoolExecutor(args.jobs) as pool, \
            concurrent.futures.ThreadPoolExecutor(args.ref_jobs) as ref_pool:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
        # each row written as it completes (a run killed from outside keeps every finished case)
        futures = [(ref_pool if kind == "ref" and args.eager_in_solution else pool).submit(job, (kind, x))
                   for kind, x in jobs]
        for i, future in enumerate(concurrent.futures.as_completed(futures)):
            row = future.result()
            rows.append(row)
            fh.write(json.dumps(row) + "\n")
            fh.flush()
            mark = "ref" if row.get("kind") == "reference" else \
                f"{row['status']:12s} {'C' if row['compiled'] else '-'}{'V' if row['correct'] else '-'}"
            print(f"[{i + 1}/{len(jobs)}] {mark} {row['file']} {(row.get('dry') or row.get('error') or '')[:160]}",
                  flush=True)
        again = [i for i, r in enumerate(rows) if r.get("kind") != "reference" and oom(r)]
        for i in again:     # the memory share was the limit, not the GPU
            if time.time() > deadline + args.oom_retry:
                break
            os.environ["KS_GPU_MEM_FRACTION"] = "0.9"
            sol = next(s for s in chosen if s["file"] == rows[i]["file"])
            rows[i] = {**job(("sol", sol), force=True), "oom_retry": True}
            fh.write(json.dumps(rows[i]) + "\n")
            print(f"[oom retry] {'C' if rows[i]['compiled'] else '-'}{'V' if rows[i]['correct'] else '-'} {rows[i]['file']}",
                  flush=True)
    if args.dry:
        bad = [r for r in rows if r.get("dry") or not r.get("compiled")]
        print(f"\ndry run: {len(rows)} solutions, {len(bad)} with a problem")
        return 1 if bad else 0
    ref = {r["problem_id"]: r for r in rows if r.get("kind") == "reference" and "skipped" not in r}
    sols = [r for r in rows if r.get("kind") != "reference" and "skipped" not in r]
    join_speedups(sols, ref)
    write_rows(args.out, rows)            # again, with the speedups joined in
    print(f"\n{len(sols)} of {len(chosen)} chosen solutions ran ({len(ref)} problems timed)\n")
    print(table(sols))
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] in ("--one", "--ref", "--dry-one"):
        opts = json.loads(sys.argv[-1])
        fn = {"--one": evaluate_one, "--ref": reference_times, "--dry-one": dry_one}[sys.argv[1]]
        try:
            result = fn(*sys.argv[2:-1], **opts)
        except Exception as e:  # noqa: BLE001
            result = {"error": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()[-1500:]}
        print("@@KB " + json.dumps(result), flush=True)
        sys.exit(0)
    sys.exit(main())
