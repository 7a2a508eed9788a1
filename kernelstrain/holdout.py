"""Held-out task combos: everything needed to start an episode, no solutions."""
from __future__ import annotations

import os
from pathlib import Path

from . import feedback
from .episodes import SCHEMA, dumps, task_fields
from .errors import UsageError
from .ops import REGISTRY
from .plan import Plan, make_plan, seeded_rng, task_id
from .profiles import load_profile
from .sim import measure, simulate
from .writers import FILES, StreamFile, check_not_input, write_error


def holdout_rows(plan: Plan):
    """One JSON line per held-out task, in task-key order."""
    for task in plan.holdout:
        module = REGISTRY[task.module]
        base = module.variants[0]
        code = module.render(base, base.defaults(), task)
        rng = seeded_rng(plan.profile.key, "holdout-baseline", task.key)
        time_ms = round(measure(simulate(module, base, base.defaults(), task).time_ms, rng), 6)
        reference = module.reference(task)
        yield dumps({
            "schema": SCHEMA["holdout"], "task_id": task_id(task), **task_fields(module, task),
            "prompt": feedback.task_prompt(module, task, code, time_ms, reference),
            "system": feedback.SYSTEM,
            "baseline": {"tag": base.tag, "code": code, "time_ms": time_ms},
            "reference": reference,
        })


def write_holdout(plan: Plan, directory: Path, name: str = FILES["holdout"]) -> dict:
    """Write `directory/name` (a staging directory's file); returns its file summary."""
    f = StreamFile(directory / name)
    try:
        for line in holdout_rows(plan):
            f.write(line)
    finally:
        f.close()
    return f.summary()


def holdout_command(config: str, frac: float, seed: int, out: Path, force: bool = False) -> tuple[dict, int, Path]:
    """The `holdout` verb: write out/tasks_holdout.jsonl for a profile's combos, replacing an
    existing one only with --force; returns (file summary, combos, path)."""
    if not 0.0 <= frac < 1.0:
        raise UsageError(f"--frac must be in [0, 1), got {frac}")
    profile = load_profile(config)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    target = out / FILES["holdout"]
    check_not_input(target, [Path(profile.path)])
    if target.exists() and not force:
        what = "a dataset's held-out tasks" if (out / "stats.json").exists() else "a held-out task file"
        raise UsageError(f"{target} exists ({what}; use --force to replace it)")
    plan = make_plan(profile, 0, holdout_frac=frac, holdout_seed=seed)
    tmp_name = f".{FILES['holdout']}.tmp"
    try:
        out.mkdir(parents=True, exist_ok=True)
        summary = write_holdout(plan, out, tmp_name)
        os.replace(out / tmp_name, target)
    except OSError as e:
        (out / tmp_name).unlink(missing_ok=True)
        raise write_error(target, e) from None
    except BaseException:
        (out / tmp_name).unlink(missing_ok=True)
        raise
    return summary, len(plan.train) + len(plan.holdout), target
