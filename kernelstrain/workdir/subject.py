"""Find one task in a data directory and what a workspace or an export needs of it: its
reference program, the candidate to start from, and the recorded figures.

A task comes from one of three places: an episode of `episodes.jsonl` or a session of
`sessions.jsonl` (the kernelinfer layout; its code re-rendered from the trace) (single op;
the candidate is the baseline or step N), a held-out task of `tasks_holdout*.jsonl` (its
baseline only), or a fused-task directory (`tasks_fused.jsonl`, else the unfiltered
`candidates_fused.jsonl`: a PyTorch program and no kernel at all).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..fused.dataset import CANDIDATES, TASKS, is_fused_dir
from ..ops import REGISTRY
from ..dataset import episode_source
from ..tasks import make_task
from ..reading import read_jsonl

HOLDOUT_GLOB = "tasks_holdout*.jsonl"


@dataclass(frozen=True)
class Candidate:
    """A kernel source with where it came from: `label` says it in words ('baseline
    warp_shuffle', 'step 7 (vectorized)'), status is the recorded one."""
    code: str
    label: str
    status: str
    time_ms: float | None
    episode: str | None = None
    step: int | None = None
    tag: str | None = None


@dataclass(frozen=True)
class Subject:
    """One task: kind 'single' (an op module's task) or 'fused' (a PyTorch program only)."""
    task_id: str
    kind: str
    split: str                     # train | combo | unseen_op | ... | fused
    reference: str                 # KernelBench-form program: Model, get_inputs, get_init_inputs
    dtype: str
    title: str
    desc: str
    module: object = None          # the OpModule (single ops)
    task: object = None            # its Task
    gpu: str | None = None
    arch: str | None = None
    candidate: Candidate | None = None
    baseline_ms: float | None = None
    best_ms: float | None = None
    eager_ms: float | None = None  # fused: the filter's measured eager / compiled times
    compiled_ms: float | None = None


def single(row: dict, split: str, candidate: Candidate, reference: str | None = None) -> Subject:
    """The Subject of an episode or held-out row."""
    module = REGISTRY.get(row.get("module"))
    if module is None:
        raise UsageError(f"task {row.get('task_id')}: unknown module {row.get('module')!r}")
    task = make_task(module, row["gpu"], row["dtype"], row["shape"])
    _check_trusted(row, candidate, reference)
    best = row.get("best") or {}
    if hasattr(module, "view"):         # a fused program's episode: the candidate is a whole KernelBench solution
        return Subject(task_id=row["task_id"], kind="fused", split=split, reference=module.reference(task),
                       dtype=row["dtype"], title=module.title, desc=row.get("desc") or module.desc, module=module,
                       task=task, gpu=row["gpu"], arch=row["arch"], candidate=candidate,
                       baseline_ms=row["baseline"].get("time_ms"), best_ms=best.get("time_ms"),
                       eager_ms=row.get("torch_eager_ms"), compiled_ms=row.get("torch_compile_ms"))
    return Subject(task_id=row["task_id"], kind="single", split=split, reference=reference or module.reference(task),
                   dtype=row["dtype"], title=module.title, desc=row.get("desc") or module.desc, module=module,
                   task=task, gpu=row["gpu"], arch=row["arch"], candidate=candidate,
                   baseline_ms=row["baseline"].get("time_ms"), best_ms=best.get("time_ms"))


def _check_trusted(row: dict, candidate: Candidate, reference: str | None) -> None:
    """The candidate and the reference written into files that run: kernelstrain's renders only."""
    from ..trusted import check_code, check_reference
    where = f"task {row.get('task_id')}"
    step = next((s for s in row.get("steps") or () if s.get("step") == candidate.step), None) if candidate.step else None
    check_code(row, step, candidate.code, where)
    if reference is not None:
        check_reference(row, reference, where)


def episode_candidate(row: dict, step: int | None) -> Candidate:
    """The baseline (step None or 0) or step N of an episode row."""
    if not step:
        b = row["baseline"]
        return Candidate(b["code"], f"baseline {b['tag']}", "ok", b.get("time_ms"), row["id"], 0, b["tag"])
    for s in row["steps"]:
        if s["step"] == step:
            return Candidate(s["code"], f"step {step} ({s['tag']})", s["status"], s.get("time_ms"), row["id"], step,
                             s["tag"])
    raise UsageError(f"episode {row['id']} has no step {step} (it has {len(row['steps'])} steps)")


def fused_subject(row: dict) -> Subject:
    from ..trusted import check_fused
    check_fused(row, f"fused task {row.get('id')}")
    title = re.search(r'class Model\(nn\.Module\):\s*"""(.*?)"""', row["source"], re.S)
    return Subject(task_id=row["id"], kind="fused", split="fused", reference=row["source"], dtype=row["dtype"],
                   title=title.group(1).strip().rstrip(".") if title else " -> ".join(row["ops"]),
                   desc=" -> ".join(row["ops"]), eager_ms=row.get("eager_ms"), compiled_ms=row.get("compiled_ms"))


def fused_rows(data: Path) -> list[dict]:
    path = data / TASKS if (data / TASKS).exists() else data / CANDIDATES
    return [row for _, row in read_jsonl(path)]


def find_subject(data: Path, task_id: str, step: int | None = None, episode: str | None = None) -> Subject:
    """The task `task_id` (or the episode of that id) of a dataset or fused-task directory."""
    if not data.is_dir():
        raise UsageError(f"{data}: not a directory")
    if is_fused_dir(data):
        if step or episode:
            raise UsageError("--step and --episode need a dataset with episodes; fused tasks have no candidates")
        for row in fused_rows(data):
            if row["id"] == task_id:
                return fused_subject(row)
        raise UsageError(f"{data}: no fused task {task_id!r}")
    episodes, _, as_episode = episode_source(data)
    if episodes.exists():
        for _, row in read_jsonl(episodes):
            if episode and row["id"] != episode:
                continue
            if row["task_id"] == task_id or row["id"] == task_id:
                row = as_episode(row)
                if step is None and REGISTRY.get(row["module"]) is not None and hasattr(REGISTRY[row["module"]], "view"):
                    step = row["best"]["step"]       # a fused episode's workspace starts from its best candidate
                return single(row, "train", episode_candidate(row, step))
        if episode:
            raise UsageError(f"{data}: no episode {episode!r} of task {task_id!r}")
    for path in sorted(data.glob(HOLDOUT_GLOB)):
        for _, row in read_jsonl(path):
            if row["task_id"] == task_id:
                if step:
                    raise UsageError(f"task {task_id} is held out ({row['split']}): it has a baseline only, no steps")
                b = row["baseline"]
                cand = Candidate(b["code"], f"baseline {b['tag']}", "ok", b.get("time_ms"), None, 0, b["tag"])
                return single(row, row["split"], cand, row.get("reference"))
    if not episodes.exists() and not any(data.glob(HOLDOUT_GLOB)):
        raise UsageError(f"{data}: no episodes.jsonl, sessions.jsonl, tasks_holdout*.jsonl or fused tasks "
                         "(not a dataset?)")
    raise UsageError(f"{data}: no task or episode {task_id!r}")
