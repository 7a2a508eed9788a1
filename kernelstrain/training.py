"""What trainers take as they are: the validation split, the prompt/completion form of the
step rows, and each chat row's figures for stats.json.

The validation split is grouped by task: a task's rows — its episode (session) record and its
chat rows — all go to the `.validation.jsonl` files or none do, decided by a hash of the task
id alone, so every worker and shard agrees without coordination. Step rows of one episode are
strongly correlated; a row-level split would leak.

>>> [is_validation(t, 0.5) for t in ("t-0", "t-1", "t-2", "t-3")]
[True, True, False, True]
"""
from __future__ import annotations

import hashlib
import heapq

from .messages import message_tokens
from .schema import PROMPT_COMPLETION_KEYS, SCHEMA
from .writers import SPLIT_CONFIGS, VALIDATION

# the file keys (writers.layout_files) of chat rows, whose figures stats.json reports
CHAT_CONFIGS = ("sessions", *(k for k in SPLIT_CONFIGS if k not in ("episodes", "sessions")))
CHAT_KEYS = (*CHAT_CONFIGS, *(k + VALIDATION for k in CHAT_CONFIGS))

def is_validation(task_id: str, frac: float) -> bool:
    """Whether a task's rows belong to the validation split (about `frac` of the tasks)."""
    h = int.from_bytes(hashlib.sha256(f"validation\0{task_id}".encode()).digest()[:8], "big")
    return h < frac * 2 ** 64


def plan_index(row_id: str) -> int:
    """The plan index an episode (session) id ends with.

    >>> plan_index("kernelstrain-s0-000042")
    42
    """
    return int(row_id.rsplit("-", 1)[1])


def in_plan_order(*record_streams):
    """Episode (session) rows of a record's split files (each in plan order) merged back into
    plan order, as generate produced them: what order-sensitive readers (the stats' float
    sums) consume."""
    return heapq.merge(*record_streams, key=lambda row: plan_index(row["id"]))


def prompt_completion(step_row: dict) -> dict:
    """A step row in TRL's conversational prompt/completion form: `prompt` the system and user
    messages, `completion` the assistant's candidate (role and content only)."""
    system, user, answer = ({"role": m["role"], "content": m["content"]} for m in step_row["messages"])
    values = {**step_row, "schema": SCHEMA["prompt_completion"], "prompt": [system, user], "completion": [answer]}
    return {k: values[k] for k in PROMPT_COMPLETION_KEYS}


def prompt_completion_rows(step_rows: list) -> list:
    """The prompt/completion rows of an episode: its weight-1 step rows only (a trainer without
    per-example weights must not learn failed or losing candidates)."""
    return [prompt_completion(r) for r in step_rows if r["weight"]]


def chat_figure(row: dict) -> tuple[int, int, int]:
    """(tokens under the budget rule, assistant targets, weight-1 targets) of a chat row."""
    msgs = row["messages"] if "messages" in row else row["prompt"] + row["completion"]
    answers = [m for m in msgs if m["role"] == "assistant"]
    return sum(map(message_tokens, msgs)), len(answers), sum(m.get("weight", 1) for m in answers)


def split_rows(rows: dict, task_id: str, frac: float) -> dict:
    """An episode's rows by file key (writers.STREAMED), those of a validation task's split
    configs moved to their validation keys."""
    if not is_validation(task_id, frac):
        return rows
    return {k + VALIDATION if k in SPLIT_CONFIGS else k: rs for k, rs in rows.items()}


def chat_settings(output) -> dict:
    """The profile's [output] settings that stats.json's chat figures are measured against."""
    return {"max_context_tokens": output.max_context_tokens, "validation_frac": output.validation_frac}
