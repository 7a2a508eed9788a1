"""Held-out tasks, one file per split: everything needed to start an episode (prompt,
baseline, reference program, entry signature), no solutions; and the split figures
stats.json and the card report."""
from __future__ import annotations

from pathlib import Path

from . import feedback
from .engine import Episode
from .episodes import SCHEMA, dumps, task_fields
from .ops import REGISTRY
from .plan import Plan, seeded_rng, task_id
from .writers import StreamFile

# split -> (datasets config, file name); combo keeps the seed card's `holdout` config.
SPLIT_FILES = {
    "combo": ("holdout", "tasks_holdout.jsonl"),
    "unseen_op": ("holdout_unseen_op", "tasks_holdout_unseen_op.jsonl"),
    "unseen_gpu": ("holdout_unseen_gpu", "tasks_holdout_unseen_gpu.jsonl"),
}
UNSEEN = {
    "combo": "task combos (module, gpu, dtype, shape); their modules and GPUs are in training",
    "unseen_op": "whole ops: no candidate, baseline or reference of these ops (either impl) in training",
    "unseen_gpu": "whole GPUs: no episode on these GPUs in training",
}


def holdout_rows(plan: Plan, split: str):
    """One JSON line per held-out task of a split, in task-key order. The baseline is the
    engine's: the first rung this GPU runs, at its defaults, measured once with noise."""
    for task in plan.splits[split]:
        module = REGISTRY[task.module]
        start = Episode(module, task, seeded_rng(plan.profile.key, "holdout-baseline", task.key), 0, 0.0, 0.0)
        code, time_ms = start.baseline_code, start.baseline_ms
        reference = module.reference(task)
        yield dumps({
            "schema": SCHEMA["holdout"], "task_id": task_id(task), "split": split, **task_fields(module, task),
            "prompt": feedback.task_prompt(module, task, code, time_ms, reference),
            "system": feedback.SYSTEM,
            "baseline": {"tag": start.best.variant.tag, "code": code, "time_ms": time_ms},
            "reference": reference,
        })


def write_holdout(plan: Plan, out: Path) -> dict:
    """Write every split's file atomically; returns {file name: summary}."""
    summaries = {}
    for split in plan.splits:
        f = StreamFile(out / SPLIT_FILES[split][1])
        try:
            for line in holdout_rows(plan, split):
                f.write(line)
        except BaseException:
            f.abort()
            raise
        f.commit()
        summaries[f.final.name] = f.summary()
    return summaries


def split_figures(plan: Plan) -> dict:
    """stats.json's `holdout` block without contamination: each split's file, config, size
    and what it holds out, and which modules are in training and which are held out."""
    h = plan.profile.holdout
    train = sorted({t.module for t in plan.train})
    splits = {}
    for name, tasks in plan.splits.items():
        config, file = SPLIT_FILES[name]
        entry = {"config": config, "file": file, "tasks": len(tasks), "unseen": UNSEEN[name]}
        if name == "combo":
            entry["frac"] = h.frac
        if name == "unseen_op":
            entry["ops"] = list(h.unseen_ops)
        if name == "unseen_gpu":
            entry["gpus"] = list(h.unseen_gpus)
        entry["modules"] = sorted({t.module for t in tasks})
        splits[name] = entry
    all_modules = {t.module for tasks in (plan.train, *plan.splits.values()) for t in tasks}
    return {"splits": splits, "modules_in_training": train,
            "modules_held_out": sorted(all_modules - set(train)),
            "gpus_in_training": sorted({t.gpu.name for t in plan.train})}


def with_contamination(figures: dict, data: Path) -> dict:
    """The holdout block with each split's contamination measured on the dataset in `data`."""
    from .contamination import method, measure
    found = measure(data, {name: s["file"] for name, s in figures["splits"].items()})
    splits = {name: {**s, "contamination": found["splits"][name]} for name, s in figures["splits"].items()}
    return {**figures, "splits": splits, "contamination_method": method(found["training_candidates"])}
