"""Held-out task combos: everything needed to start an episode, no solutions."""
from __future__ import annotations

from pathlib import Path

from . import messages
from .episodes import dumps, task_fields
from .ops import REGISTRY
from .plan import Plan, seeded_rng, task_id
from .schema import SCHEMA
from .sim import measure, simulate
from .writers import FILES, StreamFile


def holdout_rows(plan: Plan):
    """One JSON line per held-out task, in task-key order."""
    for task in plan.holdout:
        module = REGISTRY[task.module]
        base = module.baseline_variant()
        code = module.render(base, base.defaults(), task)
        rng = seeded_rng(plan.profile.key, "holdout-baseline", task.key)
        time_ms = round(measure(simulate(module, base, base.defaults(), task).time_ms, rng), 6)
        reference = module.reference(task)
        yield dumps({
            "schema": SCHEMA["holdout"], "task_id": task_id(task), **task_fields(module, task),
            "prompt": messages.task_prompt(module, task, code, time_ms, reference),
            "system": messages.SYSTEM,
            "baseline": {"tag": base.tag, "code": code, "time_ms": time_ms},
            "reference": reference,
        })


def write_holdout(plan: Plan, out: Path) -> dict:
    """Write tasks_holdout.jsonl atomically; returns its file summary."""
    f = StreamFile(out / FILES["holdout"])
    try:
        for line in holdout_rows(plan):
            f.write(line)
    except BaseException:
        f.abort()
        raise
    f.commit()
    return f.summary()
