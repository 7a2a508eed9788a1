"""`kernelstrain gpu-check`: run a stratified sample of a dataset's candidates on the local GPU.

Either layout: an episodes.jsonl dataset (the default profile), whose steps carry their code, or a
sessions.jsonl one (kernelinfer, SPEC §12), whose trace carries each step's recipe (rung, params,
bug) and whose sampled candidates are rendered from it (sample._case).

    gpu_check(Path("data"), sample=300, jobs=16, report=Path("gpu_check.json"), seed=0) -> exit code

Samples (sample.py), builds in parallel cached by source hash, then runs three passes through the
runtime's worker processes (runtime.py): correctness (parallel workers: poisoned outputs, guard
bytes, launch and asynchronous errors; a case out of GPU memory among them runs again alone), timing of the matching ok candidates (one worker alone on
the GPU, input copies rotated so no timed run finds its inputs in L2), and a re-time of the
candidates of a third of the timed episodes (the hardware's own repeatability). The simulator's
noise-free time on the local GPU's catalog profile stands beside each measured time; report.py
turns the rows into the figures. Exit 0, or 1 when a label disagrees with the hardware.
"""
from __future__ import annotations

import concurrent.futures
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from ..errors import UsageError
from ..progress import Bar
from ..gpus import GPUS
from ..ops import REGISTRY
from ..sim import simulate
from ..tasks import make_task
from ..dataset import Dataset
from ..reading import read_jsonl
from ..sessions import SESSIONS_FILE
from ..safety import check_output
from ..trusted import check_code
from ..writers import DATASET_NAMES, FILES, record_paths
from . import report as report_mod
from .sample import sample_cases

BENCH_S = 0.12                 # sampling budget of one timed case
CASE_TIMEOUT_S = 60.0
# --compile-only has no card to read: it samples as on the H200 (sm_90a episodes either way; only which cases
# fit gpu-check's time limit, sample.MAX_SIM_MS, may differ from an H100's sample)
COMPILE_ONLY_GPU = "H200"
REPEAT_EVERY = 3               # re-time the candidates of every third timed episode


def require_gpu() -> str:
    """The local NVIDIA GPU's name; a UsageError when PyTorch with CUDA or the GPU is missing."""
    if importlib.util.find_spec("torch") is None:
        raise UsageError("gpu-check needs PyTorch with CUDA and an NVIDIA GPU (pip install 'kernelstrain[gpu]'); "
                         "torch is not installed")
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available() and "
                            "torch.cuda.get_device_name(0) or '')"], capture_output=True, text=True)
    name = probe.stdout.strip().splitlines()[-1] if probe.stdout.strip() else ""
    if probe.returncode or not name:
        raise UsageError("gpu-check needs an NVIDIA GPU that PyTorch can use; torch.cuda.is_available() is False")
    return name


# The cards whose own catalog profile gpu-check simulates: the candidates it builds are sm_90a (runtime.NVCC_FLAGS),
# and a simulated time stands beside a measured one only where the profile is that card's. The PCIe and NVL H100s
# (2.0 / 3.9 TB/s, lower clocks), the H200 NVL (600 W, lower clocks), GH200 and H800 are sm_90a cards that no
# catalog profile describes: their times would be compared with another GPU's.
SIMULATED_CARDS = {"NVIDIA H100 80GB HBM3": "H100", "NVIDIA H200": "H200"}


def catalog_gpu(device: str) -> str:
    """The catalog profile of the local card (`torch.cuda.get_device_name`): 'NVIDIA H100 80GB HBM3' -> 'H100',
    'NVIDIA H200' -> 'H200'; a UsageError for any other card, which gpu-check would simulate as a GPU it is not."""
    if device.strip() in SIMULATED_CARDS:
        return SIMULATED_CARDS[device.strip()]
    raise UsageError(f"gpu-check compares the hardware with the simulator's profile of the same card, and "
                     f"{device.strip() or 'this GPU'} is not one of them ({', '.join(SIMULATED_CARDS)}: the "
                     f"candidates it builds are sm_90a); --compile-only builds without a GPU")


def rows_file(data: Path) -> Path:
    """The dataset's file of one row per episode, by its manifest's layout (episodes.jsonl; a
    kernelinfer dataset's sessions.jsonl); a parameter grid of scripts/shape_grid.py, a folder holding
    episodes.jsonl alone (no run made it: no stats.json, no manifest), is that file."""
    grid = data / "episodes.jsonl"
    if grid.is_file() and not (data / "stats.json").exists() and not (data / "manifest.json").exists():
        return grid
    return Dataset(data).episode_file


def as_episode(row: dict) -> dict:
    """An episode row as sample_cases reads it: a session's trace records are its steps (their code,
    absent there, is rendered from the recipe when a step is sampled)."""
    return dict(row, steps=row["trace"]) if "trace" in row and "steps" not in row else row


def _check_paths(data: Path, report: Path | None) -> None:
    if not rows_file(data).is_file():
        raise UsageError(f"{data}: no {FILES['episodes']} or {SESSIONS_FILE} (not a generated dataset?)")
    if report is not None:
        if report.is_dir():
            raise UsageError(f"--report {report} is a directory")
        if not report.parent.is_dir():
            raise UsageError(f"--report {report}: folder {report.parent} does not exist")
        if not os.access(report.parent, os.W_OK):
            raise UsageError(f"--report {report}: folder {report.parent} is not writable")
        check_output(report, [data / name for name in DATASET_NAMES], "--report")


def _build_all(cases: list, build_dir: Path, jobs: int) -> None:
    from .runtime import build_case
    if any(REGISTRY[c["module"]].impl == "cuda" for c in cases) and shutil.which("nvcc") is None:
        raise UsageError("gpu-check needs nvcc (the CUDA toolkit) on PATH to build CUDA candidates")
    build_dir.mkdir(parents=True, exist_ok=True)
    bar = Bar("gpu-check: built", len(cases), "candidates")
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for n, (c, b) in enumerate(zip(cases, pool.map(lambda c: build_case(c, build_dir), cases)), 1):
            c.update(build_ok=b["ok"], so=b.get("so"), src=b.get("src"), log=b["log"], compile_s=b["compile_s"])
            del c["code"]
            bar.update(n)
    bar.close()


def _sim_ms(case: dict, gpu: str) -> float | None:
    module = REGISTRY[case["module"]]
    r = simulate(module, module.variant(case["variant"]), case["params"],
                 make_task(module, gpu, case["dtype"], case["shape"]))
    return r.time_ms if r.ok else None


# what PyTorch and the CUDA runtime say when an allocation fails (torch.OutOfMemoryError, cudaErrorMemoryAllocation)
OUT_OF_MEMORY = ("OutOfMemoryError", "CUDA out of memory", "cudaErrorMemoryAllocation", "out of memory")


def out_of_memory(result: dict) -> bool:
    """Whether a case failed for want of GPU memory: no verdict on its label."""
    return not result.get("ok") and any(m in (result.get("error") or "") for m in OUT_OF_MEMORY)


def not_run_for_memory(result: dict, where: str) -> dict:
    """A case that ran out of GPU memory alone on the card: not run (report.outcome 'notrun'), never a fault."""
    return dict(result, ok=False, error=f"not run: out of GPU memory {where} | {result['error'].splitlines()[0][:160]}")


def _checked(cases: list, work: Path, jobs: int, deadline: float, run_cases) -> dict:
    """The correctness pass: parallel workers share the GPU, so a case whose allocation failed among them (on the
    H100, seed 40404: embedding_bwd_cuda at T=8192 V=128256 asked 7.8 GiB while 15 others held the rest) runs again
    alone after the others; one that fails alone too is not run for want of memory, not a label's fault."""
    checked = run_cases(cases, work, work / "check.jsonl", CASE_TIMEOUT_S, deadline, max(1, min(jobs, 15)), "check")
    crowded = [cases[i] for i, r in sorted(checked.items()) if out_of_memory(r)]
    if crowded:
        checked.update(run_cases(crowded, work, work / "check_alone.jsonl", CASE_TIMEOUT_S, deadline, 1, "alone"))
    return {i: not_run_for_memory(r, "alone") if out_of_memory(r) else r for i, r in checked.items()}


def _passes(cases: list, work: Path, jobs: int, budget_s: float) -> list:
    """Correctness, timing and repeat passes; one merged row per case."""
    from .runtime import run_cases
    t0 = time.time()
    checked = _checked(cases, work, jobs, t0 + 0.5 * budget_s, run_cases)
    rows = {i: dict(cases[i], **{k: v for k, v in r.items() if k not in cases[i] or k in ("ok", "error")})
            for i, r in checked.items()}
    timed = [dict(cases[i], time=True, bench_s=BENCH_S, bug=None) for i, r in sorted(checked.items())
             if r["ok"] and cases[i]["label"] == "ok"]
    for i, r in run_cases(timed, work, work / "time.jsonl", CASE_TIMEOUT_S, t0 + 0.9 * budget_s, 1, "time").items():
        if (r.get("error") or "").startswith(("not run", "worker could not")) or out_of_memory(r):
            continue                  # not timed: the row keeps its correctness verdict
        if r["ok"]:
            rows[i].update(time_ms=r["time_ms"], copies=r.get("copies"), samples=r.get("samples"))
        else:
            rows[i].update(ok=False, error="timing pass: " + (r.get("error") or "wrong result"))
    episodes = sorted({rows[i]["episode"] for i in rows if rows[i].get("time_ms")})
    again = {e for n, e in enumerate(episodes) if n % REPEAT_EVERY == 0}
    repeat = [c for c in timed if c["episode"] in again and rows[c["idx"]].get("time_ms")]
    for i, r in run_cases(repeat, work, work / "repeat.jsonl", CASE_TIMEOUT_S, t0 + budget_s, 1, "repeat").items():
        if r.get("ok") and r.get("time_ms"):
            rows[i]["time_ms_2"] = r["time_ms"]
    return [rows[i] for i in sorted(rows)]


def gpu_check(data: Path, sample: int = 300, jobs: int = 0, report: Path | None = None, seed: int = 0,
              build_dir: Path | None = None, budget_s: float = 1800.0, compile_only: bool = False,
              trust: bool = False) -> int:
    """Run the check; print the report; write it as JSON to `report` (paths checked first).
    Cases whose code is not kernelstrain's render of their recipe are refused unless `trust`."""
    _check_paths(data, report)
    device = "" if compile_only else require_gpu()
    gpu = catalog_gpu(device) if device else COMPILE_ONLY_GPU
    jobs = jobs or os.cpu_count() or 4
    tasks = {}       # episode id -> (file:line, its task fields): what a case's recipe is rendered for

    source = rows_file(data)

    def episodes():
        for path in record_paths(source):        # the train split's file, then the validation split's
            for n, ep in read_jsonl(path):
                tasks[ep.get("id")] = (f"{path}:{n}", {k: ep.get(k) for k in ("id", "module", "gpu", "dtype", "shape")})
                yield as_episode(ep)
    cases = sample_cases(episodes(), sample, seed, arch=GPUS[gpu].arch, sim_gpu=gpu)
    for c in cases if not trust else ():
        if not c["rendered"]:      # the dataset's own code (else kernelstrain rendered it from the recipe)
            where, ep = tasks[c["episode"]]
            step = {"step": c["step"], "tag": c["variant"], "params": c["params"],
                    "bug": c["bug"] if c["label"] == "wrong_result" else None}
            check_code(ep, step, c["code"], where, runs=True)
    if not cases:
        raise UsageError(f"{data}: no ok or wrong_result steps of {GPUS[gpu].arch} episodes to check")
    build_dir = build_dir or Path(os.environ.get("KS_GPU_CHECK_CACHE", Path.home() / ".cache" / "kernelstrain"
                                                 / "gpu-check"))
    t0 = time.time()
    _build_all(cases, build_dir, jobs)
    failed_builds = sum(not c["build_ok"] for c in cases)
    print(f"gpu-check: {len(cases)} candidates built in {time.time() - t0:.0f} s ({failed_builds} failed)",
          file=sys.stderr)
    if compile_only:
        return 1 if failed_builds else 0
    work = build_dir / f"run_{hashlib.sha1(str(time.time()).encode()).hexdigest()[:8]}"
    work.mkdir()
    rows = _passes(cases, work, jobs, budget_s)
    for r in rows:
        r["sim_ms"] = _sim_ms(r, gpu)
    summary = report_mod.summarize(rows)
    print(report_mod.render(summary, f"{device} (simulated as {gpu})"))
    if report is not None:
        keep = ("id", "episode", "step", "module", "variant", "params", "dtype", "shape", "at", "label", "ok",
                "error", "time_ms", "time_ms_2", "sim_ms", "rel_l2_err", "nbad", "copies", "samples")
        report.write_text(json.dumps({"device": device, "sim_gpu": gpu, "seed": seed, "sample": sample,
                                      "summary": summary,
                                      "rows": [{k: r.get(k) for k in keep} for r in rows]}, indent=1) + "\n")
    return 1 if summary["problems"] else 0
