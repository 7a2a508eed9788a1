"""`kernelstrain export kernelbench`: every task as a KernelBench problem file and every
candidate of the chosen statuses as a KernelBench solution file (class ModelNew), with an
index mapping ids to files and recorded statuses.

    KB/level1/<n>_<module>_<task_id>.py           single-op tasks (episodes and held-out tasks)
    KB/level2/<n>_fused_<task_id>.py              fused tasks (problems only: no candidates)
    KB/solutions/level1/<n>_<episode>_s<step>.py  ModelNew of one candidate of problem n
    KB/solutions/level2/<n>_<episode>_s<step>.py  ModelNew of a fused program's candidate (--config fused)
    KB/index.json                                 problems and solutions with their records

Levels follow KernelBench's: 1 single operators, 2 fusion patterns. Problems and solutions are
in the form KernelBench's own harness scores and loads (kb_form: one output tensor, inputs that
survive its precision cast, one self-contained solution file its static checker accepts), so
KernelBench's `eval_kernel_against_ref`, or scripts/kb_eval.py, runs them unchanged.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import UsageError
from ..fused.dataset import is_fused_dir
from ..safety import check_tree_out, safe_name, write_tree
from ..schema import SCHEMA as SCHEMAS
from ..dataset import episode_source
from ..reading import read_jsonl, read_whole
from ..workdir import hand_adapted, output_tolerances, task_tolerance
from ..workdir.subject import HOLDOUT_GLOB, episode_candidate, fused_rows, fused_subject, single
from .kb_form import full_precision_draws, precision, problem_source, solution_source

SCHEMA = SCHEMAS["kernelbench_export"]
STATUSES = ("ok", "wrong_result", "compile_error")
EXPORT_NAMES = ("level1", "level2", "solutions", "index.json")   # what --force replaces in --out


def _problem(subject, n: int, level: int, source: str) -> dict:
    name = "fused" if subject.kind == "fused" else subject.module.name
    file = f"level{level}/{n}_{name}_{safe_name(subject.task_id, 'task id')}.py"
    row = {"problem_id": n, "level": level, "file": file,
           "task_id": subject.task_id, "kind": subject.kind, "split": subject.split, "title": subject.title,
           "dtype": subject.dtype, "tolerance": task_tolerance(subject),
           "output_tolerances": output_tolerances(subject),
           "needs_grad": ".backward(" in subject.reference, "source": source}
    if subject.kind == "single":
        row.update(module=subject.module.name, impl=subject.module.impl, gpu=subject.gpu, arch=subject.arch,
                   precision=precision(subject), shape=dict(subject.task.shape), baseline_ms=subject.baseline_ms,
                   best_ms=subject.best_ms,
                   hand_adapted=hand_adapted(subject))
    return row


def _steps(row: dict, best_only: bool, statuses: tuple) -> list:
    """The steps (0 = baseline) to export of an episode: distinct code, in step order."""
    if best_only:
        return [row["best"]["step"]]
    steps = [0] + [s["step"] for s in row["steps"] if s["status"] in statuses]
    if "ok" not in statuses:
        steps = steps[1:]
    return steps


def collect(dirs: list, best_only: bool, statuses: tuple):
    """Yield ('problem', row) and ('solution', row, source) in a deterministic order."""
    problems = {}
    for data in dirs:
        if not data.is_dir():
            raise UsageError(f"{data}: not a directory")
        if is_fused_dir(data):
            for r in fused_rows(data):
                s = fused_subject(r)
                if s.task_id not in problems:
                    problems[s.task_id] = _problem(s, len(problems) + 1, 2, full_precision_draws(s.reference))
                    yield "problem", problems[s.task_id]
            continue
        (episodes, _, as_episode), holdouts = episode_source(data), sorted(data.glob(HOLDOUT_GLOB))
        if not episodes.exists() and not holdouts:
            raise UsageError(f"{data}: no episodes.jsonl, sessions.jsonl, tasks_holdout*.jsonl or fused tasks "
                             "(not a dataset?)")
        if episodes.exists():
            for _, raw in read_whole(episodes):
                row = as_episode(raw)
                base = single(row, "train", episode_candidate(row, 0))
                if base.kind == "fused":
                    yield from _fused_episode(row, base, problems, best_only, statuses)
                    continue
                if base.task_id not in problems:
                    problems[base.task_id] = _problem(base, len(problems) + 1, 1, problem_source(base))
                    yield "problem", problems[base.task_id]
                prob, seen = problems[base.task_id], set()
                for step in _steps(row, best_only, statuses):
                    s = base if step == 0 else single(row, "train", episode_candidate(row, step))
                    digest = hashlib.sha256(s.candidate.code.encode()).hexdigest()
                    if digest in seen:                   # a rebenchmark re-times the same code
                        continue
                    seen.add(digest)
                    rec = next((x for x in row["steps"] if x["step"] == step), None)
                    episode = safe_name(row["id"], "episode id")
                    yield "solution", {
                        "file": f"solutions/level1/{prob['problem_id']}_{episode}_s{step}.py",
                        "problem_id": prob["problem_id"], "task_id": base.task_id, "episode": row["id"],
                        "step": step, "tag": s.candidate.tag, "status": s.candidate.status,
                        "failure": rec["failure"] if rec else None, "time_ms": s.candidate.time_ms,
                        "best": step == row["best"]["step"], "module": base.module.name, "impl": base.module.impl,
                        "gpu": base.gpu, "arch": base.arch, "code_sha256": digest}, solution_source(s)
        for path in holdouts:
            for _, row in read_jsonl(path):
                s = single(row, row["split"], episode_candidate({**row, "id": None}, 0), row.get("reference"))
                if s.task_id not in problems:
                    problems[s.task_id] = _problem(s, len(problems) + 1, 1, problem_source(s))
                    yield "problem", problems[s.task_id]


def _fused_episode(row: dict, base, problems: dict, best_only: bool, statuses: tuple):
    """A fused program's episode: its task a level-2 problem (the program as it stands, its normal
    draws made in fp32: kb_form.full_precision_draws), each candidate already a KernelBench
    solution, written as it is."""
    if base.task_id not in problems:
        problems[base.task_id] = _problem(base, len(problems) + 1, 2, full_precision_draws(base.reference))
        yield "problem", problems[base.task_id]
    prob, seen = problems[base.task_id], set()
    for step in _steps(row, best_only, statuses):
        s = single(row, "train", episode_candidate(row, step))
        if s.candidate.tag == "eager":
            continue            # the baseline (or a re-measurement of it): the eager program, no custom kernel
        digest = hashlib.sha256(s.candidate.code.encode()).hexdigest()
        if digest in seen:
            continue
        seen.add(digest)
        rec = next(x for x in row["steps"] if x["step"] == step)
        episode = safe_name(row["id"], "episode id")
        yield "solution", {
            "file": f"solutions/level2/{prob['problem_id']}_{episode}_s{step}.py",
            "problem_id": prob["problem_id"], "task_id": base.task_id, "episode": row["id"], "step": step,
            "tag": s.candidate.tag, "status": s.candidate.status, "failure": rec["failure"],
            "time_ms": s.candidate.time_ms, "best": step == row["best"]["step"], "module": base.module.name,
            "impl": base.module.impl, "gpu": base.gpu, "arch": base.arch, "code_sha256": digest}, s.candidate.code


def export_kernelbench(dirs: list, out: Path, best_only: bool = False, statuses: tuple = ("ok",),
                       force: bool = False) -> dict:
    """Write the export (staged in a hidden sibling, renamed into place); the index."""
    bad = [s for s in statuses if s not in STATUSES]
    if bad or not statuses:
        raise UsageError(f"--status: unknown status {', '.join(bad) or '(none)'}; choose from {', '.join(STATUSES)}")
    if best_only and statuses != ("ok",):
        raise UsageError("--best-only exports each episode's best candidate (ok); it takes no --status")
    check_tree_out(out, dirs, force)
    index = {"schema": SCHEMA, "best_only": best_only, "statuses": list(statuses), "problems": [], "solutions": []}

    def files():
        for kind, row, *src in collect(dirs, best_only, statuses):
            text = row.pop("source") if kind == "problem" else src[0]
            index["problems" if kind == "problem" else "solutions"].append(row)
            yield row["file"], text
        yield "index.json", json.dumps(index, indent=1) + "\n"

    write_tree(out, files(), EXPORT_NAMES)
    return index
