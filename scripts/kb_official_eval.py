"""Score a KernelBench export (`kernelstrain export kernelbench`) with KernelBench's OWN code: its
static checker (`kernel_static_checker.validate_kernel_static`) on every solution of the export,
and `eval.eval_kernel_against_ref` on a sample: per module and status over the exports (tasks
of the chosen GPUs; see sample()), with `backend` the solution's impl and `precision` the
problem's (index.json). KernelBench is not part of this project: pass the path of a checkout
(ScalingIntelligence/KernelBench) and it is imported from there.

    python3 scripts/kb_official_eval.py KERNELBENCH EXPORT [EXPORT ...] [--gpu H100,H200]
        [--status ok,wrong_result] [--trials 5] [--jobs 12] [--seed 0] [--pick LIST] [--impl cuda|triton]
        [--part K/N] [--deadline S] [--out results.jsonl] [--table table.txt] [--dry]
    python3 scripts/kb_official_eval.py KERNELBENCH EXPORT --static-only
    python3 scripts/kb_official_eval.py KERNELBENCH EXPORT ... --write-sample DIR   (the sample's files only)

Each evaluation runs in a process of its own (a crash or a sticky CUDA error is that case's
result). KernelBench's package imports modules its evaluation never calls (LLM clients, dotenv,
tqdm, requests, pydantic's BaseModel for its result record): where one is not installed, that
child process gets a stand-in module and the row names it. The static checker is loaded from its
file alone (plain `re`). A case whose verdict disagrees with its label (ok not correct, or
wrong_result correct) is diagnosed in the same process after KernelBench's verdict: per trial
(KernelBench's seeds) the elements outside its tolerance, the worst element, with the outputs
poisoned (NaN / 0xFF before the kernel writes) and not, and whether two runs on one input agree.
--dry rehearses on a machine without a GPU, every case in one process: KernelBench's own loading
of problem and solution (the CUDA build a stand-in), both models built after its seed; nothing
runs on a device.
Prints the table of compiled / correct by recorded status and impl (also to --table).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import hashlib
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import types
from collections import defaultdict
from pathlib import Path

PRECISION = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}
TOLERANCE = {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}   # KernelBench's get_tolerance_for_precision


class _Record:
    """pydantic.BaseModel as far as KernelBench's result record needs: keyword fields, class defaults."""

    def __init__(self, **fields):
        for k, v in fields.items():
            setattr(self, k, v)


# modules KernelBench imports at the top that its evaluation never calls, and their stand-ins
_UNUSED = {"openai": {"OpenAI": None}, "litellm": {"completion": None}, "dotenv": {"load_dotenv": lambda *a, **k: None},
           "tqdm": {"tqdm": lambda it=None, *a, **k: it}, "requests": {}, "pydantic": {"BaseModel": _Record}}


def _import_kernelbench(root: Path):
    """KernelBench's eval module; [names of the modules given stand-ins]."""
    sys.path.insert(0, str(root / "src"))
    stood_in = []
    for name, members in _UNUSED.items():
        if name not in sys.modules and importlib.util.find_spec(name) is None:   # (a stand-in has no spec)
            stand_in = types.ModuleType(name)
            stand_in.__dict__.update(members)
            sys.modules[name] = stand_in
            stood_in.append(name)
    from kernelbench import eval as kb_eval
    return kb_eval, stood_in


def _static_checker(root: Path):
    """KernelBench's kernel_static_checker, loaded from its file (it needs only `re`)."""
    spec = importlib.util.spec_from_file_location("kb_static_checker",
                                                  root / "src" / "kernelbench" / "kernel_static_checker.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _diagnose(kb_eval, problem: str, solution: str, backend: str, precision: str, trials: int,
              build_dir: str = None) -> list:
    """Per trial of KernelBench's seeds: elements outside its tolerance and the worst one, with the
    outputs poisoned and not; whether ModelNew gives the same output twice on one input; and both
    outputs against the reference run in fp32 on the same (cast) inputs (`vs_fp32`: elements of
    each outside the tolerance of that truth, each one's worst error), which says whether a
    disagreement is the candidate's error or the reference's own at the precision."""
    import torch
    dtype, tol = getattr(torch, PRECISION[precision]), TOLERANCE[precision]
    context = {}
    model_cls, get_init_inputs, get_inputs = kb_eval.load_original_model_and_inputs(problem, context)
    if backend == "triton":
        new_cls, tmp = kb_eval.load_custom_model_with_tempfile(solution, entry_point="ModelNew")
        os.remove(tmp.name)
    else:
        new_cls = kb_eval.load_custom_model(solution, context, build_dir)   # the extension KernelBench just loaded
    poison = new_cls.forward.__globals__["set_poison"]             # the solution's switch (off in KernelBench's run)
    ext = new_cls.forward.__globals__.get("kernel_extension")
    loaded = {"extension": getattr(ext, "__file__", None),        # the library the forward calls (CUDA)
              "solution_sha1": hashlib.sha1(solution.encode()).hexdigest()[:12]}
    kb_eval.set_seed(42)
    init = [x.to(dtype=dtype).cuda() if torch.is_tensor(x) else x for x in get_init_inputs()]
    with torch.no_grad():
        kb_eval.set_seed(42)
        model = model_cls(*init).cuda().to(dtype=dtype)
        kb_eval.set_seed(42)
        new = new_cls(*init).cuda().to(dtype=dtype)
        kb_eval.set_seed(42)
        truth = model_cls(*[x.float() if torch.is_tensor(x) else x for x in init]).cuda().float()
    torch.manual_seed(42)
    seeds = [torch.randint(0, 2**32 - 1, (1,)).item() for _ in range(trials)]
    out = []
    with torch.no_grad():
        for seed in seeds:
            kb_eval.set_seed(seed)
            inputs = [x.to(dtype=dtype).cuda() if torch.is_tensor(x) else x for x in get_inputs()]
            ref = model(*inputs)
            row = {"seed": seed}
            for poisoned in (False, True):
                poison(poisoned)
                got = new(*inputs)
                torch.cuda.synchronize()
                diff = (ref.float() - got.float()).abs()
                bad = ~diff.le(tol + tol * got.float().abs())
                worst = int(diff.nan_to_num(float("inf")).argmax())
                row["poisoned" if poisoned else "plain"] = {
                    "outside": int(bad.sum()), "numel": bad.numel(), "worst_index": worst,
                    "ref": float(ref.reshape(-1)[worst]), "new": float(got.reshape(-1)[worst])}
            poison(False)
            row["repeatable"] = bool(torch.equal(new(*inputs), new(*inputs)))
            exact = truth(*[x.float() if torch.is_tensor(x) else x for x in inputs]).float()
            got = new(*inputs).float()
            row["vs_fp32"] = {}
            for name, t in (("ref", ref.float()), ("new", got)):
                err = (t - exact).abs()
                far = ~err.le(tol + tol * t.abs())
                row["vs_fp32"][name] = {"outside": int(far.sum()), "worst": float(err.nan_to_num(float("inf")).max())}
            bad = ~(ref.float() - got).abs().le(tol + tol * got.abs())
            if bool(bad.any()):
                i = int(bad.reshape(-1).nonzero()[0])
                row["first_outside"] = {"index": i, "ref": float(ref.reshape(-1)[i]), "new": float(got.reshape(-1)[i]),
                                        "fp32": float(exact.reshape(-1)[i])}
            out.append(row)
    return [loaded] + out


def last_level_catch(e: Exception, seconds: float) -> dict:
    """The verdict KernelBench's batch evaluation (scripts/eval_from_generations.py, its "last level
    catch") records when eval_kernel_against_ref itself raises, e.g. a kernel's illegal memory access
    surfacing in its cleanup: not compiled, not correct, the error kept (`cuda_error` when the
    message says "CUDA error", else `other_error`)."""
    key = "cuda_error" if "CUDA error" in str(e) else "other_error"
    return {"compiled": False, "correct": False, "last_level_catch": True,
            "metadata": {key: f"{type(e).__name__}: {str(e)[:600]}"}, "eval_s": round(seconds, 1)}


def evaluate(root: Path, problem: Path, solution: Path, backend: str, precision: str, trials: int,
             status: str, always_diagnose: bool = False, build_dir: str = None) -> dict:
    """One solution through eval_kernel_against_ref (in this process; a CUDA one with the build_dir
    its prebuild compiled into, as KernelBench's own batch evaluation passes it); diagnosed after it
    when the verdict disagrees with the label, or always (the pinned cases)."""
    kb_eval, stood_in = _import_kernelbench(root)
    import torch
    t0 = time.time()
    try:
        result = kb_eval.eval_kernel_against_ref(
            problem.read_text(), solution.read_text(), seed_num=42, num_correct_trials=trials,
            measure_performance=False, device=0, backend=backend, precision=getattr(torch, PRECISION[precision]),
            build_dir=build_dir)
    except Exception as e:  # noqa: BLE001 - KernelBench's own batch evaluation catches here too
        return last_level_catch(e, time.time() - t0)
    if result is None:                       # KernelBench's "lock file error, please retry"
        return {"compiled": None, "correct": None, "error": "retry (lock file)", "eval_s": round(time.time() - t0, 1)}
    meta = {k: str(v)[:600] for k, v in result.metadata.items() if k not in ("hardware", "device")}
    row = {"compiled": result.compiled, "correct": result.correctness, "metadata": meta,
           "hardware": result.metadata.get("hardware"), "eval_s": round(time.time() - t0, 1), "stand_ins": stood_in}
    if build_dir:     # whether the evaluation found the prebuilt extension or compiled it again
        row["rebuilt"] = any(f.stat().st_mtime > t0 for f in Path(build_dir).rglob("*.so"))
    if result.compiled and (always_diagnose or bool(result.correctness) != (status == "ok")):
        try:
            row["diagnosis"] = _diagnose(kb_eval, problem.read_text(), solution.read_text(), backend, precision, trials,
                                         build_dir)
        except Exception as e:  # noqa: BLE001 - a failing diagnosis is reported, the verdict stands
            row["diagnosis"] = f"{type(e).__name__}: {str(e)[:300]}"
    return row


def rehearse(kb_eval, problem: str, solution: str, backend: str, build_dir: str) -> dict:
    """KernelBench's loading steps on a machine without a GPU: the problem exec'd into a context,
    a CUDA solution through build_compile_cache (the prebuild) and then exec'd into the same
    context with that build_dir (load_inline a stand-in that records the builds), a Triton one
    imported from a temporary file, Model and ModelNew built after its seed."""
    from unittest import mock
    builds = []

    def load_inline(name, cpp_sources, cuda_sources=None, **kwargs):
        builds.append(name)
        return mock.Mock(name=name)

    context = {}
    model_cls, get_init_inputs, _ = kb_eval.load_original_model_and_inputs(problem, context)
    kb_eval.set_seed(42)
    init = get_init_inputs()
    kb_eval.set_seed(42)
    model_cls(*init)
    with mock.patch("torch.utils.cpp_extension.load_inline", load_inline):
        if backend == "triton":
            new_cls, tmp = kb_eval.load_custom_model_with_tempfile(solution, entry_point="ModelNew")
            os.remove(tmp.name)
        else:
            built, _, error = kb_eval.build_compile_cache(solution, build_dir=build_dir)
            if not built:
                raise RuntimeError(f"build_compile_cache: {error}")
            new_cls = kb_eval.load_custom_model(solution, context, build_dir)
        kb_eval.set_seed(42)
        new_cls(*init)
    return {"compiled": None, "correct": None, "dry": {"loaded": True, "cuda_builds": builds}}


def _rehearsal(root: Path):
    """The dry run's evaluator: every case in this process, one after the other (nothing on a
    device to isolate; one import of torch and KernelBench instead of one per case)."""
    kb_eval, stood_in = _import_kernelbench(root)

    def one(row: dict) -> dict:
        ex = Path(row["export"])
        try:
            res = rehearse(kb_eval, (ex / row["problem"]).read_text(), (ex / row["file"]).read_text(), row["impl"],
                           row.get("build_dir"))
        except Exception as e:  # noqa: BLE001 - the case's own failure is its result
            res = {"compiled": None, "correct": None, "dry": {"loaded": False, "cuda_builds": []},
                   "error": f"{type(e).__name__}: {str(e)[:300]}"}
        return {**row, **res, "stand_ins": stood_in}
    return one


def static_checks(root: Path, exports: list) -> dict:
    """{(export, file): (valid, errors)} for every solution of every export."""
    checker = _static_checker(root)
    out = {}
    for ex in exports:
        index = json.loads((ex / "index.json").read_text())
        precision = {p["problem_id"]: p.get("precision", p["dtype"]) for p in index["problems"]}
        for s in index["solutions"]:
            valid, errors, _ = checker.validate_kernel_static((ex / s["file"]).read_text(), backend=s["impl"],
                                                              precision=precision[s["problem_id"]])
            out[(str(ex), s["file"])] = (valid, errors)
    return out


# seconds a stage needs at least: one with less time left before the deadline is not started, rather
# than started and killed as a timeout. A CUDA case's build (prebuild; 20-50 s on the H200 with others
# beside it), then its five trials with the extension built (loading it, ~10-20 s); a CUDA case without
# a prebuild does both in its evaluation; a Triton case compiles its kernels in its trials (3-30 s).
START_NEEDS = {"build": 45, "cuda_built": 20, "cuda": 75, "triton": 30}
QUICK_MS = 1.0     # a sampled problem's baseline time at most (ms): its inputs are drawn on the CPU five times
QUICK_BYTES = 1e9  # and its minimum DRAM traffic (the op's Cost: inputs read, outputs written once) at most
MAX_BYTES = 2e9    # a module whose problems all move more is left to kb_pinned.py --fill (a case at a small
                   # shape): a grad_clip over 3.2e9 fp32 elements drew its inputs on the CPU past a 143 s timeout
FUSED_PICKS = 3    # fused programs (a module each) sampled per impl and status


def _problem_bytes(p: dict) -> float:
    """The problem's minimum DRAM traffic (its op module's Cost at its task); 0 for a fused program's."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from kernelstrain.ops import REGISTRY
    from kernelstrain.tasks import make_task
    m = REGISTRY.get(p.get("module"))
    return m.cost(make_task(m, p["gpu"], p["dtype"], p["shape"])).bytes if m and p.get("shape") else 0


def _group(s: dict) -> str:
    """The sampling group of a solution: its module, or 'fused:<impl>' for a fused program's."""
    return f"fused:{s['impl']}" if s["file"].startswith("solutions/level2/") else s["module"]


def sample(exports: list, gpus: set, statuses: tuple, seed: int, pick: set = None) -> list:
    """Per module and status, over all the exports, one solution of the chosen GPUs (FUSED_PICKS
    per impl and status for fused programs), picked by `seed` among those whose problem's baseline
    takes at most QUICK_MS and moves at most QUICK_BYTES (else the one moving least, if at most
    MAX_BYTES); every one of a kb_pinned.py directory; or, with
    `pick` ({(export directory name, solution file)}), exactly those solutions. CUDA cases first
    (their builds take longest)."""
    rng, groups = random.Random(seed), defaultdict(list)
    for ex in exports:
        index = json.loads((ex / "index.json").read_text())
        problems = {p["problem_id"]: p for p in index["problems"]}
        for s in index["solutions"]:
            if pick is not None:
                key = (ex.name, s["file"]) if (ex.name, s["file"]) in pick else None
            elif s["gpu"] in gpus and s["status"] in statuses:
                key = (ex.name, s["file"]) if "pinned" in index else (_group(s), s["status"])
            else:
                key = None
            if key:
                groups[key].append((ex, s, problems[s["problem_id"]]))
    picked = []
    for key in sorted(groups):
        cands = [c + (_problem_bytes(c[2]),) for c in groups[key]]
        least = min(cands, key=lambda c: (c[3], c[2].get("baseline_ms") or 0))
        quick = [c for c in cands if (c[2].get("baseline_ms") or 0) <= QUICK_MS and c[3] <= QUICK_BYTES] or \
            ([least] if least[3] <= MAX_BYTES else [])
        n = FUSED_PICKS if key[0].startswith("fused:") else 1
        for ex, s, p, _ in rng.sample(quick, min(n, len(quick))):
            picked.append({"export": str(ex), "module": s["module"], "impl": s["impl"], "status": s["status"],
                           "tag": s["tag"], "gpu": s["gpu"], "file": s["file"], "problem": p["file"],
                           "precision": p.get("precision", p["dtype"]), "diagnose": ex.name == "pinned"})
    return sorted(picked, key=lambda r: (not r["diagnose"], r["impl"] != "cuda"))   # pinned first


def run_order(rows: list, first: set) -> list:
    """The order the cases start in: the diagnosed (pinned) ones, then those of the modules in `first`
    ('fused' for the fused programs), then the rest; within each, sample()'s order (CUDA first)."""
    return sorted(rows, key=lambda r: not r["diagnose"] and _group(r).split(":")[0] not in first)


def write_sample(rows: list, out: Path) -> None:
    """The sample's problems and solutions, and an index.json of just them, per export under `out`."""
    by_export = defaultdict(list)
    for r in rows:
        by_export[r["export"]].append(r)
    for ex, rs in by_export.items():
        index = json.loads((Path(ex) / "index.json").read_text())
        files = {r["file"] for r in rs}
        sols = [s for s in index["solutions"] if s["file"] in files]
        ids = {s["problem_id"] for s in sols}
        dst = out / Path(ex).name
        for rel in files | {p["file"] for p in index["problems"] if p["problem_id"] in ids}:
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(Path(ex) / rel, dst / rel)
        (dst / "index.json").write_text(json.dumps({**index, "solutions": sols,
                                                    "problems": [p for p in index["problems"] if p["problem_id"] in ids]},
                                                   indent=1) + "\n")


def prebuild(root: Path, solution: Path, build_dir: str) -> dict:
    """A CUDA solution compiled on the CPU by KernelBench's own build_compile_cache into build_dir:
    the first stage of its batch evaluation (compile.batch_compile), after which
    eval_kernel_against_ref, given the same build_dir, loads the extension (ninja finds it built)."""
    kb_eval, _ = _import_kernelbench(root)
    t0 = time.time()
    built, _, error = kb_eval.build_compile_cache(solution.read_text(), verbose=False, build_dir=build_dir)
    return {"built": built, "build_s": round(time.time() - t0, 1), **({} if built else {"build_error": str(error)[:600]})}


def _run_child(args: list, timeout: int, env: dict = None) -> dict:
    """This script's one-case mode in a process of its own: its last stdout line, parsed."""
    try:
        p = subprocess.run([sys.executable, __file__] + args, capture_output=True, text=True, timeout=timeout,
                           env=None if env is None else {**os.environ, **env})
    except subprocess.TimeoutExpired:
        return {"error": f"timeout {timeout} s"}
    last = p.stdout.strip().splitlines()[-1:] or [""]
    try:
        return json.loads(last[0])
    except json.JSONDecodeError:
        return {"error": f"exit {p.returncode}: {p.stderr[-1500:]}"}


def _child(root: Path, row: dict, trials: int, timeout: int, build_dir: str = None) -> dict:
    ex = Path(row["export"])
    res = _run_child(["--one", str(root), str(ex / row["problem"]), str(ex / row["file"]), row["impl"], row["precision"],
                      str(trials), row["status"], str(int(row["diagnose"])), build_dir or "-"], timeout)
    return {**row, "compiled": None, "correct": None, **res}


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
    by_export = defaultdict(list)
    for r in rows:
        by_export[(Path(r["export"]).name, r["status"], r["impl"])].append(r)
    lines.append("by export (ex_ks default, ex_ki kernelinfer, ex_fu fused, filled, pinned): " + "; ".join(
        f"{ex} {status} {impl} {sum(bool(r['correct']) for r in rs)}/{len(rs)} correct"
        for (ex, status, impl), rs in sorted(by_export.items())))
    builds = [r for r in rows if "built" in r]
    if builds:
        times = sorted(r["build_s"] for r in builds)
        lines.append(f"CUDA prebuild (build_compile_cache): {sum(bool(r['built']) for r in builds)}/{len(builds)} built, "
                     f"median {times[len(times) // 2]} s, longest {times[-1]} s; evaluations that compiled again: "
                     f"{sum(bool(r.get('rebuilt')) for r in builds)}")
    caught = [r for r in rows if r.get("last_level_catch")]
    if caught:
        lines.append(f"eval_kernel_against_ref raised (recorded as KernelBench's batch evaluation records it: "
                     f"not compiled, not correct): {len(caught)}")
        lines.extend(f"  {r['status']:12s} {r['module']:28s} {r['tag'][:40]:40s} {str(r['metadata'])[:200]}"
                     for r in caught)
    late = [r for r in rows if r.get("error") == "deadline"]
    if late:
        lines.append(f"not started before the deadline: {len(late)} ({', '.join(sorted({r['module'] for r in late}))})")
    ran = [r for r in rows if r.get("dry") is None and r.get("error") != "deadline"]
    unscored = [r for r in ran if r["compiled"] is None]     # no verdict of KernelBench's: a timeout or a crash
    misses = [r for r in ran if r not in unscored and bool(r["correct"]) != (r["status"] == "ok")]
    pinned = [r for r in ran if r.get("diagnose") and r not in misses + unscored]
    for title, listed in (("no verdict (the case timed out or its process failed)", unscored),
                          ("label disagreements (ok not correct, or wrong_result correct)", misses),
                          ("pinned cases agreeing with their label (diagnosed all the same)", pinned)):
        lines.append(f"{title}: {len(listed)}")
        for r in listed:
            why = r.get("error") or r.get("metadata", {})
            lines.append(f"  {r['status']:12s} {r['module']:28s} {r['tag'][:40]:40s} {r['file']}: {str(why)[:300]}")
            diagnosis = r.get("diagnosis") or []
            for d in [diagnosis] if isinstance(diagnosis, str) else diagnosis:
                lines.append(f"      {json.dumps(d)[:400]}")
    dry = [r for r in rows if r.get("dry") is not None]
    if dry:
        lines.append(f"dry run (no GPU): {sum(r['dry']['loaded'] for r in dry)}/{len(dry)} loaded as KernelBench "
                     f"loads them; {sum(len(r['dry']['cuda_builds']) for r in dry)} CUDA builds asked for")
    stood_in = sorted({n for r in rows for n in r.get("stand_ins") or ()})
    if stood_in:
        lines.append(f"stand-in modules (not installed, imported by KernelBench, unused by its evaluation): "
                     f"{', '.join(stood_in)}")
    return "\n".join(lines)


def module_table(rows: list, checks: dict = None) -> str:
    """Per module and status, each case's verdict: C correct, F fails, ! against the label, - none
    (not started or no result), followed by the number of the --rows file that gave it."""
    cells = defaultdict(list)
    for r in rows:
        verdict = "-" if r.get("compiled") is None and not r.get("last_level_catch") else (
            ("C" if r["correct"] else "F") + ("" if bool(r["correct"]) == (r["status"] == "ok") else "!"))
        cells[(r["module"], r["status"])].append(f"{verdict}{r.get('call', '')}")
    lines = [f"{'module':32s} {'ok':16s} wrong_result"]
    for module in sorted({m for m, _ in cells}):
        lines.append(f"{module:32s} {' '.join(cells[(module, 'ok')]) or '.':16s} "
                     f"{' '.join(cells[(module, 'wrong_result')]) or '.'}")
    return "\n".join(lines)


def main(argv=None) -> int:
    if argv is None and sys.argv[1:2] == ["--one"]:
        root, problem, solution, backend, precision, trials, status, diagnose, build_dir = sys.argv[2:11]
        print(json.dumps(evaluate(Path(root), Path(problem), Path(solution), backend, precision, int(trials), status,
                                  diagnose == "1", None if build_dir == "-" else build_dir), default=str))
        return 0
    if argv is None and sys.argv[1:2] == ["--build"]:
        root, solution, build_dir = sys.argv[2:5]
        print(json.dumps(prebuild(Path(root), Path(solution), build_dir), default=str))
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernelbench", type=Path)
    ap.add_argument("exports", type=Path, nargs="+")
    ap.add_argument("--gpu", default="H100,H200")
    ap.add_argument("--status", default="ok,wrong_result")
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 2), help="evaluations side by side")
    ap.add_argument("--triton-jobs", type=int, help="of the --jobs slots, the most Triton evaluations may hold "
                    "(default all): the rest stay free for the CUDA cases whose builds finish meanwhile")
    ap.add_argument("--prebuild", type=int, default=0,
                    help="CUDA builds side by side before their evaluations (KernelBench's build_compile_cache into "
                         "a build_dir a case, then eval_kernel_against_ref with it); 0: each evaluation builds its own")
    ap.add_argument("--build-root", type=Path, help="the cases' build_dirs go under it (default: a new temporary folder)")
    ap.add_argument("--timeout", type=int, default=540)
    ap.add_argument("--deadline", type=int, help="seconds: no case starts later, none runs past it")
    ap.add_argument("--impl", choices=("cuda", "triton"), help="only the solutions of this impl")
    ap.add_argument("--first", default="", help="modules (comma-separated; 'fused' for the fused programs) whose "
                    "cases start first, after the diagnosed ones: what a deadline must not leave out")
    ap.add_argument("--part", help="K/N: every N-th case from the K-th (CUDA and Triton cases in their shares)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--static-only", action="store_true")
    ap.add_argument("--pick", type=Path, help="evaluate exactly these solutions: lines 'EXPORT_DIR_NAME FILE'")
    ap.add_argument("--write-sample", type=Path, help="copy the sample's files (and an index of them) here; no evaluation")
    ap.add_argument("--dry", action="store_true", help="no GPU: KernelBench's loading steps only")
    ap.add_argument("--done", type=Path, nargs="*", default=[],
                    help="--out files of earlier calls: their cases with a verdict are not run again")
    ap.add_argument("--rows", type=Path, nargs="+", help="no evaluation: the table of these --out files (a case's "
                    "row from the last file holding a verdict for it)")
    ap.add_argument("--modules", action="store_true", help="with --rows: the verdicts per module and status")
    ap.add_argument("--out", type=Path)
    ap.add_argument("--table", type=Path)
    args = ap.parse_args(argv)
    pick = {tuple(line.split()) for line in args.pick.read_text().splitlines() if line.strip()} if args.pick else None
    rows = [] if args.static_only else sample(args.exports, set(args.gpu.split(",")), tuple(args.status.split(",")),
                                              args.seed, pick)
    rows = [r for r in rows if args.impl in (None, r["impl"])]
    rows = run_order(rows, set(filter(None, args.first.split(","))))
    if args.part:
        k, n = map(int, args.part.split("/"))
        rows = rows[k - 1::n]
    done_before = {(Path(r["export"]).name, r["file"]) for path in args.done if path.exists()
                   for r in map(json.loads, path.read_text().splitlines()) if r.get("compiled") is not None}
    rows = [r for r in rows if (Path(r["export"]).name, r["file"]) not in done_before]
    if args.write_sample:
        write_sample(rows, args.write_sample)
        print(f"wrote {len(rows)} solutions and their problems under {args.write_sample}")
        return 0
    checks = static_checks(args.kernelbench, args.exports)
    if args.rows:
        latest = {}
        for n, path in enumerate(args.rows, 1):
            for line in path.read_text().splitlines():
                r = json.loads(line)
                key = (Path(r["export"]).name, r["file"])
                if key not in latest or r.get("error") != "deadline":
                    latest[key] = {**r, "call": n}
        text = (module_table if args.modules else table)(list(latest.values()), checks)
        print(text)
        if args.table:
            args.table.write_text(text + "\n")
        return 0
    os.environ.setdefault("MAX_JOBS", "2")      # ninja jobs per extension build (binding and kernel): the builds run side by side
    done = []
    if args.out:
        args.out.write_text("")
    end = time.time() + (args.deadline or 1e9)
    build_root = args.build_root or Path(tempfile.mkdtemp(prefix="kb_build_"))
    for r in rows:
        if r["impl"] == "cuda" and (args.prebuild or args.dry):
            source = (Path(r["export"]) / r["file"]).read_bytes()
            r["build_dir"] = str(build_root / hashlib.sha1(source).hexdigest()[:16])
    build_slots, eval_slots = threading.Semaphore(max(1, args.prebuild)), threading.Semaphore(args.jobs)
    build_locks = defaultdict(threading.Lock)     # one build a source: a duplicate waits, then finds it built
    triton_slots = threading.Semaphore(min(args.triton_jobs or args.jobs, args.jobs))

    def late(r, stage):    # too late to start: said so in the table, not counted as a verdict
        return end - time.time() < START_NEEDS[stage]

    def one(r):
        built = {}
        if r.get("build_dir"):
            with build_locks[r["build_dir"]], build_slots:
                if late(r, "build"):
                    return {**r, "compiled": None, "correct": None, "error": "deadline"}
                # no GPU for a build (the solutions name their arch, so none is probed): no CUDA context
                # beside the evaluations
                built = _run_child(["--build", str(args.kernelbench), str(Path(r["export"]) / r["file"]), r["build_dir"]],
                                   int(min(args.timeout, end - time.time())), {"CUDA_VISIBLE_DEVICES": ""})
        with triton_slots if r["impl"] == "triton" else contextlib.nullcontext(), eval_slots:
            if late(r, "cuda_built" if built else r["impl"]):
                return {**r, **built, "compiled": None, "correct": None, "error": "deadline"}
            return {**_child(args.kernelbench, r, args.trials, int(min(args.timeout, end - time.time())),
                             r.get("build_dir")), **built}
    if args.dry:
        one = _rehearsal(args.kernelbench)
    # a thread a case: CUDA cases wait for a build slot, then every case for an evaluation slot (Triton
    # cases take the first ones while the builds run, at most --triton-jobs of them); rows are written as
    # the cases finish
    with concurrent.futures.ThreadPoolExecutor(1 if args.dry else max(1, len(rows))) as pool:
        for fut in concurrent.futures.as_completed([pool.submit(one, r) for r in rows]):
            res = fut.result()
            done.append(res)
            print(f"{res['status']:12s} {res['impl']:6s} {res['module']:28s} compiled={res['compiled']} "
                  f"correct={res['correct']} build {res.get('build_s', '-')} eval {res.get('eval_s', '-')}"
                  f"{' ' + res['error'][:200] if res.get('error') else ''}",
                  flush=True)
            if args.out:
                with args.out.open("a") as f:
                    f.write(json.dumps(res, default=str) + "\n")
    text = table(done, checks)
    print(text)
    if args.table:
        args.table.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
