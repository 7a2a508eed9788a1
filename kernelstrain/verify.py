"""`verify`: compile a sample of a dataset's candidates (outcome x target family strata first,
then modules, GPUs and variants) with real compilers and check that each recorded
status agrees: ok and wrong_result candidates compile, compile_error candidates fail with
the recorded class of error (arch feature, shared memory, resources, syntax, type, constexpr;
for a typo, type or constexpr slip the same first error line), and recorded
shared memory matches the compiler's figure. Either layout is read: episodes.jsonl, or
sessions.jsonl (the trace's records, each step's code from its assistant turn).

nvcc (-Xptxas -v) compiles CUDA for sm_80/86/89/90a/120; Triton's compiler compiles
Triton for CUDA targets and gfx942 without a GPU. CUDA candidates for MI300X need a HIP
compiler: hipcc from ROCm 6, or Debian's clang-19 with libamdhip64-dev (device-only
compile for gfx942); without one they are reported as skipped.
"""
from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import time
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from .dataset import Dataset
from .compilers import (CompileResult, MissingCompiler, classify, compile_cuda, compile_hip, compile_triton,
                        exception_text, find_hip_compiler, first_error, tool_text)
from . import progress
from .errors import DataError, UsageError
from .fields import as_dict
from .gpus import GPUS
from .messages import fails_at_launch
from .ops import REGISTRY
from .rng import seeded_rng
from .tasks import make_task
from .reading import read_stats
from .trusted import check_code
from .writers import check_report_path, write_text_atomic

# slip classes (kernelstrain/slips: the typo is "syntax") checked to the first error line
EXACT_FIRST_ERROR = ("syntax", "type", "constexpr")
LAUNCH_TIME = "launch"   # dynamic smem over the cap, a block too big: the compiler accepts it, the launch fails


def recorded_class(error: str, failure: str | None) -> str:
    """What the record says the tools do with the code: LAUNCH_TIME (it builds, the launch
    fails; messages.fails_at_launch, as the feedback says), else the compiler's error class."""
    return LAUNCH_TIME if fails_at_launch(failure, error) else classify(error)


def comparable(first: str | None) -> str | None:
    """A first error line less what depends on the installed headers rather than the code:
    clang's typo correction (`; did you mean 'pow'?`) offers the nearest name the HIP headers
    declare (Debian's ROCm 5.2 headers here, ROCm 6's on an MI300X machine).

    >>> comparable("candidate.hip:6:7: error: use of undeclared identifier 'row'; did you mean 'pow'?")
    "candidate.hip:6:7: error: use of undeclared identifier 'row'"
    """
    return first if first is None else re.sub(r"(undeclared identifier '\w+'); did you mean '[^']*'\?$", r"\1", first)


def _rows(data: Path):
    """(file, [(line, row)]-iterator, row -> its steps with their code as stored) of a dataset,
    by its layout (layouts.Layout.stored_steps)."""
    ds = Dataset(data)
    return ds.episode_file, ds.rows(), ds.layout.stored_steps


def _round_robin(groups: dict, keys: list | None = None) -> list:
    """The groups' items interleaved: the first of each group (in `keys` order, default sorted),
    then the second of each, ..."""
    keys, out, depth = keys or sorted(groups), [], 0
    while any(len(groups[k]) > depth for k in keys):
        out += [groups[k][depth] for k in keys if depth < len(groups[k])]
        depth += 1
    return out


def pick_sample(data: Path, sample: int, seed: int) -> list[tuple[int, int]]:
    """(line, step index) pairs, stratified: round-robin over (outcome, target family) strata
    (ok, wrong_result/mismatch, compile_error/arch, compile_error/syntax, ... times
    cuda/nvidia, cuda/amd, triton/nvidia, triton/amd), within a stratum over modules, within a
    module over GPUs, within a GPU over variants, each level in a seeded order and each leaf
    shuffled; so a sample of a few per stratum reaches every failure class on every tool
    (nvcc/ptxas, clang with the HIP headers, Triton for CUDA and HIP targets), then spreads
    over modules and GPUs."""
    strata = defaultdict(list)
    path, rows, stored_steps = _rows(data)
    for n, ep in rows:
        try:
            module = REGISTRY.get(ep["module"])
            gpu = GPUS.get(ep["gpu"])
            family = f"{module.impl if module else '?'}/{gpu.vendor if gpu else '?'}"
            for i, s in enumerate(stored_steps(ep)):
                if s["kind"] != "rebench":      # a failure's class is a stratum of its own
                    status = s["status"] if s["failure"] is None else f"{s['status']}/{s['failure']}"
                    strata[((status, family), ep["module"], ep["gpu"], s["tag"])].append((n, i))
        except (KeyError, TypeError, IndexError, ValueError, AttributeError):
            raise DataError(f"{path}:{n}: malformed row "
                            f"(`kernelstrain validate {data}` names the problem)") from None
    rng = seeded_rng("verify", seed)
    for k in sorted(strata):
        rng.shuffle(strata[k])
    nested = defaultdict(lambda: defaultdict(lambda: defaultdict(dict)))
    for (cls, module, gpu, tag), items in sorted(strata.items()):
        nested[cls][module][gpu][tag] = items

    def seeded_order(keys) -> list:
        # a seeded order per level: sorted order would give every stratum's first picks to the
        # alphabetically first module, and every module's to the first GPU
        order = sorted(keys)
        rng.shuffle(order)
        return order

    def modules_first(by_module: dict) -> list:
        return _round_robin({m: _round_robin({g: _round_robin(tags) for g, tags in by_gpu.items()},
                                             seeded_order(by_gpu))
                             for m, by_gpu in by_module.items()}, seeded_order(by_module))

    return sorted(_round_robin({cls: modules_first(by) for cls, by in sorted(nested.items())})[:sample])


FUSED_SKIP = ("a fused program's candidate is a whole KernelBench solution (Python with a load_inline source or "
              "Triton kernels): verify does not build it yet; scripts/fused_check.py nvcc / triton does")


def _compile_job(job: dict) -> dict:
    from .fused.module import FusedModule
    module = REGISTRY[job["module"]]
    if isinstance(module, FusedModule):
        return {**job, "skipped": FUSED_SKIP}
    task = make_task(module, job["gpu"], job["dtype"], as_dict(job["shape"]))
    if module.impl == "cuda":
        if task.is_hip:
            if find_hip_compiler() is None:
                return {**job, "skipped": "no HIP compiler (hipcc, or clang-17+ with HIP headers) on this machine"}
            result = compile_hip(job["code"], task.gpu.arch, f"{module.op}_kernel")
        else:
            result = compile_cuda(job["code"], task.gpu.arch, f"{module.op}_kernel")
    else:
        variant = module.variant(job["tag"])
        specs = module.compile_specs(variant, as_dict(job["params"]), task)
        result = compile_triton(job["code"], specs, task.gpu.arch)
        if result.ok and result.smem_bytes > task.gpu.smem_per_block:
            # Triton compiles any size; its launcher raises OutOfResources when it loads a kernel
            # whose metadata.shared exceeds the device's limit, which is what the record says
            from triton.runtime.errors import OutOfResources
            error = OutOfResources(result.smem_bytes, task.gpu.smem_per_block, "shared memory")
            result = CompileResult(False, exception_text(error), result.smem_bytes, None, "smem")
    return {**job, "compiled": result.ok, "class": result.error_class, "smem": result.smem_bytes,
            "regs": result.regs, "log": result.log[-600:], "first_error": first_error(result.log),
            "text": None if result.ok else tool_text(result.log)}


def text_checked(r: dict) -> bool:
    """Whether the recorded text of a compiled candidate is the compiler's to compare: a
    compile_error the tool rejects as recorded (a launch-time failure's text is the runtime's)."""
    return r["status"] == "compile_error" and not r["compiled"] and recorded_class(r["error"], r["failure"]) != LAUNCH_TIME


def text_problem(r: dict) -> str | None:
    """How the recorded text differs from the compiler's (paths normalised: compilers.tool_text),
    or None when equal: the first line that differs, both sides."""
    want, got = tool_text(r["error"]), r["text"] or ""
    if want == got:
        return None
    a, b = want.splitlines(), got.splitlines()
    k = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return (f"recorded text differs from the compiler's at line {k + 1} ({len(a)} vs {len(b)} lines): "
            f"{(a[k] if k < len(a) else '<end>')[:160]!r} != {(b[k] if k < len(b) else '<end>')[:160]!r}")


def judge(r: dict) -> list[str]:
    """Disagreements of one compiled candidate with its record."""
    problems = []
    status = r["status"]
    if status in ("ok", "wrong_result") and not r["compiled"]:
        problems.append(f"{status} candidate does not compile: {r['log'].strip().splitlines()[-1] if r['log'] else ''}")
    if status == "compile_error":
        want = recorded_class(r["error"], r["failure"])
        if want == LAUNCH_TIME:
            if not r["compiled"]:
                problems.append("a launch-time failure should compile and fail at launch, but did not compile")
        elif r["compiled"]:
            problems.append(f"recorded compile error ({want}) but it compiles")
        elif r["class"] != want:
            problems.append(f"compiler error class {r['class']} != recorded {want}")
        elif r["failure"] in EXACT_FIRST_ERROR and comparable(r.get("first_error")) != comparable(first_error(r["error"])):
            # a slip of the catalogue is worded as the compiler words it: the first error must be the same
            problems.append(f"compiler's first error {r.get('first_error')!r} != recorded {first_error(r['error'])!r}")
    module = REGISTRY[r["module"]]
    static = module.impl == "cuda" and module.variant(r["tag"]).smem in ("static", "none")
    # ptxas reports static shared memory to the byte; AMD's LDS figure is rounded up to 16 B
    slack = 15 if REGISTRY[r["module"]].impl == "cuda" and GPUS[r["gpu"]].vendor == "amd" else 0
    if status == "ok" and r["compiled"] and static and r["smem"] is not None \
            and not 0 <= r["smem"] - r["smem_bytes"] <= slack:
        problems.append(f"smem recorded {r['smem_bytes']} B, compiler {r['smem']} B")
    return problems


def verify(data: Path, sample: int = 200, jobs: int | None = None, seed: int = 0, report: str | None = None,
           force: bool = False, text: bool = False, trust: bool = False) -> int:
    """Compile the sample and judge each record; with `text`, every compile error's recorded
    text must also be the compiler's, whole (after path normalisation), and the agreement is
    reported per failure class and target family. Only kernelstrain's own renders are compiled
    unless `trust` (Triton candidates are imported, which runs their module-level Python)."""
    check_report_path(report, force, [data])      # before any work: a bad path fails in a second, not an hour
    read_stats(data)
    started = time.monotonic()
    chosen = pick_sample(data, sample, seed)
    wanted = defaultdict(list)
    for n, i in chosen:
        wanted[n].append(i)
    job_list = []
    path, rows, stored_steps = _rows(data)
    for n, ep in rows:
        if n not in wanted:
            continue
        try:
            steps = stored_steps(ep)
        except (KeyError, TypeError, IndexError, ValueError, AttributeError):
            raise DataError(f"{path}:{n}: a trace step without its fenced assistant turn "
                            f"(`kernelstrain validate {data}` names the problem)") from None
        for i in wanted[n]:
            s = steps[i]
            if not trust:
                check_code(ep, s, s["code"], f"{path}:{n}", runs=True)
            job_list.append({"line": n, "step": s["step"], "module": ep["module"], "gpu": ep["gpu"],
                             "dtype": ep["dtype"], "shape": ep["shape"], "tag": s["tag"], "params": s["params"],
                             "status": s["status"], "failure": s["failure"], "error": s["error"], "code": s["code"],
                             "smem_bytes": s["smem_bytes"]})
    _check_compilers(job_list)
    jobs = jobs or (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2)
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    bar, results = progress.Bar("verify: compiled", len(job_list), "candidates"), []
    with ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx) as pool:
        for r in pool.map(_compile_job, job_list, chunksize=1):
            results.append(r)
            bar.update(len(results))
    bar.close()
    table = defaultdict(lambda: defaultdict(int))
    agreement = defaultdict(lambda: [0, 0])       # (failure, impl/vendor) -> [compared, equal]
    problems = []
    for r in results:
        key = (r["module"], r["gpu"])
        row = table[key]
        if "skipped" in r:
            row["skipped"] += 1
            continue
        bad = judge(r)
        if text and not bad and text_checked(r):
            family = f"{REGISTRY[r['module']].impl}/{GPUS[r['gpu']].vendor}"
            differs = text_problem(r)
            for key in ((r["failure"], family), ("tool", tool_of(family, r["error"]))):
                agreement[key][0] += 1
                agreement[key][1] += differs is None
            bad += [differs] if differs else []
        row[f"{r['status']}_n"] += 1
        row[f"{r['status']}_agree"] += not bad
        if r["status"] == "ok" and r["smem"] is not None:
            row["smem_checked"] += 1
            row["smem_equal"] += r["smem"] == r["smem_bytes"]
            row["smem_within_10pct"] += abs(r["smem"] - r["smem_bytes"]) <= 0.1 * max(r["smem"], 1)
        problems += [f"{path.name}:{r['line']} step {r['step']} ({r['module']} {r['tag']} on {r['gpu']}): {p}" for p in bad]
    elapsed = time.monotonic() - started
    out = render_report(table, len(results), elapsed, problems)
    for reason in sorted({r["skipped"] for r in results if "skipped" in r}):
        out += f"\nskipped {sum(r.get('skipped') == reason for r in results)}: {reason}"
    if text:
        out += "\n" + render_agreement(agreement)
    print(out)
    if report:
        write_text_atomic(Path(report), json.dumps({"compiled": len(results), "seconds": round(elapsed, 1),
                                            "rows": {f"{m}|{g}": dict(v) for (m, g), v in sorted(table.items())},
                                            "text_agreement": {f"{f}|{fam}": v for (f, fam), v in sorted(agreement.items())},
                                            "problems": problems}, indent=2))
    return 1 if problems else 0


def _check_compilers(job_list: list) -> None:
    impls = {REGISTRY[j["module"]].impl for j in job_list}
    if "cuda" in impls and shutil.which("nvcc") is None:
        raise UsageError("nvcc not found: install the CUDA toolkit (12.4+) to verify CUDA candidates")
    if "triton" in impls:
        try:
            import triton  # noqa: F401
        except ImportError:
            raise UsageError("triton not installed: pip install 'kernelstrain[verify]'") from None


def render_report(table, total: int, elapsed: float, problems: list) -> str:
    lines = [f"{'module':28} {'gpu':8} {'ok compiles':>12} {'errors fail':>12} {'wrong compiles':>15} {'smem equal':>11} {'skipped':>8}"]
    sums = defaultdict(int)
    for (m, g), row in sorted(table.items()):
        for k, v in row.items():
            sums[k] += v
        lines.append(f"{m:28} {g:8} {row['ok_agree']:>5}/{row['ok_n']:<6} {row['compile_error_agree']:>5}/{row['compile_error_n']:<6}"
                     f" {row['wrong_result_agree']:>7}/{row['wrong_result_n']:<7} {row['smem_equal']:>4}/{row['smem_checked']:<6}"
                     f" {row['skipped']:>8}")
    lines.append(f"{'total':37} {sums['ok_agree']:>5}/{sums['ok_n']:<6} {sums['compile_error_agree']:>5}/{sums['compile_error_n']:<6}"
                 f" {sums['wrong_result_agree']:>7}/{sums['wrong_result_n']:<7} {sums['smem_equal']:>4}/{sums['smem_checked']:<6}"
                 f" {sums['skipped']:>8}")
    lines.append(f"{total} candidates in {elapsed:.1f} s; {len(problems)} disagreement(s)")
    lines += problems[:200]
    return "\n".join(lines)


def tool_of(family: str, error: str) -> str:
    """The tool whose text a compile error is: nvcc's front end or ptxas (CUDA on NVIDIA),
    clang with the HIP headers (CUDA on AMD), Triton for a CUDA or a HIP target.

    >>> tool_of("cuda/nvidia", "ptxas /tmp/x.ptx, line 9; error   : ..."), tool_of("triton/amd", "...")
    ('ptxas', 'Triton HIP')
    """
    if family.startswith("triton/"):
        return "Triton HIP" if family.endswith("/amd") else "Triton CUDA"
    if family.endswith("/amd"):
        return "clang/HIP"
    return "ptxas" if error.startswith("ptxas") else "nvcc"


def render_agreement(agreement: dict) -> str:
    """Exact-text agreement of compile errors, per failure class and target family, then per tool."""
    lines = ["compile-error texts equal to the compiler's (failure, impl/vendor):"]
    classes = {k: v for k, v in agreement.items() if k[0] != "tool"}
    for (failure, family), (n, equal) in sorted(classes.items()):
        lines.append(f"  {failure:10} {family:14} {equal:>4}/{n:<4}")
    lines.append("per tool:")
    for (_, tool), (n, equal) in sorted((k, v) for k, v in agreement.items() if k[0] == "tool"):
        lines.append(f"  {tool:25} {equal:>4}/{n:<4}" + (f" ({100 * equal / n:.1f}%)" if n else ""))
    n, equal = sum(v[0] for v in classes.values()), sum(v[1] for v in classes.values())
    lines.append(f"  {'total':25} {equal:>4}/{n:<4}" + (f" ({100 * equal / n:.1f}%)" if n else ""))
    return "\n".join(lines)
