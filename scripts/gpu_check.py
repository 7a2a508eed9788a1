"""Run op-module candidates on a real NVIDIA GPU and check them against their PyTorch references.

    python3 scripts/gpu_check.py [--modules gemv_cuda,kv_append_cuda] [--exclude ...] [--variants a,b]
                                 [--out DIR] [--no-alt] [--no-bugs] [--no-fp16] [--no-time] [--time-alt]
                                 [--bug-repeats N] [--bug-all-runs] [--shape MODULE:D=V,...]
                                 [--workers N] [--budget S] [--compile-only] [--list] [--report FILE ...]

For every named module (default: every registered module with a check shape in
its op spec's check_shape) it builds one task on the H100 profile (sm_90a, the H200's
architecture) with the module's check shape, and for each variant that runs on sm_90a renders:
the default params, one other param combination (the far end of each param's range, or the most
different combination the simulator accepts), every declared bug of the variant (default params;
up to --bug-repeats runs with fresh inputs, since a race may not show on the first), and the
default params in fp16 where the module has fp16 and bf16.

CUDA renders are whole .cu files with a C++ host function `void <entry>(..., cudaStream_t)`;
an `extern "C"` trampoline (ks_entry) is appended, the file is built with nvcc into a shared
library (in parallel, cached by source hash; --compile-only builds them on a machine without a
GPU, to carry) and called through ctypes with the data pointers of torch tensors, mapped from the
reference's inputs by the module's adapter (kernelstrain/gpucheck/adapters.py). Triton renders define a Python
wrapper: the render is imported from its file and the wrapper called.

Pass 1 (correctness) runs the cases in --workers parallel worker processes (a sticky CUDA error
or a hang only costs that case): fresh random inputs, outputs poisoned (NaN / 0xFF) before the
launch, launch and asynchronous errors checked, every output element compared with the reference
(tolerance classes in adapters.TOLS: exact for pure data movement, by dtype otherwise;
sampling checked against the reference distribution). Pass 2 (timing) runs the passing non-bug
default cases (--time-alt: the alt ones too) one at a time alone on the GPU: CUDA events around
batches of back-to-back launches after a warm-up, median of the batches, rotating among input
copies when the working set fits in L2; then it restores the inputs, reruns once and checks again
(a result that changes is a race). The end table compares each timed default case with the
simulator's noise-free time on the H200 profile.

Results: one JSON object per case in DIR/results.jsonl, the tables in DIR/summary.txt and on stdout.
Needs PyTorch with CUDA (and Triton for Triton modules) except with --compile-only / --list / --report.
A module whose op spec has an entry and a check_shape needs nothing more here.
The build / worker / timing machinery lives in kernelstrain/gpucheck/runtime.py, shared with
`kernelstrain gpu-check`, which checks the steps of a generated dataset instead.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kernelstrain.gpucheck.adapters import check_shape, covered  # noqa: E402
from kernelstrain.gpucheck.runtime import GPU, build_case, run_cases  # noqa: E402
from kernelstrain.gpus import GPUS  # noqa: E402
from kernelstrain.ops import REGISTRY  # noqa: E402
from kernelstrain.sim import simulate  # noqa: E402
from kernelstrain.tasks import make_task, param_grid  # noqa: E402

MODULES = tuple(n for n in REGISTRY if check_shape(REGISTRY[n]))

# -- planning ----------------------------------------------------------------------------

def runnable_variants(module):
    feats = GPUS[GPU].features
    return [v for v in module.variants if not (v.needs - feats)]


def far_params(variant) -> dict:
    """Each param at the end of its range farthest from its default."""
    out = {}
    for p in variant.params:
        i, n = p.values.index(p.default), len(p.values)
        out[p.name] = p.values[0] if i >= (n - 1) / 2 else p.values[-1]
    return out


def alt_params(module, variant, task) -> dict | None:
    """One non-default combination the simulator accepts: the far one, else the most different."""
    if not variant.params:
        return None
    default = variant.defaults()
    combos = [far_params(variant)] + sorted(
        param_grid(variant), key=lambda c: -sum(c[k] != default[k] for k in c))
    for c in combos:
        if c != default and simulate(module, variant, c, task).ok:
            return c
    return None


def plan(names, variants=None, alt=True, bugs=True, fp16=True, bug_repeats=3, bug_all_runs=False,
         shapes=None) -> list:
    cases = []
    for name in names:
        module = REGISTRY[name]
        shape = (shapes or {}).get(name) or check_shape(module) or module.shapes[len(module.shapes) // 2]
        dtype = "bf16" if "bf16" in module.dtypes else module.dtypes[0]
        task = make_task(module, GPU, dtype, shape)
        for v in runnable_variants(module):
            if variants and v.tag not in variants:
                continue
            runs = [("default", v.defaults(), None, dtype)]
            a = alt_params(module, v, task) if alt else None
            if a is not None:
                runs.append(("alt", a, None, dtype))
            if bugs:
                runs += [(f"bug:{b}", v.defaults(), b, dtype) for b in v.bugs]
            if fp16 and dtype != "fp16" and "fp16" in module.dtypes:
                runs.append(("default", v.defaults(), None, "fp16"))
            for kind, params, bug, dt in runs:
                cases.append({"idx": len(cases), "module": name, "variant": v.tag, "kind": kind, "params": params,
                              "bug": bug, "dtype": dt, "shape": dict(shape), "bug_repeats": bug_repeats,
                              "bug_all_runs": bug_all_runs, "main": dt == dtype,
                              "id": f"{name}|{dt}|{v.tag}|{kind}"})
    return cases


def render_case(case: dict, build_dir: Path) -> dict:
    module = REGISTRY[case["module"]]
    task = make_task(module, GPU, case["dtype"], case["shape"])
    case["code"] = module.render(module.variant(case["variant"]), case["params"], task, case["bug"])
    return build_case(case, build_dir)


def summarize(results: list) -> str:
    lines = []
    by_mod = {}
    for r in results:
        by_mod.setdefault(r["module"], {}).setdefault(r["variant"], []).append(r)
    wrong, harmless = [], []
    for mod, variants in by_mod.items():
        lines.append(f"\n{mod}  shape={next(iter(variants.values()))[0]['shape']}")
        lines.append(f"  {'variant':26} {'default':22} {'alt':22} {'fp16':10} bugs")
        for tag, rs in variants.items():
            cell = {}
            bugs = []
            for r in rs:
                if r["kind"].startswith("bug:"):
                    name = r["kind"][4:]
                    runs, failed = r.get("runs", 1), r.get("failed_runs")
                    if r["ok"]:
                        status = f"harmless({runs}x)"
                        harmless.append(f"{mod}/{tag}/{name}")
                    elif r.get("error") and not r["error"].startswith("wrong after"):
                        status = "ERR"                   # crashed / hung / did not compile: not a wrong result
                        if r["error"].startswith(("compile error", "not run", "worker could not")):
                            status = "NOTRUN" if r["error"].startswith(("not run", "worker")) else "CERR"
                    else:
                        status = "fails" + (f"({failed}/{runs})" if failed is not None and runs > 1 else "")
                    bugs.append(f"{name}:{status}")
                    continue
                col = "fp16" if r["dtype"] == "fp16" and any(x["dtype"] != "fp16" for x in rs) else r["kind"]
                if r["ok"]:
                    txt = "ok" + (f" {r['time_ms']:.3f}ms" if r.get("time_ms") else "")
                else:
                    wrong.append(f"{r['id']} {r['params']}: " + (r.get("error") or "").split("\n")[0][:100]
                                 + (f" rel_l2={r['rel_l2_err']:.2e} nbad={r['nbad']}" if r.get("nbad") else ""))
                    txt = ("NOTRUN" if (r.get("error") or "").startswith("not run") else "ERR") if r.get("error") \
                        else f"WRONG {r['rel_l2_err']:.1e}"
                cell[col] = txt
            lines.append(f"  {tag:26} {cell.get('default', '-'):22} {cell.get('alt', '-'):22} "
                         f"{cell.get('fp16', '-'):10} {' '.join(bugs)}")
    lines.append(f"\ncases: {len(results)}  passing: {sum(r['ok'] for r in results)}")
    lines.append(f"wrong/erroring non-bug candidates: {len(wrong)}")
    lines += [f"  {w}" for w in wrong]
    lines.append(f"harmless bugs (passed): {len(harmless)}")
    lines += [f"  {h}" for h in harmless]
    return "\n".join(lines)


def sim_table(results: list) -> str:
    """Measured vs simulated (noise-free, H200 profile) time of the passing default cases."""
    lines = ["\nsimulator vs measured (H200; default params; main dtype; L2 = working set L2-resident "
             "even after rotation)", f"  {'module':26} {'variant':26} {'meas ms':>9} {'sim ms':>9} {'sim/meas':>8}"]
    ratios, per_mod = [], {}
    for r in results:
        if not (r["ok"] and r.get("time_ms") and r["kind"] == "default" and r["bug"] is None and r.get("main")):
            continue
        module = REGISTRY[r["module"]]
        s = simulate(module, module.variant(r["variant"]), r["params"], make_task(module, "H200", r["dtype"], r["shape"]))
        ratio = s.time_ms / r["time_ms"] if s.ok else None
        if ratio:
            ratios.append(ratio)
            per_mod.setdefault(r["module"], []).append(ratio)
        lines.append(f"  {r['module']:26} {r['variant']:26} {r['time_ms']:9.4f} "
                     f"{(f'{s.time_ms:9.4f}' if s.ok else 'sim err'):>9} {(f'{ratio:8.2f}' if ratio else '-'):>8}"
                     + ("  L2" if r.get("l2_resident") else ""))
    if not ratios:
        return "\n".join(lines + ["  (no timed cases)"])

    def gm(xs):
        return math.exp(sum(math.log(x) for x in xs) / len(xs))
    lines.append("\n  per module: geometric mean sim/meas, within 0.5-2")
    for mod, rs in per_mod.items():
        lines.append(f"  {mod:26} {gm(rs):6.2f}  {sum(0.5 <= x <= 2 for x in rs)}/{len(rs)}")
    lines.append(f"\n  all: geometric mean sim/meas {gm(ratios):.3f}; within 0.5-2: "
                 f"{sum(0.5 <= x <= 2 for x in ratios)}/{len(ratios)}; "
                 f"min {min(ratios):.2f}, max {max(ratios):.2f}")
    return "\n".join(lines)


def load_results(paths) -> list:
    """Merge results files: a later file's result replaces an earlier one of the same case id."""
    merged = {}
    for p in paths:
        for line in Path(p).read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                merged[r["id"]] = r
    return list(merged.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--modules", default=",".join(MODULES), help="comma-separated module names (default: all)")
    ap.add_argument("--exclude", default="", help="comma-separated module names to leave out")
    ap.add_argument("--variants", default="", help="only these variant tags (comma-separated)")
    ap.add_argument("--out", default=os.environ.get("OUT") or "/tmp/ks_gpu_check_out", help="results folder ($OUT)")
    ap.add_argument("--build-dir", default="/tmp/ks_gpu_check", help="nvcc outputs (cached by source hash)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 4, help="parallel nvcc processes")
    ap.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 4),
                    help="parallel worker processes for the correctness pass (timing runs alone)")
    ap.add_argument("--no-alt", action="store_true", help="skip the alternative param combination")
    ap.add_argument("--no-bugs", action="store_true", help="skip the bug renders")
    ap.add_argument("--no-fp16", action="store_true", help="skip the fp16 default runs")
    ap.add_argument("--no-time", action="store_true", help="skip the timing pass")
    ap.add_argument("--time-alt", action="store_true", help="time the alt params too (after every default)")
    ap.add_argument("--bug-repeats", type=int, default=3, help="runs (fresh inputs) before a bug counts as harmless")
    ap.add_argument("--bug-all-runs", action="store_true", help="run every repeat of a bug (its failure rate)")
    ap.add_argument("--shape", action="append", default=[], metavar="MODULE:D=V,...",
                    help="check shape of a module instead of SHAPES (repeatable)")
    ap.add_argument("--case-timeout", type=float, default=60.0, help="seconds before a case counts as hung")
    ap.add_argument("--budget", type=float, default=480.0, help="stop starting cases after this many seconds")
    ap.add_argument("--check-frac", type=float, default=0.7,
                    help="fraction of --budget after which the correctness pass starts no case")
    ap.add_argument("--compile-only", action="store_true", help="render and build, run nothing (no GPU needed)")
    ap.add_argument("--pack", metavar="FILE.tar.xz", help="also write the planned cases' builds to a tarball "
                    "(build here with --compile-only, carry, unpack into --build-dir there)")
    ap.add_argument("--list", action="store_true", help="print the planned cases and exit")
    ap.add_argument("--report", nargs="+", metavar="RESULTS_JSONL",
                    help="print the summary and simulator table of earlier results (later files win) and exit")
    a = ap.parse_args()
    if a.report:
        results = load_results(a.report)
        print(summarize(results))
        print(sim_table(results))
        return 0
    t_start = time.time()
    excluded = set(filter(None, a.exclude.split(",")))
    names = [n for n in a.modules.split(",") if n and n not in excluded]
    unknown = [n for n in names if n not in REGISTRY or not covered(REGISTRY[n])]
    if unknown:
        print(f"no module, check shape or adapter for: {', '.join(unknown)}")
        return 2
    shapes = {}
    for spec in a.shape:
        mod, _, dims = spec.partition(":")
        shapes[mod] = {k: int(v) for k, v in (kv.split("=") for kv in dims.split(","))}
    cases = plan(names, set(filter(None, a.variants.split(","))), not a.no_alt, not a.no_bugs, not a.no_fp16,
                 a.bug_repeats, a.bug_all_runs, shapes)
    if a.list:
        for c in cases:
            print(c["id"], c["params"])
        return 0
    if not a.compile_only and importlib.util.find_spec("torch") is None:
        print("gpu_check: PyTorch is not installed here. It needs PyTorch with CUDA and an NVIDIA GPU "
              "(Triton too for Triton modules); use --compile-only or --list on a machine without them.")
        return 2
    build_dir = Path(a.build_dir)
    build_dir.mkdir(parents=True, exist_ok=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    print(f"{len(cases)} cases, building with {a.jobs} jobs ...", flush=True)
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        for c, b in zip(cases, pool.map(lambda c: render_case(c, build_dir), cases)):
            c.update(build_ok=b["ok"], so=b.get("so"), src=b.get("src"), log=b["log"], compile_s=b["compile_s"],
                     log_path=b.get("log_path"))
    nfail = [c for c in cases if not c["build_ok"]]
    print(f"built in {time.time() - t_start:.0f} s; {len(nfail)} compile failures", flush=True)
    for c in nfail:
        print(f"  COMPILE FAIL {c['id']}\n" + "\n".join("    " + x for x in c["log"].splitlines()[-12:]))
    if a.pack:
        import tarfile
        files = sorted({c["so"] or c["log_path"] for c in cases if c["so"] or c.get("log_path")})
        with tarfile.open(a.pack, "w:xz") as tf:
            for f in files:
                tf.add(f, arcname=os.path.basename(f))
        print(f"packed {len(files)} builds into {a.pack} ({os.path.getsize(a.pack) / 1e6:.1f} MB); on the GPU "
              f"machine: tar xJf {a.pack} -C {build_dir}")
    if a.compile_only:
        return 1 if nfail else 0
    # pass 1: correctness, workers in parallel (cases of one module stay in one worker)
    work = build_dir / f"run_{os.getpid()}"            # per-pass case files and streamed results
    work.mkdir(exist_ok=True)
    results = run_cases(cases, work, work / "results_check.jsonl", a.case_timeout,
                        t_start + a.budget * (a.check_frac if not a.no_time else 1.0), a.workers, "check")
    print(f"correctness pass done at {time.time() - t_start:.0f} s", flush=True)
    # pass 2: timing, one worker alone on the GPU: the passing non-bug cases, every default first
    if not a.no_time:
        kinds = ("default", "alt") if a.time_alt else ("default",)
        timed = [dict(cases[i], time=True) for i, r in sorted(results.items())
                 if r["ok"] and r["bug"] is None and r.get("main") and r["kind"] in kinds]
        timed.sort(key=lambda c: kinds.index(c["kind"]))
        tres = run_cases(timed, work, work / "results_time.jsonl", a.case_timeout, t_start + a.budget, 1, "time")
        for i, r in tres.items():
            base = results[i]
            if (r.get("error") or "").startswith(("not run", "worker could not")):
                continue
            if r["ok"]:
                base.update({k: r[k] for k in ("time_ms", "samples", "batch", "ws_mb", "copies", "l2_resident")
                             if k in r})
            else:
                base.update(ok=False, error="timing pass: " + (r.get("error") or "wrong result"),
                            outputs=r.get("outputs"), nbad=r.get("nbad"), rel_l2_err=r.get("rel_l2_err"))
    final = [results[i] for i in sorted(results)]
    with (out / "results.jsonl").open("w") as f:
        for r in final:
            f.write(json.dumps(r) + "\n")
    text = summarize(final) + "\n" + sim_table(final)
    (out / "summary.txt").write_text(text + "\n")
    print(text)
    print(f"\ntotal {time.time() - t_start:.0f} s; results in {out / 'results.jsonl'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
