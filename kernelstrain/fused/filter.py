"""`tasks filter DIR`: run every candidate with PyTorch and keep exactly `count` passing
tasks, the first ones in candidate order (extra [exec]).

Candidates are taken in index order from candidates_fused.jsonl and, past its end, from
the same deterministic stream (dataset.candidate). Cheap checks run here first (static
FLOPs / bytes bounds, KernelBench similarity); the rest run in worker processes
(execute.check). New work is only handed out while the passes known plus the runs in
flight fall short of `count`, so every candidate before the last selected one has a
verdict, and the selection (and the reject table over that prefix) does not depend on
--jobs. Each verdict is appended to filter_progress.jsonl as it arrives; a rerun with the
same options continues from it.
"""
from __future__ import annotations

import concurrent.futures as cf
import importlib.util
import json
import multiprocessing
import sys
import time
from collections import Counter
from pathlib import Path

from ..errors import UsageError
from ..trusted import check_fused
from . import execute
from .degenerate import reason as degenerate_reason
from .dataset import (CANDIDATES, PROGRESS, REJECTS, REPORT, TASKS, candidate, fused_stats, read_fused_stats, read_rows,
                      write_outputs, write_rows)
from .grammar import BYTES_RANGE, FLOPS_RANGE
from .similarity import OPS_THRESHOLD, SOURCE_THRESHOLD, KernelBenchIndex, too_similar

PROGRESS_SCHEMA = "kernelstrain/fused_filter_progress@1"
MAX_CANDIDATES_FACTOR = 4      # give up after 4 x count + 100 candidates
DEFAULT_MS = (0.005, 50.0)


def require_torch() -> None:
    if importlib.util.find_spec("torch") is None:
        raise UsageError("`tasks filter` runs the programs with PyTorch, which is not installed: "
                         "pip install 'kernelstrain[exec]' (or pip install torch)")


def resolve_device(device: str) -> str:
    import torch
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda: PyTorch sees no CUDA GPU here")
    return device


def _static_reason(row: dict, flops_range, bytes_range) -> str | None:
    if not flops_range[0] <= row["flops"] <= flops_range[1]:
        return f"flops {row['flops']:.3g} outside [{flops_range[0]:.3g}, {flops_range[1]:.3g}]"
    if not bytes_range[0] <= row["unfused_bytes"] <= bytes_range[1]:
        return f"bytes {row['unfused_bytes']:.3g} outside [{bytes_range[0]:.3g}, {bytes_range[1]:.3g}]"
    return None


def _run_one(row: dict, device: str, min_ms: float, max_ms: float, reps: int) -> dict:
    t0 = time.perf_counter()
    verdict = execute.check(row, device, min_ms, max_ms, reps)
    verdict["seconds"] = round(time.perf_counter() - t0, 3)
    return verdict


class Progress:
    """filter_progress.jsonl: an options header, then one verdict per line."""

    def __init__(self, path: Path, options: dict, restart: bool):
        self.path, self.done = path, {}
        if path.exists() and not restart:
            lines = path.read_text(encoding="utf-8").splitlines()
            try:
                header = json.loads(lines[0]) if lines else {}
            except json.JSONDecodeError:
                header = {}
            if header.get("options") != options:
                raise UsageError(f"{path} was written with other filter options; rerun with the same options "
                                 "or pass --restart to start over")
            for line in lines[1:]:
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    break        # a line cut short by an interruption: everything before it counts
                self.done[rec["id"]] = rec
        else:
            path.write_text(json.dumps({"schema": PROGRESS_SCHEMA, "options": options}) + "\n", encoding="utf-8")
        self.file = open(path, "a", encoding="utf-8")

    def add(self, row: dict, verdict: dict) -> None:
        rec = {"id": row["id"], "index": row["index"], "source_sha256": row["source_sha256"], "verdict": verdict}
        self.done[row["id"]] = rec
        self.file.write(json.dumps(rec) + "\n")
        self.file.flush()

    def close(self):
        self.file.close()


def _candidates(data: Path, seed: int):
    """Candidate rows in index order: the file, then the stream past its end."""
    rows = read_rows(data / CANDIDATES)
    yield from rows
    i = len(rows)
    while True:
        yield candidate(seed, i)
        i += 1


def reason_table(report: dict) -> str:
    width = max([len(k) for k in report["by_reason"]] + [9])
    lines = [f"  {'reason':{width}}  candidates", f"  {'passed':{width}}  {report['passed']:>10,}"]
    lines += [f"  {k:{width}}  {v:>10,}" for k, v in report["by_reason"].items()]
    lines.append(f"  {'evaluated':{width}}  {report['evaluated']:>10,}")
    return "\n".join(lines)


def filter_tasks(data: Path, jobs: int = 1, device: str = "auto", min_ms: float = DEFAULT_MS[0],
                 max_ms: float = DEFAULT_MS[1], kernelbench: Path | None = None, count: int | None = None,
                 restart: bool = False, reps: int = 3, progress: bool = False, trust: bool = False) -> dict:
    """Filter a fused-task directory in place; returns the report (see module docstring). The
    candidates are executed: unless `trust`, each must first be what `tasks fused` composes."""
    stats = read_fused_stats(data)
    for n, row in enumerate(read_rows(data / CANDIDATES) if not trust else (), 1):
        check_fused(row, f"{data / CANDIDATES}:{n}", runs=True)
    require_torch()
    if not 0 < min_ms < max_ms:
        raise UsageError(f"need 0 < --min-ms < --max-ms, got {min_ms}, {max_ms}")
    device = resolve_device(device)
    count = count or stats["count"]
    index = None
    if kernelbench is not None:
        if not kernelbench.exists():
            raise UsageError(f"--kernelbench {kernelbench}: no such file or directory")
        index = KernelBenchIndex(kernelbench)
        if not len(index):
            raise UsageError(f"--kernelbench {kernelbench}: no KernelBench-form problem (class Model) found")
    options = {"device": device, "min_ms": min_ms, "max_ms": max_ms, "reps": reps, "seed": stats["seed"],
               "flops_range": list(FLOPS_RANGE), "bytes_range": list(BYTES_RANGE),
               "kernelbench": {"path": str(kernelbench), "problems": len(index)} if index else None,
               "thresholds": {"source": SOURCE_THRESHOLD, "ops": OPS_THRESHOLD}}
    log = Progress(data / PROGRESS, options, restart)
    t0, ran = time.time(), 0
    rows, verdicts, passes = [], {}, 0
    # operator sequences of the candidates sent to run (in index order, whatever --jobs): a later
    # candidate with the same sequence is a duplicate
    taken = set()
    cap = MAX_CANDIDATES_FACTOR * count + 100
    stream = _candidates(data, stats["seed"])
    ctx = multiprocessing.get_context("spawn")
    try:
        with cf.ProcessPoolExecutor(max_workers=max(1, jobs), mp_context=ctx) as pool:
            inflight = {}
            while True:
                while passes + len(inflight) < count and len(rows) < cap:
                    row = next(stream)
                    rows.append(row)
                    rec = log.done.get(row["id"])
                    if rec and rec["source_sha256"] == row["source_sha256"]:
                        verdict = rec["verdict"]
                        if "device" in verdict:          # it was run: its sequence is taken
                            taken.add(tuple(row["ops"]))
                    elif (why := _static_reason(row, FLOPS_RANGE, BYTES_RANGE)):
                        verdict = {"pass": False, "reason": "cost_out_of_range", "detail": why}
                        log.add(row, verdict)
                    elif (why := degenerate_reason(row["program"], row["dtype"])):
                        verdict = {"pass": False, "reason": why.split(":")[0], "detail": why}
                        log.add(row, verdict)
                    elif tuple(row["ops"]) in taken:
                        verdict = {"pass": False, "reason": "duplicate_ops", "detail": " -> ".join(row["ops"])}
                        log.add(row, verdict)
                    elif index is not None and too_similar(near := index.nearest(row["source"], row["ops"])):
                        verdict = {"pass": False, "reason": "similar_kernelbench", "detail": json.dumps(near)}
                        log.add(row, verdict)
                    else:
                        taken.add(tuple(row["ops"]))
                        inflight[pool.submit(_run_one, row, device, min_ms, max_ms, reps)] = row
                        continue
                    verdicts[row["id"]] = verdict
                    passes += verdict["pass"]
                if not inflight:
                    break
                finished, _ = cf.wait(inflight, return_when=cf.FIRST_COMPLETED)
                for fut in finished:
                    row = inflight.pop(fut)
                    verdict = fut.result()
                    log.add(row, verdict)
                    verdicts[row["id"]] = verdict
                    passes += verdict["pass"]
                    ran += 1
                    if progress:
                        rate = (time.time() - t0) / ran
                        print(f"\r{len(verdicts):,} candidates, {passes:,}/{count:,} passed, {rate:.2f} s each",
                              end="", file=sys.stderr, flush=True)
    finally:
        log.close()
        if progress:
            print(file=sys.stderr)
    return _write(data, stats, rows, verdicts, count, device, options, time.time() - t0, ran)


def _write(data, stats, rows, verdicts, count, device, options, seconds, ran) -> dict:
    selected, prefix = [], []
    for row in rows:
        if len(selected) == count:
            break
        v = verdicts[row["id"]]
        prefix.append((row, v))
        if v["pass"]:
            selected.append({**row, "eager_ms": v.get("eager_ms"), "compiled_ms": v.get("compiled_ms"),
                             "device": v.get("device"), "filter": v})
    rejected = [{"id": r["id"], "index": r["index"], "ops": r["ops"], "dtype": r["dtype"],
                 "reason": v["reason"], "detail": v.get("detail"), "source": r["source"]}
                for r, v in prefix if not v["pass"]]
    by_reason = Counter(r["reason"] for r in rejected)
    task_seconds = [v["seconds"] for _, v in prefix if "seconds" in v]
    report = {"device": device, "count": count, "evaluated": len(prefix), "passed": len(selected), "selected": len(selected),
              "rejected": len(rejected), "by_reason": dict(by_reason.most_common()),
              "wall_seconds": round(seconds, 1), "executed_this_run": ran,
              "seconds_per_task": round(sum(task_seconds) / len(task_seconds), 3) if task_seconds else None,
              "options": options}
    files = dict(stats["files"])
    files[TASKS] = write_rows(data / TASKS, selected)
    files[REJECTS] = write_rows(data / REJECTS, rejected)
    (data / REPORT).write_text(reason_table(report) + "\n", encoding="utf-8")
    write_outputs(data, fused_stats(selected, stats["seed"], count, stats["spare"], files, report))
    return report
