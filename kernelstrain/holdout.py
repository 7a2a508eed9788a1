"""Held-out tasks, one file per split: everything needed to start an episode (prompt,
baseline, reference program, entry signature), no solutions; and the split figures
stats.json and the card report."""
from __future__ import annotations

import os
from pathlib import Path

from . import messages
from .episodes import baseline_facts, dumps, task_fields
from .errors import UsageError
from .ops import REGISTRY
from .plan import Plan, make_plan, task_id
from .rng import seeded_rng
from .profiles import load_profile
from .schema import SCHEMA
from .engine import baseline_rung
from .sim import measure, simulate
from .safety import check_output, remove_quietly
from .writers import SPLIT_FILES, StreamFile, write_error

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
        base = baseline_rung(module, task, plan.profile.search)
        code = module.render(base, base.defaults(), task)
        rng = seeded_rng(plan.profile.key, "holdout-baseline", task.key)
        time_ms = round(measure(simulate(module, base, base.defaults(), task).time_ms, rng), 6)
        reference = module.reference(task)
        yield dumps({
            "schema": SCHEMA["holdout"], "task_id": task_id(task), "split": split, **task_fields(module, task),
            "prompt": messages.task_prompt(module, task, code, time_ms, reference,
                                           baseline_facts(module, task, base.tag, base.defaults(), time_ms)),
            "system": messages.SYSTEM,
            "baseline": {"tag": base.tag, "code": code, "time_ms": time_ms},
            "reference": reference,
        })


def write_holdout(plan: Plan, directory: Path, temporary: bool = False, lines: dict | None = None) -> dict:
    """Write every split's file into `directory` (a staging directory, or with `temporary`
    under the hidden name `_temporary()` gives, beside the target); returns {file name: summary}.
    `lines`: {split: its holdout_rows}, where the caller has them already."""
    summaries = {}
    for split in plan.splits:
        name = SPLIT_FILES[split][1]
        f = StreamFile(_temporary(directory / name) if temporary else directory / name)
        try:
            for line in lines[split] if lines is not None else holdout_rows(plan, split):
                f.write(line)
        finally:
            f.close()
        summaries[name] = f.summary()
    return summaries


def holdout_command(config: str, frac: float | None, seed: int | None, out: Path,
                    force: bool = False) -> tuple[dict, int, list]:
    """The `holdout` verb: write every split file of a profile into `out` (frac and seed: the
    profile's own when None, so the splits are those generate applies), replacing existing
    ones only with --force, all renamed into place once all are complete; returns
    (summaries by file name, combos, [(split, path)])."""
    if frac is not None and not 0.0 <= frac < 1.0:
        raise UsageError(f"--frac must be in [0, 1), got {frac}")
    profile = load_profile(config)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} exists and is not a directory")
    plan = make_plan(profile, 0, holdout_frac=frac, holdout_seed=seed)
    targets = [(split, out / SPLIT_FILES[split][1]) for split in plan.splits]
    for _, target in targets:
        check_output(target, [Path(profile.path)])
        if target.exists() and not force:
            what = "a dataset's held-out tasks" if (out / "stats.json").exists() else "a held-out task file"
            raise UsageError(f"{target} exists ({what}; use --force to replace it)")
    created = not out.exists()
    try:
        out.mkdir(parents=True, exist_ok=True)
        summaries = write_holdout(plan, out, temporary=True)
        for _, target in targets:
            os.replace(_temporary(target), target)
    except OSError as e:
        _remove_temporaries(targets)
        if created:
            remove_quietly(out)      # a directory this run made holds nothing complete
        raise write_error(out, e) from None
    except BaseException:
        _remove_temporaries(targets)
        raise
    combos = len(plan.train) + len({t.key for tasks in plan.splits.values() for t in tasks})
    return summaries, combos, targets


def _temporary(path: Path) -> Path:
    return path.with_name(f".{path.name}.tmp")


def _remove_temporaries(targets: list) -> None:
    for _, target in targets:
        _temporary(target).unlink(missing_ok=True)


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
    held = sorted({t.module for tasks in plan.splits.values() for t in tasks} - set(train))
    train_ops = sorted({_op(m) for m in train})
    return {"splits": splits, "modules_in_training": train, "modules_held_out": held,
            "ops_in_training": train_ops, "ops_held_out": sorted({_op(m) for m in held} - set(train_ops)),
            "gpus_in_training": sorted({t.gpu.name for t in plan.train})}


def _op(module: str) -> str:
    """A module's op by its name; a fused program's without building its module (fused.module.fused_op: a fused
    run's plan holds ~6,000, which the plan itself no longer builds: fused/tasks.fused_tasks)."""
    from .fused.module import fused_op
    return fused_op(module) or REGISTRY[module].op


def with_contamination(figures: dict, data: Path, layout, found: dict | None = None) -> dict:
    """The holdout block with each split's contamination measured on the dataset in `data` of
    `layout` (or `found`: contamination.measure's result, already measured on it)."""
    from .contamination import method, measure
    if found is None:
        found = measure(data, {name: s["file"] for name, s in figures["splits"].items()}, layout)
    splits = {name: {**s, "contamination": found["splits"][name]} for name, s in figures["splits"].items()}
    return {**figures, "splits": splits, "contamination_method": method(found["training_candidates"])}


def card_configs(stats: dict) -> list[tuple[str, str]]:
    """(config, file) of each holdout split of a dataset that holds tasks, split `test` on the card.
    An empty split is left off: `datasets` refuses a config whose only split has no rows ("Instruction
    'test' corresponds to no data"), so a card declaring it would break `load_dataset(dir, config)`."""
    splits = stats.get("holdout", {}).get("splits") or {"combo": {"config": "holdout", "file": SPLIT_FILES["combo"][1]}}
    files = stats.get("files", {})
    return [(s["config"], s["file"]) for s in splits.values() if files.get(s["file"], {}).get("rows", 1)]


def card_usage(declared: list) -> str:
    """The card's usage line for the holdout config, where the card declares it ('' elsewhere)."""
    return 'held = load_dataset("path/to/this/dir", "holdout", split="test")\n' \
        if any(name == "holdout" for name, _ in declared) else ""


def card_modules(stats: dict) -> str:
    """The card's op-module figure: all modules of the dataset, and how they split."""
    h = stats.get("holdout")
    if not h or not h["modules_held_out"]:
        return f"{len(stats['by_module'])} ({len(stats['by_op'])} ops)"
    train, held = h["modules_in_training"], h["modules_held_out"]
    ops = len(h["ops_in_training"]) + len(h["ops_held_out"])
    return (f"{len(train) + len(held)} ({ops} ops): {len(train)} modules ({len(h['ops_in_training'])} ops) "
            f"in training, {len(held)} ({len(h['ops_held_out'])} ops) held out as unseen ops")


def _coverage(stats: dict) -> str:
    """What the training episodes cover, beside what the training split offers (a run of fewer
    episodes than the profile's tasks covers fewer modules: a 60-episode fused run 60 of 6,000)."""
    offered, covered = len(stats["holdout"]["modules_in_training"]), len(stats.get("by_module") or {})
    if covered and covered != offered:
        return f"The episodes cover {covered} op modules (of the {offered} the training split offers)"
    return f"Training covers {offered} op modules"


def card_section(stats: dict) -> str:
    """The body of the card's splits section: each split, what it holds out, and its contamination."""
    h = stats.get("holdout")
    if not h:
        return ""
    m = h["contamination_method"]
    rows = []
    for name, s in h["splits"].items():
        c = s["contamination"]
        n, ex, ng = c["tasks"], c["exact"], c["ngram"]
        rows.append(f"| `{s['config']}` ({name}) | {n} | {ex['solution']} / {ex['baseline']} / {ex['reference']} | "
                    f"{ng['solution_ngram']['max']:.2f} ({ng['solution_ngram']['mean']:.2f}) | "
                    f"{ng['solution_ngram_specific']['max']:.2f} ({ng['solution_ngram_specific']['mean']:.2f}) | "
                    f"{ng['baseline_ngram_specific']['max']:.2f} ({ng['baseline_ngram_specific']['mean']:.2f}) |")
    held = ", ".join(f"`{x}`" for x in h["modules_held_out"]) or "none"
    unseen = "\n".join(f"- `{s['config']}` (`{s['file']}`): {s['unseen']}"
                       + (f" — {', '.join(s['ops'])}" if "ops" in s else "")
                       + (f" — {', '.join(s['gpus'])}" if "gpus" in s else "")
                       + ("; none held out here: the file is empty (no config declared)" if not s["contamination"]["tasks"]
                          else "") + "."
                       for s in h["splits"].values())
    return f"""Held-out tasks carry the prompt, baseline, reference program and entry signature, and no
solution. Each split holds out something different:

{unseen}

{_coverage(stats)}; held out of training entirely: {held}.

| config (split) | tasks | exact matches in training: solution / baseline / reference | {m['ngram']}-gram overlap of solutions, max (mean) | kernel-specific, max (mean) | baselines, kernel-specific, max (mean) |
|---|---|---|---|---|---|
{chr(10).join(rows)}

Exact: {m['normalization']}. Solution: {m['solution']}. Training: {m['training']}
({m['training_candidates']:,} distinct candidates). Overlap: {m['ngram_overlap']}; kernel-specific:
{m['specific']}. The combo split holds out shapes and dtypes of modules that are in training,
so its solutions largely appear there: it measures recall of variants, not generalization;
the unseen splits measure generalization.
"""
