"""What a directory the product wrote is, when it is not a dataset: the readers of datasets
(validate, stats, qa, merge, verify) name it and the command that reads it instead of
answering "not a kernelstrain stats file".

>>> what_is(Path("/nonexistent")) is None
True
"""
from __future__ import annotations

import json
from pathlib import Path

from .schema import SCHEMA
from .writers import SPLIT_FILES


def _schema(path: Path) -> str | None:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return value.get("schema") if isinstance(value, dict) else None


def what_is(data: Path) -> str | None:
    """A sentence naming the kind of non-dataset directory `data` is and what reads it; None
    when it is none of the product's other outputs."""
    if not data.is_dir():
        return None
    if _schema(data / "stats.json") == SCHEMA["fused_stats"]:
        return (f"{data} is a fused-task directory (written by `kernelstrain tasks fused` / `tasks filter`), "
                f"not a dataset: `kernelstrain stats {data}` summarizes it, `kernelstrain tasks filter {data}` "
                "checks its candidates")
    if _schema(data / "index.json") == SCHEMA["kernelbench_export"]:
        return (f"{data} is a KernelBench export (written by `kernelstrain export kernelbench`), not a dataset: "
                f"`python3 scripts/kb_eval.py {data}` evaluates it")
    if (data / "task.json").is_file() and (data / "model.py").is_file() and (data / "SKILL.md").is_file():
        return (f"{data} is an agent workspace (written by `kernelstrain workdir`), not a dataset: "
                f"its own build.py, verify.py and profile.py check it (`python3 {data / 'verify.py'}`)")
    if (data / "stats.json").exists() or any((data / name).exists() for name in ("episodes.jsonl", "sessions.jsonl")):
        return None      # a dataset, perhaps a damaged one: its readers say what is wrong with it
    staging = data.parent / f".{data.name}.kernelstrain-staging"
    if staging.is_dir():
        return (f"{data} holds an interrupted run (its files are in {staging.name}): finish it with the same "
                "`kernelstrain generate` command and --resume")
    held = [file for _, file in SPLIT_FILES.values() if (data / file).is_file()]
    if held:
        return (f"{data} holds only held-out task files ({', '.join(held)}; written by `kernelstrain holdout`), "
                "not a dataset: `validate` checks held-out files inside the dataset `generate` writes them into")
    shards = sorted(p.name for p in data.iterdir() if p.is_dir() and (p / "stats.json").is_file())
    if shards:
        return (f"{data} is not a dataset but holds {len(shards)} director{'y' if len(shards) == 1 else 'ies'} "
                f"with a stats.json ({', '.join(shards[:3])}{', ...' if len(shards) > 3 else ''}): give one of them "
                f"(shards: `kernelstrain merge {data}/* --out DIR` joins them)")
    return None
